import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// What to capture, for this broadcast: broadcastd's options are the defaults. The first broadcast of a capture
/// chooses it; one that joins a running capture with other settings is refused, naming it (a lower --fps joins).
struct CaptureOptions: ParsableArguments {
    @Option(help: "Capture this X display (e.g. :1), through X11.") var display: String?
    @Option(help: "Capture one RandR monitor or output by name (see `broadcastctl sources`).") var output: String?
    @Option(help: "Capture a region of the screen, X,Y,WIDTHxHEIGHT.") var region: String?
    @Option(help: ArgumentHelp("Capture one window (see `broadcastctl sources`).", valueName: "ID|CLASS|TITLE"))
    var window: String?
    @Option(help: ArgumentHelp("Capture one application: its window and its sound.", valueName: "NAME|PID")) var app:
        String?
    @Option(help: "Frames per second (1-240).") var fps: Int?
    @Option(help: "The pointer: embedded, metadata or hidden.") var cursor: String?
    @Option(
        name: .customLong("exclude-window"),
        help: ArgumentHelp(
            "Never capture windows of this class, besides broadcastd's list; repeatable (X11).",
            valueName: "CLASS"))
    var excludeWindows: [String] = []
    @Option(
        help: ArgumentHelp(
            "A camera for handlers that take one: default, none, or a name, description or serial "
                + "(see `broadcastctl sources`); record, stream and replay then put it in a corner of the "
                + "picture (their camera=on; see cameraPosition and cameraSize).",
            valueName: "NAME|default|none"))
    var camera: String?

    var choice: CaptureChoice? {
        let choice = CaptureChoice(
            display: display, output: output, region: region, window: window, app: app, frameRate: fps,
            cursor: cursor, excludeWindows: excludeWindows.isEmpty ? nil : excludeWindows, camera: camera)
        return choice.isEmpty ? nil : choice
    }

    func validate() throws {
        if let problem = choice?.problem { throw ValidationError(problem) }
    }
}

/// A broadcast from START to its end, as `start`, `record` and `stream` run it.
final class Launch {
    let client: ControllerClient
    let handler: String
    let json: Bool
    /// The finish in a line (the file, its duration and size), not the whole result: for `record`.
    var brief = false
    /// Events read while waiting for something else, in order: `waitForFinish` takes them first.
    private var backlog: [ControllerClient.Event] = []
    /// The broadcast's status in the STATE_CHANGED that said it was live (or paused).
    private var liveStatus: BroadcastStatus?
    /// Called before anything is printed while a broadcast is waited for (`record`'s progress line clears itself).
    var beforeOutput: () -> Void = {}
    /// The file each broadcast writes, as its status last said: where a recording is when broadcastd stops.
    private var files: [UInt32: String] = [:]
    /// The broadcast's `audio` setting (app, mic, both, none) when its handler has one and it is known here.
    private(set) var audio: String?
    /// Whose capture the broadcast joined, when others were running.
    private(set) var joined: String?

    init(client: ControllerClient, handler: String, json: Bool) {
        self.client = client
        self.handler = handler
        self.json = json
    }

    /// START, then broadcast-setup for the URL and fields (asking on a terminal when `interactive`); the id once
    /// the broadcast is live, or nil (its finish printed) when it finished before.
    func begin(
        url: String?, assignments: [String], duration: Double?, capture: CaptureChoice?,
        interactive: Bool
    ) throws -> UInt32? {
        try client.subscribe()
        let asking = interactive && Terminal.isInteractive(0)
        var assignments = assignments
        if let manifest = try client.handlers().first(where: { $0.name == handler }) {
            // --camera NAME: the handler's camera on (record, stream and replay: in a corner), unless --set says.
            if let camera = capture?.camera, camera != "none",
                manifest.setupFields?.contains(where: { $0.name == "camera" }) == true,
                !assignments.contains(where: { $0.hasPrefix("camera=") })
            {
                assignments.append("camera=on")
            }
            let values = try checkedSetup(manifest, url: url, assignments: assignments, complete: !asking)
            // What audio the broadcast takes, when known here (broadcast-setup may ask for it).
            let field = manifest.setupFields?.first { $0.name == "audio" }
            if let field, !asking || values["audio"] != nil {
                audio = values["audio"] ?? field.default
            }
        }
        // A broadcast without capture options joins the capture running, whatever it is: said once it started.
        let running = try client.status()
        let sharing = (running.broadcasts ?? []).filter { ![.idle, .finished].contains($0.state) }
            .compactMap(\.broadcast)
        let id = try HandlerNames.suggesting(handler, client: client) {
            try client.start(handler: handler, maxDuration: duration, capture: capture)
        }
        if !sharing.isEmpty {
            joined =
                "sharing the capture of broadcast\(sharing.count == 1 ? "" : "s") "
                + "\(sharing.map(String.init).joined(separator: ", ")): \(running.source)"
        }
        try runSetup(id: id, url: url, assignments: assignments, interactive: interactive)
        return try awaitStart(id: id) ? id : nil
    }

