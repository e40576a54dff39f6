import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// What happens to each broadcast: its state machine's steps and what they ask for (launching and ending
/// its handler, joining and leaving the capture), and what its handler says.
extension DaemonCore {
    /// Feeds `event` to `broadcast`'s state machine and carries out what it asks; refusals come back as errors.
    /// Events raised while carrying out a transition (a launch that fails, say) follow it, in order.
    @discardableResult
    func transition(_ broadcast: Broadcast, _ event: BroadcastEvent) -> Result<Void, BroadcastError> {
        if followUps != nil {
            followUps!.append((broadcast, event))
            return .success(())
        }
        followUps = []
        defer { followUps = nil }
        let result = step(broadcast, event)
        while let (next, event) = followUps?.first {
            followUps!.removeFirst()
            if case .failure(let refusal) = step(next, event) { logger.debug("follow-up refused: \(refusal)") }
        }
        return result
    }

    private func step(_ broadcast: Broadcast, _ event: BroadcastEvent) -> Result<Void, BroadcastError> {
        endAudioDrain(of: broadcast)
        let before = broadcast.phase
        let effects: [BroadcastEffect]
        do { effects = try broadcast.handle(event) } catch { return .failure(error) }
        let now = clock.now()
        if before != .live && broadcast.phase == .live { goLive(broadcast, now: now) }
        if before == .live && broadcast.phase != .live {
            leaveLive(broadcast, now: now, drainingAudio: event == .pause || event == .finish)
        }
        for effect in effects { apply(effect, to: broadcast, now: now) }
        if before != broadcast.phase {
            logger.info("broadcast \(broadcast.id): \(before) → \(broadcast.phase)")
            peers.publish(.json(.stateChanged, status(of: broadcast)))
            updateStatus(now: now)
            followSharedEncoding(broadcast)
        }
        return .success(())
    }

