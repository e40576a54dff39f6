import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastImage
import BroadcastProtocol
import BroadcastSystem

/// Exit statuses (documented in --help and the README).
enum Exit {
    /// The request was refused, or the broadcast finished with an error.
    static let failed: Int32 = 1
    /// broadcastd is not running, or the socket is another user's (`not-running` either way).
    static let notRunning: Int32 = 69
}

struct ConnectionOptions: ParsableArguments {
    @Option(help: "Socket path (default: $BROADCASTD_SOCKET or $XDG_RUNTIME_DIR/broadcastd/broadcastd.sock).")
    var socket: String?

    func socketPath() throws(ProtocolError) -> String { try SocketLocation.resolve(explicit: socket) }
    func connect() throws(ProtocolError) -> ControllerClient { try ControllerClient(socketPath: socketPath()) }
}

/// Runs `body`, turning broadcastd's refusals into a message on stderr and the documented exit status;
/// with `json`, the refusal also goes to stdout as `{"error": {"code", "message"}}`.
func reporting(json: Bool, _ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as ExitCode {
        throw error
    } catch ProtocolError.refused(let error) {
        if json { print(compactJSON(["error": error])) }
        printError("broadcastctl: \(error.message)")
        throw ExitCode(error.code == .notRunning ? Exit.notRunning : Exit.failed)
    } catch {
        if json { print(compactJSON(["error": BroadcastError(BroadcastError.Code(rawValue: "broadcastctl"), "\(error)")])) }
        printError("broadcastctl: \(error)")
        throw ExitCode(Exit.failed)
    }
}

func printError(_ text: String) { Terminal.prompt(text + "\n") }

struct Broadcastctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broadcastctl",
        abstract: "Controls broadcastd: start, pause, resume and stop broadcasts; show status and handlers.",
        discussion: """
            Examples:
              broadcastctl handlers
              broadcastctl sources
              broadcastctl start --handler inspect --url file:///tmp/summary.json --duration 5 --wait
              broadcastctl start --handler inspect        (asks for the URL and setup fields)
              broadcastctl pause; broadcastctl resume; broadcastctl stop
              broadcastctl stop --broadcast 2; broadcastctl stop --all    (several at once)
              broadcastctl discard                       (stop, and delete what was recorded)
              broadcastctl status --watch
              broadcastctl snapshot screen.png
            Every command takes --json for scripts.
            Exit status: 0 success; 1 refused, or the broadcast finished with an error; 64 bad usage;
            69 broadcastd is not running, or another user's program listens on the socket (it is sent nothing).
            """,
        subcommands: [Handlers.self, Sources.self, Start.self, Pause.self, Resume.self, Stop.self, Discard.self, Status.self, Snapshot.self])
}

struct Handlers: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List installed handlers and their setup fields (the picker).")
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        try reporting(json: json) {
            let handlers = try connection.connect().handlers()
            if json { return print(prettyJSON(HandlerList(handlers: handlers))) }
            if handlers.isEmpty { print("no handlers installed") }
            for handler in handlers {
                print("\(handler.name) — \(handler.displayName)")
                if let description = handler.description { print("    \(description)") }
                if let url = handler.url {
                    print("    url: \(url.prompt)\(url.default.map { " [\($0)]" } ?? "")\(url.required == true ? " (required)" : "")")
                }
                for field in handler.setupFields ?? [] {
                    let flags = [field.required == true ? "required" : nil, field.secret == true ? "secret" : nil].compactMap { $0 }
                    print("    --set \(field.name)=…  \(field.prompt)\(field.default.map { " [\($0)]" } ?? "")\(flags.isEmpty ? "" : " (\(flags.joined(separator: ", ")))")")
                }
            }
        }
    }
}

