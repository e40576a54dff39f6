import BroadcastCore
import BroadcastHandlerKit
import BroadcastTimeline

/// Where a recording's encoded streams go: a file (`Muxer`), or the `replay` handler's buffer.
package protocol EncodedOutput: PacketSink {
    /// Whether encoders put their parameter sets in the header (MP4, Matroska), not in keyframes.
    var wantsGlobalHeader: Bool { get }
    func addStream(_ parameters: StreamParameters) throws(MediaError) -> Int
    /// The first frame is coming, shown upright after `orientation`.
    func begin(videoStream: Int, orientation: Orientation) throws(MediaError)
    /// A frame that lasts until the next one of its stream (see `Muxer.writeHoldingBack`).
    func writeHoldingBack(_ packet: EncodedPacket, stream: Int) throws(MediaError)
    /// The last frame of `stream` ends at `end` (its time base).
    func endStream(_ stream: Int, at end: Int64) throws(MediaError)
    /// A keyframe encoded before, copied at a later time: a still screen's keyframe by time (`KeyframeRepeater`).
    func writeCopy(_ packet: EncodedPacket, stream: Int) throws(MediaError)
    /// The picture has not changed from the last frame encoded through file time `time` (ns): a repeat not encoded.
    func pictureUnchanged(through time: Int64) throws(MediaError)
}

