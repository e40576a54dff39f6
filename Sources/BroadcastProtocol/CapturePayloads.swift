import BroadcastCore
import BroadcastSystem
import FoundationEssentials

// JSON payloads that describe what can be captured: snapshots, sources, windows and outputs.

/// SNAPSHOT: the current frame, whose bytes are in the memfd that comes with the message.
public struct SnapshotDescription: Codable, Equatable, Sendable {
    public var video: VideoDescription
    /// BT.709 quantisation of NV12 and I420 frames: "limited" or "full".
    public var colorRange: String
    /// When the frame was captured, CLOCK_MONOTONIC nanoseconds.
    public var presentationTime: UInt64
    /// The broadcast whose latest frame this is; absent when the frame was grabbed for the snapshot.
    public var broadcast: UInt32?

    public init(video: VideoDescription, colorRange: String, presentationTime: UInt64, broadcast: UInt32?) {
        self.video = video
        self.colorRange = colorRange
        self.presentationTime = presentationTime
        self.broadcast = broadcast
    }
}

/// SOURCES: what the daemon captures and what could be captured instead.
public struct SourceList: Codable, Equatable, Sendable {
    /// The capture backend: "x11" or "synthetic".
    public var kind: String
    /// The current source, as status shows it.
    public var source: String
    /// The whole screen's size, when the backend has a screen.
    public var screenWidth: Int?
    public var screenHeight: Int?
    /// What `broadcastd --output NAME` can capture.
    public var outputs: [OutputDescription]
    /// The top-level windows `broadcastd --window ID|CLASS|TITLE` can capture, bottom to top (X11; since 2.2).
    public var windows: [WindowDescription]?
    /// The cameras `--camera NAME` can capture: PipeWire's video sources (since 2.8); absent when PipeWire cannot
    /// be asked.
    public var cameras: [CameraDescription]?

    public init(
        kind: String, source: String, screenWidth: Int? = nil, screenHeight: Int? = nil,
        outputs: [OutputDescription] = [],
        windows: [WindowDescription]? = nil, cameras: [CameraDescription]? = nil
    ) {
        self.kind = kind
        self.source = source
        self.screenWidth = screenWidth
        self.screenHeight = screenHeight
        self.outputs = outputs
        self.windows = windows
        self.cameras = cameras
    }
}

/// One top-level window (SOURCES, since 2.2).
public struct WindowDescription: Codable, Equatable, Sendable {
    /// The X window id of the client window.
    public var id: UInt32
    /// WM_CLASS: the instance and the class name.
    public var instance: String
    public var `class`: String
    public var title: String
    /// _NET_WM_PID, when the client sets it.
    public var pid: Int?
    /// The client area, in root-window pixels.
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
    /// Shown (false: minimised or otherwise unmapped).
    public var mapped: Bool

    public init(
        id: UInt32, instance: String, class className: String, title: String, pid: Int?,
        x: Int, y: Int, width: Int, height: Int, mapped: Bool
    ) {
        self.id = id
        self.instance = instance
        self.class = className
        self.title = title
        self.pid = pid
        self.x = x
        self.y = y
        self.width = width
        self.height = height
        self.mapped = mapped
    }
}

/// One RandR monitor or output.
public struct OutputDescription: Codable, Equatable, Sendable {
    public var name: String
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
    /// RandR rotation, degrees counter-clockwise; frames are captured as the rotated monitor shows them.
    public var rotation: Int
    public var reflected: Bool
    public var primary: Bool

    public init(name: String, x: Int, y: Int, width: Int, height: Int, rotation: Int, reflected: Bool, primary: Bool) {
        self.name = name
        self.x = x
        self.y = y
        self.width = width
        self.height = height
        self.rotation = rotation
        self.reflected = reflected
        self.primary = primary
    }
}
