import BroadcastClient
import BroadcastCore
import BroadcastSystem
import Foundation
import Testing

/// Life under systemd, without a running systemd: socket activation through systemd-socket-activate,
/// the notify protocol against a socket of the test's own, journald's priority prefixes, and the
/// unit files checked by systemd-analyze.
extension Integration {
    @Suite(.serialized) struct SystemdTests {
        /// A program of the `systemd` package; missing, the test fails (it is in BROADCASTD_PACKAGES).
        func systemdProgram(_ name: String) throws -> String {
            let path = "/usr/bin/" + name
            try #require(
                FileManager.default.isExecutableFile(atPath: path),
                "\(path) is missing: install the Debian package systemd (scripts/lib.sh does)")
            return path
        }

        @Test func socketActivationServesThePassedSocketAndLeavesItInPlace() throws {
            let run = try SystemdRun()
            let socketPath = run.runtime + "/broadcastd/broadcastd.sock"
            try FileManager.default.createDirectory(
                atPath: run.runtime + "/broadcastd", withIntermediateDirectories: true)
            // systemd-socket-activate passes on only the variables named with -E; it execs broadcastd on the first connection.
            // No XDG_RUNTIME_DIR: an activated daemon needs no socket path of its own.
            let environment = run.environment.filter { $0.key != "XDG_RUNTIME_DIR" }.map {
                ["-E", "\($0.key)=\($0.value)"]
            }.flatMap { $0 }
            try run.start(
                try systemdProgram("systemd-socket-activate"),
                ["-l", socketPath] + environment + [Paths.binary("broadcastd")] + SystemdRun.daemonArguments)
            try run.waitForFile(socketPath)

            let status = try runTool(Paths.binary("broadcastctl"), ["status", "--socket", socketPath])
            #expect(status.status == 0, "broadcastctl status: \(status.stderr)\nlog:\n\(run.log)")
            #expect(status.stdout.contains("idle"))
            #expect(
                run.log.contains("socket activation: serving the socket systemd passed (\(socketPath))"), "\(run.log)")

            // A broadcast works as usual: the handler finds the daemon through the activated socket.
            let (controller, id) = try run.startInspect(socketPath, url: run.runtime + "/summary.json", maxDuration: 1)
            #expect(try run.finishError(controller, id) == .some(nil), "\(run.log)")
            controller.close()

