import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// One connected peer, as the daemon sees it: its role once it said HELLO, the bytes it sent that
/// do not yet form a message, and what waits to be sent to it.
final class PeerSession {
    /// Most bytes of samples queued for a peer; past this, samples are dropped (and counted).
    static let sampleQueueLimit = 1 << 20
    /// Most bytes of any kind queued for the handler; a handler that lets this fill is not reading and is closed.
    static let handlerQueueLimit = 8 << 20
    /// The same for controllers and setup UIs, whose queue holds only replies and events.
    static let peerQueueLimit = 256 << 10
    /// While this much waits for a controller or setup UI, its requests are not read: a peer that
    /// sends requests and never reads the replies is held back by its own socket, not queued for.
    static let readPauseThreshold = 64 << 10
    /// Largest buffer small messages are joined into.
    static let joinedBufferLimit = 64 << 10
    /// A peer that has not said HELLO this long after connecting is closed (so that connections that
    /// say nothing cannot hold the places of those that would).
    static let helloTimeout: UInt64 = 10_000_000_000
    /// A peer that leaves a message unfinished this long is closed.
    static let partialMessageTimeout: UInt64 = 10_000_000_000
    /// Most bytes of unfinished messages all controllers and setup UIs together may hold in the daemon.
    static let partialInputLimit = 4 << 20

    let id: Int
    let socket: Descriptor
    var role: PeerRole?
    var client = "?"
    /// The protocol version it said HELLO with.
    var protocolVersion = ProtocolLimits.version
    var subscribed = false
    /// For setup peers: the broadcast whose setup request they fetched.
    var setupFor: UInt32?
    /// Set for the connection broadcastd made for the handler it launched.
    let isLaunchedHandler: Bool
    var decoder = MessageDecoder()
    private var outgoing: [(bytes: [UInt8], descriptors: [Descriptor], sent: Int)] = []
    private(set) var queuedBytes = 0
    /// Bytes the peer has taken off its socket so far.
    private(set) var bytesSent: UInt64 = 0
    var closeReason: String?
    /// When it connected, CLOCK_MONOTONIC ns.
    let connectedAt: UInt64
    /// Since when part of a message has waited in the decoder (nil: none does).
    var partialSince: UInt64?
    /// The size of the frame in the last SNAPSHOT sent to it, while that may still be unread (0: none).
    var snapshotBytes = 0
    /// Revision 2.3: the command it sent that is not answered yet (one at a time): its broadcast and id.
    var commandInFlight: (broadcast: UInt32, id: UInt32)?

    init(id: Int, socket: Descriptor, isLaunchedHandler: Bool = false, now: UInt64) {
        self.id = id
        self.socket = socket
        self.isLaunchedHandler = isLaunchedHandler
        connectedAt = now
    }

    /// When the peer will have taken too long: to say HELLO, or to finish a message.
    var deadline: UInt64? {
        [role == nil ? connectedAt + Self.helloTimeout : nil, partialSince.map { $0 + Self.partialMessageTimeout }]
            .compactMap { $0 }.min()
    }

    /// Why the peer has taken too long at `now`, or nil.
    func overdue(now: UInt64) -> String? {
        if role == nil && now >= connectedAt + Self.helloTimeout {
            return "it did not say HELLO within \(Self.helloTimeout / 1_000_000_000) s"
        }
        if let since = partialSince, now >= since + Self.partialMessageTimeout {
            return "it left a message unfinished for \(Self.partialMessageTimeout / 1_000_000_000) s"
        }
        return nil
    }

    /// Whether the last SNAPSHOT sent to the peer may still be unread: queued here, or in its socket.
    func snapshotUnread() -> Bool {
        guard snapshotBytes > 0 else { return false }
        if outgoing.contains(where: { !$0.descriptors.isEmpty }) || (try? UnixSocket.unreadBytes(socket)) ?? 1 > 0 {
            return true
        }
        snapshotBytes = 0
        return false
    }

    var name: String { "peer \(id) (\(role?.rawValue ?? "new")\(client == "?" ? "" : ", \(client)"))" }
    var wantsWrite: Bool { !outgoing.isEmpty }
    /// False while a controller or setup UI has not read enough of what it asked for.
    var wantsRead: Bool { isLaunchedHandler || queuedBytes < Self.readPauseThreshold }
    /// Set when the peer's messages were left in the decoder for the next turn of the loop.
    var hasBacklog = false
    var isClosing: Bool { closeReason != nil }

    /// Queues `message`. A sample (`droppable`) is refused when the peer is behind; anything else is
    /// always queued unless the peer has stopped reading altogether, which closes it.
    @discardableResult
    func enqueue(_ message: Message, droppable: Bool = false) -> Bool {
        guard !isClosing else { return false }
        let size = ProtocolLimits.headerSize + message.payload.count
        if droppable && queuedBytes + size > Self.sampleQueueLimit { return false }
        if queuedBytes + size > (isLaunchedHandler ? Self.handlerQueueLimit : Self.peerQueueLimit) {
            closeReason = "it stopped reading (\(queuedBytes) bytes queued)"
            return false
        }
        // Small messages join the last queued buffer, unless that one is being sent: its sent part is
        // only dropped when it is all sent, so a buffer that kept growing behind a slow reader would
        // keep everything ever sent to it (memory growing without bound).
        // Joined buffers stay small (64 KiB), so that none is copied whole as it grows: a queue a slow
        // handler lets fill to its limit costs its bytes, not twice as many.
        if message.descriptors.isEmpty, let last = outgoing.last, last.sent == 0, last.bytes.count + size <= Self.joinedBufferLimit {
            Message.appendHeader(to: &outgoing[outgoing.count - 1].bytes, opcode: message.opcode, seq: message.seq,
                                 payloadSize: message.payload.count, descriptorCount: 0)
            outgoing[outgoing.count - 1].bytes += message.payload
        } else {
            outgoing.append((message.encoded(), message.descriptors, 0))
        }
        queuedBytes += size
        return true
    }

    /// Sends as much as the socket takes now.
    func flush() {
        while !outgoing.isEmpty && !isClosing {
            let first = outgoing[0]
            do {
                let n = try UnixSocket.send(socket, first.bytes, from: first.sent,
                                            descriptors: first.sent == 0 ? first.descriptors.map(\.raw) : [])
                if n == 0 { return }
                bytesSent += UInt64(n)
                queuedBytes -= n
                outgoing[0].sent += n
                if outgoing[0].sent == first.bytes.count { outgoing.removeFirst() }
            } catch {
                closeReason = error.isDisconnect ? "" : "sending failed: \(error)"
            }
        }
    }
}