/// What the `record` and `replay` handlers share: the encoders their settings ask for (video with libx264, libx265 or
/// SVT-AV1, Opus or AAC tracks), the segment clock that keeps the file time continuous across pauses, audio placed
/// on it, and the repeated frames not encoded but for keyframes, which come by time (a still screen's are copies).
/// Packets go to an `EncodedOutput`.
package final class RecordingEncoder {
    let options: EncodingOptions
    let output: EncodedOutput
    package let video: Encoder
    package let videoStream: Int
    /// Encodes the video on a thread of its own (`EncodeWorker`).
    private let worker: EncodeWorker
    let input: VideoInput
    /// The camera picture-in-picture (`camera=on`).
    package let corner: CameraCorner?
    /// The camera's own video track (`camera=track`).
    package let cameraTrack: CameraTrack?
    package let tracks: [AudioTrack]
    package private(set) var clock = SegmentClock()
    /// Audio that came before its segment's first frame (bounded), placed once the frame is in.
    private var early: [EarlyAudio] = []
    private struct EarlyAudio {
        var type: SampleType, pts: UInt64, sample: [UInt8], format: AudioFormat, frames: Int, discontinuity: Bool
    }
    private var lastEncoded: UInt64?
    /// Keyframes encoded since the last frame that changed: a still screen gets two after its last change, then copies.
    private var keyframesSinceChange = 0
    /// A keyframe was asked for (`requestKeyframe`): the next frame is encoded as one, even a repeat.
    private var keyframeAsked = false
    /// Keyframes made because they were asked for.
    package private(set) var keyframesMadeAsked = 0
    /// How many repeats after a change are encoded all the same (broadcastd's shared encoder, whose packets may go to
    /// live receivers: ffmpeg shows a frame of MPEG-TS once two or three more have come, which on a quiet screen may be
    /// seconds away; a stream encoding by itself gives it every frame).
    package var repeatsAfterChange = 0
    /// Repeats encoded since the last change.
    private var repeatsSinceChange = 0
    private var repeater: KeyframeRepeater
    /// The pts of changed frames given to the video encoder whose packets have not come out yet.
    private var changedPTS: Set<Int64> = []
    private var nextDue: UInt64 = 0
    /// What encoding the frame held for the camera failed with at a pause.
    private var heldFailure: MediaError?
    package private(set) var frameCount = 0
    package private(set) var encodedFrames = 0
    package private(set) var skippedRepeats = 0

    deinit { worker.stop() }

    /// The encoders for `handler`'s formats and `options`, their streams added to `output`.
    package init(_ options: EncodingOptions, for handler: BroadcastSampleHandler, output: EncodedOutput)
        throws(MediaError)
    {
        self.options = options
        self.output = output
        repeater = KeyframeRepeater(interval: Int64(options.video.keyframeInterval * 1e9))
        let videoFormat = handler.videoFormat
        var settings = options.video
        settings.width = options.size?.width ?? videoFormat.width
        settings.height = options.size?.height ?? videoFormat.height
        settings.framesPerSecond = options.framesPerSecond ?? handler.framesPerSecond
        settings.fullRange = handler.videoFullRange
        guard videoFormat.pixelFormat != .bgrx else {
            throw MediaError(
                "record", "frames arrive as BGRx: run broadcastd with --pixel-format nv12 (the default) or i420")
        }
        let implementation = try VideoEncoderImplementation.best(for: settings.codec)
        let pixelFormat = implementation.inputFormat(for: videoFormat.pixelFormat == .i420 ? .i420 : .nv12)
        let encoded = VideoFormat(width: settings.width, height: settings.height, pixelFormat: pixelFormat)
        input = try VideoInput(encoding: encoded, from: videoFormat, fullRange: handler.videoFullRange)
        corner = options.camera?.corner.map { CameraCorner($0, canvas: encoded) }
        cameraTrack = options.camera == .track ? CameraTrack(settings, fullRange: handler.videoFullRange) : nil
        video = try Encoder.video(
            settings, pixelFormat: pixelFormat, globalHeader: output.wantsGlobalHeader, implementation: implementation)
        videoStream = try output.addStream(video.parameters)
        worker = EncodeWorker(frameBytes: input.format.frameByteCount) { [video] frame throws(MediaError) in
            var packets: [EncodedPacket] = []
            try video.encode(frame) { packets.append($0) }
            return packets
        }
        let audioFormat = handler.audioFormat
        let channels = options.channels ?? audioFormat.channels
        let audio = AudioEncoderSettings(
            codec: options.audioCodec, sampleRate: audioFormat.sampleRate, channels: channels,
            bitRate: options.audioBitRate ?? 64 * channels, complexity: options.opusComplexity)
        // Opus's pre-skip is in MP4's and Matroska's headers; AAC's priming is left before 0, as streams send it.
        let signalsPriming = options.audioCodec == "libopus"
        // Tracks for the streams the source delivers (X11 without PipeWire: none).
        let requested: [SampleType] =
            switch options.audio {
            case .none: []
            case .mixed: [.audioApp, .audioMic]
            case .separate(let streams): streams
            }
        let streams = requested.filter(handler.audioStreams.contains)
        if case .mixed = options.audio, streams.count == 2 {
            tracks = [
                try AudioTrack(
                    name: "app+mic", streams: streams, gains: options.gains, settings: audio,
                    globalHeader: output.wantsGlobalHeader, signalsPriming: signalsPriming, addStream: output.addStream)
            ]
        } else {
            tracks = try streams.map { stream throws(MediaError) in
                try AudioTrack(
                    name: stream.description, streams: [stream], gains: options.gains, settings: audio,
                    globalHeader: output.wantsGlobalHeader, signalsPriming: signalsPriming, addStream: output.addStream)
            }
        }
    }

    package var implementationName: String { video.implementation?.encoderName ?? "" }
    package var inputSize: (width: Int, height: Int) { (input.format.width, input.format.height) }

    package func inputChanged(to format: VideoFormat) throws(MediaError) {
        try releaseHeldFrame()  // in the format it came in
        try input.inputChanged(to: format)
    }

    /// Takes a video sample: encoded at once, or with the camera in a corner once the camera's pictures of its time
    /// are in (`CameraCorner.pass`, which holds it until the next).
    package func addVideo(_ sample: SampleBuffer) throws(MediaError) {
        if let failure = heldFailure { throw failure }
        guard let corner else { return try encodeVideo(sample, cameraUntil: .max) }
        try corner.pass(sample) { sample, until throws(MediaError) in try encodeVideo(sample, cameraUntil: until) }
    }

    /// The screen frame the corner holds back, encoded now: the input changes, or no frame is coming (a pause, the
    /// end).
    package func releaseHeldFrame() throws(MediaError) {
        try corner?.release { sample, until throws(MediaError) in try encodeVideo(sample, cameraUntil: until) }
    }

    /// Encodes a video sample (unless it is a repeat not encoded, or above the rate), with the camera's picture for
    /// it (taking its pictures until `cameraUntil`) in the corner.
    private func encodeVideo(_ sample: SampleBuffer, cameraUntil: UInt64) throws(MediaError) {
        guard let format = sample.videoFormat else { return }
        // The header goes out with the first frame, whose orientation it records.
        let orientation =
            options.rotation.map { Orientation(degrees: UInt16($0), mirrored: false) } ?? sample.orientation ?? .up
        try cameraTrack?.open(output)  // before the header
        try output.begin(videoStream: videoStream, orientation: orientation)
        let opensSegment = clock.offset == nil
        let time = clock.placeFrame(pts: sample.presentationTime, duration: sample.duration)
        frameCount += 1
        if opensSegment { try placeEarlyAudio() }
        // A lower recording rate keeps the frames due at its own interval.
        if let fps = options.framesPerSecond {
            let interval = 1_000_000_000 / UInt64(fps)
            if time + sample.duration / 2 < nextDue { return }
            nextDue = max(nextDue + interval, time)
        }
        // A repeat is encoded when a keyframe is due (by time), for the first two after the last change; later ones
        // are copies of those two, in turn (`KeyframeRepeater`: two H.264 IDR pictures in a row must differ in
        // `idr_pic_id`, which libx264 alternates). An encoder that takes no forced keyframes counts frames for them,
        // so it is given every one.
        let keyframeDue = video.keyframeDue(at: Encoder.videoPTS(time))
        // A repeated screen whose corner has a new camera picture (or lost it) is a changed picture.
        let repeated = sample.isRepeat && corner?.changes(at: sample.presentationTime, until: cameraUntil) != true
        if repeated, video.keyframes != nil, lastEncoded != nil, !keyframeAsked,
            !(keyframeDue && keyframesSinceChange < 2), repeatsSinceChange >= repeatsAfterChange
        {
            for packet in try worker.drain() { try write(packet) }  // the frames before it first
            skippedRepeats += 1
            if let copy = repeater.unchanged(through: Int64(time)) { try output.writeCopy(copy, stream: videoStream) }
            try output.pictureUnchanged(through: Int64(time))
            return
        }
        // Copied (or scaled) first, and the slot given back at once: broadcastd keeps two slots for a broadcast.
        let frame = try input.frame(
            sample.data, layout: format, time: time, captured: sample.presentationTime, corner: corner,
            until: cameraUntil)
        sample.releaseFrame()
        if !repeated {
            if changedPTS.count > 64 { changedPTS.removeAll() }  // packets an encoder never gave
            changedPTS.insert(Encoder.videoPTS(time))
        }
        if keyframeAsked { keyframesMadeAsked += 1 }
        video.markKeyframe(frame, asked: keyframeAsked)
        for packet in try worker.encode(try frame.clone()) { try write(packet) }
        lastEncoded = time
        keyframeAsked = false
        encodedFrames += 1
        keyframesSinceChange = (repeated ? keyframesSinceChange : 0) + (keyframeDue ? 1 : 0)
        repeatsSinceChange = repeated ? repeatsSinceChange + 1 : 0
    }

    /// Writes a packet of the video encoder (its copies of an earlier keyframe first, when a still picture needs them).
    private func write(_ packet: EncodedPacket) throws(MediaError) {
        if let copy = repeater.before(packet) { try output.writeCopy(copy, stream: videoStream) }
        repeater.wrote(packet, newPicture: changedPTS.remove(packet.pts) != nil)
        try output.writeHoldingBack(packet, stream: videoStream)
    }

    /// Makes the next frame a keyframe: a handler sharing this encoder joined, resumed, or lost packets.
    package func requestKeyframe() { keyframeAsked = true }

    /// The camera's frames come in `format` from now on, or (nil) it went away.
    package func cameraChanged(to format: VideoFormat?) {
        corner?.cameraChanged(to: format)
        if let format { cameraTrack?.format = format }
    }

    /// A camera frame, for the corner or the camera's track (none without `camera=on|track`); in its track only
    /// from the segment's first screen frame on.
    package func addCamera(_ sample: SampleBuffer) throws(MediaError) {
        guard let format = sample.videoFormat else { return }
        try corner?.add(sample.data, layout: format, time: sample.presentationTime)
        if let cameraTrack, let time = clock.fileTime(ofCapture: sample.presentationTime), time >= 0 {
            try cameraTrack.add(sample.data, layout: format, time: UInt64(time), output: output)
        }
    }

    package func addAudio(_ sample: SampleBuffer, _ type: SampleType) throws(MediaError) {
        guard let format = sample.audioFormat else { return }
        try addAudio(
            sample.data, format: format, frames: sample.frameCount, type, pts: sample.presentationTime,
            discontinuity: sample.discontinuity)
    }

    private func addAudio(
        _ data: UnsafeRawBufferPointer, format: AudioFormat, frames: Int, _ type: SampleType,
        pts: UInt64, discontinuity: Bool
    ) throws(MediaError) {
        guard tracks.contains(where: { $0.inputs[type] != nil }) else { return }
        guard let time = clock.fileTime(ofCapture: pts) else {
            // Before the segment's first frame: keep up to a second of it for the join.
            early.append(
                EarlyAudio(
                    type: type, pts: pts, sample: Array(data), format: format, frames: frames,
                    discontinuity: discontinuity))
            if early.count > 200 { early.removeFirst() }
            return
        }
        for track in tracks where track.inputs[type] != nil {
            try track.add(
                data, format: format, frames: frames, from: type, at: time, discontinuity: discontinuity,
                videoEnd: clock.duration, sink: output)
        }
    }

    private func placeEarlyAudio() throws(MediaError) {
        let pending = early
        early = []
        for chunk in pending {
            try chunk.sample.withUnsafeBytes { data in
                Result { () throws(MediaError) in
                    try addAudio(
                        data, format: chunk.format, frames: chunk.frames, chunk.type, pts: chunk.pts,
                        discontinuity: chunk.discontinuity)
                }
            }.get()
        }
    }

    /// A pause: the segment ends; returns its end (file time), or nil when no frame opened one. The frame held for
    /// the camera is encoded first (what that fails with is thrown by the next `addVideo` or `finish`).
    package func pause() -> UInt64? {
        do {
            try releaseHeldFrame()
            for packet in try worker.drain() { try write(packet) }
        } catch {
            heldFailure = heldFailure ?? error
        }
        guard let end = clock.close() else { return nil }
        early = []
        for track in tracks { track.endSegment(at: end) }
        return end
    }

    /// Closes the open segment and hands on everything the encoders still hold; returns the file's duration.
    package func finish() throws(MediaError) -> UInt64 {
        try releaseHeldFrame()
        if let failure = heldFailure { throw failure }
        _ = clock.close()
        let end = clock.duration
        for packet in try worker.drain() { try write(packet) }
        worker.stop()
        try video.encode(nil) { packet throws(MediaError) in try output.writeHoldingBack(packet, stream: videoStream) }
        try output.endStream(videoStream, at: Encoder.videoPTS(end))
        try cameraTrack?.finish(at: end, output: output)
        for track in tracks { try track.finish(at: end, sink: output) }
        return end
    }

    /// The encoding part of a result: frames, segments, tracks, codec.
    package func result() -> [String: JSONValue] {
        var result: [String: JSONValue] = [
            "duration": .number(Double(clock.duration) / 1e9),
            "segments": Self.describe(clock.segments),
            "videoFrames": .number(Double(frameCount)),
            "encodedFrames": .number(Double(encodedFrames)),
            "repeatedFramesNotEncoded": .number(Double(skippedRepeats)),
            "audioTracks": .array(tracks.map { Self.describe(track: $0.name, figures: $0.summary) }),
            "videoCodec": .string(options.video.codec.rawValue),
            "videoEncoder": .string(implementationName),
        ]
        // With camera=on or track: the camera frames that came.
        if let frames = corner?.frames ?? cameraTrack?.frames { result["cameraFrames"] = .number(Double(frames)) }
        return result
    }

    /// An audio track as a result lists it: its `name` and its figures (`AudioTrack.summary`'s keys), to 0.1 ms.
    package static func describe(track name: String, figures: [String: Double]) -> JSONValue {
        .object(figures.mapValues { .number(($0 * 10).rounded() / 10) }.merging(["name": .string(name)]) { a, _ in a })
    }

    /// Segments as a result lists them: start and duration (s of file time) and frames.
    package static func describe(_ segments: [SegmentClock.Segment]) -> JSONValue {
        .array(
            segments.map { segment in
                .object([
                    "start": .number(Double(segment.start) / 1e9),
                    "duration": .number(Double(segment.end - segment.start) / 1e9),
                    "frames": .number(Double(segment.frames)),
                ])
            })
    }

    /// The largest clock offset of the audio inputs, ms, one decimal.
    package var clockOffsetMs: Double { ((tracks.map(\.clockOffsetMs).max() ?? 0) * 10).rounded() / 10 }
}
