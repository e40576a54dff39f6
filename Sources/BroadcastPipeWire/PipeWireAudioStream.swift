import BroadcastCapture
import BroadcastCore
import CPipeWire
import Glibc
import Synchronization

/// What a PipeWire audio stream captures.
public enum AudioTarget: Equatable, Sendable, CustomStringConvertible {
    /// The default device: for app audio the default sink's monitor, for the microphone the default source.
    case defaultDevice
    /// A node by its name (`node.name`) or serial number, as `pw-cli ls Node` shows them.
    case node(String)

    public var description: String {
        switch self {
        case .defaultDevice: "default"
        case .node(let name): name
        }
    }
}

/// One PipeWire capture stream of interleaved float32 audio at 48 kHz, stamped on CLOCK_MONOTONIC from
/// PipeWire's own timing (the graph cycle's time less the delay from the device), not from when a
/// callback ran. PipeWire's thread puts each buffer into a queue of at most `queueLimit` ns of audio
/// (the oldest is dropped, and counted, past that); the daemon's loop takes chunks with `take(now:)`.
/// When nothing arrives for `silenceAfter` ns (the device is missing, unplugged, or has not been linked
/// yet), `take` carries the stream on with silence: never a gap.
public final class PipeWireAudioStream: @unchecked Sendable {
    public static let rate = 48_000
    public static let silenceAfter: UInt64 = 200_000_000
    public static let queueLimit: UInt64 = 500_000_000
    /// The length of a chunk of silence.
    static let silenceChunk: UInt64 = 10_000_000

    public let name: String
    public let target: AudioTarget
    public let channels: Int
    private let capturesSink: Bool
    private var loop: OpaquePointer?
    private var stream: OpaquePointer?
    private let events = UnsafeMutablePointer<pw_stream_events>.allocate(capacity: 1)
    private let listener = UnsafeMutablePointer<spa_hook>.allocate(capacity: 1)

    struct Shared {
        var chunks: [AudioChunk] = []
        var queued: UInt64 = 0
        /// Where the next chunk starts: the end of the last one, real or silent.
        var next: UInt64 = 0
        var silentSince: UInt64?
        var figures = AudioStreamFigures()
        var state = "unconnected"
    }
    private let shared = Mutex(Shared())

    /// - Parameters:
    ///   - capturesSink: true for app audio: capture what a sink plays (its monitor), not a source.
    public init(name: String, target: AudioTarget, channels: Int, capturesSink: Bool) {
        self.name = name
        self.target = target
        self.channels = channels
        self.capturesSink = capturesSink
        events.initialize(to: pw_stream_events())
        listener.initialize(to: spa_hook())
    }

    deinit {
        stop()
        events.deallocate()
        listener.deallocate()
    }

    /// Connects to PipeWire (`$PIPEWIRE_REMOTE`, else `$XDG_RUNTIME_DIR/pipewire-0`) and starts capturing;
    /// the stream's time starts at `time`. Throws when PipeWire cannot be reached.
    public func start(at time: UInt64) throws(CaptureError) {
        PipeWireLibrary.initialize()
        shared.withLock {
            $0 = Shared()
            $0.next = time
        }
        guard let loop = pw_thread_loop_new("broadcastd-\(name)", nil) else {
            throw CaptureError(source: "pipewire", operation: "start \(name) capture", reason: "pw_thread_loop_new failed")
        }
        self.loop = loop
        let properties = bd_pw_properties_new()
        pw_properties_set(properties, PW_KEY_MEDIA_TYPE, "Audio")
        pw_properties_set(properties, PW_KEY_MEDIA_CATEGORY, "Capture")
        pw_properties_set(properties, PW_KEY_MEDIA_ROLE, "Production")
        pw_properties_set(properties, PW_KEY_NODE_NAME, "broadcastd-" + name.split(separator: " ").joined(separator: "-"))
        pw_properties_set(properties, PW_KEY_APP_NAME, "broadcastd")
        if capturesSink { pw_properties_set(properties, "stream.capture.sink", "true") }
        if case .node(let node) = target { pw_properties_set(properties, "target.object", node) }
        // Don't follow a new default when a specific node was asked for.
        if target != .defaultDevice { pw_properties_set(properties, "node.dont-reconnect", "true") }

        events.pointee.version = bd_pw_version_stream_events()
        events.pointee.process = { data in
            Unmanaged<PipeWireAudioStream>.fromOpaque(data!).takeUnretainedValue().process()
        }
        events.pointee.state_changed = { data, _, state, error in
            let me = Unmanaged<PipeWireAudioStream>.fromOpaque(data!).takeUnretainedValue()
            let text = String(cString: pw_stream_state_as_string(state)) + (error.map { ": " + String(cString: $0) } ?? "")
            me.shared.withLock { $0.state = text }
        }
        pw_thread_loop_lock(loop)
        defer { pw_thread_loop_unlock(loop) }
        guard let stream = pw_stream_new_simple(pw_thread_loop_get_loop(loop), "broadcastd \(name)", properties, events,
                                                Unmanaged.passUnretained(self).toOpaque()) else {
            throw CaptureError(source: "pipewire", operation: "start \(name) capture", reason: "pw_stream_new_simple failed: \(String(cString: strerror(errno)))")
        }
        self.stream = stream
        let result = bd_pw_stream_connect_audio_capture(stream, UInt32(SPA_AUDIO_FORMAT_F32_LE.rawValue), UInt32(Self.rate), UInt32(channels))
        guard result >= 0 else {
            throw CaptureError(source: "pipewire", operation: "start \(name) capture", reason: "cannot connect to PipeWire: \(String(cString: strerror(-result)))")
        }
        guard pw_thread_loop_start(loop) >= 0 else {
            throw CaptureError(source: "pipewire", operation: "start \(name) capture", reason: "cannot start PipeWire's thread")
        }
    }

