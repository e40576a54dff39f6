import BroadcastCapture
import BroadcastConfig
import BroadcastCore
import BroadcastDaemon
import BroadcastPortal
import BroadcastX11
import Logging

/// Every broadcastd setting: its configuration-file key is its long option without the dashes.
public enum DaemonKeys {
    public static let source = ConfigKey.choice(
        "source", ["auto", "x11", "pipewire", "synthetic"], default: "auto",
        help:
            "Capture source: pipewire is the screen the user shares in the desktop portal's dialog (Wayland), or pipewire-node; auto picks pipewire when pipewire-node or WAYLAND_DISPLAY is set, else x11 when DISPLAY is set, else nothing: broadcasts are refused with what to do (never a test pattern unasked)."
    )
    public static let pipewireNode = ConfigKey(
        "pipewire-node", .string,
        help:
            "With source pipewire, capture this PipeWire video node, by node name or serial (`pw-cli ls Node`), instead of asking the portal: a kiosk's or headless server's video source."
    )
    public static let portalSource = ConfigKey.choice(
        "portal-source", ScreenCastRequest.Sources.allCases.map(\.rawValue), default: "monitor",
        help: "What the portal's share dialog offers: a monitor, a window, or any.")
    public static let display = ConfigKey("display", .string, help: "X display to capture; unset: $DISPLAY.")
    public static let output = ConfigKey(
        "output", .string,
        help: "Capture one RandR monitor or output by name (see `broadcastctl sources`); unset: the whole screen.")
    public static let region = ConfigKey("region", .string, help: "Capture a region of the screen, X,Y,WIDTHxHEIGHT.") {
        ScreenRegion.problem($0.string!)
    }
    public static let window = ConfigKey(
        "window", .string,
        help:
            "Capture one top-level window (X11, through XComposite), by id (0x... or decimal), WM_CLASS or title (see `broadcastctl sources`): its own content even when covered; a resize changes the frame size, a hidden window repeats its last frame, and the broadcast finishes with \"the window closed\" when it closes."
    ) {
        WindowSelector($0.string!) == nil ? "takes a window id (0x... or decimal), a WM_CLASS or a title" : nil
    }
    public static let app = ConfigKey(
        "app", .string,
        help:
            "Record one application: its window (X11, as --window: by WM_CLASS or title, or with a PID by _NET_WM_PID) and its audio (as --app-audio: its playback streams, by application name or program; with a PID, the streams that process plays), in one option."
    ) {
        $0.string!.isEmpty || $0.string!.utf8.count > 256 ? "takes an application's name or a process id" : nil
    }
    public static let excludeWindow = ConfigKey(
        "exclude-window", .strings, default: .strings(defaultExcludedWindows),
        help:
            "Windows never captured (X11): the visible parts of windows of these WM_CLASS names (instance or class, any case) are blacked out in every frame before any handler sees it, following them as they move and are restacked. Default: the password managers \(defaultExcludedWindows.joined(separator: ", ")); none: no window."
    ) {
        ($0.strings ?? []).contains { $0.isEmpty || $0.utf8.count > 256 }
            ? "takes WM_CLASS names of 1 to 256 bytes" : nil
    }
    public static let onLock = ConfigKey.choice(
        "on-lock", LockAction.allCases.map(\.rawValue), default: "pause",
        help:
            "When the desktop session locks (logind's LockedHint, or the screensaver's ActiveChanged): pause every live broadcast until it is unlocked (a recording's segments show it), send a privacy frame instead of the screen (blank: black with \"SCREEN LOCKED\", for streams whose viewers should not see a freeze), or ignore the lock."
    )
    public static let defaultExcludedWindows = ["KeePassXC", "1Password", "Bitwarden"]
    public static let cursor = ConfigKey.choice(
        "cursor", CursorMode.allCases.map(\.rawValue), default: "embedded",
        help: "The pointer: drawn into frames, sent as CURSOR messages (metadata), or hidden.")
    public static let camera = ConfigKey(
        "camera", .string, default: .string("none"),
        help:
            "A camera beside the screen, delivered to handlers that ask for it: none, default (the first PipeWire video source whose media.role is Camera, else the first), or one by node name, description or serial (see `broadcastctl sources`); through the desktop portal's Camera interface where the screen goes through the portal."
    ) {
        $0.string!.isEmpty || $0.string!.utf8.count > 256 ? "takes none, default, or a camera's name" : nil
    }
    public static let colorRange = ConfigKey.choice(
        "color-range", ColorRange.allCases.map(\.rawValue), default: "limited",
        help: "BT.709 range of converted frames: limited (16-235) or full (0-255).")
    public static let x11Grab = ConfigKey.choice(
        "x11-grab", GrabMethod.allCases.map(\.rawValue), default: "auto",
        help: "How X11 pixels are read.")
    public static let damage = ConfigKey.boolean(
        "damage", default: true,
        help: "Follow XDamage and grab only what changed; false grabs every X11 frame whole.")
    public static let size = ConfigKey(
        "size", .string, default: .string("1920x1080"),
        help: "Synthetic source frame size, WIDTHxHEIGHT; default 1920x1080."
    ) {
        VideoFormat.parseSize($0.string!) == nil ? "takes WIDTHxHEIGHT with even numbers from 16 to 16384" : nil
    }
    public static let fps = ConfigKey.integer("fps", 1...240, default: 30, help: "Frames per second.")
    public static let pixelFormat = ConfigKey.choice(
        "pixel-format", PixelFormat.allCases.map(\.description), default: "nv12",
        help: "Pixel format delivered to handlers.")
    public static let audioChannels = ConfigKey.integer("audio-channels", 1...2, default: 2, help: "Audio channels.")
    public static let audioFormat = ConfigKey.choice(
        "audio-format", AudioSampleFormat.allCases.map(\.description), default: "f32",
        help: "Audio sample format.")
    public static let appAudio = ConfigKey(
        "app-audio", .string, default: .string("default"),
        help:
            "App audio (what the computer plays), from PipeWire: default (the default sink's monitor), none, a sink's node name or serial, or an application's name or program (all its playback streams, mixed)."
    )
    public static let mic = ConfigKey(
        "mic", .string, default: .string("default"),
        help: "Microphone audio, from PipeWire: default (the default source), none, or a source's node name or serial.")
    public static let syncMarks = ConfigKey.boolean(
        "sync-marks", default: false,
        help:
            "Synthetic source: a white frame and a 50 ms beep on both tones at the same instant, once per second (A/V sync test)."
    )
    public static let audioClockPPM = ConfigKey.integer(
        "audio-clock-ppm", -5000...5000, default: 0,
        help: "Synthetic source: the audio sample clock runs N ppm fast (negative: slow); timestamps stay true.")
    public static let memoryBudget = ConfigKey.integer(
        "memory-budget", 1...65535, default: 50,
        help:
            "Memory budget in MB, pool included. Unset, 50 is a goal (what cannot fit runs, saying by how much); set, a promise (refused)."
    )
    public static let maxBroadcasts = ConfigKey.integer(
        "max-broadcasts", 1...8, default: 8,
        help: "Most broadcasts at once (they share one capture); a START beyond is refused.")
    public static let socket = ConfigKey(
        "socket", .string,
        help: "Socket path; unset: $BROADCASTD_SOCKET, else $XDG_RUNTIME_DIR/broadcastd/broadcastd.sock.")
    public static let handlersDir = ConfigKey(
        "handlers-dir", .strings, default: .strings([]),
        help: "Folders searched for handler manifests before the standard ones.")
    public static let startTimeout = ConfigKey.integer(
        "start-timeout", 1...600, default: 10,
        help: "Seconds a launched handler has to connect and finish broadcastStarted.")
    public static let finishTimeout = ConfigKey.integer(
        "finish-timeout", 1...600, default: 5,
        help: "Seconds a handler has to exit after the broadcast finished before it is stopped.")
    public static let handlerTimeout = ConfigKey.integer(
        "handler-timeout", 1...600, default: 10,
        help:
            "Seconds a live handler may go without reading, or without releasing a frame it holds, before the broadcast finishes with an error that it hung."
    )
    public static let notify = ConfigKey.boolean(
        "notify", default: true,
        help:
            "A desktop notification (org.freedesktop.Notifications) when capture of the screen (and the camera) starts and stops; nothing where the session has none. Not for the synthetic source alone."
    )
    public static let logLevel = ConfigKey.choice(
        "log-level", Logger.Level.allCases.map(\.rawValue), default: "info",
        help: "Log level.")

