import BroadcastCore
import BroadcastHandlerKit
import BroadcastMedia
import BroadcastProtocol
import BroadcastTimeline
import CFFmpeg

/// The built-in `stream` handler: H.264 (libx264, bit rate driven; or HEVC over SRT) and one audio track (app and mic
/// mixed; Opus or AAC) to an SRT (MPEG-TS) or RTMP (FLV) media server. Encoding happens in the
/// callbacks; sending on a thread of its own through a bounded queue that drops whole GOPs when the
/// link is slow, while the bit rate adapts; a lost connection is made again with backoff.
public final class StreamHandler: BroadcastSampleHandler {
    private var options: StreamOptions?
    private var video: Encoder?
    private var audio: AudioTrack?
    private var sender: Sender?
    private var rate: BitRateController?
    private var input: VideoInput?
    private var clock = SegmentClock()
    private var failure: String?
    private var frames = 0
    private var lastInfo: (time: UInt64, bytes: Int64, drops: Int)?

    public override func broadcastStarted(withSetupInfo setupInfo: [String: String]) {
        MediaLog.install(logger)
        do {
            let options = try StreamOptions(url: broadcastURL, setupInfo: setupInfo)
            self.options = options
            try open(options)
            logger.info("stream: to \(options.displayURL) (\(options.container), \(videoFormat.width)x\(videoFormat.height), \(options.video.bitRate ?? 0) kbit/s)")
            if let publicURL = options.publicURL { updateBroadcastURL(publicURL) }
        } catch {
            fail("\(error)")
        }
    }

    private func open(_ options: StreamOptions) throws(MediaError) {
        guard videoFormat.pixelFormat != .bgrx else {
            throw MediaError("stream", "frames arrive as BGRx: run broadcastd with --pixel-format nv12 (the default) or i420")
        }
        var settings = options.video
        settings.width = videoFormat.width
        settings.height = videoFormat.height
        settings.framesPerSecond = framesPerSecond
        settings.fullRange = videoFullRange
        let implementation = try VideoEncoderImplementation.best(for: settings.codec)
        let pixelFormat = implementation.inputFormat(for: videoFormat.pixelFormat == .i420 ? .i420 : .nv12)
        let input = try VideoInput(encoding: VideoFormat(width: settings.width, height: settings.height, pixelFormat: pixelFormat), from: videoFormat)
        let globalHeader = options.container == .flv
        let video = try Encoder.video(settings, pixelFormat: pixelFormat, globalHeader: globalHeader, implementation: implementation)
        var encoders = [video]
        let streams = options.audio.filter(audioStreams.contains)
        if !streams.isEmpty {
            let settings = AudioEncoderSettings(codec: options.audioCodec, sampleRate: audioFormat.sampleRate, channels: 2, bitRate: options.audioBitRate)
            audio = try AudioTrack(name: streams.map(\.description).joined(separator: "+"), streams: streams, gains: [:], settings: settings,
                                   globalHeader: globalHeader) { encoder throws(MediaError) in
                encoders.append(encoder)
                return 1
            }
        }
        let bytesPerSecond = ((settings.bitRate ?? 4500) + (audio == nil ? 0 : options.audioBitRate)) * 1000 / 8
        let sender = Sender(options: options, encoders: encoders, bytesPerSecond: bytesPerSecond, logger: logger)
        self.video = video
        self.input = input
        self.sender = sender
        // Only libx264 follows a new bit rate while it runs; with the others a slow link drops GOPs only.
        rate = implementation.changesBitRateWhileRunning ? BitRateController(target: settings.bitRate ?? 4500) : nil
        if rate == nil { logger.info("stream: \(implementation.encoderName) keeps its bit rate; a slow link only drops whole GOPs") }
        sender.start()
    }

    public override func broadcastVideoFormatChanged(_ format: VideoFormat) {
        guard failure == nil, let input else { return }
        do { try input.inputChanged(to: format) } catch { fail("\(error)") }
    }

    public override func processSampleBuffer(_ sampleBuffer: SampleBuffer, with type: SampleType) {
        guard failure == nil, let sender else { return }
        do {
            if type == .video { try addVideo(sampleBuffer, sender: sender) } else { try addAudio(sampleBuffer, type, sender: sender) }
        } catch {
            fail("\(error)")
        }
    }

