import Foundation
import Testing

/// A private PipeWire stack (dbus-daemon, pipewire, wireplumber) in a runtime directory of its own, with
/// `test_sink`, the default sink, playing a 440 Hz tone (what app audio captures), and `test_mic`, the
/// default source, carrying an 880 Hz tone (played into `mic_in`, a sink that pw-loopback turns into
/// the source). Everything it starts is killed by `stop()` or when it goes away.
final class PipeWireHarness {
    let runtime: String
    private var processes: [(name: String, process: Process)] = []
    static let appFrequency = 440.0, micFrequency = 880.0

    /// What a PipeWire client of this stack needs. `PIPEWIRE_REMOTE` too: tests that capture in-process set it
    /// in the test process, whose environment every child inherits, and may run beside another stack.
    var environment: [String: String] {
        [
            "XDG_RUNTIME_DIR": runtime, "PIPEWIRE_RUNTIME_DIR": runtime, "PIPEWIRE_REMOTE": socketPath,
            "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(runtime)/bus",
            "XDG_CONFIG_HOME": runtime + "/config", "XDG_STATE_HOME": runtime + "/state", "HOME": runtime,
        ]
    }

    var socketPath: String { runtime + "/pipewire-0" }

    /// dbus-daemon's option for a private session bus that D-Bus-activates nothing installed on the machine
    /// (a desktop's xdg-desktop-portal would otherwise start on it, and hang without its compositor).
    static let privateBusConfig = "--config-file=" + Paths.root + "/scripts/private-bus.conf"

