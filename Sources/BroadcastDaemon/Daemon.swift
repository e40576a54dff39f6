import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Logging

/// broadcastd for the life of its process: the wiring. One thread runs one poll loop (`Loop`) whose typed
/// wake-ups go to the part they concern: the peers (`PeerServer`), the broadcasts (`Broadcast`, each with
/// its `HandlerLink`), the capture (`CaptureSession` while any broadcast is requested, `LiveCapture` while
/// any is live) and systemd (`SystemdLifecycle`). Nothing in it ever blocks on a peer: output to peers is
/// queued and bounded, samples are dropped (and counted) rather than waited for.
public final class Daemon {
    let configuration: DaemonConfiguration
    let logger: Logger
    let clock: DaemonClock
    /// What is captured: broadcastd's own source, or the one the first broadcast of the capture chose.
    var source: CaptureSource
    /// The source broadcastd's options describe.
    let defaultSource: CaptureSource
    /// How a broadcast's START may choose another source; nil: broadcastd's own only.
    let sources: CaptureSources?
    /// What `source` captures, as a choice (START's `capture` is compared with it).
    var captureChoice: CaptureChoice
    let registry: HandlerRegistry
    /// Where the listener is: the configured path, or where systemd bound the socket it passed.
    let socketPath: String
    /// False under socket activation: the socket file is systemd's, and stays for the next activation.
    private let ownsSocketPath: Bool
    private let signals: SignalDescriptor
    private let loop: Loop
    let peers: PeerServer
    let systemd: SystemdLifecycle

    /// Every broadcast requested and not yet finished, and the last ones that finished (until the next
    /// START), oldest first.
    var broadcasts: [Broadcast] = []
    var nextBroadcastID: UInt32 = 1
    var nextPoolID: UInt32 = 1
    /// The source, while any broadcast is requested.
    var capture: CaptureSession?
    /// A START waiting for the source to open (the desktop portal's share dialog is up, or the first frame has
    /// not come): answered when the source is.
    var pendingStart: (sessionID: Int, seq: UInt32, request: StartRequest)?
    /// What the screen is doing while a START is pending ("being chosen in the screen-share dialog").
    var pendingReason = ""
    var nextServiceInfoAt: UInt64?
    var shuttingDown = false
    /// Set while a transition is carried out; events it raises wait in `followUps`.
    var transitioning = false
    var followUps: [(Broadcast, BroadcastEvent)] = []
    /// Whether the desktop session is locked (Daemon+Privacy.swift); set before `run`.
    public var sessionLock: SessionLockSignal?
    var sessionLocked = false
    /// Broadcasts paused because the session locked: they resume when it is unlocked.
    var pausedForLock: Set<UInt32> = []
    /// Told when capture starts and stops (a desktop notification); set before `run`.
    public var captureIndicator: (any CaptureIndicator)?
    var captureIndicated = false
    /// "did not answer" of handlers' commands, which controllers can cause by the thousand.
    var commandWarnings = WarningThrottle()