    private func apply(_ effect: BroadcastEffect, to broadcast: Broadcast, now: UInt64) {
        if broadcast.hold(effect) { return }
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
            guard let link = broadcast.link else {
                transition(broadcast, .handlerExited(nil))  // none was started: nothing to wait for
                return
            }
            link.finish(error: broadcast.machine.error, discard: broadcast.machine.discarded, now: now)
        case .finished(let error):
            if let error {
                logger.warning("broadcast \(broadcast.id) finished with an error: \(error.message)")
            } else {
                logger.info("broadcast \(broadcast.id) finished")
            }
            publishServiceInfo(broadcast, now: now)
            if broadcast.machine.discarded { DiscardedOutput.remove(result: broadcast.result, logger: logger) }
            peers.publish(
                .json(
                    .finished,
                    FinishedEvent(
                        broadcast: broadcast.id, error: error, result: broadcast.result,
                        discarded: broadcast.machine.discarded ? true : nil)))
            // A request cancelled at setup never began: the FINISHED says why, and status is back to idle.
            if error?.code == .setupCancelled && broadcast.link == nil { broadcasts.removeAll { $0 === broadcast } }
            if !broadcasts.contains(where: \.isActive) {
                capture?.close()
                capture = nil
                nextServiceInfoAt = nil
                restoreDefaultSource()
                ProcessMemory.releaseIdleCode()
            } else {
                // The broadcasts left share the pool: it uses fewer slots (a smaller plan always fits).
                try? capture?.share(with: slotHolders)
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
        let running = capture.live != nil
        let live: LiveCapture
        do { live = try capture.beginLive(now: now, clock: clock) } catch {
            transition(broadcast, .fail(BroadcastError(.captureFailed, error.description)))
            return
        }
        broadcast.beginLive(now: now, frameInterval: source.frameInterval)
        // A shared encoder joining a running capture gets the sound of its first frame's time, taken before.
        if running && broadcast.isSharedEncoder { live.catchUpAudio(broadcast) }
        if nextServiceInfoAt == nil { nextServiceInfoAt = now + configuration.serviceInfoInterval }
    }

    /// `broadcast` is no longer live. After a pause or finish its handler still gets the audio captured
    /// before (`Broadcast.AudioDrain`); capture ends when no broadcast is live or waiting for audio.
    private func leaveLive(_ broadcast: Broadcast, now: UInt64, drainingAudio: Bool) {
        guard let live = capture?.live else {
            broadcast.endLive(now: now)
            return
        }
        let draining = drainingAudio && live.nextAudioAt != nil && broadcast.isConnected && broadcast.takesSamples
        // A finish of a handler that shares an encoder waits for the encoder's sound of the picture it was sent.
        let encodedDrain =
            drainingAudio && broadcast.phase == .finishing && broadcast.isConnected
            ? broadcast.encodedBy.flatMap(sharedEncoders.encoder)?.drain(broadcast.id) : nil
        broadcast.endLive(
            now: now, drainingAudio: draining || encodedDrain != nil, limit: encodedDrain ?? Broadcast.AudioDrain.limit)
        if encodedDrain != nil { wakes.schedule(.audioDrain(broadcast.id), at: broadcast.audioDrain?.deadline) }
        if !broadcasts.contains(where: \.isLive) { live.stopFrames() }
        if draining {
            captureAudio(now: now)
        } else {
            endCaptureIfUnused()
        }
    }

    /// Capture ends when no broadcast is live or waiting for its audio.
    private func endCaptureIfUnused() {
        guard let capture, capture.live != nil, !broadcasts.contains(where: { $0.isLive || $0.audioDrain != nil })
        else { return }
        capture.endLive()
    }

    /// The wait for `broadcast`'s audio after its pause or finish is over: its handler hears of it.
    func endAudioDrain(of broadcast: Broadcast) {
        guard let drain = broadcast.endDrain() else { return }
        endCaptureIfUnused()
        let now = clock.now()
        if let encoder = broadcast.encodedBy.flatMap(sharedEncoders.encoder) {
            wakes.schedule(.audioDrain(broadcast.id), at: nil)
            encoder.endDrain(broadcast.id)
            logger.debug(
                "broadcast \(broadcast.id): its encoder's sound of its picture delivered after \((now - drain.since) / 1_000_000) ms"
            )
            for effect in drain.held { apply(effect, to: broadcast, now: now) }
            followSharedEncoding(broadcast)  // it leaves the encoder now
            return
        }
        let short = source.audioStreams.filter { broadcast.ledger.deliveredUntil[$0, default: 0] < drain.until }.map(
            \.description)
        logger.debug(
            "broadcast \(broadcast.id): audio captured before the \(broadcast.phase == .paused ? "pause" : "finish") delivered after \((now - drain.since) / 1_000_000) ms\(short.isEmpty ? "" : "; short: " + short.joined(separator: ", "))"
        )
        for effect in drain.held { apply(effect, to: broadcast, now: now) }
    }

    func captureVideo(now: UInt64) {
        guard let capture, let live = capture.live else { return }
        // The camera's frame first: a handler that puts it in a corner has it for the screen's frame of the same
        // deadline (after it, the corner was a frame behind the screen).
        captureCamera(now: now)
        let active = broadcasts.filter(\.isActive)
        if let failure = live.captureVideo(
            now: now, session: capture, live: broadcasts.filter { $0.isLive && $0.takesSamples }, active: active)
        {
            for broadcast in broadcasts where broadcast.isLive { transition(broadcast, .fail(failure)) }
        }
    }

    /// The camera's news at a frame deadline, for the live broadcasts whose handlers take it (a paused one gets no
    /// camera frames either, nor does any while the session is locked and the screen blanked: `--on-lock blank`);
    /// a camera that went away is said once to each and in their status, and they go on. Two frames when the camera
    /// kept one the loop missed while busy (see `PipeWireScreenSource`), then its newest.
    func captureCamera(now: UInt64) {
        guard let capture, let feed = capture.cameraFeed else { return }
        let blanked = lockState.isLocked && configuration.onLock == .blank
        let takers =
            blanked ? [] : broadcasts.filter { $0.isLive && $0.takesCamera && $0.isConnected && $0.takesSamples }
        for _ in 0..<2 {
            guard case .frame = captureCamera(now: now, feed: feed, takers: takers) else { return }
        }
    }

    private func captureCamera(now: UInt64, feed: CameraFeed, takers: [Broadcast]) -> CameraFeed.Update {
        guard let capture else { return .nothing }
        let update = feed.update(now: now, takers: !takers.isEmpty)
        switch update {
        case .nothing:
            break
        case .dropped:
            for broadcast in takers { broadcast.skip(.videoCamera) }
        case .format(let video, let newPool):
            logger.info("camera \(feed.camera.title): \(video.width)x\(video.height) \(video.format)")
            if let format = feed.format {
                capture.cameraStarted(format, mappedBytes: feed.source.sharedMemory.reduce(0) { $0 + $1.bytes })
                logger.info("memory plan: \(capture.plan)")
            }
            for broadcast in broadcasts where broadcast.isActive && broadcast.takesCamera {
                broadcast.cameraChanged(feed, newPool: newPool)
            }
        case .frame(let slot, let pts):
            guard let pool = feed.pool, let format = feed.format else { return .nothing }
            for broadcast in takers {
                broadcast.deliverCamera(
                    slot: slot, pts: pts, duration: source.frameInterval, format: format, pool: pool)
            }
        case .lost(let why):
            logger.warning("\(why); the broadcasts go on without it")
            capture.live?.cameraLost(why)
            for broadcast in broadcasts where broadcast.isActive {
                if broadcast.takesCamera { broadcast.cameraChanged(feed, newPool: false) }
                peers.publish(.json(.stateChanged, status(of: broadcast)))
            }
        }
        return update
    }

    func captureAudio(now: UInt64) {
        guard let live = capture?.live else { return }
        let (silenceChanged, drained) = live.captureAudio(
            now: now, receivers: broadcasts.filter { ($0.isLive || $0.audioDrain != nil) && $0.takesSamples })
        if silenceChanged {
            for broadcast in broadcasts where broadcast.isActive {
                peers.publish(.json(.stateChanged, status(of: broadcast)))
            }
        }
        for broadcast in drained { endAudioDrain(of: broadcast) }
    }

    // MARK: - The handler process

    private func launchHandler(of broadcast: Broadcast, now: UInt64) {
        let entry = broadcast.entry
        let manifest = entry.manifest
        guard let path = HandlerRegistry.resolveExecutable(entry) else {
            transition(
                broadcast,
                .fail(
                    BroadcastError(
                        .handlerFailed,
                        "handler '\(manifest.name)': cannot find its program "
                            + "'\(manifest.exec)' (is it installed and executable?)")))
            return
        }
        guard let capture else { return }
        do { try capture.makePool() } catch {
            transition(broadcast, .fail(error))
            return
        }
        do {
            let (ours, theirs) = try UnixSocket.pair()
            try ours.setNonBlocking()
            var environment = Environment.all
            environment["BROADCASTD_HANDLER_FD"] = "3"
            environment["BROADCASTD_SOCKET"] = socketPath
            let process = try launcher.launch(
                path: path, arguments: manifest.arguments ?? [], environment: environment,
                socket: theirs)
            theirs.close()
            let session = peers.addSession(ours, launchedFor: broadcast.id)
            broadcast.attach(
                HandlerLink(
                    process: process, manifest: manifest, broadcast: broadcast.id, session: session,
                    capture: capture, configuration: configuration, wakes: wakes, logger: logger,
                    now: now, isSharedEncoder: broadcast.isSharedEncoder))
            logger.info("launched handler '\(manifest.name)' (\(path), pid \(process.pid))")
        } catch {
            transition(
                broadcast,
                .fail(BroadcastError(.handlerFailed, "handler '\(manifest.name)': could not start \(path): \(error)")))
        }
    }

    /// The broadcast whose handler talks over `session`.
    func broadcast(ofHandler session: PeerSession) -> Broadcast? {
        guard let id = session.launchedFor else { return nil }
        return broadcasts.first { $0.id == id && $0.link?.session === session }
    }

    func handlerConnected(_ session: PeerSession) {
        guard let broadcast = broadcast(ofHandler: session), let current = broadcast.machine.current,
            let pool = capture?.pool
        else { return }
        session.enqueue(Broadcast.announcement(of: pool))
        let feed = broadcast.takesCamera ? capture?.cameraFeed : nil
        if let cameraPool = feed?.pool { session.enqueue(Broadcast.announcement(of: cameraPool, camera: true)) }
        let rate = broadcast.chooseFrameRate(captureRate: 1e9 / Double(source.frameInterval))
        session.enqueue(
            .json(
                .broadcastStarted,
                BroadcastStart(
                    broadcast: current.id, url: current.url, setupInfo: broadcast.setupInfo,
                    video: VideoDescription(source.videoFormat, colorRange: source.colorRange.rawValue),
                    audio: AudioDescription(source.audioFormat),
                    frameRate: Int(rate.rounded()),
                    audioStreams: source.audioStreams.map(\.description))))
        if let notice = feed?.notice { session.enqueue(.json(.cameraFormat, notice)) }
        logger.debug("handler '\(broadcast.manifest.name)' connected; broadcast \(current.id) started")
    }

    /// The handler process has exited: its link goes, and its connection and descriptors with it, before
    /// anyone hears that the broadcast finished.
    func reapHandler(of broadcast: Broadcast) {
        guard let link = broadcast.link, let (status, failure) = link.exited() else { return }
        broadcast.detach()
        abandonCommands(of: link, broadcast: broadcast.id, reason: "it \(status)")
        if let session = link.session {
            if !session.isClosing { session.markClosing("") }
            peers.close(session)
        }
        transition(broadcast, .handlerExited(failure))
    }

    func sessionClosed(_ session: PeerSession) {
        dropCommand(of: session)
        if let broadcast = broadcast(ofHandler: session), let link = broadcast.link {
            // A handler without its connection can do nothing more; it has a moment to exit by itself.
            link.disconnected(now: clock.now())
            if let reason = session.closeReason, !reason.isEmpty, broadcast.isActive, broadcast.phase != .finishing {
                transition(
                    broadcast,
                    .fail(BroadcastError(.handlerFailed, "handler '\(link.manifest.name)' was disconnected: \(reason)"))
                )
            }
        }
        if pendingStart?.sessionID == session.id {
            source.cancelOpen("the controller that asked for the broadcast went away")
        }
        if let id = session.fetchedSetup, let broadcast = broadcasts.first(where: { $0.id == id }),
            broadcast.phase == .awaitingSetup
        {
            transition(
                broadcast,
                .setupCancelled(
                    BroadcastError(.setupCancelled, "the setup UI went away without completing the request")))
        }
    }

    // MARK: - What handlers say

    /// A message from `session`, the connection of broadcast `id`'s handler.
    func handlerMessage(_ message: Message, from session: PeerSession) throws(ProtocolError) {
        guard let broadcast = broadcast(ofHandler: session), let link = broadcast.link else {
            throw .unexpected(message.opcode, "this handler's broadcast is over")
        }
        let now = clock.now()
        switch try link.receive(message, now: now) {
        case .released:
            break
        case .ready:
            transition(broadcast, .handlerReady)
        case .failed(let error):
            transition(broadcast, .fail(error))
        case .urlUpdated(let url):
            broadcast.setURL(url)
            peers.publish(.json(.urlUpdated, URLUpdate(broadcast: broadcast.id, url: SecretURL.masked(url))))
        case .serviceInfo(let info):
            // Revision 1.2: a finishing handler reporting progress (an upload's) has its finish timeout counted anew;
            // the same info again is no progress.
            if broadcast.setServiceInfo(info) { link.reported(now: now) }
        case .result(let result):
            broadcast.setResult(result)
        case .answer(let answer):
            commandAnswered(answer, by: link, of: broadcast)
        case .encode(let request):
            encodeRequested(request, by: broadcast)
        case .keyframeWanted:
            if let encoder = broadcast.encodedBy { sharedEncoders.encoder(encoder)?.askKeyframe(links: link(of:)) }
        case .shared(let news):
            guard let encoder = sharedEncoders.encoder(broadcast.id) else { return }
            try encoder.take(news, links: link(of:))
            // A broadcast it serves is live from the first keyframe its handler gets, where its file starts.
            for id in encoder.takeStarted() { self.broadcast(id)?.encodedStreamBegan(now: now) }
            for id in encoder.takeDrained() { self.broadcast(id).map(endAudioDrain) }
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
        keepEncodedCounters(of: broadcast)
        s = broadcast.status(now: clock.now(), base: s)
        s.capture = source.statistics
        // A shared encoder's status always says whom it serves: none once it is finishing after its last.
        if broadcast.isSharedEncoder { s.serves = sharedEncoders.encoder(broadcast.id)?.consumerIDs ?? [] }
        if broadcast.isActive, let feed = capture?.cameraFeed {
            s.camera = feed.camera.title
            s.cameraLost = feed.lost
        }
        let silent = source.silentAudio
        if !silent.isEmpty {
            s.silentAudio = Dictionary(uniqueKeysWithValues: silent.map { ($0.key.description, $0.value) })
        }
        return s
    }

    func publishServiceInfo(_ broadcast: Broadcast, now: UInt64) {
        guard peers.hasSubscribers else { return }
        keepEncodedCounters(of: broadcast)
        let info = ServiceInfo(
            broadcast: broadcast.id, elapsed: Double(broadcast.elapsed(now: now)) / 1e9,
            streams: broadcast.streams,
            handler: nil, daemonMemory: ProcessMemory.residentBytes())
        peers.publish(info.message(handlerJSON: broadcast.encodedServiceInfo))
    }
}
