import BroadcastClient
import BroadcastCore
import Foundation
import Testing

/// The handler's process (docs/protocol.md §13.1): the protocol's descriptors and nothing else, a process group
/// of its own that broadcastd ends as a whole, and no signal from broadcastd's terminal.
extension Integration {
    @Suite(.serialized) struct HandlerProcessTests {
        /// Starts broadcastd in a process group of its own (as a shell starts a foreground job), with /dev/null
        /// on fd 10 without close-on-exec, as a careless parent would leave it.
        static let launcher = [
            "/usr/bin/env", "python3", "-c",
            """
            import os, sys
            os.setpgid(0, 0)
            os.dup2(os.open("/dev/null", os.O_RDONLY), 10)  # dup2 makes it inheritable
            os.execv(sys.argv[1], sys.argv[1:])
            """,
        ]

        /// A handler directory with `probe`: a Python handler that writes, before it says HELLO, which descriptors
        /// it has, its process group and the pid of a `sleep` it leaves running, then counts samples as the
        /// python-counter example does.
        static func probeHandlerDirectory(in runtime: String) throws -> String {
            let directory = runtime + "/probe-handlers"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let reportPath = String(reflecting: runtime + "/probe.json")
            let script = """
                #!/usr/bin/env python3
                import json, os, subprocess, sys
                sys.path.insert(0, \(String(reflecting: Paths.root + "/examples/python")))
                listing = "/proc/%d/fd" % os.getpid()
                fds = {}
                for name in os.listdir("/proc/self/fd"):
                    try:
                        target = os.readlink("/proc/self/fd/" + name)
                    except OSError:
                        continue  # the listing's own descriptor, closed already
                    if target != listing:
                        fds[int(name)] = target
                child = subprocess.Popen(["sleep", "1000"])
                report = {"fds": sorted(fds), "targets": {str(k): v for k, v in fds.items()}, "pid": os.getpid(),
                          "pgid": os.getpgid(0), "child": child.pid}
                with open(\(reportPath) + ".tmp", "w") as f:
                    json.dump(report, f)
                os.rename(\(reportPath) + ".tmp", \(reportPath))
                import broadcastd, counter
                broadcastd.run(counter.Counter())
                """
            try script.write(toFile: directory + "/probe.py", atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory + "/probe.py")
            let manifest =
                #"{"name": "probe", "displayName": "Probe", "exec": "./probe.py", "url": {"prompt": "Summary"}}"#
            try manifest.write(toFile: directory + "/probe.json", atomically: true, encoding: .utf8)
            return directory
        }

        struct ProbeReport: Decodable {
            var fds: [Int32]
            var targets: [String: String]
            var pid: Int32
            var pgid: Int32
            var child: Int32
        }

        @Test func aHandlerGetsOnlyItsDescriptorsAndWhatItStartsEndsWithIt() throws {
            let scratch = FileManager.default.temporaryDirectory
                .appendingPathComponent("probe-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            let handlers = try Self.probeHandlerDirectory(in: scratch)
            let daemon = try DaemonHarness(
                ["--source", "synthetic", "--size", "320x180", "--handlers-dir", handlers],
                launcher: Self.launcher)
            defer { _ = try? daemon.stop() }
            let inherited = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(daemon.pid)/fd/10")
            #expect(inherited == "/dev/null", "the launcher gives broadcastd /dev/null on fd 10")

            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "probe", url: daemon.summaryPath("probe"), maxDuration: 1, on: controller)
            let error = try daemon.awaitFinish(controller, id)
            #expect(error == nil, "\(String(describing: error))")
            let written = try Data(contentsOf: URL(fileURLWithPath: scratch + "/probe.json"))
            let report = try JSONDecoder().decode(ProbeReport.self, from: written)
            defer { if isRunning(report.child) { kill(report.child, SIGKILL) } }
            #expect(report.fds == [0, 1, 2, 3], "the handler had \(report.targets)")
            #expect(
                report.pgid == report.pid,
                "the handler leads a process group of its own: pgid \(report.pgid), pid \(report.pid)")
            // Its `sleep` went with it: at the latest when broadcastd saw the handler exit, which FINISHED follows.
            let deadline = Date().addingTimeInterval(1)
            while isRunning(report.child) && Date() < deadline { usleep(10_000) }
            #expect(!isRunning(report.child), "the handler's child \(report.child) outlived the broadcast")
            try daemon.stop()
        }

        @Test func ctrlCOnBroadcastdFinishesTheRecordingToItsLastFrame() throws {
            let daemon = try DaemonHarness(
                ["--source", "synthetic", "--size", "320x180", "--fps", "30"],
                launcher: Self.launcher)
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/interrupted.mp4"
            let controller = try daemon.subscribedController()
            _ = try daemon.start(handler: "record", url: "file://" + path, on: controller)
            try daemon.awaitState(controller, .live)
            let live = Date()
            usleep(3_500_000)  // mid-fragment: a killed handler would lose the last half second at least
            // What a terminal does on Ctrl-C: SIGINT to the foreground process group, broadcastd's.
            let interrupted = Date()
            #expect(kill(-daemon.pid, SIGINT) == 0)
            let deadline = Date().addingTimeInterval(15)
            while daemon.process.isRunning && Date() < deadline { usleep(10_000) }
            #expect(!daemon.process.isRunning, "broadcastd did not exit after SIGINT:\n\(daemon.log)")
            #expect(daemon.process.terminationStatus == 0, "\(daemon.log)")
            #expect(
                daemon.log.contains("handler 'record'") && !daemon.log.contains("was killed by SIGINT"),
                "\(daemon.log)")
            let recorded = interrupted.timeIntervalSince(live)
            // The video decodes to the end: its last frame is from within 0.2 s of the Ctrl-C.
            let times = try Recording(path: path, scratch: daemon.runtime).frameTimes()
            let duration = (times.last ?? 0) - (times.first ?? 0) + 1.0 / 30
            #expect(
                duration > recorded - 0.2,
                "the file holds \(duration) s (\(times.count) frames) of the \(recorded) s recorded before Ctrl-C")
        }
    }
}