            #expect(try run.stop() == 0, "\(run.log)")
            #expect(FileManager.default.fileExists(atPath: socketPath), "the socket belongs to systemd and must stay")
        }

        /// broadcastd.socket keeps listening while broadcastd.service is restarted (Restart=on-failure):
        /// played by Tests/fixtures/service_manager.py, which does what systemd does for the two units.
        @Test func afterASIGKILLTheRestartedDaemonServesTheSameSocket() throws {
            let run = try SystemdRun()
            let socketPath = run.runtime + "/broadcastd.sock"
            try run.start(
                "/usr/bin/env",
                [
                    "python3", Paths.root + "/Tests/fixtures/service_manager.py", socketPath, "--",
                    Paths.binary("broadcastd"),
                ] + SystemdRun.daemonArguments)
            try run.waitForFile(socketPath)
            func started() -> [Int32] {
                run.log.split(separator: "\n").compactMap {
                    $0.hasPrefix("service-manager: started ") ? Int32($0.split(separator: " ").last!) : nil
                }
            }
            let summary = run.runtime + "/killed.json"
            let (controller, _) = try run.startInspect(socketPath, url: summary, maxDuration: nil)
            var live = false
            let deadline = Date().addingTimeInterval(20)
            while !live && Date() < deadline {
                if case .stateChanged(let s) = try controller.nextEvent(timeoutMilliseconds: 100) {
                    live = s.state == .live
                }
            }
            #expect(live, "\(run.log)")
            usleep(300_000)
            let first = try #require(started().first)
            kill(first, SIGKILL)
            controller.close()

            // Asked while no broadcastd runs, the kernel queues the connection on the socket systemd holds;
            // the restarted daemon answers it.
            let status = try runTool(Paths.binary("broadcastctl"), ["status", "--socket", socketPath, "--json"])
            let state =
                (try? JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])?["state"]
                as? String
            #expect(status.status == 0 && state == "idle", "\(status.stdout)\(status.stderr)\n\(run.log)")
            #expect(started().count == 2, "\(run.log)")
            // The handler of the killed daemon's broadcast finished its summary, with the reason.
            #expect(try InspectSummary.load(summary).finishError?.code == .shutdown)

            let (again, second) = try run.startInspect(socketPath, url: run.runtime + "/after.json", maxDuration: 0.5)
            let error = try run.finishError(again, second)
            #expect(error == .some(nil), "the restarted daemon's broadcast: \(String(describing: error))\n\(run.log)")
            again.close()
            #expect(try run.stop() == 0, "\(run.log)")
        }

        @Test func socketActivationWithADatagramSocketIsRefused() throws {
            let run = try SystemdRun()
            let socketPath = run.runtime + "/dgram.sock"
            let environment = run.environment.map { ["-E", "\($0.key)=\($0.value)"] }.flatMap { $0 }
            try run.start(
                try systemdProgram("systemd-socket-activate"),
                ["--datagram", "-l", socketPath] + environment + [Paths.binary("broadcastd")]
                    + SystemdRun.daemonArguments)
            try run.waitForFile(socketPath)
            // A datagram makes systemd-socket-activate start broadcastd.
            let send = try runTool(
                "/usr/bin/python3",
                [
                    "-c",
                    "import socket,sys; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'x', sys.argv[1])",
                    socketPath,
                ])
            #expect(send.status == 0, "\(send.stderr)")
            let status = try run.waitForExit()
            #expect(status != 0)
            #expect(run.log.contains("is a Unix datagram socket; broadcastd needs a Unix stream socket"), "\(run.log)")
        }

        @Test func notifyProtocolReadyStatusWatchdogStopping() throws {
            let run = try SystemdRun()
            let receiver = try UnixDatagramReceiver(path: run.runtime + "/notify.sock")
            let socketPath = run.runtime + "/broadcastd/broadcastd.sock"
            var environment = run.environment
            environment["NOTIFY_SOCKET"] = receiver.path
            environment["WATCHDOG_USEC"] = "400000"
            try run.start(
                Paths.binary("broadcastd"), SystemdRun.daemonArguments + ["--socket", socketPath],
                environment: environment)

            var received: [(text: String, at: Date)] = []
            func next(timeout: Int32 = 5000) throws -> String? {
                guard let text = try receiver.receive(timeoutMilliseconds: timeout) else { return nil }
                received.append((text, Date()))
                return text
            }
            let first = try next()
            #expect(first == "READY=1", "first notification: \(first ?? "none")\n\(run.log)")
            // Ready means serving: a controller gets through at once.
            let controller = try ControllerClient(socketPath: socketPath, client: "test")
            #expect(try controller.status().state == .idle)
            try controller.subscribe()

            let id = try controller.start(handler: "inspect", maxDuration: nil)
            let setup = try SetupClient(socketPath: socketPath, client: "test-setup")
            try setup.complete(broadcast: id, url: run.runtime + "/summary.json", setupInfo: [:])
            setup.close()
            let until = Date().addingTimeInterval(2.5)
            while Date() < until { _ = try next(timeout: 100) }
            run.terminate()
            while try next(timeout: 1000) != nil {}
            #expect(try run.waitForExit() == 0, "\(run.log)")
            controller.close()

            let texts = received.map(\.text)
            let statuses = texts.filter { $0.hasPrefix("STATUS=") }
            #expect(statuses.contains("STATUS=idle"), "\(texts)")
            #expect(statuses.contains { $0.hasPrefix("STATUS=live: broadcast \(id) to inspect, 00:00:0") }, "\(texts)")
            let pings = received.filter { $0.text == "WATCHDOG=1" }.map(\.at)
            #expect(pings.count >= 8, "\(pings.count) watchdog pings in about 3 s")
            let gaps = zip(pings.dropFirst(), pings).map { $0.timeIntervalSince($1) }.sorted()
            if !gaps.isEmpty {
                let median = gaps[gaps.count / 2]
                #expect(median > 0.15 && median < 0.3, "median gap between watchdog pings \(median) s, expected 0.2")
            }
            let ready = texts.firstIndex(of: "READY=1")
            let stopping = texts.firstIndex(of: "STOPPING=1")
            let live = texts.firstIndex { $0.hasPrefix("STATUS=live") }
            #expect(ready == 0 && stopping != nil && live != nil, "\(texts)")
            if let stopping, let live { #expect(live < stopping, "\(texts)") }
            #expect(texts.filter { $0 == "READY=1" }.count == 1)
            #expect(texts.filter { $0 == "STOPPING=1" }.count == 1)
        }

        @Test func underTheJournalLinesCarrySyslogPriorities() throws {
            let run = try SystemdRun()
            var info = stat()
            #expect(stat(run.logPath, &info) == 0)
            var environment = run.environment
            environment["JOURNAL_STREAM"] = "\(info.st_dev):\(info.st_ino)"
            // A node that cannot be captured (there is no PipeWire here) is a warning at startup; one line at each of three levels.
            let socketPath = run.runtime + "/broadcastd/broadcastd.sock"
            try run.start(
                Paths.binary("broadcastd"),
                ["--source", "pipewire", "--pipewire-node", "absent", "--log-level", "debug", "--socket", socketPath],
                environment: environment)
            try run.waitForFile(socketPath)
            #expect(try run.stop() == 0, "\(run.log)")
            let lines = run.log.split(separator: "\n")
            #expect(
                lines.contains {
                    $0.hasPrefix("<4>pipewire capture: connect to PipeWire")
                        && $0.hasSuffix("broadcasts cannot start until this is resolved")
                },
                "\(run.log)")
            #expect(lines.contains { $0.hasPrefix("<6>listening on \(socketPath)") }, "\(run.log)")
            #expect(lines.contains { $0.hasPrefix("<7>") }, "\(run.log)")
            #expect(lines.allSatisfy { $0.range(of: #"^<[0-7]>"#, options: .regularExpression) != nil }, "\(run.log)")

            // JOURNAL_STREAM naming another file (inherited, stderr redirected): plain lines. Source auto in a
            // Wayland session is the portal, asked when a broadcast starts.
            let plain = try SystemdRun()
            environment["JOURNAL_STREAM"] = "\(info.st_dev):\(info.st_ino)"
            environment["WAYLAND_DISPLAY"] = "wayland-test"
            try plain.start(
                Paths.binary("broadcastd"), ["--source", "auto", "--socket", plain.runtime + "/s.sock"],
                environment: environment)
            try plain.waitForFile(plain.runtime + "/s.sock")
            #expect(try plain.stop() == 0, "\(plain.log)")
            #expect(plain.log.contains("listening on") && !plain.log.contains("<6>"), "\(plain.log)")
            #expect(
                plain.log.contains(
                    "] the screen is chosen in the desktop portal's share dialog when a broadcast starts\n"),
                "\(plain.log)")
        }

        @Test(arguments: ["broadcastd.socket", "broadcastd.service"])
        func unitFilesPassSystemdAnalyzeVerify(unit: String) throws {
            let analyze = try systemdProgram("systemd-analyze")
            let run = try SystemdRun()
            let original = try String(contentsOfFile: Paths.root + "/systemd/broadcastd.service", encoding: .utf8)
            // The line `make install` rewrites for its PREFIX.
            #expect(original.contains("\nExecStart=/usr/local/bin/broadcastd\n"))
            // verify checks that ExecStart exists: point it at the built daemon.
            let service = original.replacingOccurrences(
                of: "\nExecStart=/usr/local/bin/broadcastd\n", with: "\nExecStart=\(Paths.binary("broadcastd"))\n")
            try service.write(toFile: run.runtime + "/broadcastd.service", atomically: true, encoding: .utf8)
            try FileManager.default.copyItem(
                atPath: Paths.root + "/systemd/broadcastd.socket", toPath: run.runtime + "/broadcastd.socket")
            let result = try runTool(
                analyze, ["--user", "verify", run.runtime + "/" + unit],
                environment: ["XDG_RUNTIME_DIR": run.runtime, "XDG_CONFIG_HOME": run.runtime + "/config"])
            // systemd-analyze exits 0 on unknown keys and bad values: any output is a finding.
            #expect(result.stderr.isEmpty, "systemd-analyze --user verify \(unit):\n\(result.stderr)")
            #expect(result.status == 0)
        }
    }
}

