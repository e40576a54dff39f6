import BroadcastCapture
import BroadcastCore
import BroadcastSystem
import CPipeWire
import Glibc
import Synchronization

/// What a PipeWire audio stream captures.
public enum AudioTarget: Equatable, Sendable, CustomStringConvertible {
    /// The default device, followed when it changes: for app audio the default sink (its monitor), for the
    /// microphone the default source; only a real source counts as a microphone.
    case defaultDevice
    /// A node by its name (`node.name`) or serial number (`object.serial`), as `pw-cli ls Node` or
    /// `wpctl status` show them; for app audio
    /// also an application by its name (`application.name`, in any case): all of its playback streams,
    /// mixed, as they come and go; `pid:N`: the playback streams of process N (`application.process.id`).
    case node(String)

    public var description: String {
        switch self {
        case .defaultDevice: "default"
        case .node(let name): name
        }
    }
}

/// One audio stream of the broadcast (app audio or the microphone): interleaved float32 or s16 at 48 kHz on
/// CLOCK_MONOTONIC. A `PipeWireSession` connects it to a node and reconnects it when the node changes; each buffer
/// is stamped from PipeWire's timing (the graph cycle's time less the delay from the device), not from when a
/// callback ran, and placed by its stamp: samples that follow on are never cut nor padded, only samples PipeWire
/// lost leave a gap, and the chunk after it carries the discontinuity flag (see `Shared.enqueue`). Chunks wait in a
/// queue of at most `queueLimit` ns of audio (the oldest is dropped, and counted, past that) for the daemon's loop,
/// which takes them with `take(now:)`. When nothing arrives for `silenceAfter` ns (no device, unplugged, PipeWire
/// not running) `take` carries the stream on with silence.
public final class PipeWireAudioStream: @unchecked Sendable {
    public static let rate = 48_000
    public static let silenceAfter: UInt64 = 200_000_000
    public static let queueLimit: UInt64 = 500_000_000
    /// How far a buffer's stamp may be from where the last one ended before the stream resyncs to it, when the
    /// graph's clock cannot tell whether samples were lost between them.
    static let resyncLimit: Int64 = 40_000_000
    /// How many all-zero buffers after connecting are taken for PipeWire's start-up silence (one, here).
    static let startupSilentBuffers = 2
    /// The longest a chunk that looks like audio after a loss waits for the next to say whether it was rather late.
    static let holdLimit: UInt64 = 100_000_000
    /// The length of a chunk of silence.
    static let silenceChunk: UInt64 = 10_000_000
    /// How much audio is kept while the broadcast is not live, so that a start or resume begins with the audio
    /// from before its first frame (the handler fades it in or crossfades the join there): at least a
    /// microphone's 42.7 ms cycle and the fade beyond it.
    public static let preRoll: UInt64 = 150_000_000
    /// What a connected stream adds to broadcastd's resident memory (its buffers, its queue at its fullest, libpipewire's
    /// audio conversion), for the memory plan.
    public static let residentBytes = 3 << 19
    /// The most a stream's queue holds (at `queueLimit`), bytes: what the memory budget counts for it.
    public static func queueBytes(_ format: AudioFormat) -> Int {
        Int(queueLimit) * rate / 1_000_000_000 * format.bytesPerFrame + 4096
    }

    public let name: String
    public let target: AudioTarget
    /// What PipeWire delivers (it converts): the broadcast's channels and sample format, 48 kHz.
    public let format: AudioFormat
    /// App audio: captures what a sink or an application plays, not a source.
    let capturesSink: Bool
    /// Signalled whenever a buffer is queued.
    private let arrival: Wakeup?

    /// What a stream captures from.
    enum Source: Equatable {
        /// A node, by serial number, linked by the session manager: a source, or a sink's monitor.
        case node(serial: String, monitor: Bool)
        /// Ports the session links to the stream itself (an application's playback streams, which PipeWire
        /// mixes): always stereo, front left and right, so the ports can be linked channel by channel; a
        /// mono broadcast gets the two averaged.
        case linked(String)
    }

    // Touched only on PipeWire's thread (or with it locked); `process`, on PipeWire's realtime thread, reads them
    // while the stream is connected, and they are set before it connects.
    private(set) var stream: OpaquePointer?
    private(set) var connectedTo: Source?
    /// The channels PipeWire delivers: the format's, or 2 for a linked stream (averaged for a mono format).
    private var deliveredChannels = 0
    /// Buffers since the stream first connected, while they are all silent (see `process`); nil once one is
    /// not, or when it connects again.
    private var silentSinceConnect: Int? = 0
    /// Where the buffers have come to on the graph's clock.
    private var graphClock = GraphClock()
    private let events = UnsafeMutablePointer<pw_stream_events>.allocate(capacity: 1)
    private let listener = UnsafeMutablePointer<spa_hook>.allocate(capacity: 1)