    /// Stops capturing and disconnects.
    public func stop() {
        guard let loop else { return }
        pw_thread_loop_stop(loop)
        if let stream { pw_stream_destroy(stream) }
        pw_thread_loop_destroy(loop)
        stream = nil
        self.loop = nil
    }

    /// The stream's state as PipeWire says it ("streaming", "paused", "error: ..."), and the figures so far.
    public var status: (state: String, figures: AudioStreamFigures) {
        shared.withLock { ($0.state, $0.figures) }
    }

    /// On PipeWire's thread: one buffer of captured audio into the queue.
    private func process() {
        guard let stream, let buffer = pw_stream_dequeue_buffer(stream) else { return }
        defer { pw_stream_queue_buffer(stream, buffer) }
        guard let spaBuffer = buffer.pointee.buffer, spaBuffer.pointee.n_datas > 0,
              let data = spaBuffer.pointee.datas, let base = data.pointee.data, let chunk = data.pointee.chunk else { return }
        let maximum = Int(data.pointee.maxsize)
        let offset = min(Int(chunk.pointee.offset), maximum)
        let frameBytes = 4 * channels
        let size = (min(Int(chunk.pointee.size), maximum - offset) / frameBytes) * frameBytes
        guard size > 0 else { return }
        var time = pw_time()
        pw_stream_get_time_n(stream, &time, MemoryLayout<pw_time>.size)
        let frames = size / frameBytes
        let duration = UInt64(frames) * 1_000_000_000 / UInt64(Self.rate)
        // The buffer's last sample left the device `delay` before the cycle began at `now`.
        var delay: Int64 = 0
        if time.rate.denom > 0 { delay = time.delay * 1_000_000_000 * Int64(time.rate.num) / Int64(time.rate.denom) }
        let stamped = UInt64(max(0, time.now - delay)) &- duration
        let bytes = [UInt8](UnsafeRawBufferPointer(start: base + offset, count: size))
        shared.withLock { s in
            s.figures.buffers += 1
            s.enqueue(bytes: bytes, frames: frames, duration: duration, stamped: time.now > 0 ? stamped : s.next)
        }
    }

    /// The next chunk due by `now`: captured audio in order, or, when nothing has come for
    /// `silenceAfter`, silence up to `now - silenceAfter`.
    public func take(now: UInt64) -> AudioChunk? {
        shared.withLock { s in
            if !s.chunks.isEmpty {
                let chunk = s.chunks.removeFirst()
                s.queued -= chunk.duration
                return chunk
            }
            guard now > s.next + Self.silenceAfter else { return nil }
            if s.silentSince == nil { s.silentSince = s.next }
            let frames = Int(Self.silenceChunk * UInt64(Self.rate) / 1_000_000_000)
            let chunk = AudioChunk(presentationTime: s.next, duration: Self.silenceChunk, frameCount: frames,
                                   bytes: [UInt8](repeating: 0, count: frames * 4 * channels))
            s.next += Self.silenceChunk
            s.figures.silentChunks += 1
            return chunk
        }
    }

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

extension PipeWireAudioStream.Shared {
    /// Places a captured buffer on the stream's timeline: where the last chunk ended, unless PipeWire's own
    /// time is more than 20 ms away from that (a resync), and never before the end of what was sent.
    mutating func enqueue(bytes: [UInt8], frames: Int, duration: UInt64, stamped: UInt64) {
        var start = next
        let distance = stamped > next ? stamped - next : next - stamped
        if distance > 20_000_000 {
            figures.resyncs += 1
            start = max(stamped, next)
        }
        silentSince = nil
        chunks.append(AudioChunk(presentationTime: start, duration: duration, frameCount: frames, bytes: bytes))
        queued += duration
        next = start + duration
        while queued > PipeWireAudioStream.queueLimit, !chunks.isEmpty {
            queued -= chunks.removeFirst().duration
            figures.dropped += 1
        }
    }
}

/// pw_init, once per process.
enum PipeWireLibrary {
    private static let initialized: Bool = {
        pw_init(nil, nil)
        return true
    }()

    static func initialize() { _ = initialized }
}
