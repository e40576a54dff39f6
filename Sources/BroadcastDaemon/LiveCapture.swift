import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// The capture while any broadcast is live (or a broadcast that just paused or finished still waits for
/// its audio): the frame and audio deadlines, and the fan-out. Each frame is grabbed once, into one pool
/// slot, and delivered to every live broadcast's handler that has room for it; each audio chunk is taken
/// once and delivered to every broadcast that is live or still waiting for its audio. What one handler
/// cannot take is dropped for it alone. It begins the source when it is made and ends it in `end`, telling the
/// capture indicator both; meanwhile its deadlines are its timers (`Wake.frame`, `Wake.audio`), and the source's
/// audio thread wakes the daemon as `Wake.audioArrived`.
final class LiveCapture {
    /// Frames lost in a row to transient capture errors; capture fails when they last this long.
    static let transientFailureLimit: UInt64 = 2_000_000_000

    let source: CaptureSource
    private let wakes: WakeRegistry
    /// The next frame's deadline; nil while no broadcast is live (only audio is still wanted).
    private(set) var nextFrameAt: UInt64? {
        didSet { wakes.schedule(.frame, at: nextFrameAt) }
    }
    private(set) var nextAudioAt: UInt64? {
        didSet { wakes.schedule(.audio, at: nextAudioAt) }
    }
    /// The VIDEO_SAMPLE fields that stay the same from frame to frame, for the current pool and format.
    private var videoHeader: VideoSampleHeader?
    private var lostFrames: UInt64 = 0
    /// The audio streams last published as silent.
    private(set) var silentAudio: Set<SampleType> = []
    /// Each stream's chunks taken lately (ending at most `recentAudioSpan` ago), for a shared encoder that goes live
    /// on this running capture (`catchUpAudio`).
    private var recentAudio: [SampleType: [AudioChunk]] = [:]
    /// As long as a PipeWire quantum may be (170 ms): a chunk taken before a broadcast went live may reach past it.
    static let recentAudioSpan: UInt64 = 200_000_000
    /// The session is locked and `--on-lock blank`: the privacy frame goes out instead of the screen.
    private var privacy = false
    /// The privacy frame is the latest in the pool; the next frame of the screen is grabbed whole.
    private var privacyShown = false
    /// The presentation time of the last frame handed out: the next is later.
    private var lastPTS: UInt64 = 0

    /// Told when capture starts and stops; nil when nobody is (a test pattern is nobody's screen).
    private let indicator: (any CaptureIndicator)?

    /// Begins capture (`source.begin`) at `now`. It may take a while (a start waits for PipeWire's first audio):
    /// frames are due from when it has begun, on the grid that starts at `now` (the source's marks count from
    /// there), so the deadlines of the wait are not missed frames.
    /// `camera`: the camera captured beside the screen, for the indicator.
    init(
        source: CaptureSource, now: UInt64, clock: DaemonClock, wakes: WakeRegistry,
        indicator: (any CaptureIndicator)? = nil, camera: String? = nil
    ) throws(CaptureError) {
        try source.begin(at: now)
        self.source = source
        self.wakes = wakes
        let interval = max(1, source.frameInterval)
        let waited = clock.now() - now
        nextFrameAt = now + waited / interval * interval
        nextAudioAt = source.nextAudioDeadline()
        wakes.schedule(.frame, at: nextFrameAt)
        wakes.schedule(.audio, at: nextAudioAt)
        if let arrival = source.audioArrival { wakes.register(.audioArrived, arrival.descriptor.raw, .readable) }
        // A test pattern is nobody's screen, but a camera beside it is someone's face.
        self.indicator = source is SyntheticSource && camera == nil ? nil : indicator
        self.indicator?.captureStarted(source.description, camera: camera)
    }

    /// The camera went away: the indicator says so.
    func cameraLost(_ why: String) {
        indicator?.cameraLost(why)
    }

    /// Capture ends.
    func end() {
        wakes.schedule(.frame, at: nil)
        wakes.schedule(.audio, at: nil)
        wakes.deregister(.audioArrived)
        source.end()
        indicator?.captureStopped()
    }

    /// While `on`, the privacy frame goes out instead of the screen.
    func showPrivacyFrame(_ on: Bool) {
        privacy = on
    }

    /// No broadcast is live any more; audio goes on while one waits for it.
    func stopFrames() {
        nextFrameAt = nil
    }

    /// A broadcast is live again while only audio was flowing: frames are due at once.
    func resumeFrames(now: UInt64) {
        if nextFrameAt == nil { nextFrameAt = now }
    }