struct Sources: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what broadcastd captures, and the RandR monitors and outputs (broadcastd --output NAME) and top-level windows (broadcastd --window ID|CLASS|TITLE) it could capture.")
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        try reporting(json: json) {
            let list = try connection.connect().sources()
            if json { return print(prettyJSON(list)) }
            print("capturing: \(list.source)")
            if let width = list.screenWidth, let height = list.screenHeight { print("screen: \(width)x\(height)") }
            if list.kind == "x11" && list.outputs.isEmpty { print("no RandR outputs listed") }
            for output in list.outputs {
                var notes = output.primary ? ["primary"] : []
                if output.rotation != 0 { notes.append("rotated \(output.rotation)°") }
                if output.reflected { notes.append("reflected") }
                print("  \(output.name)  \(output.width)x\(output.height)+\(output.x)+\(output.y)\(notes.isEmpty ? "" : "  (\(notes.joined(separator: ", ")))")")
            }
            if let windows = list.windows {
                print(windows.isEmpty ? "no top-level windows" : "windows (topmost first):")
                for w in windows.reversed() {
                    let pid = w.pid.map { "pid \($0)" } ?? "no pid"
                    print("  0x\(String(w.id, radix: 16))  \(w.class.isEmpty ? w.instance : w.class)  \"\(w.title)\"  \(pid)  \(w.width)x\(w.height)+\(w.x)+\(w.y)\(w.mapped ? "" : "  (hidden)")")
                }
            }
        }
    }
}

struct Start: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start a broadcast: picks the handler, runs broadcast-setup for its URL and fields.")
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The handler to broadcast to (see `broadcastctl handlers`).") var handler: String
    @Option(help: "The broadcast URL.") var url: String?
    @Option(name: .customLong("set"), help: "A setup field, KEY=VALUE; repeatable.") var assignments: [String] = []
    @Option(help: "Finish by itself after this many seconds of live (unpaused) time.") var duration: Double?
    @Flag(help: "Wait until the broadcast finishes; exit 1 if it finished with an error. Ctrl-C stops it.") var wait = false
    @Flag(help: "Print JSON lines: {\"broadcast\", \"handler\"} once started, then (with --wait) the FINISHED event.") var json = false

    func validate() throws {
        if let duration, !(duration > 0) { throw ValidationError("--duration must be a positive number of seconds") }
    }

    func run() throws {
        try reporting(json: json) {
            let client = try connection.connect()
            try client.subscribe()
            let id = try client.start(handler: handler, maxDuration: duration)
            try runSetup(id: id, client: client)
            let started = try awaitStart(id: id, client: client)
            guard started else { return }
            print(json ? compactJSON(BroadcastStarted(broadcast: id, handler: handler)) : "broadcast \(id) started with handler \(handler)")
            Terminal.flushOutput()
            if wait { try waitForFinish(id: id, client: client) }
        }
    }

    /// Runs broadcast-setup (next to broadcastctl, else on PATH) for the request.
    private func runSetup(id: UInt32, client: ControllerClient) throws {
        var arguments = ["--request", String(id), "--socket", client.socketPath]
        if let url { arguments += ["--url", url] }
        for assignment in assignments { arguments += ["--set", assignment] }
        guard let path = FileSystem.findProgram("broadcast-setup") else {
            let error = BroadcastError(.setupCancelled, "broadcast-setup was not found next to broadcastctl or on PATH")
            _ = try? client.finish()
            throw ProtocolError.refused(error)
        }
        // Ctrl-C during setup belongs to broadcast-setup, which cancels the request and says so.
        Signals.ignore(Signals.interrupt)
        defer { Signals.restoreDefault(Signals.interrupt) }
        _ = try ChildProcess(path: path, arguments: arguments, environment: Environment.all).wait()
    }

    /// Waits until the broadcast is live or has finished; false (after printing why) if it finished.
    private func awaitStart(id: UInt32, client: ControllerClient) throws -> Bool {
        while true {
            guard let event = try client.nextEvent(timeoutMilliseconds: 30_000) else {
                throw ProtocolError.refused(BroadcastError(.handlerFailed, "broadcast \(id) did not start within 30 s"))
            }
            switch event {
            case .stateChanged(let status) where status.broadcast == id && [.live, .paused].contains(status.state):
                return true
            case .finished(let finished) where finished.broadcast == id:
                try report(finished)
                return false
            default:
                continue
            }
        }
    }

    private func waitForFinish(id: UInt32, client: ControllerClient) throws {
        let signals = try SignalDescriptor(signals: [Signals.interrupt, Signals.terminate])
        var stopping = false
        while true {
            if !stopping, signals.next() != nil {
                stopping = true
                printError("stopping broadcast \(id)…")
                _ = try? client.finish()
            }
            guard let event = try client.nextEvent(timeoutMilliseconds: 200) else { continue }
            if case .finished(let finished) = event, finished.broadcast == id { return try report(finished) }
        }
    }

    /// Prints how the broadcast finished and its result; exit status 1 when it finished with an error.
    private func report(_ finished: FinishedEvent) throws {
        if json {
            print(compactJSON(finished))
            if finished.error != nil { throw ExitCode(Exit.failed) }
            return
        }
        if let error = finished.error {
            printError("broadcast \(finished.broadcast) finished with an error: \(error.message)")
            printResult(finished.result)
            throw ExitCode(Exit.failed)
        }
        print("broadcast \(finished.broadcast) \(finished.discarded == true ? "discarded" : "finished")")
        printResult(finished.result)
    }
}

