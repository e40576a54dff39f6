import BroadcastCore

/// The error type of BroadcastCapture: which source failed, doing what, and why.
public struct CaptureError: Error, CustomStringConvertible, Sendable {
    public var source: String
    public var operation: String
    public var reason: String

    public init(source: String, operation: String, reason: String) {
        self.source = source
        self.operation = operation
        self.reason = reason
    }

    public var description: String { "\(source) capture: \(operation): \(reason)" }
}

/// A source of video frames and the two audio streams, all stamped on CLOCK_MONOTONIC.
/// The daemon's loop drives it: it asks for a frame at each frame deadline, written straight into a
/// pool slot, and for the audio that has become available. Calls come from one thread.
public protocol CaptureSource: AnyObject {
    /// For status and logs, e.g. "synthetic 1920x1080 nv12 @ 30 fps".
    var description: String { get }
    var videoFormat: VideoFormat { get }
    var audioFormat: AudioFormat { get }
    /// Nanoseconds between video frames.
    var frameInterval: UInt64 { get }
    var orientation: Orientation { get }

    /// Called when the broadcast goes live or resumes: capture starts (again) at `time`.
    func begin(at time: UInt64) throws(CaptureError)
    /// Called on pause and finish.
    func end()
    /// Writes the frame numbered `index`, due at `deadline`, into `slot` (laid out as `videoFormat.planes`)
    /// and returns the monotonic time at which it was captured: the moment of the grab for a real screen.
    func captureFrame(index: UInt64, deadline: UInt64, into slot: UnsafeMutableRawPointer) throws(CaptureError) -> UInt64
    /// When the next audio chunk will be complete, so the loop can wake exactly then.
    func nextAudioDeadline() -> UInt64?
    /// The next chunk of `stream` (`.audioApp` or `.audioMic`) that is complete by `now`, or nil.
    func nextAudioChunk(_ stream: SampleType, now: UInt64) -> AudioChunk?
}

/// A run of interleaved PCM samples in the source's audio format.
public struct AudioChunk: Sendable {
    public var presentationTime: UInt64
    public var duration: UInt64
    public var frameCount: Int
    public var bytes: [UInt8]

    public init(presentationTime: UInt64, duration: UInt64, frameCount: Int, bytes: [UInt8]) {
        self.presentationTime = presentationTime
        self.duration = duration
        self.frameCount = frameCount
        self.bytes = bytes
    }
}
