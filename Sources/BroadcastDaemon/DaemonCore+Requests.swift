import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// A START waiting for the source to open (the desktop portal's share dialog is up, or the first frame has not
/// come): answered when the source is.
struct PendingStart {
    /// The controller that asked, and its request's seq.
    let sessionID: Int
    let seq: UInt32
    let request: StartRequest
    /// What the screen is doing meanwhile ("being chosen in the screen-share dialog").
    var reason = ""
}

/// What a START comes to: a broadcast, or a wait for the source.
enum StartOutcome {
    case started(UInt32)
    case waiting(String)
}

/// What controllers and setup UIs ask for.
extension DaemonCore {
    func request(_ message: Message, from session: PeerSession) {
        do {
            switch session.role {
            case .controller: try controllerRequest(message, from: session)
            case .setup: try setupRequest(message, from: session)
            case .handler: try handlerMessage(message, from: session)
            case .new: break
            }
        } catch {
            // Revision 2.5: a controller's or setup UI's request that is JSON but has a field wrong is refused, saying
            // which; the connection stays (only a message that is not JSON is a protocol violation).
            if case .malformed(let opcode, let why) = error, session.peerRole != .handler, message.isJSON {
                let refusal = BroadcastError(.invalidRequest, "\(opcode.name) is refused: \(why)")
                return session.reply(message.seq, .failure(refusal))
            }
            session.violated(error.description, seq: message.seq)
        }
    }

    /// The newest broadcast (a finished one stays until the next START); never a shared encoder's.
    var current: Broadcast? { broadcasts.last { !$0.isSharedEncoder } }

    /// The broadcast a request is about: the one `id` names; without an id, the only one requested and not
    /// finished (or, when none is, the newest). Several running and no id: refused, listing them.
    func addressed(_ id: UInt32?, by session: PeerSession) -> Result<Broadcast, BroadcastError> {
        if let id {
            if let found = broadcasts.first(where: { $0.id == id }) {
                guard found.isSharedEncoder else { return .success(found) }
                return .failure(sharedEncoderRefusal(found))
            }
            let known = broadcasts.map { String($0.id) }
            return .failure(
                BroadcastError(
                    .noBroadcast,
                    "there is no broadcast \(id)"
                        + (known.isEmpty ? "" : " (there are: \(known.joined(separator: ", ")))")))
        }
        let active = broadcasts.filter { $0.isActive && !$0.isSharedEncoder }
        if active.count == 1 { return .success(active[0]) }
        if active.isEmpty {
            return current.map { .success($0) } ?? .failure(BroadcastError(.noBroadcast, "no broadcast is live"))
        }
        let list = active.map {
            "\($0.id) (\($0.manifest.name), \($0.phase)\($0.machine.current?.url.map { ", " + SecretURL.masked($0) } ?? ""))"
        }
        let how =
            session.protocolVersion < 2
            ? "this controller speaks protocol version 1, which knows of one broadcast at a time: use one of version 2 (broadcastctl of broadcastd 0.2 or later)"
            : "say which with --broadcast N"
        return .failure(
            BroadcastError(
                .ambiguousBroadcast, "\(active.count) broadcasts are running: \(list.joined(separator: ", ")); \(how)"))
    }

