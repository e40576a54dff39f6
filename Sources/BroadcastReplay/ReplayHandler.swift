import BroadcastCore
import BroadcastEncoding
import BroadcastHandlerKit
import BroadcastMedia
import BroadcastProtocol
import BroadcastSystem
import Dispatch
import Synchronization

/// The built-in `replay` handler: keeps the last `length` seconds encoded (the `record` handler's encoders and
/// settings, `RecordingEncoder`) in a buffer of whole GOPs bounded by `maxMemory`, and on the `save` command writes
/// them, without re-encoding, into a fragmented MP4 or Matroska file. Saves run on a thread of their own, so that
/// capture goes on meanwhile; pauses are not in the buffer (its time is the file time, continuous across them).
public final class ReplayHandler: EncodingSampleHandler {
    private var options: ReplayOptions?
    private var buffer: ReplayBuffer?
    private var lastReport: UInt64?
    private var snapshots = 0
    private func nextSnapshot() -> Int {
        snapshots += 1
        return snapshots
    }
    /// Marks made so far (chapters of the saves that hold them).
    private var marks = 0
    /// `save --and-record`: the chapters of the recording, from its start.
    private var recordingMarks: [(time: Int64, title: String)] = []
    /// Saves, one after the other, off the callback thread.
    private let saveQueue = DispatchQueue(label: "broadcastd.replay.save")
    /// What the saves did, for the service info and the result.
    private let saved = SaveLog()

    public override func broadcastStarted(withSetupInfo setupInfo: [String: String]) {
        MediaLog.install(logger)
        do {
            let options = try ReplayOptions(setupInfo: setupInfo)
            self.options = options
            var directory: String?
            if options.onDisk {
                let cache =
                    Environment.baseDirectory("XDG_CACHE_HOME", fallback: ".cache", in: Environment.all)
                    ?? "/tmp/.cache"
                Self.removeAbandonedRings(in: cache + "/broadcastd")
                directory = cache + "/broadcastd/replay-\(Environment.processID)"
                do { try FileSystem.makeDirectories(directory!, mode: 0o700) } catch {
                    throw HandlerError("replay", "cannot make the disk buffer's folder: \(error)")
                }
            }
            let buffer = ReplayBuffer(length: options.length, maxBytes: options.maxMemory, directory: directory)
            self.buffer = buffer
            let encoding = try HandlerEncoding(
                options.encoding, for: self, output: buffer, now: MonotonicClock.now)
            self.encoding = encoding
            let place = directory.map { "in files in \($0)" } ?? "in memory"
            logger.info(
                "replay: keeping \(Double(options.length) / 1e9) s, at most \(options.maxMemory >> 20) MiB \(place) (\(encoding.name))"
            )
        } catch {
            fail("\(error)")
        }
    }

    public override func processSampleBuffer(_ sampleBuffer: SampleBuffer, with type: SampleType) {
        guard failure == nil, let encoding else { return }
        do {
            if try encoding.add(sampleBuffer, type) { report(at: encoding.fileTime) }
        } catch {
            fail("\(error)")
        }
    }

    public override var role: String { "replay" }

    public override func encodingFailed(_ message: String) { fail(message) }

    public override func encodedPacketTaken() {
        if let encoding { report(at: encoding.fileTime) }
    }

    public override func broadcastPaused() {
        _ = encoding?.pause()
    }

    public override func handleCommand(_ command: String, arguments: [String: JSONValue], reply: CommandReply) {
        switch command {
        case "save":
            if arguments["andRecord"] == .bool(true) {
                return reply.answer(Result { () throws(HandlerError) in try andRecord(arguments) })
            }
            save(
                last: arguments["last"], file: arguments["file"], overwrite: arguments["overwrite"] == .bool(true),
                reply: reply)
        case "mark":
            guard let buffer, let encoding, failure == nil else {
                return reply.fail(HandlerError("mark", failure ?? "the replay buffer did not start"))
            }
            let mark: (time: Int64, title: String)
            do {
                mark = try Chapters.mark(
                    at: Int64(encoding.fileTime), text: arguments["text"], count: marks,
                    kept: max(buffer.marks.count, recordingMarks.count))
            } catch {
                return reply.fail(error)
            }
            buffer.mark(mark)
            if let recording = buffer.recording { recordingMarks.append((mark.time - recording.origin, mark.title)) }
            marks += 1
            reply.send(Chapters.describe(mark, number: marks))
        default: reply.fail(HandlerError(command, "replay has no such command"))
        }
    }

