import BroadcastCapture
import BroadcastCore
import BroadcastProtocol

/// One broadcast, from its START until the next START after it finished (a finished broadcast stays, with
/// its result, for status): its state machine, setup, handler, what it was sent and when it was live. While it is
/// live, the end of its maximum duration is its timer (`Wake.maxDuration`).
final class Broadcast {
    let id: UInt32
    let entry: HandlerRegistry.Entry
    private let wakes: WakeRegistry
    var manifest: HandlerManifest { entry.manifest }
    private(set) var machine = BroadcastStateMachine()
    private(set) var setupInfo: [String: String] = [:]
    /// The handler's last UPDATE_SERVICE_INFO (nil: none, or empty).
    private(set) var serviceInfo: [String: JSONValue]? {
        didSet { if serviceInfo != oldValue { serviceInfoJSON = nil } }
    }
    /// It as SERVICE_INFO carries it: encoded once per change, when first needed (not for every update a
    /// handler floods).
    private var serviceInfoJSON: [UInt8]?
    var encodedServiceInfo: [UInt8]? {
        if serviceInfoJSON == nil, let serviceInfo { serviceInfoJSON = Array(compactJSON(serviceInfo).utf8) }
        return serviceInfoJSON
    }
    /// What the handler last sent with SET_RESULT: FINISHED and the finished status carry it.
    private(set) var result: [String: JSONValue]?
    /// Its handler process, from launch until it exits.
    private(set) var link: HandlerLink?
    private(set) var ledger = StreamLedger()
    /// Where it is in its live time.
    private(set) var stretch = Stretch.off {
        didSet { wakes.schedule(.maxDuration(id), at: maxDurationDeadline) }
    }
    /// Its live time before the current stretch.
    private(set) var elapsedBefore: UInt64 = 0
    /// Its handler gets every k-th frame of the capture (it asked for fewer frames per second).
    private(set) var frameDivisor: UInt64 = 1
    /// Capture deadlines since its live stretch began.
    private var framePhase: UInt64 = 0
    /// A lower frame rate than the capture's, asked for by START (`--fps`) when it joined a running capture.
    let askedFrameRate: Double?
    /// The capture's frame interval, for its status.
    private(set) var frameInterval: UInt64?
    /// Revision 2.9: it is a shared encoder's broadcast, which broadcastd started for the broadcasts it serves (it
    /// follows them: controllers do not pause, finish or command it).
    let isSharedEncoder: Bool
    /// Revision 2.9: the shared encoder whose packets its handler takes instead of samples.
    private(set) var encodedBy: UInt32?

    /// Where a broadcast is in its live time, with what each part of it has.
    enum Stretch {
        /// Not live.
        case off
        /// Live since `since` (monotonic ns).
        case live(since: UInt64)
        /// Paused or finished, and waiting for the audio captured before.
        case draining(AudioDrain)
    }

    /// Audio reaches the handler later than the picture: a PipeWire capture stream hands on a buffer once the
    /// cycle it was captured in is over (a quantum, 21 to 43 ms by default, 170 ms at most), the synthetic source a
    /// chunk once it is complete. So that a recording's audio does not stop early at every pause and at the end,
    /// the handler hears of a pause or finish only once every stream's audio reaches `margin` beyond the end of the
    /// last frame it was sent (or the pause, if later), a stream has gone silent, or `limit` has passed. Any other
    /// event ends the wait at once.
    struct AudioDrain {
        /// The longest a pause or finish waits for audio captured before it: no later than
        /// `PipeWireAudioStream.silenceAfter`, when a stream that has sent nothing counts as silent anyway.
        static let limit: UInt64 = 200_000_000
        /// How much audio beyond the end of the picture is delivered: a handler that is still following a shift of the
        /// audio's timing (stretching it, after PipeWire's quantum changed: 75 ms for a microphone from 2048 to 256)
        /// places it earlier than its stamps, and needs it to reach the end of the picture (the end of the segment was
        /// short by as much, counted missing).
        static let margin: UInt64 = 100_000_000
        let since: UInt64
        let until: UInt64
        let deadline: UInt64
        /// The handler's notifications of the step that ended its live stretch, sent when the wait is over.
        var held: [BroadcastEffect] = []
    }

    init(
        id: UInt32, entry: HandlerRegistry.Entry, maxDuration: UInt64?, askedFrameRate: Double? = nil,
        wakes: WakeRegistry, isSharedEncoder: Bool = false
    ) throws(BroadcastError) {
        self.id = id
        self.isSharedEncoder = isSharedEncoder
        self.entry = entry
        self.wakes = wakes
        self.askedFrameRate = askedFrameRate
        _ = try machine.handle(
            .start(BroadcastDescription(id: id, handler: entry.manifest.name, maxDuration: maxDuration)))
    }

