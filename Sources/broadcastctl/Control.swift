import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

struct Pause: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pause a broadcast (takes effect once it is live); the others go on.",
        usage: "broadcastctl pause [<options>]")
    @OptionGroup var request: BroadcastRequestOptions
    func run() throws {
        try request.send(verb: "pause") {
            try $0.pause(broadcast: $1)
        } saying: { before, after in
            let at = StatusLine.clock(after.elapsed ?? 0)
            if before?.state == .paused { return "broadcast \(after.broadcast ?? 0) was already paused, at \(at)" }
            if after.state != .paused { return "broadcast \(after.broadcast ?? 0) will pause once it is live" }
            return "broadcast \(after.broadcast ?? 0) paused at \(at)"
        }
    }
}

struct Resume: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resume a paused broadcast.",
        usage: "broadcastctl resume [<options>]")
    @OptionGroup var request: BroadcastRequestOptions
    func run() throws {
        try request.send(verb: "resume") {
            try $0.resume(broadcast: $1)
        } saying: { before, after in
            let at = StatusLine.clock(after.elapsed ?? 0)
            if before?.state == .live { return "broadcast \(after.broadcast ?? 0) was not paused (live at \(at))" }
            if after.state != .live && after.state != .paused {
                return "broadcast \(after.broadcast ?? 0) will not pause once live"
            }
            return "broadcast \(after.broadcast ?? 0) resumed at \(at)"
        }
    }
}

struct Stop: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Finish a broadcast, or every one with --all, and say how it ended (its file, duration and size).",
        usage: "broadcastctl stop [<options>]")
    @OptionGroup var request: BroadcastRequestOptions
    @Flag(help: "Finish every broadcast running.") var all = false

    func validate() throws {
        if all && request.broadcast != nil { throw ValidationError("--all and --broadcast: give one of them") }
    }

    func run() throws {
        try request.finishing { client in
            guard all else { return [try client.finish(broadcast: request.broadcast)].compactMap { $0 } }
            let running = SharedEncoderText.toStop(try client.status().broadcasts ?? [])
            return try running.compactMap { try client.finish(broadcast: $0) }
        }
    }
}

struct Discard: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Finish the broadcast and throw away what it produced (a recording is deleted).",
        usage: "broadcastctl discard [<options>]",
        discussion: """
            The handler deletes its output, and discard names the file deleted. Handlers that cannot \
            (stream: what was sent is gone) are refused and the broadcast goes on. A broadcast that has \
            finished already (also after its handler crashed) is discarded by broadcastd: it removes the \
            file the handler reported in its result, and nothing else.
            """)
    @OptionGroup var request: BroadcastRequestOptions
    func run() throws { try request.finishing { [try $0.discard(broadcast: request.broadcast)].compactMap { $0 } } }
}

/// Pause, resume, stop and discard: a line saying what was done, or `{"broadcast": N}` with --json.
struct BroadcastRequestOptions: ParsableArguments {
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The broadcast to act on (`broadcastctl status` lists them); needed when several run.") var broadcast:
        UInt32?
    @Flag(help: "Print {\"broadcast\": N}, the broadcast acted on.") var json = false

    /// Sends `request`, then says what it did from the broadcast's status before and after.
    func send(
        verb: String, _ request: (ControllerClient, UInt32?) throws -> UInt32?,
        saying: (_ before: BroadcastStatus?, _ after: BroadcastStatus) -> String
    ) throws {
        try reporting(json: json) {
            let client = try connection.connect()
            let before = json ? nil : try? status(of: broadcast, client)
            let id = try request(client, broadcast)
            if json { return print(compactJSON(BroadcastReference(broadcast: id))) }
            if let after = try status(of: id, client) { print(saying(before, after)) }
        }
    }

    /// Sends the finish (or discard) that `request` makes, then waits for each broadcast it names to end and
    /// prints how it did, with what it produced; Ctrl-C stops waiting (the broadcasts finish all the same).
    func finishing(_ request: (ControllerClient) throws -> [UInt32]) throws {
        try reporting(json: json) {
            let client = try connection.connect()
            if !json { try client.subscribe() }
            let ids = try request(client)
            if json { return ids.forEach { print(compactJSON(BroadcastReference(broadcast: $0))) } }
            for id in ids {
                if let status = try status(of: id, client), let elapsed = status.elapsed {
                    printError("stopping broadcast \(id) at \(StatusLine.clock(elapsed))…")
                }
            }
            try Launch(client: client, handler: "", json: false).waitForFinishes(of: Set(ids), stopsOnInterrupt: false)
        }
    }

    /// The status of broadcast `id` (of the only one running when nil), if there is one.
    private func status(of id: UInt32?, _ client: ControllerClient) throws -> BroadcastStatus? {
        let all = try client.status().broadcasts ?? []
        if let id { return all.first { $0.broadcast == id } }
        let active = all.filter { ![.idle, .finished].contains($0.state) }
        return active.count == 1 ? active[0] : nil
    }
}
