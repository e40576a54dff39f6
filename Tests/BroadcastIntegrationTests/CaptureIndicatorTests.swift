import BroadcastCore
import Foundation
import Testing

/// The screen is never captured in secret: a desktop notification when the shared capture starts, replaced
/// by one when it stops, on a stand-in notification service (Tests/fixtures/notifications) on a private
/// session bus; none with `notify = false`.
extension Integration {
    @Suite(.serialized) struct CaptureIndicatorTests {
        /// A PipeWire video node to capture as the screen (GStreamer's, or with `driving` the tests' own video source,
        /// which drives its graph as a camera's does), and the stand-in notification service on the stack's bus.
        func stack(driving: Bool = false) throws -> (PipeWireHarness, log: String) {
            let pipewire = try PipeWireHarness(tones: false)
            if driving {
                try pipewire.testVideoSource("screen", ["--size", "320x180", "--fps", "30"])
            } else {
                try pipewire.videoSource("screen", width: 320, height: 180, color: 0x20c040)
            }
            for module in ["dbus", "gi"] where try runTool("/usr/bin/python3", ["-c", "import \(module)"]).status != 0 {
                throw HarnessError(
                    "python3 cannot import \(module): install python3-dbus and python3-gi (scripts/lib.sh does)")
            }
            let log = pipewire.runtime + "/notifications.jsonl"
            try pipewire.spawn(
                "python3", [Paths.root + "/Tests/fixtures/notifications/notification_service.py", "--log", log])
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                let owner = try runTool(
                    "/usr/bin/dbus-send",
                    [
                        "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                        "org.freedesktop.DBus.NameHasOwner", "string:org.freedesktop.Notifications",
                    ],
                    environment: pipewire.environment)
                if owner.stdout.contains("boolean true") { return (pipewire, log) }
                usleep(50_000)
            }
            throw HarnessError("the stand-in notification service did not take its name on the bus:\n\(pipewire.logs)")
        }

        func daemon(_ pipewire: PipeWireHarness, _ extra: [String] = []) throws -> DaemonHarness {
            try DaemonHarness(
                [
                    "--source", "pipewire", "--pipewire-node", "screen", "--fps", "30", "--app-audio", "none", "--mic",
                    "none",
                ] + extra,
                environment: [
                    "PIPEWIRE_RUNTIME_DIR": pipewire.runtime,
                    "DBUS_SESSION_BUS_ADDRESS": pipewire.environment["DBUS_SESSION_BUS_ADDRESS"]!,
                ])
        }

        /// The documented status-bar module (examples/statusbar) on `daemon`'s feed, its lines in a file; stopped when
        /// it goes, if it has not ended.
        final class StatusBarModule {
            let process = Process()
            let output: String

            init(_ daemon: DaemonHarness) throws {
                output = daemon.runtime + "/bar.txt"
                _ = FileManager.default.createFile(atPath: output, contents: nil)
                process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
                process.arguments = [
                    Paths.root + "/examples/statusbar/broadcastd-statusbar.py", "--socket", daemon.socketPath,
                    "--broadcastctl", Paths.binary("broadcastctl"),
                ]
                process.standardOutput = FileHandle(forWritingAtPath: output)
                try process.run()
            }

            deinit {
                if process.isRunning {
                    kill(process.processIdentifier, SIGKILL)
                    process.waitUntilExit()
                }
            }

            /// What it printed: a JSON object a line.
            func lines() throws -> [[String: String]] {
                try String(contentsOfFile: output, encoding: .utf8).split(separator: "\n").compactMap {
                    (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: String]
                }
            }
        }

