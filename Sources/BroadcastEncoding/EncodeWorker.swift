import Glibc

/// Encodes video frames on a thread of its own, in order, so that an encode longer than a frame interval (a
/// keyframe's, with x265 or SVT-AV1) does not hold up the handler's intake: broadcastd keeps two frame slots for a
/// broadcast, and a handler that took longer than about two intervals lost the next frame (about one a keyframe).
/// The caller hands a frame in and waits for its packets up to `patience`, so that packets go out as soon as before
/// when the encoder keeps pace; what takes longer comes out with a later call. At most `depth` frames wait; beyond
/// that the caller waits too, and broadcastd drops frames as it did.
final class EncodeWorker: @unchecked Sendable {
    /// Encodes a frame, on the thread: the packets it gave.
    typealias Encode = (MediaFrame) throws(MediaError) -> [EncodedPacket]
    private let encode: Encode
    /// Frames waiting for the thread, in order.
    private var queue: [MediaFrame] = []
    /// Frames handed in, and frames the thread has encoded.
    private var handedIn = 0
    private var encoded = 0
    private var packets: [EncodedPacket] = []
    private var failure: MediaError?
    private var stopping = false
    private var thread: pthread_t?
    private var mutex = pthread_mutex_t()
    private var changed = pthread_cond_t()

    /// Frames that may wait beside the one being encoded.
    static let depth = 3
    /// How long the caller waits for its frame's packets (ns): below a frame interval at 30 fps.
    static let patience: Int = 20_000_000

    init(_ encode: @escaping Encode) {
        self.encode = encode
        pthread_mutex_init(&mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(&changed, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(&changed)
        pthread_mutex_destroy(&mutex)
    }

    /// Hands `frame` (the worker's to keep: a clone) to the thread, and returns the packets ready once it is encoded
    /// or `patience` has passed.
    func encode(_ frame: MediaFrame) throws(MediaError) -> [EncodedPacket] {
        start()
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        while queue.count >= Self.depth && failure == nil { pthread_cond_wait(&changed, &mutex) }
        queue.append(frame)
        handedIn += 1
        pthread_cond_broadcast(&changed)
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let nanoseconds = deadline.tv_nsec + Self.patience
        (deadline.tv_sec, deadline.tv_nsec) = (
            deadline.tv_sec + nanoseconds / 1_000_000_000, nanoseconds % 1_000_000_000
        )
        while encoded < handedIn && failure == nil {
            if pthread_cond_timedwait(&changed, &mutex, &deadline) == ETIMEDOUT { break }
        }
        return try takeLocked()
    }

    /// Waits until every frame handed in is encoded; returns the packets ready.
    func drain() throws(MediaError) -> [EncodedPacket] {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        while encoded < handedIn && failure == nil { pthread_cond_wait(&changed, &mutex) }
        return try takeLocked()
    }

    /// The packets ready now.
    func ready() throws(MediaError) -> [EncodedPacket] {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return try takeLocked()
    }

    /// Ends the thread once what was handed in is encoded (the encoder is the caller's again).
    func stop() {
        pthread_mutex_lock(&mutex)
        stopping = true
        pthread_cond_broadcast(&changed)
        pthread_mutex_unlock(&mutex)
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    private func takeLocked() throws(MediaError) -> [EncodedPacket] {
        if let failure { throw failure }
        defer { packets = [] }
        return packets
    }

    private func start() {
        guard thread == nil else { return }
        var created = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let status = pthread_create(
            &created, nil,
            { context in
                let worker = Unmanaged<EncodeWorker>.fromOpaque(context!).takeRetainedValue()
                worker.run()
                return nil
            }, context)
        if status == 0 {
            thread = created
        } else {
            Unmanaged<EncodeWorker>.fromOpaque(context).release()
            failure = MediaError("start the encoding thread", "pthread_create: error \(status)")
        }
    }

    private func run() {
        pthread_mutex_lock(&mutex)
        while true {
            while queue.isEmpty && !stopping { pthread_cond_wait(&changed, &mutex) }
            if queue.isEmpty { break }
            let frame = queue.removeFirst()
            pthread_mutex_unlock(&mutex)
            var out: [EncodedPacket] = []
            var error: MediaError?
            do { out = try encode(frame) } catch let caught { error = caught }
            pthread_mutex_lock(&mutex)
            packets += out
            failure = failure ?? error
            encoded += 1
            pthread_cond_broadcast(&changed)
        }
        pthread_mutex_unlock(&mutex)
    }
}
