import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Logging

/// One handler process and its connection, for as long as the process lives: what it says (each message taken
/// here and returned as an `Event`), the samples it is sent, the slots it holds, whether it keeps up (the hang
/// check), and the timers that end it (`State`, whose deadline it keeps as `Wake.handlerDeadline`). Its process's
/// exit wakes the daemon as `Wake.handlerExited`.
final class HandlerLink {
    /// Where the handler is, with the deadline of each step.
    enum State {
        /// Launched: READY is due by `readyBy` (nil once that passed and its broadcast was failed for it).
        case launched(readyBy: UInt64?)
        /// It said READY.
        case ready
        /// Told that the broadcast finished (or left without its connection): SIGTERM at `terminateAt`, which its
        /// reports of progress move on, up to `workUntil`.
        case finishing(terminateAt: UInt64, workUntil: UInt64)
        /// SIGTERM sent: SIGKILL at `killAt`.
        case terminating(killAt: UInt64)
        /// SIGKILL sent.
        case killed
    }

    /// What a message from the handler comes to, for its broadcast.
    enum Event {
        /// It gave back a slot.
        case released
        case ready
        /// It finished the broadcast with an error (FINISH_WITH_ERROR).
        case failed(BroadcastError)
        case urlUpdated(String)
        /// Its service info (nil: none, or empty).
        case serviceInfo([String: JSONValue]?)
        case result([String: JSONValue])
        /// Its answer to a command it was sent.
        case answer(HandlerCommandAnswer)
        /// Revision 2.9: it asks for encoded samples (once, after READY).
        case encode(EncodeRequest)
        /// Revision 2.9: it asks its shared encoder for a keyframe.
        case keyframeWanted
        /// Revision 2.9, from a shared encoder: what it tells the handlers it serves.
        case shared(SharedEncoderNews)
    }

    /// How long a handler that keeps reporting may work after BROADCAST_FINISHED (an upload): an hour.
    static let maxFinishWork: UInt64 = 3600 * 1_000_000_000
    /// How long a handler has from SIGTERM to its exit, and one without its connection before SIGTERM.
    static let exitGrace: UInt64 = 2_000_000_000

    let process: any HandlerProcess
    let manifest: HandlerManifest
    /// It is a shared encoder's process: it may send SHARE_* and not ENCODE or REQUEST_KEYFRAME.
    let isSharedEncoder: Bool
    /// Its broadcast's id, which its wake-ups carry.
    let broadcast: UInt32
    private let wakes: WakeRegistry
    /// Its connection; nil once that is closed.
    private(set) var session: PeerSession?
    /// What it holds frame slots as (its connection's id, kept after the connection is gone).
    let holder: Int
    private let capture: CaptureSession
    private let startTimeout: UInt64
    private let finishTimeout: UInt64
    private let logger: Logger
    private(set) var state: State {
        didSet { wakes.schedule(.handlerDeadline(broadcast), at: deadline) }
    }
    private var saidReady = false
    /// It sent ENCODE (one per broadcast).
    private var askedToEncode = false
    /// Set when broadcastd had to stop the handler because it did not finish in time.
    private var stopReason: BroadcastError?
    /// Set when broadcastd stopped a handler that had not started yet: its signal death is no failure.
    private var stoppedBeforeStart = false
    /// The handler's progress as last seen at the once-a-second check: bytes it had read and slots it
    /// had released, and since when each has not moved while it had something to read or hold.
    private var progress = (
        bytesSent: UInt64(0), readStalledSince: UInt64(0), releases: UInt64(0),
        releaseStalledSince: UInt64(0)
    )
    /// The serial of the last cursor sprite it was sent (metadata cursor mode).
    private var cursorSpriteSent: UInt32?
    private var nextCommandID: UInt32 = 1

    init(
        process: any HandlerProcess, manifest: HandlerManifest, broadcast: UInt32, session: PeerSession,
        capture: CaptureSession, configuration: DaemonConfiguration, wakes: WakeRegistry, logger: Logger, now: UInt64,
        isSharedEncoder: Bool = false
    ) {
        self.process = process
        self.manifest = manifest
        self.isSharedEncoder = isSharedEncoder
        self.broadcast = broadcast
        self.wakes = wakes
        self.session = session
        self.capture = capture
        holder = session.id
        startTimeout = configuration.startTimeout
        finishTimeout = configuration.finishTimeout
        self.logger = logger
        state = .launched(readyBy: now + configuration.startTimeout)
        wakes.schedule(.handlerDeadline(broadcast), at: deadline)
        if let exit = process.exitDescriptor { wakes.register(.handlerExited(broadcast), exit.raw, .readable) }
    }

