import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Logging

/// broadcastd's core. One thread runs one poll loop that owns everything: the broadcast state
/// machine, the peers, the handler process, the frame pool and the capture source. Nothing in
/// it ever blocks on a peer: output to peers is queued and bounded, samples are dropped (and
/// counted) rather than waited for.
public final class Daemon {
    let configuration: DaemonConfiguration
    let logger: Logger
    let source: CaptureSource
    let registry: HandlerRegistry
    /// The frame pool's size, planned from the budget when a broadcast is requested; the pool itself exists only while it runs.
    private var poolPlan: FramePoolPlan?
    private var pool: FramePool?
    /// Pools replaced after a resize: releases of their slots are expected and ignored.
    private var retiredPools: Set<UInt32> = []
    private var nextPoolID: UInt32 = 1
    private let listener: Descriptor
    /// Where the listener is: the configured path, or where systemd bound the socket it passed.
    let socketPath: String
    /// False under socket activation: the socket file is systemd's, and stays for the next activation.
    private let ownsSocketPath: Bool
    /// systemd's notification socket (Type=notify): READY, STATUS, WATCHDOG and STOPPING go there.
    private let notifier: SystemdNotifier?
    private var nextWatchdogAt: UInt64?
    /// The last STATUS= sent, so that an unchanged status is not sent again.
    private var lastStatus: String?
    private let signals: SignalDescriptor
    private let timer: DeadlineTimer
    /// While accept() can get no descriptor (EMFILE, ENFILE), the listener rests until then instead of
    /// waking the loop at once again.
    private var acceptPausedUntil: UInt64?
    private var acceptWarnings = WarningThrottle()
    private var refusalWarnings = WarningThrottle()

    private var machine = BroadcastStateMachine()
    private var sessions: [Int: PeerSession] = [:]
    private var nextSessionID = 1
    private var nextBroadcastID: UInt32 = 1
    private var handler: RunningHandler?
    /// The handler the current broadcast was started with, as found when it was requested.
    private var handlerEntry: HandlerRegistry.Entry?
    private var manifest: HandlerManifest? { handlerEntry?.manifest }
    private var setupInfo: [String: String] = [:]
    /// The handler's last UPDATE_SERVICE_INFO, as SERVICE_INFO carries it (JSON).
    private var handlerServiceInfo: [UInt8]?
    /// What the handler last sent with SET_RESULT during the current broadcast: FINISHED and the finished status carry it.
    private var handlerResult: [String: JSONValue]?
    private var shuttingDown = false
    /// A START waiting for the source to open (the desktop portal's share dialog is up, or the first frame has
    /// not come): answered when the source is.
    private var pendingStart: (sessionID: Int, seq: UInt32, request: StartRequest)?
    /// What the screen is doing while a START is pending ("being chosen in the screen-share dialog").
    private var pendingReason = ""

    // Capture and timing; all times are CLOCK_MONOTONIC nanoseconds.
    private var counters: [SampleType: StreamCounters] = [:]
    private var sequences: [SampleType: UInt64] = [:]
    private var discontinuous: Set<SampleType> = []
    /// The audio streams last published as silent (a STATE_CHANGED goes out when this changes).
    private var silentAudio: Set<SampleType> = []
    private var nextFrameAt: UInt64?
    private var nextAudioAt: UInt64?
    private var nextServiceInfoAt: UInt64?
    private var startDeadline: UInt64?
    private var liveSince: UInt64?
    /// The VIDEO_SAMPLE fields that stay the same from frame to frame, made when capture begins.
    private var videoHeader: VideoSampleHeader?
    /// The serial of the last cursor sprite the handler was sent (metadata cursor mode).
    private var cursorSpriteSent: UInt32?
    /// Frames lost in a row to transient capture errors; the broadcast fails when they last `transientFailureLimit`.
    private var lostFrames: UInt64 = 0
    /// When the frame in the pool's latest slot was captured.
    private var latestFramePTS: UInt64 = 0
    /// The handler's progress as last seen at the once-a-second check: bytes it had read and slots it
    /// had released, and since when each has not moved while it had something to read or hold.
    private var handlerProgress = (bytesSent: UInt64(0), readStalledSince: UInt64(0), releases: UInt64(0), releaseStalledSince: UInt64(0))
    static let transientFailureLimit: UInt64 = 2_000_000_000
    private var elapsedBefore: UInt64 = 0
    /// Where each stream's delivered samples end (pts + duration of the last one), this time live.
    private var deliveredUntil: [SampleType: UInt64] = [:]
    /// After a pause or finish, the audio captured before it that is still on its way.
    private var audioDrain: AudioDrain?
    /// The longest a pause or finish waits for audio captured before it: no later than `PipeWireAudioStream.silenceAfter`,
    /// when a stream that has sent nothing counts as silent anyway.
    static let audioDrainLimit: UInt64 = 200_000_000

    /// Audio reaches the handler later than the picture: a PipeWire capture stream hands on a buffer once the
    /// cycle it was captured in is over (a quantum, 21 to 43 ms by default, 170 ms at most), the synthetic source a
    /// chunk once it is complete. So that a recording's audio does not stop early at every pause and at the end,
    /// the handler hears of a pause or finish only once every stream's audio reaches the end of the last frame it
    /// was sent (or the pause, if later), a stream has gone silent, or `audioDrainLimit` has passed. Any other
    /// event ends the wait at once.
    private struct AudioDrain {
        let since: UInt64
        let until: UInt64
        var deadline: UInt64 { since + Daemon.audioDrainLimit }
        /// The handler's notifications of the step that ended capture, sent when the wait is over.
        var held: [BroadcastEffect] = []
    }

    /// Binds the socket after a look at the source: a budget that cannot hold its frames is refused here;
    /// a screen that cannot be opened now is only a warning (START says why, if it still cannot be opened then).
    public init(configuration: DaemonConfiguration, source: CaptureSource, logger: Logger) throws(DaemonError) {
        self.configuration = configuration
        self.source = source
        self.logger = logger
        registry = HandlerRegistry(directories: configuration.extraHandlerDirectories + HandlerRegistry.defaultDirectories())
        var plan: FramePoolPlan?
        switch source.choosesScreenAtStart ? .success(.waiting("")) : Self.open(source, budget: configuration.memoryBudget, waiting: true) {
        case .success(.planned(let opened)):
            source.close()
            plan = opened
        case .success(.waiting):
            logger.info("the screen is chosen in the desktop portal's share dialog when a broadcast starts")
        case .failure(let error) where error.code == .captureFailed:
            logger.warning("\(error.message); broadcasts cannot start until this is resolved")
        case .failure(let error):
            throw DaemonError("plan the frame pool", error.message)
        }
        do {
            // Signals are taken over before the socket appears: a SIGTERM that comes as soon as a client
            // sees the socket finishes cleanly (socket file removed) instead of killing the process.
            signals = try SignalDescriptor(signals: [Signals.terminate, Signals.interrupt, Signals.hangUp])
            if let activated = try Systemd.takeActivatedListener() {
                listener = activated
                socketPath = Systemd.boundPath(activated) ?? configuration.socketPath
                ownsSocketPath = false
                logger.info("socket activation: serving the socket systemd passed (\(socketPath)); --socket and BROADCASTD_SOCKET are not used")
            } else {
                if let slash = configuration.socketPath.lastIndex(of: "/"), slash != configuration.socketPath.startIndex {
                    try FileSystem.makeDirectories(String(configuration.socketPath[..<slash]), mode: 0o700)
                }
                listener = try UnixSocket.listen(path: configuration.socketPath)
                socketPath = configuration.socketPath
                ownsSocketPath = true
                logger.info("not socket-activated: bound \(socketPath) itself")
            }
            notifier = try SystemdNotifier()
            timer = try DeadlineTimer()
        } catch {
            throw DaemonError("start", error)
        }
        Signals.ignoreBrokenPipe()
        if let notifier {
            logger.debug("notifying systemd at \(notifier.destination)\(notifier.watchdogInterval.map { "; watchdog ping every \($0 / 1_000_000) ms" } ?? "")")
        }
        logger.info("listening on \(socketPath); source \(source.description); frame pool \(plan.map { "\($0)" } ?? "planned at start") within a budget of \(megabytes(configuration.memoryBudget))")
    }

