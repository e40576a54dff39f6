import BroadcastCore
import BroadcastEncoding
import BroadcastHandlerKit
import BroadcastMedia
import BroadcastProtocol
import BroadcastSystem
import BroadcastTimeline

/// The built-in `stream` handler: H.264 (libx264, bit rate driven; or HEVC over SRT) and one audio track (app and mic
/// mixed; Opus or AAC) to SRT (MPEG-TS) or RTMP (FLV) media servers, or as HLS to a directory or an HTTP origin.
/// Encoding happens once, in the callbacks; each destination sends on a thread of its own through a bounded
/// queue that drops whole GOPs when its link is slow, while the bit rate adapts; a lost connection is made
/// again with backoff. With `encode=shared` (revision 2.9) the stream takes the packets of the encoder broadcastd
/// shares with the handlers asking for the same encoding (`SharedStreamOutput`): its bit rate stays, and a
/// destination that dropped GOPs asks that encoder for a keyframe.
public final class StreamHandler: EncodingSampleHandler {
    private var options: StreamOptions?
    private var video: Encoder?
    private var audio: AudioTrack?
    private var sender: SenderGroup?
    private var rate: BitRateController?
    private var input: VideoInput?
    /// The camera picture-in-picture (`camera=on`).
    private var corner: CameraCorner?
    private var clock = SegmentClock()
    /// `encode=shared`: where the shared encoding's packets go.
    private var shared: SharedStreamOutput?
    private var frames = 0
    private var lastInfo: UInt64?

    public override func broadcastStarted(withSetupInfo setupInfo: [String: String]) {
        MediaLog.install(logger)
        do {
            let options = try StreamOptions(url: broadcastURL, setupInfo: setupInfo)
            self.options = options
            if let encoding = options.sharedEncoding {
                let audio = SharedStreamOutput.Audio(
                    wanted: options.audio, codec: options.audioCodec, bitRate: options.audioBitRate)
                let output = SharedStreamOutput(globalHeader: options.globalHeader, audio: audio) {
                    [unowned self] streams throws(MediaError) in
                    try startSenders(options, streams: streams)
                }
                shared = output
                self.encoding = try HandlerEncoding(
                    encoding, for: self, output: output, now: MonotonicClock.now, keeps: audio.keeps)
            } else {
                try open(options)
            }
            let to = options.destinations.map { "\($0.displayURL) (\($0.format))" }.joined(separator: ", ")
            let size = "\(videoFormat.width)x\(videoFormat.height)"
            let shared = encoding.map { " (\($0.name))" } ?? ""
            logger.info("stream: to \(to), \(size), \(videoBitRate) kbit/s\(shared)")
            if let publicURL = options.publicURL { updateBroadcastURL(publicURL) }
        } catch {
            fail("\(error)")
        }
    }

    private func open(_ options: StreamOptions) throws(MediaError) {
        guard videoFormat.pixelFormat != .bgrx else {
            throw MediaError(
                "stream", "frames arrive as BGRx: run broadcastd with --pixel-format nv12 (the default) or i420")
        }
        var settings = options.video
        settings.width = videoFormat.width
        settings.height = videoFormat.height
        settings.framesPerSecond = framesPerSecond
        settings.fullRange = videoFullRange
        let implementation = try VideoEncoderImplementation.best(for: settings.codec)
        let pixelFormat = implementation.inputFormat(for: videoFormat.pixelFormat == .i420 ? .i420 : .nv12)
        let encoded = VideoFormat(width: settings.width, height: settings.height, pixelFormat: pixelFormat)
        let input = try VideoInput(encoding: encoded, from: videoFormat, fullRange: videoFullRange)
        let globalHeader = options.globalHeader
        let video = try Encoder.video(
            settings, pixelFormat: pixelFormat, globalHeader: globalHeader, implementation: implementation)
        var streams = [try video.parameters]
        let audioStreams = options.audio.filter(audioStreams.contains)
        if !audioStreams.isEmpty {
            let settings = AudioEncoderSettings(
                codec: options.audioCodec, sampleRate: audioFormat.sampleRate, channels: 2,
                bitRate: options.audioBitRate)
            audio = try AudioTrack(
                name: audioStreams.map(\.description).joined(separator: "+"), streams: audioStreams, gains: [:],
                settings: settings,
                globalHeader: globalHeader
            ) { parameters throws(MediaError) in
                streams.append(parameters)
                return 1
            }
        }
        self.video = video
        self.input = input
        corner = options.camera.map { CameraCorner($0, canvas: encoded) }
        // Only libx264 follows a new bit rate while it runs; with the others a slow link drops GOPs only.
        rate = implementation.changesBitRateWhileRunning ? BitRateController(target: settings.bitRate ?? 4500) : nil
        if rate == nil {
            logger.info("stream: \(implementation.encoderName) keeps its bit rate; a slow link only drops whole GOPs")
        }
        _ = try startSenders(options, streams: streams)
    }