    private func controllerRequest(_ message: Message, from session: PeerSession) throws(ProtocolError) {
        let seq = message.seq
        switch message.opcode {
        case .listHandlers:
            session.reply(
                seq,
                .success(
                    .json(.handlers, seq: seq, HandlerList(handlers: registry.load(logger: logger).map(\.manifest)))))
        case .start:
            answerStart(PendingStart(sessionID: session.id, seq: seq, request: try message.decode(StartRequest.self)))
        case .pause, .resume, .finish:
            let request = try message.decode(FinishRequest.self)
            if message.opcode == .finish, request.broadcast == nil, request.discard != true, pendingStart != nil {
                source.cancelOpen("the broadcast was finished before the screen was chosen")
                return session.reply(seq, .success(.json(.ok, seq: seq, BroadcastReference(broadcast: nil))))
            }
            let result = addressed(request.broadcast, by: session).flatMap { broadcast in
                let event: Result<BroadcastEvent, BroadcastError> =
                    message.opcode == .pause
                    ? .success(.pause)
                    : message.opcode == .resume
                        ? refuseResumeWhileLocked().map { .failure($0) } ?? .success(.resume)
                        : DiscardedOutput.event(for: request, manifest: broadcast.manifest)
                return event.flatMap { transition(broadcast, $0) }.map { _ in
                    Message.json(.ok, seq: seq, BroadcastReference(broadcast: broadcast.id))
                }
            }
            session.reply(seq, result)
        case .getStatus:
            session.reply(seq, statusReply(for: session).map { .json(.status, seq: seq, $0) })
        case .changeCapture:
            let asked = try message.decode(CaptureChoice.self)
            session.reply(seq, changeCapture(asked).map { .json(.ok, seq: seq, Empty()) })
        case .listSources:
            session.reply(seq, sourceList().map { .json(.sources, seq: seq, $0) })
        case .getSnapshot:
            let id = try message.decode(BroadcastReference.self).broadcast
            let named: Result<UInt32?, BroadcastError> =
                id == nil ? .success(current?.id) : addressed(id, by: session).map { $0.id }
            let result = named.flatMap { snapshot(for: session, broadcast: $0, now: clock.now()) }
            if case .success(let snapshot) = result {
                session.sentSnapshot(bytes: snapshot.description.video.frameSize)
            }
            session.reply(seq, result.map { .json(.snapshot, seq: seq, $0.description, descriptors: [$0.frame]) })
        case .sendCommand:
            try sendCommand(message, from: session)
        case .subscribe:
            session.subscribe()
            session.reply(seq, .success(.json(.ok, seq: seq, Empty())))
            // The state of every broadcast running (or of the newest), one STATE_CHANGED each.
            let active = broadcasts.filter(\.isActive)
            for broadcast in active.isEmpty ? [current] : active.map(Optional.some) {
                session.enqueue(.json(.stateChanged, status(of: broadcast)))
            }
            session.flush()
        default:
            throw .unexpected(message.opcode, "not a controller request")
        }
    }

    /// STATUS: for version 2, the newest broadcast's fields and every broadcast in `broadcasts`; for version 1,
    /// the one broadcast there is (refused while several run: it could describe only one of them).
    private func statusReply(for session: PeerSession) -> Result<BroadcastStatus, BroadcastError> {
        guard session.protocolVersion >= 2 else {
            let active = broadcasts.filter(\.isActive)
            if active.count > 1 { return addressed(nil, by: session).map { self.status(of: $0) } }
            return .success(status(of: active.first ?? current))
        }
        var status = status(of: current)
        status.broadcasts = broadcasts.map { self.status(of: $0) }
        return .success(status)
    }