    var phase: BroadcastPhase { machine.phase }
    /// Requested and not yet finished.
    var isActive: Bool { phase != .idle && phase != .finished }
    var isLive: Bool {
        if case .live = stretch { return true }
        return false
    }
    /// After a pause or finish, the audio captured before it that is still on its way.
    var audioDrain: AudioDrain? {
        if case .draining(let drain) = stretch { return drain }
        return nil
    }
    /// Its handler gets the capture's samples (video, audio, camera, cursor): not once it shares an encoder.
    var takesSamples: Bool { encodedBy == nil }
    /// What its shared encoder last counted of the packets it was sent (kept once it no longer serves it).
    private(set) var encodedCounters: StreamCounters?
    /// Its handler takes `encoder`'s packets from now on, and no more samples. Its live time starts with the first
    /// keyframe its handler gets (`encodedStreamBegan`), unless it had live time before.
    func share(_ encoder: UInt32) {
        encodedBy = encoder
        awaitsEncodedStart = elapsedBefore == 0
        wakes.schedule(.maxDuration(id), at: maxDurationDeadline)
    }
    /// Revision 2.9: its handler shares an encoder and has not had its first keyframe, where its file starts: its
    /// live time starts there. The encoder starts after it went live, and its first picture comes a fraction of a
    /// second later: counted from READY, a recording of `--duration 3` was 2.9 s long.
    private(set) var awaitsEncodedStart = false
    /// The longest its live time waits for that keyframe.
    static let encodedStartLimit: UInt64 = 5_000_000_000

    /// Its handler got its shared encoder's first keyframe: its live time starts now.
    func encodedStreamBegan(now: UInt64) {
        guard awaitsEncodedStart else { return }
        awaitsEncodedStart = false
        if case .live = stretch { stretch = .live(since: now) }
    }
    func keepEncodedCounters(_ counters: StreamCounters) {
        encodedCounters = counters
    }
    /// Its streams' counters, with the shared encoder's packets as `encoded`.
    var streams: [String: StreamCounters] {
        var streams = ledger.streams
        if let encodedCounters { streams["encoded"] = encodedCounters }
        return streams
    }
    /// Its handler is connected (and its connection not closing).
    var isConnected: Bool { link?.connection != nil }
    /// What its handler holds slots as.
    var holder: Int? { link?.holder }

    // MARK: - Its state and what its handler and setup said

    /// Feeds `event` to its state machine: the effects to carry out, or the refusal.
    func handle(_ event: BroadcastEvent) throws(BroadcastError) -> [BroadcastEffect] {
        try machine.handle(event)
    }

    func setUp(_ setupInfo: [String: String]) {
        self.setupInfo = setupInfo
    }

    /// The URL viewers use, from the handler.
    func setURL(_ url: String) {
        machine.setURL(url)
    }

    /// The handler's service info; true when it changed.
    func setServiceInfo(_ info: [String: JSONValue]?) -> Bool {
        defer { serviceInfo = info }
        return info != serviceInfo
    }

    func setResult(_ result: [String: JSONValue]) {
        self.result = result
    }

    /// Its handler was launched.
    func attach(_ link: HandlerLink) {
        self.link = link
    }

    /// Its handler has exited.
    func detach() {
        link = nil
    }

    func elapsed(now: UInt64) -> UInt64 {
        if case .live(let since) = stretch, !awaitsEncodedStart { return elapsedBefore + now - since }
        return elapsedBefore
    }

    /// When its maximum live duration runs out, while it is live (waiting for its shared encoder's first keyframe, no
    /// longer than `encodedStartLimit`).
    var maxDurationDeadline: UInt64? {
        guard case .live(let since) = stretch, let max = machine.current?.maxDuration else { return nil }
        let start = awaitsEncodedStart ? since + Self.encodedStartLimit : since
        return start + (max > elapsedBefore ? max - elapsedBefore : 0)
    }

    // MARK: - Live stretches

    /// It goes live, on a capture of `frameInterval`.
    func beginLive(now: UInt64, frameInterval: UInt64) {
        framePhase = 0
        stretch = .live(since: now)
        self.frameInterval = frameInterval
        ledger.beginStretch()
        link?.beginStretch(now: now)
    }

