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
            url = try question(
                UserDirectories.expanded(field.prompt), default: field.default, secret: false,
                required: field.required == true, ask: ask)
        }
        // A file named from where the user is, not from where the handler runs.
        if manifest.url?.file == true, let given = url, !given.isEmpty { url = FileSystem.absolutePath(given) }
        for field in manifest.setupFields ?? [] where values[field.name] == nil {
            guard interactive && ((askEverything && field.advanced != true) || field.required == true) else { continue }
            if let answer = try question(
                field.prompt, default: field.default, secret: field.secret == true,
                required: field.required == true, ask: ask)
            {
                values[field.name] = answer
            }
        }
    }

    /// The answer, or the default on Enter; a required question with no default is asked again until answered
    /// (at most `maxAsks` times, so that a stream of empty lines ends).
    private func question(
        _ prompt: String, default value: String?, secret: Bool, required: Bool,
        ask: (String, Bool) -> String?
    ) throws(BroadcastError) -> String? {
        let shown = value.map { secret ? " [default set]" : " [\($0)]" } ?? ""
        var question = "\(prompt)\(shown): "
        for _ in 0..<Self.maxAsks {
            guard let answer = ask(question, secret) else {
                throw BroadcastError(.setupCancelled, "input ended before setup was complete")
            }
            if !answer.isEmpty { return answer }
            if value != nil || !required { return value }
            question = "\(prompt) (required; Ctrl-C cancels): "
        }
        throw BroadcastError(.setupCancelled, "no answer to '\(prompt)', which is required")
    }

    static let maxAsks = 10

    /// What broadcastd would refuse, said as the options were typed (`--set overwrit=true: … did you mean
    /// 'overwrite'?`, `give --url URL`), before the request is completed; nil when it would take it. Not
    /// `complete`: what is missing may still be asked for, so only what was given is checked.
    public func problem(complete: Bool = true) -> BroadcastError? {
        let fields = manifest.setupFields ?? []
        let names = fields.map(\.name) + [HandlerManifest.frameRateKey]
        for (key, value) in values.sorted(by: { $0.key < $1.key }) where !names.contains(key) {
            let known = fields.map(\.name)
            return BroadcastError(
                .invalidRequest,
                "--set \(key)=\(value): handler '\(manifest.name)' has no setup field '\(key)'"
                    + (NameSuggestion.closest(to: key, among: known).map { "; did you mean --set \($0)=\(value)?" }
                        ?? (known.isEmpty ? " (it takes none)" : " (its fields: \(known.joined(separator: ", ")))")))
        }
        for field in fields {
            if let value = values[field.name], let problem = field.problem(with: value) {
                return BroadcastError(.invalidRequest, "--set \(field.name)=\(value): " + problem)
            }
        }
        guard complete else { return nil }
        if let url = manifest.url, url.required == true, (self.url ?? "").isEmpty, url.default == nil {
            return BroadcastError(
                .invalidRequest, "handler '\(manifest.name)' needs a URL (\(url.prompt)): give --url URL")
        }
        for field in fields where field.required == true && (values[field.name] ?? field.default ?? "").isEmpty {
            return BroadcastError(
                .invalidRequest,
                "handler '\(manifest.name)' needs setup field '\(field.name)' "
                    + "(\(field.prompt)): give --set \(field.name)=VALUE")
        }
        if case .failure(let error) = manifest.validated(url: url, setupInfo: values) {
            // The remaining checks (lengths, control characters, frame rate) name the field as --set does.
            var error = error
            for key in values.keys where error.message.contains("setup field '\(key)'") {
                error.message = "--set \(key)=…: " + error.message
            }
            if error.message.hasPrefix("the URL") { error.message = "--url: " + error.message }
            return error
        }
        return nil
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