    // MARK: - Video

    /// The frame due at `now`, for the `live` broadcasts; `active` are all that may need a format change.
    /// Returns an error when capture failed for good (every live broadcast fails with it).
    func captureVideo(now: UInt64, session: CaptureSession, live: [Broadcast], active: [Broadcast]) -> BroadcastError? {
        guard var deadline = nextFrameAt else { return nil }
        let interval = source.frameInterval
        // Deadlines the loop missed (the machine was too busy) are frames that were never captured.
        let missed = (now - deadline) / interval
        if missed > 0 {
            for broadcast in live {
                let its = broadcast.missedFrames(missed)
                if its > 0 { broadcast.skip(.video, count: its, late: true) }
            }
            deadline += missed * interval
        }
        nextFrameAt = deadline + interval
        // Frames are numbered by their deadlines since the capture session began (missed ones included): the
        // synthetic pattern draws the number, which is the handler's sequence number when one broadcast runs.
        let index = session.takeFrameIndex(missed: missed)
        // Each broadcast takes its frames (every one, or every k-th when its handler wants fewer).
        let due = live.filter { $0.takesFrame() }
        let targets = due.filter(\.isConnected)
        for broadcast in due where !broadcast.isConnected { broadcast.skip(.video) }
        guard !targets.isEmpty, session.pool != nil else {
            for broadcast in targets { broadcast.skip(.video) }
            return nil
        }
        if privacy {
            sendPrivacyFrame(at: deadline, targets: targets, session: session)
            return nil
        }
        let wasPrivate = privacyShown
        privacyShown = false
        let change: FrameChange
        do {
            change = try source.checkForChanges()
            if case .resized(let format) = change { try changeFormat(to: format, session: session, active: active) }
        } catch let error as CaptureError {
            return BroadcastError(.captureFailed, error.description)
        } catch {
            return error as? BroadcastError
        }
        guard let pool = session.pool else { return nil }
        if videoHeader?.pool != pool.id { videoHeader = prototype(pool: pool) }
        if let cursor = source.cursor {
            for broadcast in targets { broadcast.sendCursor(cursor, at: deadline) }
        }
        if change == .unchanged, !wasPrivate, let latest = pool.latest {
            hand(latest, pts: deadline, repeated: true, to: targets, pool: pool)
            return nil
        }
        // A handler that holds its share of the slots loses this frame unless the pool has slots to spare: this
        // frame's, and two more for every other handler (the next frame's, and one it may still hold); the
        // others do not.
        let holders = active.count { $0.isConnected && $0.takesSamples }
        let quota = pool.quota(holders: holders)
        let spare = pool.freeSlots >= 1 + 2 * (holders - 1)
        let takers = targets.filter { spare || $0.holder.map(pool.heldSlots) ?? 0 < quota }
        for broadcast in targets where !takers.contains(where: { $0 === broadcast }) { broadcast.skip(.video) }
        guard !takers.isEmpty, let slot = pool.acquire() else {
            for broadcast in takers { broadcast.skip(.video) }
            return nil
        }
        let pts: UInt64
        do {
            pts = try source.captureFrame(
                index: index, deadline: deadline, into: pool.pointer(slot),
                previous: wasPrivate ? nil : pool.latest.map { UnsafeRawPointer(pool.pointer($0)) })
        } catch {
            session.keepLatest(nil)
            lostFrames += 1
            guard error.transient && lostFrames * interval < Self.transientFailureLimit else {
                return BroadcastError(.captureFailed, error.description)
            }
            for broadcast in takers { broadcast.skip(.video) }
            return nil
        }
        lostFrames = 0
        session.keepLatest(slot, pts: pts)
        hand(slot, pts: pts, repeated: false, to: takers, pool: pool)
        return nil
    }

    /// The privacy frame for `targets`: drawn once into a slot, then repeated while the session stays locked.
    private func sendPrivacyFrame(at deadline: UInt64, targets: [Broadcast], session: CaptureSession) {
        guard let pool = session.pool else { return }
        if videoHeader?.pool != pool.id { videoHeader = prototype(pool: pool) }
        if privacyShown, let latest = pool.latest {
            hand(latest, pts: deadline, repeated: true, to: targets, pool: pool)
            return
        }
        guard let slot = pool.acquire() else {
            for broadcast in targets { broadcast.skip(.video) }
            return
        }
        PrivacyFrame.draw(source.videoFormat, range: source.colorRange, into: pool.pointer(slot))
        session.keepLatest(slot)
        privacyShown = true
        hand(slot, pts: deadline, repeated: false, to: targets, pool: pool)
    }

