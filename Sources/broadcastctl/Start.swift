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
    @Option(
        help:
            "The handler to broadcast to (see `broadcastctl handlers`); on a terminal, without it: a list to pick from.",
        completion: HandlerNames.completion)
    var handler: String?
    @Option(help: "The broadcast URL.") var url: String?
    @Option(name: .customLong("set"), help: ArgumentHelp("A setup field; repeatable.", valueName: "KEY=VALUE"))
    var assignments: [String] = []
    @Option(
        help: ArgumentHelp(
            "Finish by itself after this much live (unpaused) time: 90, 90s, 10m, 1h30m.", valueName: "TIME"))
    var duration: DurationArgument?
    @OptionGroup(title: "Capture (broadcastd's options by default)") var capture: CaptureOptions
    @Flag(help: "Wait until the broadcast finishes; exit 1 if it finished with an error. Ctrl-C stops it.") var wait =
        false
    @Flag(help: "Print JSON lines: {\"broadcast\", \"handler\"} once started, then (with --wait) the FINISHED event.")
    var json = false

    func run() throws {
        try reporting(json: json) {
            let client = try connection.connect()
            let handler = try handler ?? HandlerPicker.pick(from: client.handlers())
            let launch = Launch(client: client, handler: handler, json: json)
            guard
                let id = try launch.begin(
                    url: url, assignments: assignments, duration: duration?.seconds, capture: capture.choice,
                    interactive: true)
            else { return }
            if json {
                print(compactJSON(BroadcastStarted(broadcast: id, handler: handler)))
            } else {
                print("broadcast \(id) started with handler \(handler)")
                if let status = try launch.settledStatus(of: id) {
                    let (lines, warnings) = launch.started(status)
                    lines.forEach { print($0) }
                    warnings.forEach(printError)
                }
            }
            Terminal.flushOutput()
            if wait { try launch.waitForFinish(id: id) }
        }
    }
}

/// What `start --json` prints once the broadcast is live.
struct BroadcastStarted: Encodable {
    var broadcast: UInt32
    var handler: String
}
