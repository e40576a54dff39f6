import BroadcastCapture
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Logging
import Synchronization
import Testing

@testable import BroadcastCore
@testable import BroadcastDaemon

/// broadcastd's core, driven as its loop drives it but by the test, on a hand-moved clock (as swift-nio's
/// EmbeddedChannel and EmbeddedEventLoop.advanceTime): no poll, no real handler process, no sleep. Peers are socket
/// pairs whose far end the test speaks for; a launched handler is a `StandInProcess`, its connection the test's.
final class CoreHarness {
    let clock = ManualClock()
    let wakes = WakeRegistry()
    let launcher = StandInLauncher()
    let notifier = StatusRecorder()
    let log = LogRecorder()
    let source: SyntheticSource
    let core: DaemonCore
    let folder: String

    /// The manifest of the stand-in handler the tests start: commands `count` and `hang`, and it can discard; its setup
    /// field `camera` (on) asks for the camera.
    static let standIn = """
        {"name": "stand-in", "displayName": "Stand-in", "exec": "/bin/true", "discard": true,
         "url": {"prompt": "Where"}, "setupFields": [{"name": "frameRate", "prompt": "Frames per second"},
           {"name": "camera", "prompt": "The camera too", "choices": ["on", "off"]}],
         "commands": [{"name": "count", "help": "Counts"}, {"name": "hang", "help": "Never answers"}]}
        """