    /// Takes the part of the buffer to save now (references, no copies) and writes it on the save thread.
    private func save(last: JSONValue?, file: JSONValue?, overwrite: Bool, reply: CommandReply) {
        guard let buffer, let options, failure == nil else {
            return reply.fail(HandlerError("save", failure ?? "the replay buffer did not start"))
        }
        let seconds: Double?
        let target: (path: String, container: Muxer.Container)
        do { (seconds, target) = (try Self.seconds(last), try Self.target(file)) } catch { return reply.fail(error) }
        let (path, container) = target
        let snapshot: ReplayBuffer.Snapshot
        do {
            snapshot = try claiming(path, createDirectory: file == nil, overwrite: overwrite) {
                guard let taken = try buffer.snapshot(last: seconds, id: nextSnapshot()) else {
                    throw HandlerError("save", "nothing to save yet: the buffer is empty")
                }
                return taken
            }
        } catch {
            return reply.fail(error)
        }
        let frameDuration = Int64(1_000_000_000 / max(1, options.encoding.framesPerSecond ?? framesPerSecond))
        let asked = MonotonicClock.now()
        saveQueue.async { [saved, logger, path] in
            do {
                let written = try ReplayFile.save(
                    snapshot, frameDuration: frameDuration, to: path, container: container)
                let milliseconds = Double((MonotonicClock.now() - asked) / 100_000) / 10
                let result: [String: JSONValue] = [
                    "path": .string(path), "duration": .number((written.duration * 1000).rounded() / 1000),
                    "start": .number((Double(snapshot.origin) / 1e6).rounded() / 1000),
                    "bytes": .number(Double(FileSystem.size(of: path) ?? 0)),
                    "videoFrames": .number(Double(written.videoFrames)),
                    "milliseconds": .number(milliseconds),
                    "chapters": .array(
                        snapshot.marks.map {
                            .object(["start": .number(Double($0.time) / 1e9), "title": .string($0.title)])
                        }),
                ]
                saved.list.withLock { $0.append(result) }
                logger.info("replay: saved \(written.duration) s to \(path) in \(milliseconds) ms")
                reply.send(result)
            } catch {
                _ = FileSystem.removeFile(path)
                logger.error("replay: saving \(path): \(error)")
                reply.fail(error)
            }
        }
    }

    /// `last`: seconds of the buffer to save, above 0 and at most the longest buffer (`length`'s limit), so that
    /// no arithmetic on it overflows; nil for the whole buffer.
    static func seconds(_ last: JSONValue?) throws(HandlerError) -> Double? {
        guard case .number(let value)? = last else { return nil }
        guard value > 0 && value <= ReplayOptions.maxLength else {
            throw HandlerError(
                "save", "--last is a number of seconds above 0 and at most " + "\(Int(ReplayOptions.maxLength))")
        }
        return value
    }

    /// Where a save goes: the file asked for (absolute), else the Replays folder; and its container, from its extension.
    private static func target(_ file: JSONValue?) throws(HandlerError) -> (path: String, container: Muxer.Container) {
        var path = OutputPath.defaultRecording(folder: "Replays")
        if case .string(let given)? = file {
            guard given.hasPrefix("/") else { throw HandlerError("save", "'\(given)' is not an absolute path") }
            path = given
        } else {
            path = unused(path)
        }
        let ext =
            path.split(separator: "/").last.flatMap { $0.contains(".") ? $0.split(separator: ".").last : nil }.map(
                String.init) ?? ""
        guard let container = Muxer.Container(fileExtension: ext) else {
            throw HandlerError("save", "'\(path)': replay saves .mp4 (fragmented MP4) or .mkv (Matroska)")
        }
        return (path, container)
    }

    /// `save --and-record FILE`: the buffer (or its last `last` seconds), and from then on everything encoded, into one
    /// file, until the broadcast finishes: a recording with pre-roll. Written here, on the callback thread, so that no
    /// packet comes between the buffer and what follows it.
    private func andRecord(_ arguments: [String: JSONValue]) throws(HandlerError) -> [String: JSONValue] {
        guard let buffer, options != nil, failure == nil else {
            throw HandlerError("save", failure ?? "the replay buffer did not start")
        }
        if let recording = buffer.recording { throw HandlerError("save", "already recording into \(recording.path)") }
        let seconds = try Self.seconds(arguments["last"])
        let (path, container) = try Self.target(arguments["file"])
        do {
            let (file, snapshot) = try claiming(
                path, createDirectory: arguments["file"] == nil,
                overwrite: arguments["overwrite"] == .bool(true)
            ) {
                guard let snapshot = try buffer.snapshot(last: seconds, id: nextSnapshot()) else {
                    throw HandlerError("save", "nothing to save yet: the buffer is empty")
                }
                return (try ReplayFile(snapshot, to: path, container: container, chapters: []), snapshot)
            }
            recordingMarks = snapshot.marks
            buffer.recording = file
            logger.info("replay: recording into \(path) from \(Double(snapshot.origin) / 1e9) s on")
            return [
                "path": .string(path), "recording": .bool(true),
                "start": .number((Double(snapshot.origin) / 1e6).rounded() / 1000),
                "buffered": .number((Double(snapshot.end - snapshot.origin) / 1e6).rounded() / 1000),
            ]
        } catch let error as HandlerError {
            throw error
        } catch {
            throw HandlerError("save", "\(error)")
        }
    }

