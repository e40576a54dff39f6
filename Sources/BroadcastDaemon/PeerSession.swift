import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// One connected peer, as the daemon sees it: what it is once it said HELLO (with what only that kind of peer
/// has), the bytes it sent that do not yet form a message, and what waits to be sent to it. It keeps its socket's
/// registration (`Wake.peer`: readable unless held back, writable while output waits) and its deadline
/// (`Wake.peerDeadline`) up to date as they change.
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

    /// What a peer is: each kind with what only it has, so nothing outlives the role it belongs to.
    enum Role {
        /// It has not said HELLO yet.
        case new
        case controller(Controller)
        /// A setup UI, with the broadcast whose setup request it fetched (nil: none).
        case setup(fetched: UInt32?)
        /// The handler of `broadcast`, on the connection broadcastd made when it launched it.
        case handler(broadcast: UInt32)
    }

    /// What a controller has.
    struct Controller {
        var subscribed = false
        /// Revision 2.3: the command it sent that is not answered yet (one at a time).
        var command: PendingCommand?
        /// The size of the frame in the last SNAPSHOT sent to it, while that may still be unread (0: none).
        var snapshotBytes = 0
    }

    let id: Int
    let socket: Descriptor
    private let wakes: WakeRegistry
    private(set) var role = Role.new {
        didSet { updateDeadline() }
    }
    private(set) var client = "?"
    /// The protocol version it said HELLO with.
    private(set) var protocolVersion = ProtocolLimits.version
    /// For the connection broadcastd made for the handler it launched: that handler's broadcast.
    let launchedFor: UInt32?
    private(set) var decoder = MessageDecoder()
    private var outgoing: [(bytes: [UInt8], descriptors: [Descriptor], sent: Int)] = [] {
        didSet { updateInterest() }
    }
    private(set) var queuedBytes = 0 {
        didSet { updateInterest() }
    }
    /// What its socket is registered for.
    private var interest: Poller.Interest
    /// Bytes the peer has taken off its socket so far.
    private(set) var bytesSent: UInt64 = 0
    /// Why it is being closed ("" for no fault of its own); nil while it is not.
    private(set) var closeReason: String?
    /// When it connected, CLOCK_MONOTONIC ns.
    let connectedAt: UInt64
    /// Since when part of a message has waited in the decoder (nil: none does).
    private(set) var partialSince: UInt64? {
        didSet { updateDeadline() }
    }
    /// Set when the peer's messages were left in the decoder for the next turn of the loop.
    private(set) var hasBacklog = false

    init(id: Int, socket: Descriptor, launchedFor: UInt32? = nil, now: UInt64, wakes: WakeRegistry) {
        self.id = id
        self.socket = socket
        self.launchedFor = launchedFor
        self.wakes = wakes
        connectedAt = now
        interest = .readable
        wakes.register(.peer(id), socket.raw, interest)
        updateDeadline()
    }

    // MARK: - Its role

    var isLaunchedHandler: Bool { launchedFor != nil }
    var saidHello: Bool {
        if case .new = role { return false }
        return true
    }
    /// Its role as its HELLO said it.
    var peerRole: PeerRole? {
        switch role {
        case .new: nil
        case .controller: .controller
        case .setup: .setup
        case .handler: .handler
        }
    }

    /// Its HELLO named it `client` (before the version is checked, so that a refusal names it).
    func named(_ client: String) {
        self.client = client
    }

    /// Its HELLO was welcomed: it is what it said it is.
    func welcomed(as role: PeerRole, version: Int) {
        protocolVersion = version
        switch role {
        case .controller: self.role = .controller(Controller())
        case .setup: self.role = .setup(fetched: nil)
        case .handler: self.role = .handler(broadcast: launchedFor ?? 0)
        }
    }

    private var controller: Controller? {
        if case .controller(let controller) = role { return controller }
        return nil
    }

    private func updateController(_ change: (inout Controller) -> Void) {
        guard case .controller(var controller) = role else { return }
        change(&controller)
        role = .controller(controller)
    }

    var isSubscribed: Bool { controller?.subscribed == true }

    func subscribe() {
        updateController { $0.subscribed = true }
    }

    /// The command it sent that is not answered yet.
    var commandInFlight: PendingCommand? { controller?.command }

    func sent(_ command: PendingCommand) {
        updateController { $0.command = command }
    }

    /// Its command in flight is over (answered, timed out, its handler gone): which it was.
    func endCommand() -> PendingCommand? {
        defer { updateController { $0.command = nil } }
        return commandInFlight
    }

    /// For a setup UI: the broadcast whose setup request it fetched.
    var fetchedSetup: UInt32? {
        if case .setup(let fetched) = role { return fetched }
        return nil
    }

    func fetchSetup(_ broadcast: UInt32?) {
        if case .setup = role { role = .setup(fetched: broadcast) }
    }

    var snapshotBytes: Int { controller?.snapshotBytes ?? 0 }

    func sentSnapshot(bytes: Int) {
        updateController { $0.snapshotBytes = bytes }
    }

    /// Whether the last SNAPSHOT sent to the peer may still be unread: queued here, or in its socket.
    func snapshotUnread() -> Bool {
        guard snapshotBytes > 0 else { return false }
        if outgoing.contains(where: { !$0.descriptors.isEmpty }) || (try? UnixSocket.unreadBytes(socket)) ?? 1 > 0 {
            return true
        }
        sentSnapshot(bytes: 0)
        return false
    }

    var name: String { "peer \(id) (\(peerRole?.rawValue ?? "new")\(client == "?" ? "" : ", \(client)"))" }

    // MARK: - Time

    /// When the peer will have taken too long: to say HELLO, to finish a message, or its handler to answer its command.
    var deadline: UInt64? {
        [
            saidHello ? nil : connectedAt + Self.helloTimeout, partialSince.map { $0 + Self.partialMessageTimeout },
            commandInFlight?.deadline,
        ].compactMap { $0 }.min()
    }

    /// Its deadline is set again (after it came, or what it depends on changed).
    func updateDeadline() {
        wakes.schedule(.peerDeadline(id), at: isClosing ? nil : deadline)
    }

    /// Why the peer has taken too long at `now`, or nil.
    func overdue(now: UInt64) -> String? {
        if !saidHello && now >= connectedAt + Self.helloTimeout {
            return "it did not say HELLO within \(Self.helloTimeout / 1_000_000_000) s"
        }
        if let since = partialSince, now >= since + Self.partialMessageTimeout {
            return "it left a message unfinished for \(Self.partialMessageTimeout / 1_000_000_000) s"
        }
        return nil
    }

    // MARK: - Input

    /// False while a controller or setup UI has not read enough of what it asked for.
    var wantsRead: Bool { isLaunchedHandler || queuedBytes < Self.readPauseThreshold }

    private func updateInterest() {
        var wanted: Poller.Interest = wantsRead ? .readable : []
        if wantsWrite { wanted.insert(.writable) }
        guard wanted != interest else { return }
        interest = wanted
        wakes.reregister(.peer(id), wanted)
    }

    /// The next whole message (or message of an unknown opcode) waiting in the decoder.
    func nextFrame() throws(ProtocolError) -> MessageDecoder.Frame? {
        try decoder.nextFrame()
    }

    /// What one receive brought.
    enum Received {
        case bytes
        /// Nothing waits on the socket now.
        case nothing
        /// It closed the connection, or receiving failed (the session is closing).
        case gone
        /// It sent more descriptors at once than a message may carry.
        case tooManyDescriptors
    }

    /// Takes what waits on the socket (up to `buffer`'s size) into the decoder.
    func receive(into buffer: inout [UInt8]) -> Received {
        let received: UnixSocket.Received?
        do { received = try UnixSocket.receive(socket, into: &buffer) } catch {
            markClosing(error.isDisconnect ? "" : "receive failed: \(error)")
            return .gone
        }
        guard let received else { return .nothing }
        if received.count == 0 {
            markClosing(decoder.pendingByteCount > 0 ? "it closed the connection in the middle of a message" : "")
            return .gone
        }
        if received.descriptorsTruncated { return .tooManyDescriptors }
        decoder.append(descriptors: received.descriptors)
        buffer.withUnsafeBytes { decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<received.count])) }
        return .bytes
    }

    /// Its messages wait in the decoder for the next turn (or not).
    func leaveBacklog(_ backlog: Bool) {
        hasBacklog = backlog
    }

    /// Keeps the time its unfinished message has waited: the bytes it holds now.
    func notePartialInput(now: UInt64) -> Int {
        let pending = decoder.pendingByteCount
        partialSince = pending == 0 ? nil : partialSince ?? now
        return pending
    }

    // MARK: - Output and closing

    var wantsWrite: Bool { !outgoing.isEmpty }
    var isClosing: Bool { closeReason != nil }

    /// It is to be closed at the end of the turn, for `reason` ("": for no fault of its own).
    func markClosing(_ reason: String) {
        closeReason = reason
    }

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
        if message.descriptors.isEmpty, let last = outgoing.last, last.sent == 0,
            last.bytes.count + size <= Self.joinedBufferLimit
        {
            Message.appendHeader(
                to: &outgoing[outgoing.count - 1].bytes, opcode: message.opcode, seq: message.seq,
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
                let n = try UnixSocket.send(
                    socket, first.bytes, from: first.sent,
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

    /// Queues `result` as the reply to request `seq`, and sends what the socket takes.
    func reply(_ seq: UInt32, _ result: Result<Message, BroadcastError>) {
        switch result {
        case .success(let message): enqueue(message)
        case .failure(let error): enqueue(.json(.error, seq: seq, error))
        }
        flush()
    }

    /// It broke the protocol: it is told why, and closed.
    func violated(_ reason: String, seq: UInt32 = 0) {
        enqueue(.json(.error, seq: seq, BroadcastError(.protocolError, reason)))
        flush()
        closeReason = reason
    }

    /// Closes its socket and whatever descriptors it sent that were not taken; nothing wakes for it any more.
    func closeDescriptors() {
        wakes.deregister(.peer(id))
        wakes.schedule(.peerDeadline(id), at: nil)
        socket.close()
        decoder.closeDescriptors()
    }
}
