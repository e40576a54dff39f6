import BroadcastCore

/// What the inspect handler learns about one sample stream.
public struct StreamStatistics: Codable, Equatable, Sendable {
    public struct Gap: Codable, Equatable, Sendable {
        /// Presentation time of the sample after the gap, ns.
        public var pts: UInt64
        /// Time missing between the end of the previous sample and this one, seconds.
        public var seconds: Double
        /// Whether the sample after the gap carried the discontinuity flag (as it must after a pause or drops).
        public var discontinuity: Bool
    }

    public var count: UInt64 = 0
    public var firstPts: UInt64?
    public var lastPts: UInt64?
    /// Samples whose pts was not after the previous one's.
    public var nonMonotonic: UInt64 = 0
    /// Sequence numbers skipped: samples the daemon produced but dropped before delivery.
    public var sequenceGaps: UInt64 = 0
    public var discontinuities: UInt64 = 0
    /// Holes in the timeline longer than half a sample.
    public var gaps: [Gap] = []
    /// FNV-1a over the sample data, chained in delivery order, as hex.
    public var checksum = "cbf29ce484222325"
    /// Delivery latency: monotonic time at the callback minus the sample's pts, microseconds.
    public var latencyMicroseconds: Percentiles?

    public struct Percentiles: Codable, Equatable, Sendable {
        public var p50: Double
        public var p99: Double
        public var max: Double
    }

    private var previousEnd: UInt64?
    private var previousSequence: UInt64?
    private var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    private var latencies: [UInt32] = []

    enum CodingKeys: String, CodingKey {
        case count, firstPts, lastPts, nonMonotonic, sequenceGaps, discontinuities, gaps, checksum, latencyMicroseconds
    }

    public init() {}

    public mutating func record(timing: SampleTiming, data: UnsafeRawBufferPointer, receivedAt now: UInt64) {
        count += 1
        if firstPts == nil { firstPts = timing.presentationTime }
        if let last = lastPts, timing.presentationTime <= last { nonMonotonic += 1 }
        if let previousSequence, timing.sequence > previousSequence + 1 {
            sequenceGaps += timing.sequence - previousSequence - 1
        }
        if timing.discontinuity { discontinuities += 1 }
        if let previousEnd, timing.presentationTime > previousEnd + timing.duration / 2 {
            gaps.append(
                Gap(
                    pts: timing.presentationTime, seconds: Double(timing.presentationTime - previousEnd) / 1e9,
                    discontinuity: timing.discontinuity))
        }
        lastPts = timing.presentationTime
        previousEnd = timing.presentationTime + timing.duration
        previousSequence = timing.sequence
        hash = Self.fnv1a(data, seed: hash)
        if latencies.count < 1 << 20 {
            latencies.append(
                UInt32(clamping: now > timing.presentationTime ? (now - timing.presentationTime) / 1000 : 0))
        }
    }

    /// Fills in the figures computed at the end.
    public mutating func finish() {
        checksum = String(hash, radix: 16)
        guard !latencies.isEmpty else { return }
        let sorted = latencies.sorted()
        func at(_ q: Double) -> Double { Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]) }
        latencyMicroseconds = Percentiles(p50: at(0.5), p99: at(0.99), max: Double(sorted.last!))
    }

    /// FNV-1a over 64-bit words (and the tail bytes): fast enough for 1080p at 60 fps.
    static func fnv1a(_ data: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        var h = seed
        let prime: UInt64 = 0x100_0000_01b3
        let words = data.count / 8
        for i in 0..<words {
            h = (h ^ data.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)) &* prime
        }
        for i in (words * 8)..<data.count {
            h = (h ^ UInt64(data[i])) &* prime
        }
        return h
    }
}
