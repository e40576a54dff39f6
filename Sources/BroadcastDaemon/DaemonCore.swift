import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Logging

/// broadcastd's state and logic, with no loop of its own: it takes what happened — a peer connected, a peer's
/// socket or a handler's exit became ready, a timer came, a signal, the session lock changed — each with `now`,
/// routes it to the part it is for, and switches on what that part returns. The parts register the descriptors
/// and timers they wait for in `wakes`; whoever drives the core (the daemon's loop in `Daemon`, or a test with a
/// `ManualClock`) waits on those and hands back what woke. It reaches the outside through narrow interfaces: peers'
/// sockets (`PeerServer`), handler processes (`HandlerLauncher`), the capture source, and the service manager
/// (`ServiceNotifier`).
final class DaemonCore {
    let configuration: DaemonConfiguration
    let logger: Logger
    let clock: DaemonClock
    /// What the core waits for: each part registers its descriptors and keeps its timers set.
    let wakes: WakeRegistry
    /// What is captured: broadcastd's own source, or the one the first broadcast of the capture chose.
    var source: CaptureSource
    /// The source broadcastd's options describe.
    let defaultSource: CaptureSource
    /// How a broadcast's START may choose another source; nil: broadcastd's own only.
    let sources: CaptureSources?
    /// What `source` captures, as a choice (START's `capture` is compared with it).
    var captureChoice: CaptureChoice
    let registry: HandlerRegistry
    /// Where the listener is, for handlers (`BROADCASTD_SOCKET`).
    let socketPath: String
    let launcher: any HandlerLauncher
    let notifier: any ServiceNotifier
    let peers: PeerServer

    /// Every broadcast requested and not yet finished, and the last ones that finished (until the next
    /// START), oldest first.
    var broadcasts: [Broadcast] = []
    var nextBroadcastID: UInt32 = 1
    let poolIDs = PoolIDs()
    /// The source, while any broadcast is requested.
    var capture: CaptureSession?
    /// A START waiting for the source to open: the source's answer and its time to be asked again wake the core.
    var pendingStart: PendingStart? {
        didSet {
            if pendingStart != nil, let answered = source.openAnswered {
                wakes.register(.sourceAnswered, answered.raw, .readable)
            } else {
                wakes.deregister(.sourceAnswered)
            }
            wakes.schedule(.openRetry, at: pendingStart == nil ? nil : source.openRetryAt)
        }
    }
    /// Once a second while a broadcast is live or was: SERVICE_INFO, the status line, the hang check.
    var nextServiceInfoAt: UInt64? {
        didSet { wakes.schedule(.serviceInfo, at: nextServiceInfoAt) }
    }
    var shuttingDown = false
    /// While a transition is carried out, the events it raises, which follow it (nil otherwise).
    var followUps: [(Broadcast, BroadcastEvent)]?
    /// Whether the desktop session is locked (DaemonCore+Privacy.swift).
    var sessionLock: SessionLockSignal? {
        didSet {
            if let sessionLock {
                wakes.register(.sessionLock, sessionLock.changed.descriptor.raw, .readable)
            } else {
                wakes.deregister(.sessionLock)
            }
        }
    }
    var lockState = SessionLockState.unlocked
    /// Told when capture starts and stops (a desktop notification).
    var captureIndicator: (any CaptureIndicator)?
    /// "did not answer" of handlers' commands, which controllers can cause by the thousand.
    var commandWarnings = WarningThrottle()
    /// Revision 2.9: the encoders handlers share (DaemonCore+SharedEncoding.swift).
    let sharedEncoders = SharedEncoders()

    init(
        configuration: DaemonConfiguration, source: CaptureSource, sources: CaptureSources?, socketPath: String,
        logger: Logger, clock: DaemonClock, wakes: WakeRegistry, launcher: any HandlerLauncher = ProcessLauncher(),
        notifier: any ServiceNotifier
    ) {
        self.configuration = configuration
        self.source = source
        defaultSource = source
        self.sources = sources
        captureChoice = sources?.defaults ?? CaptureChoice()
        self.socketPath = socketPath
        self.logger = logger
        self.clock = clock
        self.wakes = wakes
        self.launcher = launcher
        self.notifier = notifier
        registry = HandlerRegistry(
            directories: configuration.extraHandlerDirectories + HandlerRegistry.defaultDirectories())
        peers = PeerServer(serverName: configuration.serverName, clock: clock, wakes: wakes, logger: logger)
    }

