import ArgumentParser
import BroadcastConfig
import BroadcastDaemonSetup
import BroadcastLogging
import BroadcastSystem
import Logging

struct BroadcastDaemonCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broadcastd",
        abstract: "Captures the screen and audio and delivers them to a broadcast handler.",
        discussion: """
            Control it with broadcastctl. Examples:
              systemctl --user enable --now broadcastd.socket   # a user service
              broadcastd &                           # the X11 screen in $DISPLAY
              broadcastd --output HDMI-1 --fps 60 --cursor metadata &
              broadcastd --region 0,0,1280x720 &
              broadcastd --window firefox &          # one window (X11)
              broadcastd --source synthetic &        # a test pattern and two tones
              broadcastctl start --handler inspect --url file:///tmp/summary.json \\
                  --duration 5 --wait
              broadcastctl start --handler record --url file:///tmp/talk.mp4 \\
                  --duration 60 --wait

            Every option can be set in ~/.config/broadcastd/broadcastd.toml (key: the \
            option without its dashes, e.g. fps = 60); options override the file. \
            To start a file with every key:
              mkdir -p ~/.config/broadcastd
              broadcastd --print-config > ~/.config/broadcastd/broadcastd.toml
            """)

    @Option(help: ArgumentHelp(DaemonKeys.source.help)) var source: String?
    @Option(help: ArgumentHelp(DaemonKeys.pipewireNode.help, valueName: "NAME|SERIAL")) var pipewireNode: String?
    @Option(help: ArgumentHelp(DaemonKeys.portalSource.help)) var portalSource: String?
    @Option(help: ArgumentHelp(DaemonKeys.display.help)) var display: String?
    @Option(help: ArgumentHelp(DaemonKeys.output.help)) var output: String?
    @Option(help: ArgumentHelp(DaemonKeys.region.help)) var region: String?
    @Option(help: ArgumentHelp(DaemonKeys.window.help, valueName: "ID|CLASS|TITLE")) var window: String?
    @Option(help: ArgumentHelp(DaemonKeys.app.help, valueName: "NAME|PID")) var app: String?
    @Option(
        name: .customLong("exclude-window"),
        help: ArgumentHelp(
            DaemonKeys.excludeWindow.help + " Repeatable; given, it replaces the list.", valueName: "CLASS"))
    var excludedWindows: [String] = []
    @Option(help: ArgumentHelp(DaemonKeys.onLock.help)) var onLock: String?
    @Option(help: ArgumentHelp(DaemonKeys.cursor.help)) var cursor: String?
    @Option(help: ArgumentHelp(DaemonKeys.camera.help, valueName: "NAME|default|none")) var camera: String?
    @Option(help: ArgumentHelp(DaemonKeys.colorRange.help)) var colorRange: String?
    @Option(help: ArgumentHelp(DaemonKeys.x11Grab.help)) var x11Grab: String?
    @Flag(inversion: .prefixedNo, help: ArgumentHelp(DaemonKeys.damage.help)) var damage: Bool?
    @Option(help: ArgumentHelp(DaemonKeys.size.help)) var size: String?
    @Option(help: ArgumentHelp(DaemonKeys.fps.help)) var fps: Int?
    @Option(help: ArgumentHelp(DaemonKeys.pixelFormat.help)) var pixelFormat: String?
    @Option(help: ArgumentHelp(DaemonKeys.audioChannels.help)) var audioChannels: Int?
    @Option(help: ArgumentHelp(DaemonKeys.audioFormat.help)) var audioFormat: String?
    @Option(help: ArgumentHelp(DaemonKeys.appAudio.help, valueName: "default|none|TARGET")) var appAudio: String?
    @Option(help: ArgumentHelp(DaemonKeys.mic.help, valueName: "default|none|TARGET")) var mic: String?
    @Flag(inversion: .prefixedNo, help: ArgumentHelp(DaemonKeys.syncMarks.help)) var syncMarks: Bool?
    @Option(
        name: .customLong("audio-clock-ppm"), parsing: .unconditional,
        help: ArgumentHelp(DaemonKeys.audioClockPPM.help, valueName: "N"))
    var audioClockPPM: Int?
    @Option(help: ArgumentHelp(DaemonKeys.memoryBudget.help, valueName: "MB")) var memoryBudget: Int?
    @Option(help: ArgumentHelp(DaemonKeys.maxBroadcasts.help, valueName: "N")) var maxBroadcasts: Int?
    @Option(help: ArgumentHelp(DaemonKeys.socket.help, valueName: "PATH")) var socket: String?
    @Option(
        name: .customLong("handlers-dir"),
        help: ArgumentHelp(DaemonKeys.handlersDir.help + " Repeatable.", valueName: "DIR"))
    var handlersDirectories: [String] = []
    @Option(help: ArgumentHelp(DaemonKeys.startTimeout.help, valueName: "SECONDS")) var startTimeout: Int?
    @Option(help: ArgumentHelp(DaemonKeys.finishTimeout.help, valueName: "SECONDS")) var finishTimeout: Int?
    @Option(help: ArgumentHelp(DaemonKeys.handlerTimeout.help, valueName: "SECONDS")) var handlerTimeout: Int?
    @Flag(inversion: .prefixedNo, help: ArgumentHelp(DaemonKeys.notify.help)) var notify: Bool?
    @Option(help: ArgumentHelp(DaemonKeys.logLevel.help)) var logLevel: String?
    @Option(
        help: ArgumentHelp(
            "Configuration file; default: $XDG_CONFIG_HOME/broadcastd/broadcastd.toml "
                + "(~/.config/…), if it exists; /dev/null: none.",
            valueName: "FILE"))
    var config: String?
    @Flag(help: "Print the effective configuration (defaults, then the file, then these options) as TOML, and exit.")
    var printConfig = false

    /// The options given, by configuration key.
    var commandLine: [String: ConfigValue] {
        var values: [String: ConfigValue] = [:]
        for (key, value) in [
            ("source", source), ("pipewire-node", pipewireNode), ("portal-source", portalSource), ("display", display),
            ("output", output), ("region", region), ("window", window), ("app", app), ("on-lock", onLock),
            ("cursor", cursor), ("camera", camera),
            ("color-range", colorRange), ("x11-grab", x11Grab), ("size", size), ("pixel-format", pixelFormat),
            ("audio-format", audioFormat), ("app-audio", appAudio), ("mic", mic), ("socket", socket),
            ("log-level", logLevel),
        ] {
            values[key] = value.map(ConfigValue.string)
        }
        for (key, value) in [
            ("fps", fps), ("audio-channels", audioChannels), ("audio-clock-ppm", audioClockPPM),
            ("memory-budget", memoryBudget), ("max-broadcasts", maxBroadcasts), ("start-timeout", startTimeout),
            ("finish-timeout", finishTimeout),
            ("handler-timeout", handlerTimeout),
        ] {
            values[key] = value.map(ConfigValue.integer)
        }
        values["damage"] = damage.map(ConfigValue.boolean)
        values["sync-marks"] = syncMarks.map(ConfigValue.boolean)
        values["notify"] = notify.map(ConfigValue.boolean)
        if !handlersDirectories.isEmpty { values["handlers-dir"] = .strings(handlersDirectories) }
        if !excludedWindows.isEmpty { values["exclude-window"] = .strings(excludedWindows) }
        return values
    }

    /// Each option's value on its own; rules that span settings wait for the configuration file.
    func validate() throws {
        do {
            _ = try Configuration(keys: DaemonKeys.all, file: nil, commandLine: commandLine)
        } catch {
            throw ValidationError(error.description)
        }
    }

    func run() throws {
        let configuration: Configuration
        do {
            configuration = try loadConfiguration()
        } catch {
            Terminal.prompt("broadcastd: \(error)\n")
            throw ExitCode(
                error.location.hasPrefix("--") ? ExitCode.validationFailure.rawValue : Self.configurationError)
        }
        let setup = DaemonSetup(settings: configuration)
        if printConfig {
            let (source, why) = setup.chosenSource()
            let file =
                configuration.file.map { "then \($0.path)" }
                ?? "no configuration file (\(configurationPath ?? "no HOME"))"
            return print(
                configuration.rendered(header: [
                    "broadcastd --print-config: built-in defaults, \(file), then the command line.",
                    "source \(configuration.string("source")!): \(why?.text ?? "captures \(source)").",
                ]))
        }
        JournalLogHandler.bootstrap(level: Logger.Level(rawValue: configuration.string("log-level")!)!)
        let logger = Logger(label: "broadcastd")
        if let why = setup.chosenSource().why { logger.log(level: why.level, "\(why.text)") }
        do {
            let (daemon, notifications) = try setup.makeDaemon(logger: logger)
            try daemon.run()
            notifications?.waitUntilDelivered(milliseconds: 2_000)
        } catch {
            logger.critical("\(error)")
            throw ExitCode.failure
        }
    }

    /// sysexits' EX_CONFIG: systemd does not restart the service for it (RestartPreventExitStatus).
    static let configurationError: Int32 = 78

    var configurationPath: String? { config ?? ConfigFile.defaultPath(environment: Environment.all) }

    func loadConfiguration() throws(ConfigError) -> Configuration {
        let file = try configurationPath.flatMap { path throws(ConfigError) in
            try ConfigFile.load(path: path, keys: DaemonKeys.all, required: config != nil)
        }
        let configuration = try Configuration(keys: DaemonKeys.all, file: file, commandLine: commandLine)
        try configuration.checkCombinations()
        return configuration
    }

}

BroadcastDaemonCommand.main()
