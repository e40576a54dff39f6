import BroadcastCore
import BroadcastEncoding
import BroadcastHandlerKit
import BroadcastProtocol
import BroadcastSystem

/// broadcastd's shared encoder (`broadcast-encoder`, revision 2.9): the handler of an internal broadcast that
/// encodes its capture once, as the settings of the handlers it serves say (`EncodingOptions`, written out by
/// `sharedSettings`), into a packet ring in memory of its own that they map; broadcastd relays what it tells them.
/// It never waits for them: one that falls a ring behind loses packets of its own.
public final class SharedEncoderHandler: BroadcastSampleHandler {
    private var encoder: RecordingEncoder?
    private var output: SharedEncoderOutput?
    private var memory: SharedMemory?
    private var failure: String?
    private var keyframesAsked = 0

    public override func broadcastStarted(withSetupInfo setupInfo: [String: String]) {
        MediaLog.install(logger)
        do {
            var fields = setupInfo.filter { !$0.value.isEmpty }
            let options = try EncodingOptions(taking: &fields)
            if let key = fields.keys.sorted().first { throw SetupFieldError("unknown setting '\(key)'") }
            let size = Self.ringSize(options, format: videoFormat)
            let memory = try SharedMemory(name: "broadcast-encoder-ring", size: size, sealed: true)
            try shareRing(size: size, descriptor: try memory.readOnlyDescriptor())
            let output = SharedEncoderOutput(ring: PacketRingWriter(base: memory.base, size: size), id: 0) {
                [unowned self] event throws(MediaError) in try self.tell(event)
            }
            encoder = try RecordingEncoder(options, for: self, output: output)
            encoder!.repeatsAfterChange = Self.repeatsAfterChange
            self.output = output
            self.memory = memory
            let (name, input, tracks) = (encoder!.implementationName, encoder!.inputSize, encoder!.tracks.count)
            logger.info(
                "encoder: \(name) \(input.width)x\(input.height), \(tracks) audio track(s), ring \(size >> 20) MiB")
        } catch {
            fail("\(error)")
        }
    }

    /// The repeats after a change it encodes: live receivers show a change once three frames have come after it
    /// (bench/stream.sh: a quiet screen's changes reached ffmpeg 370 ms late, one in three after the next change; with
    /// these, 207 ms at the median, as a stream encoding by itself).
    static let repeatsAfterChange = 3

    /// Four seconds of the stream at its bit rate (or, at constant quality, at 0.15 bit per pixel), 8 to 64 MiB: the
    /// largest packet is half the ring, and a handler may fall seconds behind before it loses packets.
    static func ringSize(_ options: EncodingOptions, format: VideoFormat) -> Int {
        let (width, height) = options.size ?? (format.width, format.height)
        let fps = options.framesPerSecond ?? 30
        let bitsPerSecond = options.video.bitRate.map { $0 * 1000 } ?? width * height * fps * 15 / 100
        return min(max(bitsPerSecond / 8 * 4, 8 << 20), 64 << 20)
    }

    private func tell(_ event: SharedEncoderEvent) throws(MediaError) {
        do {
            switch event {
            case .streams(let streams): try shareStreams(streams)
            case .packet(let header): try sharePacket(header)
            case .pictureUnchanged(let time): try sharePictureUnchanged(through: time)
            case .audioFigures(let figures): try shareAudioFigures(figures)
            }
        } catch {
            throw MediaError("tell broadcastd", "\(error)")
        }
    }

    public override func broadcastVideoFormatChanged(_ format: VideoFormat) {
        guard failure == nil, let encoder else { return }
        do { try encoder.inputChanged(to: format) } catch { fail("\(error)") }
    }

    public override func cameraChanged(format: VideoFormat?, camera: String, lost: String?) {
        encoder?.cameraChanged(to: format)
    }

    public override func processSampleBuffer(_ sampleBuffer: SampleBuffer, with type: SampleType) {
        guard failure == nil, let encoder else { return }
        do {
            switch type {
            case .video: _ = try encoder.addVideo(sampleBuffer)
            case .videoCamera: try encoder.addCamera(sampleBuffer)
            default:
                try encoder.addAudio(sampleBuffer, type)
                try output?.tellAudioFigures(of: encoder.tracks, at: sampleBuffer.presentationTime)
            }
        } catch {
            fail("\(error)")
        }
    }

    public override func keyframeRequested() {
        keyframesAsked += 1
        encoder?.requestKeyframe()
    }

    /// Every handler it serves paused: the encoder's time stands still until one resumes.
    public override func broadcastPaused() {
        _ = encoder?.pause()
    }

    /// One resumed, and asks for a keyframe, which its first frame is: the handler's file goes on from that frame,
    /// where its time and its sound stood still, not from the next (its sound since lost, a hole at the join).
    public override func broadcastResumed() {
        encoder?.requestKeyframe()
    }

    public override func broadcastFinished(error: BroadcastError?, discard: Bool) {
        guard let encoder else { return }
        if failure == nil {
            do { _ = try encoder.finish() } catch { logger.error("encoder: finishing: \(error)") }
        }
        var result = encoder.result()
        result["packets"] = .number(Double(output?.packets ?? 0))
        result["bytes"] = .number(Double(output?.bytes ?? 0))
        result["keyframesAsked"] = .number(Double(keyframesAsked))
        result["keyframesMadeAsked"] = .number(Double(encoder.keyframesMadeAsked))
        if let failure { result["error"] = .string(failure) }
        setBroadcastResult(result)
    }

    private func fail(_ message: String) {
        guard failure == nil else { return }
        failure = message
        logger.error("encoder: \(message)")
        finishBroadcastWithError(HandlerError("encoder", message))
    }
}