    /// The `--set` values, checked against the handler before anything is asked of broadcastd, so that a mistake is
    /// a usage error said once (exit 64) and no broadcast is requested. `complete`: nothing will be asked for.
    private func checkedSetup(
        _ manifest: HandlerManifest, url: String?, assignments: [String],
        complete: Bool
    ) throws -> [String: String] {
        do throws(BroadcastError) {
            let values = try SetupForm.parseAssignments(assignments)
            let form = SetupForm(manifest: manifest, url: url, values: values)
            if let problem = form.problem(complete: complete) { throw problem }
            return values
        } catch {
            throw UsageError(message: error.message)
        }
    }

    /// Runs broadcast-setup (next to broadcastctl, else on PATH) for the request.
    private func runSetup(id: UInt32, url: String?, assignments: [String], interactive: Bool) throws {
        var arguments = ["--request", String(id), "--socket", client.socketPath]
        if let url { arguments += ["--url", url] }
        for assignment in assignments { arguments += ["--set", assignment] }
        if !interactive { arguments.append("--non-interactive") }
        guard let path = FileSystem.findProgram("broadcast-setup") else {
            let error = BroadcastError(.setupCancelled, "broadcast-setup was not found next to broadcastctl or on PATH")
            _ = try? client.finish()
            throw ProtocolError.refused(error)
        }
        // Ctrl-C during setup belongs to broadcast-setup, which cancels the request and says so.
        Signals.ignore(Signals.interrupt)
        defer { Signals.restoreDefault(Signals.interrupt) }
        let ended = try ChildProcess(path: path, arguments: arguments, environment: Environment.all).wait()
        if case .exited(130) = ended {
            throw ExitCode(130)  // cancelled with Ctrl-C; broadcast-setup said so
        }
        if case .exited(64) = ended {
            // A mistake in the setup given, which broadcast-setup said: the request it cancelled is not said again.
            _ = try? awaitStart(id: id, quietly: true)
            throw ExitCode(Exit.usage)
        }
    }

    /// Waits until the broadcast is live or has finished; false (after printing why) if it finished.
    private func awaitStart(id: UInt32, quietly: Bool = false) throws -> Bool {
        while true {
            guard let event = try client.nextEvent(timeoutMilliseconds: 30_000) else {
                throw ProtocolError.refused(BroadcastError(.handlerFailed, "broadcast \(id) did not start within 30 s"))
            }
            switch event {
            case .stateChanged(let status) where status.broadcast == id && [.live, .paused].contains(status.state):
                liveStatus = status
                return true
            case .finished(let finished) where finished.broadcast == id:
                if !quietly { try report(finished) }
                return false
            default:
                continue
            }
        }
    }

    /// The broadcast's status as it went live, from the STATE_CHANGED that said so: the file it writes (a handler
    /// names it as it starts), the audio streams found silent and the memory warning are in it, with no round trip.
    func settledStatus(of id: UInt32) throws -> BroadcastStatus? {
        let status =
            if let liveStatus, liveStatus.broadcast == id {
                liveStatus
            } else {
                try client.status().broadcasts?.first { $0.broadcast == id }
            }
        if let file = status?.file { files[id] = file }
        return status
    }

    /// Lines a user should read once the broadcast is live: where it goes, whose capture it shares, and which audio
    /// it takes is silent and why.
    func started(_ status: BroadcastStatus) -> (lines: [String], warnings: [String]) {
        var lines: [String] = []
        if let file = status.file { lines.append("writing \(file)") }
        if let joined { lines.append(joined) }
        if status.state == .paused { lines.append("paused (a pause was asked for before it went live)") }
        let warnings =
            SilenceWarning.lines(status.silentAudio ?? [:], audio: audio)
            + (status.memoryWarning.map { ["warning: \($0)"] } ?? [])
        return (lines, warnings)
    }

