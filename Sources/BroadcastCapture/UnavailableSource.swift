import BroadcastCore

/// What broadcastd captures when its session has no screen (no DISPLAY, no WAYLAND_DISPLAY): nothing. Every
/// broadcast that does not choose a display of its own is refused at START with `reason`, which says what to do.
/// Never a test pattern in its place: a broadcast that silently records colour bars loses what the user wanted.
public final class UnavailableSource: CaptureSource {
    private let reason: String

    public init(reason: String) { self.reason = reason }

    public var description: String { "nothing to capture (\(reason))" }
    public var videoFormat: VideoFormat { VideoFormat(width: 2, height: 2) }
    public var audioFormat: AudioFormat { AudioFormat() }
    public var audioStreams: [SampleType] { [] }
    public var frameInterval: UInt64 { 33_333_333 }
    public var orientation: Orientation { .up }
    public var colorRange: ColorRange { .limited }
    public var cursor: CursorState? { nil }
    public var statistics: [String: UInt64] { [:] }

    private var error: CaptureError { CaptureError(source: "no screen", operation: "open", reason: reason) }
    public func open() throws(CaptureError) -> VideoFormat { throw error }
    public func outputs() throws(CaptureError) -> CaptureOutputs { throw error }
    public func close() {}
    public func begin(at time: UInt64) throws(CaptureError) { throw error }
    public func end() {}
    public func checkForChanges() throws(CaptureError) -> FrameChange { throw error }
    public func captureFrame(
        index: UInt64, deadline: UInt64, into slot: UnsafeMutableRawPointer,
        previous: UnsafeRawPointer?
    ) throws(CaptureError) -> UInt64 { throw error }
    public func nextAudioDeadline() -> UInt64? { nil }
    public func nextAudioChunk(_ stream: SampleType, now: UInt64) -> AudioChunk? { nil }
}
