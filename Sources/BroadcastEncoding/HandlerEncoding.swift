import BroadcastCore
import BroadcastHandlerKit
import BroadcastProtocol

/// Where a handler that writes encoded packets (record, replay, a shared stream) gets them: a `RecordingEncoder` of
/// its own, fed the samples, or (revision 2.9, `encode=shared`) the encoder broadcastd runs for every handler of the
/// capture asking for the same encoding, whose packets a `SharedEncoderInput` puts on this handler's own time line.
/// The handler forwards its callbacks here (`EncodingSampleHandler`); either way its output gets packets the same
/// way.
package final class HandlerEncoding {
    private enum Source {
        /// Asked broadcastd for a shared encoder; samples are dropped until it answers.
        case awaiting
        case own(RecordingEncoder)
        /// Sharing encoder `id` (a broadcast); `input` once its streams came.
        case shared(id: UInt32, input: SharedEncoderInput?)
    }

    private let options: EncodingOptions
    private unowned let handler: BroadcastSampleHandler
    private let output: EncodedOutput
    private var source: Source
    /// The monotonic clock (ns), for a shared encoder's input.
    private let now: () -> UInt64
    /// Which of a shared encoder's streams the handler takes (its video always).
    private let keeps: (EncodedStreamDescription) -> Bool

    /// Asks for a shared encoder when the options say `encode=shared` and broadcastd offers one for them; encodes
    /// here otherwise. Of a shared encoder's streams, it takes those it `keeps`.
    package init(
        _ options: EncodingOptions, for handler: BroadcastSampleHandler, output: EncodedOutput,
        now: @escaping () -> UInt64, keeps: @escaping (EncodedStreamDescription) -> Bool = { _ in true }
    ) throws(MediaError) {
        self.options = options
        self.handler = handler
        self.output = output
        self.now = now
        self.keeps = keeps
        if options.shared, handler.daemonOffers("encoded-samples") == true, let settings = options.sharedSettings {
            source = .awaiting
            handler.requestEncoding(settings)
        } else {
            source = .own(try RecordingEncoder(options, for: handler, output: output))
        }
    }

    /// The encoder of its own, when it encodes.
    package var own: RecordingEncoder? {
        if case .own(let encoder) = source { encoder } else { nil }
    }

    /// The shared encoder's broadcast, when it shares one.
    package var sharedEncoder: UInt32? {
        if case .shared(let id, _) = source { id } else { nil }
    }

    private var input: SharedEncoderInput? {
        if case .shared(_, let input) = source { input } else { nil }
    }

    /// What it encodes with, for the log.
    package var name: String {
        switch source {
        case .awaiting: "asking broadcastd for a shared encoder"
        case .own(let encoder): encoder.implementationName
        case .shared(let id, _): "the encoder shared as broadcast \(id)"
        }
    }

    /// Where the file's time is: its duration so far (ns).
    package var fileTime: UInt64 {
        switch source {
        case .awaiting: 0
        case .own(let encoder): encoder.clock.duration
        case .shared(_, let input): UInt64(max(0, input?.fileTime ?? 0))
        }
    }

    /// broadcastd's answer to the request: a shared encoder, or (with its reason, returned) one here.
    package func answered(_ notice: EncodingNotice) throws(MediaError) -> String? {
        guard case .awaiting = source else { return nil }
        if let id = notice.encoder {
            source = .shared(id: id, input: nil)
            return nil
        }
        source = .own(try RecordingEncoder(options, for: handler, output: output))
        return notice.error ?? "broadcastd did not say why"
    }

    /// What the shared encoder told.
    package func take(_ event: SharedEncoderEvent) throws(MediaError) {
        guard case .shared(let id, let input) = source else { return }
        if let input { return try input.take(event) }
        guard case .streams = event, let ring = handler.packetRing else { return }
        let made = SharedEncoderInput(output: output, ring: ring, keeps: keeps, now: now) { [unowned handler] in
            handler.requestKeyframe()
        }
        source = .shared(id: id, input: made)
        try made.take(event)
    }

    /// A sample, for the encoder of its own; true when it was a video frame taken.
    package func add(_ sample: SampleBuffer, _ type: SampleType) throws(MediaError) -> Bool {
        guard let encoder = own else { return false }
        switch type {
        case .video:
            _ = try encoder.addVideo(sample)
            return true
        case .videoCamera: try encoder.addCamera(sample)
        default: try encoder.addAudio(sample, type)
        }
        return false
    }

    /// The next frame should be a keyframe (a stream's destination dropped GOPs): the encoder of its own makes one,
    /// or the shared one is asked for one.
    package func requestKeyframe() {
        switch source {
        case .awaiting: break
        case .own(let encoder): encoder.requestKeyframe()
        case .shared(_, let input): input?.ask()
        }
    }

    package func inputChanged(to format: VideoFormat) throws(MediaError) { try own?.inputChanged(to: format) }
    package func cameraChanged(to format: VideoFormat?) { own?.cameraChanged(to: format) }

    /// The broadcast paused: the segment ends here (its end, file time), or nothing is taken until it resumes.
    package func pause() -> UInt64? {
        if let input {
            input.pause()
            return UInt64(max(0, input.fileTime))
        }
        return own?.pause()
    }

    package func resume() { input?.resume() }

    /// Hands on what the encoder holds and ends the streams; returns the file's duration (ns).
    package func finish() throws(MediaError) -> UInt64 {
        switch source {
        case .awaiting: 0
        case .own(let encoder): try encoder.finish()
        case .shared(_, let input): UInt64(max(0, try input?.finish() ?? 0))
        }
    }

    /// The encoding part of the handler's result: the same fields either way (a shared encoder's audio figures,
    /// `missingMs`, `droppedMs` and `maxClockOffsetMs`, for the stretches this handler wrote), and with a shared one
    /// which it is and what this handler lost of it.
    package func result() -> [String: JSONValue] {
        switch source {
        case .awaiting: ["duration": .number(0)]
        case .own(let encoder): encoder.result()
        case .shared(let id, let input):
            [
                "duration": .number(Double(input?.fileTime ?? 0) / 1e9),
                "segments": RecordingEncoder.describe(input?.segments ?? []),
                "videoFrames": .number(Double((input?.encodedFrames ?? 0) + (input?.repeatedFrames ?? 0))),
                "encodedFrames": .number(Double(input?.encodedFrames ?? 0)),
                "repeatedFramesNotEncoded": .number(Double(input?.repeatedFrames ?? 0)),
                "audioTracks": .array(
                    (input?.audioTracks ?? []).map { track in
                        RecordingEncoder.describe(
                            track: track.name,
                            figures: track.figures.map {
                                [
                                    "missingMs": $0.missingMs, "droppedMs": $0.droppedMs,
                                    "maxClockOffsetMs": $0.maxClockOffsetMs,
                                ]
                            } ?? [:])
                    }),
                "videoCodec": .string(options.video.codec.rawValue),
                "videoEncoder": .string(
                    (try? VideoEncoderImplementation.best(for: options.video.codec))?.encoderName ?? ""),
                "sharedEncoder": .number(Double(id)),
                "lostPackets": .number(Double(input?.lostPackets ?? 0)),
                "keyframesAsked": .number(Double(input?.keyframesAsked ?? 0)),
            ]
        }
    }

    /// Progress figures for the service info: the segment it writes, and (encoding here) the audio's clock offset or
    /// (sharing an encoder, whose frames broadcastd does not count as this handler's) the frames its file has.
    package var progress: [String: JSONValue] {
        switch source {
        case .awaiting: [:]
        case .own(let encoder):
            [
                "clockOffsetMs": .number(encoder.clockOffsetMs),
                "segment": .number(Double(encoder.clock.segments.count + 1)),
            ]
        case .shared(_, let input):
            [
                "segment": .number(Double(max(1, input?.segments.count ?? 0))),
                "videoFrames": .number(Double((input?.encodedFrames ?? 0) + (input?.repeatedFrames ?? 0))),
            ]
        }
    }

    /// Sharing an encoder: the frames its output has, for the service info (where the status line takes its frame
    /// rate from: broadcastd counts no frames of a handler it sends packets); nil encoding here.
    package var sharedVideoFrames: [String: JSONValue] {
        guard case .shared = source, let frames = progress["videoFrames"] else { return [:] }
        return ["videoFrames": frames]
    }

    /// The segments written so far.
    package var segmentCount: Int {
        switch source {
        case .awaiting: 0
        case .own(let encoder): encoder.clock.segments.count
        case .shared(_, let input): input?.segments.count ?? 0
        }
    }
}