/// A program started by a test with a private runtime directory, its stdout and stderr in a log file
/// created first (so that its device and inode are known); killed and cleaned up when the test ends.
/// Started with ChildProcess, not Foundation's Process: Process takes a program that closes the
/// descriptors it inherited (systemd-socket-activate does, before it execs) for exited, and then
/// blocks its monitor thread in waitpid, so that no other Process of the test is ever seen to exit.
final class SystemdRun {
    let runtime: String
    let logPath: String
    private(set) var process: ChildProcess?
    static let daemonArguments =
        ["--source", "synthetic", "--size", "640x360", "--log-level", "debug"]
        + Paths.handlerDirectories.flatMap { ["--handlers-dir", $0] }

    init() throws {
        runtime =
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "broadcastd-sd-\(UUID().uuidString.prefix(8))"
            ).path
        try FileManager.default.createDirectory(
            atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        logPath = runtime + "/log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
    }

    deinit {
        if let process, process.reap() == nil {
            process.send(signal: SIGKILL)
            _ = process.wait()
        }
        try? FileManager.default.removeItem(atPath: runtime)
    }

    /// What the daemon needs to find handlers and nothing of the caller's systemd session.
    var environment: [String: String] {
        [
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "HOME": runtime,
            "XDG_RUNTIME_DIR": runtime, "XDG_DATA_HOME": runtime + "/data", "XDG_DATA_DIRS": runtime + "/none",
        ]
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func start(_ path: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        let fd = open(logPath, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard fd >= 0 else { throw HarnessError("cannot open \(logPath)") }
        let log = Descriptor(adopting: fd)
        process = try ChildProcess(
            path: path, arguments: arguments, environment: environment ?? self.environment,
            passing: [(log, 1), (log, 2)])
    }

    var isRunning: Bool { process.map { $0.reap() == nil } ?? false }

    /// A broadcast to the inspect handler on the daemon at `socketPath`, set up; the controller is subscribed.
    func startInspect(_ socketPath: String, url: String, maxDuration: Double?) throws -> (
        controller: ControllerClient, id: UInt32
    ) {
        let controller = try ControllerClient(socketPath: socketPath, client: "test")
        try controller.subscribe()
        let id = try controller.start(handler: "inspect", maxDuration: maxDuration)
        let setup = try SetupClient(socketPath: socketPath, client: "test-setup")
        try setup.complete(broadcast: id, url: url, setupInfo: [:])
        setup.close()
        return (controller, id)
    }

    /// How broadcast `id` finished: `.some(nil)` without an error; nil when it did not finish within `timeout`.
    func finishError(_ controller: ControllerClient, _ id: UInt32, timeout: TimeInterval = 20) throws
        -> BroadcastError??
    {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if case .finished(let f) = try controller.nextEvent(timeoutMilliseconds: 100), f.broadcast == id {
                return .some(f.error)
            }
        }
        return nil
    }

    func waitForFile(_ path: String, timeout: TimeInterval = 10) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !FileManager.default.fileExists(atPath: path) {
            guard isRunning, Date() < deadline else { throw HarnessError("\(path) did not appear:\n\(log)") }
            usleep(10_000)
        }
    }

    func terminate() { process?.send(signal: SIGTERM) }

    /// The exit status (a signal counts as 128 + its number).
    @discardableResult
    func waitForExit(timeout: TimeInterval = 15) throws -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning && Date() < deadline { usleep(10_000) }
        guard let status = process?.reap() else { throw HarnessError("the program did not exit:\n\(log)") }
        switch status {
        case .exited(let code): return code
        case .signaled(let signal): return 128 + signal
        }
    }

    /// SIGTERM and the exit status.
    func stop() throws -> Int32 {
        terminate()
        return try waitForExit()
    }
}
