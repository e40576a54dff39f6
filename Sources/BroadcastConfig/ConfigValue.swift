/// A setting's value, from a configuration file, the command line or a built-in default.
public enum ConfigValue: Equatable, Sendable, CustomStringConvertible {
    case string(String)
    case integer(Int)
    case boolean(Bool)
    case strings([String])

    public enum Kind: Sendable, CustomStringConvertible {
        case string, integer, boolean, strings

        public var description: String {
            switch self {
            case .string: "a string"
            case .integer: "an integer"
            case .boolean: "true or false"
            case .strings: "an array of strings"
            }
        }
    }

    public var kind: Kind {
        switch self {
        case .string: .string
        case .integer: .integer
        case .boolean: .boolean
        case .strings: .strings
        }
    }

    public var string: String? { if case .string(let v) = self { v } else { nil } }
    public var integer: Int? { if case .integer(let v) = self { v } else { nil } }
    public var boolean: Bool? { if case .boolean(let v) = self { v } else { nil } }
    public var strings: [String]? { if case .strings(let v) = self { v } else { nil } }

    /// The value as TOML writes it.
    public var description: String {
        switch self {
        case .string(let v): Self.quoted(v)
        case .integer(let v): String(v)
        case .boolean(let v): String(v)
        case .strings(let v): "[" + v.map(Self.quoted).joined(separator: ", ") + "]"
        }
    }

    /// A TOML basic string.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
