import BroadcastCore
import BroadcastPortal
import Testing

@testable import BroadcastConfig

/// Configuration files: TOML checked against a program's keys, layered under the command line.
@Suite struct ConfigTests {
    static let keys = [
        ConfigKey.choice("source", ["auto", "x11", "synthetic"], default: "auto", help: "Capture source."),
        ConfigKey("display", .string, help: "X display."),
        ConfigKey.integer("fps", 1...240, default: 30, help: "Frames per second."),
        ConfigKey.boolean("damage", default: true, help: "Follow XDamage."),
        ConfigKey("handlers-dir", .strings, default: .strings([]), help: "Manifest folders."),
    ]

    func parse(_ text: String) throws(ConfigError) -> ConfigFile {
        try ConfigFile(path: "/c/broadcastd.toml", text: text, keys: Self.keys)
    }

    func error(_ text: String) -> ConfigError? {
        do { _ = try parse(text) } catch { return error }
        return nil
    }

    @Test func valuesAndTheLinesTheyAreOn() throws {
        let file = try parse(
            """
            # broadcastd
            source = "x11"

              "fps" = 60   # a comment
            damage = false
            handlers-dir = ["/a", '/b c']
            """)
        #expect(file.entries["source"] == .init(value: .string("x11"), line: 2))
        #expect(file.entries["fps"] == .init(value: .integer(60), line: 4))
        #expect(file.entries["damage"] == .init(value: .boolean(false), line: 5))
        #expect(file.entries["handlers-dir"] == .init(value: .strings(["/a", "/b c"]), line: 6))
        #expect(file.entries["display"] == nil)
        #expect(try parse("").entries.isEmpty)
    }

    /// Two neighbours swapped are one edit: "fsp" means "fps", not "app" (two substitutions away).
    @Test func aSwapOfNeighboursIsTheClosestKey() {
        #expect(NameSuggestion.closest(to: "fsp", among: ["app", "fps"]) == "fps")
        #expect(NameSuggestion.closest(to: "windwo", among: ["window", "app"]) == "window")
        #expect(NameSuggestion.closest(to: "zzz", among: ["app", "fps"]) == nil)
    }

    @Test func mistakesNameTheFileTheLineAndWhatIsWrong() {
        #expect(
            error("source = \"x11\"\nfsp = 60\n")
                == ConfigError(
                    "/c/broadcastd.toml:2",
                    "unknown key 'fsp'; did you mean 'fps'? (broadcastd --print-config lists every key)"))
        #expect(
            error("\n\n[x11]\ndisplay = \":0\"\n")
                == ConfigError(
                    "/c/broadcastd.toml:3",
                    "unknown key 'x11' (broadcastd --print-config lists every key)"))
        #expect(
            error("fps = \"60\"") == ConfigError("/c/broadcastd.toml:1", "fps must be an integer, not a TOML string"))
        #expect(
            error("fps = 29.97")
                == ConfigError("/c/broadcastd.toml:1", "fps must be an integer, not a TOML floating-point number"))
        #expect(
            error("damage = 1")
                == ConfigError("/c/broadcastd.toml:1", "damage must be true or false, not a TOML integer"))
        #expect(
            error("handlers-dir = [1]")
                == ConfigError(
                    "/c/broadcastd.toml:1", "handlers-dir must be an array of strings, not an array of integers"))
        #expect(error("\nfps = 500") == ConfigError("/c/broadcastd.toml:2", "fps = 500: must be from 1 to 240"))
        #expect(
            error("source = \"wayland\"")
                == ConfigError("/c/broadcastd.toml:1", "source = \"wayland\": must be one of auto, x11, synthetic"))
        let syntax = error("source = \"x11\"\nfps = \n")
        #expect(syntax?.location == "/c/broadcastd.toml:2")
        #expect(syntax?.reason.hasPrefix("not valid TOML: ") == true)
        #expect(error("fps = 1\nfps = 2")?.location == "/c/broadcastd.toml:2")
    }

    @Test func aMissingFileIsNoneUnlessItWasAskedFor() throws {
        #expect(try ConfigFile.load(path: "/nonexistent/broadcastd.toml", keys: Self.keys, required: false) == nil)
        #expect(
            throws: ConfigError(
                "/nonexistent/broadcastd.toml", "cannot read the configuration file: No such file or directory")
        ) {
            try ConfigFile.load(path: "/nonexistent/broadcastd.toml", keys: Self.keys, required: true)
        }
        #expect(try ConfigFile.load(path: "/dev/null", keys: Self.keys, required: true)?.entries.isEmpty == true)
        #expect(
            ConfigFile.defaultPath(environment: ["XDG_CONFIG_HOME": "/x", "HOME": "/h"])
                == "/x/broadcastd/broadcastd.toml")
        #expect(
            ConfigFile.defaultPath(environment: ["XDG_CONFIG_HOME": "relative", "HOME": "/h"])
                == "/h/.config/broadcastd/broadcastd.toml")
        #expect(ConfigFile.defaultPath(environment: [:]) == nil)
        #expect(
            RestoreTokenStore.defaultPath(environment: ["XDG_STATE_HOME": "/s", "HOME": "/h"])
                == "/s/broadcastd/portal-restore-token")
        #expect(
            RestoreTokenStore.defaultPath(environment: ["HOME": "/h"])
                == "/h/.local/state/broadcastd/portal-restore-token")
    }

    @Test func theCommandLineOverridesTheFileWhichOverridesTheDefaults() throws {
        let file = try parse("source = \"x11\"\nfps = 60\n")
        let configuration = try Configuration(keys: Self.keys, file: file, commandLine: ["fps": .integer(25)])
        #expect(configuration.string("source") == "x11")
        #expect(configuration.setting("source").origin == .file(path: "/c/broadcastd.toml", line: 1))
        #expect(configuration.integer("fps") == 25)
        #expect(configuration.setting("fps").origin == .commandLine)
        #expect(configuration.boolean("damage"))
        #expect(configuration.setting("damage").origin == .builtIn)
        #expect(configuration.string("display") == nil)
        #expect(throws: ConfigError("--fps 0", "must be from 1 to 240")) {
            try Configuration(keys: Self.keys, file: file, commandLine: ["fps": .integer(0)])
        }
        // A rule spanning settings points at the one that was set.
        #expect(configuration.error(["fps", "source"], "no").location == "--fps")
        #expect(configuration.error(["display", "source"], "no").location == "/c/broadcastd.toml:1")
    }

    @Test func printedConfigurationIsAFileThatSetsTheSameValues() throws {
        let file = try parse("display = \":1 \\\"quoted\\\" \\\\ \\u0007\"\nhandlers-dir = [\"/a\"]\n")
        let configuration = try Configuration(keys: Self.keys, file: file, commandLine: ["fps": .integer(50)])
        let text = configuration.rendered(header: ["effective configuration"])
        #expect(text.contains("\n# Frames per second. 1 to 240; default 30.\nfps = 50  # command line\n"), "\(text)")
        #expect(text.contains("\ndamage = true\n"))
        #expect(text.contains("handlers-dir = [\"/a\"]  # /c/broadcastd.toml:2"))
        let reread = try parse(text)
        for setting in configuration.settings {
            #expect(reread.entries[setting.key.name]?.value == setting.value, "\(setting.key.name)")
        }
        // An unset key is written commented out.
        let unset = try Configuration(keys: Self.keys, file: nil, commandLine: [:]).rendered(header: [])
        #expect(unset.contains("\n#display =\n"))
    }
}
