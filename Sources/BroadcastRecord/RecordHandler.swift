import BroadcastCore
import BroadcastHandlerKit
import BroadcastMedia
import BroadcastProtocol
import BroadcastSystem
import BroadcastTimeline
import CFFmpeg

#if canImport(Glibc)
import Glibc
#endif

/// The built-in `record` handler: H.264 (libx264), HEVC (libx265) or AV1 (SVT-AV1) and Opus (libopus)
/// into fragmented MP4 or Matroska (libavformat). Pauses make segments of one continuous file; audio follows its
/// timestamps (drift corrected) so it stays in sync with the video; frames that repeat the one
/// before are not encoded (the file is variable frame rate); any failure finishes the broadcast
/// with a message, and what was written stays playable.
public final class RecordHandler: BroadcastSampleHandler {
    /// A still screen still gets an encoded frame this often (ns), so fragments keep coming.
    static let maxFrameGap: UInt64 = 1_000_000_000

    private var options: RecordOptions?
    private var muxer: Muxer?
    private var video: Encoder?
    private var videoStream = 0
    private var input: VideoInput?
    private var tracks: [AudioTrack] = []
    private var clock = SegmentClock()
    /// Audio that came before its segment's first frame (bounded), placed once the frame is in.
    private var early: [(type: SampleType, pts: UInt64, sample: [UInt8], format: AudioFormat, frames: Int)] = []
    private var lastEncoded: UInt64?
    private var nextDue: UInt64 = 0
    private var frameCount = 0
    private var encodedFrames = 0
    private var skippedRepeats = 0
    private var failure: String?
    /// The file is this broadcast's: checked free (or to be overwritten) and about to be written.
    private var ownsFile = false
    private var lastInfo: (time: UInt64, bytes: Int64)?

    public override func broadcastStarted(withSetupInfo setupInfo: [String: String]) {
        MediaLog.install(logger)
        do {
            let options = try RecordOptions(url: broadcastURL, setupInfo: setupInfo, defaultPath: { OutputPath.defaultRecording() })
            self.options = options
            try OutputPath.prepare(options.path, overwrite: options.overwrite, createDirectory: (broadcastURL ?? "").isEmpty)
            ownsFile = true
            try open(options)
            // Said at once, so that broadcastd knows the file if this process dies and the broadcast is discarded.
            setBroadcastResult(["file": .string(options.path)])
            logger.info("record: writing \(options.path) (\(video?.implementation?.encoderName ?? ""), \(input?.format.width ?? 0)x\(input?.format.height ?? 0), \(tracks.count) audio track(s))")
        } catch {
            fail("\(error)")
        }
    }

    private func open(_ options: RecordOptions) throws(MediaError) {
        let muxer = try Muxer(url: options.path, container: options.container)
        var settings = options.video
        settings.width = options.size?.width ?? videoFormat.width
        settings.height = options.size?.height ?? videoFormat.height
        settings.framesPerSecond = options.framesPerSecond ?? framesPerSecond
        settings.fullRange = videoFullRange
        guard videoFormat.pixelFormat != .bgrx else {
            throw MediaError("record", "frames arrive as BGRx: run broadcastd with --pixel-format nv12 (the default) or i420")
        }
        let implementation = try VideoEncoderImplementation.best(for: settings.codec)
        let pixelFormat = implementation.inputFormat(for: videoFormat.pixelFormat == .i420 ? .i420 : .nv12)
        let input = try VideoInput(encoding: VideoFormat(width: settings.width, height: settings.height, pixelFormat: pixelFormat), from: videoFormat)
        let video = try Encoder.video(settings, pixelFormat: pixelFormat, globalHeader: muxer.wantsGlobalHeader,
                                      implementation: implementation)
        videoStream = try muxer.addStream(for: video)
        let channels = options.channels ?? audioFormat.channels
        let audio = AudioEncoderSettings(sampleRate: audioFormat.sampleRate, channels: channels,
                                         bitRate: options.audioBitRate ?? 64 * channels, complexity: options.opusComplexity)
        // Tracks for the streams the source delivers (X11 without PipeWire: none).
        let requested: [SampleType] = switch options.audio {
        case .none: []
        case .mixed: [.audioApp, .audioMic]
        case .separate(let streams): streams
        }
        let streams = requested.filter(audioStreams.contains)
        if case .mixed = options.audio, streams.count == 2 {
            tracks = [try AudioTrack(name: "app+mic", streams: streams, gains: options.gains, settings: audio,
                                     globalHeader: muxer.wantsGlobalHeader, signalsPriming: true,
                                     addStream: muxer.addStream)]
        } else {
            tracks = try streams.map { stream throws(MediaError) in
                try AudioTrack(name: stream.description, streams: [stream], gains: options.gains, settings: audio,
                               globalHeader: muxer.wantsGlobalHeader, signalsPriming: true, addStream: muxer.addStream)
            }
        }
        self.muxer = muxer
        self.video = video
        self.input = input
    }

