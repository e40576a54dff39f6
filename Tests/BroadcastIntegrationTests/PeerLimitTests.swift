import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Testing

/// What a hostile controller or handler could still do to broadcastd (the second hardening round):
/// each test runs the attack against a real daemon and measures what it cost.
extension Integration {
    @Suite(.serialized) struct PeerLimitTests {
        /// Runs Tests/fixtures/peer_attacks.py; its one line of JSON.
        func attack(_ arguments: [String], timeout: TimeInterval = 60) throws -> [String: Any] {
            let result = try runTool(
                "/usr/bin/env", ["python3", Paths.root + "/Tests/fixtures/peer_attacks.py"] + arguments,
                timeout: timeout)
            #expect(result.status == 0, "\(result.stderr)")
            return (try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
        }

        /// CPU time the process has used, in seconds.
        static func cpuSeconds(_ pid: Int32) -> Double {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return 0 }
            let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
            return (Double(fields[11]) ?? 0) / 100 + (Double(fields[12]) ?? 0) / 100
        }

        static func statusKiB(_ pid: Int32, _ key: String) -> Int {
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix(key + ":") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }

        @Test func descriptorsSmuggledPastTheHeaderAreClosedAndThePeerDropped() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360", "--fps", "30"])
            let controller = try daemon.subscribedController()
            let before = daemon.openDescriptors()
            // 300 controllers, each with three descriptors its header does not declare: 900 kept would have
            // reached the descriptor limit of many systems.
            let result = try attack(["smuggle", daemon.socketPath, "300"])
            #expect(result["closed"] as? Int == 300, "\(result)")
            #expect(
                result["errors"] as? [String] == ["3 descriptor(s) arrived that no message header declared"],
                "\(result)")
            #expect(
                daemon.openDescriptors() == before,
                "broadcastd holds \(daemon.openDescriptors()) descriptors, \(before) before")
            // The same from a handler: its broadcast ends with the reason, and nothing is kept.
            let id = try daemon.start(
                handler: "hostile", url: daemon.summaryPath("smuggle"), setupInfo: ["attack": "smuggle"],
                maxDuration: 10, on: controller)
            let error = try daemon.awaitFinish(controller, id)
            #expect(
                error?.message.contains("was disconnected: 3 descriptor(s) arrived that no message header declared")
                    == true, "\(String(describing: error))")
            daemon.expectNoChildren()
            #expect(daemon.openDescriptors() == before, "after the handler: \(daemon.descriptorTargets())")
            let next = try daemon.start(
                handler: "inspect", url: daemon.summaryPath("after"), maxDuration: 0.5, on: controller)
            #expect(try daemon.awaitFinish(controller, next) == nil)
            try daemon.stop()
        }

        @Test func outOfDescriptorsTheListenerRestsInsteadOfSpinning() throws {
            // 40 descriptors: the daemon's own and a few connections; the rest of 60 wait in the backlog.
            let daemon = try DaemonHarness(
                ["--source", "synthetic", "--size", "320x180"], launcher: ["/usr/bin/prlimit", "--nofile=40:40"])
            let controller = try daemon.controller()
            var peers: [Descriptor] = []
            for _ in 0..<60 { peers.append(try UnixSocket.connect(path: daemon.socketPath)) }
            usleep(300_000)
            let cpu = Self.cpuSeconds(daemon.pid)
            usleep(2_000_000)
            let spent = Self.cpuSeconds(daemon.pid) - cpu
            #expect(spent < 0.3, "broadcastd used \(spent) s of CPU in 2 s while out of descriptors")
            let warnings = daemon.log.components(separatedBy: "accept failed").count - 1
            #expect(warnings >= 1 && warnings <= 2, "\(warnings) 'accept failed' lines in 2.3 s")
            #expect(daemon.log.contains("not accepting connections for 0.25 s"), "\(daemon.log.suffix(2000))")
            // The controller already connected is answered all along, and told why no handler can be found;
            // once descriptors are free, newcomers are answered too.
            #expect(try controller.status().state == .idle)
            let refusal = #expect(throws: ProtocolError.self) {
                try controller.start(handler: "inspect", maxDuration: 1)
            }
            #expect(
                refusal?.refusal?.message.contains("cannot read") == true
                    && refusal?.refusal?.message.contains("Too many open files") == true,
                "\(String(describing: refusal))")
            for peer in peers { peer.close() }
            let deadline = Date().addingTimeInterval(5)
            var admitted = false
            while !admitted && Date() < deadline {
                admitted = (try? daemon.controller().status()) != nil
                if !admitted { usleep(100_000) }
            }
            #expect(admitted, "no controller was let in once descriptors were free")
            try daemon.stop()
        }

        @Test func deeplyNestedJSONIsRefusedWithoutStoppingTheLoop() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360", "--fps", "30"])
            let controller = try daemon.subscribedController()
            let reply = try attack(["nested", daemon.socketPath])
            #expect(
                (reply["reply"] as? String)?.contains("malformed START: JSON nested deeper than 32 levels") == true,
                "\(reply)")
            #expect((reply["seconds"] as? Double ?? 99) < 0.2, "\(reply)")
            // From a handler: 20 results nested 500 deep, while the loop is timed.
            let id = try daemon.start(
                handler: "hostile", url: daemon.summaryPath("nested"), setupInfo: ["attack": "nested"], maxDuration: 10,
                on: controller)
            try daemon.awaitState(controller, .live)
            let slowest = try slowestStatus(controller, seconds: 2, every: 20_000)
            #expect(slowest < 0.2, "a status request took \(slowest) s")
            let error = try daemon.awaitFinish(controller, id)
            #expect(
                error?.message.contains("malformed SET_RESULT: JSON nested deeper than 32 levels") == true,
                "\(String(describing: error))")
            let late = try #require(try controller.status().streams?["video"]).late ?? 0
            #expect(late <= 1, "\(late) frames late")
            try daemon.stop()
        }

        @Test func aControllerGetsOneUnreadSnapshotAtATime() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "1920x1080", "--fps", "30"])
            let controller = try daemon.subscribedController()
            let id = try daemon.start(handler: "inspect", url: daemon.summaryPath("snapshots"), on: controller)
            try daemon.awaitState(controller, .live)
            let result = try attack(["snapshots", daemon.socketPath, "20"])
            // A 1080p NV12 frame is 3037.5 KiB: twenty unread would pin 60 MB.
            let growth = result["shmemGrowthKiB"] as? Int ?? .max
            #expect(growth < 2 * 3038 + 1024, "shared memory grew by \(growth) KiB: \(result)")
            #expect(result["snapshots"] as? Int == 1, "\(result)")
            let errors = (result["errors"] as? [[String: Any]]) ?? []
            #expect(errors.count == 19 && errors.allSatisfy { $0["code"] as? String == "busy" }, "\(errors.prefix(2))")
            #expect((errors.first?["message"] as? String)?.contains("has not been read yet; read it first") == true)
            // One read, the next is given.
            #expect(try controller.snapshot().description.video.width == 1920)
            #expect(try controller.snapshot().description.video.width == 1920)
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, id) == nil)
            try daemon.stop()
        }

        @Test func oversizedServiceInfoIsRefusedWithItsLimit() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "1920x1080", "--fps", "30"])
            let controller = try daemon.subscribedController()
            // The peak of a broadcast like it without the attack (the pool's pages touched, the handler served).
            let plain = try daemon.start(
                handler: "hostile", url: daemon.summaryPath("plain"), maxDuration: 1, on: controller)
            #expect(try daemon.awaitFinish(controller, plain) == nil)
            let before = Self.statusKiB(daemon.pid, "VmHWM")
            let id = try daemon.start(
                handler: "hostile", url: daemon.summaryPath("info"), setupInfo: ["attack": "bigInfo"], maxDuration: 10,
                on: controller)
            let error = try daemon.awaitFinish(controller, id)
            #expect(
                error?.message.contains(
                    "malformed UPDATE_SERVICE_INFO: service info of 964900 bytes exceeds the limit of 16384") == true,
                "\(String(describing: error))")
            // The subscriber heard the end (it was not disconnected), and the message cost no more than itself.
            #expect(try controller.status().state == .finished)
            let peak = Self.statusKiB(daemon.pid, "VmHWM")
            #expect(peak - before < 3 << 10, "VmHWM \(peak) KiB, \(before) KiB after a broadcast without the attack")
            try daemon.stop()
        }

        @Test func urlsAndSetupValuesAreBoundedWhereTheyEnter() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360", "--fps", "30"])
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "hostile", url: daemon.summaryPath("url"), setupInfo: ["attack": "longURL"], maxDuration: 10,
                on: controller)
            let error = try daemon.awaitFinish(controller, id)
            #expect(
                error?.message.contains(
                    "malformed UPDATE_URL: the URL is refused: it is 300028 bytes long; the limit is 8192") == true,
                "\(String(describing: error))")
            #expect(try controller.status().url == daemon.summaryPath("url"))
            // From setup: too long, a line break (a forged log line), a value near 1 MiB.
            let refusals: [(url: String, info: [String: String], expected: String)] = [
                (
                    "/tmp/" + String(repeating: "x", count: 9000) + ".json", [:],
                    "the URL is refused: it is 9010 bytes long; the limit is 8192"
                ),
                (
                    "/tmp/a.json\nbroadcastd: forged line", [:],
                    "the URL is refused: it contains a control character (U+000A)"
                ),
                (
                    "/tmp/a.json", ["attack": String(repeating: "y", count: 1_000_000)],
                    "setup field 'attack' is refused: it is 1000000 bytes long; the limit is 8192"
                ),
            ]
            for refusal in refusals {
                let pending = try controller.start(handler: "hostile", maxDuration: 1)
                let setup = try daemon.setup()
                #expect(throws: ProtocolError.refused(BroadcastError(.invalidRequest, refusal.expected))) {
                    try setup.complete(broadcast: pending, url: refusal.url, setupInfo: refusal.info)
                }
                try setup.cancel(broadcast: pending, error: BroadcastError(.setupCancelled, "test"))
                setup.close()
            }
            #expect(!daemon.log.contains("\nbroadcastd: forged line"))
            try daemon.stop()
        }

        @Test func aNulInAFileURLIsNotAFileName() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180", "--fps", "30"])
            let controller = try daemon.subscribedController()
            let folder = daemon.runtime + "/videos"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let id = try daemon.start(
                handler: "record", url: "file://" + folder + "/clip%00.mp4", maxDuration: 2, on: controller)
            let error = try daemon.awaitFinish(controller, id)
            #expect(error?.message.contains("is not a file") == true, "\(String(describing: error))")
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
            try daemon.stop()
        }

        @Test func unfinishedMessagesAreBoundedInSizeAndTime() throws {
            let daemon = try DaemonHarness()
            // Against the peak start-up reached, not the idle RSS: the idle daemon gives its code pages back
            // (releaseIdleCode) and serving 40 peers pages them in again, which is not what is measured here.
            let before = Self.statusKiB(daemon.pid, "VmHWM")
            // 40 controllers, each 1 MiB - 1 into a message it never finishes: kept, 40 MiB; bounded, 4 MiB and the
            // buffers around them.
            let result = try attack(["partial", daemon.socketPath, "40", "12"])
            #expect(result["connected"] as? Int == 40 && result["closedByDaemon"] as? Int == 40, "\(result)")
            let peak = Self.statusKiB(daemon.pid, "VmHWM")
            #expect(peak - before < 8 << 10, "VmHWM \(peak) KiB, \(before) KiB before")
            #expect(daemon.log.contains("takes the unfinished input of all peers past 4 MiB"))
            #expect(daemon.log.contains("left a message unfinished for 10 s"))
            #expect(try daemon.controller().status().state == .idle)
            try daemon.stop()
        }

        @Test func refusedConnectionsAreLoggedSparingly() throws {
            let daemon = try DaemonHarness()
            let folder = (daemon.socketPath as NSString).deletingLastPathComponent
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: daemon.runtime)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder)
            try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: daemon.socketPath)
            let script = """
                import os, socket, sys
                os.setgroups([]); os.setgid(65534); os.setuid(65534)
                for _ in range(200):
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.connect(sys.argv[1])
                    s.recv(10)
                    s.close()
                """
            let result = try runTool("/usr/bin/env", ["python3", "-c", script, daemon.socketPath])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(try daemon.controller().status().state == .idle)
            let lines = daemon.log.components(separatedBy: "refused a connection from pid").count - 1
            #expect(lines >= 1 && lines <= 2, "\(lines) lines for 200 refused connections")
            try daemon.stop()
        }
    }
}
