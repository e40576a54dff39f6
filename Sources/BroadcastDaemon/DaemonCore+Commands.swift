import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// Revision 2.3: a controller's command on its way to a handler. It is kept in one place, the controller's session
/// (one at a time), until it is answered, times out, or the handler exits; a controller that goes away takes it
/// with it (the answer, when it comes, is dropped).
struct PendingCommand {
    /// The broadcast whose handler it was sent to, and the id the answer carries.
    let broadcast: UInt32
    let id: UInt32
    /// The request's seq, and the command's name.
    let seq: UInt32
    let name: String
    let deadline: UInt64
}

/// Commands from controllers to handlers (docs/protocol.md §8.6): checked against the handler's manifest,
/// forwarded, one in flight per controller, and answered within `ProtocolLimits.commandTimeout`. A handler that
/// does not answer costs the controller an error, never the broadcast.
extension DaemonCore {
    func sendCommand(_ message: Message, from session: PeerSession) throws(ProtocolError) {
        let seq = message.seq
        let size = message.payload.count
        let limit = ProtocolLimits.maxCommandPayload
        guard size <= limit else {
            return session.reply(
                seq,
                .failure(BroadcastError(.invalidRequest, "a command of \(size) bytes exceeds the limit of \(limit)")))
        }
        let request = try message.decode(CommandRequest.self)
        if let inFlight = session.commandInFlight {
            return session.reply(
                seq,
                .failure(
                    BroadcastError(
                        .busy,
                        "the command this connection sent to broadcast "
                            + "\(inFlight.broadcast) is not answered yet; one at a time")))
        }
        let forwarded = commandTarget(of: request, by: session).flatMap { broadcast in
            forward(request, to: broadcast, from: session, seq: seq)
        }
        if case .failure(let refusal) = forwarded { session.reply(seq, .failure(refusal)) }
    }

    /// The broadcast a command is for: the one it names; without a name, the only live (or paused) broadcast whose
    /// handler takes the command. Commands go to live broadcasts only, never to one that finished.
    private func commandTarget(
        of request: CommandRequest,
        by session: PeerSession
    ) -> Result<Broadcast, BroadcastError> {
        if request.broadcast != nil { return addressed(request.broadcast, by: session) }
        let taking = broadcasts.filter { broadcast in
            (broadcast.phase == .live || broadcast.phase == .paused)
                && broadcast.manifest.commands?.contains { $0.name == request.command } == true
        }
        if taking.count == 1 { return .success(taking[0]) }
        guard taking.isEmpty else {
            let list = taking.map { "\($0.id) (\($0.manifest.name))" }.joined(separator: ", ")
            let what = "\(taking.count) broadcasts take '\(request.command)': \(list); say which with --broadcast N"
            return .failure(BroadcastError(.ambiguousBroadcast, what))
        }
        let handlers = registry.load(logger: logger).map(\.manifest)
            .filter { $0.commands?.contains { $0.name == request.command } == true }.map(\.name)
        return .failure(
            BroadcastError(
                .noBroadcast,
                handlers.isEmpty
                    ? "no installed handler takes a command '\(request.command)'"
                    : "no \(handlers.joined(separator: " or ")) broadcast is running to take '\(request.command)'"))
    }

    private func forward(
        _ request: CommandRequest, to broadcast: Broadcast, from session: PeerSession,
        seq: UInt32
    ) -> Result<Void, BroadcastError> {
        broadcast.manifest.checkedCommand(request).flatMap { checked in
            guard broadcast.phase == .live || broadcast.phase == .paused, let link = broadcast.link,
                case .ready = link.state, link.connection != nil
            else {
                return .failure(
                    BroadcastError(
                        .invalidRequest,
                        "broadcast \(broadcast.id) is \(broadcast.phase): its "
                            + "handler takes commands while the broadcast is live or paused"))
            }
            let name = checked.command.name
            let id = link.forward(name, arguments: checked.arguments)
            session.sent(
                PendingCommand(
                    broadcast: broadcast.id, id: id, seq: seq, name: name,
                    deadline: clock.now() + ProtocolLimits.commandTimeout))
            logger.debug(
                "broadcast \(broadcast.id): command '\(name)' (\(id)) forwarded to handler '\(link.manifest.name)'")
            return .success(())
        }
    }

    /// The controller waiting for command `id` of `broadcast`'s handler.
    private func waiting(for id: UInt32, of broadcast: UInt32) -> PeerSession? {
        peers.sessions.values.first { $0.commandInFlight?.broadcast == broadcast && $0.commandInFlight?.id == id }
    }

    /// COMMAND_ANSWER. An answer to a command that timed out, or whose controller went away, comes too late and is
    /// dropped.
    func commandAnswered(_ answer: HandlerCommandAnswer, by link: HandlerLink, of broadcast: Broadcast) {
        guard let session = waiting(for: answer.id, of: broadcast.id), let pending = session.endCommand() else {
            logger.debug(
                "handler '\(link.manifest.name)' answered command \(answer.id) too late (or it was never sent)")
            return
        }
        if let error = answer.error {
            let what = "handler '\(link.manifest.name)' could not do '\(pending.name)': \(error.message)"
            session.reply(pending.seq, .failure(BroadcastError(.commandFailed, what)))
        } else {
            let result = CommandResult(broadcast: broadcast.id, command: pending.name, result: answer.result ?? [:])
            session.reply(pending.seq, .success(.json(.commandResult, seq: pending.seq, result)))
        }
    }

    /// `session`'s command, when it was not answered by `now`: it hears so; the broadcast goes on.
    func expireCommand(of session: PeerSession, now: UInt64) {
        guard let pending = session.commandInFlight, now >= pending.deadline, session.endCommand() != nil else {
            return
        }
        let handler = broadcast(pending.broadcast)?.manifest.name ?? "?"
        let seconds = ProtocolLimits.commandTimeout / 1_000_000_000
        let warning = "handler '\(handler)' did not answer command '\(pending.name)' within \(seconds) s"
        if let text = commandWarnings.pass(warning, now: now) { logger.warning("\(text)") }
        session.reply(
            pending.seq,
            .failure(
                BroadcastError(
                    .commandTimeout,
                    "handler '\(handler)' did not answer "
                        + "'\(pending.name)' within \(seconds) s; broadcast \(pending.broadcast) goes on")))
    }

    /// The controller that sent the command in flight went away: nobody waits for its answer, which is dropped when
    /// it comes (a controller cannot leave commands behind it by the thousand, each kept until it times out).
    func dropCommand(of session: PeerSession) {
        guard let pending = session.endCommand() else { return }
        logger.debug(
            "broadcast \(pending.broadcast): command '\(pending.name)' (\(pending.id)) dropped: \(session.name) went away"
        )
    }

    /// `link`'s handler is gone: what it was asked and did not answer fails.
    func abandonCommands(of link: HandlerLink, broadcast: UInt32, reason: String) {
        let asking = peers.sessions.values.filter { $0.commandInFlight?.broadcast == broadcast }
        for session in asking.sorted(by: { $0.commandInFlight!.id < $1.commandInFlight!.id }) {
            guard let pending = session.endCommand() else { continue }
            session.reply(
                pending.seq,
                .failure(
                    BroadcastError(
                        .commandFailed,
                        "handler '\(link.manifest.name)' did not answer '\(pending.name)': \(reason)")))
        }
    }
}
