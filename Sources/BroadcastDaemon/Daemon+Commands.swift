import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// Revision 2.3: a controller's command on its way to a handler, kept by the handler's link until it is answered,
/// times out, or the handler exits.
struct PendingCommand {
    /// The controller that asked, and its request's seq.
    let sessionID: Int
    let seq: UInt32
    let name: String
    let deadline: UInt64
}

extension HandlerLink {
    /// When the oldest unanswered command times out.
    var commandDeadline: UInt64? { commands.values.map(\.deadline).min() }
}

/// Commands from controllers to handlers (docs/protocol.md §8.6): checked against the handler's manifest,
/// forwarded, one in flight per controller, and answered within `ProtocolLimits.commandTimeout`. A handler that
/// does not answer costs the controller an error, never the broadcast.
extension Daemon {
    func sendCommand(_ message: Message, from session: PeerSession) throws(ProtocolError) {
        let seq = message.seq
        let size = message.payload.count, limit = ProtocolLimits.maxCommandPayload
        guard size <= limit else {
            return peers.reply(session, seq, .failure(BroadcastError(.invalidRequest, "a command of \(size) bytes exceeds the limit of \(limit)")))
        }
        let request = try message.decode(CommandRequest.self)
        if let inFlight = session.commandInFlight {
            return peers.reply(session, seq, .failure(BroadcastError(.busy, "the command this connection sent to broadcast \(inFlight.broadcast) " +
                                                                      "is not answered yet; one at a time")))
        }
        let forwarded = commandTarget(of: request, by: session).flatMap { broadcast in
            forward(request, to: broadcast, from: session, seq: seq)
        }
        if case .failure(let refusal) = forwarded { peers.reply(session, seq, .failure(refusal)) }
    }

    /// The broadcast a command is for: the one it names; without a name, the only live (or paused) broadcast whose
    /// handler takes the command. Commands go to live broadcasts only, never to one that finished.
    private func commandTarget(of request: CommandRequest,
                               by session: PeerSession) -> Result<Broadcast, BroadcastError> {
        if request.broadcast != nil { return addressed(request.broadcast, by: session) }
        let taking = broadcasts.filter { broadcast in
            (broadcast.phase == .live || broadcast.phase == .paused) &&
                broadcast.manifest.commands?.contains { $0.name == request.command } == true
        }
        if taking.count == 1 { return .success(taking[0]) }
        guard taking.isEmpty else {
            let list = taking.map { "\($0.id) (\($0.manifest.name))" }.joined(separator: ", ")
            let what = "\(taking.count) broadcasts take '\(request.command)': \(list); say which with --broadcast N"
            return .failure(BroadcastError(.ambiguousBroadcast, what))
        }
        let handlers = registry.load(logger: logger).map(\.manifest)
            .filter { $0.commands?.contains { $0.name == request.command } == true }.map(\.name)
        return .failure(BroadcastError(.noBroadcast, handlers.isEmpty
            ? "no installed handler takes a command '\(request.command)'"
            : "no \(handlers.joined(separator: " or ")) broadcast is running to take '\(request.command)'"))
    }

    private func forward(_ request: CommandRequest, to broadcast: Broadcast, from session: PeerSession,
                         seq: UInt32) -> Result<Void, BroadcastError> {
        broadcast.manifest.checkedCommand(request).flatMap { checked in
            guard broadcast.phase == .live || broadcast.phase == .paused, let link = broadcast.link, link.ready, link.connection != nil else {
                return .failure(BroadcastError(.invalidRequest, "broadcast \(broadcast.id) is \(broadcast.phase): its handler takes commands " +
                                               "while the broadcast is live or paused"))
            }
            let id = link.nextCommandID
            link.nextCommandID = id == UInt32.max ? 1 : id + 1
            link.commands[id] = PendingCommand(sessionID: session.id, seq: seq, name: checked.command.name,
                                               deadline: clock.now() + ProtocolLimits.commandTimeout)
            session.commandInFlight = (broadcast.id, id)
            link.send(.json(.command, HandlerCommand(id: id, command: checked.command.name, arguments: checked.arguments)))
            logger.debug("broadcast \(broadcast.id): command '\(checked.command.name)' (\(id)) forwarded to handler '\(link.manifest.name)'")
            return .success(())
        }
    }

