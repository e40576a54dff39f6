import BroadcastCore
import BroadcastProtocol

/// One broadcast, from its START until the next START after it finished (a finished broadcast stays, with
/// its result, for status): its state machine, setup, handler, what it was sent and when it was live.
final class Broadcast {
    let id: UInt32
    let entry: HandlerRegistry.Entry
    var manifest: HandlerManifest { entry.manifest }
    var machine = BroadcastStateMachine()
    var setupInfo: [String: String] = [:]
    /// The handler's last UPDATE_SERVICE_INFO (nil: none, or empty).
    var serviceInfo: [String: JSONValue]? {
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
    var result: [String: JSONValue]?
    /// Its handler process, from launch until it exits.
    var link: HandlerLink?
    var ledger = StreamLedger()
    /// READY is due by then.
    var startDeadline: UInt64?
    /// Since when it is live (nil while not), and its live time before that.
    private(set) var liveSince: UInt64?
    private(set) var elapsedBefore: UInt64 = 0
    /// After a pause or finish, the audio captured before it that is still on its way.
    var audioDrain: AudioDrain?
    /// Its handler gets every k-th frame of the capture (it asked for fewer frames per second).
    private(set) var frameDivisor: UInt64 = 1
    /// Capture deadlines since its live stretch began.
    private var framePhase: UInt64 = 0

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
        var deadline: UInt64 { since + Self.limit }
        /// The handler's notifications of the step that ended its live stretch, sent when the wait is over.
        var held: [BroadcastEffect] = []
    }

    init(id: UInt32, entry: HandlerRegistry.Entry, maxDuration: UInt64?) throws(BroadcastError) {
        self.id = id
        self.entry = entry
        _ = try machine.handle(.start(BroadcastDescription(id: id, handler: entry.manifest.name, maxDuration: maxDuration)))
    }

    var phase: BroadcastPhase { machine.phase }
    /// Requested and not yet finished.
    var isActive: Bool { phase != .idle && phase != .finished }
    var isLive: Bool { liveSince != nil }

    func elapsed(now: UInt64) -> UInt64 {
        elapsedBefore + (liveSince.map { now - $0 } ?? 0)
    }

    /// When its maximum live duration runs out, while it is live.
    var maxDurationDeadline: UInt64? {
        guard let liveSince, let max = machine.current?.maxDuration else { return nil }
        return liveSince + (max > elapsedBefore ? max - elapsedBefore : 0)
    }

    /// A lower frame rate than the capture's, asked for by START (`--fps`) when it joined a running capture.
    var askedFrameRate: Double?

    /// The frame rate its handler gets when the capture runs at `captureRate`: the rate its setup's `frameRate`
    /// or its manifest's asks for (or START's, when lower), as the nearest whole divisor of the capture's.
    func chooseFrameRate(captureRate: Double) -> Double {
        let wanted = [setupInfo[HandlerManifest.frameRateKey].flatMap(Double.init) ?? manifest.maxFrameRate, askedFrameRate]
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

    func beginLive(now: UInt64) {
        framePhase = 0
        liveSince = now
        ledger.beginStretch()
        link?.cursorSpriteSent = nil
    }

    func endLive(now: UInt64) {
        if let liveSince { elapsedBefore += now - liveSince }
        liveSince = nil
    }

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
        s.streams = ledger.streams
        // Whole frames per second, rounded as BROADCAST_STARTED's (1e9 / 66_666_666 ns was 15.000000150000002).
        if frameDivisor > 1, let interval = frameInterval {
            s.frameRate = Int((1e9 / Double(interval * frameDivisor)).rounded())
        }
        if machine.phase == .finished { s.result = result }
        if case .string(let file)? = result?["file"] { s.file = file }
        if machine.discarded { s.discarded = true }
        return s
    }

    /// The capture's frame interval, for its status.
    var frameInterval: UInt64?

    /// "broadcast 3 to record".
    var title: String { "broadcast \(id) to \(manifest.name)" }
}