/// What `start --json` prints once the broadcast is live.
struct BroadcastStarted: Encodable {
    var broadcast: UInt32
    var handler: String
}

/// The handler's result, as `status` shows it; it goes to stdout even when the broadcast failed (what was produced).
private func printResult(_ result: [String: JSONValue]?) {
    guard let result else { return }
    print(StatusText.describe(result: result).joined(separator: "\n"))
}

struct Pause: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Pause a broadcast (takes effect once it is live); the others go on.")
    @OptionGroup var request: BroadcastRequestOptions
    func run() throws { try request.send { try $0.pause(broadcast: $1) } }
}

struct Resume: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Resume a paused broadcast.")
    @OptionGroup var request: BroadcastRequestOptions
    func run() throws { try request.send { try $0.resume(broadcast: $1) } }
}

struct Stop: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Finish a broadcast, or every one with --all.")
    @OptionGroup var request: BroadcastRequestOptions
    @Flag(help: "Finish every broadcast running.") var all = false

    func validate() throws {
        if all && request.broadcast != nil { throw ValidationError("--all and --broadcast: give one of them") }
    }

    func run() throws {
        guard all else { return try request.send { try $0.finish(broadcast: $1) } }
        try reporting(json: request.json) {
            let client = try request.connection.connect()
            let running = (try client.status().broadcasts ?? []).filter { ![.idle, .finished].contains($0.state) }
            for id in running.compactMap(\.broadcast) {
                _ = try client.finish(broadcast: id)
                if request.json { print(compactJSON(BroadcastReference(broadcast: id))) }
            }
        }
    }
}

struct Discard: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Finish the broadcast and throw away what it produced (a recording is deleted).",
        discussion: """
            The handler deletes its output and its result says "discarded": true. Handlers that cannot
            (stream: what was sent is gone) are refused and the broadcast goes on. A broadcast that has
            finished already (also after its handler crashed) is discarded by broadcastd: it removes the
            file the handler reported in its result, and nothing else.
            """)
    @OptionGroup var request: BroadcastRequestOptions
    func run() throws { try request.send { try $0.discard(broadcast: $1) } }
}

/// Pause, resume and stop: quiet on success, or `{"broadcast": N}` with --json.
struct BroadcastRequestOptions: ParsableArguments {
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The broadcast to act on (`broadcastctl status` lists them); needed when several run.") var broadcast: UInt32?
    @Flag(help: "Print {\"broadcast\": N}, the broadcast acted on.") var json = false

