import BroadcastCapture
import BroadcastProtocol
import BroadcastSystem
import Glibc
import Logging
import Testing

@testable import BroadcastCore
@testable import BroadcastDaemon

/// The daemon's parts, one lifetime each, driven by a hand-moved clock and the synthetic source: no loop,
/// no waiting. Handlers are stand-ins on real socket pairs, read from the other end.
@Suite struct DaemonPartsTests {
    /// A broadcast whose handler is a stand-in process with the far end of a socket pair as its connection.
    final class Harness {
        let clock = ManualClock()
        let wakes = WakeRegistry()
        let source = SyntheticSource(.init(video: VideoFormat(width: 64, height: 32), framesPerSecond: 30))
        let session: CaptureSession
        let pool: FramePool
        var links: [(broadcast: Broadcast, peer: PeerConnection)] = []

        /// A pool planned for `broadcasts` sharing it.
        init(broadcasts: Int) throws {
            _ = try source.open()
            let plan = FramePoolPlan(
                format: source.videoFormat, broadcasts: broadcasts, parts: [], budgetBytes: 50 << 20, enforced: true)
            session = CaptureSession(source: source, plan: plan, poolIDs: PoolIDs(), wakes: wakes)
            pool = try session.makePool()
            _ = try session.beginLive(now: clock.now(), clock: clock)
        }

        func addBroadcast(id: UInt32, setupInfo: [String: String] = [:]) throws -> Broadcast {
            let manifest = HandlerManifest(name: "h\(id)", displayName: "H", exec: "/bin/sleep")
            let broadcast = try Broadcast(
                id: id, entry: HandlerRegistry.Entry(manifest: manifest, file: "/dev/null"),
                maxDuration: nil, wakes: wakes)
            broadcast.setUp(setupInfo)
            let (ours, theirs) = try UnixSocket.pair()
            try ours.setNonBlocking()
            let connection = PeerSession(id: Int(id), socket: ours, launchedFor: id, now: clock.now(), wakes: wakes)
            broadcast.attach(
                HandlerLink(
                    process: StandInProcess(pid: 1000 + Int32(id)), manifest: manifest, broadcast: id,
                    session: connection, capture: session, configuration: DaemonConfiguration(socketPath: ""),
                    wakes: wakes, logger: Logger(label: "test"), now: clock.now()))
            _ = broadcast.chooseFrameRate(captureRate: 30)
            broadcast.beginLive(now: clock.now(), frameInterval: source.frameInterval)
            links.append((broadcast, PeerConnection(socket: theirs)))
            return broadcast
        }

        var broadcasts: [Broadcast] { links.map(\.broadcast) }

        /// The next frame deadline, reached (now, when it has passed).
        func frame() -> BroadcastError? {
            let due = session.live!.nextFrameAt ?? clock.now()
            clock.advance(by: due > clock.now() ? due - clock.now() : 0)
            return session.live!.captureVideo(
                now: clock.now(), session: session, live: broadcasts.filter(\.isLive),
                active: broadcasts)
        }

        /// Every VIDEO_SAMPLE waiting for `broadcast`'s handler.
        func videoSamples(_ index: Int) throws -> [VideoSampleHeader] {
            var samples: [VideoSampleHeader] = []
            while let message = try links[index].peer.receive(timeoutMilliseconds: 20) {
                if message.opcode == .videoSample { samples.append(try VideoSampleHeader(decoding: message.payload)) }
            }
            return samples
        }
    }

