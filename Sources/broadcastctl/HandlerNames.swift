import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastProtocol

/// The installed handlers' names, from broadcastd: `--handler <TAB>` in bash, zsh and fish, and
/// "did you mean" when START names a handler that is not installed.
enum HandlerNames {
    /// What the shells show for `--handler <TAB>`: the names starting with what was typed, or none when
    /// broadcastd cannot be asked (the socket from `--socket` on the command line being completed, if given).
    static let completion = CompletionKind.custom { words, _, prefix in complete(words: words, prefix: prefix) }

    static func complete(words: [String], prefix: String) -> [String] {
        var socket: String?
        for (index, word) in words.enumerated() {
            if word == "--socket", index + 1 < words.count { socket = words[index + 1] }
            if word.hasPrefix("--socket=") { socket = String(word.dropFirst("--socket=".count)) }
        }
        guard let path = try? SocketLocation.resolve(explicit: socket),
            let client = try? ControllerClient(socketPath: path, client: "broadcastctl-completion")
        else { return [] }
        defer { client.close() }
        let names: [String] = ((try? client.handlers()) ?? []).map(\.name)
        return names.filter { $0.hasPrefix(prefix) }.sorted()
    }

    /// Runs `body` (a START naming `handler`); an unknown-handler refusal gets the installed name closest to it.
    static func suggesting<T>(_ handler: String, client: ControllerClient, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch ProtocolError.refused(var error) where error.code == .unknownHandler {
            let names = ((try? client.handlers()) ?? []).map(\.name)
            if let name = NameSuggestion.closest(to: handler, among: names) {
                error.message += "; did you mean '\(name)'?"
            }
            throw ProtocolError.refused(error)
        }
    }
}