    /// It is no longer live; `drainingAudio`: its handler still gets the audio captured before (`AudioDrain`), or
    /// its shared encoder's, for at most `limit`.
    func endLive(now: UInt64, drainingAudio: Bool = false, limit: UInt64 = AudioDrain.limit) {
        if case .live(let since) = stretch, !awaitsEncodedStart { elapsedBefore += now - since }
        let end = max(now, ledger.deliveredUntil[.video] ?? 0) + AudioDrain.margin
        stretch = drainingAudio ? .draining(AudioDrain(since: now, until: end, deadline: now + limit)) : .off
    }

    /// While it waits for its audio, `effect` waits with it (true); otherwise it is to be carried out now (false).
    func hold(_ effect: BroadcastEffect) -> Bool {
        guard case .draining(var drain) = stretch else { return false }
        drain.held.append(effect)
        stretch = .draining(drain)
        return true
    }

    /// Its wait for audio is over: the wait it was, with what it held.
    func endDrain() -> AudioDrain? {
        guard case .draining(let drain) = stretch else { return nil }
        stretch = .off
        return drain
    }

    // MARK: - Frames

    /// The frame rate its handler gets when the capture runs at `captureRate`: the rate its setup's `frameRate`
    /// or its manifest's asks for (or START's, when lower), as the nearest whole divisor of the capture's.
    func chooseFrameRate(captureRate: Double) -> Double {
        let wanted = [
            setupInfo[HandlerManifest.frameRateKey].flatMap(Double.init) ?? manifest.maxFrameRate, askedFrameRate,
        ]
        .compactMap { $0 }.min()
        frameDivisor = wanted.map { max(1, UInt64((captureRate / $0).rounded())) } ?? 1
        return captureRate / Double(frameDivisor)
    }

    /// Whether the frame due now is its (the capture's deadline is counted either way).
    func takesFrame() -> Bool {
        defer { framePhase += 1 }
        return framePhase % frameDivisor == 0
    }

    /// Of `count` deadlines the capture missed, how many would have been its frames (they are counted).
    func missedFrames(_ count: UInt64) -> UInt64 {
        let first = framePhase
        framePhase += count
        return (framePhase + frameDivisor - 1) / frameDivisor - (first + frameDivisor - 1) / frameDivisor
    }

    // MARK: - Samples

    /// Samples of `type` that never got as far as a sequence number (no slot, no handler, a deadline missed).
    func skip(_ type: SampleType, count: UInt64 = 1, late: Bool = false) {
        ledger.skip(type, count: count, late: late)
    }

    /// Holds the slot `header` names for its handler and sends it, or drops it when the handler's queue is full; a
    /// repeated frame is counted as such, and not sent to a handler that takes only frames that changed.
    func deliver(_ header: VideoSampleHeader, pts: UInt64, captureInterval: UInt64, pool: FramePool) {
        if header.repeated {
            ledger.repeated()
            if manifest.frameRate == .variable { return }
        }
        guard let link else { return }
        let slot = Int(header.slot)
        let interval = captureInterval * frameDivisor
        pool.hold(slot, for: link.holder)
        var header = header
        header.timing = SampleTiming(
            presentationTime: pts, duration: interval, sequence: ledger.takeSequence(.video),
            discontinuity: ledger.isDiscontinuous(.video))
        send(.videoSample, header, of: .video, pool: pool, link: link)
    }

    /// Sends VIDEO_SAMPLE or CAMERA_SAMPLE, whose slot its handler holds; when the handler's queue is full, the frame
    /// is dropped for it and the slot given back.
    private func send(
        _ opcode: Opcode, _ header: VideoSampleHeader, of type: SampleType, pool: FramePool, link: HandlerLink
    ) {
        var payload: [UInt8] = []
        payload.reserveCapacity(VideoSampleHeader.size)
        header.encode(into: &payload)
        if link.queue(Message(opcode, payload: payload), droppable: true) {
            ledger.delivered(type, until: header.timing.presentationTime + header.timing.duration)
            link.flush()
        } else {
            pool.release(Int(header.slot), by: link.holder)
            ledger.dropTaken(type)
        }
    }

    /// The capture's frames are `format` from the next on (in `pool` when a new one replaced the old). A handler that
    /// has not said HELLO hears nothing (no message may come before WELCOME): BROADCAST_STARTED says the format then.
    func formatChanged(_ format: VideoDescription, pool: FramePool?) {
        guard let link, link.connection != nil, link.saidHello else { return }
        if let pool { link.send(Self.announcement(of: pool)) }
        link.send(.json(.videoFormatChanged, format))
        ledger.markDiscontinuous(.video)
    }

    // MARK: - The camera