    enum Opened {
        case planned(FramePoolPlan)
        /// The source waits, for the user or its first frame (`openAnswered` becomes readable when it is worth
        /// asking again): why.
        case waiting(String)
    }

    /// Opens `source` and plans the frame pool for its frames; the source is left closed when either fails.
    /// `waiting`: waits here while the source waits for its first frame (where no START can be kept pending).
    private static func open(_ source: CaptureSource, budget: Int, waiting: Bool = false) -> Result<Opened, BroadcastError> {
        let format: VideoFormat
        do { format = waiting ? try openWaiting(source) : try source.open() } catch {
            return error.pending ? .success(.waiting(error.reason)) : .failure(BroadcastError(.captureFailed, error.description))
        }
        do {
            return .success(.planned(try FramePoolPlan.plan(format: format, budgetBytes: budget, sourceBytes: source.mappedBytes,
                                                            daemonBytes: daemonBytes(poolBytes: 0))))
        } catch {
            source.close()
            return .failure(error)
        }
    }

    /// What the daemon needs besides the pool, measured: what it has resident now (its binary's pages,
    /// libraries, heap, stacks, the open source's buffers) but the pool it maps, and what a live broadcast adds.
    private static func daemonBytes(poolBytes: Int) -> Int {
        guard let resident = ProcessMemory.residentBytes() else { return FramePoolPlan.daemonOverhead }
        return resident - poolBytes + FramePoolPlan.broadcastReserve
    }

    /// `source.open()`, waiting here (blocking) while the source waits for its first frame: for broadcastd
    /// starting and a snapshot while idle. A source that asks the user still throws its pending error.
    private static func openWaiting(_ source: CaptureSource) throws(CaptureError) -> VideoFormat {
        while true {
            do { return try source.open() } catch {
                guard error.pending, !source.choosesScreenAtStart, let ready = source.openAnswered else { throw error }
                let now = MonotonicClock.now(), due = source.openRetryAt ?? now + 100_000_000
                _ = try? Poller.wait([(ready.raw, .readable)], timeoutMilliseconds: due > now ? Int32((due - now) / 1_000_000 + 1) : 0)
            }
        }
    }

    // MARK: - The loop

    /// Runs until SIGTERM or SIGINT; a live broadcast is finished first (a second signal stops at once).
    public func run() throws(DaemonError) {
        defer { if ownsSocketPath { FileSystem.remove(socketPath) } }
        // Ready means ready: the socket listens, the handler directories have been read, the loop starts now.
        let handlers = registry.load(logger: logger)
        logger.debug("\(handlers.count) handler(s) installed: \(handlers.map(\.manifest.name).joined(separator: ", "))")
        notify("READY=1")
        updateStatus()
        if let interval = notifier?.watchdogInterval {
            notify("WATCHDOG=1")
            nextWatchdogAt = MonotonicClock.now() + interval
        }
        while true {
            if shuttingDown && handler == nil && !isActive(machine.phase) && pendingStart == nil { break }
            do { try timer.arm(at: nextDeadline()) } catch { throw DaemonError("arm timer", error) }
            var entries: [(fd: Int32, interest: Poller.Interest)] = [
                (acceptPausedUntil == nil ? listener.raw : -1, .readable), (signals.descriptor.raw, .readable),
                (timer.descriptor.raw, .readable),
            ]
            let ids = Array(sessions.keys)
            // A peer whose messages wait in its decoder is served again at once, after everything else.
            var backlog = false
            for id in ids {
                let s = sessions[id]!
                var interest: Poller.Interest = []
                if s.wantsRead { interest.insert(.readable) }
                if s.wantsWrite { interest.insert(.writable) }
                entries.append((s.socket.raw, interest))
                backlog = backlog || (s.wantsRead && s.hasBacklog)
            }
            let handlerIndex = entries.count
            if let handler { entries.append((handler.process.pidDescriptor.raw, .readable)) }
            let answeredIndex = entries.count
            if pendingStart != nil, let answered = source.openAnswered { entries.append((answered.raw, .readable)) }
            let audioIndex = entries.count
            let audioArrival = nextAudioAt == nil ? nil : source.audioArrival
            if let audioArrival { entries.append((audioArrival.descriptor.raw, .readable)) }
            let events: [Poller.Event]
            do { events = try Poller.wait(entries, timeoutMilliseconds: backlog ? 0 : -1) } catch { throw DaemonError("poll", error) }

            if events[1].readable, try handleSignals() { break }
            if events[0].readable { acceptPeers() }
            for (i, id) in ids.enumerated() {
                let e = events[3 + i]
                guard let session = sessions[id] else { continue }
                if session.wantsRead && (e.readable || e.closed || session.hasBacklog) {
                    read(session)
                } else if e.closed {
                    session.closeReason = "" // it hung up without reading what it asked for
                }
                if e.writable { session.flush() }
            }
            if handler != nil && events.count > handlerIndex && events[handlerIndex].readable { reapHandler() }
            if pendingStart != nil && events.count > answeredIndex && events[answeredIndex].readable { startAnswered() }
            if let audioArrival, events[audioIndex].readable {
                audioArrival.acknowledge()
                captureAudio(now: MonotonicClock.now())
            }
            if events[2].readable { timer.acknowledge() }
            runDueWork(now: MonotonicClock.now())
            closeFinishedSessions()
        }
        for session in sessions.values { session.socket.close() }
        sessions.removeAll()
        logger.info("stopped")
    }

    private func nextDeadline() -> UInt64? {
        var candidates = [nextFrameAt, nextAudioAt, nextServiceInfoAt, startDeadline, handler?.terminateAt, handler?.killAt, nextWatchdogAt,
                          pendingStart == nil ? nil : source.openRetryAt, acceptPausedUntil]
        candidates += sessions.values.map(\.deadline)
        if let liveSince, let max = machine.current?.maxDuration {
            candidates.append(liveSince + (max > elapsedBefore ? max - elapsedBefore : 0))
        }
        return candidates.compactMap { $0 }.min()
    }

    private func runDueWork(now: UInt64) {
        // Pinged from the loop's own timer: a loop that is stuck stops pinging, and systemd restarts it.
        if let at = nextWatchdogAt, now >= at, let interval = notifier?.watchdogInterval {
            notify("WATCHDOG=1")
            nextWatchdogAt = now + interval
        }
        if let at = nextFrameAt, now >= at { captureVideo(now: now) }
        if let at = nextAudioAt, now >= at { captureAudio(now: now) }
        if let at = acceptPausedUntil, now >= at { acceptPausedUntil = nil }
        for session in sessions.values where !session.isClosing {
            if let reason = session.overdue(now: now) { protocolViolation(session, reason) }
        }
        if let at = nextServiceInfoAt, now >= at {
            nextServiceInfoAt = now + configuration.serviceInfoInterval
            publishServiceInfo(now: now)
            updateStatus(now: now)
            checkHandlerProgress(now: now)
        }
        if pendingStart != nil, let at = source.openRetryAt, now >= at { startAnswered() }
        if let at = startDeadline, now >= at {
            startDeadline = nil
            transition(.fail(BroadcastError(.handlerFailed,
                "handler '\(manifest?.name ?? "?")' did not become ready within \(configuration.startTimeout / 1_000_000_000) s")))
        }
        if let liveSince, let max = machine.current?.maxDuration, now - liveSince + elapsedBefore >= max {
            logger.info("broadcast \(machine.current!.id) reached its maximum duration")
            transition(.finish)
        }
        if let handler, let at = handler.terminateAt, now >= at {
            logger.warning("handler '\(handler.manifest.name)' did not exit in time; sending SIGTERM")
            if machine.phase == .finishing && handler.sessionID != nil {
                handler.stopReason = BroadcastError(.handlerFailed,
                    "handler '\(handler.manifest.name)' did not finish within \(configuration.finishTimeout / 1_000_000_000) s and was stopped")
            }
            handler.terminate(now: now)
        }
        if let handler, let at = handler.killAt, now >= at {
            logger.warning("handler '\(handler.manifest.name)' ignored SIGTERM; sending SIGKILL")
            handler.kill()
        }
    }

