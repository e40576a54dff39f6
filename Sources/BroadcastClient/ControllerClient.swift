import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// What controllers (broadcastctl, or any program) call: the host side of ReplayKit's RPBroadcastController.
public final class ControllerClient {
    public let socketPath: String
    let connection: PeerConnection
    /// What the daemon said to HELLO: its program, and (revision 2.6) its revision and features.
    public let welcome: Welcome

    public init(socketPath: String, client: String = "broadcastctl") throws(ProtocolError) {
        self.socketPath = socketPath
        connection = try PeerConnection.connect(path: socketPath)
        welcome = try connection.hello(role: .controller, client: client)
    }

    /// Refuses, before anything is sent, what the daemon announced it does not offer (revision 2.6). A daemon that
    /// announces nothing (older than 2.6) is asked anyway: only its answer can tell.
    func require(_ feature: ProtocolFeature, for what: String) throws(ProtocolError) {
        guard welcome.offers(feature) == false else { return }
        let revision = welcome.revision ?? "?"
        throw .refused(
            BroadcastError(
                .unsupported,
                "\(welcome.server) (protocol revision \(revision)) does not "
                    + "offer \(what): its WELCOME does not list the feature '\(feature.rawValue)'"))
    }

    public func handlers() throws(ProtocolError) -> [HandlerManifest] {
        try connection.request(.listHandlers).decode(HandlerList.self).handlers
    }

    /// Asks for a broadcast; it then waits for a setup UI to complete it. Returns its id.
    public func start(handler: String, maxDuration: Double?, capture: CaptureChoice? = nil) throws(ProtocolError)
        -> UInt32
    {
        try startAnswer(handler: handler, maxDuration: maxDuration, capture: capture).id
    }

    /// START, and what its answer says: the new broadcast and, revision 2.4, a warning about it (it runs over the
    /// built-in memory budget, and why).
    public func startAnswer(handler: String, maxDuration: Double?, capture: CaptureChoice? = nil) throws(ProtocolError)
        -> (id: UInt32, warning: String?)
    {
        if let capture, !capture.isEmpty { try require(.captureChoice, for: "choosing a broadcast's capture") }
        // An older daemon ignores excludeWindows: it would capture the very windows the user wants left out.
        if capture?.excludeWindows?.isEmpty == false {
            try require(.excludeWindows, for: "leaving windows out of one broadcast")
        }
        // An older daemon ignores camera: the broadcast would run without the camera asked for.
        if let camera = capture?.camera, camera != "none" { try require(.camera, for: "a camera") }
        let reply = try connection.request(
            .start, StartRequest(handler: handler, maxDuration: maxDuration, capture: capture))
        let answer = try reply.decode(BroadcastReference.self)
        guard let id = answer.broadcast else { throw .malformed(.ok, "no broadcast id") }
        return (id, answer.warning)
    }

    /// These act on broadcast `broadcast`, or, when nil, on the only one running (refused, listing them,
    /// while several run); they return the broadcast they acted on.
    @discardableResult public func pause(broadcast: UInt32? = nil) throws(ProtocolError) -> UInt32? {
        try broadcastRequest(.pause, broadcast)
    }
    @discardableResult public func resume(broadcast: UInt32? = nil) throws(ProtocolError) -> UInt32? {
        try broadcastRequest(.resume, broadcast)
    }
    @discardableResult public func finish(broadcast: UInt32? = nil) throws(ProtocolError) -> UInt32? {
        try broadcastRequest(.finish, broadcast)
    }
    /// Finishes broadcast `broadcast` (nil: the only one running) and has its handler throw away what it
    /// produced; a finished broadcast's output is removed (protocol revision 1.2).
    @discardableResult public func discard(broadcast: UInt32? = nil) throws(ProtocolError) -> UInt32? {
        try connection.request(.finish, FinishRequest(broadcast: broadcast, discard: true)).decode(
            BroadcastReference.self
        ).broadcast
    }

    private func broadcastRequest(_ opcode: Opcode, _ broadcast: UInt32?) throws(ProtocolError) -> UInt32? {
        try connection.request(opcode, BroadcastReference(broadcast: broadcast)).decode(BroadcastReference.self)
            .broadcast
    }