    /// COMMAND_ANSWER. An answer to a command that timed out comes too late and is dropped; one that is too large
    /// is a protocol violation, as a SET_RESULT's is.
    func commandAnswered(_ message: Message, by link: HandlerLink, of broadcast: Broadcast) throws(ProtocolError) {
        let size = message.payload.count, limit = ProtocolLimits.maxCommandAnswerPayload
        guard size <= limit else { throw .malformed(.commandAnswer, "an answer of \(size) bytes exceeds the limit of \(limit)") }
        let answer = try message.decode(HandlerCommandAnswer.self)
        guard let pending = link.commands.removeValue(forKey: answer.id) else {
            logger.debug("handler '\(link.manifest.name)' answered command \(answer.id) too late (or it was never sent)")
            return
        }
        let result: Result<Message, BroadcastError> = if let error = answer.error {
            .failure(BroadcastError(.commandFailed, "handler '\(link.manifest.name)' could not do '\(pending.name)': \(error.message)"))
        } else {
            .success(.json(.commandResult, seq: pending.seq, CommandResult(broadcast: broadcast.id, command: pending.name, result: answer.result ?? [:])))
        }
        deliver(pending, id: answer.id, broadcast: broadcast.id, result)
    }

    /// Commands `link`'s handler has not answered by `now`: their controllers hear so; the broadcast goes on.
    func expireCommands(of link: HandlerLink, broadcast: UInt32, now: UInt64) {
        for (id, pending) in link.commands.sorted(by: { $0.key < $1.key }) where now >= pending.deadline {
            link.commands[id] = nil
            let seconds = ProtocolLimits.commandTimeout / 1_000_000_000
            let warning = "handler '\(link.manifest.name)' did not answer command '\(pending.name)' within \(seconds) s"
            if let text = commandWarnings.pass(warning, now: now) { logger.warning("\(text)") }
            deliver(pending, id: id, broadcast: broadcast, .failure(BroadcastError(.commandTimeout,
                "handler '\(link.manifest.name)' did not answer '\(pending.name)' within \(seconds) s; broadcast \(broadcast) goes on")))
        }
    }

    /// The controller that sent the command in flight went away: nobody waits for its answer, which is dropped when
    /// it comes (a controller cannot leave commands behind it by the thousand, each kept until it times out).
    func dropCommand(of session: PeerSession) {
        guard let inFlight = session.commandInFlight else { return }
        session.commandInFlight = nil
        guard let link = broadcasts.first(where: { $0.id == inFlight.broadcast })?.link,
              let pending = link.commands.removeValue(forKey: inFlight.id) else { return }
        let what = "command '\(pending.name)' (\(inFlight.id))"
        logger.debug("broadcast \(inFlight.broadcast): \(what) dropped: \(session.name) went away")
    }

    /// The handler is gone: what it was asked and did not answer fails.
    func abandonCommands(of link: HandlerLink, broadcast: UInt32, reason: String) {
        for (id, pending) in link.commands.sorted(by: { $0.key < $1.key }) {
            deliver(pending, id: id, broadcast: broadcast, .failure(BroadcastError(.commandFailed,
                "handler '\(link.manifest.name)' did not answer '\(pending.name)': \(reason)")))
        }
        link.commands = [:]
    }

    private func deliver(_ pending: PendingCommand, id: UInt32, broadcast: UInt32, _ result: Result<Message, BroadcastError>) {
        guard let session = peers.sessions[pending.sessionID], let inFlight = session.commandInFlight,
              inFlight.broadcast == broadcast, inFlight.id == id else { return }
        session.commandInFlight = nil
        peers.reply(session, pending.seq, result)
    }
}