    struct Shared {
        var chunks: [AudioChunk] = []
        var queued: UInt64 = 0
        /// Where the next chunk starts: the end of the last one, real or silent.
        var next: UInt64 = 0
        var silentSince: UInt64?
        /// Whether the last chunk was captured audio (not silence, nor nothing yet): the next may follow on from it.
        var inStep = false
        /// The last chunk's length: a chunk that follows on starts after the middle of it, whatever its stamp says.
        var lastDuration: UInt64 = 0
        /// The last chunk looked like audio after a loss, and waits for the next buffer to say whether it was rather
        /// taken late; nil: none waits.
        var held: Held?
        /// Whether the broadcast is live: otherwise only the last `preRoll` of audio is kept.
        var live = false
        /// Whether any audio has come since `reset`.
        var heard = false
        var figures = AudioStreamFigures()
        var state = "unconnected"
    }
    private let shared = Mutex(Shared())

    public init(name: String, target: AudioTarget, format: AudioFormat, capturesSink: Bool, arrival: Wakeup? = nil) {
        self.name = name
        self.target = target
        self.format = format
        self.capturesSink = capturesSink
        self.arrival = arrival
        events.initialize(to: pw_stream_events())
        events.pointee.version = bd_pw_version_stream_events()
        events.pointee.process = { data in
            Unmanaged<PipeWireAudioStream>.fromOpaque(data!).takeUnretainedValue().process()
        }
        events.pointee.state_changed = { data, _, state, error in
            let me = Unmanaged<PipeWireAudioStream>.fromOpaque(data!).takeUnretainedValue()
            let text =
                String(cString: pw_stream_state_as_string(state)) + (error.map { ": " + String(cString: $0) } ?? "")
            me.shared.withLock { $0.state = text }
        }
        listener.initialize(to: spa_hook())
    }

    deinit {
        events.deallocate()
        listener.deallocate()
    }

    /// Nothing queued, nothing heard yet, not live: what comes is kept as pre-roll.
    func reset() {
        shared.withLock { $0 = Shared() }
    }

    /// The broadcast goes live (starts or resumes) at `time`: the pre-roll from `preRoll` before it on is taken
    /// first; with none, the stream's time starts at the first buffer to come, or at `time` for silence.
    func goLive(at time: UInt64) {
        shared.withLock { $0.goLive(at: time) }
    }

    /// The broadcast pauses or ends: what comes from now on is kept as pre-roll only.
    func leaveLive() {
        shared.withLock { $0.leaveLive() }
    }

    /// On PipeWire's thread: captures from `source`, or from nothing (silence). WirePlumber is told never to
    /// move the stream elsewhere: following a device is the session's job.
    func connect(core: OpaquePointer, to source: Source?) {
        guard source != connectedTo || (source != nil && stream == nil) else { return }
        disconnect()
        guard let source else { return }
        let properties = bd_pw_properties_new()
        pw_properties_set(properties, PW_KEY_MEDIA_TYPE, "Audio")
        pw_properties_set(properties, PW_KEY_MEDIA_CATEGORY, "Capture")
        pw_properties_set(properties, PW_KEY_MEDIA_ROLE, "Production")
        pw_properties_set(
            properties, PW_KEY_NODE_NAME, "broadcastd-" + name.split(separator: " ").joined(separator: "-"))
        pw_properties_set(properties, "node.dont-reconnect", "true")
        var channels = format.channels
        switch source {
        case .node(let serial, let monitor):
            pw_properties_set(properties, "target.object", serial)
            if monitor { pw_properties_set(properties, "stream.capture.sink", "true") }
        case .linked:
            channels = 2
        }
        guard let stream = pw_stream_new(core, "broadcastd \(name)", properties) else {
            shared.withLock { $0.state = "error: pw_stream_new failed" }
            return
        }
        pw_stream_add_listener(stream, listener, events, Unmanaged.passUnretained(self).toOpaque())
        let sampleFormat = format.sampleFormat == .s16 ? SPA_AUDIO_FORMAT_S16_LE : SPA_AUDIO_FORMAT_F32_LE
        let autoconnect = if case .node = source { true } else { false }
        self.stream = stream
        graphClock = GraphClock()
        deliveredChannels = channels
        silentSinceConnect = hasHeard ? nil : 0
        let result = bd_pw_stream_connect_audio_capture(
            stream, UInt32(sampleFormat.rawValue), UInt32(Self.rate), UInt32(channels), autoconnect)
        guard result >= 0 else {
            shared.withLock { $0.state = "error: cannot connect: \(String(cString: strerror(-result)))" }
            pw_stream_destroy(stream)
            self.stream = nil
            return
        }
        connectedTo = source
    }

