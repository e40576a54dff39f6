import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Logging

/// Everyone connected to broadcastd: the listening socket and its checks (same user, at most `maxPeers`,
/// backing off when out of descriptors), each peer's input (bounded in size, depth, count and time) and
/// output queue, HELLO, and closing. Whole messages from peers that said HELLO go to `onMessage`.
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

    let listener: Descriptor
    private let logger: Logger
    private let clock: DaemonClock
    private let serverName: String
    private(set) var sessions: [Int: PeerSession] = [:]
    private var nextSessionID = 1
    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    /// While accept() can get no descriptor (EMFILE, ENFILE), the listener rests until then instead of
    /// waking the loop at once again.
    private(set) var acceptPausedUntil: UInt64?
    private var acceptWarnings = WarningThrottle()
    private var refusalWarnings = WarningThrottle()

    /// A whole message from a peer that said HELLO.
    var onMessage: (Message, PeerSession) -> Void = { _, _ in }
    /// A handler's connection said HELLO (it was sent WELCOME).
    var onHandlerHello: (PeerSession) -> Void = { _ in }
    /// A connection was closed (by either side); it is no longer among `sessions`.
    var onClosed: (PeerSession) -> Void = { _ in }

    init(listener: Descriptor, serverName: String, clock: DaemonClock, logger: Logger) {
        self.listener = listener
        self.serverName = serverName
        self.clock = clock
        self.logger = logger
    }

    /// What the loop watches for the peers: the listener (unless it rests), and each peer for reading
    /// (unless held back) and writing (when something waits).
    func watches() -> [(fd: Int32, interest: Poller.Interest, wake: Wake)] {
        var watches: [(fd: Int32, interest: Poller.Interest, wake: Wake)] = [(acceptPausedUntil == nil ? listener.raw : -1, .readable, .listener)]
        for session in sessions.values {
            var interest: Poller.Interest = []
            if session.wantsRead { interest.insert(.readable) }
            if session.wantsWrite { interest.insert(.writable) }
            watches.append((session.socket.raw, interest, .peer(session)))
        }
        return watches
    }

    /// A peer's messages wait in its decoder: the loop must come back at once.
    var hasBacklog: Bool { sessions.values.contains { $0.wantsRead && $0.hasBacklog } }

    /// The earliest time a peer or the listener needs attention.
    var nextDeadline: UInt64? {
        (sessions.values.compactMap(\.deadline) + [acceptPausedUntil].compactMap { $0 }).min()
    }

    /// What poll said of a peer's socket.
    func serve(_ session: PeerSession, _ event: Poller.Event) {
        guard sessions[session.id] != nil else { return }
        if session.wantsRead && (event.readable || event.closed || session.hasBacklog) {
            read(session)
        } else if event.closed {
            session.closeReason = "" // it hung up without reading what it asked for
        }
        if event.writable { session.flush() }
    }

    /// Peers that took too long (to say HELLO, to finish a message) are closed; a resting listener wakes.
    func checkDeadlines(now: UInt64) {
        if let at = acceptPausedUntil, now >= at { acceptPausedUntil = nil }
        for session in sessions.values where !session.isClosing {
            if let reason = session.overdue(now: now) { protocolViolation(session, reason) }
        }
    }

    func acceptPeers() {
        while true {
            let socket: Descriptor?
            do { socket = try UnixSocket.accept(listener) } catch {
                // Out of descriptors (or kernel memory): the connection waits in the backlog, and the
                // listener with it, for a quarter of a second, so that the loop does not spin on it.
                let now = clock.now()
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
            if sessions.values.count(where: { !$0.isLaunchedHandler }) >= Self.maxPeers { makeRoom() }
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

    /// Closes the connection that has been silent longest (no HELLO), when it has been for `silentGrace`.
    private func makeRoom() {
        let now = clock.now()
        guard let silent = sessions.values.filter({ $0.role == nil && !$0.isLaunchedHandler && !$0.isClosing })
            .min(by: { $0.connectedAt < $1.connectedAt }), now >= silent.connectedAt + Self.silentGrace else { return }
        let seconds = Double((now - silent.connectedAt) / 100_000_000) / 10
        silent.closeReason = ""
        close(silent)
        refused("closed \(silent.name), silent for \(seconds) s without HELLO, to make room for a new connection: " +
                "\(Self.maxPeers) peers were connected")
    }

    private func refused(_ text: @autoclosure () -> String) {
        if let line = refusalWarnings.pass(text(), now: clock.now()) { logger.warning("\(line)") }
    }

    @discardableResult
    func addSession(_ socket: Descriptor, isLaunchedHandler: Bool = false) -> PeerSession {
        let session = PeerSession(id: nextSessionID, socket: socket, isLaunchedHandler: isLaunchedHandler, now: clock.now())
        nextSessionID += 1
        sessions[session.id] = session
        logger.debug("\(session.name) connected")
        return session
    }

    private func read(_ session: PeerSession) {
        defer { notePartialInput(session) }
        session.hasBacklog = false
        var handled = 0
        let started = clock.now()
        for _ in 0..<16 where !session.isClosing {
            do {
                while !session.isClosing, let frame = try session.decoder.nextFrame() {
                    switch frame {
                    case .message(let message): dispatch(message, from: session)
                    case .unknown(let opcode, let seq, let descriptors):
                        unsupported(opcode, seq: seq, descriptors: descriptors, from: session)
                    }
                    handled += 1
                    if handled == Self.messagesPerTurn || clock.now() - started > Self.timePerTurn {
                        session.hasBacklog = true
                        return
                    }
                }
            } catch {
                protocolViolation(session, error.description)
                return
            }
            // A peer closed for what it sent keeps that reason: what it does next (hang up) is not read.
            if session.isClosing { return }
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
        session.partialSince = pending == 0 ? nil : session.partialSince ?? clock.now()
        guard !session.isLaunchedHandler, pending > 0, !session.isClosing else { return }
        let total = sessions.values.reduce(0) { $0 + ($1.isLaunchedHandler ? 0 : $1.decoder.pendingByteCount) }
        if total > PeerSession.partialInputLimit {
            protocolViolation(session, "its unfinished message (\(pending) bytes so far) takes the unfinished input of all peers past " +
                              "\(PeerSession.partialInputLimit >> 20) MiB")
        }
    }

    private func dispatch(_ message: Message, from session: PeerSession) {
        // Peers never send descriptors (docs/protocol.md §4): whatever came is closed with the message.
        guard message.descriptors.isEmpty else {
            protocolViolation(session, "\(message.opcode) came with \(message.descriptors.count) descriptor(s); peers send none", seq: message.seq)
            return
        }
        guard session.role != nil else {
            hello(message, from: session)
            return
        }
        onMessage(message, session)
    }

    /// Revision 2.6: a message of an opcode broadcastd does not know, from a peer that said HELLO, is a newer peer's
    /// request: refused with `unsupported`, and the connection stays. Before HELLO, or with descriptors, it breaks
    /// the protocol as any message would.
    private func unsupported(_ opcode: UInt16, seq: UInt32, descriptors: Int, from session: PeerSession) {
        let digits = String(opcode, radix: 16)
        let hex = "0x" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
        guard descriptors == 0 else {
            return protocolViolation(session, "message \(hex) came with \(descriptors) descriptor(s); peers send none",
                                     seq: seq)
        }
        guard session.role != nil else {
            return protocolViolation(session, "it sent a message of unknown opcode \(hex) before HELLO", seq: seq)
        }
        let refusal = BroadcastError(.unsupported, "broadcastd (protocol revision \(ProtocolLimits.revision)) has no " +
                                     "message \(hex); its WELCOME's revision and features say what it offers")
        logger.debug("\(session.name) sent unknown message \(hex): refused as unsupported")
        reply(session, seq, .failure(refusal))
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
        guard (ProtocolLimits.oldestVersion...ProtocolLimits.version).contains(hello.protocol) else {
            let text = "protocol version mismatch: broadcastd speaks versions \(ProtocolLimits.oldestVersion) to \(ProtocolLimits.version), " +
                "\(session.client) speaks version \(hello.protocol)"
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
        session.protocolVersion = hello.protocol
        session.enqueue(.json(.welcome, seq: message.seq, Welcome(server: serverName, protocol: hello.protocol)))
        if hello.role == .handler { onHandlerHello(session) }
        session.flush()
    }

    /// Closes a peer that broke the protocol; everything else carries on.
    func protocolViolation(_ session: PeerSession, _ reason: String, seq: UInt32 = 0) {
        session.enqueue(.json(.error, seq: seq, BroadcastError(.protocolError, reason)))
        session.flush()
        session.closeReason = reason
    }

    /// Queues `result` as the reply to request `seq`, and sends what the socket takes.
    func reply(_ session: PeerSession, _ seq: UInt32, _ result: Result<Message, BroadcastError>) {
        switch result {
        case .success(let message): session.enqueue(message)
        case .failure(let error): session.enqueue(.json(.error, seq: seq, error))
        }
        session.flush()
    }

    /// Sends an event to every subscribed controller; nothing is encoded when none is subscribed.
    func publish(_ message: @autoclosure () -> Message) {
        let subscribers = sessions.values.filter(\.subscribed)
        guard !subscribers.isEmpty else { return }
        let message = message()
        for session in subscribers {
            session.enqueue(message)
            session.flush()
        }
    }

    var hasSubscribers: Bool { sessions.values.contains(where: \.subscribed) }

    func closeFinishedSessions() {
        for session in sessions.values where session.isClosing { close(session) }
    }

    /// Closes `session` now (its reason, if any, is logged).
    func close(_ session: PeerSession) {
        guard sessions[session.id] === session else { return }
        if let reason = session.closeReason, !reason.isEmpty {
            logger.warning("closing \(session.name): \(reason)")
        } else {
            logger.debug("\(session.name) disconnected")
        }
        sessions[session.id] = nil
        session.socket.close()
        session.decoder.closeDescriptors()
        onClosed(session)
    }

    func closeAll() {
        for session in sessions.values { session.socket.close() }
        sessions.removeAll()
    }
}
