import BroadcastCapture
import BroadcastCore
import BroadcastSystem
import Logging

/// A screen source with PipeWire's audio: app audio (what a sink plays) and the microphone, as separate
/// streams, never mixed. Video is the wrapped source's; the audio streams run while the source is open, and
/// what they capture is taken while the broadcast is live.
public final class PipeWireAudioSource: CaptureSource {
    public struct Configuration: Sendable {
        /// nil: no app audio.
        public var app: AudioTarget?
        /// nil: no microphone.
        public var mic: AudioTarget?
        public var format: AudioFormat
        public init(app: AudioTarget?, mic: AudioTarget?, format: AudioFormat) {
            self.app = app
            self.mic = mic
            self.format = format
        }
    }

    private let video: CaptureSource
    private let configuration: Configuration
    private let logger: Logger
    private let streams: [SampleType: PipeWireAudioStream]
    /// From `open` (or the first `begin`) to `close`.
    private var session: PipeWireSession?
    /// Between `begin` and `end`: audio is taken.
    private var live = false
    /// When the session connected, until the first `begin` (which waits for audio).
    private var sessionStarted: UInt64?
    /// The longest a start waits for PipeWire's first audio, from when the streams were connected.
    static let startWait: UInt64 = 250_000_000
    /// Signalled by PipeWire's thread when a stream has queued audio.
    private let arrival: Wakeup
    private var silenceReported: Set<SampleType> = []
    /// Why PipeWire could not be reached when the streams were started, if it could not: every stream is silent.
    private var sessionFailure: String?

    public init(video: CaptureSource, configuration: Configuration, logger: Logger) throws(CaptureError) {
        self.video = video
        self.configuration = configuration
        self.logger = logger
        do { arrival = try Wakeup() } catch {
            throw CaptureError(source: "pipewire", operation: "prepare the audio capture", reason: error.description)
        }
        var streams: [SampleType: PipeWireAudioStream] = [:]
        if let app = configuration.app {
            streams[.audioApp] = PipeWireAudioStream(
                name: "app audio", target: app, format: configuration.format, capturesSink: true, arrival: arrival)
        }
        if let mic = configuration.mic {
            streams[.audioMic] = PipeWireAudioStream(
                name: "mic", target: mic, format: configuration.format, capturesSink: false, arrival: arrival)
        }
        self.streams = streams
    }

    public var description: String {
        let audio = [("app audio", configuration.app), ("mic", configuration.mic)].compactMap { name, target in
            target.map { "\(name) \($0)" }
        }
        return video.description + (audio.isEmpty ? "" : "; PipeWire " + audio.joined(separator: ", "))
    }
    public var videoFormat: VideoFormat { video.videoFormat }
    public var audioFormat: AudioFormat { configuration.format }
    public var audioStreams: [SampleType] {
        (configuration.app == nil ? [] : [.audioApp]) + (configuration.mic == nil ? [] : [.audioMic])
    }
    public var frameInterval: UInt64 { video.frameInterval }
    public var orientation: Orientation { video.orientation }
    public var colorRange: ColorRange { video.colorRange }
    public var cursor: CursorState? { video.cursor }
    public var statistics: [String: UInt64] {
        var figures = video.statistics
        for (type, stream) in streams {
            let f = stream.status.figures
            figures["\(type)Buffers"] = f.buffers
            figures["\(type)SilentChunks"] = f.silentChunks
            figures["\(type)QueueDrops"] = f.dropped
            figures["\(type)Resyncs"] = f.resyncs
        }
        return figures
    }

    /// The audio streams start with the screen (and keep a pre-roll until the broadcast goes live), so a start
    /// has audio from before its first frame.
    public func open() throws(CaptureError) -> VideoFormat {
        let format = try video.open()
        startSession()
        return format
    }
    public var openAnswered: Descriptor? { video.openAnswered }
    public var openRetryAt: UInt64? { video.openRetryAt }
    public var choosesScreenAtStart: Bool { video.choosesScreenAtStart }
    public var sharedMemory: [SharedBuffers] { video.sharedMemory }
    /// Each audio stream, connected in the background once the source is open: its buffers, queue and what
    /// libpipewire's audio conversion adds (measured: docs/benchmarks.md, "Memory").
    public var liveGrowth: Int { video.liveGrowth + streams.count * PipeWireAudioStream.residentBytes }
    public func cancelOpen(_ reason: String) { video.cancelOpen(reason) }
    public func retarget(_ target: CaptureTarget) throws(CaptureError) { try video.retarget(target) }
    public func outputs() throws(CaptureError) -> CaptureOutputs { try video.outputs() }
    public func close() {
        live = false
        sessionStarted = nil
        session?.stop()
        session = nil
        video.close()
    }
    public func checkForChanges() throws(CaptureError) -> FrameChange { try video.checkForChanges() }
    public func captureFrame(
        index: UInt64, deadline: UInt64, into slot: UnsafeMutableRawPointer,
        previous: UnsafeRawPointer?
    ) throws(CaptureError) -> UInt64 {
        try video.captureFrame(index: index, deadline: deadline, into: slot, previous: previous)
    }