    /// On PipeWire's thread: the stream's node, once PipeWire has it (what the session links ports to).
    var nodeID: UInt32? {
        guard let stream else { return nil }
        let id = pw_stream_get_node_id(stream)
        return id == UInt32.max ? nil : id
    }

    /// On PipeWire's thread (or with it stopped).
    func disconnect() {
        if let stream { pw_stream_destroy(stream) }
        stream = nil
        connectedTo = nil
        shared.withLock { $0.state = "unconnected" }
    }

    /// The stream's state as PipeWire says it ("streaming", "paused", "error: ..."), and the figures so far.
    public var status: (state: String, figures: AudioStreamFigures) {
        shared.withLock { ($0.state, $0.figures) }
    }

    /// On PipeWire's realtime thread, in each cycle of the graph (taken on the connection's thread, later, a buffer
    /// was paired with the time of a newer cycle, and one not taken in time was lost): the buffers of captured audio
    /// that have come. Should more than one wait, they are taken all at once and stamped back from the newest cycle's
    /// time, each ending where the next begins. The graph's clock says whether the first follows on from the last
    /// buffer taken before, or samples were lost between (an xrun); a call that comes late, as the next cycle begins,
    /// reads that cycle's time and clock, and its buffer looks a cycle late, after a loss, until the next call finds
    /// the clock where it was (`Shared.enqueue` holds it back until then).
    private func process() {
        guard let stream else { return }
        var buffers: [UnsafeMutablePointer<pw_buffer>] = []
        while let buffer = pw_stream_dequeue_buffer(stream) { buffers.append(buffer) }
        defer { for buffer in buffers { pw_stream_queue_buffer(stream, buffer) } }
        let frameBytes = format.bytesPerFrame * deliveredChannels / format.channels
        let captured = buffers.compactMap { Self.contents(of: $0, frameBytes: frameBytes) }
        guard !captured.isEmpty else { return }
        var time = pw_time()
        pw_stream_get_time_n(stream, &time, MemoryLayout<pw_time>.size)
        var delay: Int64 = 0
        if time.rate.denom > 0 { delay = time.delay * 1_000_000_000 * Int64(time.rate.num) / Int64(time.rate.denom) }
        let frames = captured.map { $0.count / frameBytes }
        let waiting = Int(time.avail_buffers)
        let starts = Self.stamps(
            frames: frames, now: time.now, delay: delay, waiting: waiting,
            capturesSink: capturesSink)
        let lost = graphClock.advance(frames: frames, ticks: time.ticks, rate: time.rate, waiting: waiting)
        // A stamp more than a second from the clock is not believed (the buffer follows the last one).
        let clock = Int64(MonotonicClock.now())
        let stamps = starts.map { time.now > 0 && abs($0 - clock) < 1_000_000_000 ? UInt64($0) : nil }
        for (index, (bytes, stamped)) in zip(captured, stamps).enumerated() {
            // Those taken at once follow on from each other.
            enqueue(bytes, frameBytes: frameBytes, stamped: stamped, lost: index > 0 ? 0 : lost)
        }
        arrival?.signal()
    }

    /// Where the first sample of each of the buffers taken at once (`frames` each, in order) was heard, ns. A device's
    /// buffer was captured until `delay` before the cycle began at `now`; what a sink plays (its monitor, or an
    /// application's output) is played from the cycle's start on, after any filter's `delay`. The newest is of the
    /// cycle `now` is of, unless `waiting` buffers came after it (each as long as it); each ends where the next begins.
    static func stamps(frames: [Int], now: Int64, delay: Int64, waiting: Int, capturesSink: Bool) -> [Int64] {
        func duration(_ frames: Int) -> Int64 { Int64(frames) * 1_000_000_000 / Int64(rate) }
        guard let newest = frames.last else { return [] }
        var end = now - delay + (capturesSink ? duration(newest) : 0) - Int64(waiting) * duration(newest)
        var starts: [Int64] = []
        for count in frames.reversed() {
            end -= duration(count)
            starts.append(end)
        }
        return starts.reversed()
    }

