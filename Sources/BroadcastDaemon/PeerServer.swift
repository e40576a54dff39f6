import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Logging

/// Everyone connected to broadcastd: who is admitted (at most `maxPeers`, the longest silent making room), each
/// peer's input (bounded in size, depth, count and time) and output queue, HELLO, and closing. What a peer's input
/// brings is handed back as `Input`, one at a time.
final class PeerServer {
    /// Most controllers and setup UIs connected at once; each may hold `PeerSession.peerQueueLimit`.
    static let maxPeers = 64
    /// With every place taken, a newcomer takes the place of the longest silent connection that has not said HELLO
    /// for this long (a controller says it at once): silent connections cannot keep controllers out for 10 s.
    static let silentGrace: UInt64 = 1_000_000_000
    /// Most messages taken from one peer per turn of the loop, and most time spent on them, so a peer that
    /// floods cannot make capture late: the rest wait in its decoder (and its socket) for the next turn.
    static let messagesPerTurn = 64
    static let timePerTurn: UInt64 = 2_000_000

    /// What a peer's input brings the daemon, in order.
    enum Input {
        /// A whole message from a peer that said HELLO.
        case message(Message)
        /// A handler's connection said HELLO (it was sent WELCOME).
        case handlerHello
    }

    private let logger: Logger
    private let clock: DaemonClock
    private let wakes: WakeRegistry
    private let serverName: String
    private(set) var sessions: [Int: PeerSession] = [:]
    private var nextSessionID = 1
    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    private var refusalWarnings = WarningThrottle()

    init(serverName: String, clock: DaemonClock, wakes: WakeRegistry, logger: Logger) {
        self.serverName = serverName
        self.clock = clock
        self.wakes = wakes
        self.logger = logger
    }

    /// A peer's messages wait in its decoder: the loop must come back at once.
    var hasBacklog: Bool { sessions.values.contains { $0.wantsRead && $0.hasBacklog } }

    /// Serves every peer whose messages wait in its decoder (poll has nothing to say of them).
    func serveBacklog(_ take: (PeerSession, Input) -> Void) {
        for session in sessions.values where session.wantsRead && session.hasBacklog {
            serve(session, .none) { take(session, $0) }
        }
    }

    /// What poll said of a peer's socket: what it sent goes to `take`, message by message.
    func serve(_ session: PeerSession, _ event: Poller.Event, _ take: (Input) -> Void) {
        guard sessions[session.id] != nil else { return }
        if session.wantsRead && (event.readable || event.closed || session.hasBacklog) {
            read(session, take)
        } else if event.closed {
            session.markClosing("")  // it hung up without reading what it asked for
        }
        if event.writable { session.flush() }
    }

    /// A peer's deadline came: one that took too long (to say HELLO, to finish a message) is closed.
    func deadlineCame(for session: PeerSession, now: UInt64) {
        if !session.isClosing, let reason = session.overdue(now: now) { session.violated(reason) }
        session.updateDeadline()
    }

    /// A new connection of the user's: a session, unless `maxPeers` are connected (and none has been silent long
    /// enough to make room), when it is refused with a reason.
    @discardableResult
    func admit(_ socket: Descriptor) -> PeerSession? {
        if sessions.values.count(where: { !$0.isLaunchedHandler }) >= Self.maxPeers { makeRoom() }
        guard sessions.values.count(where: { !$0.isLaunchedHandler }) < Self.maxPeers else {
            let refusal = BroadcastError(
                .busy, "broadcastd already has \(Self.maxPeers) connections; close some and try again")
            _ = try? UnixSocket.send(socket, Message.json(.error, seq: 0, refusal).encoded(), from: 0)
            // What it sent already is read first: closing over unread bytes would reset the connection, refusal and all.
            _ = try? UnixSocket.receive(socket, into: &readBuffer)
            socket.close()
            refused("refused a connection: \(Self.maxPeers) peers are connected already")
            return nil
        }
        return addSession(socket)
    }

