import BroadcastCore
import BroadcastSystem

#if canImport(Glibc)
import Glibc
#endif

/// A built-in source for tests and demos: scrolling colour bars with the frame number drawn in,
/// a 440 Hz tone as app audio and an 880 Hz tone as mic audio.
public final class SyntheticSource: CaptureSource {
    public struct Configuration: Sendable {
        public var video: VideoFormat
        public var framesPerSecond: Int
        public var audio: AudioFormat
        public var orientation: Orientation

        public init(video: VideoFormat = VideoFormat(width: 1920, height: 1080), framesPerSecond: Int = 30,
                    audio: AudioFormat = AudioFormat(), orientation: Orientation = .up) {
            self.video = video
            self.framesPerSecond = framesPerSecond
            self.audio = audio
            self.orientation = orientation
        }
    }

    public static let appToneHz = 440.0
    public static let micToneHz = 880.0
    /// Audio is produced in chunks of this many frames (10 ms at 48 kHz).
    public static let chunkFrames = 480

    public let configuration: Configuration
    private let pattern: TestPattern
    private var appTone: ToneGenerator
    private var micTone: ToneGenerator

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        pattern = TestPattern(format: configuration.video)
        appTone = ToneGenerator(frequency: Self.appToneHz, format: configuration.audio, chunkFrames: Self.chunkFrames)
        micTone = ToneGenerator(frequency: Self.micToneHz, format: configuration.audio, chunkFrames: Self.chunkFrames)
    }

    public var description: String { "synthetic \(configuration.video) @ \(configuration.framesPerSecond) fps" }
    public var videoFormat: VideoFormat { configuration.video }
    public var audioFormat: AudioFormat { configuration.audio }
    public var frameInterval: UInt64 { 1_000_000_000 / UInt64(configuration.framesPerSecond) }
    public var orientation: Orientation { configuration.orientation }
    public var cursor: CursorState? { nil }
    public var statistics: [String: UInt64] { [:] }

    public func open() throws(CaptureError) -> VideoFormat { configuration.video }
    public func close() {}

    public func outputs() throws(CaptureError) -> CaptureOutputs {
        CaptureOutputs(kind: "synthetic", screen: ScreenRect(x: 0, y: 0, width: configuration.video.width, height: configuration.video.height), outputs: [])
    }

    public func begin(at time: UInt64) throws(CaptureError) {
        appTone.restart(at: time)
        micTone.restart(at: time)
    }

    public func end() {}

    /// A synthetic frame shows the moment it is due: stamped with its deadline, so timestamps are exactly
    /// regular and any lateness of the loop shows in the handler's measured latency.
    /// Every frame is new: the pattern scrolls.
    public func checkForChanges() throws(CaptureError) -> FrameChange { .changed }

    public func captureFrame(index: UInt64, deadline: UInt64, into slot: UnsafeMutableRawPointer,
                             previous: UnsafeRawPointer?) throws(CaptureError) -> UInt64 {
        pattern.render(index: index, into: slot)
        return deadline
    }

    public func nextAudioDeadline() -> UInt64? {
        min(appTone.nextChunkEnd, micTone.nextChunkEnd)
    }

    public func nextAudioChunk(_ stream: SampleType, now: UInt64) -> AudioChunk? {
        switch stream {
        case .audioApp: appTone.next(now: now)
        case .audioMic: micTone.next(now: now)
        case .video: nil
        }
    }
}

/// A sine tone cut into chunks whose timestamps follow the sample count from a start time,
/// so audio time never drifts against the monotonic clock.
struct ToneGenerator {
    let frequency: Double
    let format: AudioFormat
    let chunkFrames: Int
    private var start: UInt64 = 0
    private var framesProduced: UInt64 = 0
    private var phase = 0.0

    init(frequency: Double, format: AudioFormat, chunkFrames: Int) {
        self.frequency = frequency
        self.format = format
        self.chunkFrames = chunkFrames
    }

    mutating func restart(at time: UInt64) {
        start = time
        framesProduced = 0
    }

    private func time(ofFrame n: UInt64) -> UInt64 {
        start + n * 1_000_000_000 / UInt64(format.sampleRate)
    }

    var nextChunkEnd: UInt64 { time(ofFrame: framesProduced + UInt64(chunkFrames)) }

    mutating func next(now: UInt64) -> AudioChunk? {
        let end = nextChunkEnd
        guard now >= end else { return nil }
        let pts = time(ofFrame: framesProduced)
        var bytes = [UInt8](repeating: 0, count: chunkFrames * format.bytesPerFrame)
        let step = 2 * Double.pi * frequency / Double(format.sampleRate)
        bytes.withUnsafeMutableBytes { raw in
            for i in 0..<chunkFrames {
                let value = 0.25 * sin(phase)
                phase += step
                if phase > 2 * Double.pi { phase -= 2 * Double.pi }
                for c in 0..<format.channels {
                    let index = i * format.channels + c
                    switch format.sampleFormat {
                    case .float32: raw.storeBytes(of: Float(value), toByteOffset: index * 4, as: Float.self)
                    case .s16: raw.storeBytes(of: Int16(value * 32767), toByteOffset: index * 2, as: Int16.self)
                    }
                }
            }
        }
        framesProduced += UInt64(chunkFrames)
        return AudioChunk(presentationTime: pts, duration: end - pts, frameCount: chunkFrames, bytes: bytes)
    }
}