    /// `busReplyTimeout`: the session bus answers a method call nobody answered with NoReply after this many
    /// milliseconds (a portal that hangs, sooner than D-Bus's own 25 s).
    init(tones: Bool = true, busReplyTimeout: Int? = nil) throws {
        runtime =
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "broadcastd-pw-\(UUID().uuidString.prefix(8))"
            ).path
        try FileManager.default.createDirectory(
            atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        do {
            var busConfig = Self.privateBusConfig
            if let busReplyTimeout {
                let text = try String(contentsOfFile: Paths.root + "/scripts/private-bus.conf", encoding: .utf8)
                    .replacingOccurrences(
                        of: "\"reply_timeout\">300000<", with: "\"reply_timeout\">\(busReplyTimeout)<")
                try text.write(toFile: runtime + "/bus.conf", atomically: true, encoding: .utf8)
                busConfig = "--config-file=" + runtime + "/bus.conf"
            }
            try spawn("dbus-daemon", [busConfig, "--address=unix:path=\(runtime)/bus", "--nofork", "--nopidfile"])
            try waitFor(runtime + "/bus")
            try spawn("pipewire", [])
            try waitFor(socketPath)
            try spawn("wireplumber", [])
            let sink = try runTool(
                "/usr/bin/pw-cli",
                [
                    "create-node", "adapter",
                    "{ factory.name=support.null-audio-sink node.name=test_sink media.class=Audio/Sink object.linger=true audio.position=[FL FR] priority.session=2000 }",
                ],
                environment: environment)
            guard sink.status == 0 else { throw HarnessError("pw-cli create-node: \(sink.stderr)") }
            try spawn(
                "pw-loopback",
                [
                    "--capture-props=media.class=Audio/Sink node.name=mic_in audio.position=[FL FR] priority.session=100",
                    "--playback-props=media.class=Audio/Source node.name=test_mic audio.position=[FL FR] priority.session=2000",
                ])
            try waitForDefaults()
            if tones {
                try play(frequency: Self.appFrequency, into: "test_sink")
                try play(frequency: Self.micFrequency, into: "mic_in")
            }
        } catch {
            stop()
            throw error
        }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: runtime)
    }

    /// A program of the PipeWire packages; missing, the test fails (scripts/lib.sh installs them).
    private func program(_ name: String) throws -> String {
        if name.hasPrefix("/") { return name }
        for folder in ["/usr/bin", "/usr/local/bin"]
        where FileManager.default.isExecutableFile(atPath: folder + "/" + name) {
            return folder + "/" + name
        }
        throw HarnessError(
            "\(name) is missing: install pipewire, pipewire-bin, wireplumber and dbus-daemon (scripts/lib.sh does)")
    }

    @discardableResult
    func spawn(_ name: String, _ arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try program(name))
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        process.standardOutput = FileHandle.nullDevice
        _ = FileManager.default.createFile(atPath: log(name), contents: nil)
        process.standardError = FileHandle(forWritingAtPath: log(name))
        try process.run()
        processes.append((name, process))
        return process
    }

    private func log(_ name: String) -> String { runtime + "/\(name.split(separator: "/").last!).log" }

    /// A null sink named `name`, like test_sink.
    func createSink(_ name: String) throws {
        let made = try runTool(
            "/usr/bin/pw-cli",
            [
                "create-node", "adapter",
                "{ factory.name=support.null-audio-sink node.name=\(name) media.class=Audio/Sink object.linger=true audio.position=[FL FR] }",
            ],
            environment: environment)
        guard made.status == 0 else { throw HarnessError("pw-cli create-node: \(made.stderr)") }
    }

    /// The nodes there are now, by name: their id and object.serial (from pw-dump).
    func nodes() throws -> [String: (id: Int, serial: String)] {
        let dump = try runTool("/usr/bin/pw-dump", [], environment: environment)
        let objects = (try? JSONSerialization.jsonObject(with: Data(dump.stdout.utf8))) as? [[String: Any]] ?? []
        var nodes: [String: (id: Int, serial: String)] = [:]
        for object in objects {
            guard let props = (object["info"] as? [String: Any])?["props"] as? [String: Any],
                let name = props["node.name"] as? String,
                let id = object["id"] as? Int, let serial = props["object.serial"]
            else { continue }
            nodes[name] = (id, "\(serial)")
        }
        return nodes
    }

    /// Makes the node named `name` the default sink or source (`wpctl set-default`, by its id).
    func setDefault(_ name: String) throws {
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            if let id = try nodes()[name]?.id {
                let set = try runTool("/usr/bin/wpctl", ["set-default", "\(id)"], environment: environment)
                guard set.status == 0 else { throw HarnessError("wpctl set-default: \(set.stderr)") }
                return
            }
            usleep(50_000)
        }
        throw HarnessError("no node named \(name)")
    }

    /// Plays a sine at `frequency` (amplitude 1/8, stereo, 48 kHz) into `node` and nowhere else, for
    /// `seconds`, as the application `application` (pw-play's own name by default).
    @discardableResult
    func play(frequency: Double, into node: String, application: String? = nil, seconds: Int = 60) throws -> Process {
        let file = runtime + "/tone-\(Int(frequency)).wav"
        if !FileManager.default.fileExists(atPath: file) {
            let made = try runTool(
                "/usr/bin/ffmpeg",
                [
                    "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=\(frequency):duration=\(seconds)",
                    "-ac", "2", "-ar", "48000", file,
                ])
            guard made.status == 0 else { throw HarnessError("ffmpeg: \(made.stderr)") }
        }
        // Pinned to its node: WirePlumber would otherwise move it when the default sink changes or its node goes.
        return try spawn(
            "pw-play",
            [
                "--target", node, "-P",
                "{ node.dont-reconnect = true \(application.map { "application.name = \($0)" } ?? "") }", file,
            ])
    }

    /// A video source node named `name`: GStreamer's videotestsrc, BGRx at `width`x`height` and 30 fps, one
    /// colour (0xRRGGBB), through pipewiresink. It serves its first consumer only: one per test.
    func videoSource(_ name: String, width: Int, height: Int, color: UInt32) throws {
        try spawn(
            "gst-launch-1.0",
            [
                "-q", "videotestsrc", "is-live=true", "pattern=solid-color", "foreground-color=\(0xff00_0000 | color)",
                "!",
                "video/x-raw,format=BGRx,width=\(width),height=\(height),framerate=30/1", "!",
                "pipewiresink", "mode=provide", "stream-properties=p,media.class=Video/Source,node.name=\(name)",
            ])
        try waitForNode(name)
    }

    /// The stand-in xdg-desktop-portal (Tests/fixtures/portal/screencast_portal.py) on this stack's session
    /// bus, sharing the video node `node`; its conversation is logged, one JSON object a line, to `portalLog`.
    /// `response`: Start answers with it (2: the portal's backend failed). The first `cameraRefusals` AccessCamera
    /// calls are refused (response 1), later ones allowed.
    func portal(
        node: String, version: Int = 5, cancel: Bool = false, dialogSeconds: Double = 0, closeAfter: Double? = nil,
        cursorModes: Int = 7, response: Int = 0, cameraRefusals: Int = 0
    ) throws {
        for module in ["dbus", "gi"] where try runTool("/usr/bin/python3", ["-c", "import \(module)"]).status != 0 {
            throw HarnessError(
                "python3 cannot import \(module): install python3-dbus and python3-gi (scripts/lib.sh does)")
        }
        let process = try spawn(
            "python3",
            [
                Paths.root + "/Tests/fixtures/portal/screencast_portal.py",
                "--node", node, "--log", portalLog, "--version", "\(version)",
                "--dialog-seconds", "\(dialogSeconds)", "--cursor-modes", "\(cursorModes)",
                "--response", "\(response)", "--camera-refusals", "\(cameraRefusals)",
            ]
                + (cancel ? ["--cancel"] : [])
                + (closeAfter.map { ["--close-after", "\($0)"] } ?? []))
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let owner = try runTool(
                "/usr/bin/dbus-send",
                [
                    "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                    "org.freedesktop.DBus.NameHasOwner", "string:org.freedesktop.portal.Desktop",
                ], environment: environment)
            if owner.stdout.contains("boolean true") {
                portalProcess = process
                return
            }
            usleep(50_000)
        }
        throw HarnessError("the stand-in portal did not take its name on the bus:\n\(logs)")
    }

    var portalLog: String { runtime + "/portal.jsonl" }
    /// The stand-in portal, once it is on the bus (a test stops it with SIGSTOP to play a backend that hangs).
    private(set) var portalProcess: Process?

    /// What the stand-in portal was asked, in order.
    func portalCalls() -> [[String: Any]] {
        ((try? String(contentsOfFile: portalLog, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
    }

    /// The tests' own video source (pipewire-test-video-source, built with the package): a node named
    /// `name` that drives the graph like a compositor and writes crop and damage metadata as `arguments` say.
    @discardableResult
    func testVideoSource(_ name: String, _ arguments: [String]) throws -> Process {
        let process = try spawn(Paths.binary("pipewire-test-video-source"), ["--name", name] + arguments)
        try waitForNode(name)
        return process
    }

    private func waitForNode(_ name: String) throws {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if try runTool("/usr/bin/pw-cli", ["ls", "Node"], environment: environment).stdout.contains(
                "node.name = \"\(name)\"")
            {
                return
            }
            usleep(50_000)
        }
        throw HarnessError("the video node \(name) did not appear:\n\(logs)")
    }

    /// Stops the first process named `name` (pw-loopback: the microphone goes away).
    func kill(_ name: String) {
        guard let process = processes.first(where: { $0.name == name })?.process else { return }
        kill(process)
    }

    /// Stops `process`, one this harness started.
    func kill(_ process: Process) {
        processes.removeAll { $0.process === process }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    private func waitFor(_ path: String) throws {
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: path) {
            guard Date() < deadline else { throw HarnessError("\(path) did not appear:\n\(logs)") }
            usleep(20_000)
        }
    }

    /// Waits until wireplumber has made test_sink and test_mic the defaults.
    private func waitForDefaults() throws {
        let deadline = Date().addingTimeInterval(10)
        var last = ""
        while Date() < deadline {
            let sink = try runTool("/usr/bin/wpctl", ["inspect", "@DEFAULT_AUDIO_SINK@"], environment: environment)
            let source = try runTool("/usr/bin/wpctl", ["inspect", "@DEFAULT_AUDIO_SOURCE@"], environment: environment)
            last = sink.stdout + source.stdout
            if sink.stdout.contains("node.name = \"test_sink\"") && source.stdout.contains("node.name = \"test_mic\"") {
                return
            }
            usleep(50_000)
        }
        throw HarnessError("wireplumber did not make test_sink and test_mic the defaults:\n\(last)\n\(logs)")
    }

    var logs: String {
        processes.map { "\($0.name): " + ((try? String(contentsOfFile: log($0.name), encoding: .utf8)) ?? "") }.joined(
            separator: "\n")
    }

    func stop() {
        for (_, process) in processes.reversed() where process.isRunning {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        processes.removeAll()
    }
}

/// The amplitude of the `frequency` Hz component of `samples` at 48 kHz (a sine of amplitude a gives a).
func amplitude<Samples: Collection<Float>>(_ frequency: Double, in samples: Samples) -> Double {
    let step = 2 * Double.pi * frequency / 48_000
    var (re, im) = (0.0, 0.0)
    for (n, x) in samples.enumerated() {
        re += Double(x) * cos(step * Double(n))
        im -= Double(x) * sin(step * Double(n))
    }
    return 2 * (re * re + im * im).squareRoot() / Double(max(1, samples.count))
}