    /// PipeWire's audio flows from `open` to `close`, across pauses: each start or resume takes the pre-roll
    /// from before `time` first.
    public func begin(at time: UInt64) throws(CaptureError) {
        startSession()
        if let started = sessionStarted {
            sessionStarted = nil
            awaitFirstAudio(until: started + Self.startWait)
        }
        try video.begin(at: time)
        // A stream that has had nothing from PipeWire by now (a start waited for it) is silent from the first frame on,
        // and the status as the broadcast goes live says so.
        silenceReported = []
        for (type, stream) in streams where !stream.hasHeard && sessionFailure == nil {
            silenceReported.insert(type)
            logger.warning(
                """
                \(stream.name) (\(stream.target)): nothing from PipeWire yet (stream \(stream.status.state)); \
                sending silence until it comes
                """)
        }
        for stream in streams.values { stream.goLive(at: time) }
        live = true
    }

    public func end() {
        live = false
        for stream in streams.values { stream.leaveLive() }
        video.end()
    }

    private func startSession() {
        guard session == nil, !streams.isEmpty else { return }
        sessionFailure = nil
        let session = PipeWireSession(streams: Array(streams.values))
        do {
            try session.start(at: nil)
            sessionStarted = MonotonicClock.now()
        } catch {
            logger.warning("\(error); app audio and the microphone will be silent")
            sessionFailure = "\(error)"
        }
        self.session = session
    }

    /// A broadcast's start waits (up to `startWait` from when the streams were connected, about 80 ms here) for
    /// each stream's first audio, so that its first frame has audio from before it, as a resume has.
    private func awaitFirstAudio(until deadline: UInt64) {
        let since = MonotonicClock.now()
        var now = since
        while now < deadline && !streams.values.allSatisfy(\.hasHeard) {
            arrival.acknowledge()
            let timeout = Int32((deadline - now) / 1_000_000 + 1)
            _ = try? Poller.wait([(arrival.descriptor.raw, .readable)], timeoutMilliseconds: timeout)
            now = MonotonicClock.now()
        }
        let waiting = streams.values.filter { !$0.hasHeard }.map(\.name)
        let missing = waiting.isEmpty ? "" : "; none yet from " + waiting.joined(separator: ", ")
        logger.debug("waited \((now - since) / 1_000_000) ms for PipeWire's first audio\(missing)")
    }

    public var audioArrival: Wakeup? { arrival }

    /// When a stream falls due for silence: audio itself signals `arrival`.
    public func nextAudioDeadline() -> UInt64? {
        live ? streams.values.map(\.silenceDue).min() : nil
    }

    /// The streams `nextAudioChunk` last found silent: nothing is built while none is (the daemon asks at every poll).
    public var silentAudio: [SampleType: String] {
        if let sessionFailure, session != nil {
            return streams.mapValues { _ in "PipeWire cannot be reached (\(sessionFailure))" }
        }
        guard live, !silenceReported.isEmpty else { return [:] }
        return Dictionary(
            uniqueKeysWithValues: silenceReported.compactMap { type in
                streams[type].map { stream in
                    (
                        type,
                        Self.silenceCause(stream.target, capturesSink: stream.capturesSink, state: stream.status.state)
                    )
                }
            })
    }

    /// Why a stream hears nothing, as a user can act on it: a stream PipeWire has not connected has nothing to
    /// connect to (no microphone, no sound output, nothing playing by that name); a connected one is quiet.
    static func silenceCause(_ target: AudioTarget, capturesSink: Bool, state: String) -> String {
        guard state == "unconnected" else { return "nothing comes from PipeWire (its stream is \(state))" }
        switch (target, capturesSink) {
        case (.defaultDevice, false): return "PipeWire has no microphone"
        case (.defaultDevice, true): return "PipeWire has no sound output to capture"
        case (.node(let name), false): return "PipeWire has no source '\(name)'"
        case (.node(let name), true): return "'\(name)' plays nothing through PipeWire"
        }
    }

    public func nextAudioChunk(_ type: SampleType, now: UInt64) -> AudioChunk? {
        guard live, let stream = streams[type], let chunk = stream.take(now: now) else { return nil }
        // Said once per silent stretch: the device is missing, unplugged, or PipeWire is not running.
        if stream.silentSince != nil {
            if silenceReported.insert(type).inserted {
                logger.warning(
                    "\(stream.name) (\(stream.target)): nothing from PipeWire for \(PipeWireAudioStream.silenceAfter / 1_000_000) ms (\(stream.status.state)); sending silence until it comes back"
                )
            }
        } else if silenceReported.remove(type) != nil {
            logger.notice("\(stream.name) (\(stream.target)): audio is back")
        }
        return chunk
    }
}