    public static let all = [
        source, pipewireNode, portalSource, display, output, region, window, app, excludeWindow, onLock, cursor,
        camera, colorRange, x11Grab, damage, size, fps, pixelFormat,
        audioChannels, audioFormat, appAudio, mic, syncMarks, audioClockPPM, memoryBudget, maxBroadcasts, socket,
        handlersDir,
        startTimeout, finishTimeout, handlerTimeout, notify, logLevel,
    ]
}

extension Configuration {
    /// Rules that span settings.
    public func checkCombinations() throws(ConfigError) {
        if string("output") != nil && string("region") != nil {
            throw error(["region", "output"], "output and region cannot both be set")
        }
        if string("app") != nil && (string("window") != nil || string("output") != nil || string("region") != nil) {
            throw error(
                ["app", "window", "output", "region"],
                "app captures the application's window; window, output and region cannot be set with it")
        }
        if string("app") != nil && string("app-audio") != "default" {
            throw error(["app", "app-audio"], "app captures the application's audio; app-audio cannot be set with it")
        }
        if string("app") != nil && (string("source") == "pipewire" || string("source") == "synthetic") {
            throw error(
                ["app", "source"],
                string("source") == "pipewire"
                    ? "app chooses an X11 window; with source pipewire the desktop portal's dialog chooses (portal-source window), and app-audio the application's sound"
                    : "app chooses an X11 window; the synthetic source has none")
        }
        if string("source") == "pipewire" && setting("exclude-window").origin != .builtIn
            && !strings("exclude-window").isEmpty
            && strings("exclude-window").map({ $0.lowercased() }) != ["none"]
        {
            throw error(
                ["exclude-window"],
                "exclude-window blacks out X11 windows; with source pipewire the desktop portal shares only what is chosen in its dialog (portal-source window: one window)"
            )
        }
        if string("window") != nil && (string("output") != nil || string("region") != nil) {
            throw error(
                ["window", "output", "region"], "window captures one window; output and region cannot be set with it")
        }
        if string("window") != nil && (string("source") == "pipewire" || string("source") == "synthetic") {
            throw error(
                ["window", "source"],
                string("source") == "pipewire"
                    ? "window chooses an X11 window; with source pipewire the desktop portal's dialog chooses: set portal-source to window"
                    : "window chooses an X11 window; the synthetic source has none")
        }
        if string("source") == "synthetic" && (string("app-audio") != "default" || string("mic") != "default") {
            throw error(
                ["app-audio", "mic"],
                "app-audio and mic choose PipeWire audio for a screen; the synthetic source makes its own tones")
        }
        if string("source") != "synthetic" && (boolean("sync-marks") || integer("audio-clock-ppm") != 0) {
            throw error(
                ["sync-marks", "audio-clock-ppm"],
                "sync-marks and audio-clock-ppm are features of the synthetic source; set source to synthetic")
        }
    }
}
