import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// What happens to each broadcast: its state machine's steps and what they ask for (launching and ending
/// its handler, joining and leaving the capture), and what its handler says.
extension Daemon {
    /// Feeds `event` to `broadcast`'s state machine and carries out what it asks; refusals come back as errors.
    /// Events raised while carrying out a transition (a launch that fails, say) follow it, in order.
    @discardableResult
    func transition(_ broadcast: Broadcast, _ event: BroadcastEvent) -> Result<Void, BroadcastError> {
        if transitioning {
            followUps.append((broadcast, event))
            return .success(())
        }
        transitioning = true
        defer { transitioning = false }
        let result = step(broadcast, event)
        while !followUps.isEmpty {
            let (next, event) = followUps.removeFirst()
            if case .failure(let refusal) = step(next, event) { logger.debug("follow-up refused: \(refusal)") }
        }
        return result
    }

    private func step(_ broadcast: Broadcast, _ event: BroadcastEvent) -> Result<Void, BroadcastError> {
        endAudioDrain(of: broadcast)
        let before = broadcast.phase
        let effects: [BroadcastEffect]
        do { effects = try broadcast.machine.handle(event) } catch { return .failure(error) }
        let now = clock.now()
        if before != .live && broadcast.phase == .live { goLive(broadcast, now: now) }
        if before == .live && broadcast.phase != .live { leaveLive(broadcast, now: now, drainingAudio: event == .pause || event == .finish) }
        for effect in effects { apply(effect, to: broadcast, now: now) }
        if before != broadcast.phase {
            logger.info("broadcast \(broadcast.id): \(before) → \(broadcast.phase)")
            peers.publish(.json(.stateChanged, status(of: broadcast)))
            updateStatus(now: now)
        }
        return .success(())
    }

    private func apply(_ effect: BroadcastEffect, to broadcast: Broadcast, now: UInt64) {
        if broadcast.audioDrain != nil {
            broadcast.audioDrain!.held.append(effect)
            return
        }
        switch effect {
        case .awaitSetup:
            break
        case .launchHandler:
            launchHandler(of: broadcast, now: now)
        case .notifyHandlerPaused:
            broadcast.link?.send(.json(.broadcastPaused, Empty()))
        case .notifyHandlerResumed:
            broadcast.link?.send(.json(.broadcastResumed, Empty()))
        case .notifyHandlerFinished:
            broadcast.startDeadline = nil
            guard let link = broadcast.link else {
                transition(broadcast, .handlerExited(nil)) // none was started: nothing to wait for
                return
            }
            if link.session?.role == .handler { // it said HELLO and was sent BROADCAST_STARTED
                link.send(.json(.broadcastFinished, BroadcastEnd(error: broadcast.machine.error, discard: broadcast.machine.discarded ? true : nil)))
                link.terminateAt = now + configuration.finishTimeout
                link.workDeadline = now + HandlerLink.maxFinishWork
            } else {
                link.stoppedBeforeStart = true
                link.terminate(now: now)
            }
        case .finished(let error):
            broadcast.startDeadline = nil
            if let error { logger.warning("broadcast \(broadcast.id) finished with an error: \(error.message)") }
            else { logger.info("broadcast \(broadcast.id) finished") }
            publishServiceInfo(broadcast, now: now)
            if broadcast.machine.discarded { DiscardedOutput.remove(result: broadcast.result, logger: logger) }
            peers.publish(.json(.finished, FinishedEvent(broadcast: broadcast.id, error: error, result: broadcast.result,
                                                         discarded: broadcast.machine.discarded ? true : nil)))
            // A request cancelled at setup never began: the FINISHED says why, and status is back to idle.
            if error?.code == .setupCancelled && broadcast.link == nil { broadcasts.removeAll { $0 === broadcast } }
            if !broadcasts.contains(where: \.isActive) {
                capture?.close()
                capture = nil
                indicateCapture(false)
                nextServiceInfoAt = nil
                restoreDefaultSource()
                ProcessMemory.releaseIdleCode()
            } else {
                // The broadcasts left share the pool: it uses fewer slots (a smaller plan always fits).
                try? capture?.share(with: broadcasts.count(where: \.isActive))
            }
        case .discardFinished:
            DiscardedOutput.remove(result: broadcast.result, logger: logger)
            peers.publish(.json(.stateChanged, status(of: broadcast)))
        }
    }