    public override func broadcastVideoFormatChanged(_ format: VideoFormat) {
        guard failure == nil, let input else { return }
        do { try input.inputChanged(to: format) } catch { fail("\(error)") }
    }

    public override func processSampleBuffer(_ sampleBuffer: SampleBuffer, with type: SampleType) {
        guard failure == nil, let muxer else { return }
        do {
            if type == .video { try addVideo(sampleBuffer, muxer: muxer) } else { try addAudio(sampleBuffer, type, muxer: muxer) }
        } catch {
            fail("\(error)")
        }
    }

    private func addVideo(_ sample: SampleBuffer, muxer: Muxer) throws(MediaError) {
        guard let video, let input, let format = sample.videoFormat else { return }
        if !muxer.started {
            // The header goes out with the first frame, whose orientation it records.
            let orientation = options?.rotation.map { Orientation(degrees: UInt16($0), mirrored: false) } ?? sample.orientation ?? .up
            muxer.setOrientation(stream: videoStream, degrees: Int(orientation.degrees), mirrored: orientation.mirrored)
            try muxer.start()
        }
        let opensSegment = clock.offset == nil
        let time = clock.placeFrame(pts: sample.presentationTime, duration: sample.duration)
        frameCount += 1
        if opensSegment { try placeEarlyAudio(muxer: muxer) }
        // A lower recording rate keeps the frames due at its own interval.
        if let fps = options?.framesPerSecond {
            let interval = 1_000_000_000 / UInt64(fps)
            if time + sample.duration / 2 < nextDue { return }
            nextDue = max(nextDue + interval, time)
        }
        if sample.isRepeat, let last = lastEncoded, time < last + Self.maxFrameGap {
            skippedRepeats += 1
            return
        }
        let frame = try input.frame(sample.data, layout: format, time: time)
        try video.encode(frame.frame) { packet throws(MediaError) in
            try muxer.writeHoldingBack(packet, stream: videoStream, timeBase: video.timeBase)
        }
        lastEncoded = time
        encodedFrames += 1
        reportProgress(at: time, muxer: muxer)
    }

    private func addAudio(_ sample: SampleBuffer, _ type: SampleType, muxer: Muxer) throws(MediaError) {
        guard let format = sample.audioFormat else { return }
        try addAudio(sample.data, format: format, frames: sample.frameCount, type, pts: sample.presentationTime, muxer: muxer)
    }

    private func addAudio(_ data: UnsafeRawBufferPointer, format: AudioFormat, frames: Int, _ type: SampleType, pts: UInt64, muxer: Muxer) throws(MediaError) {
        guard tracks.contains(where: { $0.inputs[type] != nil }) else { return }
        guard let time = clock.fileTime(ofCapture: pts) else {
            // Before the segment's first frame: keep up to a second of it for the join.
            early.append((type, pts, Array(data), format, frames))
            if early.count > 200 { early.removeFirst() }
            return
        }
        for track in tracks where track.inputs[type] != nil {
            try track.add(data, format: format, frames: frames, from: type, at: time, videoEnd: clock.duration, sink: muxer)
        }
    }

    private func placeEarlyAudio(muxer: Muxer) throws(MediaError) {
        let pending = early
        early = []
        for chunk in pending {
            try chunk.sample.withUnsafeBytes { data in
                Result { () throws(MediaError) in try addAudio(data, format: chunk.format, frames: chunk.frames, chunk.type, pts: chunk.pts, muxer: muxer) }
            }.get()
        }
    }

    public override func broadcastPaused() {
        guard let end = clock.close() else { return }
        early = []
        for track in tracks { track.endSegment(at: end) }
        logger.info("record: segment \(clock.segments.count) ends at \(Double(end) / 1e9) s")
    }