    /// Closes the connection that has been silent longest (no HELLO; of those that came at once, the first), when it
    /// has been for `silentGrace`.
    private func makeRoom() {
        let now = clock.now()
        guard
            let silent = sessions.values.filter({ !$0.saidHello && !$0.isLaunchedHandler && !$0.isClosing })
                .min(by: { ($0.connectedAt, $0.id) < ($1.connectedAt, $1.id) }),
            now >= silent.connectedAt + Self.silentGrace
        else { return }
        let seconds = Double((now - silent.connectedAt) / 100_000_000) / 10
        silent.markClosing("")
        close(silent)
        refused(
            "closed \(silent.name), silent for \(seconds) s without HELLO, to make room for a new connection: "
                + "\(Self.maxPeers) peers were connected")
    }

    private func refused(_ text: @autoclosure () -> String) {
        if let line = refusalWarnings.pass(text(), now: clock.now()) { logger.warning("\(line)") }
    }

    /// A session for `socket`; `broadcast`: the connection broadcastd made for that broadcast's handler.
    @discardableResult
    func addSession(_ socket: Descriptor, launchedFor broadcast: UInt32? = nil) -> PeerSession {
        let session = PeerSession(
            id: nextSessionID, socket: socket, launchedFor: broadcast, now: clock.now(), wakes: wakes)
        nextSessionID += 1
        sessions[session.id] = session
        logger.debug("\(session.name) connected")
        return session
    }

    private func read(_ session: PeerSession, _ take: (Input) -> Void) {
        defer { notePartialInput(session) }
        session.leaveBacklog(false)
        var handled = 0
        let started = clock.now()
        for _ in 0..<16 where !session.isClosing {
            do {
                while !session.isClosing, let frame = try session.nextFrame() {
                    switch frame {
                    case .message(let message): dispatch(message, from: session, take)
                    case .unknown(let opcode, let seq, let descriptors):
                        unsupported(opcode, seq: seq, descriptors: descriptors, from: session)
                    }
                    handled += 1
                    if handled == Self.messagesPerTurn || clock.now() - started > Self.timePerTurn {
                        session.leaveBacklog(true)
                        return
                    }
                }
            } catch {
                session.violated(error.description)
                return
            }
            // A peer closed for what it sent keeps that reason: what it does next (hang up) is not read.
            if session.isClosing { return }
            switch session.receive(into: &readBuffer) {
            case .bytes: continue
            case .nothing, .gone: return
            case .tooManyDescriptors:
                session.violated("it sent more than \(UnixSocket.maxDescriptorsPerMessage) descriptors at once")
                return
            }
        }
        session.leaveBacklog(!session.isClosing)
    }

    /// Keeps the time a peer's unfinished message has waited, and closes a controller or setup UI whose
    /// unfinished message takes the unfinished input of all of them past `PeerSession.partialInputLimit`.
    private func notePartialInput(_ session: PeerSession) {
        let pending = session.notePartialInput(now: clock.now())
        guard !session.isLaunchedHandler, pending > 0, !session.isClosing else { return }
        let total = sessions.values.reduce(0) { $0 + ($1.isLaunchedHandler ? 0 : $1.decoder.pendingByteCount) }
        if total > PeerSession.partialInputLimit {
            session.violated(
                "its unfinished message (\(pending) bytes so far) takes the unfinished input of all "
                    + "peers past \(PeerSession.partialInputLimit >> 20) MiB")
        }
    }

    private func dispatch(_ message: Message, from session: PeerSession, _ take: (Input) -> Void) {
        // Peers never send descriptors (docs/protocol.md §4), but for a launched handler's SHARE_RING (revision 2.9,
        // its one ring, which its handler link checks): whatever came is closed with the message.
        let shared = message.opcode == .shareRing && session.isLaunchedHandler && session.saidHello
        guard message.descriptors.isEmpty || (shared && message.descriptors.count == 1) else {
            session.violated(
                "\(message.opcode) came with \(message.descriptors.count) descriptor(s); peers send none",
                seq: message.seq)
            return
        }
        guard session.saidHello else {
            if hello(message, from: session) { take(.handlerHello) }
            return
        }
        take(.message(message))
    }