    @Test func oneGrabGoesToEveryHandlerAndOneThatHoldsItsShareLosesOnlyItsOwnFrames() throws {
        let h = try Harness(broadcasts: 2)
        let (a, b) = (try h.addBroadcast(id: 1), try h.addBroadcast(id: 2))
        #expect(h.pool.quota(holders: 2) == 1)
        #expect(h.frame() == nil)
        let first = (try h.videoSamples(0), try h.videoSamples(1))
        try #require(first.0.count == 1 && first.1.count == 1, "\(a.ledger.counters) \(b.ledger.counters) \(first)")
        #expect(first.0[0].slot == first.1[0].slot, "one slot, delivered to both")
        // a releases every frame, b keeps them: past its share (one slot), b gets frames only while the pool
        // has this frame's slot and two more for a to spare (frames 1 and 2 of the five slots); then frames go to a
        // alone, and b's loss is b's.
        var held = first.1.map { Int($0.slot) }
        #expect(h.pool.release(Int(first.0[0].slot), by: a.link!.holder))
        for _ in 1...3 {
            #expect(h.frame() == nil)
            for sample in try h.videoSamples(0) { #expect(h.pool.release(Int(sample.slot), by: a.link!.holder)) }
            held += try h.videoSamples(1).map { Int($0.slot) }
        }
        #expect(a.ledger.counters[.video]?.delivered == 4 && a.ledger.counters[.video]?.dropped ?? 0 == 0)
        #expect(b.ledger.counters[.video]?.delivered == 3 && b.ledger.counters[.video]?.dropped == 1 && held.count == 3)
        #expect(b.ledger.isDiscontinuous(.video) && !a.ledger.isDiscontinuous(.video))
        // A slot is free again only once every holder let go of it.
        #expect(!h.pool.isFree(held[0]))
        #expect(h.pool.release(held[0], by: b.link!.holder))
        #expect(h.pool.isFree(held[0]))
        #expect(h.session.frameCount == 4)
    }

    /// Two slots are enough for one handler that releases each frame once it has it: it gets every frame, and a
    /// frame that did not change is the latest slot again. Holding its slot, it loses frames of its own, and the
    /// latest is never written while it is delivered.
    @Test func twoSlotsServeOneHandlerThatReleasesWhatItGets() throws {
        let h = try Harness(broadcasts: 1)
        let a = try h.addBroadcast(id: 1)
        #expect(h.pool.slotCount == 2 && h.pool.capacity == FramePoolPlan.maximumSlots && h.pool.quota(holders: 1) == 1)
        var slots: [UInt32] = []
        for _ in 0..<6 {
            #expect(h.frame() == nil)
            for sample in try h.videoSamples(0) {
                slots.append(sample.slot)
                #expect(h.pool.release(Int(sample.slot), by: a.link!.holder))
            }
        }
        #expect(slots == [0, 1, 0, 1, 0, 1] && a.ledger.counters[.video]?.dropped ?? 0 == 0, "\(slots)")
        // Reading nothing for a while: it gets the two slots (nobody else needs them), and the frame after is its loss.
        #expect(h.frame() == nil && h.frame() == nil && h.frame() == nil)
        let held = try h.videoSamples(0)
        #expect(held.map(\.slot) == [0, 1], "\(held)")
        #expect(a.ledger.counters[.video]?.dropped == 1)
        // Another broadcast joins: the pool uses five slots, one being filled and two for each.
        try h.session.share(with: 2)
        #expect(h.pool.slotCount == 5 && h.session.plan.slotCount == 5)
    }

    @Test func missedDeadlinesAreEveryLiveBroadcastsLateFrames() throws {
        let h = try Harness(broadcasts: 4)
        let (a, b) = (try h.addBroadcast(id: 1), try h.addBroadcast(id: 2, setupInfo: ["frameRate": "10"]))
        #expect(h.frame() == nil)
        // The loop comes back seven frame intervals late: six deadlines were missed.
        h.clock.advance(by: 7 * h.source.frameInterval)
        #expect(
            h.session.live!.captureVideo(
                now: h.clock.now(), session: h.session, live: h.broadcasts, active: h.broadcasts) == nil)
        #expect(a.ledger.counters[.video]?.late == 6 && a.ledger.counters[.video]?.dropped == 6)
        // b takes every third frame (0, 3, 6, 9, …): of the six missed, 3 and 6 were its.
        #expect(b.ledger.counters[.video]?.late == 2, "\(String(describing: b.ledger.counters[.video]))")
        let samples = try h.videoSamples(1)
        #expect(samples.allSatisfy { $0.timing.duration == 3 * h.source.frameInterval }, "durations that add up")
    }