    func send(_ request: (ControllerClient, UInt32?) throws -> UInt32?) throws {
        try reporting(json: json) {
            let id = try request(connection.connect(), broadcast)
            if json { print(compactJSON(BroadcastReference(broadcast: id))) }
        }
    }
}

struct Snapshot: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Save the current frame as a PNG file: a quick look without recording.",
        discussion: """
            The frame is the latest one of a running broadcast (while paused: the last before the pause);
            with no broadcast, broadcastd grabs one for the purpose. An existing FILE is replaced.
            Examples:
              broadcastctl snapshot screen.png
              broadcastctl snapshot - | display -        (standard output)
            """)
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "Name the frame as this broadcast's (they all share one capture).") var broadcast: UInt32?
    @Argument(help: "The PNG file to write; - for standard output.") var file: String
    @Flag(help: "Print what was saved as JSON: file, width, height, bytes, presentationTime, broadcast.") var json = false

    func validate() throws {
        if file == "-" && json { throw ValidationError("--json and - both want standard output; give a file name") }
        if file.isEmpty { throw ValidationError("give a file name for the PNG, or - for standard output") }
    }

    func run() throws {
        try reporting(json: json) {
            let (description, frame) = try connection.connect().snapshot(broadcast: broadcast)
            guard let format = description.video.videoFormat else {
                throw ProtocolError.malformed(.snapshot, "unknown pixel format \(description.video.format)")
            }
            let rgb = RGB.convert(UnsafeRawBufferPointer(start: frame.base, count: frame.size), format: format,
                                  fullRange: description.colorRange == "full")
            let png = try PNG.encode(rgb: rgb, width: format.width, height: format.height)
            if file == "-" { return try Terminal.writeOutput(png) }
            try FileSystem.writeFile(file, png)
            let saved = SavedSnapshot(file: file, width: format.width, height: format.height, bytes: png.count,
                                      presentationTime: description.presentationTime, broadcast: description.broadcast)
            print(json ? prettyJSON(saved) : "saved \(format.width)x\(format.height) " +
                  (description.broadcast.map { "frame of broadcast \($0)" } ?? "frame") + " to \(file) (\(png.count) bytes)")
        }
    }
}

struct SavedSnapshot: Encodable {
    var file: String
    var width: Int
    var height: Int
    var bytes: Int
    var presentationTime: UInt64
    var broadcast: UInt32?
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the state of every broadcast, or of one.")
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "Show this broadcast only.") var broadcast: UInt32?
    @Flag(help: "Print JSON.") var json = false
    @Flag(help: "Keep showing the state, elapsed time, fps, bit rate, drops per stream and daemon memory until interrupted: one line redrawn in place on a terminal, a line per update when piped, JSON lines with --json.") var watch = false

    func run() throws {
        try reporting(json: json) {
            let client = try connection.connect()
            guard watch else {
                var status = try client.status()
                if let broadcast {
                    guard let one = status.broadcasts?.first(where: { $0.broadcast == broadcast }) else {
                        throw ProtocolError.refused(BroadcastError(.noBroadcast, "there is no broadcast \(broadcast)"))
                    }
                    status = one
                }
                return print(json ? prettyJSON(status) : StatusText.describe(status))
            }
            try client.subscribe()
            // On a terminal one line is redrawn in place (cut to its width, so it never wraps); piped,
            // every change is a line of its own.
            let columns = json || !Terminal.isInteractive(1) ? nil : Terminal.columns() ?? 80
            var lines = StatusLines(only: broadcast)
            // Ctrl-C (or SIGTERM) ends the watch cleanly, leaving the cursor on a fresh line.
            let signals = try SignalDescriptor(signals: [Signals.interrupt, Signals.terminate])
            while true {
                if signals.next() != nil {
                    if columns != nil { print("") }
                    return
                }
                guard let event = try client.nextEvent(timeoutMilliseconds: 200) else { continue }
                if json {
                    switch event {
                    case .stateChanged(let s): print(compactJSON(s))
                    case .serviceInfo(let i): print(compactJSON(i))
                    case .urlUpdated(let u): print(compactJSON(u))
                    case .finished(let f): print(compactJSON(f))
                    }
                    Terminal.flushOutput()
                    continue
                }
                // Lines worth keeping (a URL, a finish) scroll up; the status lines below them are redrawn.
                var kept: String?
                switch event {
                case .stateChanged(let s): lines.update(s)
                case .serviceInfo(let i): lines.update(i)
                case .urlUpdated(let u): kept = "broadcast \(u.broadcast.map(String.init) ?? "-") url \(u.url)"
                case .finished(let f): kept = StatusText.line(f); lines.finished(f.broadcast)
                }
                if let columns {
                    lines.redraw(columns: columns, keeping: kept)
                } else {
                    print(kept ?? lines.changed)
                }
                Terminal.flushOutput()
            }
        }
    }
}