    /// Revision 2.6: a message of an opcode broadcastd does not know, from a peer that said HELLO, is a newer peer's
    /// request: refused with `unsupported`, and the connection stays. Before HELLO, or with descriptors, it breaks
    /// the protocol as any message would.
    private func unsupported(_ opcode: UInt16, seq: UInt32, descriptors: Int, from session: PeerSession) {
        let digits = String(opcode, radix: 16)
        let hex = "0x" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
        guard descriptors == 0 else {
            return session.violated("message \(hex) came with \(descriptors) descriptor(s); peers send none", seq: seq)
        }
        guard session.saidHello else {
            return session.violated("it sent a message of unknown opcode \(hex) before HELLO", seq: seq)
        }
        let refusal = BroadcastError(
            .unsupported,
            "broadcastd (protocol revision \(ProtocolLimits.revision)) has no "
                + "message \(hex); its WELCOME's revision and features say what it offers")
        logger.debug("\(session.name) sent unknown message \(hex): refused as unsupported")
        session.reply(seq, .failure(refusal))
    }

    /// HELLO, answered with WELCOME, or the peer is closed saying why. True when a launched handler said it.
    private func hello(_ message: Message, from session: PeerSession) -> Bool {
        guard message.opcode == .hello else {
            session.violated("it sent \(message.opcode.name) before HELLO", seq: message.seq)
            return false
        }
        let hello: Hello
        do { hello = try message.decode(Hello.self) } catch {
            session.violated(error.description, seq: message.seq)
            return false
        }
        session.named(hello.client ?? "?")
        guard (ProtocolLimits.oldestVersion...ProtocolLimits.version).contains(hello.protocol) else {
            let text =
                "protocol version mismatch: broadcastd speaks versions \(ProtocolLimits.oldestVersion) to "
                + "\(ProtocolLimits.version), \(session.client) speaks version \(hello.protocol)"
            session.enqueue(.json(.error, seq: message.seq, BroadcastError(.versionMismatch, text)))
            session.flush()
            session.markClosing(text)
            return false
        }
        if (hello.role == .handler) != session.isLaunchedHandler {
            session.violated(
                hello.role == .handler
                    ? "handlers are launched by broadcastd and talk over the socket it passes them (BROADCASTD_HANDLER_FD); "
                        + "attaching over the listening socket is not supported"
                    : "the handler connection may only say HELLO as a handler", seq: message.seq)
            return false
        }
        session.welcomed(as: hello.role, version: hello.protocol)
        session.enqueue(.json(.welcome, seq: message.seq, Welcome(server: serverName, protocol: hello.protocol)))
        session.flush()
        return hello.role == .handler
    }

    /// Sends an event to every subscribed controller; nothing is encoded when none is subscribed.
    func publish(_ message: @autoclosure () -> Message) {
        let subscribers = sessions.values.filter(\.isSubscribed)
        guard !subscribers.isEmpty else { return }
        let message = message()
        for session in subscribers {
            session.enqueue(message)
            session.flush()
        }
    }

    var hasSubscribers: Bool { sessions.values.contains(where: \.isSubscribed) }

    /// Closes the sessions marked for closing; returns them.
    func closeFinishedSessions() -> [PeerSession] {
        let finished = sessions.values.filter(\.isClosing)
        for session in finished { close(session) }
        return finished
    }

    /// Closes `session` now (its reason, if any, is logged). What it was doing is the daemon's to end.
    func close(_ session: PeerSession) {
        guard sessions[session.id] === session else { return }
        if let reason = session.closeReason, !reason.isEmpty {
            logger.warning("closing \(session.name): \(reason)")
        } else {
            logger.debug("\(session.name) disconnected")
        }
        sessions[session.id] = nil
        session.closeDescriptors()
    }

    func closeAll() {
        for session in sessions.values { session.closeDescriptors() }
        sessions.removeAll()
    }
}
