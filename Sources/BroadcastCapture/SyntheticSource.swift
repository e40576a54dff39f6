import BroadcastCore
import BroadcastSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A built-in source for tests and demos: scrolling colour bars with the frame number drawn in,
/// a 440 Hz tone as app audio and an 880 Hz tone as mic audio.
///
/// Two test features, both off by default:
///
/// - **Sync marks** (`syncMarks`): a flash and a beep at the same instant, once per second of broadcast
///   time. The flash frames are frames 0, fps, 2·fps, ... counted from `begin(at:)`: the frames whose deadline
///   (their presentation time) is `start + m·fps·frameInterval`, i.e. `start + m` seconds (a few ns less
///   per second when fps does not divide 10^9: 30 fps gives 999 999 990 ns). They are drawn white (BT.709
///   limited Y=235, U=V=128; BGRx 255,255,255) with the frame number box still drawn in the top left corner.
///   A frame is chosen by its deadline, not by `index` (the daemon's sequence number, which a pause does not
///   reset); a frame whose deadline the daemon missed is dropped, and its flash with it.
///   The beep: on both tones, the samples from the first one whose time is at or after the flash frame's
///   presentation time, for `beepFrames` samples (50 ms), have amplitude `beepLevel` (0.8) instead of
///   `toneLevel` (0.25); frequency and phase carry on, so audio is continuous. The onset sample is exact:
///   its time (chunk pts plus its index in the chunk, in sample periods) is within one sample period
///   (20.8 µs) after the flash, whatever the chunk boundaries. A test finds it as the first sample whose
///   magnitude exceeds the normal peak, say |x| > 0.3; that is up to 13 samples (0.28 ms) late at 440 Hz and
///   7 samples (0.14 ms) at 880 Hz, when the beep starts near a zero crossing. Comparing with the steady
///   tone (same phase) finds it to the sample.
///   A resume calls `begin(at:)` again: the marks restart from the new start (a flash and a beep at once,
///   then every second after), they do not continue the old grid.
/// - **Audio clock skew** (`audioClockPPM` = N): the audio behaves like a device whose sample clock runs N
///   parts per million fast (slow when negative): 48000·(1 + N·10^-6) samples per monotonic second.
///   Chunks stay 480 frames; a chunk's presentation time is the true monotonic time of its first sample,
///   `start + n·10^9 / (48000·(1 + N·10^-6))` ns, and it is due once its end time has passed. So the
///   timestamps stay truthful while the sample count runs ahead: a recorder that counts samples drifts
///   by N µs per second, one that follows timestamps does not. The sine advances per sample at the nominal
///   48 kHz rate: played at 48 kHz the recording is exactly 440 Hz (880 Hz), which is 440·(1 + N·10^-6) Hz
///   in monotonic time. (A real fast device recording a true 440 Hz tone would give 440/(1 + N·10^-6) Hz.)
///   Beeps start at the first sample whose skewed time is at or after the flash. With N = 0 the audio is
///   what it was without the option, sample for sample.
public final class SyntheticSource: CaptureSource {
    public struct Configuration: Sendable {
        public var video: VideoFormat
        public var framesPerSecond: Int
        public var audio: AudioFormat
        public var orientation: Orientation
        /// A white frame and a beep on both tones at the same instant, once per second.
        public var syncMarks: Bool
        /// How many parts per million the audio sample clock runs fast (negative: slow), -5000...5000.
        public var audioClockPPM: Int

        public init(
            video: VideoFormat = VideoFormat(width: 1920, height: 1080), framesPerSecond: Int = 30,
            audio: AudioFormat = AudioFormat(), orientation: Orientation = .up,
            syncMarks: Bool = false, audioClockPPM: Int = 0
        ) {
            self.video = video
            self.framesPerSecond = framesPerSecond
            self.audio = audio
            self.orientation = orientation
            self.syncMarks = syncMarks
            self.audioClockPPM = audioClockPPM
        }
    }

    public static let appToneHz = 440.0
    public static let micToneHz = 880.0
    /// Audio is produced in chunks of this many frames (10 ms at 48 kHz).
    public static let chunkFrames = 480
    /// The tones' amplitude, and the beeps' (sync marks).
    public static let toneLevel = 0.25
    public static let beepLevel = 0.8
    /// A beep's length in samples: 50 ms at 48 kHz.
    public static let beepFrames = 2400

