import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Testing

/// Nobody else gets in; no handler can hurt the daemon. Each test runs against the real daemon.
extension Integration {
@Suite(.serialized) struct HardeningTests {
    /// Runs Python as user nobody (65534) connecting to `path`; prints what happened.
    func connectAsNobody(_ path: String) throws -> String {
        let script = """
            import os, socket, sys
            os.setgroups([]); os.setgid(65534); os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            try:
                s.connect(sys.argv[1])
            except OSError as e:
                print("refused by the kernel: errno", e.errno); sys.exit(0)
            try:
                s.sendall(b"\\x02\\x00\\x00\\x00\\x01\\x00\\x00\\x00\\x01\\x00\\x00\\x00{}")
                print("closed by broadcastd" if s.recv(100) == b"" else "answered")
            except (BrokenPipeError, ConnectionResetError):
                print("closed by broadcastd")
            """
        let result = try runTool("/usr/bin/env", ["python3", "-c", script, path])
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func otherUsersAreKeptOutByTheSocketsModesAndByThePeerCheck() throws {
        let daemon = try DaemonHarness()
        let folder = (daemon.socketPath as NSString).deletingLastPathComponent
        func mode(_ path: String) throws -> Int { (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1 }
        #expect(try mode(folder) == 0o700 && mode(daemon.socketPath) == 0o600)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: daemon.runtime)
        #expect(try connectAsNobody(daemon.socketPath) == "refused by the kernel: errno 13")
        // With the modes loosened (a socket chosen with --socket in a shared place, say), broadcastd itself refuses.
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder)
        try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: daemon.socketPath)
        #expect(try connectAsNobody(daemon.socketPath) == "closed by broadcastd")
        #expect(daemon.log.contains("refused a connection from pid") && daemon.log.contains("user 65534: only user 0"), "\(daemon.log)")
        #expect(try daemon.controller().status().state == .idle)
        try daemon.stop()
    }

    @Test func aSlowHandlerLosesFramesAndAHungOneFinishesTheBroadcast() throws {
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360", "--fps", "30",
                                        "--handler-timeout", "2"])
        let controller = try daemon.subscribedController()
        // 200 ms in every callback: frames are dropped (and counted) on time, the broadcast goes on,
        // and what is queued for the handler stays bounded (its heap does not grow with time).
        let slow = try daemon.start(handler: "slow", url: daemon.summaryPath("slow"), setupInfo: ["sleep": "0.2"], maxDuration: 8.5, on: controller)
        try daemon.awaitState(controller, .live)
        // Its queue fills to its limit within a few seconds; from then on nothing may grow (a buffer that
        // kept what had been sent grew by the audio's 0.75 MB/s here).
        usleep(4_000_000)
        let early = Self.anonymousKiB(daemon.pid)
        usleep(4_000_000)
        let late = Self.anonymousKiB(daemon.pid)
        #expect(late - early < 1536, "broadcastd's heap grew from \(early) KiB to \(late) KiB in 4 s behind a slow handler")
        let slowError = try daemon.awaitFinish(controller, slow, timeout: 20)
        #expect(slowError == nil, "a slow handler is not a hung one: \(String(describing: slowError))")
        let counters = try #require(try controller.status().streams?["video"])
        #expect(counters.dropped > 50 && counters.delivered >= 10, "\(counters)")
        #expect(try controller.status().daemonMemory ?? .max < 50 << 20)

