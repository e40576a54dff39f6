import BroadcastCore
import BroadcastSystem

/// The error type of BroadcastCapture and the capture backends: which source failed, doing what, and why.
public struct CaptureError: Error, CustomStringConvertible, Sendable {
    public var source: String
    public var operation: String
    public var reason: String
    /// Only this frame was lost (the screen changed size under the grab, say); the next may succeed.
    public var transient: Bool
    /// Not a failure yet: `open` is waiting, for the user (the portal's share dialog) or the screen's first
    /// frame; `reason` says which. See `CaptureSource.openAnswered`.
    public var pending: Bool

    public init(source: String, operation: String, reason: String, transient: Bool = false, pending: Bool = false) {
        self.source = source
        self.operation = operation
        self.reason = reason
        self.transient = transient
        self.pending = pending
    }

    public var description: String { "\(source) capture: \(operation): \(reason)" }
}

/// What happened on screen since the last frame was captured.
public enum FrameChange: Equatable, Sendable {
    /// Nothing changed: the last frame repeats.
    case unchanged
    /// Some or all of the picture changed.
    case changed
    /// The frame size changed (a RandR resize); frames from now on have this format.
    case resized(VideoFormat)
}

/// How the pointer is delivered.
public enum CursorMode: String, Sendable, CaseIterable {
    /// Drawn into the frames.
    case embedded
    /// Not drawn; its position (every frame) and sprite (when it changes) come as CURSOR messages.
    case metadata
    /// Neither drawn nor reported.
    case hidden
}

/// The pointer as the metadata cursor mode reports it, in frame coordinates.
public struct CursorState: Equatable, Sendable {
    /// Where the hotspot is, relative to the frame's top left corner; may lie outside the frame.
    public var x: Int32
    public var y: Int32
    public var visible: Bool
    public var sprite: CursorSprite?

    public init(x: Int32, y: Int32, visible: Bool, sprite: CursorSprite?) {
        self.x = x
        self.y = y
        self.visible = visible
        self.sprite = sprite
    }
}

/// A pointer image: premultiplied ARGB, 32 bits per pixel (as XFixes gives it), row after row.
public struct CursorSprite: Equatable, Sendable {
    public var width: Int
    public var height: Int
    public var hotspotX: Int
    public var hotspotY: Int
    public var pixels: [UInt32]
    /// Changes whenever the image does.
    public var serial: UInt32

    public init(width: Int, height: Int, hotspotX: Int, hotspotY: Int, pixels: [UInt32], serial: UInt32) {
        self.width = width
        self.height = height
        self.hotspotX = hotspotX
        self.hotspotY = hotspotY
        self.pixels = pixels
        self.serial = serial
    }
}

/// What a source can capture: for `broadcastctl sources`.
public struct CaptureOutputs: Sendable {
    /// The backend: "x11" or "synthetic".
    public var kind: String
    public var screen: ScreenRect?
    public var outputs: [ScreenOutput]
    /// The top-level windows that `--window` can capture, bottom to top (X11 only).
    public var windows: [CaptureWindow]

    public init(kind: String, screen: ScreenRect?, outputs: [ScreenOutput], windows: [CaptureWindow] = []) {
        self.kind = kind
        self.screen = screen
        self.outputs = outputs
        self.windows = windows
    }
}

/// A source of video frames and the two audio streams, all stamped on CLOCK_MONOTONIC.
/// The daemon's loop drives it from one thread: `open` when a broadcast is requested (so an unusable
/// screen is refused before the broadcast starts), `begin`/`end` around each live stretch, then at each
/// frame deadline `checkForChanges` and, when something changed, `captureFrame` straight into a pool slot.
public protocol CaptureSource: AnyObject {
    /// For status and logs, e.g. "synthetic 1920x1080 nv12 @ 30 fps".
    var description: String { get }
    /// The format of the next frame; valid after `open`.
    var videoFormat: VideoFormat { get }
    var audioFormat: AudioFormat { get }
    /// The audio streams this source delivers (`nextAudioChunk` yields nothing for the others).
    var audioStreams: [SampleType] { get }
    /// Nanoseconds between video frames.
    var frameInterval: UInt64 { get }
    var orientation: Orientation { get }
    /// The BT.709 quantisation of NV12 and I420 frames.
    var colorRange: ColorRange { get }
    /// The pointer, when the cursor mode is `.metadata`; nil otherwise.
    var cursor: CursorState? { get }
    /// Figures for status (frames grabbed, bands converted, ...), by name.
    var statistics: [String: UInt64] { get }

