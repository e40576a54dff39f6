import ArgumentParser
import BroadcastCapture
import BroadcastCore
import BroadcastDaemon
import BroadcastLogging
import BroadcastProtocol
import BroadcastSystem
import BroadcastX11
import Logging

struct BroadcastDaemonCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broadcastd",
        abstract: "Captures the screen and audio and delivers them to a broadcast handler.",
        discussion: """
            Control it with broadcastctl. Examples:
              systemctl --user enable --now broadcastd.socket  # as a user service, started on first use
              broadcastd &                                   # the X11 screen in $DISPLAY
              broadcastd --output HDMI-1 --fps 60 --cursor metadata &
              broadcastd --region 0,0,1280x720 &
              broadcastd --source synthetic &                # a test pattern and two tones
              broadcastctl start --handler inspect --url file:///tmp/summary.json --duration 5 --wait
              broadcastctl start --handler record --url file:///tmp/talk.mp4 --duration 60 --wait
            """)

    @Option(help: "Capture source: auto, x11 or synthetic. auto picks x11 when DISPLAY is set and no Wayland session runs, else synthetic.")
    var source = "auto"
    @Option(help: "X display to capture (default: $DISPLAY).")
    var display: String?
    @Option(help: "Capture one RandR monitor or output by name (see `broadcastctl sources`).")
    var output: String?
    @Option(help: "Capture a region of the screen, X,Y,WIDTHxHEIGHT.")
    var region: String?
    @Option(help: "The pointer: embedded (drawn in), metadata (CURSOR messages) or hidden.")
    var cursor = "embedded"
    @Option(help: "BT.709 range of converted frames: limited (16-235) or full (0-255).")
    var colorRange = "limited"
    @Option(help: "How X11 pixels are read: auto, shm-fd, shm-sysv or get-image.")
    var x11Grab = "auto"
    @Flag(help: "Grab every X11 frame whole instead of following XDamage.")
    var noDamage = false
    @Option(help: "Synthetic source frame size, WIDTHxHEIGHT.")
    var size = "1920x1080"
    @Option(help: "Frames per second (1-240).")
    var fps = 30
    @Option(help: "Pixel format delivered to handlers: nv12, i420 or bgrx.")
    var pixelFormat = "nv12"
    @Option(help: "Audio channels, 1 or 2.")
    var audioChannels = 2
    @Option(help: "Audio sample format, f32 or s16.")
    var audioFormat = "f32"
    @Flag(help: "Synthetic source: a white frame and a 50 ms beep on both tones at the same instant, once per second (A/V sync test).")
    var syncMarks = false
    @Option(name: .customLong("audio-clock-ppm"), parsing: .unconditional,
            help: ArgumentHelp("Synthetic source: the audio sample clock runs N ppm fast (negative: slow), -5000 to 5000; timestamps stay true.",
                               valueName: "N"))
    var audioClockPPM = 0
    @Option(help: "Memory budget in MB; the frame pool is sized to fit it.")
    var memoryBudget = 50
    @Option(help: "Socket path (default: $BROADCASTD_SOCKET or $XDG_RUNTIME_DIR/broadcastd/broadcastd.sock).")
    var socket: String?
    @Option(name: .customLong("handlers-dir"), help: "Also look for handler manifests here (before the standard directories); repeatable.")
    var handlersDirectories: [String] = []
    @Option(help: "Log level: trace, debug, info, notice, warning, error.")
    var logLevel = "info"

    func validate() throws {
        guard ["auto", "x11", "synthetic"].contains(source) else { throw ValidationError("unknown source '\(source)'; available: auto, x11, synthetic") }
        guard output == nil || region == nil else { throw ValidationError("--output and --region cannot be used together") }
        if let region, ScreenRect(region: region) == nil { throw ValidationError("--region takes X,Y,WIDTHxHEIGHT, e.g. 0,0,1280x720, not '\(region)'") }
        guard CursorMode(rawValue: cursor) != nil else { throw ValidationError("--cursor must be embedded, metadata or hidden") }
        guard ColorRange(rawValue: colorRange) != nil else { throw ValidationError("--color-range must be limited or full") }
        guard GrabMethod(rawValue: x11Grab) != nil else { throw ValidationError("--x11-grab must be auto, shm-fd, shm-sysv or get-image") }
        guard VideoFormat.parseSize(size) != nil else { throw ValidationError("--size takes WIDTHxHEIGHT with even numbers from 16 to 16384, not '\(size)'") }
        guard (1...240).contains(fps) else { throw ValidationError("--fps must be between 1 and 240") }
        guard PixelFormat(name: pixelFormat) != nil else { throw ValidationError("--pixel-format must be nv12, i420 or bgrx") }
        guard [1, 2].contains(audioChannels) else { throw ValidationError("--audio-channels must be 1 or 2") }
        guard AudioSampleFormat(name: audioFormat) != nil else { throw ValidationError("--audio-format must be f32 or s16") }
        guard (-5000...5000).contains(audioClockPPM) else { throw ValidationError("--audio-clock-ppm must be between -5000 and 5000") }
        if source != "synthetic" && (syncMarks || audioClockPPM != 0) {
            throw ValidationError("--sync-marks and --audio-clock-ppm are features of the synthetic source; add --source synthetic")
        }
        guard memoryBudget > 0 && memoryBudget < 65536 else { throw ValidationError("--memory-budget is in MB and must be positive") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level '\(logLevel)'") }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel)!
        JournalLogHandler.bootstrap(level: level)
        let logger = Logger(label: "broadcastd")
        let audio = AudioFormat(channels: audioChannels, sampleFormat: AudioSampleFormat(name: audioFormat)!)
        let captureSource: CaptureSource
        if chosenSource(logger: logger) == "x11" {
            var x11 = X11ScreenSource.Configuration(display: display)
            x11.target = output.map { .output($0) } ?? region.flatMap { ScreenRect(region: $0) }.map { .region($0) } ?? .screen
            x11.framesPerSecond = fps
            x11.pixelFormat = PixelFormat(name: pixelFormat)!
            x11.colorRange = ColorRange(rawValue: colorRange)!
            x11.cursor = CursorMode(rawValue: cursor)!
            x11.grabMethod = GrabMethod(rawValue: x11Grab)!
            x11.useDamage = !noDamage
            x11.audio = audio
            captureSource = X11ScreenSource(x11, logger: Logger(label: "broadcastd.x11"))
        } else {
            let (width, height) = VideoFormat.parseSize(size)!
            captureSource = SyntheticSource(.init(
                video: VideoFormat(width: width, height: height, pixelFormat: PixelFormat(name: pixelFormat)!),
                framesPerSecond: fps, audio: audio, syncMarks: syncMarks, audioClockPPM: audioClockPPM))
        }
        do {
            // Socket-activated, the daemon serves the socket systemd passed and needs no path of its own.
            let socketPath = Systemd.isSocketActivated ? (try? SocketLocation.resolve(explicit: socket)) ?? "" : try SocketLocation.resolve(explicit: socket)
            var configuration = DaemonConfiguration(socketPath: socketPath, memoryBudget: memoryBudget << 20)
            configuration.extraHandlerDirectories = handlersDirectories
            try Daemon(configuration: configuration, source: captureSource, logger: logger).run()
        } catch {
            logger.critical("\(error)")
            throw ExitCode.failure
        }
    }
}

extension BroadcastDaemonCommand {
    /// "x11" or "synthetic": what `--source` asks for, with auto resolved from the session.
    func chosenSource(logger: Logger) -> String {
        guard source == "auto" else { return source }
        if Environment.get("WAYLAND_DISPLAY") != nil {
            logger.warning("a Wayland session is running and Wayland capture (PipeWire) is not available yet; using the synthetic source")
            return "synthetic"
        }
        if display != nil || Environment.get("DISPLAY") != nil { return "x11" }
        logger.notice("no X display (DISPLAY is not set); using the synthetic source")
        return "synthetic"
    }
}

BroadcastDaemonCommand.main()
