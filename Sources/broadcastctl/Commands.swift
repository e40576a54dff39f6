import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

// Commands to a broadcast's handler (protocol revision 2.3): `send` reaches any command a handler's manifest
// lists; `save` and `mark` are the replay and record handlers' own.

struct Send: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a command to a broadcast's handler (`broadcastctl handlers` lists each handler's commands).",
        usage: "broadcastctl send [<options>] <name> [<KEY=VALUE> ...]",
        discussion: """
            Arguments are KEY=VALUE; broadcastd converts a value to the number or bool the command \
            declares. Without --broadcast, the command goes to the live broadcast whose handler takes \
            it. The handler's answer is printed in words (JSON with --json). A handler that does not \
            answer within 10 s gives an error; its broadcast goes on.

            Examples:
              broadcastctl send save last=30
              broadcastctl send --broadcast 2 mark text="bug here"
            """)
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The broadcast whose handler is meant (`broadcastctl status` lists them); needed when several run.")
    var broadcast: UInt32?
    @Flag(help: "Print the answer as JSON: {\"broadcast\", \"command\", \"result\"}.") var json = false
    @Argument(help: "The command's name.") var name: String
    @Argument(help: "Its arguments, KEY=VALUE.") var assignments: [String] = []

    func run() throws {
        let arguments = try commandArguments(assignments)
        try reporting(json: json) {
            let answer = try connection.connect().send(command: name, arguments: arguments, broadcast: broadcast)
            printAnswer(answer, json: json)
        }
    }
}

/// KEY=VALUE pairs as a command's arguments, each value a string (broadcastd converts it to the declared type).
func commandArguments(_ assignments: [String]) throws -> [String: JSONValue] {
    var arguments: [String: JSONValue] = [:]
    for assignment in assignments {
        guard let equals = assignment.firstIndex(of: "="), equals != assignment.startIndex else {
            throw ValidationError("'\(assignment)' is not KEY=VALUE")
        }
        arguments[String(assignment[..<equals])] = .string(String(assignment[assignment.index(after: equals)...]))
    }
    return arguments
}

/// A command's answer: JSON, or in words, a line each (`path` first, the one most answers have).
func printAnswer(_ answer: CommandResult, json: Bool) {
    if json { return print(compactJSON(answer)) }
    if answer.result.isEmpty { return print("broadcast \(answer.broadcast): \(answer.command) done") }
    ResultText.lines(answer.result).forEach { print($0) }
}

/// A command a handler's manifest lists, as `broadcastctl handlers` shows it, and each of its arguments.
func commandLine(_ command: HandlerManifest.Command) -> String {
    "command \(command.name): \(command.help)"
}

func argumentLine(_ argument: HandlerManifest.Command.Argument) -> String {
    let notes = [argument.type.map(\.rawValue), argument.required == true ? "required" : nil].compactMap { $0 }
    return "\(argument.name)=…  \(argument.help)\(notes.isEmpty ? "" : " (\(notes.joined(separator: ", ")))")"
}

struct Save: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Save what a `replay` broadcast holds to a file, without re-encoding; prints its path.",
        usage: "broadcastctl save [<options>] [<file>]",
        discussion: """
            Starts on a keyframe at least --last seconds back (default: all the buffer holds). FILE \
            is .mp4 (fragmented MP4) or .mkv; without it, $XDG_VIDEOS_DIR/Replays/<date>_<time>.mp4. \
            An existing FILE is kept unless --overwrite. Capture goes on meanwhile, and later saves \
            work too.

            Examples:
              broadcastctl start --handler replay --set length=120
              broadcastctl save
              broadcastctl save --last 30 clip.mp4
              broadcastctl save --and-record talk.mp4   (the buffer, then the rest)
            """)
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The replay broadcast (`broadcastctl status` lists them); needed when several run.") var broadcast:
        UInt32?
    @Option(help: "Only the last this many seconds (from the keyframe at least that far back).") var last: Double?
    @Flag(help: "Then go on recording into the same file until the broadcast finishes (the buffer is its pre-roll).")
    var andRecord = false
    @Flag(help: "Replace FILE if it exists (without it, an existing file is kept and the save refused).")
    var overwrite = false
    @Flag(help: "Print the answer as JSON: {\"broadcast\", \"command\", \"result\": {\"path\", \"duration\", …}}.")
    var json = false
    @Argument(help: "The file to write (.mp4 or .mkv); a relative name is taken from the current directory.") var file:
        String?

    func validate() throws {
        if let last, !(last > 0) { throw ValidationError("--last is a number of seconds above 0") }
    }

    func run() throws {
        var arguments: [String: JSONValue] = [:]
        if let last { arguments["last"] = .number(last) }
        if let file { arguments["file"] = .string(FileSystem.absolutePath(file)) }
        if andRecord { arguments["andRecord"] = .bool(true) }
        if overwrite { arguments["overwrite"] = .bool(true) }
        try reporting(json: json) {
            let answer = try connection.connect().send(command: "save", arguments: arguments, broadcast: broadcast)
            if json { return print(compactJSON(answer)) }
            print(answer.result["path"].map { "\($0)" } ?? "saved")
            if let duration = answer.result["duration"] {
                printError("saved \(ResultText.value("duration", duration))")
            }
            if answer.result["recording"] == .bool(true) {
                printError("recording into it until the broadcast finishes")
            }
        }
    }
}

struct Mark: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add a chapter at this instant to the `record` and `replay` broadcasts running.",
        usage: "broadcastctl mark [<options>] [<text>]",
        discussion: """
            A chapter runs from its mark to the next one (ffprobe -show_chapters lists them). A \
            recording gets them when it finishes; a replay's saves get those within what they save. \
            Without --broadcast, every live broadcast that takes chapters is marked.

            Examples:
              broadcastctl mark "bug here"
              broadcastctl mark --broadcast 2
            """)
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "Mark this broadcast only (`broadcastctl status` lists them).") var broadcast: UInt32?
    @Flag(
        help: ArgumentHelp(
            #"Print each answer as a JSON line: {"broadcast", "command", "#
                + #""result": {"time", "title", "chapter"}}."#))
    var json = false
    @Argument(help: "The chapter's title (default: Mark N).") var text: String?

    func run() throws {
        try reporting(json: json) {
            let client = try connection.connect()
            let arguments: [String: JSONValue] = text.map { ["text": .string($0)] } ?? [:]
            // Without --broadcast, every live broadcast whose handler takes chapters gets the mark.
            let marked = try broadcast.map { [$0] } ?? Self.takingChapters(client)
            for id in marked.isEmpty ? [nil] : marked.map(Optional.some) {
                let answer = try client.send(command: "mark", arguments: arguments, broadcast: id)
                if json {
                    print(compactJSON(answer))
                    continue
                }
                let said = { (key: String) in answer.result[key].map { ResultText.value(key, $0) } ?? "?" }
                print("broadcast \(answer.broadcast): chapter \(said("chapter")) '\(said("title"))' at \(said("time"))")
            }
        }
    }

    /// The live (or paused) broadcasts whose handler takes `mark`, when there are several; none otherwise (broadcastd
    /// then picks the one, or says there is none).
    static func takingChapters(_ client: ControllerClient) throws -> [UInt32] {
        let takers = try client.handlers().filter { $0.commands?.contains { $0.name == "mark" } == true }
        let handlers = Set(takers.map(\.name))
        let ids = (try client.status().broadcasts ?? []).filter {
            ($0.state == .live || $0.state == .paused) && handlers.contains($0.handler ?? "")
        }.compactMap(\.broadcast)
        return ids.count > 1 ? ids : []
    }
}
