import BroadcastCore
import BroadcastEncoding
import BroadcastHandlerKit
import BroadcastMedia
import BroadcastProtocol
import BroadcastSystem
import BroadcastTimeline

#if canImport(Glibc)
    import Glibc
#endif

/// The built-in `record` handler: H.264 (libx264), HEVC (libx265) or AV1 (SVT-AV1) and Opus (libopus)
/// into fragmented MP4 or Matroska (libavformat). Pauses make segments of one continuous file; audio follows its
/// timestamps (drift corrected) so it stays in sync with the video; frames that repeat the one
/// before are not encoded (the file is variable frame rate); any failure finishes the broadcast
/// with a message, and what was written stays playable.
public final class RecordHandler: EncodingSampleHandler {
    private var options: RecordOptions?
    private var muxer: Muxer?
    /// The file is this broadcast's: checked free (or to be overwritten) and about to be written.
    private var ownsFile = false
    private var lastInfo: (time: UInt64, bytes: Int64)?
    /// Chapters asked for with `mark`: where they start (file time, ns) and their titles.
    private var marks: [(time: Int64, title: String)] = []

    public override func broadcastStarted(withSetupInfo setupInfo: [String: String]) {
        MediaLog.install(logger)
        do {
            let options = try RecordOptions(
                url: broadcastURL, setupInfo: setupInfo, defaultPath: { OutputPath.defaultRecording() })
            self.options = options
            try OutputPath.prepare(
                options.path, overwrite: options.overwrite, createDirectory: (broadcastURL ?? "").isEmpty)
            // Created now (never through a link): a place that takes no file fails before the broadcast is live.
            if !options.overwrite { try OutputPath.claim(options.path) }
            ownsFile = true
            let muxer = try Muxer(url: options.path, container: options.container)
            self.muxer = muxer
            let encoding = try HandlerEncoding(
                options.encoding, for: self, output: muxer, now: MonotonicClock.now)
            self.encoding = encoding
            // Said at once, so that broadcastd knows the file if this process dies and the broadcast is discarded.
            setBroadcastResult(["file": .string(options.path)])
            logger.info("record: writing \(options.path) (\(encoding.name))")
        } catch {
            fail("\(error)")
        }
    }

    public override func processSampleBuffer(_ sampleBuffer: SampleBuffer, with type: SampleType) {
        guard failure == nil, let muxer, let encoding else { return }
        do {
            if try encoding.add(sampleBuffer, type) { reportProgress(at: encoding.fileTime, muxer: muxer) }
        } catch {
            fail("\(error)")
        }
    }

    public override var role: String { "record" }

    public override func encodingFailed(_ message: String) { fail(message) }

    public override func encodedPacketTaken() {
        if let muxer, let encoding { reportProgress(at: encoding.fileTime, muxer: muxer) }
    }

    public override func broadcastPaused() {
        guard let end = encoding?.pause() else { return }
        logger.info("record: paused at \(Double(end) / 1e9) s")
    }

    public override func broadcastFinished(error: BroadcastError?, discard: Bool) {
        if let muxer, let encoding, muxer.started {
            do {
                let end = try encoding.finish()
                try muxer.addChapters(Chapters.spans(marks, end: Int64(end)))
                try muxer.finish()
            } catch {
                logger.error("record: finishing \(options?.path ?? "the file"): \(error)")
                if failure == nil { failure = "\(error)" }
            }
        }
        _ = encoding?.pause()
        self.muxer = nil
        var result = result()
        if discard {
            // One file (fragmented MP4 and Matroska have no side files), closed above, so nothing writes it again.
            let removed = !ownsFile || options.map { FileSystem.removeFile($0.path) } ?? true
            result["bytes"] = nil
            result["discarded"] = .bool(removed)
            if !removed { result["error"] = .string("discarding: could not remove \(options?.path ?? "")") }
            logger.info("record: discarded \(ownsFile ? options?.path ?? "" : "nothing (no file was written)")")
        }
        setBroadcastResult(result)
        if let options, let encoding {
            let segments = encoding.segmentCount
            logger.info("record: \(options.path): \(Double(encoding.fileTime) / 1e9) s in \(segments) segment(s)")
        }
        if let options, let upload = options.upload, !discard {
            guard failure == nil, ownsFile else {
                result["upload"] = .string("not attempted: the recording failed")
                return setBroadcastResult(result)
            }
            switch RecordingUpload(path: options.path, settings: upload, logger: logger).run(report: {
                self.updateServiceInfo($0)
            }) {
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

    /// `mark [text]`: a chapter from this instant (the end of the last frame) on; in the file when it is finished.
    public override func handleCommand(_ command: String, arguments: [String: JSONValue]) throws -> [String: JSONValue]
    {
        guard command == "mark" else { throw HandlerError(command, "record has no such command") }
        guard let encoding, failure == nil else { throw HandlerError("mark", failure ?? "the recording did not start") }
        let mark = try Chapters.mark(at: Int64(encoding.fileTime), text: arguments["text"], count: marks.count)
        marks.append(mark)
        logger.info("record: chapter '\(mark.title)' at \(Double(mark.time) / 1e9) s")
        var answer = Chapters.describe(mark, number: marks.count)
        // libavformat writes MP4 chapters into the header, which a fragmented MP4 has written already.
        if options?.container != .matroska {
            answer["note"] = .string("chapters go into .mkv recordings; this one lists them in its result")
        }
        return answer
    }

    private func result() -> [String: JSONValue] {
        var result: [String: JSONValue] = encoding?.result() ?? ["duration": .number(0)]
        if !marks.isEmpty {
            result["chapters"] = .array(
                marks.map { .object(["start": .number(Double($0.time) / 1e9), "title": .string($0.title)]) })
        }
        // Only a file this broadcast writes: not one that was there and is kept (broadcastd removes `file` on a discard).
        if let options, ownsFile {
            result["file"] = .string(options.path)
            result["bytes"] = .number(Double(FileSystem.size(of: options.path) ?? 0))
        }
        if let failure { result["error"] = .string(failure) }
        return result
    }

    /// Once a second of file time: bit rate, size, and how far audio timestamps are from where the samples go.
    private func reportProgress(at time: UInt64, muxer: Muxer) {
        let bytes = muxer.bytesWritten
        guard let last = lastInfo else {
            lastInfo = (time, bytes)
            return
        }
        guard time >= last.time + 1_000_000_000 else { return }
        let seconds = Double(time - last.time) / 1e9
        var info: [String: JSONValue] = [
            "recorded": .number((Double(time) / 1e8).rounded() / 10),
            "bytes": .number(Double(bytes)),
            "bitRate": .number((Double(bytes - last.bytes) * 8 / 1000 / seconds).rounded()),
        ]
        info.merge(encoding?.progress ?? [:]) { a, _ in a }
        updateServiceInfo(info)
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