    /// Checks `path` and, unless overwriting, creates it empty where nothing is (a file or a symbolic link that is
    /// there, dangling or not, is refused and never followed); then `take`, after which a file so created and not
    /// written goes again when it fails. `overwrite`: the save's own (`save --overwrite`), beside the setup's.
    private func claiming<T>(
        _ path: String, createDirectory: Bool, overwrite asked: Bool,
        _ take: () throws -> T
    ) throws -> T {
        let overwrite = asked || (options?.overwrite ?? false)
        try OutputPath.prepare(
            path, overwrite: overwrite, createDirectory: createDirectory,
            remedy: Self.overwriteRemedy)
        if !overwrite { try OutputPath.claim(path, remedy: Self.overwriteRemedy) }
        do { return try take() } catch {
            if !overwrite { _ = FileSystem.removeFile(path) }
            throw error
        }
    }

    /// How a save replaces a file: its argument, as `broadcastctl save` and `send save` give it.
    static let overwriteRemedy = "save --overwrite (send save overwrite=true)"

    /// `path`, or with `-2`, `-3`… before its extension when a file of that name exists (two saves in one second).
    private static func unused(_ path: String) -> String {
        guard FileSystem.size(of: path) != nil, let dot = path.lastIndex(of: ".") else { return path }
        for n in 2...99 {
            let candidate = String(path[..<dot]) + "-\(n)" + String(path[dot...])
            if FileSystem.size(of: candidate) == nil { return candidate }
        }
        return path
    }

    /// Once a second of file time: what the buffer holds, and the last save (every controller sees it).
    private func report(at time: UInt64) {
        if let last = lastReport, time < last + 1_000_000_000 { return }
        lastReport = time
        guard let buffer else { return }
        var info = bufferFigures(buffer)
        let saves = saved.list.withLock { $0 }
        info["saves"] = .number(Double(saves.count))
        if case .string(let path)? = saves.last?["path"] { info["lastSave"] = .string(path) }
        info.merge(encoding?.sharedVideoFrames ?? [:]) { first, _ in first }
        updateServiceInfo(info)
    }

    private func bufferFigures(_ buffer: ReplayBuffer) -> [String: JSONValue] {
        var figures: [String: JSONValue] = [
            "buffered": .number((Double(buffer.duration) / 1e8).rounded() / 10),
            "bufferBytes": .number(Double(buffer.bytes)),
            "gops": .number(Double(buffer.gops.count)), "maxMemory": .number(Double(buffer.maxBytes)),
        ]
        if buffer.directory != nil {
            let files = buffer.filesOnDisk
            figures["diskFiles"] = .number(Double(files.count))
            figures["diskBytes"] = .number(Double(files.bytes))
        }
        return figures
    }

    public override func broadcastFinished(error: BroadcastError?, discard: Bool) {
        saveQueue.sync {}  // the saves asked for are written before the broadcast ends
        var recorded: [String: JSONValue]?
        if let encoding, let recording = buffer?.recording {
            do {
                let end = Int64(try encoding.finish())
                try recording.finish(end: end, chapters: Chapters.spans(recordingMarks, end: end - recording.origin))
                recorded = [
                    "path": .string(recording.path), "duration": .number(Double(end - recording.origin) / 1e9),
                    "start": .number(Double(recording.origin) / 1e9),
                    "bytes": .number(Double(FileSystem.size(of: recording.path) ?? 0)),
                    "videoFrames": .number(Double(recording.videoFrames)),
                    "chapters": .array(
                        recordingMarks.map {
                            .object(["start": .number(Double($0.time) / 1e9), "title": .string($0.title)])
                        }),
                ]
            } catch {
                logger.error("replay: finishing \(recording.path): \(error)")
                if failure == nil { failure = "\(error)" }
            }
        }
        _ = encoding?.pause()
        var result = encoding?.result() ?? [:]
        if let recorded { result["recording"] = .object(recorded) }
        if let buffer {
            result.merge(bufferFigures(buffer)) { a, _ in a }
            result["droppedGOPsForLength"] = .number(Double(buffer.droppedForLength))
            result["droppedGOPsForMemory"] = .number(Double(buffer.droppedForMemory))
        }
        result["saves"] = .array(saved.list.withLock { $0 }.map { .object($0) })
        if let failure { result["error"] = .string(failure) }
        buffer?.removeFiles()
        setBroadcastResult(result)
    }

    /// The disk rings that replay handlers which no longer run left behind (a crash, a kill): `replay-PID` folders
    /// of GOP files, removed before a new ring starts beside them.
    private static func removeAbandonedRings(in folder: String) {
        for name in FileSystem.list(folder) ?? [] where name.hasPrefix("replay-") {
            guard let pid = Int32(name.dropFirst("replay-".count)), !Environment.isRunning(pid) else { continue }
            let ring = folder + "/" + name
            for file in FileSystem.list(ring) ?? [] where file.hasSuffix(".nut") {
                FileSystem.remove(ring + "/" + file)
            }
            FileSystem.removeDirectory(ring)
        }
    }

    private func fail(_ message: String) {
        guard failure == nil else { return }
        failure = message
        logger.error("replay: \(message)")
        finishBroadcastWithError(HandlerError("replay", message))
    }
}

/// What the saves wrote, shared by the callback thread and the save thread.
final class SaveLog: Sendable {
    let list = Mutex<[[String: JSONValue]]>([])
}