    /// A core with the synthetic source at `fps` (64x32, app and mic audio), and the stand-in handler installed.
    init(
        fps: Int = 30, sources: CaptureSources? = nil, _ change: (inout DaemonConfiguration) -> Void = { _ in }
    ) throws {
        folder =
            FileManager.default.temporaryDirectory.appendingPathComponent("core-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Self.standIn.write(toFile: folder + "/stand-in.json", atomically: true, encoding: .utf8)
        var configuration = DaemonConfiguration(socketPath: folder + "/broadcastd.sock")
        configuration.extraHandlerDirectories = [folder]
        change(&configuration)
        source = SyntheticSource(.init(video: VideoFormat(width: 64, height: 32), framesPerSecond: fps))
        let recorder = log
        var logger = Logger(label: "broadcastd") { _ in RecordingLogHandler(recorder) }
        logger.logLevel = .debug
        core = DaemonCore(
            configuration: configuration, source: source, sources: sources, socketPath: configuration.socketPath,
            logger: logger, clock: clock, wakes: wakes, launcher: launcher, notifier: notifier)
        core.start()
    }

    deinit {
        core.closeAll()
        try? FileManager.default.removeItem(atPath: folder)
    }

    // MARK: - Driving it

    /// The end of a turn of the loop (what it does after every wake-up); then, as the loop's next poll would, peers
    /// whose output waits and whose sockets have room take it.
    func endTurn() {
        core.endTurn()
        for _ in 0..<8 {
            let waiting = wakes.descriptors.filter { $0.value.interest.contains(.writable) }.map {
                ($0.key, $0.value.fd)
            }
            let events = (try? Poller.wait(waiting.map { ($0.1, .writable) }, timeoutMilliseconds: 0)) ?? []
            let ready = zip(waiting, events).filter { $1.writable }
            guard !ready.isEmpty else { return }
            for ((wake, _), event) in ready { core.handle(wake, event, now: clock.now()) }
            core.endTurn()
        }
    }

    /// Moves the clock on by `nanoseconds`, handing the core every timer that comes meanwhile, at its time, as the
    /// loop would if it were never late. `releasing`: handlers that take their frames as they come and give each
    /// slot back at once.
    func advance(by nanoseconds: UInt64, releasing handlers: [Handler] = []) throws {
        let end = clock.now() + nanoseconds
        while let at = wakes.nextDeadline, at <= end {
            clock.advance(by: at > clock.now() ? at - clock.now() : 0)
            while let wake = wakes.nextDue(now: clock.now()) { core.handle(wake, now: clock.now()) }
            endTurn()
            for handler in handlers { handler.taken += try videoSamples(handler) }
        }
        clock.advance(by: end - clock.now())
    }

    /// A peer: its session in the core and the test's end of its connection.
    final class Peer {
        let session: PeerSession
        let connection: PeerConnection
        /// What it was sent and the test has not looked at yet.
        var inbox: [Message] = []
        private var seq: UInt32 = 100

        init(session: PeerSession, connection: PeerConnection) {
            self.session = session
            self.connection = connection
        }

        func nextSeq() -> UInt32 {
            seq += 1
            return seq
        }

        /// Everything it was sent, in order (what came before included); a connection the core closed ends it.
        func received() throws -> [Message] {
            do {
                while let message = try connection.receive(timeoutMilliseconds: 0) { inbox.append(message) }
            } catch {
                if error != .closed { throw error }
            }
            defer { inbox = [] }
            return inbox
        }
    }

    /// Everything `peer` was sent, the core's queue for it included: it reads, and the core sends more, until nothing
    /// is left.
    func drain(_ peer: Peer) throws -> [Message] {
        var all: [Message] = []
        while true {
            let more = try peer.received()
            guard !more.isEmpty else { return all }
            all += more
            endTurn()
        }
    }

    /// A connection to the core, as the listener hands one over.
    func connect() throws -> Peer {
        let (ours, theirs) = try UnixSocket.pair()
        try ours.setNonBlocking()
        let session = try #require(core.peerConnected(ours))
        return Peer(session: session, connection: PeerConnection(socket: theirs))
    }

    /// A connection that said HELLO as `role` and was welcomed.
    func peer(_ role: PeerRole, protocol version: Int = ProtocolLimits.version) throws -> Peer {
        let peer = try connect()
        try send(.json(.hello, seq: 1, Hello(role: role, client: "core-test", protocol: version)), from: peer)
        #expect(try peer.received().map(\.opcode) == [.welcome])
        return peer
    }

    /// A controller subscribed to events.
    func subscribedController() throws -> Peer {
        let controller = try peer(.controller)
        #expect(try request(.subscribe, from: controller).opcode == .ok)
        _ = try controller.received()
        return controller
    }

    /// Writes `message` on the peer's end and lets the core read it, as a turn of the loop would.
    func send(_ message: Message, from peer: Peer) throws {
        try peer.connection.send(message)
        core.handle(.peer(peer.session.id), Poller.Event(readable: true), now: clock.now())
        endTurn()
    }

    /// Sends a request and returns its reply; what else the peer was sent meanwhile stays in its inbox.
    func request(_ opcode: Opcode, _ body: some Encodable = Empty(), from peer: Peer) throws -> Message {
        let seq = peer.nextSeq()
        try send(.json(opcode, seq: seq, body), from: peer)
        var others: [Message] = []
        defer { peer.inbox = others + peer.inbox }
        while let message = try peer.connection.receive(timeoutMilliseconds: 0) {
            if message.seq == seq, message.opcode != .stateChanged { return message }
            others.append(message)
        }
        throw HarnessFailure("no reply to \(opcode.name) (seq \(seq)); the peer was sent \(others.map(\.opcode.name))")
    }

    /// The core's status, as a version 2 controller reads it.
    func status(_ controller: Peer) throws -> BroadcastStatus {
        try request(.getStatus, from: controller).decode(BroadcastStatus.self)
    }

    // MARK: - Broadcasts

    /// A launched handler: the stand-in process and the test's end of its connection.
    final class Handler {
        let peer: Peer
        let process: StandInProcess
        var pool: UInt32 = 0
        var cameraPool: UInt32?
        var started: BroadcastStart?
        /// Frames it took (and gave back) while the clock moved.
        var taken: [VideoSampleHeader] = []
        var framesTaken: Int { taken.count }

        init(peer: Peer, process: StandInProcess) {
            self.peer = peer
            self.process = process
        }
    }

    /// START, the setup UI's completion, and the handler's HELLO: the broadcast is starting, its handler was sent
    /// POOL and BROADCAST_STARTED. `ready`: the handler says READY, and the broadcast is live.
    func startBroadcast(
        from controller: Peer, setupInfo: [String: String] = [:], maxDuration: Double? = nil,
        ready: Bool = true
    ) throws -> (UInt32, Handler) {
        let id = try setUpBroadcast(from: controller, setupInfo: setupInfo, maxDuration: maxDuration)
        return (id, try connectHandler(of: id, ready: ready))
    }

    /// START and the setup UI's completion: the broadcast's handler is launched, and has not said HELLO yet.
    func setUpBroadcast(
        from controller: Peer, setupInfo: [String: String] = [:], maxDuration: Double? = nil
    ) throws -> UInt32 {
        let ok = try request(.start, StartRequest(handler: "stand-in", maxDuration: maxDuration), from: controller)
        let id = try #require(try ok.decode(BroadcastReference.self).broadcast, "\(ok.opcode)")
        let setup = try peer(.setup)
        _ = try request(.getSetupRequest, BroadcastReference(broadcast: id), from: setup)
        let completed = try request(
            .completeSetup, SetupCompletion(broadcast: id, url: "file:///tmp/x", setupInfo: setupInfo),
            from: setup)
        #expect(completed.opcode == .ok)
        return id
    }

    /// The handler launched last, for broadcast `id`, says HELLO: it was sent POOL and BROADCAST_STARTED. `ready`: it
    /// says READY, and the broadcast is live.
    func connectHandler(of id: UInt32, ready: Bool = true) throws -> Handler {
        let pid = core.broadcast(id)?.link?.process.pid
        let launched = try #require(launcher.launched.last { $0.process.pid == pid })
        let session = try #require(core.broadcast(id)?.link?.session)
        let handler = Handler(
            peer: Peer(session: session, connection: PeerConnection(socket: launched.socket)),
            process: launched.process)
        try send(.json(.hello, seq: 1, Hello(role: .handler, client: "stand-in")), from: handler.peer)
        let opening = try handler.peer.received()
        // WELCOME first; the camera's POOL (revision 2.8) may follow the screen's, and its CAMERA_FORMAT the start.
        let pools = try opening.filter { $0.opcode == .pool }.map { try $0.decode(PoolAnnouncement.self) }
        #expect(
            opening.first?.opcode == .welcome
                && opening.map(\.opcode).filter { $0 != .pool && $0 != .cameraFormat } == [.welcome, .broadcastStarted]
                && pools.count(where: { $0.camera != true }) == 1,
            "\(opening.map(\.opcode))")
        handler.pool = try #require(pools.first { $0.camera != true }).pool
        handler.cameraPool = pools.first { $0.camera == true }?.pool
        handler.started = try #require(opening.first { $0.opcode == .broadcastStarted }).decode(BroadcastStart.self)
        handler.peer.inbox = opening.filter { $0.opcode == .cameraFormat } + handler.peer.inbox
        if ready {
            try send(.json(.ready, seq: 2, Empty()), from: handler.peer)
            #expect(core.broadcast(id)?.phase == .live)
        }
        return handler
    }

