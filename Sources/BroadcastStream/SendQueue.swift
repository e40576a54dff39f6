/// Encoded packets waiting for the network, bounded in bytes and in media time. When a slow link lets
/// it overflow, whole GOPs go from the front: video up to the next keyframe and the audio that
/// belongs to that time, so what is sent next starts on a keyframe and no frame is ever sent
/// without the ones it refers to. With no keyframe queued, the video waits for the next one.
public struct SendQueue<Payload> {
    public struct Entry {
        public var isVideo: Bool
        public var isKeyframe: Bool
        public var bytes: Int
        /// Media time, ns.
        public var time: Int64
        public var payload: Payload

        public init(isVideo: Bool, isKeyframe: Bool, bytes: Int, time: Int64, payload: Payload) {
            self.isVideo = isVideo
            self.isKeyframe = isKeyframe
            self.bytes = bytes
            self.time = time
            self.payload = payload
        }
    }

    public let maxBytes: Int
    public let maxDuration: Int64
    private var entries: [Entry] = []
    private var head = 0
    public private(set) var bytes = 0
    /// Video is dropped until a keyframe comes (after an overflow, or a reconnection).
    public private(set) var waitingForKeyframe = false
    public private(set) var droppedVideoFrames = 0
    public private(set) var droppedAudioPackets = 0
    /// Whole GOPs (or GOP tails) dropped.
    public private(set) var drops = 0

    public init(maxBytes: Int, maxDuration: Int64) {
        self.maxBytes = maxBytes
        self.maxDuration = maxDuration
    }

    public var count: Int { entries.count - head }
    public var isEmpty: Bool { count == 0 }

    /// Media time between the oldest and the newest queued packet, ns.
    public var duration: Int64 {
        guard let first = entries[head...].first, let last = entries.last else { return 0 }
        return max(0, last.time - first.time)
    }

    /// Queues `entry`, first dropping what overflows; returns false when `entry` itself was dropped
    /// (video while waiting for a keyframe).
    @discardableResult
    public mutating func push(_ entry: Entry) -> Bool {
        if entry.isVideo {
            if waitingForKeyframe && !entry.isKeyframe {
                droppedVideoFrames += 1
                return false
            }
            if entry.isKeyframe { waitingForKeyframe = false }
        }
        entries.append(entry)
        bytes += entry.bytes
        while count > 1 && (bytes > maxBytes || duration > maxDuration) { dropOldestGOP() }
        return true
    }

    public mutating func pop() -> Entry? {
        guard head < entries.count else { return nil }
        let entry = entries[head]
        head += 1
        bytes -= entry.bytes
        if head > 256 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
        return entry
    }

    /// After a reconnection: the next video sent must be a keyframe. Queued video up to the first
    /// queued keyframe (with its audio) is dropped; with none queued, video waits for one.
    public mutating func restartAtKeyframe() {
        guard let key = entries[head...].firstIndex(where: { $0.isVideo && $0.isKeyframe }) else {
            if entries[head...].contains(where: \.isVideo) { dropOldestGOP() }
            waitingForKeyframe = true
            return
        }
        if key > head { dropFront(upTo: key) }
    }

    /// After a reconnection where only the newest media will do (WebRTC: played as it arrives): everything queued
    /// is dropped and video waits for the next keyframe.
    public mutating func restartAtNextKeyframe() {
        for entry in entries[head...] {
            if entry.isVideo { droppedVideoFrames += 1 } else { droppedAudioPackets += 1 }
        }
        entries = []
        head = 0
        bytes = 0
        waitingForKeyframe = true
    }

    /// Drops from the front up to the second keyframe (the rest of the GOP being sent and nothing
    /// more), or all video when there is no later keyframe.
    private mutating func dropOldestGOP() {
        drops += 1
        let searchFrom = entries[head].isVideo && entries[head].isKeyframe ? head + 1 : head
        if let next = entries[searchFrom...].firstIndex(where: { $0.isVideo && $0.isKeyframe }) {
            dropFront(upTo: next)
        } else {
            let kept = entries[head...].filter { !$0.isVideo }
            let video = entries[head...].filter(\.isVideo)
            droppedVideoFrames += video.count
            entries = Array(kept)
            head = 0
            bytes = entries.reduce(0) { $0 + $1.bytes }
            waitingForKeyframe = true
            // Audio alone still overflowing: drop its oldest.
            while count > 1 && (bytes > maxBytes || duration > maxDuration) {
                bytes -= entries[head].bytes
                head += 1
                droppedAudioPackets += 1
            }
        }
    }

    /// Drops the packets before index `end` (a keyframe), audio included up to the keyframe's time.
    private mutating func dropFront(upTo end: Int) {
        let keyTime = entries[end].time
        var kept: [Entry] = []
        for (index, entry) in entries[head...].enumerated().map({ ($0.offset + head, $0.element) }) {
            let drop = index < end && (entry.isVideo || entry.time < keyTime)
            if drop {
                if entry.isVideo { droppedVideoFrames += 1 } else { droppedAudioPackets += 1 }
            } else {
                kept.append(entry)
            }
        }
        entries = kept
        head = 0
        bytes = entries.reduce(0) { $0 + $1.bytes }
    }
}