    /// A live handler that has stopped reading, or holds slots and releases none, for `hangTimeout`
    /// has hung: the broadcast finishes with an error that says so (and the handler is then stopped).
    private func checkHandlerProgress(now: UInt64) {
        guard machine.phase == .live || machine.phase == .paused, let session = handlerSession(), let pool else { return }
        // A clock runs only while there is something to read (or a slot held) and nothing moves.
        if session.bytesSent != handlerProgress.bytesSent || !session.wantsWrite {
            (handlerProgress.bytesSent, handlerProgress.readStalledSince) = (session.bytesSent, now)
        }
        if pool.releases != handlerProgress.releases || !pool.holdsAny(session.id) {
            (handlerProgress.releases, handlerProgress.releaseStalledSince) = (pool.releases, now)
        }
        let limit = configuration.hangTimeout
        let seconds = limit / 1_000_000_000
        let name = manifest?.name ?? "?"
        if now - handlerProgress.readStalledSince > limit {
            transition(.fail(BroadcastError(.handlerFailed, "handler '\(name)' hung: it has read nothing broadcastd sent it for \(seconds) s")))
        } else if now - handlerProgress.releaseStalledSince > limit {
            transition(.fail(BroadcastError(.handlerFailed, "handler '\(name)' hung: it has held frame slots without releasing any for \(seconds) s")))
        }
    }

    private func handleSignals() throws(DaemonError) -> Bool {
        while let signal = signals.next() {
            if shuttingDown {
                logger.warning("second signal \(signal): stopping now")
                handler?.kill()
                return true
            }
            logger.info("signal \(signal): shutting down")
            shuttingDown = true
            notify("STOPPING=1")
            updateStatus()
            if isActive(machine.phase) && machine.phase != .finishing {
                transition(.fail(BroadcastError(.shutdown, "broadcastd was stopped")))
            }
            if pendingStart != nil { source.cancelOpen("broadcastd was stopped") }
        }
        return false
    }

    // MARK: - Peers

    /// Most controllers and setup UIs connected at once; each may hold `PeerSession.peerQueueLimit`.
    static let maxPeers = 64

    private func acceptPeers() {
        while true {
            let socket: Descriptor?
            do { socket = try UnixSocket.accept(listener) } catch {
                // Out of descriptors (or kernel memory): the connection waits in the backlog, and the
                // listener with it, for a quarter of a second, so that the loop does not spin on it.
                let now = MonotonicClock.now()
                acceptPausedUntil = now + 250_000_000
                if let text = acceptWarnings.pass("accept failed: \(error); not accepting connections for 0.25 s", now: now) {
                    logger.warning("\(text)")
                }
                return
            }
            guard let socket else { return }
            // The socket's 0600 mode and 0700 folder keep other users out; this check holds even when
            // those were loosened (a socket passed by systemd, a path chosen with --socket).
            do {
                let peer = try UnixSocket.peer(socket)
                guard peer.uid == UnixSocket.ownUser else {
                    refused("refused a connection from pid \(peer.pid), user \(peer.uid): only user \(UnixSocket.ownUser), whom broadcastd runs as, may connect")
                    continue
                }
            } catch {
                refused("refused a connection whose peer cannot be identified: \(error)")
                continue
            }
            guard sessions.values.count(where: { !$0.isLaunchedHandler }) < Self.maxPeers else {
                let refusal = BroadcastError(.busy, "broadcastd already has \(Self.maxPeers) connections; close some and try again")
                _ = try? UnixSocket.send(socket, Message.json(.error, seq: 0, refusal).encoded(), from: 0)
                // What it sent already is read first: closing over unread bytes would reset the connection, refusal and all.
                _ = try? UnixSocket.receive(socket, into: &readBuffer)
                refused("refused a connection: \(Self.maxPeers) peers are connected already")
                continue
            }
            addSession(socket)
        }
    }

    private func refused(_ text: @autoclosure () -> String) {
        if let line = refusalWarnings.pass(text(), now: MonotonicClock.now()) { logger.warning("\(line)") }
    }

    @discardableResult
    private func addSession(_ socket: Descriptor, isLaunchedHandler: Bool = false) -> PeerSession {
        let session = PeerSession(id: nextSessionID, socket: socket, isLaunchedHandler: isLaunchedHandler, now: MonotonicClock.now())
        nextSessionID += 1
        sessions[session.id] = session
        logger.debug("\(session.name) connected")
        return session
    }

    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    /// Most messages taken from one peer per turn of the loop, so a peer that floods cannot make
    /// capture late: the rest wait in its decoder (and its socket) for the next turn.
    static let messagesPerTurn = 64