    /// The whole frames a buffer holds.
    private static func contents(of buffer: UnsafeMutablePointer<pw_buffer>, frameBytes: Int) -> UnsafeRawBufferPointer?
    {
        guard let spaBuffer = buffer.pointee.buffer, spaBuffer.pointee.n_datas > 0,
            let data = spaBuffer.pointee.datas, let base = data.pointee.data, let chunk = data.pointee.chunk
        else { return nil }
        let maximum = Int(data.pointee.maxsize)
        let offset = min(Int(chunk.pointee.offset), maximum)
        let size = (min(Int(chunk.pointee.size), maximum - offset) / frameBytes) * frameBytes
        return size > 0 ? UnsafeRawBufferPointer(start: base + offset, count: size) : nil
    }

    /// One buffer's audio into the queue, placed by its stamp (nil: after the last); `lost`: the frames the graph's
    /// clock says went missing before it (nil: not known).
    private func enqueue(_ captured: UnsafeRawBufferPointer, frameBytes: Int, stamped: UInt64?, lost: Int?) {
        // A new stream's first buffer is silence PipeWire fills in while the link starts, not audio: at the start
        // it is dropped, so the handler counts it as missing (and fades in on what comes) instead of taking it
        // for what was heard; on a new device mid-broadcast it keeps the stream continuous.
        if let silent = silentSinceConnect {
            if silent < Self.startupSilentBuffers && captured.allSatisfy({ $0 == 0 }) {
                silentSinceConnect = silent + 1
                return
            }
            silentSinceConnect = nil
        }
        let bytes =
            deliveredChannels == format.channels
            ? [UInt8](captured) : Self.averagePairs(captured, sampleFormat: format.sampleFormat)
        shared.withLock { s in
            s.figures.buffers += 1
            s.enqueue(
                bytes: bytes, frames: captured.count / frameBytes, stamped: stamped ?? s.next,
                lost: stamped == nil ? 0 : lost, bytesPerFrame: format.bytesPerFrame)
        }
    }

    /// Interleaved stereo made mono: each frame's two samples averaged.
    static func averagePairs(_ stereo: UnsafeRawBufferPointer, sampleFormat: AudioSampleFormat) -> [UInt8] {
        let width = sampleFormat.bytesPerSample
        let frames = stereo.count / (2 * width)
        return [UInt8](unsafeUninitializedCapacity: frames * width) { mono, count in
            let out = UnsafeMutableRawBufferPointer(mono)
            for i in 0..<frames {
                switch sampleFormat {
                case .float32:
                    let sum =
                        stereo.loadUnaligned(fromByteOffset: 8 * i, as: Float.self)
                        + stereo.loadUnaligned(fromByteOffset: 8 * i + 4, as: Float.self)
                    out.storeBytes(of: sum / 2, toByteOffset: 4 * i, as: Float.self)
                case .s16:
                    let sum =
                        Int32(stereo.loadUnaligned(fromByteOffset: 4 * i, as: Int16.self))
                        + Int32(stereo.loadUnaligned(fromByteOffset: 4 * i + 2, as: Int16.self))
                    out.storeBytes(of: Int16(sum / 2), toByteOffset: 2 * i, as: Int16.self)
                }
            }
            count = frames * width
        }
    }

    /// The next chunk due by `now`: captured audio in order, or, when nothing has come for
    /// `silenceAfter`, silence up to `now - silenceAfter`.
    public func take(now: UInt64) -> AudioChunk? {
        shared.withLock { $0.take(now: now, bytesPerFrame: format.bytesPerFrame) }
    }

    /// When `take` next has something without new audio: now, if chunks wait; else when a chunk held back is handed
    /// on, or when silence is due.
    public var silenceDue: UInt64 {
        shared.withLock { s in
            s.chunks.count > (s.held == nil ? 0 : 1) ? 0 : s.heldUntil ?? s.next + Self.silenceAfter + 1
        }
    }

    /// Whether any audio has come since the session started.
    public var hasHeard: Bool { shared.withLock { $0.heard } }

    /// Since when the stream has been carried on with silence, if it is now.
    public var silentSince: UInt64? { shared.withLock { $0.silentSince } }
}

/// What a PipeWire audio stream has done so far.
public struct AudioStreamFigures: Equatable, Sendable {
    public var buffers: UInt64 = 0
    /// Chunks dropped because the queue was full (the daemon's loop did not take them in time).
    public var dropped: UInt64 = 0
    public var silentChunks: UInt64 = 0
    /// Times the captured audio's own timestamps jumped away from where the stream was (a new device, say).
    public var resyncs: UInt64 = 0
}
