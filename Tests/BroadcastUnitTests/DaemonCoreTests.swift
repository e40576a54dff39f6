import BroadcastProtocol
import BroadcastSystem
import Glibc
import Testing

@testable import BroadcastCore
@testable import BroadcastDaemon

/// Whole scenarios through broadcastd's core on a hand-moved clock (`CoreHarness`): what the integration tests
/// checked of the logic with a real daemon and real waits, here without either.
@Suite struct DaemonCoreTests {
    static let second: UInt64 = 1_000_000_000

    /// START, setup, launch, HELLO, READY, live: frames and audio fanned out, a pause and a finish that wait for the
    /// audio captured before them, the handler's result, its exit, FINISHED; and nothing left waiting.
    @Test func aBroadcastFromStartToItsHandlersExit() throws {
        let h = try CoreHarness()
        let controller = try h.subscribedController()
        let (id, handler) = try h.startBroadcast(from: controller)
        let launch = try #require(h.launcher.launched.last)
        #expect(
            launch.path == "/bin/true" && launch.environment["BROADCASTD_HANDLER_FD"] == "3"
                && launch.environment["BROADCASTD_SOCKET"] == h.core.socketPath)
        #expect(
            handler.started?.broadcast == id && handler.started?.frameRate == 30
                && handler.started?.url == "file:///tmp/x")
        #expect(h.wakes.timers[.handlerDeadline(id)] == nil, "a live handler has no deadline")
        #expect(h.wakes.timers[.frame] != nil && h.wakes.timers[.serviceInfo] != nil)
        let states = try controller.received().filter { $0.opcode == .stateChanged }
        #expect(try states.map { try $0.decode(BroadcastStatus.self).state } == [.awaitingSetup, .starting, .live])

        // A second live: a frame at every interval from the first (31 of them, 33.3 ms apart), each in its slot
        // and given back; 10 ms chunks of both audio streams.
        try h.advance(by: Self.second, releasing: [handler])
        let frames = handler.taken + (try h.videoSamples(handler))
        #expect(
            frames.count == 31 && frames.map(\.timing.sequence) == Array(0..<31), "\(frames.map(\.timing.sequence))")
        #expect(
            frames.first?.timing.discontinuity == true && frames.dropFirst().allSatisfy { !$0.timing.discontinuity })
        #expect(zip(frames, frames.dropFirst()).allSatisfy { $1.timing.presentationTime > $0.timing.presentationTime })
        let audio = try handler.peer.received().filter { $0.opcode == .audioSample }.map {
            try AudioSampleHeader(decoding: $0.payload)
        }
        #expect(
            audio.count(where: { $0.type == .audioApp }) == 100 && audio.count(where: { $0.type == .audioMic }) == 100,
            "\(audio.count(where: { $0.type == .audioApp })) \(audio.count(where: { $0.type == .audioMic }))")
        var status = try h.status(controller)
        #expect(
            status.state == .live && status.streams?["video"]?.delivered == 31 && status.streams?["video"]?.dropped == 0
        )
        #expect(status.elapsed == 1)

        // PAUSE: the handler hears of it once the audio captured before it has come (to the margin beyond the last
        // frame's end), and gets no frame after it.
        let margin = Broadcast.AudioDrain.margin
        let lastFrameEnd = try #require(frames.last).timing.presentationTime + h.source.frameInterval
        #expect(try h.request(.pause, FinishRequest(broadcast: id), from: controller).opcode == .ok)
        #expect(try handler.peer.received().isEmpty, "the pause waits for the audio")
        try h.advance(by: margin + 100_000_000)
        let paused = try handler.peer.received()
        #expect(paused.last?.opcode == .broadcastPaused && !paused.contains { $0.opcode == .videoSample })
        let drained = try paused.filter { $0.opcode == .audioSample }.map {
            try AudioSampleHeader(decoding: $0.payload)
        }
        #expect(drained.allSatisfy { $0.timing.presentationTime < lastFrameEnd + margin } && !drained.isEmpty)
        #expect(h.wakes.timers[.frame] == nil && h.wakes.timers[.audio] == nil, "nothing is captured while paused")
        try h.advance(by: Self.second)
        #expect(try handler.peer.received().isEmpty)

        // RESUME: at once, and the first frame after it is flagged.
        #expect(try h.request(.resume, FinishRequest(broadcast: id), from: controller).opcode == .ok)
        #expect(try handler.peer.received().map(\.opcode) == [.broadcastResumed])
        handler.taken = []
        try h.advance(by: Self.second / 2, releasing: [handler])
        let resumed = handler.taken + (try h.videoSamples(handler))
        #expect(resumed.first?.timing.discontinuity == true && resumed.count == 16)

        // FINISH: BROADCAST_FINISHED after the audio; the handler reports, and exits.
        #expect(try h.request(.finish, FinishRequest(broadcast: id), from: controller).opcode == .ok)
        try h.advance(by: margin + 100_000_000)
        #expect(try handler.peer.received().last?.opcode == .broadcastFinished)
        // Its result and its exit come in one turn, the exit first: the result is read before its connection closes
        // (a record handler's result was lost so, its FINISHED saying only the file).
        try handler.peer.connection.send(.json(.setResult, HandlerResult(result: ["file": .string("/tmp/x.mp4")])))
        #expect(handler.process.signals.isEmpty)
        h.exit(handler, .exited(0), broadcast: id)
        let finished = try #require(try controller.received().first { $0.opcode == .finished }).decode(
            FinishedEvent.self)
        #expect(finished.broadcast == id && finished.error == nil && finished.result == ["file": .string("/tmp/x.mp4")])
        status = try h.status(controller)
        #expect(status.state == .finished && status.file == "/tmp/x.mp4" && status.elapsed == 1.5)
        // Everything the broadcast waited for went with it: its handler's connection, the capture's timers.
        let session = handler.peer.session.id
        #expect(h.core.capture == nil && h.wakes.timers[.frame] == nil && h.wakes.timers[.audio] == nil)
        #expect(
            [.handlerDeadline(id), .maxDuration(id), .peerDeadline(session)].allSatisfy { h.wakes.timers[$0] == nil })
        #expect([.handlerExited(id), .peer(session)].allSatisfy { h.wakes.descriptors[$0] == nil })
        #expect(h.notifier.lines.contains("live: broadcast \(id) to stand-in, 00:00:01"))
    }

    /// Two broadcasts share the capture: a handler that keeps its slots loses frames of its own, the other none.
    @Test func aHandlerThatKeepsItsSlotsLosesOnlyItsOwnFrames() throws {
        let h = try CoreHarness()
        let controller = try h.peer(.controller)
        let (first, taking) = try h.startBroadcast(from: controller)
        let (second, keeping) = try h.startBroadcast(from: controller)
        #expect(taking.pool == keeping.pool, "one pool for the capture")
        try h.advance(by: Self.second, releasing: [taking])
        let kept = try h.videoSamples(keeping, release: false)
        #expect(taking.framesTaken == 31 && kept.count < 31 && !kept.isEmpty, "\(taking.framesTaken) \(kept.count)")
        let status = try h.status(controller).broadcasts ?? []
        let video = Dictionary(
            uniqueKeysWithValues: status.compactMap { s in s.broadcast.map { ($0, s.streams?["video"]) } })
        #expect(video[first]??.dropped == 0 && video[first]??.delivered == 31)
        #expect(video[second]??.delivered == UInt64(kept.count) && video[second]??.dropped == UInt64(31 - kept.count))
    }

    /// A live handler that holds its slots and reads nothing has hung: its broadcast finishes saying so, it is told,
    /// and when it does not exit it gets SIGTERM after the finish timeout and SIGKILL 2 s later.
    @Test func aHungHandlerFinishesItsBroadcastAndIsStoppedWithSIGTERMThenSIGKILL() throws {
        let h = try CoreHarness { $0.hangTimeout = 2 * Self.second }
        let controller = try h.subscribedController()
        let (id, handler) = try h.startBroadcast(from: controller)
        try h.advance(by: 2 * Self.second)
        #expect(h.core.broadcast(id)?.phase == .live, "not yet: 2 s is the limit")
        try h.advance(by: Self.second)
        #expect(h.core.broadcast(id)?.phase == .finishing)
        #expect(try h.drain(handler.peer).last?.opcode == .broadcastFinished)
        try h.advance(by: 5 * Self.second - 1)
        #expect(handler.process.signals.isEmpty)
        try h.advance(by: 1)
        #expect(handler.process.signals == [SIGTERM] && h.log.count("did not exit in time; sending SIGTERM") == 1)
        try h.advance(by: 2 * Self.second)
        #expect(handler.process.signals == [SIGTERM, SIGKILL] && h.log.count("ignored SIGTERM; sending SIGKILL") == 1)
        h.exit(handler, .signaled(SIGKILL), broadcast: id)
        let finished = try #require(try controller.received().first { $0.opcode == .finished }).decode(
            FinishedEvent.self)
        #expect(
            finished.error?.code == .handlerFailed
                && finished.error?.message
                    == "handler 'stand-in' hung: it has held frame slots without releasing any for 2 s",
            "\(String(describing: finished.error))")
    }

    /// After BROADCAST_FINISHED a handler has 5 s: one that does not exit then is stopped and the broadcast says so;
    /// the same service info again and again is no progress (was FailureTests, with a real handler and 5 s waits).
    @Test(arguments: [false, true]) func aHandlerThatWillNotExitIsStoppedAndReported(repeatingItsInfo: Bool) throws {
        let h = try CoreHarness()
        let controller = try h.subscribedController()
        let (id, handler) = try h.startBroadcast(from: controller)
        try h.advance(by: Self.second, releasing: [handler])
        #expect(try h.request(.finish, FinishRequest(broadcast: id), from: controller).opcode == .ok)
        for _ in 0..<6 {
            if repeatingItsInfo {
                try h.send(
                    .json(.updateServiceInfo, HandlerServiceInfo(info: ["state": .string("finishing")])),
                    from: handler.peer)
            }
            try h.advance(by: Self.second, releasing: [handler])
        }
        #expect(handler.process.signals == [SIGTERM])
        h.exit(handler, .signaled(SIGTERM), broadcast: id)
        let finished = try #require(try controller.received().first { $0.opcode == .finished }).decode(
            FinishedEvent.self)
        #expect(
            finished.error?.message == "handler 'stand-in' did not finish within 5 s and was stopped",
            "\(String(describing: finished.error))")
    }

    /// Revision 1.2: a finishing handler that reports progress (an upload's) has its 5 s counted anew at each report.
    @Test func aFinishingHandlerThatReportsProgressHasItsTimeoutCountedAnew() throws {
        let h = try CoreHarness()
        let controller = try h.subscribedController()
        let (id, handler) = try h.startBroadcast(from: controller)
        #expect(try h.request(.finish, FinishRequest(broadcast: id), from: controller).opcode == .ok)
        for sent in 0..<10 {
            try h.send(
                .json(.updateServiceInfo, HandlerServiceInfo(info: ["uploaded": .number(Double(sent))])),
                from: handler.peer)
            try h.advance(by: 4 * Self.second)
        }
        #expect(handler.process.signals.isEmpty, "40 s of progress")
        try h.advance(by: Self.second)
        #expect(handler.process.signals == [SIGTERM], "5 s after the last report")
        h.exit(handler, .exited(0), broadcast: id)
    }

    /// A maximum duration counts live time only: 2 s live, 1 s paused, and the broadcast finishes after 1 more second
    /// live, to the nanosecond.
    @Test func theMaximumDurationCountsLiveTimeOnly() throws {
        let h = try CoreHarness()
        let controller = try h.subscribedController()
        let (id, handler) = try h.startBroadcast(from: controller, maxDuration: 3)
        try h.advance(by: 2 * Self.second, releasing: [handler])
        #expect(try h.request(.pause, FinishRequest(broadcast: id), from: controller).opcode == .ok)
        #expect(h.wakes.timers[.maxDuration(id)] == nil, "a paused broadcast has no maximum-duration timer")
        try h.advance(by: Self.second, releasing: [handler])
        #expect(try h.request(.resume, FinishRequest(broadcast: id), from: controller).opcode == .ok)
        #expect(h.wakes.timers[.maxDuration(id)] == h.clock.now() + Self.second)
        try h.advance(by: Self.second - 1, releasing: [handler])
        #expect(h.core.broadcast(id)?.phase == .live)
        try h.advance(by: 1, releasing: [handler])
        #expect(
            h.core.broadcast(id)?.phase == .finishing
                && h.log.count("broadcast \(id) reached its maximum duration") == 1)
    }

    /// A handler that closes its connection while it runs has 2 s to exit by itself before SIGTERM; its exit status
    /// then ends its broadcast.
    @Test func aHandlerThatClosesItsConnectionHasTwoSecondsToExit() throws {
        let h = try CoreHarness()
        let controller = try h.subscribedController()
        let (id, handler) = try h.startBroadcast(from: controller)
        handler.peer.connection.close()
        h.core.handle(.peer(handler.peer.session.id), Poller.Event(readable: true, closed: true), now: h.clock.now())
        h.endTurn()
        #expect(h.core.broadcast(id)?.isConnected == false && h.core.peers.sessions[handler.peer.session.id] == nil)
        try h.advance(by: 2 * Self.second - 1)
        #expect(handler.process.signals.isEmpty)
        try h.advance(by: 1)
        #expect(handler.process.signals == [SIGTERM])
        h.exit(handler, .signaled(SIGTERM), broadcast: id)
        let finished = try #require(try controller.received().first { $0.opcode == .finished }).decode(
            FinishedEvent.self)
        #expect(finished.error?.code == .handlerFailed, "\(String(describing: finished.error))")
    }

    /// A handler that never says HELLO: READY is overdue after 10 s, and the handler, which never started, is
    /// stopped at once (its death by SIGTERM is no failure of its own).
    @Test func aHandlerThatNeverBecomesReadyFailsItsBroadcastAfterTheStartTimeout() throws {
        let h = try CoreHarness()
        let controller = try h.subscribedController()
        #expect(try h.request(.start, StartRequest(handler: "stand-in"), from: controller).opcode == .ok)
        let setup = try h.peer(.setup)
        _ = try h.request(.getSetupRequest, BroadcastReference(broadcast: nil), from: setup)
        _ = try h.request(.completeSetup, SetupCompletion(broadcast: 1, url: nil, setupInfo: [:]), from: setup)
        let process = try #require(h.launcher.launched.last).process
        #expect(h.wakes.timers[.handlerDeadline(1)] == h.clock.now() + 10 * Self.second)
        try h.advance(by: 10 * Self.second - 1)
        #expect(process.signals.isEmpty)
        try h.advance(by: 1)
        #expect(process.signals == [SIGTERM])
        process.exitStatus = .signaled(SIGTERM)
        h.core.handle(.handlerExited(1), Poller.Event(readable: true), now: h.clock.now())
        let finished = try #require(try controller.received().first { $0.opcode == .finished }).decode(
            FinishedEvent.self)
        #expect(finished.error == BroadcastError(.handlerFailed, "handler 'stand-in' did not become ready within 10 s"))
    }

    /// A handler that breaks the protocol (READY twice, a slot it does not hold) is told why and closed, and its
    /// broadcast finishes with the reason.
    @Test(arguments: ["ready", "release"]) func aHandlerThatBreaksTheProtocolEndsItsBroadcastWithTheReason(
        _ how: String
    ) throws {
        let h = try CoreHarness()
        let controller = try h.subscribedController()
        let (id, handler) = try h.startBroadcast(from: controller)
        let message = how == "ready" ? .json(.ready, seq: 3, Empty()) : SlotRelease(pool: handler.pool, slot: 7).message
        try h.send(message, from: handler.peer)
        let error = try #require(try handler.peer.received().last { $0.opcode == .error }).decode(BroadcastError.self)
        let why =
            how == "ready" ? "READY was already sent" : "slot 7 of pool \(handler.pool) is not held by this handler"
        #expect(error.code == .protocolError && error.message.contains(why), "\(error)")
        #expect(h.core.broadcast(id)?.phase == .finishing && handler.process.signals == [SIGTERM])
        h.exit(handler, .signaled(SIGTERM), broadcast: id)
        let finished = try #require(try controller.received().first { $0.opcode == .finished }).decode(
            FinishedEvent.self)
        #expect(
            finished.error?.code == .handlerFailed
                && finished.error?.message.hasPrefix("handler 'stand-in' was disconnected: ") == true
                && finished.error?.message.contains(why) == true, "\(String(describing: finished.error))")
    }

    /// SIGTERM finishes live broadcasts with `shutdown`; the core is done once their handlers have exited. A second
    /// signal kills what is left.
    @Test func aSignalFinishesTheBroadcastsAndASecondStopsAtOnce() throws {
        let h = try CoreHarness()
        let controller = try h.subscribedController()
        let (id, handler) = try h.startBroadcast(from: controller)
        try h.advance(by: Self.second, releasing: [handler])
        #expect(!h.core.signalled(SIGTERM) && h.notifier.stopped && !h.core.isDone)
        try h.advance(by: 100_000_000, releasing: [handler])
        #expect(try handler.peer.received().last?.opcode == .broadcastFinished)
        #expect(h.core.signalled(SIGINT) && handler.process.signals == [SIGKILL])
        h.exit(handler, .signaled(SIGKILL), broadcast: id)
        let finished = try #require(try controller.received().first { $0.opcode == .finished }).decode(
            FinishedEvent.self)
        #expect(finished.error == BroadcastError(.shutdown, "broadcastd was stopped") && h.core.isDone)
        #expect(h.notifier.lines.last == "stopping")
    }

    // MARK: - Privacy on lock

    /// `--on-lock pause`: locking pauses the live broadcasts (not one the user paused), a RESUME meanwhile is refused,
    /// one that becomes ready meanwhile pauses at once, and unlocking resumes only those broadcastd paused.
    @Test func aLockedSessionPausesLiveBroadcastsAndUnlockingResumesOnlyThose() throws {
        let h = try CoreHarness()
        let lock = try StandInLock()
        h.core.sessionLock = lock
        let controller = try h.peer(.controller)
        let (live, liveHandler) = try h.startBroadcast(from: controller)
        let (paused, pausedHandler) = try h.startBroadcast(from: controller)
        #expect(try h.request(.pause, FinishRequest(broadcast: paused), from: controller).opcode == .ok)
        try h.advance(by: Self.second, releasing: [liveHandler, pausedHandler])

        lock.set(locked: true, h)
        #expect(h.core.broadcast(live)?.phase == .paused && h.core.broadcast(paused)?.phase == .paused)
        let statuses = try h.status(controller).broadcasts ?? []
        #expect(statuses.allSatisfy { $0.sessionLocked == true })
        #expect(statuses.first { $0.broadcast == live }?.pausedForLock == true)
        #expect(statuses.first { $0.broadcast == paused }?.pausedForLock == nil)
        let refused = try h.request(.resume, FinishRequest(broadcast: live), from: controller)
        let refusal = try refused.decode(BroadcastError.self)
        #expect(refused.opcode == .error && refusal.code == .busy && refusal.message.hasPrefix("the session is locked"))
        #expect(
            h.notifier.lines.last?.contains("paused (the session is locked): broadcast \(live) to stand-in") == true)
        // One started while locked pauses as it becomes ready, and is resumed with the others.
        let (later, laterHandler) = try h.startBroadcast(from: controller, ready: false)
        try h.send(.json(.ready, seq: 2, Empty()), from: laterHandler.peer)
        #expect(h.core.broadcast(later)?.phase == .paused)
        #expect(try h.status(controller).broadcasts?.first { $0.broadcast == later }?.pausedForLock == true)

        lock.set(locked: false, h)
        #expect(h.core.broadcast(live)?.phase == .live && h.core.broadcast(later)?.phase == .live)
        #expect(h.core.broadcast(paused)?.phase == .paused)
        #expect(try h.status(controller).broadcasts?.allSatisfy { $0.sessionLocked == nil } == true)
    }

    // MARK: - Commands

    /// A command the handler never answers: the controller gets `command-timeout` after 10 s, a second command on the
    /// same connection meanwhile gets `busy`, and the broadcast goes on (frames delivered, later commands answered; an
    /// answer that comes too late is dropped). Was CommandTests, with a real handler and a 10 s wait.
    @Test func aCommandThatIsNeverAnsweredTimesOutAndTheBroadcastGoesOn() throws {
        let h = try CoreHarness()
        let controller = try h.subscribedController()
        let (id, handler) = try h.startBroadcast(from: controller)
        let commands = try h.peer(.controller)
        try h.send(.json(.sendCommand, seq: 2, CommandRequest(command: "hang")), from: commands)
        try h.send(.json(.sendCommand, seq: 3, CommandRequest(command: "count")), from: commands)
        let busy = try #require(try commands.received().first)
        let refusal = try busy.decode(BroadcastError.self)
        #expect(busy.seq == 3 && busy.opcode == .error && refusal.code == .busy)
        let sent = try #require(try handler.peer.received().first { $0.opcode == .command }).decode(HandlerCommand.self)
        #expect(sent.id == 1 && sent.command == "hang")
        try h.advance(by: 10 * Self.second - 1, releasing: [handler])
        #expect(try commands.received().isEmpty)
        let before = handler.framesTaken
        try h.advance(by: 1, releasing: [handler])
        let timedOut = try #require(try commands.received().first)
        #expect(timedOut.seq == 2 && timedOut.opcode == .error)
        let error = try timedOut.decode(BroadcastError.self)
        #expect(
            error.code == .commandTimeout
                && error.message.contains("did not answer 'hang' within 10 s; broadcast \(id) goes on"))
        #expect(before == 301 && h.core.broadcast(id)?.phase == .live, "\(before) frames in 10 s")
        // The connection takes commands again, and the handler's answer reaches it; the late one is dropped.
        try h.send(.json(.sendCommand, seq: 4, CommandRequest(command: "count")), from: commands)
        let count = try #require(try handler.peer.received().first { $0.opcode == .command }).decode(
            HandlerCommand.self)
        try h.send(.json(.commandAnswer, HandlerCommandAnswer(id: sent.id, result: [:])), from: handler.peer)
        #expect(try commands.received().isEmpty && h.log.count("answered command 1 too late") == 1)
        try h.send(
            .json(.commandAnswer, HandlerCommandAnswer(id: count.id, result: ["video": .number(300)])),
            from: handler.peer)
        let answer = try #require(try commands.received().first)
        #expect(answer.seq == 4 && answer.opcode == .commandResult)
        #expect(
            try answer.decode(CommandResult.self)
                == CommandResult(broadcast: id, command: "count", result: ["video": .number(300)]))
        // A command in flight when the handler exits fails with how it ended.
        try h.send(.json(.sendCommand, seq: 5, CommandRequest(command: "hang")), from: commands)
        h.exit(handler, .exited(0), broadcast: id)
        let abandoned = try #require(try commands.received().first).decode(BroadcastError.self)
        #expect(
            abandoned
                == BroadcastError(.commandFailed, "handler 'stand-in' did not answer 'hang': it exited with status 0"))
    }

    /// 300 controllers that sent a command a handler never answers and went away leave nothing behind (each was kept
    /// 10 s, then warned about); of 20 that wait, each gets `command-timeout`, and the warning is said once. Was
    /// AttackCampaignTests, with 320 real connections and a 10 s wait.
    @Test func commandsOfControllersThatWentAwayAreDroppedAndTimeoutsLoggedSparingly() throws {
        let h = try CoreHarness()
        let controller = try h.subscribedController()
        let (id, handler) = try h.startBroadcast(from: controller)
        for _ in 0..<300 {
            let gone = try h.peer(.controller)
            try h.send(.json(.sendCommand, seq: 2, CommandRequest(broadcast: id, command: "hang")), from: gone)
            gone.connection.close()
            h.core.handle(.peer(gone.session.id), Poller.Event(readable: true, closed: true), now: h.clock.now())
            h.endTurn()
        }
        var staying: [CoreHarness.Peer] = []
        for _ in 0..<20 {
            let peer = try h.peer(.controller)
            try h.send(.json(.sendCommand, seq: 2, CommandRequest(broadcast: id, command: "hang")), from: peer)
            staying.append(peer)
        }
        try h.advance(by: 11 * Self.second, releasing: [handler])
        let answers = try staying.map { try #require(try $0.received().first).decode(BroadcastError.self).code }
        #expect(answers == Array(repeating: .commandTimeout, count: 20))
        #expect(
            h.log.count(") forwarded to handler 'stand-in'") == 320 && h.log.count(") dropped: ") == 300,
            "\(h.log.count(") forwarded to handler 'stand-in'")) \(h.log.count(") dropped: "))")
        #expect(h.log.count("did not answer command 'hang' within 10 s") == 1)
        #expect(h.core.broadcast(id)?.phase == .live && h.core.peers.sessions.count == 2 + 20 + 1)
    }

    // MARK: - Peers

    /// 63 connections that never say HELLO take every place but one for 10 s, and are closed then, each told why; a
    /// controller connected before is served all along. Was PeerLimitTests, with real connections and a 13 s wait.
    @Test func connectionsThatSayNothingAreClosedAfterTenSeconds() throws {
        let h = try CoreHarness()
        let controller = try h.peer(.controller)
        let silent = try (0..<63).map { _ in try h.connect() }
        try h.advance(by: 10 * Self.second - 1)
        #expect(h.core.peers.sessions.count == 64 && silent.allSatisfy { (try? $0.received().isEmpty) == true })
        try h.advance(by: 1)
        for peer in silent {
            let error = try #require(try peer.received().first).decode(BroadcastError.self)
            #expect(error == BroadcastError(.protocolError, "it did not say HELLO within 10 s"))
            #expect(throws: ProtocolError.closed) { try peer.connection.receive(timeoutMilliseconds: 0) }
        }
        #expect(h.core.peers.sessions.count == 1 && h.log.count("did not say HELLO within 10 s") == 63)
        #expect(try h.status(controller).state == .idle)
    }

    /// With every place taken by connections that have not said HELLO, a newcomer is refused for a second, then takes
    /// the place of the one silent longest. Was AttackCampaignTests, with a real attack and a 10 s wait.
    @Test func silentConnectionsMakeRoomForAControllerThatSpeaks() throws {
        let h = try CoreHarness()
        let silent = try (0..<64).map { _ in try h.connect() }
        let (refused, theirs) = try UnixSocket.pair()
        try refused.setNonBlocking()
        #expect(h.core.peerConnected(refused) == nil)
        #expect(try PeerConnection(socket: theirs).receive().decode(BroadcastError.self).code == .busy)
        try h.advance(by: Self.second)
        let controller = try h.peer(.controller)
        #expect(try h.status(controller).state == .idle)
        #expect(throws: ProtocolError.closed) { try silent[0].connection.receive(timeoutMilliseconds: 0) }
        #expect(
            h.core.peers.sessions.count == 64
                && silent.dropFirst().allSatisfy { h.core.peers.sessions[$0.session.id] != nil })
    }
}

/// The desktop session's lock as the test sets it.
final class StandInLock: SessionLockSignal {
    let changed: Wakeup
    private(set) var locked = false

    init() throws {
        changed = try Wakeup()
    }

    /// Locks or unlocks, and lets the core see it, as the loop would when the watcher's descriptor became readable.
    func set(locked: Bool, _ h: CoreHarness) {
        self.locked = locked
        changed.signal()
        h.core.handle(.sessionLock, Poller.Event(readable: true), now: h.clock.now())
        h.endTurn()
    }
}