    /// Binds the socket after a look at the source: a screen that cannot be opened now is a warning (START says
    /// why, if it still cannot be opened then). Nothing is planned yet: memory is planned for a capture when a
    /// broadcast asks for one.
    public init(configuration: DaemonConfiguration, source: CaptureSource, sources: CaptureSources? = nil, logger: Logger,
                clock: DaemonClock = SystemClock()) throws(DaemonError) {
        self.configuration = configuration
        self.source = source
        defaultSource = source
        self.sources = sources
        captureChoice = sources?.defaults ?? CaptureChoice()
        self.logger = logger
        self.clock = clock
        registry = HandlerRegistry(directories: configuration.extraHandlerDirectories + HandlerRegistry.defaultDirectories())
        if source.choosesScreenAtStart {
            logger.info("the screen is chosen in the desktop portal's share dialog when a broadcast starts")
        } else {
            do {
                _ = try CaptureSession.openWaiting(source)
                source.close()
            } catch {
                logger.warning("\(error.description); broadcasts cannot start until this is resolved")
            }
        }
        let listener: Descriptor
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
            systemd = try SystemdLifecycle(logger: logger)
            loop = try Loop()
        } catch {
            throw DaemonError("start", error)
        }
        peers = PeerServer(listener: listener, serverName: configuration.serverName, clock: clock, logger: logger)
        Signals.ignoreBrokenPipe()
        let budget = configuration.memoryBudget
        let policy = budget.enforced ? "set: captures that do not fit are refused" : "built in: a capture that cannot fit runs at its least, saying so"
        logger.info("listening on \(socketPath); source \(source.description); memory budget \(megabytes(budget.bytes)) (\(policy))")
        peers.onMessage = { [unowned self] message, session in request(message, from: session) }
        peers.onHandlerHello = { [unowned self] session in handlerConnected(session) }
        peers.onClosed = { [unowned self] session in sessionClosed(session) }
    }

    // MARK: - The loop

    /// Runs until SIGTERM or SIGINT; live broadcasts are finished first (a second signal stops at once).
    public func run() throws(DaemonError) {
        defer { if ownsSocketPath { FileSystem.remove(socketPath) } }
        // Ready means ready: the socket listens, the handler directories have been read, the loop starts now.
        let handlers = registry.load(logger: logger)
        logger.debug("\(handlers.count) handler(s) installed: \(handlers.map(\.manifest.name).joined(separator: ", "))")
        systemd.ready(now: clock.now())
        updateStatus()
        // Start-up ran much code once (arguments, configuration, the source's look at the screen): an idle daemon
        // keeps only what it runs from here on.
        ProcessMemory.releaseIdleCode()
        while !(shuttingDown && !broadcasts.contains(where: { $0.link != nil || $0.isActive }) && pendingStart == nil) {
            var watches = [(fd: signals.descriptor.raw, interest: Poller.Interest.readable, wake: Wake.signals)] + peers.watches()
            for broadcast in broadcasts { if let link = broadcast.link { watches.append((link.process.pidDescriptor.raw, .readable, .handlerExited(broadcast))) } }
            if pendingStart != nil, let answered = source.openAnswered { watches.append((answered.raw, .readable, .sourceAnswered)) }
            if capture?.live?.nextAudioAt != nil, let arrival = source.audioArrival { watches.append((arrival.descriptor.raw, .readable, .audioArrived)) }
            if let sessionLock { watches.append((sessionLock.changed.descriptor.raw, .readable, .sessionLock)) }
            let woken = try loop.wait(watches, until: nextDeadline(), immediately: peers.hasBacklog)
            if woken[0].event.readable, handleSignals() { break }
            for (wake, event) in woken.dropFirst() {
                switch wake {
                case .listener: if event.readable { peers.acceptPeers() }
                case .peer(let session): peers.serve(session, event)
                case .handlerExited(let broadcast): if event.readable { reapHandler(of: broadcast) }
                case .sourceAnswered: if event.readable && pendingStart != nil { startAnswered() }
                case .audioArrived:
                    if event.readable, let arrival = source.audioArrival {
                        arrival.acknowledge()
                        captureAudio(now: clock.now())
                    }
                case .sessionLock: if event.readable { sessionLockChanged() }
                case .signals, .timer: break
                }
            }
            runDueWork(now: clock.now())
            enforceSessionLock()
            peers.closeFinishedSessions()
        }
        peers.closeAll()
        logger.info("stopped")
    }

    private func nextDeadline() -> UInt64? {
        var candidates = [capture?.live?.nextFrameAt, capture?.live?.nextAudioAt, nextServiceInfoAt, systemd.nextWatchdogAt,
                          pendingStart == nil ? nil : source.openRetryAt, peers.nextDeadline]
        for broadcast in broadcasts {
            candidates += [broadcast.startDeadline, broadcast.maxDurationDeadline, broadcast.link?.terminateAt, broadcast.link?.killAt,
                           broadcast.link?.commandDeadline]
        }
        return candidates.compactMap { $0 }.min()
    }

    private func runDueWork(now: UInt64) {
        // Pinged from the loop's own timer: a loop that is stuck stops pinging, and systemd restarts it.
        systemd.tick(now: now)
        if let at = capture?.live?.nextFrameAt, now >= at { captureVideo(now: now) }
        if let at = capture?.live?.nextAudioAt, now >= at { captureAudio(now: now) }
        peers.checkDeadlines(now: now)
        if let at = nextServiceInfoAt, now >= at {
            nextServiceInfoAt = now + configuration.serviceInfoInterval
            for broadcast in broadcasts where broadcast.isActive { publishServiceInfo(broadcast, now: now) }
            updateStatus(now: now)
            checkHandlerProgress(now: now)
        }
        if pendingStart != nil, let at = source.openRetryAt, now >= at { startAnswered() }
        for broadcast in broadcasts { runDueWork(of: broadcast, now: now) }
    }

    private func runDueWork(of broadcast: Broadcast, now: UInt64) {
        if let at = broadcast.startDeadline, now >= at {
            broadcast.startDeadline = nil
            transition(broadcast, .fail(BroadcastError(.handlerFailed,
                "handler '\(broadcast.manifest.name)' did not become ready within \(configuration.startTimeout / 1_000_000_000) s")))
        }
        if let at = broadcast.maxDurationDeadline, now >= at {
            logger.info("broadcast \(broadcast.id) reached its maximum duration")
            transition(broadcast, .finish)
        }
        guard let link = broadcast.link else { return }
        expireCommands(of: link, broadcast: broadcast.id, now: now)
        if let at = link.terminateAt, now >= at {
            logger.warning("handler '\(link.manifest.name)' did not exit in time; sending SIGTERM")
            if broadcast.phase == .finishing && link.session != nil {
                link.stopReason = BroadcastError(.handlerFailed,
                    "handler '\(link.manifest.name)' did not finish within \(configuration.finishTimeout / 1_000_000_000) s and was stopped")
            }
            link.terminate(now: now)
        }
        if let at = link.killAt, now >= at {
            logger.warning("handler '\(link.manifest.name)' ignored SIGTERM; sending SIGKILL")
            link.kill()
        }
    }

    /// A live handler that has stopped reading, or holds slots and releases none, for `hangTimeout`
    /// has hung: its broadcast finishes with an error that says so (and the handler is then stopped).
    private func checkHandlerProgress(now: UInt64) {
        guard let pool = capture?.pool else { return }
        for broadcast in broadcasts where broadcast.phase == .live || broadcast.phase == .paused {
            if let reason = broadcast.link?.hang(now: now, pool: pool, limit: configuration.hangTimeout) {
                transition(broadcast, .fail(BroadcastError(.handlerFailed, reason)))
            }
        }
    }

    private func handleSignals() -> Bool {
        while let signal = signals.next() {
            if shuttingDown {
                logger.warning("second signal \(signal): stopping now")
                for broadcast in broadcasts { broadcast.link?.kill() }
                return true
            }
            logger.info("signal \(signal): shutting down")
            shuttingDown = true
            systemd.stopping()
            updateStatus()
            for broadcast in broadcasts where broadcast.isActive && broadcast.phase != .finishing {
                transition(broadcast, .fail(BroadcastError(.shutdown, "broadcastd was stopped")))
            }
            if pendingStart != nil { source.cancelOpen("broadcastd was stopped") }
        }
        return false
    }

    // MARK: - systemd

    /// Sends STATUS= (what `systemctl --user status broadcastd` shows) when it changed.
    func updateStatus(now: UInt64? = nil) {
        systemd.status(statusLine(now: now ?? clock.now()))
    }

    /// One line: "idle", "live: broadcast 3 to record, 00:12:03", "paused: ...", "stopping"; with several
    /// broadcasts, each, separated by "; ".
    func statusLine(now: UInt64) -> String {
        let active = broadcasts.filter(\.isActive)
        if shuttingDown {
            return active.isEmpty ? "stopping" : "stopping: finishing " + active.map { "broadcast \($0.id)" }.joined(separator: ", ")
        }
        if let pending = pendingStart { return "requested: a broadcast to \(pending.request.handler); the screen is \(pendingReason)" }
        guard let last = broadcasts.last else { return "idle" }
        return (active.isEmpty ? [last] : active).map { line(for: $0, now: now) }.joined(separator: "; ")
    }

    private func line(for broadcast: Broadcast, now: UInt64) -> String {
        let seconds = broadcast.elapsed(now: now) / 1_000_000_000
        let clock = [seconds / 3600, seconds / 60 % 60, seconds % 60].map { $0 < 10 ? "0\($0)" : "\($0)" }.joined(separator: ":")
        let what = broadcast.title
        switch broadcast.phase {
        case .idle: return "idle"
        case .awaitingSetup: return "waiting for setup: \(what)"
        case .starting: return "starting: \(what)"
        case .live: return "live: \(what), \(clock)"
        case .paused: return "paused\(pausedForLock.contains(broadcast.id) ? " (the session is locked)" : ""): \(what), \(clock)"
        case .finishing: return "finishing: \(what), \(clock)"
        case .finished: return broadcast.machine.error.map { "idle; \(what) failed: \($0.message)" } ?? "idle; \(what) finished, \(clock)"
        }
    }
}