    // MARK: - Capture

    /// `broadcast` went live: it joins the capture, which begins if it is the first.
    private func goLive(_ broadcast: Broadcast, now: UInt64) {
        guard let capture else { return }
        if let live = capture.live {
            live.resumeFrames(now: now)
        } else {
            do { try source.begin(at: now) } catch {
                transition(broadcast, .fail(BroadcastError(.captureFailed, error.description)))
                return
            }
            capture.live = LiveCapture(source: source, now: now, begun: clock.now())
            indicateCapture(true)
        }
        broadcast.frameInterval = source.frameInterval
        broadcast.beginLive(now: now)
        broadcast.link?.resetProgress(now: now, pool: capture.pool)
        if nextServiceInfoAt == nil { nextServiceInfoAt = now + configuration.serviceInfoInterval }
    }

    /// `broadcast` is no longer live. After a pause or finish its handler still gets the audio captured
    /// before (`Broadcast.AudioDrain`); capture ends when no broadcast is live or waiting for audio.
    private func leaveLive(_ broadcast: Broadcast, now: UInt64, drainingAudio: Bool) {
        broadcast.endLive(now: now)
        guard let live = capture?.live else { return }
        if !broadcasts.contains(where: \.isLive) { live.stopFrames() }
        if drainingAudio, live.nextAudioAt != nil, broadcast.link?.connection != nil {
            let end = max(now, broadcast.ledger.deliveredUntil[.video] ?? 0)
            broadcast.audioDrain = Broadcast.AudioDrain(since: now, until: end + Broadcast.AudioDrain.margin)
            captureAudio(now: now)
        } else {
            endCaptureIfUnused()
        }
    }

    /// Capture ends when no broadcast is live or waiting for its audio.
    private func endCaptureIfUnused() {
        guard let capture, capture.live != nil, !broadcasts.contains(where: { $0.isLive || $0.audioDrain != nil }) else { return }
        source.end()
        capture.live = nil
        indicateCapture(false)
    }

    /// The wait for `broadcast`'s audio after its pause or finish is over: its handler hears of it.
    func endAudioDrain(of broadcast: Broadcast) {
        guard let drain = broadcast.audioDrain else { return }
        broadcast.audioDrain = nil
        endCaptureIfUnused()
        let now = clock.now()
        let short = source.audioStreams.filter { broadcast.ledger.deliveredUntil[$0, default: 0] < drain.until }.map(\.description)
        logger.debug("broadcast \(broadcast.id): audio captured before the \(broadcast.phase == .paused ? "pause" : "finish") delivered after \((now - drain.since) / 1_000_000) ms\(short.isEmpty ? "" : "; short: " + short.joined(separator: ", "))")
        for effect in drain.held { apply(effect, to: broadcast, now: now) }
    }

    func captureVideo(now: UInt64) {
        guard let capture, let live = capture.live else { return }
        let active = broadcasts.filter(\.isActive)
        if let failure = live.captureVideo(now: now, session: capture, live: broadcasts.filter(\.isLive), active: active,
                                           newPoolID: { defer { nextPoolID += 1 }; return nextPoolID }) {
            for broadcast in broadcasts where broadcast.isLive { transition(broadcast, .fail(failure)) }
        }
    }

    func captureAudio(now: UInt64) {
        guard let live = capture?.live else { return }
        let (silenceChanged, drained) = live.captureAudio(now: now, receivers: broadcasts.filter { $0.isLive || $0.audioDrain != nil })
        if silenceChanged {
            for broadcast in broadcasts where broadcast.isActive { peers.publish(.json(.stateChanged, status(of: broadcast))) }
        }
        for broadcast in drained { endAudioDrain(of: broadcast) }
    }

    // MARK: - The handler process