        func notifications(_ log: String) -> [[String: Any]] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
            }
        }

        /// The notifications shown, once there are `count` of them (or after 10 s).
        func shown(_ count: Int, in log: String) -> [[String: Any]] {
            let deadline = Date().addingTimeInterval(10)
            while notifications(log).count < count && Date() < deadline { usleep(20_000) }
            return notifications(log)
        }

        @Test func captureStartAndStopAreShownOnceForBroadcastsThatShareIt() throws {
            let (pipewire, log) = try stack()
            let daemon = try daemon(pipewire)
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            #expect(notifications(log).isEmpty, "a notification before anything was captured: \(notifications(log))")

            let first = try daemon.start(handler: "inspect", url: daemon.summaryPath("first"), on: controller)
            try daemon.awaitState(controller, .live)
            let started = shown(1, in: log)
            #expect(started.count == 1, "\(started)")
            #expect(started.first?["summary"] as? String == "Your screen is being captured", "\(started)")
            #expect(
                (started.first?["body"] as? String)?.contains("pipewire") == true,
                "it says what is captured: \(started)")
            // It stays while capture goes on (0: never expires), and stands for the capture, not for each broadcast.
            #expect(started.first?["expire"] as? Int == 0 && started.first?["app"] as? String == "broadcastd")
            let second = try daemon.start(handler: "inspect", url: daemon.summaryPath("second"), on: controller)
            usleep(500_000)
            try controller.finish(broadcast: first)
            #expect(try daemon.awaitFinish(controller, first) == nil)
            usleep(500_000)
            #expect(
                notifications(log).count == 1,
                "a second broadcast joining, or one of two finishing, is no news: \(notifications(log))")

            try controller.finish(broadcast: second)
            #expect(try daemon.awaitFinish(controller, second) == nil)
            let all = shown(2, in: log)
            #expect(all.count == 2, "\(all)")
            #expect(all.last?["summary"] as? String == "Screen capture stopped", "\(all)")
            // The stop replaces the notice that capture is on.
            #expect(all.last?["replaces"] as? Int == started.first?["id"] as? Int, "\(all)")
            try daemon.stop()
        }

        /// With a camera the notice says the camera is captured too, naming it; when the camera goes away it is
        /// replaced by one that says the camera no longer is, `broadcastctl status` says the camera and that it was
        /// lost, and the status-bar module shows "+ CAM" only while the camera is captured.
        @Test func theCameraInUseIsShownAndItsLossToo() throws {
            // (GStreamer's node as the screen sent no frame to broadcastd beside the camera's, in two runs of three.)
            let (pipewire, log) = try stack(driving: true)
            let camera = try pipewire.testVideoSource(
                "testcam", ["--size", "320x240", "--fps", "15", "--format", "NV12", "--role", "Camera"])
            let daemon = try daemon(pipewire, ["--camera", "testcam"])
            defer { _ = try? daemon.stop() }
            let module = try StatusBarModule(daemon)
            let controller = try daemon.subscribedController()
            usleep(300_000)  // the module's feed subscribed
            let id = try daemon.start(handler: "inspect", url: daemon.summaryPath("camera"), on: controller)
            try daemon.awaitState(controller, .live)
            let started = shown(1, in: log)
            #expect(started.first?["summary"] as? String == "Your screen and camera are being captured", "\(started)")
            #expect(
                (started.first?["body"] as? String)?.contains("and the camera testcam (serial ") == true, "\(started)")
            let status = try daemon.tool("broadcastctl", ["status"])
            #expect(status.stdout.contains("\ncamera: testcam (serial "), "\(status.stdout)")
            #expect(!status.stdout.contains("lost"), "\(status.stdout)")

            pipewire.kill(camera)
            let all = shown(2, in: log)
            #expect(all.last?["summary"] as? String == "Your screen is being captured", "\(all)")
            #expect(
                (all.last?["body"] as? String)?.hasPrefix(
                    "The camera is no longer captured: the camera testcam went away")
                    == true, "\(all)")
            #expect(all.last?["replaces"] as? Int == started.first?["id"] as? Int, "\(all)")
            let after = try daemon.tool("broadcastctl", ["status"])
            #expect(after.stdout.contains("; lost: the camera testcam went away"), "\(after.stdout)")

            try controller.finish(broadcast: id)
            #expect(try daemon.awaitFinish(controller, id) == nil)
            #expect(shown(3, in: log).last?["summary"] as? String == "Screen capture stopped")
            try daemon.stop()
            let lines = try module.lines()
            let live = lines.filter { $0["class"] == "live" }
            #expect(live.first?["text"]?.hasSuffix(" + CAM") == true, "\(lines)")
            #expect(live.first?["tooltip"]?.contains("camera testcam (serial ") == true, "\(lines)")
            #expect(
                live.last.map { !($0["text"] ?? "").contains("CAM") && ($0["tooltip"] ?? "").hasSuffix(" lost") }
                    == true, "\(lines)")
        }

        @Test func notifyFalseInTheConfigurationShowsNothing() throws {
            let (pipewire, log) = try stack()
            let config = pipewire.runtime + "/broadcastd.toml"
            try "notify = false\n".write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = try daemon(pipewire, ["--config", config])
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "inspect", url: daemon.summaryPath("quiet"), maxDuration: 1, on: controller)
            #expect(try daemon.awaitFinish(controller, id) == nil)
            usleep(500_000)
            #expect(notifications(log).isEmpty, "\(notifications(log))")
            try daemon.stop()
        }

        /// The documented status-bar module (examples/statusbar, fed by `status --watch --json`): idle, then
        /// "● REC" with the elapsed time while live, idle again after; it ends when broadcastd does.
        @Test func theStatusBarModuleFollowsTheWatchFeed() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
            let module = try StatusBarModule(daemon)
            let bar = module.process
            let controller = try daemon.subscribedController()
            usleep(300_000)
            let id = try daemon.start(
                handler: "inspect", url: daemon.summaryPath("bar"), maxDuration: 3.2, on: controller)
            #expect(try daemon.awaitFinish(controller, id) == nil)
            usleep(300_000)
            try daemon.stop()
            let deadline = Date().addingTimeInterval(5)
            while bar.isRunning && Date() < deadline { usleep(20_000) }
            #expect(!bar.isRunning && bar.terminationStatus == 1, "the module goes when broadcastd does")
            let lines = try module.lines()
            let texts = lines.map { $0["text"] ?? "?" }
            #expect(lines.first?["class"] == "idle" && lines.last?["class"] == "idle", "\(lines)")
            #expect(texts.contains("● REC 0:01") && texts.contains("● REC 0:02"), "\(texts)")
            #expect(
                lines.contains { $0["class"] == "live" && $0["tooltip"] == "broadcast \(id) (inspect): live" },
                "\(lines)")
        }

        /// No notification service on the bus: capture goes on, and only the debug log says why nothing was shown.
        @Test func noNotificationServiceIsNoError() throws {
            let pipewire = try PipeWireHarness(tones: false)
            try pipewire.videoSource("screen", width: 320, height: 180, color: 0x20c040)
            let daemon = try daemon(pipewire)
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "inspect", url: daemon.summaryPath("nobody"), maxDuration: 1, on: controller)
            #expect(try daemon.awaitFinish(controller, id) == nil)
            #expect(daemon.logs("no capture notification"), "\(daemon.log)")
            #expect(!daemon.log.contains("<4>") && !daemon.log.contains("warning"), "\(daemon.log)")
            try daemon.stop()
        }
    }
}