        // Stuck for good in its first callback: it neither reads nor releases its slot.
        let stuck = try daemon.start(handler: "slow", url: daemon.summaryPath("stuck"), setupInfo: ["sleep": "1000"], maxDuration: 60, on: controller)
        try daemon.awaitState(controller, .live)
        let started = Date()
        let error = try daemon.awaitFinish(controller, stuck, timeout: 20)
        #expect(error?.code == .handlerFailed && error?.message.contains("handler 'slow' hung:") == true, "\(String(describing: error))")
        // 2 s to notice, at most 5 s for it to finish (it cannot: it is stuck), then SIGTERM.
        #expect(Date().timeIntervalSince(started) < 10, "finished after \(Date().timeIntervalSince(started)) s with a 2 s limit")
        daemon.expectNoChildren()
        // The daemon carries on.
        let next = try daemon.start(handler: "inspect", url: daemon.summaryPath("after"), maxDuration: 0.5, on: controller)
        #expect(try daemon.awaitFinish(controller, next) == nil)
        try daemon.stop()
    }

    static func anonymousKiB(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("RssAnon:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// What the daemon holds: descriptors, memfd mappings, memfds among its descriptors.
    func holdings(_ daemon: DaemonHarness) -> (fds: Int, mappings: Int, memfds: Int) {
        let maps = (try? String(contentsOfFile: "/proc/\(daemon.pid)/maps", encoding: .utf8)) ?? ""
        let fdDirectory = "/proc/\(daemon.pid)/fd"
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: fdDirectory)) ?? []
        let memfds = fds.filter { ((try? FileManager.default.destinationOfSymbolicLink(atPath: fdDirectory + "/" + $0)) ?? "").hasPrefix("/memfd:") }
        return (fds.count, maps.split(separator: "\n").filter { $0.contains("/memfd:") }.count, memfds.count)
    }

    @Test func nothingLeaksAcrossAHundredBroadcasts() throws {
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180", "--fps", "30"])
        let controller = try daemon.subscribedController()
        func cycle(_ n: Int) throws {
            let id = try daemon.start(handler: "inspect", url: daemon.summaryPath("cycle"), maxDuration: 0.1, on: controller)
            let error = try daemon.awaitFinish(controller, id)
            #expect(error == nil, "broadcast \(n): \(String(describing: error))")
        }
        try cycle(0)
        daemon.expectNoChildren()
        let before = holdings(daemon)
        for n in 1...100 { try cycle(n) }
        daemon.expectNoChildren()
        let after = holdings(daemon)
        #expect(after.fds == before.fds && after.mappings == before.mappings && after.memfds == before.memfds,
                "after 100 broadcasts: \(after) (after the first: \(before))")
        #expect(before.memfds == 0 && before.mappings == 0, "a finished broadcast's pool is freed: \(before)")
        try daemon.stop()
    }

    @Test func descriptorsFromAPeerAreRefusedAndClosed() throws {
        let daemon = try DaemonHarness()
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        let peer = try PeerConnection.connect(path: daemon.socketPath)
        let hello = Message.json(.hello, seq: 1, Hello(role: .controller, client: "fd-sender"))
        var bytes: [UInt8] = []
        Message.appendHeader(to: &bytes, opcode: .hello, seq: 1, payloadSize: hello.payload.count, descriptorCount: 1)
        bytes += hello.payload
        _ = try UnixSocket.send(peer.socket, bytes, from: 0, descriptors: [ends[1]])
        close(ends[1])
        let reply = try peer.receive()
        #expect(reply.opcode == .error)
        #expect(try reply.decode(BroadcastError.self).message.contains("came with 1 descriptor(s); peers send none"))
        #expect(throws: ProtocolError.closed) { try peer.receive() }
        // broadcastd closed its copy too: the pipe's only writer is gone, so reading it ends.
        var pollfd = Glibc.pollfd(fd: ends[0], events: Int16(POLLIN), revents: 0)
        #expect(poll(&pollfd, 1, 2000) == 1 && read(ends[0], &bytes, 1) == 0, "broadcastd kept the descriptor")
        close(ends[0])
        #expect(try daemon.controller().status().state == .idle)
        try daemon.stop()
    }

    @Test func aHandlerCannotResizeOrWriteTheFramePool() throws {
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360", "--fps", "30"])
        let controller = try daemon.subscribedController()
        let summary = daemon.summaryPath("hostile")
        let id = try daemon.start(handler: "hostile", url: "file://" + summary, maxDuration: 2, on: controller)
        #expect(try daemon.awaitFinish(controller, id) == nil)
        let attacks = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: summary + ".attacks.json"))) as? [String: String]
        let names = ["shrink", "grow", "mapWritable", "reopenAndMapWritable", "reopenAndWrite", "reopenAndShrink"]
        #expect(Set(attacks?.keys.map { $0 } ?? []) == Set(names), "\(String(describing: attacks))")
        for name in names {
            #expect(attacks?[name] != nil && attacks?[name] != "succeeded", "\(name): \(attacks?[name] ?? "not tried")")
        }
        // The daemon captured and delivered all along, and serves the next broadcast.
        let counts = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: summary))) as? [String: Any]
        let video = (counts?["counts"] as? [String: Int])?["video"] ?? 0
        #expect(video >= 55, "\(video) frames in 2 s at 30 fps")
        let next = try daemon.start(handler: "inspect", url: daemon.summaryPath("after"), maxDuration: 0.5, on: controller)
        #expect(try daemon.awaitFinish(controller, next) == nil)
        try daemon.stop()
    }
}
}
