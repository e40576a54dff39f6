import BroadcastSystem

/// Encodes video frames on a thread of its own, in order, so that an encode longer than a frame interval (a
/// keyframe's, with x265 or SVT-AV1) does not hold up the handler's intake: broadcastd keeps two frame slots for a
/// broadcast, and a handler that took longer than about two intervals lost the next frame (about one a keyframe).
/// The caller hands a frame in and waits for its packets up to `patience`, so that packets go out as soon as before
/// when the encoder keeps pace; what takes longer comes out with a later call. At most `depth` frames wait (4 at
/// 1080p); beyond that the caller waits too, and broadcastd drops frames as it did.
final class EncodeWorker: @unchecked Sendable {
    /// Encodes a frame, on the thread: the packets it gave.
    typealias Encode = (MediaFrame) throws(MediaError) -> [EncodedPacket]
    private let encodeFrame: Encode
    private let lock = ConditionLock()
    // Guarded by `lock`.
    /// Frames waiting for the thread, in order.
    private var queue: [MediaFrame] = []
    /// Frames handed in, and frames the thread has encoded.
    private var handedIn = 0
    private var encoded = 0
    private var packets: [EncodedPacket] = []
    private var failure: MediaError?
    private var running = false
    private var stopping = false

    /// Frames that may wait beside the one being encoded.
    let depth: Int
    /// What the frames waiting may take: 4 frames of 1080p, 2 of 4K.
    static let queuedBytes = 13 << 20
    /// How long the caller waits for its frame's packets (ns): below a frame interval at 30 fps.
    static let patience: UInt64 = 20_000_000

    /// `frameBytes`: a frame's size, which sets `depth` (2 to 8 frames within `queuedBytes`).
    init(frameBytes: Int, _ encode: @escaping Encode) {
        encodeFrame = encode
        depth = min(8, max(2, Self.queuedBytes / max(1, frameBytes)))
    }

    /// Hands `frame` (the worker's to keep: a clone) to the thread, and returns the packets ready once it is encoded
    /// or `patience` has passed.
    func encode(_ frame: MediaFrame) throws(MediaError) -> [EncodedPacket] {
        guard try start() else { return try drain() + encodeFrame(frame) }  // stopped: here
        return try lock.withLock { () throws(MediaError) in
            while queue.count >= depth && failure == nil { lock.wait() }
            queue.append(frame)
            handedIn += 1
            lock.broadcast()
            let deadline = MonotonicClock.now() + Self.patience
            while encoded < handedIn && failure == nil && lock.wait(until: deadline) {}
            return try takeLocked()
        }
    }

    /// Waits until every frame handed in is encoded; returns the packets ready.
    func drain() throws(MediaError) -> [EncodedPacket] {
        try lock.withLock { () throws(MediaError) in
            while encoded < handedIn && failure == nil { lock.wait() }
            return try takeLocked()
        }
    }

    /// Ends the thread once what was handed in is encoded (the encoder is the caller's again).
    func stop() {
        lock.withLock {
            stopping = true
            lock.broadcast()
            while running { lock.wait() }
        }
    }

    private func takeLocked() throws(MediaError) -> [EncodedPacket] {
        if let failure { throw failure }
        defer { packets = [] }
        return packets
    }

    /// Starts the thread unless it runs; false when it was stopped.
    private func start() throws(MediaError) -> Bool {
        let starting = lock.withLock { () -> Bool? in
            if stopping { return nil }
            if running { return false }
            running = true
            return true
        }
        guard let starting else { return false }
        guard starting else { return true }
        do {
            try BackgroundThread.start { [self] in run() }
        } catch {
            lock.withLock { running = false }
            throw MediaError("start the encoding thread", "\(error)")
        }
        return true
    }

    private func run() {
        while let frame = next() {
            var out: [EncodedPacket] = []
            var error: MediaError?
            do { out = try encodeFrame(frame) } catch let caught { error = caught }
            lock.withLock {
                packets += out
                failure = failure ?? error
                encoded += 1
                lock.broadcast()
            }
        }
    }

    /// The next frame to encode, once there is one; nil when it is stopping and none is left (the thread ends).
    private func next() -> MediaFrame? {
        lock.withLock {
            while queue.isEmpty && !stopping { lock.wait() }
            guard !queue.isEmpty else {
                running = false
                lock.broadcast()
                return nil
            }
            return queue.removeFirst()
        }
    }
}