    /// The core is about to serve: the handlers installed are read (and logged).
    func start() {
        let handlers = registry.load(logger: logger)
        logger.debug("\(handlers.count) handler(s) installed: \(handlers.map(\.manifest.name).joined(separator: ", "))")
    }

    /// Shutting down, and nothing is left to finish.
    var isDone: Bool {
        shuttingDown && !broadcasts.contains(where: { $0.link != nil || $0.isActive }) && pendingStart == nil
    }

    /// A peer's messages wait in its decoder: the core must be served again at once (`endTurn`).
    var hasBacklog: Bool { peers.hasBacklog }

    /// Every connection is closed.
    func closeAll() {
        peers.closeAll()
    }

    // MARK: - What happens

    /// A new connection from the user (the listener checked who it is): a session, unless too many are connected.
    @discardableResult
    func peerConnected(_ socket: Descriptor) -> PeerSession? {
        peers.admit(socket)
    }

    /// What woke the core: each goes to the part it is for. A timer's owner checks that its time has come (a timer
    /// moved or cancelled in the same turn may still come once).
    func handle(_ wake: Wake, _ event: Poller.Event = .none, now: UInt64) {
        switch wake {
        case .listener, .signals, .watchdog, .acceptResumes:
            break  // the loop's own
        case .peer(let id):
            if let session = peers.sessions[id] { peers.serve(session, event) { take(session, $0) } }
        case .peerDeadline(let id):
            guard let session = peers.sessions[id] else { return }
            expireCommand(of: session, now: now)
            peers.deadlineCame(for: session, now: now)
        case .handlerExited(let id):
            guard event.readable, let broadcast = broadcast(id) else { return }
            // What it sent before it exited is taken first: its last message (its result) and its exit can come in one
            // turn, the exit first, and closing its connection lost the message.
            if let session = broadcast.link?.connection {
                peers.serve(session, Poller.Event(readable: true)) { take(session, $0) }
            }
            reapHandler(of: broadcast)
        case .handlerDeadline(let id):
            if let broadcast = broadcast(id), let link = broadcast.link, link.expire(now: now) {
                transition(broadcast, .fail(link.notReadyError))
            }
        case .maxDuration(let id):
            guard let broadcast = broadcast(id), let at = broadcast.maxDurationDeadline, now >= at else { return }
            logger.info("broadcast \(broadcast.id) reached its maximum duration")
            transition(broadcast, .finish)
        case .audioDrain(let id):
            if let broadcast = broadcast(id), let drain = broadcast.audioDrain, now >= drain.deadline {
                endAudioDrain(of: broadcast)
            }
        case .frame:
            if let at = capture?.live?.nextFrameAt, now >= at { captureVideo(now: now) }
        case .audio:
            if let at = capture?.live?.nextAudioAt, now >= at { captureAudio(now: now) }
        case .audioArrived:
            guard event.readable, let arrival = source.audioArrival else { return }
            arrival.acknowledge()
            captureAudio(now: now)
        case .serviceInfo:
            guard let at = nextServiceInfoAt, now >= at else { return }
            nextServiceInfoAt = now + configuration.serviceInfoInterval
            for broadcast in broadcasts where broadcast.isActive { publishServiceInfo(broadcast, now: now) }
            updateStatus(now: now)
            checkHandlerProgress(now: now)
        case .sourceAnswered:
            if event.readable && pendingStart != nil { startAnswered() }
        case .openRetry:
            if pendingStart != nil, let at = source.openRetryAt, now >= at { startAnswered() }
        case .sessionLock:
            if event.readable { sessionLockChanged() }
        }
    }

