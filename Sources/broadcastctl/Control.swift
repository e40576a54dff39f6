import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastImage
import BroadcastProtocol
import BroadcastSystem

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