    public let configuration: Configuration
    private let pattern: TestPattern
    private var appTone: ToneGenerator
    private var micTone: ToneGenerator
    /// Nanoseconds between sync marks (fps frame intervals), nil without them.
    private let markInterval: UInt64?
    /// The time given to the last `begin(at:)`: sync marks count from it.
    private var start: UInt64 = 0

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        pattern = TestPattern(format: configuration.video)
        let fps = UInt64(configuration.framesPerSecond)
        let markInterval = configuration.syncMarks ? fps * (1_000_000_000 / fps) : nil
        self.markInterval = markInterval
        func tone(_ frequency: Double) -> ToneGenerator {
            ToneGenerator(
                frequency: frequency, format: configuration.audio, chunkFrames: Self.chunkFrames,
                clockPPM: configuration.audioClockPPM, beepInterval: markInterval)
        }
        appTone = tone(Self.appToneHz)
        micTone = tone(Self.micToneHz)
    }

    public var description: String {
        "synthetic \(configuration.video) @ \(configuration.framesPerSecond) fps"
            + (configuration.syncMarks ? ", sync marks" : "")
            + (configuration.audioClockPPM != 0
                ? ", audio clock \(configuration.audioClockPPM > 0 ? "+" : "")\(configuration.audioClockPPM) ppm" : "")
    }
    public var videoFormat: VideoFormat { configuration.video }
    public var audioFormat: AudioFormat { configuration.audio }
    public var audioStreams: [SampleType] { [.audioApp, .audioMic] }
    public var frameInterval: UInt64 { 1_000_000_000 / UInt64(configuration.framesPerSecond) }
    public var orientation: Orientation { configuration.orientation }
    public var colorRange: ColorRange { .limited }
    public var cursor: CursorState? { nil }
    public var statistics: [String: UInt64] { [:] }

    public func open() throws(CaptureError) -> VideoFormat { configuration.video }
    public func close() {}

    public func outputs() throws(CaptureError) -> CaptureOutputs {
        CaptureOutputs(
            kind: "synthetic",
            screen: ScreenRect(x: 0, y: 0, width: configuration.video.width, height: configuration.video.height),
            outputs: [])
    }

    public func begin(at time: UInt64) throws(CaptureError) {
        start = time
        appTone.restart(at: time)
        micTone.restart(at: time)
    }

    public func end() {}

    /// A synthetic frame shows the moment it is due: stamped with its deadline, so timestamps are exactly
    /// regular and any lateness of the loop shows in the handler's measured latency.
    /// Every frame is new: the pattern scrolls. With sync marks, every fps-th deadline from `begin(at:)` is a white frame.
    public func checkForChanges() throws(CaptureError) -> FrameChange { .changed }

    public func captureFrame(
        index: UInt64, deadline: UInt64, into slot: UnsafeMutableRawPointer,
        previous: UnsafeRawPointer?
    ) throws(CaptureError) -> UInt64 {
        if let interval = markInterval, deadline >= start, (deadline - start) % interval == 0 {
            pattern.renderWhite(index: index, into: slot)
        } else {
            pattern.render(index: index, into: slot)
        }
        return deadline
    }

    public func nextAudioDeadline() -> UInt64? {
        min(appTone.nextChunkEnd, micTone.nextChunkEnd)
    }

    public func nextAudioChunk(_ stream: SampleType, now: UInt64) -> AudioChunk? {
        switch stream {
        case .audioApp: appTone.next(now: now)
        case .audioMic: micTone.next(now: now)
        case .video, .videoCamera: nil
        }
    }
}

/// A sine tone cut into chunks whose timestamps follow the sample count from a start time,
/// so audio time never drifts against the monotonic clock: sample n is at
/// start + n·10^15 / (sampleRate·(10^6 + clockPPM)) ns, which is start + n·10^9 / sampleRate without skew.
/// With `beepInterval`, the tone is louder for `SyntheticSource.beepFrames` samples from the first sample at or
/// after each start + m·beepInterval.
struct ToneGenerator {
    let frequency: Double
    let format: AudioFormat
    let chunkFrames: Int
    let beepInterval: UInt64?
    /// Samples per 10^6 seconds of the monotonic clock.
    private let rate: UInt64
    private var start: UInt64 = 0
    private var framesProduced: UInt64 = 0
    private var phase = 0.0
    /// The next beep that has not ended (m), and its first sample.
    private var beep: UInt64 = 0
    private var beepOnset: UInt64 = 0

    init(frequency: Double, format: AudioFormat, chunkFrames: Int, clockPPM: Int = 0, beepInterval: UInt64? = nil) {
        self.frequency = frequency
        self.format = format
        self.chunkFrames = chunkFrames
        self.beepInterval = beepInterval
        rate = UInt64(format.sampleRate) * UInt64(1_000_000 + clockPPM)
    }

    mutating func restart(at time: UInt64) {
        start = time
        framesProduced = 0
        beep = 0
        beepOnset = 0
    }

    /// ⌊a·b / c⌋, or ⌈a·b / c⌉, without overflow.
    private static func scale(_ a: UInt64, _ b: UInt64, _ c: UInt64, roundingUp: Bool = false) -> UInt64 {
        let (quotient, remainder) = c.dividingFullWidth(a.multipliedFullWidth(by: b))
        return roundingUp && remainder > 0 ? quotient + 1 : quotient
    }

    private func time(ofFrame n: UInt64) -> UInt64 {
        start + Self.scale(n, 1_000_000_000_000_000, rate)
    }

    /// The first sample whose time is at or after start + `offset` ns.
    private func firstFrame(atOrAfter offset: UInt64) -> UInt64 {
        Self.scale(offset, rate, 1_000_000_000_000_000, roundingUp: true)
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
                var level = SyntheticSource.toneLevel
                if let beepInterval {
                    let n = framesProduced + UInt64(i)
                    if n == beepOnset + UInt64(SyntheticSource.beepFrames) {
                        beep += 1
                        beepOnset = firstFrame(atOrAfter: beep * beepInterval)
                    }
                    if n >= beepOnset { level = SyntheticSource.beepLevel }
                }
                let value = level * sin(phase)
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
