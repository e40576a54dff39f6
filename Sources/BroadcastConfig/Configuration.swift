/// Where a setting's value came from.
public enum SettingOrigin: Equatable, Sendable, CustomStringConvertible {
    case builtIn
    case file(path: String, line: Int?)
    case commandLine

    public var description: String {
        switch self {
        case .builtIn: "default"
        case .file(let path, let line): line.map { "\(path):\($0)" } ?? path
        case .commandLine: "command line"
        }
    }
}

/// The effective settings: built-in defaults, overridden by the configuration file, overridden by the
/// command line.
public struct Configuration: Sendable {
    public struct Setting: Sendable {
        public let key: ConfigKey
        public let value: ConfigValue?
        public let origin: SettingOrigin
    }

    /// In the order of the keys.
    public let settings: [Setting]
    public let file: ConfigFile?

    /// `commandLine` holds the options given, by key name; each is checked like a file's value, and an
    /// error names the option (`--fps 500: must be from 1 to 240`).
    public init(keys: [ConfigKey], file: ConfigFile?, commandLine: [String: ConfigValue]) throws(ConfigError) {
        var settings: [Setting] = []
        for key in keys {
            if let value = commandLine[key.name] {
                precondition(
                    value.kind == key.kind, "option --\(key.name) is declared as \(value.kind), its key as \(key.kind)")
                if let reason = key.check(value) { throw ConfigError("--\(key.name) \(Self.plain(value))", reason) }
                settings.append(Setting(key: key, value: value, origin: .commandLine))
            } else if let file, let entry = file.entries[key.name] {
                settings.append(Setting(key: key, value: entry.value, origin: .file(path: file.path, line: entry.line)))
            } else {
                settings.append(Setting(key: key, value: key.defaultValue, origin: .builtIn))
            }
        }
        self.settings = settings
        self.file = file
    }

    /// These settings with `values` in place of theirs (nil unsets a key), checked like the command line's.
    public func overriding(_ values: [String: ConfigValue?]) throws(ConfigError) -> Configuration {
        var settings = self.settings
        for (index, setting) in settings.enumerated() {
            guard let value = values[setting.key.name] else { continue }
            if let value, let reason = setting.key.check(value) {
                throw ConfigError("--\(setting.key.name) \(Self.plain(value))", reason)
            }
            settings[index] = Setting(key: setting.key, value: value, origin: .commandLine)
        }
        return Configuration(settings: settings, file: file)
    }

    private init(settings: [Setting], file: ConfigFile?) {
        self.settings = settings
        self.file = file
    }

    public func setting(_ name: String) -> Setting {
        guard let setting = settings.first(where: { $0.key.name == name }) else {
            preconditionFailure("no configuration key '\(name)'")
        }
        return setting
    }

    public func string(_ name: String) -> String? { setting(name).value?.string }
    public func integer(_ name: String) -> Int { setting(name).value!.integer! }
    public func boolean(_ name: String) -> Bool { setting(name).value!.boolean! }
    public func strings(_ name: String) -> [String] { setting(name).value?.strings ?? [] }

    /// The error for a rule that spans settings, located at the first of `names` not left at its default.
    public func error(_ names: [String], _ reason: String) -> ConfigError {
        let given = names.map(setting).first(where: { $0.origin != .builtIn }) ?? setting(names[0])
        switch given.origin {
        case .commandLine: return ConfigError("--\(given.key.name)", reason)
        case .file, .builtIn: return ConfigError(given.origin.description, reason)
        }
    }

    /// The settings as a TOML file that sets them all: each with its help as a comment, where it came from
    /// when that is not the default, and unset ones commented out.
    public func rendered(header: [String]) -> String {
        var lines = header.map { "# " + $0 }
        for setting in settings {
            lines.append("")
            lines.append("# " + setting.key.help)
            guard let value = setting.value else {
                lines.append("#\(setting.key.name) =")
                continue
            }
            let assignment = "\(setting.key.name) = \(value)"
            lines.append(setting.origin == .builtIn ? assignment : "\(assignment)  # \(setting.origin)")
        }
        return lines.joined(separator: "\n")
    }

    private static func plain(_ value: ConfigValue) -> String {
        switch value {
        case .string(let v): v
        case .strings(let v): v.joined(separator: " ")
        default: value.description
        }
    }
}