    private func addVideo(_ sample: SampleBuffer, sender: Sender) throws(MediaError) {
        guard let video, let input, let format = sample.videoFormat else { return }
        let time = clock.placeFrame(pts: sample.presentationTime, duration: sample.duration)
        let frame = try input.frame(sample.data, layout: format, time: time)
        // After dropped GOPs or a new connection, the next frame starts a GOP.
        frame.frame.pointee.pict_type = sender.takeKeyframeRequest() ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE
        try video.encode(frame.frame) { packet throws(MediaError) in try sender.write(packet, stream: 0, timeBase: video.timeBase) }
        frames += 1
        report(at: time, sender: sender)
    }

    private func addAudio(_ sample: SampleBuffer, _ type: SampleType, sender: Sender) throws(MediaError) {
        // Audio from before the segment's first frame is not sent: the stream starts with a picture.
        guard let audio, audio.inputs[type] != nil, let format = sample.audioFormat,
              let time = clock.fileTime(ofCapture: sample.presentationTime) else { return }
        try audio.add(sample.data, format: format, frames: sample.frameCount, from: type, at: time, videoEnd: clock.duration, sink: sender)
    }

    public override func broadcastPaused() {
        guard let end = clock.close() else { return }
        audio?.endSegment(at: end)
    }

    public override func broadcastFinished() {
        guard let sender else { return }
        _ = clock.close()
        if failure == nil {
            do {
                try audio?.finish(at: clock.duration, sink: sender)
                try video?.encode(nil) { packet throws(MediaError) in try sender.write(packet, stream: 0, timeBase: video!.timeBase) }
            } catch {
                logger.warning("stream: \(error)")
            }
        }
        sender.finish(timeout: 3)
        let f = sender.snapshot
        var result: [String: JSONValue] = [
            "url": .string(options?.displayURL ?? ""), "duration": .number(Double(clock.duration) / 1e9),
            "videoFrames": .number(Double(frames)), "bytesSent": .number(Double(f.bytesSent)), "reconnects": .number(Double(f.reconnects)),
            "droppedVideoFrames": .number(Double(f.droppedVideoFrames)), "droppedAudioPackets": .number(Double(f.droppedAudioPackets)),
        ]
        if let failure = failure ?? f.failure { result["error"] = .string(failure) }
        setBroadcastResult(result)
        logger.info("stream: finished; \(f.bytesSent) bytes sent, \(f.reconnects) reconnection(s), \(f.droppedVideoFrames) video frames dropped")
    }

    /// Service info about once a second, and the bit rate adapted to the link.
    private func report(at time: UInt64, sender: Sender) {
        let last = lastInfo ?? (0, 0, 0)
        guard time >= last.time + 1_000_000_000 else { return }
        let f = sender.snapshot
        if let reason = f.failure { return fail(reason) }
        let seconds = Double(time - last.time) / 1e9
        if var controller = rate {
            let change = controller.update(fill: sender.fill, dropped: f.gopDrops > last.drops, now: time)
            rate = controller
            if let change, let video {
                video.setVideoBitRate(change)
                logger.info("stream: video bit rate now \(change) kbit/s (send queue \(f.queueMs) ms)")
            }
        }
        var info: [String: JSONValue] = [
            "bitRate": .number((Double(f.bytesSent - last.bytes) * 8 / 1000 / seconds).rounded()),
            "videoBitRate": .number(Double(rate?.current ?? options?.video.bitRate ?? 0)),
            "queueMs": .number(Double(f.queueMs)), "queueBytes": .number(Double(f.queueBytes)),
            "droppedFrames": .number(Double(f.droppedVideoFrames)), "reconnects": .number(Double(f.reconnects)),
            "connected": .bool(f.connected),
        ]
        if let error = f.lastError { info["lastError"] = .string(error) }
        updateServiceInfo(info)
        lastInfo = (time, f.bytesSent, f.gopDrops)
    }

    private func fail(_ message: String) {
        guard failure == nil else { return }
        failure = message
        logger.error("stream: \(message)")
        finishBroadcastWithError(HandlerError("stream", message))
    }
}
