import BroadcastCore
import BroadcastSystem

/// Bare `broadcastctl start` on a terminal: the installed handlers as a numbered list to pick from.
/// Off a terminal there is no one to ask, and the missing `--handler` is a usage error.
enum HandlerPicker {
    static func pick(from handlers: [HandlerManifest], interactive: Bool = Terminal.isInteractive(0)) throws -> String {
        guard interactive else {
            throw UsageError(message: "name the handler with --handler NAME (`broadcastctl handlers` lists them)")
        }
        guard !handlers.isEmpty else {
            throw UsageError(
                message: "no handlers are installed, so there is nothing to start (see `broadcastctl handlers`)")
        }
        Terminal.prompt(menu(handlers))
        for _ in 0..<10 {
            Terminal.prompt("Handler [1-\(handlers.count)]: ")
            guard let answer = Terminal.readLine() else { break }
            if let chosen = choice(answer, among: handlers) { return chosen }
            Terminal.prompt("'\(answer)' is none of them: type a number from 1 to \(handlers.count), or a name\n")
        }
        throw UsageError(message: "no handler was picked; name one with --handler NAME")
    }

    /// "  1  record — Record to a file" lines.
    static func menu(_ handlers: [HandlerManifest]) -> String {
        let width = String(handlers.count).count
        return handlers.enumerated().map { index, handler in
            let number = String(index + 1)
            return "  " + String(repeating: " ", count: width - number.count) + number
                + "  \(handler.name) — \(handler.displayName)\n"
        }.joined()
    }

    /// The handler an answer names: its number in the list, or its name.
    static func choice(_ answer: String, among handlers: [HandlerManifest]) -> String? {
        let typed = answer.trimmingCharacters(in: " \t")
        if let number = Int(typed), handlers.indices.contains(number - 1) { return handlers[number - 1].name }
        return handlers.first { $0.name == typed }?.name
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }
}
