import ArgumentParser
import BroadcastCapture
import BroadcastCore
import BroadcastDaemon
import BroadcastProtocol
import Logging

struct BroadcastDaemonCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broadcastd",
        abstract: "Captures the screen and audio and delivers them to a broadcast handler.",
        discussion: """
            Control it with broadcastctl. Example:
              broadcastd --source synthetic &
              broadcastctl start --handler inspect --url file:///tmp/summary.json --duration 5 --wait
            """)

    @Option(help: "Capture source: auto or synthetic. (auto = synthetic until the X11 and PipeWire backends land.)")
    var source = "auto"
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
    @Option(help: "Memory budget in MB; the frame pool is sized to fit it.")
    var memoryBudget = 50
    @Option(help: "Socket path (default: $BROADCASTD_SOCKET or $XDG_RUNTIME_DIR/broadcastd/broadcastd.sock).")
    var socket: String?
    @Option(name: .customLong("handlers-dir"), help: "Also look for handler manifests here (before the standard directories); repeatable.")
    var handlersDirectories: [String] = []
    @Option(help: "Log level: trace, debug, info, notice, warning, error.")
    var logLevel = "info"

    func validate() throws {
        guard ["auto", "synthetic"].contains(source) else { throw ValidationError("unknown source '\(source)'; available: auto, synthetic") }
        guard VideoFormat.parseSize(size) != nil else { throw ValidationError("--size takes WIDTHxHEIGHT with even numbers from 16 to 16384, not '\(size)'") }
        guard (1...240).contains(fps) else { throw ValidationError("--fps must be between 1 and 240") }
        guard PixelFormat(name: pixelFormat) != nil else { throw ValidationError("--pixel-format must be nv12, i420 or bgrx") }
        guard [1, 2].contains(audioChannels) else { throw ValidationError("--audio-channels must be 1 or 2") }
        guard AudioSampleFormat(name: audioFormat) != nil else { throw ValidationError("--audio-format must be f32 or s16") }
        guard memoryBudget > 0 && memoryBudget < 65536 else { throw ValidationError("--memory-budget is in MB and must be positive") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level '\(logLevel)'") }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel)!
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "broadcastd")
        let (width, height) = VideoFormat.parseSize(size)!
        let synthetic = SyntheticSource(.init(
            video: VideoFormat(width: width, height: height, pixelFormat: PixelFormat(name: pixelFormat)!),
            framesPerSecond: fps,
            audio: AudioFormat(channels: audioChannels, sampleFormat: AudioSampleFormat(name: audioFormat)!)))
        do {
            var configuration = DaemonConfiguration(socketPath: try SocketLocation.resolve(explicit: socket), memoryBudget: memoryBudget << 20)
            configuration.extraHandlerDirectories = handlersDirectories
            try Daemon(configuration: configuration, source: synthetic, logger: logger).run()
        } catch {
            logger.critical("\(error)")
            throw ExitCode.failure
        }
    }
}

BroadcastDaemonCommand.main()
