import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastImage
import BroadcastProtocol
import BroadcastSystem

struct Start: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start a broadcast: picks the handler, runs broadcast-setup for its URL and fields.")
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The handler to broadcast to (see `broadcastctl handlers`); on a terminal, without it: a list to pick from.",
            completion: HandlerNames.completion)
    var handler: String?
    @Option(help: "The broadcast URL.") var url: String?
    @Option(name: .customLong("set"), help: "A setup field, KEY=VALUE; repeatable.") var assignments: [String] = []
    @Option(help: ArgumentHelp("Finish by itself after this much live (unpaused) time: 90, 90s, 10m, 1h30m.", valueName: "TIME"))
    var duration: DurationArgument?
    @Flag(help: "Wait until the broadcast finishes; exit 1 if it finished with an error. Ctrl-C stops it.") var wait = false
    @Flag(help: "Print JSON lines: {\"broadcast\", \"handler\"} once started, then (with --wait) the FINISHED event.") var json = false

    func run() throws {
        try reporting(json: json) {
            let client = try connection.connect()
            let handler = try handler ?? HandlerPicker.pick(from: client.handlers())
            try client.subscribe()
            let id = try HandlerNames.suggesting(handler, client: client) { try client.start(handler: handler, maxDuration: duration?.seconds) }
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
        if case .exited(130) = try ChildProcess(path: path, arguments: arguments, environment: Environment.all).wait() {
            throw ExitCode(130)  // cancelled with Ctrl-C; broadcast-setup said so
        }
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