    /// Connects to every destination, which is sent `streams` (video first).
    private func startSenders(_ options: StreamOptions, streams: [StreamParameters]) throws(MediaError) -> SenderGroup {
        let audioRate = streams.count > 1 ? options.audioBitRate : 0
        let bytesPerSecond = (videoBitRate + audioRate) * 1000 / 8
        let sender = SenderGroup(
            options.destinations.map {
                Sender(
                    destination: $0, options: options, streams: streams, bytesPerSecond: bytesPerSecond,
                    logger: logger)
            }, logger: logger)
        self.sender = sender
        try sender.start()
        return sender
    }

    public override var role: String { "stream" }

    /// The video's bit rate (kbit/s): as adapted to the link, as asked for, or the cap on the constant quality of a
    /// shared encoding.
    private var videoBitRate: Int {
        if let rate { return rate.current }
        guard let options else { return 0 }
        guard let shared = options.sharedEncoding else { return options.video.bitRate ?? 4500 }
        return shared.video.bitRate
            ?? VideoEncoderSettings.defaultMaxBitRate(
                width: videoFormat.width, height: videoFormat.height, framesPerSecond: framesPerSecond)
    }

    public override func encodingFailed(_ message: String) { fail(message) }

    /// A packet of the shared encoder (or a frame of the record handler's, when broadcastd runs none) went to the
    /// destinations: one that dropped GOPs asks for a keyframe.
    public override func encodedPacketTaken() {
        guard let encoding, let shared, let sender else { return }
        if shared.askForKeyframe(sender.takeKeyframeRequest()) { encoding.requestKeyframe() }
        report(at: encoding.fileTime, sender: sender)
    }

    public override func broadcastVideoFormatChanged(_ format: VideoFormat) {
        if encoding != nil { return super.broadcastVideoFormatChanged(format) }
        guard failure == nil, let input else { return }
        do {
            try releaseHeldFrame()  // in the format it came in
            try input.inputChanged(to: format)
        } catch { fail("\(error)") }
    }

    public override func cameraChanged(format: VideoFormat?, camera: String, lost: String?) {
        corner?.cameraChanged(to: format)
    }

    public override func processSampleBuffer(_ sampleBuffer: SampleBuffer, with type: SampleType) {
        // Shared: samples go to the record handler's encoder when broadcastd runs none for this encoding.
        if let encoding {
            guard failure == nil else { return }
            do {
                if try encoding.add(sampleBuffer, type) { encodedPacketTaken() }
            } catch {
                fail("\(error)")
            }
            return
        }
        guard failure == nil, let sender else { return }
        do {
            if type == .video, let corner {
                try corner.pass(sampleBuffer) { sample, until throws(MediaError) in
                    try addVideo(sample, cameraUntil: until, sender: sender)
                }
            } else if type == .video {
                try addVideo(sampleBuffer, cameraUntil: .max, sender: sender)
            } else if type == .videoCamera, let format = sampleBuffer.videoFormat {
                try corner?.add(sampleBuffer.data, layout: format, time: sampleBuffer.presentationTime)
            } else {
                try addAudio(sampleBuffer, type, sender: sender)
            }
        } catch {
            fail("\(error)")
        }
    }

    /// The screen frame the corner holds back for the camera, sent now: the input changes, or no frame is coming.
    private func releaseHeldFrame() throws(MediaError) {
        guard let sender else { return }
        try corner?.release { sample, until throws(MediaError) in
            try addVideo(sample, cameraUntil: until, sender: sender)
        }
    }

    private func addVideo(_ sample: SampleBuffer, cameraUntil: UInt64, sender: SenderGroup) throws(MediaError) {
        guard let video, let input, let format = sample.videoFormat else { return }
        let time = clock.placeFrame(pts: sample.presentationTime, duration: sample.duration)
        let frame = try input.frame(
            sample.data, layout: format, time: time, captured: sample.presentationTime, corner: corner,
            until: cameraUntil)
        sample.releaseFrame()  // copied: broadcastd keeps two slots for a broadcast
        // Keyframes by time; and after dropped GOPs or a new connection, the next frame starts a GOP.
        try video.encodeVideo(frame, keyframe: sender.takeKeyframeRequest()) { packet throws(MediaError) in
            try sender.writeVideo(packet)
        }
        frames += 1
        report(at: time, sender: sender)
    }

    private func addAudio(_ sample: SampleBuffer, _ type: SampleType, sender: SenderGroup) throws(MediaError) {
        // Audio from before the segment's first frame is not sent: the stream starts with a picture.
        guard let audio, audio.inputs[type] != nil, let format = sample.audioFormat,
            let time = clock.fileTime(ofCapture: sample.presentationTime)
        else { return }
        try audio.add(
            sample.data, format: format, frames: sample.frameCount, from: type, at: time,
            discontinuity: sample.discontinuity, videoEnd: clock.duration, sink: sender)
    }