enum StatusText {
    static func describe(_ s: BroadcastStatus) -> String {
        guard let all = s.broadcasts, all.count > 1 else { return describeOne(s) }
        var lines = ["source: \(s.source)"]
        if let bytes = s.daemonMemory { lines.append("daemon memory: \(bytes / 1024) KiB") }
        lines.append("\(all.count) broadcasts:")
        for broadcast in all { lines += [""] + describeOne(broadcast).split(separator: "\n").map(String.init).filter { !$0.hasPrefix("source:") && !$0.hasPrefix("daemon memory:") } }
        return lines.joined(separator: "\n")
    }

    static func describeOne(_ s: BroadcastStatus) -> String {
        var lines = ["state: \(s.state)", "source: \(s.source)"]
        if let bytes = s.daemonMemory { lines.append("daemon memory: \(bytes / 1024) KiB") }
        if s.sessionLocked == true {
            lines.append("session locked: " + (s.pausedForLock == true ? "paused until it is unlocked"
                : s.blankedForLock == true ? "the privacy frame goes out instead of the screen" : "the screen is not captured meanwhile"))
        }
        if let id = s.broadcast {
            lines.append("broadcast: \(id) (handler \(s.handler ?? "?"))")
            if let url = s.url { lines.append("url: \(url)") }
            if let elapsed = s.elapsed {
                lines.append("elapsed: \(seconds(elapsed))\(s.maxDuration.map { " of at most \(seconds($0))" } ?? "")")
            }
            if s.wantsPaused == true && s.state != .paused { lines.append("pause requested: takes effect once live") }
            if let error = s.error { lines.append("error: \(error.message)") }
            if s.discarded == true { lines.append("discarded: what it produced is deleted") }
            for name in ["video", "audioApp", "audioMic"] {
                if let c = s.streams?[name] { lines.append("\(name): \(c.delivered) delivered, \(c.dropped) dropped\((c.late ?? 0) > 0 ? " (\(c.late!) of them late: broadcastd was too busy to capture them)" : "")") }
            }
            if let result = s.result { lines += describe(result: result) }
        }
        return lines.joined(separator: "\n")
    }

    /// A heading, then one `key: value` line per top-level key, indented; nested values as compact JSON.
    static func describe(result: [String: JSONValue]) -> [String] {
        ["result:"] + result.sorted(by: { $0.key < $1.key }).map { "  \($0.key): \($0.value)" }
    }

    static func line(_ f: FinishedEvent) -> String {
        "broadcast \(f.broadcast) \(f.discarded == true ? "discarded" : "finished")" + (f.error.map { ": \($0.message)" } ?? "") + (f.result.map { "  result \(compactJSON($0))" } ?? "")
    }

    static func seconds(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) s"
    }
}

Broadcastctl.main()