    /// SIGTERM, SIGINT or SIGHUP: live broadcasts finish (with the error that broadcastd was stopped), and the core
    /// is done once they have; a second signal kills their handlers and returns true: stop now.
    func signalled(_ signal: Int32) -> Bool {
        if shuttingDown {
            logger.warning("second signal \(signal): stopping now")
            for broadcast in broadcasts { broadcast.link?.kill() }
            return true
        }
        logger.info("signal \(signal): shutting down")
        shuttingDown = true
        notifier.stopping()
        updateStatus()
        for broadcast in broadcasts where broadcast.isActive && broadcast.phase != .finishing {
            transition(broadcast, .fail(BroadcastError(.shutdown, "broadcastd was stopped")))
        }
        if pendingStart != nil { source.cancelOpen("broadcastd was stopped") }
        return false
    }

    /// The end of a turn: peers whose messages wait are served, the session lock is enforced on what changed, and
    /// the connections marked for closing are closed.
    func endTurn() {
        peers.serveBacklog(take)
        sharedEncoders.flush(links: link(of:))
        enforceSessionLock()
        for session in peers.closeFinishedSessions() { sessionClosed(session) }
    }

    /// What a peer's input brings.
    private func take(_ session: PeerSession, _ input: PeerServer.Input) {
        switch input {
        case .message(let message): request(message, from: session)
        case .handlerHello: handlerConnected(session)
        }
    }

    /// The broadcast `id` names.
    func broadcast(_ id: UInt32) -> Broadcast? {
        broadcasts.first { $0.id == id }
    }

    /// A live handler that has stopped reading, or holds slots and releases none, for `hangTimeout`
    /// has hung: its broadcast finishes with an error that says so (and the handler is then stopped).
    private func checkHandlerProgress(now: UInt64) {
        for broadcast in broadcasts where broadcast.phase == .live || broadcast.phase == .paused {
            if let reason = broadcast.link?.hang(now: now, limit: configuration.hangTimeout) {
                transition(broadcast, .fail(BroadcastError(.handlerFailed, reason)))
            }
        }
    }

    // MARK: - The status line

    /// Tells the service manager the status line (what `systemctl --user status broadcastd` shows).
    func updateStatus(now: UInt64? = nil) {
        notifier.status(statusLine(now: now ?? clock.now()))
    }

    /// One line: "idle", "live: broadcast 3 to record, 00:12:03", "paused: ...", "stopping"; with several
    /// broadcasts, each, separated by "; ".
    func statusLine(now: UInt64) -> String {
        let active = broadcasts.filter(\.isActive)
        if shuttingDown {
            let finishing = active.map { "broadcast \($0.id)" }.joined(separator: ", ")
            return active.isEmpty ? "stopping" : "stopping: finishing " + finishing
        }
        if let pending = pendingStart {
            return "requested: a broadcast to \(pending.request.handler); the screen is \(pending.reason)"
        }
        guard let last = broadcasts.last else { return "idle" }
        return (active.isEmpty ? [last] : active).map { line(for: $0, now: now) }.joined(separator: "; ")
    }

    private func line(for broadcast: Broadcast, now: UInt64) -> String {
        let seconds = broadcast.elapsed(now: now) / 1_000_000_000
        let clock = [seconds / 3600, seconds / 60 % 60, seconds % 60].map { $0 < 10 ? "0\($0)" : "\($0)" }
            .joined(separator: ":")
        let what = broadcast.title
        switch broadcast.phase {
        case .idle: return "idle"
        case .awaitingSetup: return "waiting for setup: \(what)"
        case .starting: return "starting: \(what)"
        case .live: return "live: \(what), \(clock)"
        case .paused:
            let locked = lockState.pausedForLock(broadcast.id) ? " (the session is locked)" : ""
            return "paused\(locked): \(what), \(clock)"
        case .finishing: return "finishing: \(what), \(clock)"
        case .finished:
            guard let error = broadcast.machine.error else { return "idle; \(what) finished, \(clock)" }
            return "idle; \(what) failed: \(error.message)"
        }
    }
}

/// Whoever runs broadcastd as a service: told the status line when it changes, and when broadcastd is stopping
/// (systemd, through `SystemdLifecycle`; nobody when there is no service manager).
protocol ServiceNotifier: AnyObject {
    func status(_ text: @autoclosure () -> String)
    func stopping()
}