    /// The VIDEO_SAMPLE fields that stay the same from frame to frame.
    private func prototype(pool: FramePool) -> VideoSampleHeader {
        let zero = SampleTiming(presentationTime: 0, duration: 0, sequence: 0, discontinuity: false)
        return VideoSampleHeader(
            timing: zero, orientation: source.orientation, pool: pool.id, slot: 0, format: source.videoFormat)
    }

    /// Holds `slot` for each of `targets` and sends it; `repeated`: the latest frame again, counted as such, which a
    /// handler that takes only frames that changed does not get.
    private func hand(_ slot: Int, pts captured: UInt64, repeated: Bool, to targets: [Broadcast], pool: FramePool) {
        guard var header = videoHeader else { return }
        // A repeat is stamped with its deadline, a new frame with when it was captured: a compositor's frame (its
        // time taken before it was copied and sent) may be older than the last repeat handed out. Frames go out in
        // order, so it is stamped just after that repeat (less than a frame interval later than it was taken).
        let pts = max(captured, lastPTS + 1)
        lastPTS = pts
        header.orientation = source.orientation
        header.slot = UInt32(slot)
        header.repeated = repeated
        for broadcast in targets {
            broadcast.deliver(header, pts: pts, captureInterval: source.frameInterval, pool: pool)
        }
    }

    /// The frame size changed: a bigger pool when the slots are too small for it, then VIDEO_FORMAT_CHANGED
    /// to every handler, before the first frame of the new size. Throws when it does not fit the budget.
    private func changeFormat(to format: VideoFormat, session: CaptureSession, active: [Broadcast])
        throws(BroadcastError)
    {
        let replaced = try session.resize(to: format)
        videoHeader = nil
        for broadcast in active {
            broadcast.formatChanged(VideoDescription(format, colorRange: source.colorRange.rawValue), pool: replaced)
        }
    }

    // MARK: - Audio

    /// Takes the audio that is ready and delivers it to `receivers` (live, or waiting for the audio captured
    /// before their pause or finish). Returns whether the set of silent streams changed, and the broadcasts
    /// whose wait for audio is over.
    func captureAudio(now: UInt64, receivers: [Broadcast]) -> (silenceChanged: Bool, drained: [Broadcast]) {
        let format = source.audioFormat
        for stream in [SampleType.audioApp, .audioMic] {
            recentAudio[stream, default: []].removeAll {
                $0.presentationTime + $0.duration + Self.recentAudioSpan < now
            }
            while let chunk = source.nextAudioChunk(stream, now: now) {
                recentAudio[stream, default: []].append(chunk)
                for broadcast in receivers {
                    if let drain = broadcast.audioDrain, chunk.presentationTime >= drain.until { continue }  // after the pause
                    broadcast.deliver(chunk, stream: stream, format: format)
                }
            }
        }
        for broadcast in receivers { broadcast.flush() }
        let silent = Set(source.silentAudio.keys)
        let silenceChanged = silent != silentAudio
        silentAudio = silent
        let drained = receivers.filter { broadcast in
            guard let drain = broadcast.audioDrain else { return false }
            return now >= drain.deadline
                || source.audioStreams.allSatisfy {
                    broadcast.ledger.deliveredUntil[$0, default: 0] >= drain.until || silent.contains($0)
                }
        }
        rearmAudio(
            waiting: receivers.filter { broadcast in
                broadcast.audioDrain != nil && !drained.contains { $0 === broadcast }
            })
        return (silenceChanged, drained)
    }

    /// `broadcast` went live on this running capture: it gets the audio taken before that reaches past the deadline of
    /// its first frame (a late loop stamps that frame with its deadline, before the chunks taken meanwhile end).
    /// Without them a shared encoder joining a capture lacked the sound of its first frame's time: its handlers'
    /// files began with up to a PipeWire quantum of silence.
    func catchUpAudio(_ broadcast: Broadcast) {
        guard let firstFrame = nextFrameAt else { return }
        for stream in [SampleType.audioApp, .audioMic] {
            for chunk in recentAudio[stream] ?? [] where chunk.presentationTime + chunk.duration > firstFrame {
                broadcast.deliver(chunk, stream: stream, format: source.audioFormat)
            }
        }
        broadcast.flush()
    }

    /// The next time audio is due: from the source, or when a broadcast's wait for its audio runs out.
    func rearmAudio(waiting: [Broadcast]) {
        nextAudioAt = ([source.nextAudioDeadline()] + waiting.map { $0.audioDrain?.deadline }).compactMap { $0 }.min()
    }
}
