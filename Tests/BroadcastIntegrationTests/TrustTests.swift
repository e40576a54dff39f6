import BroadcastClient
import BroadcastCore
import Foundation
import Testing

/// What broadcastd and its programs take on trust, and no longer do: whatever sits in a handler directory,
/// whoever answers on the socket.
extension Integration {
    @Suite(.serialized) struct TrustTests {
        @Test func aFIFOOrADeviceInAHandlerDirectoryIsSkippedWithoutBlockingTheDaemon() throws {
            let scratch = FileManager.default.temporaryDirectory
                .appendingPathComponent("fifo-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            #expect(mkfifo(scratch + "/aaa-fifo.json", 0o600) == 0)
            try FileManager.default.createSymbolicLink(atPath: scratch + "/zero.json", withDestinationPath: "/dev/zero")
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180", "--handlers-dir", scratch])
            defer { _ = try? daemon.stop() }

            let asked = Date()
            let status = try daemon.tool("broadcastctl", ["status"], timeout: 10)
            #expect(
                status.status == 0 && status.stdout.contains("idle"), "\(status.stdout)\(status.stderr)\n\(daemon.log)")
            #expect(Date().timeIntervalSince(asked) < 2, "status took \(Date().timeIntervalSince(asked)) s")

            let started = Date()
            let run = try daemon.tool(
                "broadcastctl",
                [
                    "start", "--handler", "inspect", "--url", daemon.summaryPath("fifo"),
                    "--duration", "0.5", "--wait",
                ], timeout: 15)
            #expect(run.status == 0, "\(run.stdout)\(run.stderr)\n\(daemon.log)")
            #expect(
                Date().timeIntervalSince(started) < 5, "a 0.5 s broadcast took \(Date().timeIntervalSince(started)) s")
            #expect(try InspectSummary.load(daemon.summaryPath("fifo")).streams["video"]?.count ?? 0 > 0)
            #expect(
                daemon.log.contains("aaa-fifo.json: not a regular file (a FIFO); a manifest is a regular file"),
                "\(daemon.log)")
            #expect(daemon.log.contains("zero.json: not a regular file (a character device)"), "\(daemon.log)")
            try daemon.stop()
        }

        @Test func broadcastctlAndSetupRefuseAServerOfAnotherUserAndSendItNothing() throws {
            // A shared place any user can write to, where another user's program bound the socket first.
            let scratch = FileManager.default.temporaryDirectory
                .appendingPathComponent("shared-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(
                atPath: scratch, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o777])
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            let path = scratch + "/broadcastd.sock"
            let impostor = try ImpostorServer(path: path, connections: 2, scratch: scratch)
            defer { if impostor.process.isRunning { kill(impostor.process.processIdentifier, SIGKILL) } }

            let status = try runTool(Paths.binary("broadcastctl"), ["status", "--socket", path], timeout: 20)
            #expect(status.status == 69, "\(status.stdout)\(status.stderr)")
            let refusal = "broadcastctl: refusing to talk to what listens on \(path): it is user 65534's program (pid"
            #expect(status.stderr.contains(refusal), "\(status.stderr)")
            let setup = try runTool(
                Paths.binary("broadcast-setup"),
                [
                    "--non-interactive", "--url", "rtmp://example.invalid/live",
                    "--set", "key=sekrit-stream-key", "--socket", path,
                ], timeout: 20)
            // 69, as broadcastctl says it (EX_UNAVAILABLE: no broadcastd of ours to talk to).
            #expect(setup.status == 69, "\(setup.stdout)\(setup.stderr)")
            #expect(setup.stderr.contains("broadcast-setup: refusing to talk to what listens on"), "\(setup.stderr)")

            let seen = impostor.finish()
            #expect(seen.contains("served 2 connections, 0 bytes"), "the impostor was sent:\n\(seen)")
            #expect(!seen.contains("sekrit"), "the stream key reached another user's program:\n\(seen)")
        }
    }
}

/// A program of user nobody (65534) posing as broadcastd on `path`: it answers HELLO with WELCOME and a setup
/// request with a handler that asks for a secret `key`, and prints every byte it is sent. It stops after
/// `connections` connections or 30 s, whichever comes first.
final class ImpostorServer {
    let process = Process()
    let outputPath: String

    init(path: String, connections: Int, scratch: String) throws {
        outputPath = scratch + "/impostor.out"
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        let script = """
            import json, os, socket, struct, sys, time
            os.setgroups([]); os.setgid(65534); os.setuid(65534)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(sys.argv[1]); listener.listen(8); listener.settimeout(1)
            def frame(opcode, seq, body):
                payload = json.dumps(body).encode()
                return struct.pack("<IHHI", len(payload), opcode, 0, seq) + payload
            manifest = {"name": "impostor", "displayName": "Impostor", "exec": "x", "url": {"prompt": "URL"},
                        "setupFields": [{"name": "key", "prompt": "Stream key", "secret": True}]}
            replies = {0x0001: {"protocol": 1, "server": "broadcastd 0.1.0", "maxPayload": 1048576,
                                "maxDescriptors": 4},
                       0x0200: {"broadcast": 1, "handler": manifest}, 0x0202: {}, 0x0106: {"state": "idle"}}
            reply_opcode = {0x0001: 0x0002, 0x0200: 0x0201, 0x0202: 0x0003, 0x0106: 0x0107}
            served, total, deadline = 0, 0, time.time() + 30
            while served < int(sys.argv[2]) and time.time() < deadline:
                try:
                    conn, _ = listener.accept()
                except socket.timeout:
                    continue
                served += 1
                conn.settimeout(3)
                received = b""
                while True:
                    try:
                        chunk = conn.recv(65536)
                    except (socket.timeout, ConnectionResetError):
                        break
                    if not chunk:
                        break
                    received += chunk
                    while len(received) >= 12:
                        size, opcode, _, seq = struct.unpack("<IHHI", received[:12])
                        if len(received) < 12 + size:
                            break
                        total += 12 + size
                        print("connection %d: opcode 0x%04x: %r" % (served, opcode, received[12:12 + size]), flush=True)
                        received = received[12 + size:]
                        if opcode in replies:
                            conn.sendall(frame(reply_opcode[opcode], seq, replies[opcode]))
                total += len(received)
                conn.close()
            print("served %d connections, %d bytes" % (served, total), flush=True)
            """
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, path, String(connections)]
        process.standardOutput = FileHandle(forWritingAtPath: outputPath)
        process.standardError = FileHandle(forWritingAtPath: outputPath)
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: path) && process.isRunning && Date() < deadline { usleep(10_000) }
        guard FileManager.default.fileExists(atPath: path) else {
            throw HarnessError("the impostor did not listen on \(path): \(output)")
        }
    }

    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// Waits for it to finish (it ends by itself), then returns what it printed.
    func finish() -> String {
        let deadline = Date().addingTimeInterval(35)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return output
    }
}