    @Test func audioGoesToEveryReceiverAndAPausedOneWaitsOnlyForWhatCameBefore() throws {
        let h = try Harness(broadcasts: 2)
        let (a, b) = (try h.addBroadcast(id: 1), try h.addBroadcast(id: 2))
        h.clock.advance(by: 100_000_000)
        var result = h.session.live!.captureAudio(now: h.clock.now(), receivers: h.broadcasts)
        let delivered = a.ledger.counters[.audioApp]?.delivered ?? 0
        #expect(delivered > 0 && b.ledger.counters[.audioApp]?.delivered == delivered && result.drained.isEmpty)
        // b pauses after a frame that ends later than now: it waits for the audio up to `AudioDrain.margin` past the
        // end of that frame and gets nothing after; a gets everything.
        #expect(h.frame() == nil)
        let pause = try #require(b.ledger.deliveredUntil[.video])
        #expect(pause > h.clock.now())
        b.endLive(now: h.clock.now(), drainingAudio: true)
        let until = pause + Broadcast.AudioDrain.margin
        #expect(b.audioDrain?.until == until)
        h.clock.advance(by: 180_000_000)  // within AudioDrain.limit
        result = h.session.live!.captureAudio(now: h.clock.now(), receivers: h.broadcasts)
        #expect(result.drained.map(\.id) == [2], "b's wait is over once its audio reached the margin past the pause")
        let reached = b.ledger.deliveredUntil[.audioApp] ?? 0
        #expect(reached >= until && reached < until + 25_000_000)
        #expect((a.ledger.deliveredUntil[.audioApp] ?? 0) > until + 30_000_000)
    }

    @Test func aHandlerThatHoldsSlotsAndReadsNothingHasHungAfterTheLimit() throws {
        let h = try Harness(broadcasts: 2)
        let a = try h.addBroadcast(id: 1)
        let link = try #require(a.link)
        link.beginStretch(now: h.clock.now())
        #expect(h.frame() == nil)
        #expect(link.hang(now: h.clock.now(), limit: 2_000_000_000) == nil)
        h.clock.advance(by: 2_100_000_000)
        let reason = link.hang(now: h.clock.now(), limit: 2_000_000_000)
        #expect(
            reason == "handler 'h1' hung: it has held frame slots without releasing any for 2 s",
            "\(String(describing: reason))")
    }

    @Test func theLedgerSkipsNumbersForWhatNeverGotOne() {
        var ledger = StreamLedger()
        #expect(ledger.takeSequence(.video) == 0)
        ledger.delivered(.video, until: 10)
        ledger.skip(.video, count: 2, late: true)
        #expect(ledger.takeSequence(.video) == 3 && ledger.isDiscontinuous(.video))
        ledger.dropTaken(.video)
        #expect(ledger.counters[.video] == StreamCounters(delivered: 1, dropped: 3, late: 2))
        ledger.beginStretch()
        #expect(ledger.deliveredUntil.isEmpty && SampleType.allCases.allSatisfy { ledger.isDiscontinuous($0) })
    }
}

/// The resolver the SRT connection connects with (libsrt opens its own sockets).
@Suite struct NetworkAddressTests {
    @Test func numericHostsResolveToTheirSocketAddresses() throws {
        let v4 = try NetworkAddress.datagram(host: "127.0.0.1", port: 9000)
        #expect(v4.count == 1)
        v4[0].withSocketAddress { address, length in
            #expect(Int32(address.pointee.sa_family) == AF_INET && Int(length) == MemoryLayout<sockaddr_in>.size)
            address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                #expect(
                    UInt16(bigEndian: $0.pointee.sin_port) == 9000
                        && UInt32(bigEndian: $0.pointee.sin_addr.s_addr) == 0x7f00_0001)
            }
        }
        let v6 = try NetworkAddress.datagram(host: "::1", port: 5)
        #expect(v6.count == 1 && v6[0].withSocketAddress { address, _ in Int32(address.pointee.sa_family) } == AF_INET6)
    }
}