    /// The video samples `handler` was sent since it last looked (the rest stay in its inbox); `release`: each slot
    /// is given back at once.
    func videoSamples(_ handler: Handler, release: Bool = true) throws -> [VideoSampleHeader] {
        var samples: [VideoSampleHeader] = []
        var others: [Message] = []
        for message in try handler.peer.received() {
            guard message.opcode == .videoSample else {
                others.append(message)
                continue
            }
            let header = try VideoSampleHeader(decoding: message.payload)
            samples.append(header)
            if release {
                try send(SlotRelease(pool: header.pool, slot: header.slot).message, from: handler.peer)
            }
        }
        handler.peer.inbox = others + handler.peer.inbox
        return samples
    }

    /// The handler's process exits with `status`, and the core sees its exit.
    func exit(_ handler: Handler, _ status: ChildProcess.ExitStatus, broadcast: UInt32) {
        handler.process.exitStatus = status
        core.handle(.handlerExited(broadcast), Poller.Event(readable: true), now: clock.now())
        endTurn()
    }
}

struct HarnessFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Launches stand-ins: each launch is kept, with the test's end of the handler's connection.
final class StandInLauncher: HandlerLauncher {
    private(set) var launched:
        [(process: StandInProcess, socket: Descriptor, path: String, environment: [String: String])] = []

    func launch(
        path: String, arguments: [String], environment: [String: String],
        socket: Descriptor
    ) throws(SystemError) -> any HandlerProcess {
        let process = StandInProcess(pid: 5000 + Int32(launched.count))
        // The handler's end: a duplicate, since the core closes the one it passed once the process has it.
        launched.append((process, try socket.duplicate(), path, environment))
        return process
    }
}

/// What the core told the service manager.
final class StatusRecorder: ServiceNotifier {
    private(set) var lines: [String] = []
    private(set) var stopped = false

    func status(_ text: @autoclosure () -> String) {
        let line = text()
        if line != lines.last { lines.append(line) }
    }

    func stopping() {
        stopped = true
    }
}

/// Every line the core logged, with its level.
final class LogRecorder: Sendable {
    private let lines = Mutex<[(Logger.Level, String)]>([])

    func append(_ level: Logger.Level, _ text: String) {
        lines.withLock { $0.append((level, text)) }
    }

    var all: [(level: Logger.Level, text: String)] { lines.withLock { $0 } }

    func count(_ text: String) -> Int {
        all.count { $0.text.contains(text) }
    }
}

struct RecordingLogHandler: LogHandler {
    let recorder: LogRecorder
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug

    init(_ recorder: LogRecorder) {
        self.recorder = recorder
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        recorder.append(event.level, event.message.description)
    }
}
