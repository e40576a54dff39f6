import BroadcastCore
import BroadcastSystem
import TOMLKit

/// A TOML configuration file of flat `key = value` lines, checked against the keys a program takes:
/// unknown keys, values of the wrong kind and rejected values are errors naming the file and line.
public struct ConfigFile: Sendable {
    public struct Entry: Equatable, Sendable {
        public var value: ConfigValue
        /// 1-based; nil in the rare layouts where the key's line cannot be told from the text.
        public var line: Int?
    }

    public let path: String
    public let entries: [String: Entry]

    /// `$XDG_CONFIG_HOME/broadcastd/broadcastd.toml`, else `~/.config/broadcastd/broadcastd.toml`.
    public static func defaultPath(environment: [String: String]) -> String? {
        Environment.baseDirectory("XDG_CONFIG_HOME", fallback: ".config", in: environment).map {
            $0 + "/broadcastd/broadcastd.toml"
        }
    }

    /// Reads and checks the file at `path`; nil when it does not exist and `required` is false.
    public static func load(path: String, keys: [ConfigKey], required: Bool) throws(ConfigError) -> ConfigFile? {
        let bytes: [UInt8]
        do {
            bytes = try FileSystem.readFile(path, limit: 1 << 20)
        } catch let error where error.isNoSuchFile && !required {
            return nil
        } catch {
            throw ConfigError(path, "cannot read the configuration file: \(error.reason)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ConfigError(path, "not UTF-8 text, as TOML must be")
        }
        return try ConfigFile(path: path, text: text, keys: keys)
    }

    public init(path: String, text: String, keys: [ConfigKey]) throws(ConfigError) {
        self.path = path
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigError("\(path):\(error.source.begin.line)", "not valid TOML: \(error.description)")
        } catch {
            throw ConfigError(path, "not valid TOML: \(error)")
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        var entries: [String: Entry] = [:]
        for (name, node) in table {
            let line = Self.line(of: name, in: lines)
            let location = line.map { "\(path):\($0)" } ?? path
            guard let key = keys.first(where: { $0.name == name }) else {
                let suggestion = NameSuggestion.didYouMean(name, among: keys.map(\.name))
                throw ConfigError(
                    location, "unknown key '\(name)'\(suggestion) (broadcastd --print-config lists every key)")
            }
            guard let value = Self.value(of: node, as: key.kind) else {
                throw ConfigError(location, "\(name) must be \(key.kind), not \(Self.describe(node))")
            }
            if let reason = key.check(value) { throw ConfigError(location, "\(name) = \(value): \(reason)") }
            entries[name] = Entry(value: value, line: line)
        }
        self.entries = entries
    }

    private static func value(of node: TOMLValueConvertible, as kind: ConfigValue.Kind) -> ConfigValue? {
        switch kind {
        case .string: node.string.map(ConfigValue.string)
        case .integer: node.type == .int ? node.int.map(ConfigValue.integer) : nil
        case .boolean: node.bool.map(ConfigValue.boolean)
        case .strings:
            node.array.flatMap { array in
                let items = array.map(\.string)
                return items.allSatisfy { $0 != nil } ? .strings(items.map { $0! }) : nil
            }
        }
    }

    private static func describe(_ node: TOMLValueConvertible) -> String {
        node.type == .array
            ? "an array of \(node.array?.first.map { "\($0.type)" } ?? "nothing")s" : "a TOML \(node.type)"
    }

    /// The line a top-level key is set on: `key =`, a quoted key, a dotted `key.x =`, or a `[key]` table.
    static func line(of key: String, in lines: [Substring]) -> Int? {
        let forms = [key, "\"\(key)\"", "'\(key)'"]
        for (index, raw) in lines.enumerated() {
            var line = raw.drop(while: { $0 == " " || $0 == "\t" })
            if line.hasPrefix("[") { line = line.drop(while: { $0 == "[" || $0 == " " || $0 == "\t" }) }
            for form in forms where line.hasPrefix(form) {
                let rest = line.dropFirst(form.count).drop(while: { $0 == " " || $0 == "\t" })
                if let next = rest.first, "=.]".contains(next) { return index + 1 }
            }
        }
        return nil
    }
}
