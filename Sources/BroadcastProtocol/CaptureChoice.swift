import BroadcastCore

/// What a broadcast asks to capture (START's `capture`, revision 2.1); every field left out is broadcastd's
/// own option. The first broadcast of a capture chooses it; the others join it as it is, or are refused.
public struct CaptureChoice: Codable, Equatable, Sendable, CustomStringConvertible {
    /// An X display, ":1": captured through X11 whatever broadcastd's own source is.
    public var display: String?
    /// A RandR monitor or output by name (X11).
    public var output: String?
    /// X,Y,WIDTHxHEIGHT of the screen (X11).
    public var region: String?
    /// One top-level window by id, class or title (X11, revision 2.2).
    public var window: String?
    /// One application by name or pid: its window and its audio (X11, revision 2.2).
    public var app: String?
    /// Frames per second, 1 to 240.
    public var frameRate: Int?
    /// embedded, metadata or hidden.
    public var cursor: String?
    /// Revision 2.6: window classes never captured (X11), beside broadcastd's own `--exclude-window` list.
    public var excludeWindows: [String]?
    /// Revision 2.8: the camera, delivered as `videoCamera` to handlers that ask for it: "none", "default" (the first
    /// PipeWire video source whose media.role is Camera, else the first), or one by node name, description or serial.
    public var camera: String?

    public init(
        display: String? = nil, output: String? = nil, region: String? = nil, window: String? = nil, app: String? = nil,
        frameRate: Int? = nil, cursor: String? = nil, excludeWindows: [String]? = nil, camera: String? = nil
    ) {
        self.display = display
        self.output = output
        self.region = region
        self.window = window
        self.app = app
        self.frameRate = frameRate
        self.cursor = cursor
        self.excludeWindows = excludeWindows
        self.camera = camera
    }

    public static let cursorModes = ["embedded", "metadata", "hidden"]
    public static let frameRates = 1...240
    /// The most window classes one broadcast may exclude.
    public static let maxExcludedWindows = 32

    public var isEmpty: Bool { self == CaptureChoice() }

    /// Why the choice cannot be taken as it is, said with the broadcastctl options it comes from; nil when it can.
    public var problem: String? {
        if (excludeWindows?.count ?? 0) > Self.maxExcludedWindows {
            return "--exclude-window: at most \(Self.maxExcludedWindows) window classes"
        }
        for (name, value) in [
            ("display", display), ("output", output), ("region", region), ("window", window), ("app", app),
            ("cursor", cursor), ("camera", camera),
        ] + (excludeWindows ?? []).map({ ("exclude-window", $0) }) {
            guard let value else { continue }
            if value.isEmpty || value.utf8.count > 256
                || value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            {
                return "--\(name) takes a name of at most 256 characters, without control characters"
            }
        }
        let targets = [("--output", output), ("--region", region), ("--window", window), ("--app", app)].filter {
            $0.1 != nil
        }.map(\.0)
        if targets.count > 1 { return "\(targets.joined(separator: " and ")): give one of them" }
        if let region, let problem = ScreenRegion.problem(region) { return "--region \(region): \(problem)" }
        if let frameRate, !Self.frameRates.contains(frameRate) { return "--fps \(frameRate): must be from 1 to 240" }
        if let cursor, !Self.cursorModes.contains(cursor) {
            return "--cursor \(cursor): must be one of \(Self.cursorModes.joined(separator: ", "))"
        }
        return nil
    }

    /// `self`, with what `request` says instead: an output, a region, a window or an app replaces the others,
    /// and another display starts from its whole screen.
    public func choosing(_ request: CaptureChoice) -> CaptureChoice {
        var chosen = self
        if let display = request.display, display != self.display {
            chosen.display = display
            chosen.target = (nil, nil, nil, nil)
        }
        if let output = request.output { chosen.target = (output, nil, nil, nil) }
        if let region = request.region { chosen.target = (nil, region, nil, nil) }
        if let window = request.window { chosen.target = (nil, nil, window, nil) }
        if let app = request.app { chosen.target = (nil, nil, nil, app) }
        if let frameRate = request.frameRate { chosen.frameRate = frameRate }
        if let cursor = request.cursor { chosen.cursor = cursor }
        if let camera = request.camera { chosen.camera = camera }
        if let excluded = request.excludeWindows {
            chosen.excludeWindows = Self.union(self.excludeWindows ?? [], excluded)
        }
        return chosen
    }

    /// `classes` and the ones of `more` not among them (window classes match in any case).
    public static func union(_ classes: [String], _ more: [String]) -> [String] {
        more.reduce(classes) { list, name in
            list.contains { $0.lowercased() == name.lowercased() } ? list : list + [name]
        }
    }

    /// What part of the screen: an output, a region, a window or an app (at most one is set).
    public var target: (output: String?, region: String?, window: String?, app: String?) {
        get { (output, region, window, app) }
        set { (output, region, window, app) = newValue }
    }

    /// As broadcastctl options: "--display :1 --region 0,0,640x360 --fps 30 --cursor embedded --camera default".
    public var description: String {
        let parts = [
            ("display", display), ("output", output), ("region", region), ("window", window), ("app", app),
            ("fps", frameRate.map(String.init)), ("cursor", cursor), ("camera", camera),
        ]
        let given =
            parts.compactMap { name, value in value.map { "--\(name) \($0)" } }
            + (excludeWindows ?? []).map { "--exclude-window \($0)" }
        return given.isEmpty ? "broadcastd's own options" : given.joined(separator: " ")
    }
}
