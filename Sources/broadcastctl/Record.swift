import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

struct Record: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record the screen to a file until Ctrl-C or --duration, then say where it is.",
        usage: "broadcastctl record [<options>] [<file>]",
        discussion: """
            Starts a broadcast with the record handler (no questions asked), shows its progress on a \
            terminal (elapsed time, size, drops, fps, bit rate, silent audio) and prints the file, its \
            duration and its size when it ends. A relative FILE is taken from the current directory. \
            Other broadcasts running share their capture with it, and it says so.

            Examples:
              broadcastctl record
              broadcastctl record talk.mkv --duration 10m
              broadcastctl record --region 0,0,1280x720 --fps 60 clip.mp4
              broadcastctl record --set codec=hevc --set crf=24 demo.mp4
              broadcastctl record --camera default --set cameraPosition=top-left \\
                  tutorial.mp4
            """)
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The file to write (.mp4 or .mkv); default $XDG_VIDEOS_DIR/Broadcasts/<date>_<time>.mp4.") var file:
        String?
    @Option(
        name: .customLong("set"),
        help: ArgumentHelp(
            "A setting of the record handler (see `broadcastctl handlers`); repeatable.",
            valueName: "KEY=VALUE"))
    var assignments: [String] = []
    @Option(help: ArgumentHelp("Stop by itself after this much live time: 90, 90s, 10m, 1h30m.", valueName: "TIME"))
    var duration: DurationArgument?
    @OptionGroup(title: "Capture (broadcastd's options by default)") var capture: CaptureOptions
    @Flag(help: "Print JSON lines: {\"broadcast\", \"handler\"} once started, then the FINISHED event.") var json =
        false

    func validate() throws {
        if file?.isEmpty == true { throw ValidationError("give a file name, or none for the default") }
    }

    func run() throws {
        let url = file.map { FileSystem.absolutePath($0) }
        try runToTheEnd(
            handler: "record", url: url, assignments: assignments, duration: duration?.seconds, capture: capture.choice,
            connection: connection, json: json)
    }
}

struct Stream: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stream the screen live (SRT, RTMP, WHIP, HLS) until Ctrl-C or --duration.",
        usage: "broadcastctl stream [<options>] <url>",
        discussion: """
            Starts a broadcast with the stream handler to srt://HOST:PORT (MPEG-TS), \
            rtmp[s]://HOST/APP (FLV), whips://HOST/PATH (WebRTC to a WHIP endpoint over \
            HTTPS; whip:// over HTTP), hls:///DIR/index.m3u8 (HLS segments in a folder) or \
            http[s]://HOST/PATH/index.m3u8 (HLS by HTTP PUT). It says when it connects, why it \
            cannot and when it reconnects, shows its progress on a terminal and says how it ended.

            Examples:
              broadcastctl stream srt://example.net:9000
              broadcastctl stream rtmp://live.example.net/app --set key=SECRET \\
                  --duration 1h30m
              broadcastctl stream whips://live.example.net/whip/ID --set key=TOKEN
              broadcastctl stream hls:///var/www/live/index.m3u8
            """)
    @OptionGroup var connection: ConnectionOptions
    @Argument(
        help: ArgumentHelp(
            "Where to stream: srt://, rtmp[s]://, whip[s]://, hls:/// or http[s]:// " + "(see `broadcastctl handlers`)."
        ))
    var url: String
    @Option(
        name: .customLong("set"),
        help: ArgumentHelp(
            "A setting of the stream handler (see `broadcastctl handlers`); repeatable.",
            valueName: "KEY=VALUE"))
    var assignments: [String] = []
    @Option(help: ArgumentHelp("Stop by itself after this much live time: 90, 90s, 10m, 1h30m.", valueName: "TIME"))
    var duration: DurationArgument?
    @OptionGroup(title: "Capture (broadcastd's options by default)") var capture: CaptureOptions
    @Flag(help: "Print JSON lines: {\"broadcast\", \"handler\"} once started, then the FINISHED event.") var json =
        false

    func run() throws {
        try runToTheEnd(
            handler: "stream", url: url, assignments: assignments, duration: duration?.seconds, capture: capture.choice,
            connection: connection, json: json)
    }
}

/// `record` and `stream`: START without questions, a progress line on a terminal until the broadcast ends
/// (Ctrl-C stops it), then how it ended. Every other line first clears the progress line, which is drawn again after.
private func runToTheEnd(
    handler: String, url: String?, assignments: [String], duration: Double?, capture: CaptureChoice?,
    connection: ConnectionOptions, json: Bool
) throws {
    try reporting(json: json) {
        let launch = Launch(client: try connection.connect(), handler: handler, json: json)
        launch.brief = true
        guard
            let id = try launch.begin(
                url: url, assignments: assignments, duration: duration, capture: capture,
                interactive: false)
        else { return }
        if json {
            print(compactJSON(BroadcastStarted(broadcast: id, handler: handler)))
            Terminal.flushOutput()
            return try launch.waitForFinish(id: id)
        }
        var line = StatusLine()
        var connections = ConnectionReport()
        if let status = try launch.settledStatus(of: id) {
            line.update(status)
            let (lines, warnings) = launch.started(status)
            print((["broadcast \(id) started with handler \(handler)"] + lines).joined(separator: "\n"))
            warnings.forEach(printError)
        }
        Terminal.flushOutput()
        // The progress goes to a terminal only, redrawn in place on standard error, as ffmpeg's does.
        let progress = Terminal.isInteractive(2) ? ProgressLine() : nil
        launch.beforeOutput = { progress?.clear() }
        defer { progress?.clear() }
        try launch.waitForFinish(
            id: id,
            progress: { event in
                switch event {
                case .stateChanged(let s) where s.broadcast == id: line.update(s)
                case .serviceInfo(let i) where i.broadcast == id:
                    line.update(i)
                    let news = connections.update(i.handler ?? [:])
                    if !news.isEmpty {
                        progress?.clear()
                        news.forEach(printError)
                    }
                default: return
                }
                progress?.draw(line)
            }, interrupted: { progress?.clear() })
    }
}

/// One line on standard error, redrawn in place with the fields that fit the terminal's width, read anew at every
/// draw so that a resize is followed.
final class ProgressLine {
    private var shown = 0

    func draw(_ line: StatusLine) {
        let columns = Terminal.columns(2) ?? 80
        let fitted = line.fitted(columns: columns)
        // After a narrowing, the last line drawn may have been wrapped by the terminal onto more rows.
        let rows = shown == 0 ? 1 : (shown + columns - 1) / columns
        Terminal.prompt((rows > 1 ? "\u{1B}[\(rows - 1)A" : "") + "\r\u{1B}[J" + fitted)
        shown = fitted.count
    }

    func clear() {
        guard shown > 0 else { return }
        Terminal.prompt("\r\u{1B}[K")
        shown = 0
    }
}