    /// Its connection, while it is open and not closing.
    var connection: PeerSession? {
        guard let session, !session.isClosing else { return nil }
        return session
    }

    /// It said HELLO (and was sent BROADCAST_STARTED).
    var saidHello: Bool { session?.saidHello == true }

    /// When its state's deadline comes.
    var deadline: UInt64? {
        switch state {
        case .launched(let readyBy): readyBy
        case .ready, .killed: nil
        case .finishing(let terminateAt, _): terminateAt
        case .terminating(let killAt): killAt
        }
    }

    // MARK: - What it says

    /// Takes a message from the handler; a message that breaks the protocol throws (and closes its connection).
    func receive(_ message: Message, now: UInt64) throws(ProtocolError) -> Event {
        switch message.opcode {
        case .releaseSlot:
            let release = try SlotRelease(decoding: message.payload)
            guard capture.release(pool: release.pool, slot: Int(release.slot), by: holder) else {
                throw .malformed(
                    .releaseSlot, "slot \(release.slot) of pool \(release.pool) is not held by this handler")
            }
            return .released
        case .ready:
            guard !saidReady else { throw .unexpected(.ready, "READY was already sent") }
            saidReady = true
            if case .launched = state { state = .ready }
            return .ready
        case .finishWithError:
            let failure = try message.decode(HandlerFailure.self)
            let code = failure.code.map { " (code \($0))" } ?? ""
            logger.info("handler '\(manifest.name)' finished the broadcast with an error: \(failure.message)\(code)")
            return .failed(
                BroadcastError(.handlerError, "handler '\(manifest.name)' finished the broadcast: \(failure.message)"))
        case .updateURL:
            let update = try message.decode(URLUpdate.self)
            if let problem = HandlerManifest.urlProblem(update.url) {
                throw .malformed(.updateURL, "the URL is refused: \(problem)")
            }
            return .urlUpdated(update.url)
        case .updateServiceInfo:
            let info = try HandlerServiceInfo.decodeWithinLimits(message)
            return .serviceInfo(info.isEmpty ? nil : info)
        case .setResult:
            let size = message.payload.count
            let limit = ProtocolLimits.maxResultPayload
            guard size <= limit else {
                throw .malformed(.setResult, "a result of \(size) bytes exceeds the limit of \(limit)")
            }
            let result = try message.decode(HandlerResult.self).result
            logger.debug(
                "handler '\(manifest.name)' reported a result: \(result.keys.sorted().joined(separator: ", "))")
            return .result(result)
        case .commandAnswer:
            // One that is too large is a protocol violation, as a SET_RESULT's is.
            let size = message.payload.count
            let limit = ProtocolLimits.maxCommandAnswerPayload
            guard size <= limit else {
                throw .malformed(.commandAnswer, "an answer of \(size) bytes exceeds the limit of \(limit)")
            }
            return .answer(try message.decode(HandlerCommandAnswer.self))
        case .encode:
            guard !isSharedEncoder, saidReady, !askedToEncode else {
                throw .unexpected(
                    .encode, isSharedEncoder ? "a shared encoder asks for no encoder" : "ENCODE comes once, after READY"
                )
            }
            let request = try message.decode(EncodeRequest.self)
            if let problem = request.problem { throw .malformed(.encode, problem) }
            askedToEncode = true
            return .encode(request)
        case .requestKeyframe:
            guard !isSharedEncoder, askedToEncode else {
                throw .unexpected(.requestKeyframe, "only a handler that asked for an encoder asks for keyframes")
            }
            _ = try message.decode(Empty.self)
            return .keyframeWanted
        case .shareRing, .shareStreams, .sharePacket, .sharePictureUnchanged, .shareAudioFigures:
            guard isSharedEncoder else {
                throw .unexpected(message.opcode, "only broadcastd's shared encoder sends it")
            }
            return .shared(try SharedEncoderNews(message))
        default:
            throw .unexpected(message.opcode, "not a handler message")
        }
    }

    /// Protocol revision 1.2: a finishing handler that reports progress has its finish timeout counted anew from
    /// `now`, up to `maxFinishWork` after BROADCAST_FINISHED; not once it is being stopped.
    func reported(now: UInt64) {
        guard case .finishing(_, let workUntil) = state else { return }
        state = .finishing(terminateAt: min(now + finishTimeout, workUntil), workUntil: workUntil)
    }

    // MARK: - Its timer and its end