    /// Its handler takes the camera's frames: its manifest says `camera`, or its setup `camera=on` (or `track`).
    var takesCamera: Bool {
        manifest.camera == true
            || ["on", "true", "yes", "1", "track"].contains(setupInfo["camera"]?.lowercased() ?? "")
    }

    /// The camera's pool (when `newPool`) and CAMERA_FORMAT: its frames' format, or that it went away. Not before the
    /// handler's HELLO, whose answer sends the camera's pool and format as they are then.
    func cameraChanged(_ feed: CameraFeed, newPool: Bool) {
        guard let link, link.connection != nil, link.saidHello else { return }
        if newPool, let pool = feed.pool { link.send(Self.announcement(of: pool, camera: true)) }
        if let notice = feed.notice { link.send(.json(.cameraFormat, notice)) }
        ledger.markDiscontinuous(.videoCamera)
    }

    /// POOL for `pool`, with its memfd.
    static func announcement(of pool: FramePool, camera: Bool? = nil) -> Message {
        .json(
            .pool, PoolAnnouncement(pool: pool.id, slots: pool.capacity, slotSize: pool.slotSize, camera: camera),
            descriptors: [pool.handlerDescriptor])
    }

    /// Holds `slot` of the camera's pool for its handler and sends CAMERA_SAMPLE, or drops the frame when the
    /// handler's queue is full.
    func deliverCamera(slot: Int, pts: UInt64, duration: UInt64, format: VideoFormat, pool: FramePool) {
        guard let link else { return }
        pool.hold(slot, for: link.holder)
        let timing = SampleTiming(
            presentationTime: pts, duration: duration, sequence: ledger.takeSequence(.videoCamera),
            discontinuity: ledger.isDiscontinuous(.videoCamera))
        let header = VideoSampleHeader(
            timing: timing, orientation: .up, pool: pool.id, slot: UInt32(slot), format: format)
        send(.cameraSample, header, of: .videoCamera, pool: pool, link: link)
    }

    /// Where the pointer is (the metadata cursor mode).
    func sendCursor(_ cursor: CursorState, at pts: UInt64) {
        link?.sendCursor(cursor, at: pts)
    }

    /// An audio chunk of `stream`, queued for its handler (or dropped, counted, when it is behind).
    func deliver(_ chunk: AudioChunk, stream: SampleType, format: AudioFormat) {
        ledger.reached(stream, until: chunk.presentationTime + chunk.duration)
        let sequence = ledger.takeSequence(stream)
        guard let link, link.connection != nil else {
            ledger.dropTaken(stream)
            return
        }
        let timing = SampleTiming(
            presentationTime: chunk.presentationTime, duration: chunk.duration, sequence: sequence,
            discontinuity: chunk.discontinuity || ledger.isDiscontinuous(stream))
        var payload: [UInt8] = []
        payload.reserveCapacity(AudioSampleHeader.size + chunk.bytes.count)
        AudioSampleHeader(timing: timing, type: stream, format: format, frameCount: UInt32(chunk.frameCount)).encode(
            into: &payload)
        payload += chunk.bytes
        if link.queue(Message(.audioSample, payload: payload), droppable: true) {
            ledger.delivered(stream, until: chunk.presentationTime + chunk.duration)
        } else {
            ledger.dropTaken(stream)
        }
    }

    /// Sends what was queued for its handler.
    func flush() {
        link?.flush()
    }

    // MARK: - What controllers read

    /// Its status, as controllers read it; `capture` fills in what the capture says.
    func status(now: UInt64, base: BroadcastStatus) -> BroadcastStatus {
        var s = base
        s.state = machine.phase
        guard let current = machine.current else { return s }
        s.broadcast = current.id
        s.handler = current.handler
        s.url = current.url.map(SecretURL.masked)
        s.maxDuration = current.maxDuration.map { Double($0) / 1e9 }
        s.elapsed = Double(elapsed(now: now)) / 1e9
        s.wantsPaused = machine.wantsPaused
        s.error = machine.error
        s.streams = streams
        // Whole frames per second, rounded as BROADCAST_STARTED's (1e9 / 66_666_666 ns was 15.000000150000002).
        if frameDivisor > 1, let interval = frameInterval {
            s.frameRate = Int((1e9 / Double(interval * frameDivisor)).rounded())
        }
        if machine.phase == .finished { s.result = result }
        if case .string(let file)? = result?["file"] { s.file = file }
        if machine.discarded { s.discarded = true }
        s.encoder = encodedBy
        return s
    }

    /// "broadcast 3 to record".
    var title: String { "broadcast \(id) to \(manifest.name)" }
}