    /// The new broadcast's id, or why the source waits (for the user, say: the START is then answered by
    /// `startAnswered`).
    private func start(_ request: StartRequest) -> Result<StartOutcome, BroadcastError> {
        if shuttingDown { return .failure(BroadcastError(.shutdown, "broadcastd is shutting down")) }
        if let pendingStart {
            return .failure(
                BroadcastError(.busy, "another broadcast is being requested: the screen is \(pendingStart.reason)"))
        }
        let entries = registry.load(logger: logger)
        guard let entry = entries.first(where: { $0.manifest.name == request.handler }) else {
            let names = entries.map(\.manifest.name)
            let unreadable = registry.unreadableDirectories()
            return .failure(
                BroadcastError(
                    .unknownHandler,
                    "no handler named '\(request.handler)'; "
                        + (names.isEmpty
                            ? "none are installed (looked in \(registry.directories.joined(separator: ", ")))"
                            : "installed: \(names.joined(separator: ", "))")
                        + (unreadable.isEmpty ? "" : "; cannot read \(unreadable.joined(separator: ", "))")))
        }
        if let max = request.maxDuration, !(max > 0 && max < 1e9) {
            return .failure(BroadcastError(.invalidRequest, "maxDuration must be a positive number of seconds"))
        }
        let asked = request.capture ?? CaptureChoice()
        var askedFrameRate: Double?
        let active = broadcasts.filter(\.isActive)
        let users = active.filter { !$0.isSharedEncoder }
        if users.count >= configuration.maxBroadcasts {
            let list = users.map { "\($0.id) (\($0.manifest.name), \($0.phase))" }.joined(separator: ", ")
            return .failure(
                BroadcastError(
                    .busy,
                    "\(users.count) broadcast(s) running (\(list)), the most at once "
                        + "(broadcastd --max-broadcasts \(configuration.maxBroadcasts)); stop one first with `broadcastctl stop --broadcast N`"
                ))
        }
        if let capture {
            switch join(asked, running: active) {
            case .success(let rate): askedFrameRate = rate
            case .failure(let error): return .failure(error)
            }
            // Every handler needs slots of the shared pool: more are used as broadcasts join.
            do { try capture.share(with: slotHolders + 1) } catch { return .failure(error) }
        } else {
            if let error = choose(asked) { return .failure(error) }
            var camera: (CameraDescription, CaptureSource)?
            switch pickCamera(captureChoice) {
            case .success(let picked?):
                do throws(CaptureError) {
                    guard let make = sources?.makeCamera else {
                        throw CaptureError(source: "camera", operation: "capture \(picked.name)", reason: "no PipeWire")
                    }
                    camera = (picked, try make(picked))
                } catch {
                    restoreDefaultSource()
                    return .failure(BroadcastError(.captureFailed, error.description))
                }
            case .success(nil): camera = nil
            case .failure(let error):
                restoreDefaultSource()
                return .failure(error)
            }
            // Opened now, so that a screen that cannot be captured refuses the broadcast before it starts.
            switch CaptureSession.open(source, budget: configuration.memoryBudget, camera: camera?.0) {
            case .success(.waiting(let why)):
                return .success(.waiting(why))
            case .success(.planned(let plan)):
                capture = CaptureSession(
                    source: source, plan: plan, poolIDs: poolIDs, wakes: wakes, indicator: captureIndicator,
                    camera: camera)
                capture?.cameraFeed?.connect()
            case .failure(let error):
                restoreDefaultSource()
                return .failure(error)
            }
        }
        let id = nextBroadcastID
        let broadcast: Broadcast
        do {
            broadcast = try Broadcast(
                id: id, entry: entry, maxDuration: request.maxDuration.map { UInt64($0 * 1e9) },
                askedFrameRate: askedFrameRate, wakes: wakes)
        } catch {
            return .failure(error)
        }
        nextBroadcastID += 1
        broadcasts.removeAll { !$0.isActive }
        broadcasts.append(broadcast)
        logger.info("broadcast \(id) requested with handler '\(entry.manifest.name)'; waiting for setup")
        if let plan = capture?.plan {
            if let warning = plan.overBudgetWarning {
                logger.warning("broadcast \(id): \(warning)")
            } else {
                logger.info("memory plan: \(plan)")
            }
        }
        logger.info("broadcast \(id): idle → \(broadcast.phase)")
        peers.publish(.json(.stateChanged, status(of: broadcast)))
        return .success(.started(id))
    }

    /// Answers a START, or keeps it pending while the source waits for the user; then `startAnswered`
    /// tries again when the source has its answer (the share dialog was answered, cancelled or withdrawn).
    private func answerStart(_ request: PendingStart) {
        switch start(request.request) {
        case .success(.waiting(let why)):
            if pendingStart == nil {
                logger.info("broadcast requested with handler '\(request.request.handler)'; the screen is \(why)")
            }
            pendingStart = PendingStart(
                sessionID: request.sessionID, seq: request.seq, request: request.request, reason: why)
        case .success(.started(let id)):
            let reference = BroadcastReference(broadcast: id, warning: capture?.plan.overBudgetWarning)
            peers.sessions[request.sessionID]?.reply(request.seq, .success(.json(.ok, seq: request.seq, reference)))
        case .failure(let refusal):
            peers.sessions[request.sessionID]?.reply(request.seq, .failure(refusal))
        }
        updateStatus()
    }

    func startAnswered() {
        guard let pending = pendingStart else { return }
        pendingStart = nil
        answerStart(pending)
    }