    private func launchHandler(of broadcast: Broadcast, now: UInt64) {
        let entry = broadcast.entry, manifest = entry.manifest
        guard let path = HandlerRegistry.resolveExecutable(entry) else {
            transition(broadcast, .fail(BroadcastError(.handlerFailed, "handler '\(manifest.name)': cannot find its program '\(manifest.exec)' (is it installed and executable?)")))
            return
        }
        guard let capture else { return }
        do {
            _ = try capture.makePool(id: nextPoolID)
            nextPoolID += 1
        } catch {
            transition(broadcast, .fail(error))
            return
        }
        do {
            let (ours, theirs) = try UnixSocket.pair()
            try ours.setNonBlocking()
            var environment = Environment.all
            environment["BROADCASTD_HANDLER_FD"] = "3"
            environment["BROADCASTD_SOCKET"] = socketPath
            let process = try ChildProcess(path: path, arguments: manifest.arguments ?? [],
                                           environment: environment, passing: [(theirs, 3)], ownProcessGroup: true)
            theirs.close()
            broadcast.link = HandlerLink(process: process, manifest: manifest, session: peers.addSession(ours, isLaunchedHandler: true))
            broadcast.startDeadline = now + configuration.startTimeout
            logger.info("launched handler '\(manifest.name)' (\(path), pid \(process.pid))")
        } catch {
            transition(broadcast, .fail(BroadcastError(.handlerFailed, "handler '\(manifest.name)': could not start \(path): \(error)")))
        }
    }

    /// The broadcast whose handler talks over `session`.
    func broadcast(ofHandler session: PeerSession) -> Broadcast? {
        broadcasts.first { $0.link?.session === session }
    }

    func handlerConnected(_ session: PeerSession) {
        guard let broadcast = broadcast(ofHandler: session), let current = broadcast.machine.current, let pool = capture?.pool else { return }
        session.enqueue(.json(.pool, PoolAnnouncement(pool: pool.id, slots: pool.capacity, slotSize: pool.slotSize),
                              descriptors: [pool.handlerDescriptor]))
        session.enqueue(.json(.broadcastStarted, BroadcastStart(broadcast: current.id, url: current.url, setupInfo: broadcast.setupInfo,
                                                                video: VideoDescription(source.videoFormat, colorRange: source.colorRange.rawValue),
                                                                audio: AudioDescription(source.audioFormat),
                                                                frameRate: Int(broadcast.chooseFrameRate(captureRate: 1e9 / Double(source.frameInterval)).rounded()),
                                                                audioStreams: source.audioStreams.map(\.description))))
        logger.debug("handler '\(broadcast.manifest.name)' connected; broadcast \(current.id) started")
    }

    func reapHandler(of broadcast: Broadcast) {
        guard let failure = endLink(of: broadcast) else { return }
        transition(broadcast, .handlerExited(failure))
    }

    /// The handler process has exited: its link goes, and its connection and descriptors with it, before
    /// anyone hears that the broadcast finished. How it ended (nil: it has not exited).
    private func endLink(of broadcast: Broadcast) -> BroadcastError?? {
        guard let link = broadcast.link, let status = link.process.reap() else { return nil }
        broadcast.link = nil
        abandonCommands(of: link, broadcast: broadcast.id, reason: "it \(status)")
        if let session = link.session {
            if session.closeReason == nil { session.closeReason = "" }
            peers.close(session)
        }
        capture?.pool?.releaseAll(heldBy: link.holder)
        logger.info("handler '\(link.manifest.name)' (pid \(link.process.pid)) \(status)")
        return .some(link.stopReason ?? (status.succeeded || link.stoppedBeforeStart ? nil : BroadcastError(.handlerFailed, "handler '\(link.manifest.name)' \(status)")))
    }

    func sessionClosed(_ session: PeerSession) {
        dropCommand(of: session)
        if let broadcast = broadcast(ofHandler: session), let link = broadcast.link {
            link.disconnected()
            capture?.pool?.releaseAll(heldBy: link.holder)
            // A handler without its connection can do nothing more; give it a moment to exit by itself.
            if link.terminateAt == nil && link.killAt == nil {
                link.terminateAt = clock.now() + 2_000_000_000
            }
            if let reason = session.closeReason, !reason.isEmpty, broadcast.isActive, broadcast.phase != .finishing {
                transition(broadcast, .fail(BroadcastError(.handlerFailed, "handler '\(link.manifest.name)' was disconnected: \(reason)")))
            }
        }
        if pendingStart?.sessionID == session.id {
            source.cancelOpen("the controller that asked for the broadcast went away")
        }
        if let id = session.setupFor, let broadcast = broadcasts.first(where: { $0.id == id }), broadcast.phase == .awaitingSetup {
            transition(broadcast, .setupCancelled(BroadcastError(.setupCancelled, "the setup UI went away without completing the request")))
        }
    }