    /// Makes the source ready for a broadcast (connects to the display, say) and returns the first frames' format.
    func open() throws(CaptureError) -> VideoFormat
    /// The screen and the outputs that could be captured (connecting for the purpose if need be).
    func outputs() throws(CaptureError) -> CaptureOutputs
    /// Lets go of what `open` took; called when the broadcast is over.
    func close()
    /// Called when the broadcast goes live or resumes: capture starts (again) at `time`.
    func begin(at time: UInt64) throws(CaptureError)
    /// Called on pause and finish.
    func end()
    /// Reads what changed on screen since the last captured frame. Cheap when nothing did.
    func checkForChanges() throws(CaptureError) -> FrameChange
    /// Writes the frame numbered `index`, due at `deadline`, into `slot` (laid out as `videoFormat.planes`)
    /// and returns the monotonic time at which it was captured: the moment of the grab for a real screen.
    /// `previous` is the slot holding the last frame delivered in the same format, if any: parts of the
    /// picture that did not change may be copied from it instead of being grabbed again.
    func captureFrame(
        index: UInt64, deadline: UInt64, into slot: UnsafeMutableRawPointer,
        previous: UnsafeRawPointer?
    ) throws(CaptureError) -> UInt64
    /// When the next audio chunk will be complete, so the loop can wake exactly then; nil when the source has no audio.
    func nextAudioDeadline() -> UInt64?
    /// For a source whose audio arrives on another thread: signalled when some has, so the loop takes it at
    /// once (acknowledging first) rather than waiting for `nextAudioDeadline`; nil for a source with none.
    var audioArrival: Wakeup? { get }
    /// The next chunk of `stream` (`.audioApp` or `.audioMic`) that is complete by `now`, or nil.
    func nextAudioChunk(_ stream: SampleType, now: UInt64) -> AudioChunk?

    /// Set for a source whose `open` may wait: for the user to choose what to capture (the desktop portal's
    /// share dialog), or for the first frame of what it captures. Meanwhile `open` throws a `pending` error,
    /// and this descriptor becomes readable when `open` is worth calling again.
    var openAnswered: Descriptor? { get }
    /// When to call a pending `open` again even if `openAnswered` has not become readable (it then fails,
    /// out of time), if ever.
    var openRetryAt: UInt64? { get }
    /// The user chooses the screen when a broadcast starts (the portal's dialog): the source is not opened
    /// before, nor for a snapshot while idle.
    var choosesScreenAtStart: Bool { get }
    /// Withdraws what a pending `open` waits for (the dialog closes); `open` then fails with `reason`.
    func cancelOpen(_ reason: String)
    /// The audio streams sending silence because nothing comes from their device (missing, unplugged,
    /// no PipeWire), each with why.
    var silentAudio: [SampleType: String] { get }
    /// Captures `target` instead from the next frame on (`checkForChanges` then says `.resized` when the size
    /// differs); throws, changing nothing, when this source cannot or the target is not there.
    func retarget(_ target: CaptureTarget) throws(CaptureError)
    /// The shared memory the open source maps besides the frame pool (PipeWire's buffers, shared with the
    /// compositor; MIT-SHM's, with the X server), each named as a user knows it: the memory plan counts them at
    /// their full size, whatever of them is resident when it measures the daemon.
    var sharedMemory: [SharedBuffers] { get }
    /// What the source adds to the daemon's resident memory once live, beyond what it has when opened (PipeWire's
    /// audio streams, which connect in the background).
    var liveGrowth: Int { get }
}

extension CaptureSource {
    public var openAnswered: Descriptor? { nil }
    public var openRetryAt: UInt64? { nil }
    public var choosesScreenAtStart: Bool { false }
    public var audioArrival: Wakeup? { nil }
    public var silentAudio: [SampleType: String] { [:] }
    public var sharedMemory: [SharedBuffers] { [] }
    public var liveGrowth: Int { 0 }
    public func cancelOpen(_ reason: String) {}
    public func retarget(_ target: CaptureTarget) throws(CaptureError) {
        throw CaptureError(
            source: description, operation: "capture \(target)",
            reason: "this source captures what it was started with until its broadcasts finish")
    }
}

/// Buffers a source maps and shares with another process (the X server, the compositor): where they are in this
/// process, and what a user knows them as ("the compositor's buffers (2 x 7.9 MB)").
public struct SharedBuffers: Sendable {
    public var name: String
    /// Each buffer's mapping: its first byte's address and its size.
    public var regions: [(start: UInt, count: Int)]
    public var bytes: Int { regions.reduce(0) { $0 + $1.count } }

    public init(name: String, regions: [(start: UInt, count: Int)]) {
        self.name = name
        self.regions = regions
    }
}

/// A run of interleaved PCM samples in the source's audio format.
public struct AudioChunk: Sendable {
    public var presentationTime: UInt64
    public var duration: UInt64
    public var frameCount: Int
    public var bytes: [UInt8]
    /// Samples the source lost come before this one (an xrun): the handler gets it with the discontinuity flag.
    /// Without it a chunk follows on from the last, wherever its `presentationTime` puts it.
    public var discontinuity: Bool

    public init(
        presentationTime: UInt64, duration: UInt64, frameCount: Int, bytes: [UInt8],
        discontinuity: Bool = false
    ) {
        self.presentationTime = presentationTime
        self.duration = duration
        self.frameCount = frameCount
        self.bytes = bytes
        self.discontinuity = discontinuity
    }
}