    private func read(_ session: PeerSession) {
        defer { notePartialInput(session) }
        session.hasBacklog = false
        var handled = 0
        for _ in 0..<16 where !session.isClosing {
            do {
                while !session.isClosing, let message = try session.decoder.next() {
                    dispatch(message, from: session)
                    handled += 1
                    if handled == Self.messagesPerTurn {
                        session.hasBacklog = true
                        return
                    }
                }
            } catch {
                protocolViolation(session, error.description)
                return
            }
            let received: UnixSocket.Received?
            do { received = try UnixSocket.receive(session.socket, into: &readBuffer) } catch {
                session.closeReason = error.isDisconnect ? "" : "receive failed: \(error)"
                return
            }
            guard let received else { return }
            if received.count == 0 {
                session.closeReason = session.decoder.pendingByteCount > 0 ? "it closed the connection in the middle of a message" : ""
                return
            }
            if received.descriptorsTruncated {
                protocolViolation(session, "it sent more than \(UnixSocket.maxDescriptorsPerMessage) descriptors at once")
                return
            }
            session.decoder.append(descriptors: received.descriptors)
            readBuffer.withUnsafeBytes { session.decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<received.count])) }
        }
        session.hasBacklog = !session.isClosing
    }

    /// Keeps the time a peer's unfinished message has waited, and closes a controller or setup UI whose
    /// unfinished message takes the unfinished input of all of them past `PeerSession.partialInputLimit`.
    private func notePartialInput(_ session: PeerSession) {
        let pending = session.decoder.pendingByteCount
        session.partialSince = pending == 0 ? nil : session.partialSince ?? MonotonicClock.now()
        guard !session.isLaunchedHandler, pending > 0, !session.isClosing else { return }
        let total = sessions.values.reduce(0) { $0 + ($1.isLaunchedHandler ? 0 : $1.decoder.pendingByteCount) }
        if total > PeerSession.partialInputLimit {
            protocolViolation(session, "its unfinished message (\(pending) bytes so far) takes the unfinished input of all peers past " +
                              "\(PeerSession.partialInputLimit >> 20) MiB")
        }
    }

    /// Closes a peer that broke the protocol; everything else carries on.
    private func protocolViolation(_ session: PeerSession, _ reason: String, seq: UInt32 = 0) {
        session.enqueue(.json(.error, seq: seq, BroadcastError(.protocolError, reason)))
        session.flush()
        session.closeReason = reason
    }

    private func closeFinishedSessions() {
        for session in sessions.values where session.isClosing {
            if let reason = session.closeReason, !reason.isEmpty {
                logger.warning("closing \(session.name): \(reason)")
            } else {
                logger.debug("\(session.name) disconnected")
            }
            sessions[session.id] = nil
            session.socket.close()
            session.decoder.closeDescriptors()
            sessionClosed(session)
        }
    }

    private func sessionClosed(_ session: PeerSession) {
        if let handler, handler.sessionID == session.id {
            handler.sessionID = nil
            pool?.releaseAll(heldBy: session.id)
            // A handler without its connection can do nothing more; give it a moment to exit by itself.
            if handler.terminateAt == nil && handler.killAt == nil {
                handler.terminateAt = MonotonicClock.now() + 2_000_000_000
            }
            if let reason = session.closeReason, !reason.isEmpty, isActive(machine.phase), machine.phase != .finishing {
                transition(.fail(BroadcastError(.handlerFailed, "handler '\(handler.manifest.name)' was disconnected: \(reason)")))
            }
        }
        if pendingStart?.sessionID == session.id {
            source.cancelOpen("the controller that asked for the broadcast went away")
        }
        if let broadcast = session.setupFor, machine.phase == .awaitingSetup, machine.current?.id == broadcast {
            transition(.setupCancelled(BroadcastError(.setupCancelled, "the setup UI went away without completing the request")))
        }
    }

    // MARK: - Messages

    private func dispatch(_ message: Message, from session: PeerSession) {
        // Peers never send descriptors (docs/protocol.md §4): whatever came is closed with the message.
        guard message.descriptors.isEmpty else {
            protocolViolation(session, "\(message.opcode) came with \(message.descriptors.count) descriptor(s); peers send none", seq: message.seq)
            return
        }
        guard let role = session.role else {
            hello(message, from: session)
            return
        }
        do {
            switch (role, message.opcode) {
            case (.controller, _): try controllerRequest(message, from: session)
            case (.setup, _): try setupRequest(message, from: session)
            case (.handler, _): try handlerMessage(message, from: session)
            }
        } catch {
            protocolViolation(session, error.description, seq: message.seq)
        }
    }

    private func hello(_ message: Message, from session: PeerSession) {
        guard message.opcode == .hello else {
            protocolViolation(session, "it sent \(message.opcode.name) before HELLO", seq: message.seq)
            return
        }
        let hello: Hello
        do { hello = try message.decode(Hello.self) } catch {
            protocolViolation(session, error.description, seq: message.seq)
            return
        }
        session.client = hello.client ?? "?"
        guard hello.protocol == ProtocolLimits.version else {
            let text = "protocol version mismatch: broadcastd speaks version \(ProtocolLimits.version), \(session.client) speaks version \(hello.protocol)"
            session.enqueue(.json(.error, seq: message.seq, BroadcastError(.versionMismatch, text)))
            session.flush()
            session.closeReason = text
            return
        }
        if (hello.role == .handler) != session.isLaunchedHandler {
            protocolViolation(session, hello.role == .handler
                ? "handlers are launched by broadcastd and talk over the socket it passes them (BROADCASTD_HANDLER_FD); attaching over the listening socket is not supported"
                : "the handler connection may only say HELLO as a handler", seq: message.seq)
            return
        }
        session.role = hello.role
        session.enqueue(.json(.welcome, seq: message.seq, Welcome(server: configuration.serverName)))
        if hello.role == .handler { handlerConnected(session) }
        session.flush()
    }

    private func reply(_ session: PeerSession, _ seq: UInt32, _ result: Result<Message, BroadcastError>) {
        switch result {
        case .success(let message): session.enqueue(message)
        case .failure(let error): session.enqueue(.json(.error, seq: seq, error))
        }
        session.flush()
    }

    private func controllerRequest(_ message: Message, from session: PeerSession) throws(ProtocolError) {
        let seq = message.seq
        switch message.opcode {
        case .listHandlers:
            reply(session, seq, .success(.json(.handlers, seq: seq, HandlerList(handlers: registry.load(logger: logger).map(\.manifest)))))
        case .start:
            answerStart((session.id, seq, try message.decode(StartRequest.self)))
        case .finish where pendingStart != nil:
            source.cancelOpen("the broadcast was finished before the screen was chosen")
            reply(session, seq, .success(.json(.ok, seq: seq, BroadcastReference(broadcast: nil))))
        case .pause, .resume:
            let event: BroadcastEvent = message.opcode == .pause ? .pause : .resume
            reply(session, seq, transition(event).map { _ in .json(.ok, seq: seq, BroadcastReference(broadcast: machine.current?.id)) })
        case .finish:
            let request = try message.decode(FinishRequest.self)
            let event = DiscardedOutput.event(for: request, current: machine.current?.id, manifest: manifest)
            reply(session, seq, event.flatMap(transition).map { _ in .json(.ok, seq: seq, BroadcastReference(broadcast: machine.current?.id)) })
        case .getStatus:
            reply(session, seq, .success(.json(.status, seq: seq, status())))
        case .listSources:
            reply(session, seq, sourceList().map { .json(.sources, seq: seq, $0) })
        case .getSnapshot:
            let result = snapshot(for: session, now: MonotonicClock.now())
            if case .success(let snapshot) = result { session.snapshotBytes = snapshot.description.video.frameSize }
            reply(session, seq, result.map { .json(.snapshot, seq: seq, $0.description, descriptors: [$0.frame]) })
        case .subscribe:
            session.subscribed = true
            reply(session, seq, .success(.json(.ok, seq: seq, Empty())))
            session.enqueue(.json(.stateChanged, status()))
            session.flush()
        default:
            throw .unexpected(message.opcode, "not a controller request")
        }
    }

    /// The new broadcast's id, or nil when the source is waiting for the user (the START is then answered by `startAnswered`).
    private func start(_ request: StartRequest) -> Result<UInt32?, BroadcastError> {
        if shuttingDown { return .failure(BroadcastError(.shutdown, "broadcastd is shutting down")) }
        if pendingStart != nil {
            return .failure(BroadcastError(.busy, "another broadcast is being requested: the screen is \(pendingReason)"))
        }
        let entries = registry.load(logger: logger)
        guard let entry = entries.first(where: { $0.manifest.name == request.handler }) else {
            let names = entries.map(\.manifest.name)
            return .failure(BroadcastError(.unknownHandler, "no handler named '\(request.handler)'; " +
                (names.isEmpty ? "none are installed (looked in \(registry.directories.joined(separator: ", ")))" : "installed: \(names.joined(separator: ", "))")))
        }
        if let max = request.maxDuration, !(max > 0 && max < 1e9) {
            return .failure(BroadcastError(.invalidRequest, "maxDuration must be a positive number of seconds"))
        }
        if !isActive(machine.phase) {
            // Opened now, so that a screen that cannot be captured refuses the broadcast before it starts.
            switch Self.open(source, budget: configuration.memoryBudget) {
            case .success(.waiting(let why)):
                pendingReason = why
                return .success(nil)
            case .success(.planned(let plan)): poolPlan = plan
            case .failure(let error): return .failure(error)
            }
        }
        let id = nextBroadcastID
        let description = BroadcastDescription(id: id, handler: entry.manifest.name, maxDuration: request.maxDuration.map { UInt64($0 * 1e9) })
        return transition(.start(description)).map { _ in
            nextBroadcastID += 1
            handlerEntry = entry
            setupInfo = [:]
            handlerServiceInfo = nil
            handlerResult = nil
            logger.info("broadcast \(id) requested with handler '\(entry.manifest.name)'; waiting for setup")
            return id
        }
    }

    /// Answers a START, or keeps it pending while the source waits for the user; then `startAnswered`
    /// tries again when the source has its answer (the share dialog was answered, cancelled or withdrawn).
    private func answerStart(_ request: (sessionID: Int, seq: UInt32, request: StartRequest)) {
        let result = start(request.request)
        if case .success(nil) = result {
            if pendingStart == nil { logger.info("broadcast requested with handler '\(request.request.handler)'; the screen is \(pendingReason)") }
            pendingStart = request
        } else if let session = sessions[request.sessionID] {
            reply(session, request.seq, result.map { .json(.ok, seq: request.seq, BroadcastReference(broadcast: $0)) })
        }
        updateStatus()
    }

    private func startAnswered() {
        guard let pending = pendingStart else { return }
        pendingStart = nil
        answerStart(pending)
    }

    private func setupRequest(_ message: Message, from session: PeerSession) throws(ProtocolError) {
        let seq = message.seq
        func pending(_ id: UInt32?) -> BroadcastError? {
            guard machine.phase == .awaitingSetup, let current = machine.current else {
                return BroadcastError(.noBroadcast, "no broadcast is waiting for setup")
            }
            if let id, id != current.id { return BroadcastError(.invalidRequest, "broadcast \(id) is not the one waiting for setup (\(current.id) is)") }
            return nil
        }
        switch message.opcode {
        case .getSetupRequest:
            let id = try message.decode(BroadcastReference.self).broadcast
            if let error = pending(id) { return reply(session, seq, .failure(error)) }
            session.setupFor = machine.current!.id
            reply(session, seq, .success(.json(.setupRequest, seq: seq, SetupRequest(broadcast: machine.current!.id, handler: manifest!))))
        case .completeSetup:
            let completion = try message.decode(SetupCompletion.self)
            if let error = pending(completion.broadcast) { return reply(session, seq, .failure(error)) }
            let validated: (url: String?, setupInfo: [String: String])
            do { validated = try manifest!.validate(url: completion.url, setupInfo: completion.setupInfo) } catch {
                return reply(session, seq, .failure(error))
            }
            setupInfo = validated.setupInfo
            session.setupFor = nil
            logger.info("broadcast \(completion.broadcast) set up\(validated.url.map { " with URL \(redactedURL($0))" } ?? "")")
            reply(session, seq, transition(.setupCompleted(url: validated.url)).map { _ in .json(.ok, seq: seq, Empty()) })
        case .cancelSetup:
            let cancellation = try message.decode(SetupCancellation.self)
            if let error = pending(cancellation.broadcast) { return reply(session, seq, .failure(error)) }
            session.setupFor = nil
            let reason = BroadcastError(.setupCancelled, "setup was cancelled: \(cancellation.error.message)")
            reply(session, seq, transition(.setupCancelled(reason)).map { _ in .json(.ok, seq: seq, Empty()) })
        default:
            throw .unexpected(message.opcode, "not a setup request")
        }
    }

    private func handlerMessage(_ message: Message, from session: PeerSession) throws(ProtocolError) {
        guard let handler, handler.sessionID == session.id else { throw .unexpected(message.opcode, "this handler's broadcast is over") }
        switch message.opcode {
        case .releaseSlot:
            let release = try SlotRelease(decoding: message.payload)
            if retiredPools.contains(release.pool) { break }
            guard let pool, release.pool == pool.id, pool.release(Int(release.slot), by: session.id) else {
                throw .malformed(.releaseSlot, "slot \(release.slot) of pool \(release.pool) is not held by this handler")
            }
        case .ready:
            guard !handler.ready else { throw .unexpected(.ready, "READY was already sent") }
            handler.ready = true
            startDeadline = nil
            transition(.handlerReady)
        case .finishWithError:
            let error = try message.decode(HandlerFailure.self)
            logger.info("handler '\(handler.manifest.name)' finished the broadcast with an error: \(error.message)\(error.code.map { " (code \($0))" } ?? "")")
            transition(.fail(BroadcastError(.handlerError, "handler '\(handler.manifest.name)' finished the broadcast: \(error.message)")))
        case .updateURL:
            let update = try message.decode(URLUpdate.self)
            if let problem = HandlerManifest.urlProblem(update.url) { throw .malformed(.updateURL, "the URL is refused: \(problem)") }
            machine.setURL(update.url)
            publish(.json(.urlUpdated, URLUpdate(broadcast: machine.current?.id, url: update.url)))
        case .updateServiceInfo:
            let info = try HandlerServiceInfo.decodeWithinLimits(message)
            // Encoded once here, not with every SERVICE_INFO.
            let encoded = info.isEmpty ? nil : Array(compactJSON(info).utf8)
            // Revision 1.2: a finishing handler reporting progress (an upload's) has its finish timeout counted anew;
            // the same info again is no progress.
            if machine.phase == .finishing, encoded != handlerServiceInfo {
                handler.reported(now: MonotonicClock.now(), finishTimeout: configuration.finishTimeout)
            }
            handlerServiceInfo = encoded
        case .setResult:
            guard message.payload.count <= ProtocolLimits.maxResultPayload else {
                throw .malformed(.setResult, "a result of \(message.payload.count) bytes exceeds the limit of \(ProtocolLimits.maxResultPayload)")
            }
            handlerResult = try message.decode(HandlerResult.self).result
            logger.debug("handler '\(handler.manifest.name)' reported a result: \(handlerResult!.keys.sorted().joined(separator: ", "))")
        default:
            throw .unexpected(message.opcode, "not a handler message")
        }
    }

    // MARK: - State

    private var transitioning = false
    private var followUps: [BroadcastEvent] = []

    /// Feeds `event` to the state machine and carries out what it asks; refusals come back as errors.
    /// Events raised while carrying out a transition (a launch that fails, say) follow it, in order.
    @discardableResult
    private func transition(_ event: BroadcastEvent) -> Result<Void, BroadcastError> {
        if transitioning {
            followUps.append(event)
            return .success(())
        }
        transitioning = true
        defer { transitioning = false }
        let result = step(event)
        while !followUps.isEmpty {
            if case .failure(let refusal) = step(followUps.removeFirst()) { logger.debug("follow-up refused: \(refusal)") }
        }
        return result
    }

    private func step(_ event: BroadcastEvent) -> Result<Void, BroadcastError> {
        endAudioDrain()
        let before = machine.phase
        let effects: [BroadcastEffect]
        do { effects = try machine.handle(event) } catch { return .failure(error) }
        let now = MonotonicClock.now()
        if before != .live && machine.phase == .live { beginCapture(now: now) }
        if before == .live && machine.phase != .live { endCapture(now: now, drainingAudio: event == .pause || event == .finish) }
        for effect in effects { apply(effect, now: now) }
        if before != machine.phase {
            logger.info("broadcast \(machine.current.map { String($0.id) } ?? "-"): \(before) → \(machine.phase)")
            publish(.json(.stateChanged, status()))
            updateStatus(now: now)
        }
        return .success(())
    }

    private func apply(_ effect: BroadcastEffect, now: UInt64) {
        if audioDrain != nil {
            audioDrain!.held.append(effect)
            return
        }
        switch effect {
        case .awaitSetup:
            break
        case .launchHandler:
            launchHandler(now: now)
        case .notifyHandlerPaused:
            sendToHandler(.json(.broadcastPaused, Empty()))
        case .notifyHandlerResumed:
            sendToHandler(.json(.broadcastResumed, Empty()))
        case .notifyHandlerFinished:
            startDeadline = nil
            guard let handler else {
                transition(.handlerExited(nil)) // none was started: nothing to wait for
                return
            }
            if handlerSession()?.role == .handler { // it said HELLO and was sent BROADCAST_STARTED
                sendToHandler(.json(.broadcastFinished, BroadcastEnd(error: machine.error, discard: machine.discarded ? true : nil)))
                handler.terminateAt = now + configuration.finishTimeout
                handler.workDeadline = now + RunningHandler.maxFinishWork
            } else {
                handler.stoppedBeforeStart = true
                handler.terminate(now: now)
            }
        case .finished(let error):
            pool = nil
            retiredPools = []
            source.close()
            nextServiceInfoAt = nil
            startDeadline = nil
            if let error { logger.warning("broadcast \(machine.current!.id) finished with an error: \(error.message)") }
            else { logger.info("broadcast \(machine.current!.id) finished") }
            publishServiceInfo(now: now)
            if machine.discarded { DiscardedOutput.remove(result: handlerResult, logger: logger) }
            publish(.json(.finished, FinishedEvent(broadcast: machine.current!.id, error: error, result: handlerResult,
                                                   discarded: machine.discarded ? true : nil)))
        case .discardFinished:
            DiscardedOutput.remove(result: handlerResult, logger: logger)
            publish(.json(.stateChanged, status()))
        }
    }

    private func sendToHandler(_ message: Message, droppable: Bool = false) {
        guard let id = handler?.sessionID, let session = sessions[id] else { return }
        session.enqueue(message, droppable: droppable)
        session.flush()
    }

    private func publish(_ message: Message) {
        for session in sessions.values where session.subscribed {
            session.enqueue(message)
            session.flush()
        }
    }

    func status() -> BroadcastStatus {
        var s = BroadcastStatus(state: machine.phase, source: source.description)
        s.video = source.videoFormat
        s.audio = source.audioFormat
        s.daemonMemory = ProcessMemory.residentBytes()
        if let current = machine.current {
            s.broadcast = current.id
            s.handler = current.handler
            s.url = current.url
            s.maxDuration = current.maxDuration.map { Double($0) / 1e9 }
            s.elapsed = Double(elapsed(now: MonotonicClock.now())) / 1e9
            s.wantsPaused = machine.wantsPaused
            s.error = machine.error
            s.streams = Dictionary(uniqueKeysWithValues: SampleType.allCases.map { ($0.description, counters[$0] ?? StreamCounters()) })
            s.capture = source.statistics
            let silent = source.silentAudio
            if !silent.isEmpty { s.silentAudio = Dictionary(uniqueKeysWithValues: silent.map { ($0.key.description, $0.value) }) }
            if machine.phase == .finished { s.result = handlerResult }
            if machine.discarded { s.discarded = true }
        }
        return s
    }

    private func sourceList() -> Result<SourceList, BroadcastError> {
        do {
            let list = try source.outputs()
            return .success(SourceList(kind: list.kind, source: source.description, screenWidth: list.screen?.width, screenHeight: list.screen?.height,
                                       outputs: list.outputs.map {
                                           OutputDescription(name: $0.name, x: $0.rect.x, y: $0.rect.y, width: $0.rect.width, height: $0.rect.height,
                                                             rotation: $0.rotation, reflected: $0.reflected, primary: $0.primary)
                                       }))
        } catch {
            return .failure(BroadcastError(.captureFailed, error.description))
        }
    }

    /// A copy of the current frame in a memfd of its own: the latest frame of a running broadcast, or, when
    /// there is none (idle, setting up, not yet captured), one grabbed now. The latest frame is copied
    /// without mapping the copy, so it costs the daemon no resident memory; every copy lives until the
    /// controller closes it, so a connection gets one while the last it was sent is unread, and all the
    /// unread ones together stay within what the memory budget leaves beside the pool (one frame at least).
    private func snapshot(for session: PeerSession, now: UInt64) -> Result<(description: SnapshotDescription, frame: Descriptor), BroadcastError> {
        if session.snapshotUnread() {
            return .failure(BroadcastError(.busy, "the last snapshot sent on this connection has not been read yet; read it first"))
        }
        let format = source.videoFormat
        let unread = sessions.values.filter { $0.snapshotUnread() }
        let planned = Self.daemonBytes(poolBytes: 0) + source.mappedBytes
        let bytes = unread.reduce(0) { $0 + $1.snapshotBytes }
        if bytes > 0, bytes + format.frameByteCount > max(format.frameByteCount, configuration.memoryBudget - planned) {
            return .failure(BroadcastError(.busy, "\(unread.count) snapshot(s) of \(megabytes(bytes)) sent to other connections " +
                                           "are not read yet, and another would not fit the memory budget; try again once they are"))
        }
        if let pool, let latest = pool.latest, liveSince != nil || machine.phase == .paused {
            let description = SnapshotDescription(video: VideoDescription(format), colorRange: source.colorRange.rawValue,
                                                  presentationTime: latestFramePTS, broadcast: machine.current?.id)
            do {
                let frame = try SharedMemory.sealedCopy(name: "broadcastd-snapshot",
                                                        of: UnsafeRawBufferPointer(start: pool.pointer(latest), count: format.frameByteCount))
                return .success((description, frame))
            } catch {
                return .failure(BroadcastError(.budget, "cannot copy the frame for the snapshot: \(error)"))
            }
        }
        let wasOpen = isActive(machine.phase)
        if !wasOpen && source.choosesScreenAtStart {
            return .failure(BroadcastError(.captureFailed, "the screen is shared through the desktop portal only while a broadcast runs; start one first"))
        }
        if !wasOpen {
            do { _ = try Self.openWaiting(source) } catch { return .failure(BroadcastError(.captureFailed, error.description)) }
        }
        defer { if !wasOpen { source.close() } }
        let running = liveSince != nil
        do { if !running { try source.begin(at: now) } } catch { return .failure(BroadcastError(.captureFailed, error.description)) }
        defer { if !running { source.end() } }
        let grabbed = source.videoFormat
        do {
            let memory = try SharedMemory(name: "broadcastd-snapshot", size: grabbed.frameByteCount, sealed: true)
            let pts = try source.captureFrame(index: 0, deadline: now, into: memory.base, previous: nil)
            let description = SnapshotDescription(video: VideoDescription(grabbed), colorRange: source.colorRange.rawValue,
                                                  presentationTime: pts, broadcast: nil)
            return .success((description, try memory.readOnlyDescriptor()))
        } catch let error as CaptureError {
            return .failure(BroadcastError(.captureFailed, error.description))
        } catch {
            return .failure(BroadcastError(.budget, "cannot allocate \(megabytes(grabbed.frameByteCount)) for the snapshot: \(error)"))
        }
    }

    private func elapsed(now: UInt64) -> UInt64 {
        elapsedBefore + (liveSince.map { now - $0 } ?? 0)
    }

    private func publishServiceInfo(now: UInt64) {
        guard let current = machine.current, sessions.values.contains(where: \.subscribed) else { return }
        let info = ServiceInfo(broadcast: current.id, elapsed: Double(elapsed(now: now)) / 1e9,
                               streams: Dictionary(uniqueKeysWithValues: SampleType.allCases.map { ($0.description, counters[$0] ?? StreamCounters()) }),
                               handler: nil, daemonMemory: ProcessMemory.residentBytes())
        publish(info.message(handlerJSON: handlerServiceInfo))
    }

    // MARK: - systemd

    /// Whether a notification failed already: said once, not at every watchdog ping.
    private var notifyFailed = false

    private func notify(_ state: String) {
        guard let notifier else { return }
        do { try notifier.send(state) } catch {
            if !notifyFailed { logger.warning("could not notify systemd (\(state)): \(error)") }
            notifyFailed = true
        }
    }

    /// Sends STATUS= (what `systemctl --user status broadcastd` shows) when it changed.
    private func updateStatus(now: UInt64 = MonotonicClock.now()) {
        guard notifier != nil else { return }
        let text = statusLine(now: now)
        guard text != lastStatus else { return }
        lastStatus = text
        notify("STATUS=" + text)
    }

    /// One line: "idle", "live: broadcast 3 to record, 00:12:03", "paused: ...", "stopping".
    func statusLine(now: UInt64) -> String {
        if shuttingDown { return isActive(machine.phase) ? "stopping: finishing broadcast \(machine.current?.id ?? 0)" : "stopping" }
        if let pending = pendingStart { return "requested: a broadcast to \(pending.request.handler); the screen is \(pendingReason)" }
        guard let current = machine.current else { return "idle" }
        let seconds = elapsed(now: now) / 1_000_000_000
        let clock = [seconds / 3600, seconds / 60 % 60, seconds % 60].map { $0 < 10 ? "0\($0)" : "\($0)" }.joined(separator: ":")
        let what = "broadcast \(current.id) to \(current.handler)"
        switch machine.phase {
        case .idle: return "idle"
        case .awaitingSetup: return "waiting for setup: \(what)"
        case .starting: return "starting: \(what)"
        case .live: return "live: \(what), \(clock)"
        case .paused: return "paused: \(what), \(clock)"
        case .finishing: return "finishing: \(what), \(clock)"
        case .finished: return machine.error.map { "idle; \(what) failed: \($0.message)" } ?? "idle; \(what) finished, \(clock)"
        }
    }

    private func isActive(_ phase: BroadcastPhase) -> Bool {
        phase != .idle && phase != .finished
    }

    // MARK: - Handler process

    private func launchHandler(now: UInt64) {
        guard let entry = handlerEntry else { return }
        let manifest = entry.manifest
        guard let path = HandlerRegistry.resolveExecutable(entry) else {
            transition(.fail(BroadcastError(.handlerFailed, "handler '\(manifest.name)': cannot find its program '\(manifest.exec)' (is it installed and executable?)")))
            return
        }
        counters = [:]
        sequences = [:]
        elapsedBefore = 0
        guard let poolPlan, makePool(poolPlan) else { return }
        do {
            let (ours, theirs) = try UnixSocket.pair()
            try ours.setNonBlocking()
            var environment = Environment.all
            environment["BROADCASTD_HANDLER_FD"] = "3"
            environment["BROADCASTD_SOCKET"] = socketPath
            let process = try ChildProcess(path: path, arguments: entry.manifest.arguments ?? [], environment: environment, passing: [(theirs, 3)])
            theirs.close()
            let running = RunningHandler(process: process, manifest: entry.manifest)
            running.sessionID = addSession(ours, isLaunchedHandler: true).id
            handler = running
            startDeadline = now + configuration.startTimeout
            logger.info("launched handler '\(manifest.name)' (\(path), pid \(process.pid))")
        } catch {
            transition(.fail(BroadcastError(.handlerFailed, "handler '\(manifest.name)': could not start \(path): \(error)")))
        }
    }

    /// Creates the frame pool; on failure the broadcast fails and false comes back.
    private func makePool(_ plan: FramePoolPlan) -> Bool {
        do {
            pool = try FramePool(id: nextPoolID, plan: plan)
            nextPoolID += 1
            return true
        } catch {
            transition(.fail(BroadcastError(.budget, "cannot allocate the frame pool (\(plan)): \(error)")))
            return false
        }
    }

    private func announcePool(to session: PeerSession) {
        guard let pool else { return }
        session.enqueue(.json(.pool, PoolAnnouncement(pool: pool.id, slots: pool.plan.slotCount, slotSize: pool.plan.slotSize),
                              descriptors: [pool.handlerDescriptor]))
    }

    private func handlerConnected(_ session: PeerSession) {
        guard let handler, let current = machine.current, pool != nil else { return }
        announcePool(to: session)
        session.enqueue(.json(.broadcastStarted, BroadcastStart(broadcast: current.id, url: current.url, setupInfo: setupInfo,
                                                                video: VideoDescription(source.videoFormat, colorRange: source.colorRange.rawValue),
                                                                audio: AudioDescription(source.audioFormat),
                                                                frameRate: Int((1e9 / Double(source.frameInterval)).rounded()),
                                                                audioStreams: source.audioStreams.map(\.description))))
        logger.debug("handler '\(handler.manifest.name)' connected; broadcast \(current.id) started")
    }

    private func reapHandler() {
        guard let handler, let status = handler.process.reap() else { return }
        self.handler = nil
        if let id = handler.sessionID, let session = sessions[id] {
            session.closeReason = ""
        }
        pool?.releaseAll(heldBy: handler.sessionID ?? -1)
        logger.info("handler '\(handler.manifest.name)' (pid \(handler.process.pid)) \(status)")
        let failure = handler.stopReason ?? (status.succeeded || handler.stoppedBeforeStart ? nil : BroadcastError(.handlerFailed, "handler '\(handler.manifest.name)' \(status)"))
        transition(.handlerExited(failure))
    }

    // MARK: - Capture

    private func beginCapture(now: UInt64) {
        do { try source.begin(at: now) } catch {
            transition(.fail(BroadcastError(.captureFailed, error.description)))
            return
        }
        liveSince = now
        videoHeader = pool.map { videoHeaderPrototype(pool: $0, format: source.videoFormat) }
        nextFrameAt = now
        nextAudioAt = source.nextAudioDeadline()
        cursorSpriteSent = nil
        silentAudio = []
        deliveredUntil = [:]
        if nextServiceInfoAt == nil { nextServiceInfoAt = now + configuration.serviceInfoInterval }
        handlerProgress = (handlerSession()?.bytesSent ?? 0, now, pool?.releases ?? 0, now)
        discontinuous = Set(SampleType.allCases)
    }

    /// `drainingAudio`: a pause or finish, after which the audio captured before it is still delivered (`AudioDrain`).
    private func endCapture(now: UInt64, drainingAudio: Bool) {
        if let liveSince { elapsedBefore += now - liveSince }
        liveSince = nil
        nextFrameAt = nil
        guard drainingAudio, nextAudioAt != nil, handlerSession() != nil else {
            endAudio()
            return
        }
        audioDrain = AudioDrain(since: now, until: max(now, deliveredUntil[.video] ?? 0))
        captureAudio(now: now)
    }

    private func endAudio() {
        source.end()
        nextAudioAt = nil
    }

    /// The wait for audio after a pause or finish is over: capture ends and the handler hears of it.
    private func endAudioDrain() {
        guard let drain = audioDrain else { return }
        audioDrain = nil
        endAudio()
        let now = MonotonicClock.now()
        let short = source.audioStreams.filter { deliveredUntil[$0, default: 0] < drain.until }.map(\.description)
        logger.debug("audio captured before the \(machine.phase == .paused ? "pause" : "finish") delivered after \((now - drain.since) / 1_000_000) ms\(short.isEmpty ? "" : "; short: " + short.joined(separator: ", "))")
        for effect in drain.held { apply(effect, now: now) }
    }

    private func drop(_ type: SampleType, count: UInt64 = 1) {
        counters[type, default: StreamCounters()].dropped += count
        discontinuous.insert(type)
    }

    private func takeSequence(_ type: SampleType) -> UInt64 {
        let n = sequences[type, default: 0]
        sequences[type] = n + 1
        return n
    }

    private func handlerSession() -> PeerSession? {
        guard let id = handler?.sessionID else { return nil }
        return sessions[id]
    }

    private func captureVideo(now: UInt64) {
        let interval = source.frameInterval
        var deadline = nextFrameAt!
        // Deadlines the loop missed (the machine was too busy) are frames that were never captured.
        let missed = (now - deadline) / interval
        if missed > 0 {
            sequences[.video, default: 0] += missed
            drop(.video, count: missed)
            counters[.video, default: StreamCounters()].late = (counters[.video]?.late ?? 0) + missed
            deadline += missed * interval
        }
        nextFrameAt = deadline + interval
        guard let session = handlerSession(), !session.isClosing, pool != nil else {
            sequences[.video, default: 0] += 1
            drop(.video)
            return
        }
        let change: FrameChange
        do {
            change = try source.checkForChanges()
            if case .resized(let format) = change { try changeFormat(to: format, session: session) }
        } catch let error as CaptureError {
            transition(.fail(BroadcastError(.captureFailed, error.description)))
            return
        } catch {
            transition(.fail(error as! BroadcastError))
            return
        }
        sendCursor(to: session, at: deadline)
        guard let pool, var header = videoHeader else { return }
        if change == .unchanged, let latest = pool.latest {
            counters[.video, default: StreamCounters()].repeated += 1
            if manifest?.frameRate == .variable { return }
            pool.hold(latest, for: session.id)
            header.repeated = true
            deliver(&header, slot: latest, pts: deadline, interval: interval, to: session, pool: pool)
            return
        }
        guard let slot = pool.acquire(for: session.id) else {
            sequences[.video, default: 0] += 1
            drop(.video)
            return
        }
        let pts: UInt64
        do {
            pts = try source.captureFrame(index: sequences[.video, default: 0], deadline: deadline, into: pool.pointer(slot),
                                          previous: pool.latest.map { UnsafeRawPointer(pool.pointer($0)) })
        } catch {
            pool.release(slot, by: session.id)
            pool.setLatest(nil)
            lostFrames += 1
            if error.transient && lostFrames * interval < Self.transientFailureLimit {
                logger.debug("frame lost: \(error)")
                sequences[.video, default: 0] += 1
                drop(.video)
            } else {
                transition(.fail(BroadcastError(.captureFailed, error.description)))
            }
            return
        }
        lostFrames = 0
        pool.setLatest(slot)
        latestFramePTS = pts
        deliver(&header, slot: slot, pts: pts, interval: interval, to: session, pool: pool)
    }

    /// The VIDEO_SAMPLE fields that stay the same from frame to frame.
    private func videoHeaderPrototype(pool: FramePool, format: VideoFormat) -> VideoSampleHeader {
        let zero = SampleTiming(presentationTime: 0, duration: 0, sequence: 0, discontinuity: false)
        return VideoSampleHeader(timing: zero, orientation: source.orientation, pool: pool.id, slot: 0, format: format)
    }

    /// Sends the VIDEO_SAMPLE for `slot` (already held for the handler), or drops it when the handler's queue is full.
    private func deliver(_ header: inout VideoSampleHeader, slot: Int, pts: UInt64, interval: UInt64, to session: PeerSession, pool: FramePool) {
        header.timing = SampleTiming(presentationTime: pts, duration: interval, sequence: takeSequence(.video),
                                     discontinuity: discontinuous.contains(.video))
        header.orientation = source.orientation
        header.slot = UInt32(slot)
        var payload: [UInt8] = []
        payload.reserveCapacity(VideoSampleHeader.size)
        header.encode(into: &payload)
        if session.enqueue(Message(.videoSample, payload: payload), droppable: true) {
            counters[.video, default: StreamCounters()].delivered += 1
            deliveredUntil[.video] = pts + interval
            discontinuous.remove(.video)
            session.flush()
        } else {
            pool.release(slot, by: session.id)
            drop(.video)
        }
    }

    /// The frame size changed: a bigger pool when the slots are too small for it, then VIDEO_FORMAT_CHANGED,
    /// before the first frame of the new size. Throws when the new size does not fit the memory budget.
    private func changeFormat(to format: VideoFormat, session: PeerSession) throws(BroadcastError) {
        guard let pool else { return }
        pool.setLatest(nil)
        if format.frameByteCount > pool.plan.slotSize {
            let plan: FramePoolPlan
            do {
                plan = try FramePoolPlan.plan(format: format, budgetBytes: configuration.memoryBudget, sourceBytes: source.mappedBytes,
                                              daemonBytes: Self.daemonBytes(poolBytes: pool.plan.poolBytes))
            } catch {
                throw BroadcastError(.budget, "the screen was resized: \(error.message)")
            }
            // The old pool goes first, so that the daemon never maps both; the handler drops its mapping on POOL.
            retiredPools.insert(pool.id)
            self.pool = nil
            guard makePool(plan) else { return }
            announcePool(to: session)
        }
        videoHeader = videoHeaderPrototype(pool: self.pool!, format: format)
        session.enqueue(.json(.videoFormatChanged, VideoDescription(format, colorRange: source.colorRange.rawValue)))
        discontinuous.insert(.video)
        logger.info("broadcast \(machine.current?.id ?? 0): video is now \(format)")
    }

    /// In the metadata cursor mode: where the pointer is, every frame, with its image when it changed.
    private func sendCursor(to session: PeerSession, at pts: UInt64) {
        guard let cursor = source.cursor else { return }
        var sample = CursorSample(presentationTime: pts, x: cursor.x, y: cursor.y, visible: cursor.visible, sprite: nil)
        if let sprite = cursor.sprite, sprite.serial != cursorSpriteSent {
            sample.sprite = .init(width: UInt16(sprite.width), height: UInt16(sprite.height), hotspotX: UInt16(sprite.hotspotX),
                                  hotspotY: UInt16(sprite.hotspotY), pixels: sprite.pixels)
        }
        if session.enqueue(sample.message, droppable: true), sample.sprite != nil { cursorSpriteSent = cursor.sprite?.serial }
    }

    private func captureAudio(now: UInt64) {
        let session = handlerSession()
        let format = source.audioFormat
        for stream in [SampleType.audioApp, .audioMic] {
            while let chunk = source.nextAudioChunk(stream, now: now) {
                if let drain = audioDrain, chunk.presentationTime >= drain.until { continue } // after the pause
                deliveredUntil[stream] = chunk.presentationTime + chunk.duration
                let sequence = takeSequence(stream)
                guard let session, !session.isClosing else {
                    drop(stream)
                    continue
                }
                let timing = SampleTiming(presentationTime: chunk.presentationTime, duration: chunk.duration, sequence: sequence,
                                          discontinuity: discontinuous.contains(stream))
                var payload: [UInt8] = []
                payload.reserveCapacity(AudioSampleHeader.size + chunk.bytes.count)
                AudioSampleHeader(timing: timing, type: stream, format: format, frameCount: UInt32(chunk.frameCount)).encode(into: &payload)
                payload += chunk.bytes
                if session.enqueue(Message(.audioSample, payload: payload), droppable: true) {
                    counters[stream, default: StreamCounters()].delivered += 1
                    discontinuous.remove(stream)
                } else {
                    drop(stream)
                }
            }
        }
        session?.flush()
        let silent = Set(source.silentAudio.keys)
        if silent != silentAudio {
            silentAudio = silent
            publish(.json(.stateChanged, status()))
        }
        if let drain = audioDrain,
           now >= drain.deadline || source.audioStreams.allSatisfy({ deliveredUntil[$0, default: 0] >= drain.until || silent.contains($0) }) {
            endAudioDrain()
        } else {
            nextAudioAt = [source.nextAudioDeadline(), audioDrain?.deadline].compactMap { $0 }.min()
        }
    }
}

/// A URL for the log: without its query and user info, where stream keys and tokens live.
func redactedURL(_ url: String) -> String {
    var text = Substring(url)
    var redacted = false
    if let query = text.firstIndex(where: { $0 == "?" || $0 == "#" }) {
        text = text[..<query]
        redacted = true
    }
    let parts = text.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
    // "scheme:", "", "user:key@host", "path"
    if parts.count >= 3, parts[0].hasSuffix(":"), parts[1].isEmpty, let at = parts[2].lastIndex(of: "@") {
        text = parts[0] + "//…" + parts[2][at...] + (parts.count > 3 ? "/" + parts[3] : "")
    }
    return String(text) + (redacted ? "?…" : "")
}
