import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Logging

/// broadcastd for the life of its process: the shell around `DaemonCore`. It owns what only a process has — the
/// listening socket and who may connect, the signals, systemd's notifications and watchdog — and the one poll loop
/// (`Loop`) on one thread, which waits on what the core's parts registered and hands the core each wake-up with the
/// time. Nothing in it ever blocks on a peer: output to peers is queued and bounded, samples are dropped (and
/// counted) rather than waited for.
public final class Daemon {
    private let core: DaemonCore
    private let logger: Logger
    private let clock: DaemonClock
    private let wakes: WakeRegistry
    private let listener: Descriptor
    /// Where the listener is: the configured path, or where systemd bound the socket it passed.
    private let socketPath: String
    /// False under socket activation: the socket file is systemd's, and stays for the next activation.
    private let ownsSocketPath: Bool
    private let signals: SignalDescriptor
    private let loop: Loop
    private let systemd: SystemdLifecycle
    private var acceptWarnings = WarningThrottle()
    private var refusalWarnings = WarningThrottle()

    /// Whether the desktop session is locked (DaemonCore+Privacy.swift); set before `run`.
    public var sessionLock: SessionLockSignal? {
        get { core.sessionLock }
        set { core.sessionLock = newValue }
    }
    /// Told when capture starts and stops (a desktop notification); set before `run`.
    public var captureIndicator: (any CaptureIndicator)? {
        get { core.captureIndicator }
        set { core.captureIndicator = newValue }
    }

    /// Binds the socket after a look at the source: a screen that cannot be opened now is a warning (START says
    /// why, if it still cannot be opened then). Nothing is planned yet: memory is planned for a capture when a
    /// broadcast asks for one.
    public init(
        configuration: DaemonConfiguration, source: CaptureSource, sources: CaptureSources? = nil, logger: Logger,
        clock: DaemonClock = SystemClock()
    ) throws(DaemonError) {
        self.logger = logger
        self.clock = clock
        do {
            // Signals are taken over first: before the socket appears, so that a SIGTERM that comes as soon as a
            // client sees the socket finishes cleanly (socket file removed) instead of killing the process, and
            // before a look at the source starts PipeWire's threads, which inherit this thread's mask.
            signals = try SignalDescriptor(signals: [Signals.terminate, Signals.interrupt, Signals.hangUp])
        } catch {
            throw DaemonError("start", error)
        }
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
        do {
            if let activated = try Systemd.takeActivatedListener() {
                listener = activated
                socketPath = Systemd.boundPath(activated) ?? configuration.socketPath
                ownsSocketPath = false
                let note =
                    "socket activation: serving the socket systemd passed (\(socketPath)); --socket and "
                    + "BROADCASTD_SOCKET are not used"
                logger.info("\(note)")
            } else {
                if let slash = configuration.socketPath.lastIndex(of: "/"), slash != configuration.socketPath.startIndex
                {
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
        wakes = WakeRegistry()
        core = DaemonCore(
            configuration: configuration, source: source, sources: sources, socketPath: socketPath,
            logger: logger, clock: clock, wakes: wakes, notifier: systemd)
        Signals.ignoreBrokenPipe()
        let budget = configuration.memoryBudget
        let policy =
            budget.enforced
            ? "set: captures that do not fit are refused"
            : "built in: a capture that cannot fit runs at its least, saying so"
        let listening =
            "listening on \(socketPath); source \(source.description); memory budget "
            + "\(megabytes(budget.bytes)) (\(policy))"
        logger.info("\(listening)")
    }

    // MARK: - The loop

    /// Runs until SIGTERM or SIGINT; live broadcasts are finished first (a second signal stops at once).
    public func run() throws(DaemonError) {
        defer {
            core.closeAll()
            logger.info("stopped")
            if ownsSocketPath { FileSystem.remove(socketPath) }
        }
        // Ready means ready: the socket listens, the handler directories have been read, the loop starts now.
        core.start()
        systemd.ready(now: clock.now())
        core.updateStatus()
        // Start-up ran much code once (arguments, configuration, the source's look at the screen): an idle daemon
        // keeps only what it runs from here on.
        ProcessMemory.releaseIdleCode()
        wakes.register(.signals, signals.descriptor.raw, .readable)
        wakes.register(.listener, listener.raw, .readable)
        wakes.schedule(.watchdog, at: systemd.nextWatchdogAt)
        while !core.isDone {
            let (ready, due) = try loop.wait(wakes, immediately: core.hasBacklog, now: clock.now)
            for (wake, event) in ready {
                switch wake {
                case .signals:
                    while let signal = signals.next() { if core.signalled(signal) { return } }
                case .listener:
                    if event.readable { acceptPeers() }
                default:
                    core.handle(wake, event, now: clock.now())
                }
            }
            let now = clock.now()
            for wake in due {
                switch wake {
                case .watchdog:
                    // Pinged from the loop's own timer: a loop that is stuck stops pinging, and systemd restarts it.
                    systemd.tick(now: now)
                    wakes.schedule(.watchdog, at: systemd.nextWatchdogAt)
                case .acceptResumes:
                    wakes.register(.listener, listener.raw, .readable)
                default:
                    core.handle(wake, now: now)
                }
            }
            core.endTurn()
        }
    }

    /// Takes every connection waiting: those of the user broadcastd runs as go to the core.
    private func acceptPeers() {
        while true {
            let socket: Descriptor?
            do { socket = try UnixSocket.accept(listener) } catch {
                // Out of descriptors (or kernel memory): the connection waits in the backlog, and the
                // listener with it, for a quarter of a second, so that the loop does not spin on it.
                let now = clock.now()
                wakes.deregister(.listener)
                wakes.schedule(.acceptResumes, at: now + 250_000_000)
                if let text = acceptWarnings.pass(
                    "accept failed: \(error); not accepting connections for 0.25 s", now: now)
                {
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
                    refused(
                        "refused a connection from pid \(peer.pid), user \(peer.uid): only user "
                            + "\(UnixSocket.ownUser), whom broadcastd runs as, may connect")
                    continue
                }
            } catch {
                refused("refused a connection whose peer cannot be identified: \(error)")
                continue
            }
            core.peerConnected(socket)
        }
    }

    private func refused(_ text: @autoclosure () -> String) {
        if let line = refusalWarnings.pass(text(), now: clock.now()) { logger.warning("\(line)") }
    }
}

extension SystemdLifecycle: ServiceNotifier {}