    /// Its deadline came: true when READY is overdue (its broadcast fails for it); past the finish timeout it is
    /// sent SIGTERM, and SIGKILL when that did not end it.
    func expire(now: UInt64) -> Bool {
        defer { wakes.schedule(.handlerDeadline(broadcast), at: deadline) }
        switch state {
        case .launched(let readyBy?) where now >= readyBy:
            state = .launched(readyBy: nil)
            return true
        case .finishing(let terminateAt, _) where now >= terminateAt:
            logger.warning("handler '\(manifest.name)' did not exit in time; sending SIGTERM")
            if session != nil {
                stopReason = BroadcastError(
                    .handlerFailed,
                    "handler '\(manifest.name)' did not finish within "
                        + "\(finishTimeout / 1_000_000_000) s and was stopped")
            }
            terminate(now: now)
        case .terminating(let killAt) where now >= killAt:
            logger.warning("handler '\(manifest.name)' ignored SIGTERM; sending SIGKILL")
            kill()
        default:
            break
        }
        return false
    }

    /// Why READY did not come.
    var notReadyError: BroadcastError {
        BroadcastError(
            .handlerFailed,
            "handler '\(manifest.name)' did not become ready within " + "\(startTimeout / 1_000_000_000) s")
    }

    /// The broadcast is over: BROADCAST_FINISHED, and the finish timeout; a handler that has not said HELLO is
    /// stopped at once.
    func finish(error: BroadcastError?, discard: Bool, now: UInt64) {
        if saidHello {
            send(.json(.broadcastFinished, BroadcastEnd(error: error, discard: discard ? true : nil)))
            state = .finishing(terminateAt: now + finishTimeout, workUntil: now + Self.maxFinishWork)
        } else {
            stoppedBeforeStart = true
            terminate(now: now)
        }
    }

    /// The connection is gone: its slots are given back, and it has a moment to exit by itself.
    func disconnected(now: UInt64) {
        session = nil
        capture.releaseAll(heldBy: holder)
        switch state {
        case .launched, .ready: state = .finishing(terminateAt: now + Self.exitGrace, workUntil: now + Self.exitGrace)
        case .finishing, .terminating, .killed: break
        }
    }

    private func terminate(now: UInt64) {
        process.send(signal: Signals.terminate)
        state = .terminating(killAt: now + Self.exitGrace)
    }

    func kill() {
        process.send(signal: Signals.kill)
        state = .killed
    }

    /// How it ended, once it has (nil while it runs): its exit status, and the error its broadcast ends with (nil:
    /// none). Its slots are given back.
    func exited() -> (status: ChildProcess.ExitStatus, failure: BroadcastError?)? {
        guard let status = process.reap() else { return nil }
        wakes.deregister(.handlerExited(broadcast))
        wakes.schedule(.handlerDeadline(broadcast), at: nil)
        capture.releaseAll(heldBy: holder)
        logger.info("handler '\(manifest.name)' (pid \(process.pid)) \(status)")
        let failed =
            status.succeeded || stoppedBeforeStart
            ? nil : BroadcastError(.handlerFailed, "handler '\(manifest.name)' \(status)")
        return (status, stopReason ?? failed)
    }

    // MARK: - What it is sent

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

    /// Sends COMMAND; returns the id its answer will carry.
    func forward(_ command: String, arguments: [String: JSONValue]) -> UInt32 {
        let id = nextCommandID
        nextCommandID = id == UInt32.max ? 1 : id + 1
        send(.json(.command, HandlerCommand(id: id, command: command, arguments: arguments)))
        return id
    }

    /// In the metadata cursor mode: where the pointer is, every frame, with its image when it changed.
    func sendCursor(_ cursor: CursorState, at pts: UInt64) {
        var sample = CursorSample(presentationTime: pts, x: cursor.x, y: cursor.y, visible: cursor.visible, sprite: nil)
        if let sprite = cursor.sprite, sprite.serial != cursorSpriteSent {
            sample.sprite = .init(
                width: UInt16(sprite.width), height: UInt16(sprite.height), hotspotX: UInt16(sprite.hotspotX),
                hotspotY: UInt16(sprite.hotspotY), pixels: sprite.pixels)
        }
        if queue(sample.message, droppable: true), sample.sprite != nil { cursorSpriteSent = cursor.sprite?.serial }
    }

    // MARK: - Whether it keeps up

    /// A live stretch begins: the cursor's image is sent again, and the hang check starts afresh.
    func beginStretch(now: UInt64) {
        cursorSpriteSent = nil
        progress = (session?.bytesSent ?? 0, now, capture.pool?.releases[holder] ?? 0, now)
    }

    /// Why the handler has hung at `now`, or nil: it has read nothing it was sent, or held slots without
    /// releasing any, for `limit`. A clock runs only while there is something to read (or a slot held)
    /// and nothing moves.
    func hang(now: UInt64, limit: UInt64) -> String? {
        guard let session, let pool = capture.pool else { return nil }
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