    /// Revision 2.3: sends command `name` with `arguments` to broadcast `broadcast`'s handler (nil: the only one
    /// running) and returns its answer; the handler's error, or its silence for 10 s, throws `.refused`.
    public func send(command name: String, arguments: [String: JSONValue] = [:], broadcast: UInt32? = nil)
        throws(ProtocolError) -> CommandResult
    {
        try require(.commands, for: "commands")
        let reply = try connection.request(
            .sendCommand,
            CommandRequest(broadcast: broadcast, command: name, arguments: arguments.isEmpty ? nil : arguments))
        guard reply.opcode == .commandResult else { throw .unexpected(reply.opcode, "expected COMMAND_RESULT") }
        return try reply.decode(CommandResult.self)
    }

    /// The running capture takes `choice`'s output or region (the whole screen when neither), for every broadcast.
    public func changeCapture(_ choice: CaptureChoice) throws(ProtocolError) {
        try require(.captureChange, for: "changing the running capture")
        _ = try connection.request(.changeCapture, choice)
    }

    /// What the daemon captures, and the outputs it could capture instead.
    public func sources() throws(ProtocolError) -> SourceList {
        try connection.request(.listSources).decode(SourceList.self)
    }

    /// The current frame: the latest one of a running broadcast, else one grabbed for the purpose.
    public func snapshot(broadcast: UInt32? = nil) throws(ProtocolError) -> (
        description: SnapshotDescription, frame: SharedMemory
    ) {
        let reply = try connection.request(.getSnapshot, BroadcastReference(broadcast: broadcast))
        guard reply.opcode == .snapshot, reply.descriptors.count == 1 else {
            throw .malformed(
                reply.opcode,
                "a snapshot comes as SNAPSHOT with one descriptor, not \(reply.opcode) with \(reply.descriptors.count)")
        }
        let description = try reply.decode(SnapshotDescription.self)
        do {
            return (description, try SharedMemory(mapping: reply.descriptors[0], size: description.video.frameSize))
        } catch {
            throw .malformed(.snapshot, "cannot map the frame: \(error)")
        }
    }

    public func status() throws(ProtocolError) -> BroadcastStatus {
        try connection.request(.getStatus).decode(BroadcastStatus.self)
    }

    /// After this, `nextEvent` returns state changes, service info, URL updates and finishes.
    public func subscribe() throws(ProtocolError) {
        _ = try connection.request(.subscribe)
    }

    public enum Event: Sendable {
        case stateChanged(BroadcastStatus)
        case serviceInfo(ServiceInfo)
        case urlUpdated(URLUpdate)
        case finished(FinishedEvent)
    }

    /// The next event, or nil when none came within `timeoutMilliseconds` (negative: wait as long as it takes).
    public func nextEvent(timeoutMilliseconds: Int32) throws(ProtocolError) -> Event? {
        guard let message = try connection.receive(timeoutMilliseconds: timeoutMilliseconds) else { return nil }
        switch message.opcode {
        case .stateChanged: return .stateChanged(try message.decode(BroadcastStatus.self))
        case .serviceInfo: return .serviceInfo(try message.decode(ServiceInfo.self))
        case .urlUpdated: return .urlUpdated(try message.decode(URLUpdate.self))
        case .finished: return .finished(try message.decode(FinishedEvent.self))
        case .error: throw .refused(try message.decode(BroadcastError.self))
        default: throw .unexpected(message.opcode, "not an event")
        }
    }

    public func close() { connection.close() }
}

/// What a setup UI calls: ReplayKit's completeRequest / cancelRequest.
public final class SetupClient {
    let connection: PeerConnection

    public init(socketPath: String, client: String = "broadcast-setup") throws(ProtocolError) {
        connection = try PeerConnection.connect(path: socketPath)
        try connection.hello(role: .setup, client: client)
    }

    /// The request waiting for setup (`broadcast` nil: whichever is waiting).
    public func fetchRequest(broadcast: UInt32?) throws(ProtocolError) -> SetupRequest {
        try connection.request(.getSetupRequest, BroadcastReference(broadcast: broadcast)).decode(SetupRequest.self)
    }

    public func complete(broadcast: UInt32, url: String?, setupInfo: [String: String]) throws(ProtocolError) {
        _ = try connection.request(
            .completeSetup, SetupCompletion(broadcast: broadcast, url: url, setupInfo: setupInfo))
    }

    public func cancel(broadcast: UInt32, error: BroadcastError) throws(ProtocolError) {
        _ = try connection.request(.cancelSetup, SetupCancellation(broadcast: broadcast, error: error))
    }

    public func close() { connection.close() }
}
