import BroadcastCapture
import BroadcastConfig
import BroadcastCore
import BroadcastDaemon
import BroadcastPipeWire
import BroadcastPortal
import BroadcastProtocol
import BroadcastSystem
import BroadcastX11
import Logging

/// What broadcastd's settings (built-in defaults < configuration file < command line) build: the daemon's
/// configuration, the capture source its options describe and those a broadcast's START may choose, the watchers
/// beside it (the session lock, desktop notifications), and the daemon itself. The executable only parses its
/// arguments into settings and runs what `makeDaemon` makes.
public struct DaemonSetup {
    public let settings: Configuration

    public init(settings: Configuration) {
        self.settings = settings
    }

    /// The daemon, ready to run, and the notifications that say the screen is captured (unless `notify = false`),
    /// which the caller lets finish delivering before it exits.
    public func makeDaemon(logger: Logger) throws -> (daemon: Daemon, notifications: DesktopNotifications?) {
        let (source, _) = chosenSource()
        let grant = camerasThroughPortal(source) ? CameraGrant(logger: Logger(label: "broadcastd.portal")) : nil
        if let grant, CameraRequest(settings.string("camera")!) != .none {
            // Asked now, so that the dialog (when there is one) comes up before the first broadcast needs the camera.
            grant.request()
        }
        let sources = CaptureSources(
            defaults: captureDefaults(source),
            make: { choice throws(CaptureError) in try captureSource(choosing: choice, of: source) },
            cameras: { () throws(CaptureError) in try PipeWireCameras.list(remote: grant.map(Self.cameraRemote)) },
            makeCamera: { camera throws(CaptureError) in try cameraSource(camera, through: grant, logger: logger) })
        let lock =
            settings.string("on-lock") == LockAction.ignore.rawValue
            ? nil
            : try SessionLockWatcher(logger: Logger(label: "broadcastd.lock"))
        let notifications =
            settings.boolean("notify") ? DesktopNotifications(logger: Logger(label: "broadcastd.notify")) : nil
        let daemon = try Daemon(
            configuration: try daemonConfiguration(), source: captureSource(source), sources: sources, logger: logger)
        daemon.sessionLock = lock
        daemon.captureIndicator = notifications
        return (daemon, notifications)
    }

