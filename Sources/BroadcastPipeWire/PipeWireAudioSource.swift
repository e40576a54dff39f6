import BroadcastCapture
import BroadcastCore
import BroadcastSystem
import Logging

/// A screen source with PipeWire's audio: app audio (what a sink plays) and the microphone, as separate
/// streams, never mixed. Video is the wrapped source's; the audio streams run while the broadcast is live.
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
    private var session: PipeWireSession?
    /// Signalled by PipeWire's thread when a stream has queued audio.
    private let arrival: Wakeup
    private var silenceReported: Set<SampleType> = []

    public init(video: CaptureSource, configuration: Configuration, logger: Logger) throws(CaptureError) {
        self.video = video
        self.configuration = configuration
        self.logger = logger
        do { arrival = try Wakeup() } catch {
            throw CaptureError(source: "pipewire", operation: "prepare the audio capture", reason: error.description)
        }
        var streams: [SampleType: PipeWireAudioStream] = [:]
        if let app = configuration.app {
            streams[.audioApp] = PipeWireAudioStream(name: "app audio", target: app, format: configuration.format, capturesSink: true, arrival: arrival)
        }
        if let mic = configuration.mic {
            streams[.audioMic] = PipeWireAudioStream(name: "mic", target: mic, format: configuration.format, capturesSink: false, arrival: arrival)
        }
        self.streams = streams
    }

    public var description: String {
        let audio = [("app audio", configuration.app), ("mic", configuration.mic)].compactMap { name, target in target.map { "\(name) \($0)" } }
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

    public func open() throws(CaptureError) -> VideoFormat { try video.open() }
    public var openAnswered: Descriptor? { video.openAnswered }
    public var openRetryAt: UInt64? { video.openRetryAt }
    public var choosesScreenAtStart: Bool { video.choosesScreenAtStart }
    public var mappedBytes: Int { video.mappedBytes }
    public func cancelOpen(_ reason: String) { video.cancelOpen(reason) }
    public func outputs() throws(CaptureError) -> CaptureOutputs { try video.outputs() }
    public func close() { video.close() }
    public func checkForChanges() throws(CaptureError) -> FrameChange { try video.checkForChanges() }
    public func captureFrame(index: UInt64, deadline: UInt64, into slot: UnsafeMutableRawPointer,
                             previous: UnsafeRawPointer?) throws(CaptureError) -> UInt64 {
        try video.captureFrame(index: index, deadline: deadline, into: slot, previous: previous)
    }

    public func begin(at time: UInt64) throws(CaptureError) {
        try video.begin(at: time)
        silenceReported = []
        let session = PipeWireSession(streams: Array(streams.values))
        do { try session.start(at: time) } catch {
            logger.warning("\(error); app audio and the microphone will be silent")
        }
        self.session = session
    }

    public func end() {
        session?.stop()
        session = nil
        video.end()
    }

    public var audioArrival: Wakeup? { arrival }

    /// When a stream falls due for silence: audio itself signals `arrival`.
    public func nextAudioDeadline() -> UInt64? {
        session == nil ? nil : streams.values.map(\.silenceDue).min()
    }

    /// The streams `nextAudioChunk` last found silent: nothing is built while none is (the daemon asks at every poll).
    public var silentAudio: [SampleType: String] {
        guard session != nil, !silenceReported.isEmpty else { return [:] }
        return Dictionary(uniqueKeysWithValues: silenceReported.compactMap { type in
            streams[type].map { (type, "\($0.name) (\($0.target)): nothing from PipeWire (stream \($0.status.state))") }
        })
    }

    public func nextAudioChunk(_ type: SampleType, now: UInt64) -> AudioChunk? {
        guard session != nil, let stream = streams[type], let chunk = stream.take(now: now) else { return nil }
        // Said once per silent stretch: the device is missing, unplugged, or PipeWire is not running.
        if stream.silentSince != nil {
            if silenceReported.insert(type).inserted {
                logger.warning("\(stream.name) (\(stream.target)): nothing from PipeWire for \(PipeWireAudioStream.silenceAfter / 1_000_000) ms (\(stream.status.state)); sending silence until it comes back")
            }
        } else if silenceReported.remove(type) != nil {
            logger.notice("\(stream.name) (\(stream.target)): audio is back")
        }
        return chunk
    }
}