    // MARK: - What handlers say

    func handlerMessage(_ message: Message, from session: PeerSession) throws(ProtocolError) {
        guard let broadcast = broadcast(ofHandler: session), let link = broadcast.link else {
            throw .unexpected(message.opcode, "this handler's broadcast is over")
        }
        switch message.opcode {
        case .releaseSlot:
            let release = try SlotRelease(decoding: message.payload)
            if capture?.isRetired(release.pool) == true { break }
            guard let pool = capture?.pool, release.pool == pool.id, pool.release(Int(release.slot), by: link.holder) else {
                throw .malformed(.releaseSlot, "slot \(release.slot) of pool \(release.pool) is not held by this handler")
            }
        case .ready:
            guard !link.ready else { throw .unexpected(.ready, "READY was already sent") }
            link.ready = true
            broadcast.startDeadline = nil
            transition(broadcast, .handlerReady)
        case .finishWithError:
            let error = try message.decode(HandlerFailure.self)
            logger.info("handler '\(link.manifest.name)' finished the broadcast with an error: \(error.message)\(error.code.map { " (code \($0))" } ?? "")")
            transition(broadcast, .fail(BroadcastError(.handlerError, "handler '\(link.manifest.name)' finished the broadcast: \(error.message)")))
        case .updateURL:
            let update = try message.decode(URLUpdate.self)
            if let problem = HandlerManifest.urlProblem(update.url) { throw .malformed(.updateURL, "the URL is refused: \(problem)") }
            broadcast.machine.setURL(update.url)
            peers.publish(.json(.urlUpdated, URLUpdate(broadcast: broadcast.id, url: SecretURL.masked(update.url))))
        case .updateServiceInfo:
            let info = try HandlerServiceInfo.decodeWithinLimits(message)
            let reported = info.isEmpty ? nil : info
            // Revision 1.2: a finishing handler reporting progress (an upload's) has its finish timeout counted anew;
            // the same info again is no progress.
            if broadcast.phase == .finishing, reported != broadcast.serviceInfo {
                link.reported(now: clock.now(), finishTimeout: configuration.finishTimeout)
            }
            broadcast.serviceInfo = reported
        case .setResult:
            guard message.payload.count <= ProtocolLimits.maxResultPayload else {
                throw .malformed(.setResult, "a result of \(message.payload.count) bytes exceeds the limit of \(ProtocolLimits.maxResultPayload)")
            }
            let result = try message.decode(HandlerResult.self).result
            broadcast.result = result
            logger.debug("handler '\(link.manifest.name)' reported a result: \(result.keys.sorted().joined(separator: ", "))")
        case .commandAnswer:
            try commandAnswered(message, by: link, of: broadcast)
        default:
            throw .unexpected(message.opcode, "not a handler message")
        }
    }

    // MARK: - What controllers hear

    /// `broadcast`'s status, with what the daemon and the capture say.
    func status(of broadcast: Broadcast?) -> BroadcastStatus {
        var s = BroadcastStatus(state: .idle, source: source.description)
        s.video = source.videoFormat
        s.audio = source.audioFormat
        s.daemonMemory = ProcessMemory.residentBytes()
        s.memoryPlanned = capture?.plan.totalBytes
        s.memoryWarning = capture?.plan.overBudgetWarning
        addPrivacy(to: &s, of: broadcast)
        guard let broadcast else { return s }
        s = broadcast.status(now: clock.now(), base: s)
        s.capture = source.statistics
        let silent = source.silentAudio
        if !silent.isEmpty { s.silentAudio = Dictionary(uniqueKeysWithValues: silent.map { ($0.key.description, $0.value) }) }
        return s
    }

    func publishServiceInfo(_ broadcast: Broadcast, now: UInt64) {
        guard peers.hasSubscribers else { return }
        let info = ServiceInfo(broadcast: broadcast.id, elapsed: Double(broadcast.elapsed(now: now)) / 1e9, streams: broadcast.ledger.streams,
                               handler: nil, daemonMemory: ProcessMemory.residentBytes())
        peers.publish(info.message(handlerJSON: broadcast.encodedServiceInfo))
    }
}