    /// Until the broadcast finishes; Ctrl-C (or SIGTERM) finishes it (`stopsOnInterrupt`), or only ends the wait.
    /// `progress` is called with each other event.
    func waitForFinish(
        id: UInt32, stopsOnInterrupt: Bool = true, progress: ((ControllerClient.Event) -> Void)? = nil,
        interrupted: (() -> Void)? = nil
    ) throws {
        try waitForFinishes(of: [id], stopsOnInterrupt: stopsOnInterrupt, progress: progress, interrupted: interrupted)
    }

    /// Until every broadcast of `ids` finishes, each reported as it does; exit status 1 when any failed.
    func waitForFinishes(
        of ids: Set<UInt32>, stopsOnInterrupt: Bool = true, progress: ((ControllerClient.Event) -> Void)? = nil,
        interrupted: (() -> Void)? = nil
    ) throws {
        let signals = try SignalDescriptor(signals: [Signals.interrupt, Signals.terminate])
        var stopping = false
        var waiting = ids
        var failed = false
        while !waiting.isEmpty {
            if !stopping, signals.next() != nil {
                stopping = true
                interrupted?()
                guard stopsOnInterrupt else { throw ExitCode(130) }
                for id in waiting.sorted() {
                    printError("stopping broadcast \(id)…")
                    _ = try? client.finish(broadcast: id)
                }
            }
            guard let event = backlog.isEmpty ? try nextEvent(waitingFor: waiting) : backlog.removeFirst() else {
                continue
            }
            if case .stateChanged(let status) = event, let id = status.broadcast, let file = status.file {
                files[id] = file
            }
            guard case .finished(let finished) = event, waiting.contains(finished.broadcast) else {
                progress?(event)
                continue
            }
            waiting.remove(finished.broadcast)
            do { try report(finished) } catch let error as ExitCode where error.rawValue == Exit.failed {
                failed = true
            }
        }
        if failed { throw ExitCode(Exit.failed) }
    }

    /// The next event; broadcastd going away is said as such, with where each recording waited for is (what was
    /// written stays playable).
    private func nextEvent(waitingFor ids: Set<UInt32>) throws -> ControllerClient.Event? {
        let event: ControllerClient.Event?
        do {
            event = try client.nextEvent(timeoutMilliseconds: 200)
        } catch {
            guard error == .closed else { throw error }
            beforeOutput()
            let kept = ids.sorted().compactMap { id in
                files[id].map { "broadcast \(id)'s recording so far is in \($0)" }
            }
            throw ProtocolError.refused(
                BroadcastError(
                    .notRunning,
                    "broadcastd stopped before broadcast" + (ids.count == 1 ? "" : "s")
                        + " \(ids.sorted().map(String.init).joined(separator: ", ")) finished"
                        + (kept.isEmpty ? "" : "; " + kept.joined(separator: "; ") + " (playable up to there)")))
        }
        return event
    }

    /// Prints how the broadcast finished and its result; exit status 1 when it finished with an error.
    func report(_ finished: FinishedEvent) throws {
        beforeOutput()
        if json {
            print(compactJSON(finished))
            if finished.error != nil { throw ExitCode(Exit.failed) }
            return
        }
        if let error = finished.error {
            printError("broadcast \(finished.broadcast) finished with an error: \(error.message)")
            if !brief {
                printResult(finished.result)
            } else if let saved = ResultText.brief(finished.result) {
                print("what was written is in \(saved)")
            }
            throw ExitCode(Exit.failed)
        }
        print("broadcast \(finished.broadcast) \(finished.discarded == true ? "discarded" : "finished")")
        guard brief || finished.discarded == true, let saved = ResultText.brief(finished.result) else {
            return printResult(finished.result)
        }
        print(finished.discarded == true ? "deleted \(saved)" : "saved \(saved)")
        if case .string(let url)? = finished.result?["uploadedURL"] { print("uploaded to \(url)") }
    }
}

/// The handler's result in words, as `status` shows it; it goes to stdout even when the broadcast failed (what was produced).
func printResult(_ result: [String: JSONValue]?) {
    guard let result else { return }
    print(StatusText.describe(result: result).joined(separator: "\n"))
}
