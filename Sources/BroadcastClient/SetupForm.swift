import BroadcastCore
import BroadcastSystem

/// The questions a setup UI asks for one handler, answered from the command line and, on a
/// terminal, by prompting: what was given is used as is; what is missing is asked for (all fields
/// but advanced ones when nothing was given, only required ones otherwise); defaults are shown and
/// taken on Enter.
public struct SetupForm {
    public let manifest: HandlerManifest
    public var url: String?
    public var values: [String: String]

    public init(manifest: HandlerManifest, url: String?, values: [String: String]) {
        self.manifest = manifest
        self.url = url
        self.values = values
    }

    /// Asks on the terminal through `ask(prompt, secret) -> answer?` (nil: input ended).
    public mutating func fill(interactive: Bool, ask: (String, Bool) -> String?) throws(BroadcastError) {
        let askEverything = interactive && url == nil && values.isEmpty
        if let field = manifest.url, url == nil, interactive && (askEverything || field.required == true) {
            url = try question(UserDirectories.expanded(field.prompt), default: field.default, secret: false, ask: ask)
        }
        // A file named from where the user is, not from where the handler runs.
        if manifest.url?.file == true, let given = url, !given.isEmpty { url = FileSystem.absolutePath(given) }
        for field in manifest.setupFields ?? [] where values[field.name] == nil {
            guard interactive && ((askEverything && field.advanced != true) || field.required == true) else { continue }
            if let answer = try question(field.prompt, default: field.default, secret: field.secret == true, ask: ask) {
                values[field.name] = answer
            }
        }
    }

    private func question(_ prompt: String, default value: String?, secret: Bool, ask: (String, Bool) -> String?) throws(BroadcastError) -> String? {
        let shown = value.map { secret ? " [default set]" : " [\($0)]" } ?? ""
        guard let answer = ask("\(prompt)\(shown): ", secret) else {
            throw BroadcastError(.setupCancelled, "input ended before setup was complete")
        }
        return answer.isEmpty ? value : answer
    }

    /// Parses `KEY=VALUE` arguments of `--set`.
    public static func parseAssignments(_ items: [String]) throws(BroadcastError) -> [String: String] {
        var result: [String: String] = [:]
        for item in items {
            guard let eq = item.firstIndex(of: "="), eq != item.startIndex else {
                throw BroadcastError(.invalidRequest, "--set takes KEY=VALUE, not '\(item)'")
            }
            result[String(item[..<eq])] = String(item[item.index(after: eq)...])
        }
        return result
    }
}