    public override func broadcastPaused() {
        if let encoding {
            _ = encoding.pause()
            return
        }
        if failure == nil {
            do { try releaseHeldFrame() } catch { fail("\(error)") }
        }
        guard let end = clock.close() else { return }
        audio?.endSegment(at: end)
    }

    public override func broadcastFinished() {
        var result: [String: JSONValue] = ["url": .string(options?.displayURL ?? "")]
        if let encoding {
            if failure == nil {
                do {
                    _ = try encoding.finish()
                    try shared?.finish()
                } catch {
                    logger.warning("stream: \(error)")
                }
            }
            _ = encoding.pause()
            result.merge(encoding.result()) { a, _ in a }
            // The shared encoder's streams never came: nothing was sent.
            guard sender != nil else {
                if let failure { result["error"] = .string(failure) }
                return setBroadcastResult(result)
            }
        }
        guard let sender else { return }
        if encoding == nil {
            finishOwnEncoding(sender)
            result["duration"] = .number(Double(clock.duration) / 1e9)
            result["videoFrames"] = .number(Double(frames))
        }
        sender.finish(timeout: 3)
        let report = sender.report(seconds: 1)
        let f = report.figures[0]
        result.merge([
            "bytesSent": .number(Double(f.bytesSent)), "reconnects": .number(Double(f.reconnects)),
            "droppedVideoFrames": .number(Double(f.droppedVideoFrames)),
            "droppedAudioPackets": .number(Double(f.droppedAudioPackets)),
            "destinations": .array(zip(sender.senders, report.figures).map { .object(SenderGroup.result($0, $1)) }),
        ]) { _, new in new }
        if let failure = failure ?? report.failure { result["error"] = .string(failure) }
        setBroadcastResult(result)
        // The stream's end could not be written (an HLS playlist on a full disk): the broadcast's error.
        if let reason = report.failure { fail(reason) }
        for (s, f) in zip(sender.senders, report.figures) {
            logger.info(
                "stream: finished \(s.destination.displayURL); \(f.bytesSent) bytes sent, \(f.reconnects) reconnection(s), \(f.droppedVideoFrames) video frames dropped"
            )
        }
    }

    /// Hands on what its own encoders hold.
    private func finishOwnEncoding(_ sender: SenderGroup) {
        if failure == nil {
            do { try releaseHeldFrame() } catch { fail("\(error)") }
        }
        _ = clock.close()
        guard failure == nil else { return }
        do {
            try audio?.finish(at: clock.duration, sink: sender)
            try video?.encode(nil) { packet throws(MediaError) in try sender.writeVideo(packet) }
        } catch {
            logger.warning("stream: \(error)")
        }
    }

    /// Service info about once a second, and the bit rate adapted to the link of the healthiest destination.
    /// The top-level figures are the broadcast URL's; `alsoN.*` those of `also`'s N-th URL.
    private func report(at time: UInt64, sender: SenderGroup) {
        let last = lastInfo ?? 0
        guard time >= last + 1_000_000_000 else { return }
        let report = sender.report(seconds: Double(time - last) / 1e9)
        if let reason = report.failure { return fail(reason) }
        if var controller = rate {
            // The receiver's estimate covers every stream: the audio's rate is taken off for the video.
            let estimate = report.receiverKbps.map { $0 - (options?.audioBitRate ?? 0) }
            let change = controller.update(
                fill: report.fill, dropped: report.dropped, loss: report.loss, estimate: estimate, now: time)
            rate = controller
            if let change, let video {
                video.setVideoBitRate(change)
                let loss = report.loss > 0 ? ", \(Int(report.loss * 100))% lost" : ""
                let fill = Int(report.fill * 100)
                let estimated = estimate.map { ", the receiver estimates \($0) kbit/s for video" } ?? ""
                logger.info(
                    "stream: video bit rate now \(change) kbit/s (send queue \(fill)% full\(loss)\(estimated))")
            }
        }
        var info: [String: JSONValue] = [
            "videoBitRate": .number(Double(videoBitRate)),
            "destinations": .number(Double(sender.senders.count)),
        ]
        for (index, (destination, figures)) in zip(sender.senders, report.figures).enumerated() {
            let each = SenderGroup.info(
                destination, figures, bitRate: report.bitRates[index], prefix: index == 0 ? "" : "also\(index).")
            info.merge(each) { first, _ in first }
        }
        if let publicURL = options?.publicURL { info["publicURL"] = .string(publicURL) }
        if let id = encoding?.sharedEncoder { info["sharedEncoder"] = .number(Double(id)) }
        info.merge(encoding?.sharedVideoFrames ?? [:]) { first, _ in first }
        updateServiceInfo(info)
        lastInfo = time
    }

    private func fail(_ message: String) {
        guard failure == nil else { return }
        failure = message
        logger.error("stream: \(message)")
        finishBroadcastWithError(HandlerError("stream", message))
    }
}
