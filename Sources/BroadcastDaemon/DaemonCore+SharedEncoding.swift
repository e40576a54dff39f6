import BroadcastCore
import BroadcastProtocol

/// Revision 2.9: handlers that ask for the same encoding of the capture share one encoder, a broadcast of its own
/// (`SharedEncoders`); here the core starts it, answers ENCODE, and follows the phases of both sides.
extension DaemonCore {
    /// The broadcasts whose handlers take frames (a share of the pool's slots each): not those a shared encoder
    /// serves.
    var slotHolders: Int { broadcasts.count { $0.isActive && $0.takesSamples } }

    /// The handler link of broadcast `id`.
    func link(of id: UInt32) -> HandlerLink? {
        broadcast(id)?.link
    }

    /// ENCODE from `broadcast`'s handler: it shares the running encoder of these settings on this capture, or one
    /// started for it; from ENCODING on it gets that encoder's packets instead of samples. When none can be had,
    /// ENCODING says why and the handler keeps its samples (it encodes by itself).
    func encodeRequested(_ request: EncodeRequest, by broadcast: Broadcast) {
        let notice: EncodingNotice
        switch sharedEncoder(for: request.settings, consumer: broadcast) {
        case .success(let encoder):
            encoder.add(broadcast.id)
            broadcast.share(encoder.id)
            try? capture?.share(with: slotHolders)  // its handler takes no more frames: fewer slots
            logger.info("broadcast \(broadcast.id) shares encoder \(encoder.id) (\(encoder.consumerIDs.count) served)")
            notice = EncodingNotice(encoder: encoder.id, sharedWith: encoder.consumerIDs)
            broadcast.link?.send(.json(.encoding, notice))
            encoder.announce(links: link(of:))
            if broadcast.phase == .paused { followSharedEncoding(broadcast) }
            for id in [broadcast.id, encoder.id] { peers.publish(.json(.stateChanged, status(of: self.broadcast(id)))) }
        case .failure(let error):
            logger.warning("broadcast \(broadcast.id) encodes by itself: \(error.message)")
            broadcast.link?.send(.json(.encoding, EncodingNotice(error: error.message)))
        }
    }

    /// The running encoder of `settings` on the current capture, or a new one.
    private func sharedEncoder(for settings: [String: String], consumer: Broadcast) -> Result<
        SharedEncoder, BroadcastError
    > {
        guard let capture, consumer.phase == .live || consumer.phase == .paused else {
            return .failure(BroadcastError(.invalidRequest, "the broadcast is not live"))
        }
        // Its frame rate is its setup's, as a handler's is (Broadcast.chooseFrameRate): checked as a manifest's field
        // (`input`: the capture's).
        if let rate = settings[HandlerManifest.frameRateKey], rate != "input",
            !(Double(rate).map { (1...240).contains($0) } ?? false)
        {
            return .failure(
                BroadcastError(.invalidRequest, "setting 'frameRate' is frames per second, 1 to 240, not '\(rate)'"))
        }
        let key = ObjectIdentifier(capture)
        if let running = sharedEncoders.encoder(settings: settings, capture: key) { return .success(running) }
        let entry = HandlerRegistry.Entry(
            manifest: SharedEncoders.manifest(exec: configuration.encoderProgram), file: "")
        guard HandlerRegistry.resolveExecutable(entry) != nil else {
            return .failure(
                BroadcastError(
                    .handlerFailed,
                    "cannot find the shared encoder's program '\(configuration.encoderProgram)' (is it installed "
                        + "beside broadcastd?)"))
        }
        do { try capture.share(with: slotHolders + 1) } catch { return .failure(error) }
        let broadcast: Broadcast
        do {
            broadcast = try Broadcast(
                id: nextBroadcastID, entry: entry, maxDuration: nil, askedFrameRate: consumer.askedFrameRate,
                wakes: wakes,
                isSharedEncoder: true)
        } catch {
            return .failure(error)
        }
        nextBroadcastID += 1
        broadcasts.append(broadcast)
        broadcast.setUp(settings)
        let encoder = SharedEncoder(id: broadcast.id, settings: settings, capture: key)
        sharedEncoders.add(encoder)
        logger.info("broadcast \(broadcast.id): a shared encoder for broadcast \(consumer.id)")
        transition(broadcast, .setupCompleted(url: nil))
        guard broadcast.isActive else {
            return .failure(
                broadcast.machine.error ?? BroadcastError(.handlerFailed, "the shared encoder did not start"))
        }
        return .success(encoder)
    }

    /// `broadcast`'s phase changed: its encoder, or its consumers, follow (`SharedEncoders.phaseChanged`).
    func followSharedEncoding(_ broadcast: Broadcast) {
        keepEncodedCounters(of: broadcast)
        let steps = sharedEncoders.phaseChanged(
            broadcast.id, to: broadcast.phase, error: broadcast.machine.error, phaseOf: { self.broadcast($0)?.phase })
        for step in steps {
            let target: UInt32
            let event: BroadcastEvent
            switch step {
            case .pause(let encoder): (target, event) = (encoder, .pause)
            case .resume(let encoder): (target, event) = (encoder, .resume)
            case .finish(let encoder): (target, event) = (encoder, .finish)
            case .fail(let consumer, let error): (target, event) = (consumer, .fail(error))
            }
            if let other = self.broadcast(target), other.isActive { transition(other, event) }
        }
        // The encoder's status lists whom it serves.
        if let encoder = broadcast.encodedBy.flatMap(self.broadcast), encoder.isActive {
            peers.publish(.json(.stateChanged, status(of: encoder)))
        }
    }

    /// Its shared encoder's count of the packets it was sent goes into its status (and stays when it leaves).
    func keepEncodedCounters(of broadcast: Broadcast) {
        guard let encoder = broadcast.encodedBy.flatMap(sharedEncoders.encoder),
            let counters = encoder.counters(of: broadcast.id)
        else { return }
        broadcast.keepEncodedCounters(counters)
    }

    /// Why a controller cannot pause, finish or command a shared encoder's broadcast.
    func sharedEncoderRefusal(_ encoder: Broadcast) -> BroadcastError {
        let served = sharedEncoders.encoder(encoder.id)?.consumerIDs.map(String.init).joined(separator: ", ") ?? ""
        return BroadcastError(
            .invalidRequest,
            "broadcast \(encoder.id) is a shared encoder: broadcastd pauses and finishes it with the broadcasts it "
                + "serves (\(served.isEmpty ? "none" : served)); address those")
    }
}
