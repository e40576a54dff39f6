import ArgumentParser
import BroadcastCapture
import BroadcastConfig
import BroadcastCore
import BroadcastDaemon
import BroadcastLogging
import BroadcastProtocol
import BroadcastPipeWire
import BroadcastPortal
import BroadcastSystem
import BroadcastX11
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
    @Option(name: .customLong("exclude-window"), help: ArgumentHelp(DaemonKeys.excludeWindow.help + " Repeatable; given, it replaces the list.", valueName: "CLASS"))
    var excludedWindows: [String] = []
    @Option(help: ArgumentHelp(DaemonKeys.onLock.help)) var onLock: String?
    @Option(help: ArgumentHelp(DaemonKeys.cursor.help)) var cursor: String?
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
    @Option(name: .customLong("audio-clock-ppm"), parsing: .unconditional,
            help: ArgumentHelp(DaemonKeys.audioClockPPM.help, valueName: "N"))
    var audioClockPPM: Int?
    @Option(help: ArgumentHelp(DaemonKeys.memoryBudget.help, valueName: "MB")) var memoryBudget: Int?
    @Option(help: ArgumentHelp(DaemonKeys.maxBroadcasts.help, valueName: "N")) var maxBroadcasts: Int?
    @Option(help: ArgumentHelp(DaemonKeys.socket.help, valueName: "PATH")) var socket: String?
    @Option(name: .customLong("handlers-dir"), help: ArgumentHelp(DaemonKeys.handlersDir.help + " Repeatable.", valueName: "DIR"))
    var handlersDirectories: [String] = []
    @Option(help: ArgumentHelp(DaemonKeys.startTimeout.help, valueName: "SECONDS")) var startTimeout: Int?
    @Option(help: ArgumentHelp(DaemonKeys.finishTimeout.help, valueName: "SECONDS")) var finishTimeout: Int?
    @Option(help: ArgumentHelp(DaemonKeys.handlerTimeout.help, valueName: "SECONDS")) var handlerTimeout: Int?
    @Flag(inversion: .prefixedNo, help: ArgumentHelp(DaemonKeys.notify.help)) var notify: Bool?
    @Option(help: ArgumentHelp(DaemonKeys.logLevel.help)) var logLevel: String?
    @Option(help: ArgumentHelp("Configuration file; default: $XDG_CONFIG_HOME/broadcastd/broadcastd.toml " +
                               "(~/.config/…), if it exists; /dev/null: none.",
                               valueName: "FILE"))
    var config: String?
    @Flag(help: "Print the effective configuration (defaults, then the file, then these options) as TOML, and exit.")
    var printConfig = false

    /// The options given, by configuration key.
    var commandLine: [String: ConfigValue] {
        var values: [String: ConfigValue] = [:]
        for (key, value) in [("source", source), ("pipewire-node", pipewireNode), ("portal-source", portalSource), ("display", display), ("output", output), ("region", region), ("window", window), ("app", app), ("on-lock", onLock), ("cursor", cursor),
                             ("color-range", colorRange), ("x11-grab", x11Grab), ("size", size), ("pixel-format", pixelFormat),
                             ("audio-format", audioFormat), ("app-audio", appAudio), ("mic", mic), ("socket", socket), ("log-level", logLevel)] {
            values[key] = value.map(ConfigValue.string)
        }
        for (key, value) in [("fps", fps), ("audio-channels", audioChannels), ("audio-clock-ppm", audioClockPPM),
                             ("memory-budget", memoryBudget), ("max-broadcasts", maxBroadcasts), ("start-timeout", startTimeout), ("finish-timeout", finishTimeout),
                             ("handler-timeout", handlerTimeout)] {
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
            throw ExitCode(error.location.hasPrefix("--") ? ExitCode.validationFailure.rawValue : Self.configurationError)
        }
        if printConfig {
            let (source, why) = chosenSource(configuration)
            let file = configuration.file.map { "then \($0.path)" } ?? "no configuration file (\(configurationPath ?? "no HOME"))"
            return print(configuration.rendered(header: [
                "broadcastd --print-config: built-in defaults, \(file), then the command line.",
                "source \(configuration.string("source")!): \(why?.text ?? "captures \(source)").",
            ]))
        }
        JournalLogHandler.bootstrap(level: Logger.Level(rawValue: configuration.string("log-level")!)!)
        let logger = Logger(label: "broadcastd")
        let (source, why) = chosenSource(configuration)
        if let why { logger.log(level: why.level, "\(why.text)") }
        let sources = CaptureSources(defaults: captureDefaults(source, configuration)) { choice throws(CaptureError) in
            try captureSource(choosing: choice, of: source, configuration)
        }
        do {
            // The watchers come first: the daemon measures what it has resident (their threads and D-Bus
            // connections too) when it plans the frame pool within the memory budget.
            let lock = configuration.string("on-lock") == LockAction.ignore.rawValue ? nil
                : try SessionLockWatcher(logger: Logger(label: "broadcastd.lock"))
            let notifications = captureNotifications(configuration)
            let daemon = try Daemon(configuration: try daemonConfiguration(configuration), source: captureSource(source, configuration),
                                    sources: sources, logger: logger)
            daemon.sessionLock = lock
            daemon.captureIndicator = notifications
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
        let file = try configurationPath.flatMap { path throws(ConfigError) in try ConfigFile.load(path: path, keys: DaemonKeys.all, required: config != nil) }
        let configuration = try Configuration(keys: DaemonKeys.all, file: file, commandLine: commandLine)
        try configuration.checkCombinations()
        return configuration
    }

    func daemonConfiguration(_ settings: Configuration) throws -> DaemonConfiguration {
        // Socket-activated, the daemon serves the socket systemd passed and needs no path of its own.
        let explicit = settings.string("socket")
        let socketPath = Systemd.isSocketActivated ? (try? SocketLocation.resolve(explicit: explicit)) ?? "" : try SocketLocation.resolve(explicit: explicit)
        // A budget the user set (on the command line or in the file) is enforced; the built-in one is a goal.
        let budget = MemoryBudget(bytes: settings.integer("memory-budget") << 20, enforced: settings.setting("memory-budget").origin != .builtIn)
        var configuration = DaemonConfiguration(socketPath: socketPath, memoryBudget: budget)
        configuration.extraHandlerDirectories = settings.strings("handlers-dir")
        configuration.startTimeout = UInt64(settings.integer("start-timeout")) * 1_000_000_000
        configuration.finishTimeout = UInt64(settings.integer("finish-timeout")) * 1_000_000_000
        configuration.hangTimeout = UInt64(settings.integer("handler-timeout")) * 1_000_000_000
        configuration.maxBroadcasts = settings.integer("max-broadcasts")
        configuration.onLock = LockAction(rawValue: settings.string("on-lock")!)!
        return configuration
    }

    /// What broadcastd's own options capture, as START's `capture` would say it.
    func captureDefaults(_ source: String, _ settings: Configuration) -> CaptureChoice {
        CaptureChoice(display: source == "x11" ? settings.string("display") ?? Environment.get("DISPLAY") : nil,
                      output: settings.string("output"), region: settings.string("region"), window: settings.string("window"),
                      app: settings.string("app"), frameRate: settings.integer("fps"),
                      cursor: settings.string("cursor"), excludeWindows: Self.excludedWindows(settings))
    }

    /// The source a broadcast's START chooses: broadcastd's options with the choice's in their place. A display
    /// is captured through X11 whatever broadcastd's own source is; output and region are X11's.
    func captureSource(choosing choice: CaptureChoice, of source: String, _ settings: Configuration) throws(CaptureError) -> CaptureSource {
        let kind = choice.display != nil ? "x11" : source
        let moreExcluded = choice.excludeWindows.map { $0 != Self.excludedWindows(settings) } ?? false
        if kind != "x11" && ((choice.output ?? choice.region ?? choice.window ?? choice.app) != nil || moreExcluded) {
            throw CaptureError(source: source, operation: "choose what to capture", reason:
                "--output, --region, --window, --app and --exclude-window are X11's, and broadcastd captures " +
                "\(source == "none" ? "nothing" : source) (add --display :N to capture an X display)")
        }
        let overrides: [String: ConfigValue?] = ["display": choice.display.map(ConfigValue.string), "output": choice.output.map(ConfigValue.string),
                                                 "region": choice.region.map(ConfigValue.string), "window": choice.window.map(ConfigValue.string),
                                                 "app": choice.app.map(ConfigValue.string), "fps": choice.frameRate.map(ConfigValue.integer),
                                                 "cursor": choice.cursor.map(ConfigValue.string),
                                                 "exclude-window": choice.excludeWindows.map {
                                                     .strings($0.isEmpty ? ["none"] : $0)
                                                 }]
        let chosen: Configuration
        do { chosen = try settings.overriding(overrides) } catch {
            throw CaptureError(source: kind, operation: "choose what to capture", reason: error.description)
        }
        return try captureSource(kind, chosen)
    }

    func captureSource(_ source: String, _ settings: Configuration) throws(CaptureError) -> CaptureSource {
        if source == "none" { return UnavailableSource(reason: Self.noScreen) }
        let audio = AudioFormat(channels: settings.integer("audio-channels"), sampleFormat: AudioSampleFormat(name: settings.string("audio-format")!)!)
        let pixelFormat = PixelFormat(name: settings.string("pixel-format")!)!
        let fps = settings.integer("fps")
        guard source == "x11" || source == "pipewire" else {
            let (width, height) = VideoFormat.parseSize(settings.string("size")!)!
            return SyntheticSource(.init(
                video: VideoFormat(width: width, height: height, pixelFormat: pixelFormat), framesPerSecond: fps, audio: audio,
                syncMarks: settings.boolean("sync-marks"), audioClockPPM: settings.integer("audio-clock-ppm")))
        }
        let screen: CaptureSource
        if source == "pipewire" {
            var pipewire = PipeWireScreenSource.Configuration(target: settings.string("pipewire-node").map { .node($0) } ?? portalTarget(settings))
            pipewire.framesPerSecond = fps
            pipewire.pixelFormat = pixelFormat
            pipewire.colorRange = ColorRange(rawValue: settings.string("color-range")!)!
            pipewire.cursor = CursorMode(rawValue: settings.string("cursor")!)!
            pipewire.audio = audio
            screen = try PipeWireScreenSource(pipewire, logger: Logger(label: "broadcastd.pipewire"))
        } else {
            var x11 = X11ScreenSource.Configuration(display: settings.string("display"))
            x11.target = appWindow(settings) ?? settings.string("window").flatMap { WindowSelector($0) }.map { .window($0) } ?? settings.string("output").map { .output($0) }
                ?? settings.string("region").flatMap { ScreenRect(region: $0) }.map { .region($0) } ?? .screen
            x11.framesPerSecond = fps
            x11.pixelFormat = pixelFormat
            x11.colorRange = ColorRange(rawValue: settings.string("color-range")!)!
            x11.cursor = CursorMode(rawValue: settings.string("cursor")!)!
            x11.grabMethod = GrabMethod(rawValue: settings.string("x11-grab")!)!
            x11.useDamage = settings.boolean("damage")
            x11.excludedWindows = Self.excludedWindows(settings)
            x11.audio = audio
            screen = X11ScreenSource(x11, logger: Logger(label: "broadcastd.x11"))
        }
        func target(_ key: String) -> AudioTarget? {
            if key == "app-audio", let app = appAudio(settings) { return .node(app) }
            return switch settings.string(key)! {
            case "none": nil
            case "default": .defaultDevice
            case let name: .node(name)
            }
        }
        let pipewire = PipeWireAudioSource.Configuration(app: target("app-audio"), mic: target("mic"), format: audio)
        guard pipewire.app != nil || pipewire.mic != nil else { return screen }
        return try PipeWireAudioSource(video: screen, configuration: pipewire, logger: Logger(label: "broadcastd.pipewire"))
    }

    /// The window classes never captured: `--exclude-window`'s list, of which `none` is the empty one.
    static func excludedWindows(_ settings: Configuration) -> [String] {
        let excluded = settings.strings("exclude-window")
        return excluded.map { $0.lowercased() } == ["none"] ? [] : excluded
    }

    /// `--app PID`: the window of that process; `--app NAME`: the window whose class or title is NAME.
    func appWindow(_ settings: Configuration) -> CaptureTarget? {
        guard let app = settings.string("app") else { return nil }
        if let pid = Int32(app), pid > 0 { return .window(.pid(Int(pid))) }
        return .window(.name(app))
    }

    /// `--app`'s audio: the application's playback streams, by its name, or those process PID plays
    /// (`application.process.id`); none playing, the track is silent until one starts.
    func appAudio(_ settings: Configuration) -> String? {
        guard let app = settings.string("app") else { return nil }
        guard let pid = Int32(app), pid > 0 else { return app }
        return "pid:\(pid)"
    }

    /// The desktop portal's share dialog, offering what portal-source says, with the pointer as cursor says,
    /// remembered between broadcasts.
    func portalTarget(_ settings: Configuration) -> PipeWireScreenSource.Target {
        var request = ScreenCastRequest()
        request.sources = ScreenCastRequest.Sources(rawValue: settings.string("portal-source")!)!
        request.cursor = ScreenCastRequest.Cursor(rawValue: settings.string("cursor")!)!
        return .portal(request, tokens: RestoreTokenStore.defaultPath(environment: Environment.all).map(RestoreTokenStore.init))
    }
}

