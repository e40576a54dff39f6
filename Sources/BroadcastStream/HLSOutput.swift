import BroadcastCore
import BroadcastEncoding
import BroadcastMedia
import BroadcastSystem
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// What an HLS destination writes, watched (revision 2.5) through the hls muxer's own io_open and io_close2
/// (`OutputWatch`):
/// - a write that fails (a full disk) is kept as the destination's error, which the sender reports and retries on,
///   and the temporary file it was (`NAME.tmp`) is removed, so that the rename the muxer makes next fails and the
///   playlist or segment it would replace stays whole: never an empty or cut playlist;
/// - into a folder (hls:///DIR/NAME.m3u8): a segment file that is there and was not written by this stream is never
///   written over (nor, so, deleted as the playlist slides): the muxer is refused it and made again, numbering
///   segments from the time anew; and `NAME.m3u8.lock` is held while it streams (the pid of the process), so that
///   a second stream to the same playlist is refused; one left by a process that is gone is taken over;
/// - to an HTTP origin (http[s]://…/NAME.m3u8): each file is written into memory (at most `fileLimit` bytes) and
///   stored by `HLSOrigin` (PUT through libcurl, the answer checked, tried again while that may help) when the muxer
///   closes it, before it goes on; once one could not be, nothing more is opened (the playlist never names a segment
///   that is not there), and `refusal` says why.
final class HLSOutput {
    /// The playlist's path, for a folder; nil for an HTTP origin.
    let playlist: String?
    private(set) var watch: OutputWatch!
    /// Most bytes of a file for an HTTP origin, held in memory until it is stored.
    private let fileLimit: Int64
    /// Where an HTTP origin's files go.
    private let origin: HLSOrigin?
    private let lock = NSLock()
    /// The segments this stream opened last (a muxer opens each once, as NAME.tmp, then renames it).
    private var written: [String] = []
    private var failure: MediaError?
    private var completed = 0
    private var locked = false

    init(_ destination: StreamDestination, reconnectFor: Double, fileLimit: Int64, logger: Logger) {
        playlist = destination.scheme == .hls ? destination.url : nil
        origin = playlist == nil ? HLSOrigin(reconnectFor: reconnectFor, logger: logger) : nil
        self.fileLimit = fileLimit
        let memory = origin.map { origin in
            OutputWatch.Memory(
                limit: fileLimit, store: { [unowned self] in store($0, $1) }, remove: { origin.remove($0) })
        }
        watch = OutputWatch(
            opening: { [unowned self] in opening($0) }, closed: { [unowned self] in closed($0, $1) }, memory: memory)
    }

    deinit {
        unlockPlaylist()
    }

    var lockPath: String? { playlist.map { $0 + ".lock" } }

    /// Takes the playlist's lock, or says which live stream holds it.
    func lockPlaylist() throws(MediaError) {
        guard let playlist, let lockPath, !locked else { return }
        let pid = Environment.processID
        let folder = (playlist as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for _ in 0..<2 {
            do {
                try FileSystem.createExclusively(lockPath, contents: Array("\(pid)\n".utf8))
                locked = true
                return
            } catch  where error.errno == EEXIST {
                let bytes = (try? FileSystem.readRegularFile(lockPath, limit: 64)) ?? []
                let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                if let holder = Int32(text), Environment.isRunning(holder) {
                    throw MediaError(
                        "stream to \(playlist)",
                        "another stream is live to this playlist (process \(holder) "
                            + "holds \(lockPath)): choose another playlist, or finish that stream first")
                }
                // Left by a process that is gone: taken over.
                FileSystem.remove(lockPath)
            } catch {
                throw MediaError("stream to \(playlist)", "cannot make its lock \(lockPath): \(error)")
            }
        }
        throw MediaError("stream to \(playlist)", "cannot take its lock \(lockPath): another stream takes it meanwhile")
    }

    /// Removes the playlist's lock, when this stream holds it.
    func unlockPlaylist() {
        guard locked, let lockPath else { return }
        locked = false
        FileSystem.remove(lockPath)
    }

    /// The first write that failed since the last call, as the error to report; nil when none did.
    func takeFailure() -> MediaError? {
        lock.lock()
        defer { lock.unlock() }
        defer { failure = nil }
        return failure
    }

    /// Whether a segment was written whole since the last call (the playlist and init file, small, may still fit
    /// on a disk that has no room for a segment: they are no progress).
    func takeCompleted() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        defer { completed = 0 }
        return completed > 0
    }

    /// Why an HTTP origin is given up on (a refusal, or `reconnectFor` of failures): the stream ends with it.
    var refusal: String? { origin?.refusal }

    /// What goes wrong with an HTTP origin now (service info's lastError), and whether it is being tried again.
    var problem: (text: String, retrying: Bool)? { origin?.problem }

    /// The stream finishes: an HTTP origin is tried until `deadline` at most.
    func finish(by deadline: DispatchTime) { origin?.finish(by: deadline) }

    private func opening(_ url: String) -> Int32 {
        lock.lock()
        defer { lock.unlock() }
        guard playlist != nil else { return failure == nil && origin?.refusal == nil ? 0 : -EIO }
        let final = url.hasSuffix(".tmp") ? String(url.dropLast(4)) : url
        if final.hasSuffix(".m4s") && !written.contains(final) && FileSystem.entryExists(final) {
            failure =
                failure
                ?? MediaError(
                    "write \(final)",
                    "a segment of that name is there already and was not "
                        + "written by this stream: it is left as it is, and segments are numbered anew")
            return -EEXIST
        }
        if final.hasSuffix(".m4s") { written = written.suffix(15) + [final] }
        return 0
    }

    private func closed(_ url: String, _ error: Int32) {
        lock.lock()
        defer { lock.unlock() }
        guard error < 0 else {
            if url.hasSuffix(".m4s") || url.hasSuffix(".m4s.tmp") { completed += 1 }
            return
        }
        let shown = SecretURL.masked(url.hasSuffix(".tmp") ? String(url.dropLast(4)) : url)
        failure =
            failure
            ?? (origin != nil && error == -EFBIG
                ? MediaError(
                    "write \(shown)",
                    "larger than \(fileLimit >> 20) MiB, more than "
                        + "videoBitRate and segmentDuration let a file be: lower them")
                : MediaError("write \(shown)", code: error))
        if playlist != nil && url.hasSuffix(".tmp") { FileSystem.remove(url) }
    }

    /// An HTTP origin's file, written whole into memory: stored before the muxer goes on.
    private func store(_ url: String, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        guard let origin, origin.store(url, bytes) else {
            lock.lock()
            defer { lock.unlock() }
            failure = failure ?? MediaError("store \(SecretURL.masked(url))", origin?.refusal ?? "not stored")
            return -EIO
        }
        closed(url, 0)
        return 0
    }
}