/// The registry of what wakes the daemon: descriptors registered once, timers kept in one queue.
@Suite struct WakeRegistryTests {
    @Test func timersComeInTimeOrderOnceEachAndMovedOrCancelledOnesDoNot() {
        let wakes = WakeRegistry()
        wakes.schedule(.frame, at: 30)
        wakes.schedule(.audio, at: 10)
        wakes.schedule(.serviceInfo, at: 20)
        wakes.schedule(.maxDuration(1), at: 5)
        wakes.schedule(.frame, at: 15)  // moved
        wakes.schedule(.maxDuration(1), at: nil)  // cancelled
        #expect(wakes.nextDeadline == 10)
        var due: [Wake] = []
        while let wake = wakes.nextDue(now: 20) { due.append(wake) }
        #expect(due == [.audio, .frame, .serviceInfo])
        #expect(wakes.nextDeadline == nil && wakes.nextDue(now: 100) == nil)
        // Set again after it came, it comes again.
        wakes.schedule(.frame, at: 40)
        #expect(wakes.nextDue(now: 39) == nil && wakes.nextDue(now: 40) == .frame)
    }

    @Test func aTimerMovedThousandsOfTimesLeavesTheQueueSmall() {
        let wakes = WakeRegistry()
        for at in 1...10_000 { wakes.schedule(.peerDeadline(7), at: UInt64(at)) }
        #expect(wakes.queued <= 2 + 64)
        #expect(wakes.nextDue(now: 9_999) == nil && wakes.nextDue(now: 10_000) == .peerDeadline(7))
    }

    @Test func descriptorsAreRegisteredOnceAndTheirInterestChanges() {
        let wakes = WakeRegistry()
        wakes.register(.peer(3), 9, .readable)
        wakes.reregister(.peer(3), [.readable, .writable])
        #expect(
            wakes.descriptors[.peer(3)]?.fd == 9 && wakes.descriptors[.peer(3)]?.interest == [.readable, .writable])
        wakes.deregister(.peer(3))
        wakes.reregister(.peer(3), .readable)
        #expect(wakes.descriptors.isEmpty)
    }
}

/// A background thread never takes a signal sent to the process: broadcastd's session-lock watcher starts one before
/// the daemon takes SIGTERM over, and a SIGTERM that reached it ended the daemon (exit 143) instead of finishing it.
@Suite struct BackgroundThreadSignalTests {
    final class Seen: @unchecked Sendable {
        let lock = ConditionLock()
        var blocked: [Int32: Bool]?
    }

    @Test func aBackgroundThreadStartsWithEverySignalBlocked() throws {
        // The creating thread blocks none of them, as broadcastd's main thread before its signalfd.
        var none = sigset_t()
        var previous = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        let seen = Seen()
        try BackgroundThread.start {
            var mask = sigset_t()
            pthread_sigmask(SIG_BLOCK, nil, &mask)
            let blocked = Dictionary(
                uniqueKeysWithValues: [SIGTERM, SIGINT, SIGHUP].map { ($0, sigismember(&mask, $0) == 1) })
            seen.lock.withLock {
                seen.blocked = blocked
                seen.lock.broadcast()
            }
        }
        let blocked = seen.lock.withLock {
            while seen.blocked == nil { seen.lock.wait() }
            return seen.blocked!
        }
        #expect(blocked == [SIGTERM: true, SIGINT: true, SIGHUP: true])
        // The creator's own mask is as it was.
        var after = sigset_t()
        pthread_sigmask(SIG_BLOCK, nil, &after)
        #expect(sigismember(&after, SIGTERM) == 0)
    }
}