    public override func broadcastFinished(error: BroadcastError?, discard: Bool) {
        _ = clock.close()
        let end = clock.duration
        if let muxer, let video, muxer.started {
            do {
                try video.encode(nil) { packet throws(MediaError) in try muxer.writeHoldingBack(packet, stream: videoStream, timeBase: video.timeBase) }
                try muxer.endStream(videoStream, at: Int64((end * 9 + 50_000) / 100_000))
                for track in tracks { try track.finish(at: end, sink: muxer) }
                try muxer.finish()
            } catch {
                logger.error("record: finishing \(options?.path ?? "the file"): \(error)")
                if failure == nil { failure = "\(error)" }
            }
        }
        self.muxer = nil
        var result = result(duration: end)
        if discard {
            // One file (fragmented MP4 and Matroska have no side files), closed above, so nothing writes it again.
            let removed = !ownsFile || options.map { OutputPath.remove($0.path) } ?? true
            result["bytes"] = nil
            result["discarded"] = .bool(removed)
            if !removed { result["error"] = .string("discarding: could not remove \(options?.path ?? "")") }
            logger.info("record: discarded \(ownsFile ? options?.path ?? "" : "nothing (no file was written)")")
        }
        setBroadcastResult(result)
        if let options { logger.info("record: \(options.path): \(Double(end) / 1e9) s in \(clock.segments.count) segment(s)") }
        if let options, let upload = options.upload, !discard {
            guard failure == nil, ownsFile else {
                result["upload"] = .string("not attempted: the recording failed")
                return setBroadcastResult(result)
            }
            switch RecordingUpload(path: options.path, settings: upload, logger: logger).run(report: { self.updateServiceInfo($0) }) {
            case .uploaded(let url, let fields):
                updateBroadcastURL(url)
                result["uploadedURL"] = .string(url)
                result["upload"] = .object(fields)
            case .failed(let message):
                result["uploadError"] = .string(message)
                finishBroadcastWithError(HandlerError("record", message))
            }
            setBroadcastResult(result)
        }
    }

    private func result(duration: UInt64) -> [String: JSONValue] {
        var result: [String: JSONValue] = [
            "duration": .number(Double(duration) / 1e9),
            "segments": .array(clock.segments.map { segment in
                .object(["start": .number(Double(segment.start) / 1e9), "duration": .number(Double(segment.end - segment.start) / 1e9),
                         "frames": .number(Double(segment.frames))])
            }),
            "videoFrames": .number(Double(frameCount)),
            "encodedFrames": .number(Double(encodedFrames)),
            "repeatedFramesNotEncoded": .number(Double(skippedRepeats)),
            "audioTracks": .array(tracks.map { track in
                .object(track.summary.mapValues { .number(($0 * 10).rounded() / 10) }.merging(["name": .string(track.name)]) { a, _ in a })
            }),
        ]
        if let options {
            result["videoCodec"] = .string(options.video.codec.rawValue)
            if let encoder = video?.implementation { result["videoEncoder"] = .string(encoder.encoderName) }
        }
        // Only a file this broadcast writes: not one that was there and is kept (broadcastd removes `file` on a discard).
        if let options, ownsFile {
            result["file"] = .string(options.path)
            result["bytes"] = .number(Double(OutputPath.size(of: options.path) ?? 0))
        }
        if let failure { result["error"] = .string(failure) }
        return result
    }

    /// Once a second of file time: bit rate, size, and how far audio timestamps are from where the samples go.
    private func reportProgress(at time: UInt64, muxer: Muxer) {
        let bytes = muxer.bytesWritten
        guard let last = lastInfo else { lastInfo = (time, bytes); return }
        guard time >= last.time + 1_000_000_000 else { return }
        let seconds = Double(time - last.time) / 1e9
        updateServiceInfo([
            "recorded": .number((Double(time) / 1e8).rounded() / 10),
            "bytes": .number(Double(bytes)),
            "bitRate": .number((Double(bytes - last.bytes) * 8 / 1000 / seconds).rounded()),
            "clockOffsetMs": .number(((tracks.map(\.clockOffsetMs).max() ?? 0) * 10).rounded() / 10),
            "segment": .number(Double(clock.segments.count + 1)),
        ])
        lastInfo = (time, bytes)
    }

    /// Stops recording and finishes the broadcast with `message`; the file keeps what was written.
    private func fail(_ message: String) {
        guard failure == nil else { return }
        failure = message
        let kept = muxer != nil ? " (what was recorded until now stays playable in \(options?.path ?? "the file"))" : ""
        logger.error("record: \(message)")
        finishBroadcastWithError(HandlerError("record", message + kept))
    }
}
