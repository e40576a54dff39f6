import BroadcastCore
import BroadcastSystem
import Synchronization

/// A blocking connection to broadcastd, as controllers, setup UIs and handlers use it.
/// Sending is safe from any thread; receiving belongs to one thread.
public final class PeerConnection: @unchecked Sendable {
    public let socket: Descriptor
    private var decoder = MessageDecoder(skipsUnknownOpcodes: true)
    private var queued: [Message] = []
    private let sendLock = Mutex<UInt32>(0)
    private var readBuffer = [UInt8](repeating: 0, count: 256 * 1024)

    public init(socket: Descriptor) {
        self.socket = socket
    }

    /// Connects to the daemon's socket; the error says how to start the daemon when none listens. Only a
    /// server of this user is talked to: whatever another user's program bound there (a socket in a shared
    /// place) is refused before a byte is sent, for it would read every request, a stream key among them.
    public static func connect(path: String) throws(ProtocolError) -> PeerConnection {
        let socket: Descriptor
        let server: (pid: Int32, uid: UInt32)
        do {
            socket = try UnixSocket.connect(path: path)
            server = try UnixSocket.peer(socket)
        } catch {
            if error.isNotListening {
                throw .refused(
                    BroadcastError(
                        .notRunning,
                        "broadcastd is not running (nothing listens on \(path)); start it with `broadcastd &` "
                            + "or `systemctl --user start broadcastd.socket`"))
            }
            throw .transport(error)
        }
        guard server.uid == UnixSocket.ownUser else {
            throw .refused(
                BroadcastError(
                    .notRunning,
                    "refusing to talk to what listens on \(path): it is user \(server.uid)'s program "
                        + "(pid \(server.pid)), not your broadcastd (you are user \(UnixSocket.ownUser)), and would read "
                        + "what is sent to it. Remove that socket, or choose one in a directory only you can write to "
                        + "(--socket, BROADCASTD_SOCKET)"))
        }
        return PeerConnection(socket: socket)
    }

    /// A new request number, never 0.
    public func nextSequence() -> UInt32 {
        sendLock.withLock { seq in
            seq = seq == UInt32.max ? 1 : seq + 1
            return seq
        }
    }

    public func send(_ message: Message) throws(ProtocolError) {
        let bytes = message.encoded()
        let fds = message.descriptors.map(\.raw)
        let result: SystemError? = sendLock.withLock { _ in
            var offset = 0
            while offset < bytes.count {
                do throws(SystemError) {
                    offset += try UnixSocket.send(socket, bytes, from: offset, descriptors: offset == 0 ? fds : [])
                } catch {
                    return error
                }
            }
            return nil
        }
        if let result {
            throw result.isDisconnect ? .closed : .transport(result)
        }
    }

    /// The next message, blocking until one arrives; `.closed` at end of stream.
    public func receive() throws(ProtocolError) -> Message {
        if !queued.isEmpty { return queued.removeFirst() }
        while true {
            if let message = try decoder.next() { return message }
            try fill(timeoutMilliseconds: -1)
        }
    }

    /// The next message within `timeoutMilliseconds` (negative: no limit; 0: one already on its way), or nil.
    public func receive(timeoutMilliseconds: Int32) throws(ProtocolError) -> Message? {
        if timeoutMilliseconds < 0 { return try receive() }
        if !queued.isEmpty { return queued.removeFirst() }
        let deadline = MonotonicClock.now() + UInt64(timeoutMilliseconds) * 1_000_000
        while true {
            if let message = try decoder.next() { return message }
            // Past the deadline, what already waits on the socket is still taken (without waiting for more).
            let now = MonotonicClock.now()
            let left = now >= deadline ? 0 : Int32((deadline - now) / 1_000_000) + 1
            if try !fill(timeoutMilliseconds: left) { return nil }
        }
    }

    @discardableResult
    private func fill(timeoutMilliseconds: Int32) throws(ProtocolError) -> Bool {
        if timeoutMilliseconds >= 0 {
            let ready: [Poller.Event]
            do { ready = try Poller.wait([(socket.raw, .readable)], timeoutMilliseconds: timeoutMilliseconds) } catch {
                throw .transport(error)
            }
            if !ready[0].readable && !ready[0].closed { return false }
        }
        let received: UnixSocket.Received?
        do {
            received = try UnixSocket.receive(socket, into: &readBuffer)
        } catch {
            if error.isDisconnect { throw .closed }
            throw .transport(error)
        }
        guard let received else { return false }
        if received.count == 0 { throw .closed }
        decoder.append(descriptors: received.descriptors)
        readBuffer.withUnsafeBytes { decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<received.count])) }
        return true
    }

    /// Sends HELLO and waits for WELCOME; a version mismatch or refusal becomes `.refused`.
    @discardableResult
    public func hello(role: PeerRole, client: String) throws(ProtocolError) -> Welcome {
        try sendRequest(.json(.hello, seq: nextSequence(), Hello(role: role, client: client)))
        let reply = try receive()
        switch reply.opcode {
        case .welcome: return try reply.decode(Welcome.self)
        case .error: throw .refused(try reply.decode(BroadcastError.self))
        default: throw .unexpected(reply.opcode, "expected WELCOME in answer to HELLO")
        }
    }

    /// Sends a request and returns its reply (OK or the reply message). ERROR replies throw `.refused`.
    /// Messages that are not the reply (events) are kept for later `receive` calls.
    public func request(_ opcode: Opcode, _ body: some Encodable = Empty()) throws(ProtocolError) -> Message {
        let seq = nextSequence()
        try sendRequest(.json(opcode, seq: seq, body))
        // Messages queued earlier arrived before this request, so its reply is not among them.
        var others: [Message] = []
        defer { queued += others }
        while true {
            guard let reply = try decoder.next() else {
                try fill(timeoutMilliseconds: -1)
                continue
            }
            if reply.seq == seq {
                if reply.opcode == .error { throw .refused(try reply.decode(BroadcastError.self)) }
                return reply
            }
            others.append(reply)
        }
    }

    /// Sends a request on the receiving thread. When broadcastd has already closed the connection, what it
    /// said before closing (an ERROR: a refusal, say, of one connection too many) is what throws.
    private func sendRequest(_ message: Message) throws(ProtocolError) {
        do { try send(message) } catch {
            if error == .closed, let said = try? receive(), said.opcode == .error {
                throw .refused(try said.decode(BroadcastError.self))
            }
            throw error
        }
    }

    public func close() {
        socket.close()
    }
}
