import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// One handler process and its connection, for as long as the process lives: the samples it is sent,
/// the slots it holds, whether it keeps up (the hang check), and the timers that end it.
final class HandlerLink {
    let process: ChildProcess
    let manifest: HandlerManifest
    /// Its connection; nil once that is closed.
    private(set) var session: PeerSession?
    /// What it holds frame slots as (its connection's id, kept after the connection is gone).
    let holder: Int
    var ready = false
    /// When to escalate: SIGTERM at `terminateAt`, SIGKILL at `killAt`.
    var terminateAt: UInt64?
    var killAt: UInt64?
    /// Set when broadcastd had to stop the handler because it did not finish in time.
    var stopReason: BroadcastError?
    /// Set when broadcastd stopped a handler that had not started yet: its signal death is no failure.
    var stoppedBeforeStart = false
    /// Since BROADCAST_FINISHED: the latest its finish timeout may be counted to while it reports progress.
    var workDeadline: UInt64?
    /// How long a handler that keeps reporting may work after BROADCAST_FINISHED (an upload): an hour.
    static let maxFinishWork: UInt64 = 3600 * 1_000_000_000

    /// Protocol revision 1.2: a finishing handler that reports has its finish timeout counted anew from `now`, up to
    /// `maxFinishWork` after BROADCAST_FINISHED; not once it is being stopped.
    func reported(now: UInt64, finishTimeout: UInt64) {
        guard let workDeadline, terminateAt != nil, killAt == nil else { return }
        terminateAt = min(now + finishTimeout, workDeadline)
    }
    /// The handler's progress as last seen at the once-a-second check: bytes it had read and slots it
    /// had released, and since when each has not moved while it had something to read or hold.
    private var progress = (bytesSent: UInt64(0), readStalledSince: UInt64(0), releases: UInt64(0), releaseStalledSince: UInt64(0))
    /// The serial of the last cursor sprite it was sent (metadata cursor mode).
    var cursorSpriteSent: UInt32?
    /// Revision 2.3: the commands forwarded to it and not answered yet, by id (Daemon+Commands.swift).
    var commands: [UInt32: PendingCommand] = [:]
    var nextCommandID: UInt32 = 1

    init(process: ChildProcess, manifest: HandlerManifest, session: PeerSession) {
        self.process = process
        self.manifest = manifest
        self.session = session
        holder = session.id
    }

    /// Its connection, while it is open and not closing.
    var connection: PeerSession? {
        guard let session, !session.isClosing else { return nil }
        return session
    }

    /// The connection is gone.
    func disconnected() {
        session = nil
    }

    func terminate(now: UInt64) {
        process.send(signal: Signals.terminate)
        terminateAt = nil
        killAt = now + 2_000_000_000
    }

    func kill() {
        process.send(signal: Signals.kill)
        killAt = nil
    }

    /// Sends `message` at once (queued when the socket is full); a droppable one is refused when the handler
    /// is behind. False when it was not queued.
    @discardableResult
    func send(_ message: Message, droppable: Bool = false) -> Bool {
        guard let session else { return false }
        let queued = session.enqueue(message, droppable: droppable)
        session.flush()
        return queued
    }

    /// Queues without sending yet (samples, flushed once per turn by `flush`).
    func queue(_ message: Message, droppable: Bool) -> Bool {
        connection?.enqueue(message, droppable: droppable) ?? false
    }

    func flush() {
        session?.flush()
    }

    /// Starts the hang check afresh (a live stretch begins).
    func resetProgress(now: UInt64, pool: FramePool?) {
        progress = (session?.bytesSent ?? 0, now, pool?.releases[holder] ?? 0, now)
    }

    /// Why the handler has hung at `now`, or nil: it has read nothing it was sent, or held slots without
    /// releasing any, for `limit`. A clock runs only while there is something to read (or a slot held)
    /// and nothing moves.
    func hang(now: UInt64, pool: FramePool, limit: UInt64) -> String? {
        guard let session else { return nil }
        if session.bytesSent != progress.bytesSent || !session.wantsWrite {
            (progress.bytesSent, progress.readStalledSince) = (session.bytesSent, now)
        }
        let releases = pool.releases[holder] ?? 0
        if releases != progress.releases || !pool.holdsAny(holder) {
            (progress.releases, progress.releaseStalledSince) = (releases, now)
        }
        let seconds = limit / 1_000_000_000
        if now - progress.readStalledSince > limit {
            return "handler '\(manifest.name)' hung: it has read nothing broadcastd sent it for \(seconds) s"
        }
        if now - progress.releaseStalledSince > limit {
            return "handler '\(manifest.name)' hung: it has held frame slots without releasing any for \(seconds) s"
        }
        return nil
    }
}