    public func daemonConfiguration() throws -> DaemonConfiguration {
        // Socket-activated, the daemon serves the socket systemd passed and needs no path of its own.
        let explicit = settings.string("socket")
        let socketPath =
            Systemd.isSocketActivated
            ? (try? SocketLocation.resolve(explicit: explicit)) ?? "" : try SocketLocation.resolve(explicit: explicit)
        // A budget the user set (on the command line or in the file) is enforced; the built-in one is a goal.
        let budget = MemoryBudget(
            bytes: settings.integer("memory-budget") << 20,
            enforced: settings.setting("memory-budget").origin != .builtIn)
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
    public func captureDefaults(_ source: String) -> CaptureChoice {
        CaptureChoice(
            display: source == "x11" ? settings.string("display") ?? Environment.get("DISPLAY") : nil,
            output: settings.string("output"), region: settings.string("region"), window: settings.string("window"),
            app: settings.string("app"), frameRate: settings.integer("fps"),
            cursor: settings.string("cursor"), excludeWindows: Self.excludedWindows(settings),
            camera: settings.string("camera"))
    }

    /// The source a broadcast's START chooses: broadcastd's options with the choice's in their place. A display
    /// is captured through X11 whatever broadcastd's own source is; output and region are X11's.
    public func captureSource(choosing choice: CaptureChoice, of source: String) throws(CaptureError) -> CaptureSource {
        let kind = choice.display != nil ? "x11" : source
        let moreExcluded = choice.excludeWindows.map { $0 != Self.excludedWindows(settings) } ?? false
        if kind != "x11" && ((choice.output ?? choice.region ?? choice.window ?? choice.app) != nil || moreExcluded) {
            throw CaptureError(
                source: source, operation: "choose what to capture",
                reason:
                    "--output, --region, --window, --app and --exclude-window are X11's, and broadcastd captures "
                    + "\(source == "none" ? "nothing" : source) (add --display :N to capture an X display)")
        }
        let overrides: [String: ConfigValue?] = [
            "display": choice.display.map(ConfigValue.string), "output": choice.output.map(ConfigValue.string),
            "region": choice.region.map(ConfigValue.string), "window": choice.window.map(ConfigValue.string),
            "app": choice.app.map(ConfigValue.string), "fps": choice.frameRate.map(ConfigValue.integer),
            "cursor": choice.cursor.map(ConfigValue.string),
            "exclude-window": choice.excludeWindows.map {
                .strings($0.isEmpty ? ["none"] : $0)
            },
        ]
        let chosen: Configuration
        do { chosen = try settings.overriding(overrides) } catch {
            throw CaptureError(source: kind, operation: "choose what to capture", reason: error.description)
        }
        return try DaemonSetup(settings: chosen).captureSource(kind)
    }

    /// Whether the camera comes through the desktop portal's Camera interface: when the screen does (source pipewire
    /// without pipewire-node, a Wayland session or a sandbox), whose PipeWire shows an application only what the user
    /// allowed. Elsewhere (X11, a node captured directly) the camera is taken from PipeWire directly.
    func camerasThroughPortal(_ source: String) -> Bool {
        source == "pipewire" && settings.string("pipewire-node") == nil
    }

    /// A new PipeWire connection from the Camera portal, asking for the camera first when it has not been allowed
    /// (waiting 2 s for the answer: a permission given before comes at once).
    static func cameraRemote(_ grant: CameraGrant) throws(CaptureError) -> Int32 {
        let operation = "ask the desktop portal for the camera"
        let remote: Int32?
        do { remote = try grant.remote(wait: 2_000_000_000) } catch {
            throw CaptureError(
                source: "camera", operation: operation, reason: error.cancelled ? error.reason : error.description)
        }
        guard let remote else {
            throw CaptureError(
                source: "camera", operation: operation,
                reason: "the desktop portal's camera dialog is open; start the broadcast again once it is answered")
        }
        return remote
    }

    /// The source of `camera`'s frames: its PipeWire node, by serial, in broadcastd's pixel format and colour range,
    /// through the Camera portal's PipeWire when there is a `grant`.
    func cameraSource(
        _ camera: CameraDescription, through grant: CameraGrant?, logger: Logger
    ) throws(CaptureError) -> CaptureSource {
        var configuration = PipeWireScreenSource.Configuration(target: .node(camera.serial))
        if let grant {
            configuration.remote = { () throws(CaptureError) -> Int32 in try Self.cameraRemote(grant) }
        }
        configuration.pixelFormat = PixelFormat(name: settings.string("pixel-format")!)!
        configuration.framesPerSecond =
            camera.expectedFormat(delivering: configuration.pixelFormat)?.frameRates.max().map { Int($0.rounded()) }
            ?? 30
        configuration.colorRange = ColorRange(rawValue: settings.string("color-range")!)!
        configuration.cursor = .hidden
        configuration.camera = true
        return try PipeWireScreenSource(configuration, logger: logger)
    }

    public func captureSource(_ source: String) throws(CaptureError) -> CaptureSource {
        if source == "none" { return UnavailableSource(reason: Self.noScreen) }
        let audio = AudioFormat(
            channels: settings.integer("audio-channels"),
            sampleFormat: AudioSampleFormat(name: settings.string("audio-format")!)!)
        let pixelFormat = PixelFormat(name: settings.string("pixel-format")!)!
        let fps = settings.integer("fps")
        guard source == "x11" || source == "pipewire" else {
            let (width, height) = VideoFormat.parseSize(settings.string("size")!)!
            return SyntheticSource(
                .init(
                    video: VideoFormat(width: width, height: height, pixelFormat: pixelFormat), framesPerSecond: fps,
                    audio: audio,
                    syncMarks: settings.boolean("sync-marks"), audioClockPPM: settings.integer("audio-clock-ppm")))
        }
        let screen: CaptureSource
        if source == "pipewire" {
            var pipewire = PipeWireScreenSource.Configuration(
                target: settings.string("pipewire-node").map { .node($0) } ?? portalTarget())
            pipewire.framesPerSecond = fps
            pipewire.pixelFormat = pixelFormat
            pipewire.colorRange = ColorRange(rawValue: settings.string("color-range")!)!
            pipewire.cursor = CursorMode(rawValue: settings.string("cursor")!)!
            pipewire.audio = audio
            screen = try PipeWireScreenSource(pipewire, logger: Logger(label: "broadcastd.pipewire"))
        } else {
            var x11 = X11ScreenSource.Configuration(display: settings.string("display"))
            x11.target =
                appWindow() ?? settings.string("window").flatMap { WindowSelector($0) }.map { .window($0) }
                ?? settings.string("output").map { .output($0) }
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
            if key == "app-audio", let app = appAudio() { return .node(app) }
            return switch settings.string(key)! {
            case "none": nil
            case "default": .defaultDevice
            case let name: .node(name)
            }
        }
        let pipewire = PipeWireAudioSource.Configuration(app: target("app-audio"), mic: target("mic"), format: audio)
        guard pipewire.app != nil || pipewire.mic != nil else { return screen }
        return try PipeWireAudioSource(
            video: screen, configuration: pipewire, logger: Logger(label: "broadcastd.pipewire"))
    }

    /// The window classes never captured: `--exclude-window`'s list, of which `none` is the empty one.
    static func excludedWindows(_ settings: Configuration) -> [String] {
        let excluded = settings.strings("exclude-window")
        return excluded.map { $0.lowercased() } == ["none"] ? [] : excluded
    }

    /// `--app PID`: the window of that process; `--app NAME`: the window whose class or title is NAME.
    func appWindow() -> CaptureTarget? {
        guard let app = settings.string("app") else { return nil }
        if let pid = Int32(app), pid > 0 { return .window(.pid(Int(pid))) }
        return .window(.name(app))
    }

    /// `--app`'s audio: the application's playback streams, by its name, or those process PID plays
    /// (`application.process.id`); none playing, the track is silent until one starts.
    func appAudio() -> String? {
        guard let app = settings.string("app") else { return nil }
        guard let pid = Int32(app), pid > 0 else { return app }
        return "pid:\(pid)"
    }

    /// The desktop portal's share dialog, offering what portal-source says, with the pointer as cursor says,
    /// remembered between broadcasts.
    func portalTarget() -> PipeWireScreenSource.Target {
        var request = ScreenCastRequest()
        request.sources = ScreenCastRequest.Sources(rawValue: settings.string("portal-source")!)!
        request.cursor = ScreenCastRequest.Cursor(rawValue: settings.string("cursor")!)!
        return .portal(
            request, tokens: RestoreTokenStore.defaultPath(environment: Environment.all).map(RestoreTokenStore.init))
    }

    /// "x11", "pipewire", "synthetic" or "none": what `source` asks for, with auto resolved from the session, and
    /// why when auto found no screen (never the synthetic source: a test pattern is asked for by name).
    public static let noScreen =
        "neither DISPLAY nor WAYLAND_DISPLAY is set in broadcastd's environment; under systemd run "
        + "`systemctl --user import-environment DISPLAY XAUTHORITY WAYLAND_DISPLAY` and restart broadcastd, "
        + "give a display per broadcast (broadcastctl start --display :0), or run broadcastd --source synthetic for a test pattern"

    public func chosenSource() -> (source: String, why: (level: Logger.Level, text: String)?) {
        let source = settings.string("source")!
        guard source == "auto" else { return (source, nil) }
        func given(_ name: String) -> Bool { Environment.get(name).map { !$0.isEmpty } ?? false }
        let x11 = settings.string("display") != nil || given("DISPLAY")
        // A window is chosen on X11 (XWayland's windows too) even in a Wayland session.
        if settings.string("window") ?? settings.string("app") != nil && settings.string("pipewire-node") == nil && x11
        {
            return ("x11", nil)
        }
        if settings.string("pipewire-node") != nil || given("WAYLAND_DISPLAY") { return ("pipewire", nil) }
        if x11 { return ("x11", nil) }
        return ("none", (.warning, "nothing to capture: \(Self.noScreen)"))
    }
}

extension SessionLockWatcher: SessionLockSignal {}
extension DesktopNotifications: CaptureIndicator {}