extension BroadcastDaemonCommand {
    /// "x11", "pipewire", "synthetic" or "none": what `source` asks for, with auto resolved from the session, and
    /// why when auto found no screen (never the synthetic source: a test pattern is asked for by name).
    static let noScreen = "neither DISPLAY nor WAYLAND_DISPLAY is set in broadcastd's environment; under systemd run " +
        "`systemctl --user import-environment DISPLAY XAUTHORITY WAYLAND_DISPLAY` and restart broadcastd, " +
        "give a display per broadcast (broadcastctl start --display :0), or run broadcastd --source synthetic for a test pattern"

    func chosenSource(_ settings: Configuration) -> (source: String, why: (level: Logger.Level, text: String)?) {
        let source = settings.string("source")!
        guard source == "auto" else { return (source, nil) }
        func given(_ name: String) -> Bool { Environment.get(name).map { !$0.isEmpty } ?? false }
        let x11 = settings.string("display") != nil || given("DISPLAY")
        // A window is chosen on X11 (XWayland's windows too) even in a Wayland session.
        if settings.string("window") ?? settings.string("app") != nil && settings.string("pipewire-node") == nil && x11 { return ("x11", nil) }
        if settings.string("pipewire-node") != nil || given("WAYLAND_DISPLAY") { return ("pipewire", nil) }
        if x11 { return ("x11", nil) }
        return ("none", (.warning, "nothing to capture: \(Self.noScreen)"))
    }
}

extension SessionLockWatcher: SessionLockSignal {}

BroadcastDaemonCommand.main()
