import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

struct Capture: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change what the running capture takes, for every broadcast sharing it.",
        usage: "broadcastctl capture --output <name> | --region <X,Y,WxH> | --screen",
        discussion: """
            From the next frame on, every live broadcast gets the new part of the screen; a new size \
            reaches each handler as a format change. Recordings, streams and replay buffers keep \
            their size: the new area is scaled to fit, centred, with black bars where its shape \
            differs (never stretched). A region must lie within the screen. The display, frame \
            rate, cursor mode, a window or an app are chosen when capture starts: give them to \
            start, record or stream.

            Examples:
              broadcastctl capture --region 0,0,1280x720
              broadcastctl capture --output HDMI-1
              broadcastctl capture --screen
            """)
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "Capture this RandR monitor or output (see `broadcastctl sources`).") var output: String?
    @Option(help: "Capture this region of the screen, X,Y,WIDTHxHEIGHT.") var region: String?
    @Flag(help: "Capture the whole screen.") var screen = false
    @Flag(help: "Print the new status as JSON.") var json = false

    func validate() throws {
        let given = [output != nil, region != nil, screen].filter { $0 }.count
        if given != 1 { throw ValidationError("give one of --output NAME, --region X,Y,WxH or --screen") }
        if let problem = CaptureChoice(output: output, region: region).problem { throw ValidationError(problem) }
    }

    func run() throws {
        try reporting(json: json) {
            let client = try connection.connect()
            try client.changeCapture(CaptureChoice(output: output, region: region))
            let status = try client.status()
            if json { return print(prettyJSON(status)) }
            let live = (status.broadcasts ?? []).filter { ![.idle, .finished].contains($0.state) }.compactMap(
                \.broadcast)
            let chosen = output.map { "output \($0)" } ?? region.map { "region \($0)" } ?? "the whole screen"
            let sharing =
                live.isEmpty
                ? "" : ", for broadcast\(live.count == 1 ? "" : "s") " + live.map(String.init).joined(separator: ", ")
            print("capturing \(chosen) from the next frame on" + sharing)
            print("capture: \(status.source)")
        }
    }
}
