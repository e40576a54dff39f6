import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastImage
import BroadcastProtocol
import BroadcastSystem

struct Handlers: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List installed handlers and their setup fields (the picker).")
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        try reporting(json: json) {
            let handlers = try connection.connect().handlers()
            if json { return print(prettyJSON(HandlerList(handlers: handlers))) }
            if handlers.isEmpty { print("no handlers installed") }
            // On a terminal, folded to its width at spaces; piped, a line per item.
            let width = Terminal.columns(1)
            func show(_ text: String, indent: String = "    ", continuation: String = "        ") {
                for line in TextWrap.wrap(text, width: width, indent: indent, continuation: continuation) {
                    print(line)
                }
            }
            for handler in handlers {
                show("\(handler.name) — \(handler.displayName)", indent: "", continuation: "    ")
                if let description = handler.description { show(description, continuation: "    ") }
                if let url = handler.url {
                    show(
                        "url: \(url.prompt)\(url.default.map { " [\($0)]" } ?? "")\(url.required == true ? " (required)" : "")"
                    )
                }
                for field in handler.setupFields ?? [] {
                    let flags = [field.required == true ? "required" : nil, field.secret == true ? "secret" : nil]
                        .compactMap { $0 }
                    show(
                        "--set \(field.name)=…  \(field.prompt)\(field.default.map { " [\($0)]" } ?? "")\(flags.isEmpty ? "" : " (\(flags.joined(separator: ", ")))")"
                    )
                }
                for command in handler.commands ?? [] {
                    show(commandLine(command))
                    for argument in command.arguments ?? [] {
                        show(argumentLine(argument), indent: "        ", continuation: "            ")
                    }
                }
            }
        }
    }
}

struct Sources: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Show what broadcastd captures, and the RandR monitors and outputs (broadcastd --output NAME), top-level windows (broadcastd --window ID|CLASS|TITLE) and cameras with their formats (--camera NAME) it could capture."
    )
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
                print(
                    "  \(output.name)  \(output.width)x\(output.height)+\(output.x)+\(output.y)\(notes.isEmpty ? "" : "  (\(notes.joined(separator: ", ")))")"
                )
            }
            if let windows = list.windows {
                print(windows.isEmpty ? "no top-level windows" : "windows (topmost first):")
                for w in windows.reversed() {
                    let pid = w.pid.map { "pid \($0)" } ?? "no pid"
                    print(
                        "  0x\(String(w.id, radix: 16))  \(w.class.isEmpty ? w.instance : w.class)  \"\(w.title)\"  \(pid)  \(w.width)x\(w.height)+\(w.x)+\(w.y)\(w.mapped ? "" : "  (hidden)")"
                    )
                }
            }
            if let cameras = list.cameras {
                print(cameras.isEmpty ? "no cameras (no PipeWire Video/Source node)" : "cameras:")
                for camera in cameras {
                    let role = camera.role.map { "  role \($0)" } ?? ""
                    print("  \(camera.title)\(role)")
                    for format in camera.formats { print("    \(format)") }
                }
            }
        }
    }
}
