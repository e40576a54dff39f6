/// One setting a program takes from its configuration file and command line: its name (the long option
/// without the dashes), its kind, its default and what values it accepts.
public struct ConfigKey: Sendable {
    public let name: String
    public let kind: ConfigValue.Kind
    /// nil: unset unless the file or the command line sets it.
    public let defaultValue: ConfigValue?
    /// One sentence for `--help` and `--print-config`.
    public let help: String
    /// What is wrong with a value of the right kind, or nil when it is accepted.
    public let check: @Sendable (ConfigValue) -> String?

    public init(
        _ name: String, _ kind: ConfigValue.Kind, default defaultValue: ConfigValue? = nil, help: String,
        check: @escaping @Sendable (ConfigValue) -> String? = { _ in nil }
    ) {
        self.name = name
        self.kind = kind
        self.defaultValue = defaultValue
        self.help = help
        self.check = check
    }

    /// A string that must be one of `choices`.
    public static func choice(_ name: String, _ choices: [String], default value: String, help: String) -> ConfigKey {
        ConfigKey(
            name, .string, default: .string(value),
            help: "\(help) One of \(choices.joined(separator: ", ")); default \(value)."
        ) {
            choices.contains($0.string ?? "") ? nil : "must be one of \(choices.joined(separator: ", "))"
        }
    }

    public static func integer(_ name: String, _ range: ClosedRange<Int>, default value: Int, help: String) -> ConfigKey
    {
        ConfigKey(
            name, .integer, default: .integer(value),
            help: "\(help) \(range.lowerBound) to \(range.upperBound); default \(value)."
        ) {
            range.contains($0.integer ?? .min) ? nil : "must be from \(range.lowerBound) to \(range.upperBound)"
        }
    }

    public static func boolean(_ name: String, default value: Bool, help: String) -> ConfigKey {
        ConfigKey(name, .boolean, default: .boolean(value), help: "\(help) Default \(value).")
    }
}

/// A configuration error: where (a file and line, or a command-line option) and what is wrong.
public struct ConfigError: Error, Equatable, CustomStringConvertible {
    /// "FILE:LINE", "FILE" or "--option".
    public var location: String
    public var reason: String

    public init(_ location: String, _ reason: String) {
        self.location = location
        self.reason = reason
    }

    public var description: String { "\(location): \(reason)" }
}
