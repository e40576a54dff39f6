import BroadcastClient
import BroadcastCore
import BroadcastInspect
import BroadcastProtocol
import Foundation
import Testing

/// Paths of the package and of the built programs.
enum Paths {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    /// The directory of the test bundle holds the executables `swift build` made.
    static let binaries: String = {
        let exe =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: exe).deletingLastPathComponent().path
    }()
    static func binary(_ name: String) -> String {
        let path = binaries + "/" + name
        precondition(
            FileManager.default.isExecutableFile(atPath: path),
            "\(path) is missing: run `swift build` before `swift test`")
        return path
    }
    static let handlerDirectories = [
        root + "/share/broadcastd/handlers", root + "/examples/python", root + "/Tests/fixtures/handlers",
    ]

    /// A Python virtual environment with the package of python/ installed as a third party installs it (`pip install`,
    /// from the local path, offline: setuptools and wheel come from Debian's python3-*-whl packages): its bin folder
    /// goes first on the PATH of every daemon of the tests, so the Python handlers (counter.py and the fixtures built
    /// on it) import the installed package. Made once per test run; failing to make it fails every test needing it.
    static let pythonEnvironment: Result<String, HarnessError> = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("broadcastd-venv-\(getpid())").path
        let python = "/usr/bin/python3"
        let wheels = "/usr/share/python-wheels"
        let notRun = ToolResult(status: -1, stdout: "", stderr: "did not run")
        let venv = (try? runTool(python, ["-m", "venv", folder], timeout: 120)) ?? notRun
        guard venv.status == 0 else {
            return .failure(HarnessError("\(python) -m venv failed (python3-venv): \(venv.stderr)"))
        }
        let install = [
            "install", "--isolated", "--no-index", "--find-links", wheels, "--no-cache-dir",
            "--disable-pip-version-check", root + "/python",
        ]
        let pip = (try? runTool(folder + "/bin/pip", install, timeout: 300)) ?? notRun
        guard pip.status == 0 else {
            return .failure(
                HarnessError(
                    "pip install of python/ failed (python3-wheel-whl, python3-setuptools-whl): "
                        + "\(pip.stdout)\(pip.stderr)"))
        }
        atexit {
            try? FileManager.default.removeItem(
                atPath: FileManager.default.temporaryDirectory
                    .appendingPathComponent("broadcastd-venv-\(getpid())").path)
        }
        return .success(folder + "/bin")
    }()
    /// broadcastd as `make` builds it (release, the Swift libraries linked in): what users run, for the tests that
    /// measure its memory. scripts/test.sh builds it.
    static var releaseDaemon: String {
        let path = root + "/.build/release/broadcastd"
        precondition(
            FileManager.default.isExecutableFile(atPath: path),
            "\(path) is missing: ./scripts/test.sh builds it, or `swift build -c release --static-swift-stdlib --product broadcastd`"
        )
        return path
    }
}

/// Every suite that starts daemons runs inside this one, one test at a time: rates are checked,
/// and two cores are all there is.
@Suite(.serialized) enum Integration {}

struct ToolResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs a program to completion with a time limit, capturing its output (through files: no pipe can fill up).
/// Alive and not a zombie (an orphan is reaped by whoever adopted it, if at all, and maybe late).
func isRunning(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return false }
    return !stat[close...].hasPrefix(") Z")
}

func runTool(
    _ path: String, _ arguments: [String], environment: [String: String] = [:], timeout: TimeInterval = 60,
    directory: String? = nil
) throws -> ToolResult {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("tool-\(UUID().uuidString.prefix(8))")
        .path
    try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    _ = FileManager.default.createFile(atPath: scratch + "/out", contents: nil)
    _ = FileManager.default.createFile(atPath: scratch + "/err", contents: nil)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    process.standardOutput = FileHandle(forWritingAtPath: scratch + "/out")
    process.standardError = FileHandle(forWritingAtPath: scratch + "/err")
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning && Date() < deadline { usleep(20_000) }
    if process.isRunning {
        // SIGKILL: a program started from a test thread inherits its blocked signals, SIGTERM among them.
        kill(process.processIdentifier, SIGKILL)
        Issue.record("\(path) \(arguments) did not finish within \(timeout) s")
    }
    process.waitUntilExit()
    return ToolResult(
        status: process.terminationStatus,
        stdout: (try? String(contentsOfFile: scratch + "/out", encoding: .utf8)) ?? "",
        stderr: (try? String(contentsOfFile: scratch + "/err", encoding: .utf8)) ?? "")
}

/// A broadcastd process of its own: private runtime directory and socket, the test handler
/// directories, stopped (and checked for leftovers) by `stop()`.
final class DaemonHarness {
    let runtime: String
    let socketPath: String
    let process = Process()
    let logPath: String
    private var stopped = false
    private var mounts: [String] = []

