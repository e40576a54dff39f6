import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastImage
import BroadcastProtocol
import BroadcastSystem

struct Snapshot: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Save the current frame as a PNG file: a quick look without recording.",
        usage: "broadcastctl snapshot [<options>] <file>",
        discussion: """
            The frame is the latest one of a running broadcast (while paused: the last before the \
            pause); with no broadcast, broadcastd grabs one for the purpose. An existing FILE is replaced.

            Examples:
              broadcastctl snapshot screen.png
              broadcastctl snapshot - | display -        (standard output)
            """)
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "Name the frame as this broadcast's (they all share one capture).") var broadcast: UInt32?
    @Argument(help: "The PNG file to write; - for standard output.") var file: String
    @Flag(help: "Print what was saved as JSON: file, width, height, bytes, presentationTime, broadcast.") var json =
        false

    func validate() throws {
        if file == "-" && json { throw ValidationError("--json and - both want standard output; give a file name") }
        if file.isEmpty { throw ValidationError("give a file name for the PNG, or - for standard output") }
        if file == "-" && Terminal.isInteractive(1) {
            throw ValidationError(
                "standard output is a terminal, which cannot show a PNG; give a file name, or pipe it (- | display -)")
        }
    }

    func run() throws {
        try reporting(json: json) {
            let (description, frame) = try connection.connect().snapshot(broadcast: broadcast)
            guard let format = description.video.videoFormat else {
                throw ProtocolError.malformed(.snapshot, "unknown pixel format \(description.video.format)")
            }
            let rgb = RGB.convert(
                UnsafeRawBufferPointer(start: frame.base, count: frame.size), format: format,
                fullRange: description.colorRange == "full")
            let png = try PNG.encode(rgb: rgb, width: format.width, height: format.height)
            if file == "-" { return try Terminal.writeOutput(png) }
            try FileSystem.writeFile(file, png)
            let saved = SavedSnapshot(
                file: file, width: format.width, height: format.height, bytes: png.count,
                presentationTime: description.presentationTime, broadcast: description.broadcast)
            print(
                json
                    ? prettyJSON(saved)
                    : "saved \(format.width)x\(format.height) "
                        + (description.broadcast.map { "frame of broadcast \($0)" } ?? "frame")
                        + " to \(file) (\(png.count) bytes)")
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
