import ArgumentParser
import BroadcastClient
import BroadcastCore

/// `--duration 10m`, `1h30m`, `90s` or plain seconds (`start --duration`, `record --duration`).
extension DurationArgument: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
    public static var defaultCompletionKind: CompletionKind { .default }
}

/// "unknown subcommand 'strat'; did you mean 'start'?" before swift-argument-parser says only "unexpected argument".
enum SubcommandSuggestion {
    /// The usage error for `arguments` (without the program name) when its first word is no subcommand, else nil.
    static func error(for arguments: [String], command: any ParsableCommand.Type) -> String? {
        guard let word = arguments.first, !word.hasPrefix("-") else { return nil }
        let names = command.configuration.subcommands.map { $0._commandName } + ["help"]
        guard !names.contains(word) else { return nil }
        return "unknown subcommand '\(word)'\(NameSuggestion.didYouMean(word, among: names))"
            + " (\(command._commandName) --help lists them)"
    }
}