    /// `launcher`: a program (and its arguments) that is started instead and execs broadcastd's path and
    /// arguments, which come after its own: to start broadcastd with descriptors or a process group of its own.
    /// `release`: broadcastd as `make` builds it (`Paths.releaseDaemon`), its handlers the debug build's (found on PATH).
    init(
        _ arguments: [String] = ["--source", "synthetic", "--size", "640x360"],
        environment extra: [String: String] = [:], launcher: [String] = [], release: Bool = false
    ) throws {
        runtime =
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "broadcastd-test-\(UUID().uuidString.prefix(8))"
            ).path
        try FileManager.default.createDirectory(
            atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        socketPath = runtime + "/broadcastd/broadcastd.sock"
        logPath = runtime + "/broadcastd.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let daemonArguments =
            arguments + ["--socket", socketPath, "--log-level", "debug"]
            + Paths.handlerDirectories.flatMap { ["--handlers-dir", $0] }
        if let program = launcher.first {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = launcher.dropFirst() + [Paths.binary("broadcastd")] + daemonArguments
        } else {
            process.executableURL = URL(fileURLWithPath: release ? Paths.releaseDaemon : Paths.binary("broadcastd"))
            process.arguments = daemonArguments
        }
        var environment = ProcessInfo.processInfo.environment
        let python = try Paths.pythonEnvironment.get()
        environment["PATH"] =
            python + ":" + (release ? Paths.binaries + ":" : "")
            + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["XDG_RUNTIME_DIR"] = runtime
        environment["XDG_DATA_HOME"] = runtime + "/data"
        environment["XDG_DATA_DIRS"] = runtime + "/none"
        environment["XDG_CONFIG_HOME"] = runtime + "/config"
        environment["BROADCASTD_SOCKET"] = nil
        // Never the user's own PipeWire: tests that want audio pass their private stack's.
        environment["PIPEWIRE_REMOTE"] = nil
        environment["PIPEWIRE_RUNTIME_DIR"] = nil
        // Nor the user's session bus: a test that wants one (the portal, notifications) passes its private bus.
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        environment.merge(extra) { _, new in new }
        process.environment = environment
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: socketPath) {
            guard process.isRunning, Date() < deadline else {
                throw HarnessError("broadcastd did not start listening:\n\(log)")
            }
            usleep(10_000)
        }
    }

    deinit {
        if !stopped { _ = try? stop() }
        for mount in mounts { _ = try? runTool("/usr/bin/umount", ["-l", mount]) }
        try? FileManager.default.removeItem(atPath: runtime)
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Whether the daemon logs `text` within a few seconds.
    func logs(_ text: String) -> Bool {
        let deadline = Date().addingTimeInterval(5)
        while !log.contains(text) && Date() < deadline { usleep(20_000) }
        return log.contains(text)
    }
    var pid: Int32 { process.processIdentifier }

    /// `broadcastctl start` to inspect, left running (its START may wait: for the portal's dialog, a first
    /// frame); the process and the file its output goes to.
    func startInBackground() throws -> (Process, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Paths.binary("broadcastctl"))
        process.arguments = ["start", "--handler", "inspect", "--url", summaryPath("pending"), "--socket", socketPath]
        let output = runtime + "/broadcastctl-start-\(UUID().uuidString.prefix(8)).log"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: output)
        process.standardError = FileHandle(forWritingAtPath: output)
        try process.run()
        return (process, output)
    }

    func controller() throws -> ControllerClient { try ControllerClient(socketPath: socketPath, client: "test") }

    /// A controller that receives events.
    func subscribedController() throws -> ControllerClient {
        let controller = try self.controller()
        try controller.subscribe()
        return controller
    }
    func setup() throws -> SetupClient { try SetupClient(socketPath: socketPath, client: "test-setup") }

    /// Runs broadcastctl or broadcast-setup against this daemon.
    func tool(_ name: String, _ arguments: [String], timeout: TimeInterval = 60, directory: String? = nil) throws
        -> ToolResult
    {
        try runTool(
            Paths.binary(name), arguments + ["--socket", socketPath], environment: ["XDG_RUNTIME_DIR": runtime],
            timeout: timeout,
            directory: directory)
    }

    /// Starts a broadcast through the API: START, then the setup UI's COMPLETE_SETUP. Returns its id.
    func start(
        handler: String, url: String?, setupInfo: [String: String] = [:], maxDuration: Double? = nil,
        on controller: ControllerClient
    ) throws -> UInt32 {
        let id = try controller.start(handler: handler, maxDuration: maxDuration)
        let setup = try self.setup()
        defer { setup.close() }
        try setup.complete(broadcast: id, url: url, setupInfo: setupInfo)
        return id
    }

    /// Waits for an event matching `match` (a subscribed controller), failing after `timeout` seconds.
    @discardableResult
    func waitFor<T>(_ controller: ControllerClient, timeout: TimeInterval = 20, _ match: (ControllerClient.Event) -> T?)
        throws -> T
    {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let event = try controller.nextEvent(timeoutMilliseconds: 100), let value = match(event) { return value }
        }
        throw HarnessError("no matching event within \(timeout) s; daemon log:\n\(log)")
    }

    /// A broadcast's state became `state`: one a user started, not a shared encoder (whose phase follows theirs).
    func awaitState(_ controller: ControllerClient, _ state: BroadcastPhase, timeout: TimeInterval = 20) throws {
        try waitFor(controller, timeout: timeout) {
            if case .stateChanged(let s) = $0, s.state == state, s.serves == nil { true } else { nil }
        }
    }

    func awaitFinish(_ controller: ControllerClient, _ id: UInt32, timeout: TimeInterval = 30) throws -> BroadcastError?
    {
        try waitFor(controller, timeout: timeout) {
            if case .finished(let f) = $0, f.broadcast == id { .some(f.error) } else { nil }
        }
    }

    /// Processes whose parent is the daemon (its handlers).
    func children() -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return false }
            let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == self.pid
        }
    }

    /// The scheduling policy (/proc's `policy`: 0 SCHED_OTHER, 1 SCHED_FIFO, 2 SCHED_RR) of every thread of the
    /// daemon's children, by "pid/tid".
    func childThreadPolicies() -> [String: Int] {
        var policies: [String: Int] = [:]
        for pid in children() {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            for tid in tasks {
                guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/stat", encoding: .utf8),
                    let close = stat.lastIndex(of: ")")
                else { continue }
                // Fields from the state (the 3rd) on: the policy is the 41st.
                let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
                if fields.count > 38, let policy = Int(fields[38]) { policies["\(pid)/\(tid)"] = policy }
            }
        }
        return policies
    }

    /// Descriptors the daemon holds open.
    /// What the daemon's descriptors refer to, but for the /proc files it reads for a moment (its own
    /// memory figures, once a second), which would make counts race with it.
    func descriptorTargets() -> [String] {
        let folder = "/proc/\(pid)/fd"
        return ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: folder + "/" + $0)
        }.filter { !$0.hasPrefix("/proc/") }
    }

    func openDescriptors() -> Int { descriptorTargets().count }

    /// Waits (briefly) until the daemon has no child process left.
    func expectNoChildren(sourceLocation: SourceLocation = #_sourceLocation) {
        let deadline = Date().addingTimeInterval(5)
        while !children().isEmpty && Date() < deadline { usleep(20_000) }
        #expect(children().isEmpty, "handler processes left behind: \(children())", sourceLocation: sourceLocation)
    }

    /// SIGTERM, then checks the daemon exited cleanly, left no child and removed its socket.
    @discardableResult
    func stop() throws -> Int32 {
        guard !stopped else { return 0 }
        stopped = true
        let orphans = children()
        process.terminate()
        let deadline = Date().addingTimeInterval(15)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
            throw HarnessError("broadcastd did not stop on SIGTERM:\n\(log)")
        }
        for orphan in orphans where kill(orphan, 0) == 0 {
            kill(orphan, SIGKILL)
            throw HarnessError("handler \(orphan) outlived the daemon")
        }
        if FileManager.default.fileExists(atPath: socketPath) {
            throw HarnessError("socket left behind at \(socketPath)")
        }
        return process.terminationStatus
    }

    func summaryPath(_ name: String) -> String { runtime + "/" + name + ".json" }

    /// A full disk to be: a tmpfs of `size` (`150k`) mounted in the runtime folder until the harness goes.
    func smallDisk(_ size: String) throws -> String {
        let mount = runtime + "/small"
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: true)
        let mounted = try runTool("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", mount])
        guard mounted.status == 0 else {
            throw HarnessError("this test mounts a small tmpfs and needs root (or CAP_SYS_ADMIN): \(mounted.stderr)")
        }
        mounts.append(mount)
        return mount
    }
}

/// Asks `controller` for the status every `every` µs for `seconds`; the longest an answer took, s.
func slowestStatus(_ controller: ControllerClient, seconds: TimeInterval, every: UInt32) throws -> Double {
    var slowest = 0.0
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        let asked = Date()
        _ = try controller.status()
        slowest = max(slowest, Date().timeIntervalSince(asked))
        usleep(every)
    }
    return slowest
}

struct HarnessError: Error, CustomStringConvertible, Sendable {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The inspect handler's summary, decoded with the handler's own type.
typealias InspectSummary = InspectHandler.Summary

extension InspectHandler.Summary {
    static func load(_ path: String) throws -> InspectSummary {
        try JSONDecoder().decode(InspectSummary.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Callback names in order, sample runs collapsed to "samples".
    var sequence: [String] { callbacks.map { $0.callback == "processSampleBuffer" ? "samples" : $0.callback } }
}