    private func setupRequest(_ message: Message, from session: PeerSession) throws(ProtocolError) {
        let seq = message.seq
        /// The broadcast waiting for setup that `id` names (the oldest waiting one when nil), or why there is none.
        func waiting(_ id: UInt32?) -> Result<Broadcast, BroadcastError> {
            let candidates = broadcasts.filter { $0.phase == .awaitingSetup }
            guard let first = candidates.first else {
                return .failure(BroadcastError(.noBroadcast, "no broadcast is waiting for setup"))
            }
            guard let id else { return .success(first) }
            guard let match = candidates.first(where: { $0.id == id }) else {
                return .failure(
                    BroadcastError(.invalidRequest, "broadcast \(id) is not the one waiting for setup (\(first.id) is)")
                )
            }
            return .success(match)
        }
        switch message.opcode {
        case .getSetupRequest:
            session.reply(
                seq,
                waiting(try message.decode(BroadcastReference.self).broadcast).map { broadcast in
                    session.fetchSetup(broadcast.id)
                    return .json(
                        .setupRequest, seq: seq, SetupRequest(broadcast: broadcast.id, handler: broadcast.manifest))
                })
        case .completeSetup:
            let completion = try message.decode(SetupCompletion.self)
            session.reply(
                seq,
                waiting(completion.broadcast).flatMap { broadcast in
                    broadcast.manifest.validated(url: completion.url, setupInfo: completion.setupInfo).flatMap {
                        validated in
                        broadcast.setUp(validated.setupInfo)
                        session.fetchSetup(nil)
                        let url = validated.url.map { " with URL \(SecretURL.masked($0))" } ?? ""
                        logger.info("broadcast \(broadcast.id) set up\(url)")
                        return transition(broadcast, .setupCompleted(url: validated.url)).map { _ in
                            .json(.ok, seq: seq, Empty())
                        }
                    }
                })
        case .cancelSetup:
            let cancellation = try message.decode(SetupCancellation.self)
            session.reply(
                seq,
                waiting(cancellation.broadcast).flatMap { broadcast in
                    session.fetchSetup(nil)
                    let reason = BroadcastError(.setupCancelled, "setup was cancelled: \(cancellation.error.message)")
                    return transition(broadcast, .setupCancelled(reason)).map { _ in .json(.ok, seq: seq, Empty()) }
                })
        default:
            throw .unexpected(message.opcode, "not a setup request")
        }
    }

    private func sourceList() -> Result<SourceList, BroadcastError> {
        do {
            let list = try source.outputs()
            return .success(
                SourceList(
                    kind: list.kind, source: source.description, screenWidth: list.screen?.width,
                    screenHeight: list.screen?.height,
                    outputs: list.outputs.map {
                        OutputDescription(
                            name: $0.name, x: $0.rect.x, y: $0.rect.y, width: $0.rect.width, height: $0.rect.height,
                            rotation: $0.rotation, reflected: $0.reflected, primary: $0.primary)
                    },
                    windows: list.kind == "x11"
                        ? list.windows.map {
                            WindowDescription(
                                id: $0.id, instance: $0.instance, class: $0.className, title: $0.title, pid: $0.pid,
                                x: $0.rect.x, y: $0.rect.y, width: $0.rect.width, height: $0.rect.height,
                                mapped: $0.mapped)
                        } : nil,
                    cameras: try? sources?.cameras?()))
        } catch {
            return .failure(BroadcastError(.captureFailed, error.description))
        }
    }

    /// A copy of the current frame in a memfd of its own: the latest frame captured while a broadcast runs,
    /// or, when there is none (idle, setting up, not yet captured), one grabbed now. Every copy lives until the
    /// controller closes it, so a connection gets one while the last it was sent is unread, and all the
    /// unread ones together stay within what the memory budget leaves beside the pool (one frame at least).
    private func snapshot(for session: PeerSession, broadcast: UInt32?, now: UInt64) -> Result<
        (description: SnapshotDescription, frame: Descriptor), BroadcastError
    > {
        if session.snapshotUnread() {
            return .failure(
                BroadcastError(.busy, "the last snapshot sent on this connection has not been read yet; read it first"))
        }
        let format = source.videoFormat
        let unread = peers.sessions.values.filter { $0.snapshotUnread() }
        let planned = capture?.plan.totalBytes ?? CaptureSession.parts(of: source).reduce(0) { $0 + $1.bytes }
        let bytes = unread.reduce(0) { $0 + $1.snapshotBytes }
        if bytes > 0,
            bytes + format.frameByteCount > max(format.frameByteCount, configuration.memoryBudget.bytes - planned)
        {
            return .failure(
                BroadcastError(
                    .busy,
                    "\(unread.count) snapshot(s) of \(megabytes(bytes)) sent to other connections "
                        + "are not read yet, and another would not fit the memory budget; try again once they are"))
        }
        if let copy = capture?.copyLatest(broadcast: broadcast) { return copy }
        let wasOpen = capture != nil
        if !wasOpen && source.choosesScreenAtStart {
            return .failure(
                BroadcastError(
                    .captureFailed,
                    "the screen is shared through the desktop portal only while a broadcast runs; start one first"))
        }
        if !wasOpen {
            do { _ = try CaptureSession.openWaiting(source) } catch {
                return .failure(BroadcastError(.captureFailed, error.description))
            }
        }
        defer { if !wasOpen { source.close() } }
        let running = capture?.live != nil
        do { if !running { try source.begin(at: now) } } catch {
            return .failure(BroadcastError(.captureFailed, error.description))
        }
        defer { if !running { source.end() } }
        return CaptureSession.grab(source, now: now)
    }
}
