import BroadcastCore
import BroadcastProtocol

/// One broadcast's account of its three streams: the sequence numbers taken, what was delivered, dropped
/// (and why), repeated, which stream's next sample carries the discontinuity flag, and where each
/// stream's delivered samples end during the current live stretch.
struct StreamLedger {
    private(set) var counters: [SampleType: StreamCounters] = [:]
    private var sequences: [SampleType: UInt64] = [:]
    private var discontinuous = Set(SampleType.allCases)
    /// Where each stream's delivered samples end (pts + duration of the last one), this live stretch.
    private(set) var deliveredUntil: [SampleType: UInt64] = [:]

    /// The next sequence number of `type`.
    mutating func takeSequence(_ type: SampleType) -> UInt64 {
        let n = sequences[type, default: 0]
        sequences[type] = n + 1
        return n
    }

    /// Samples that never got as far as a sequence number (no slot, no handler, a deadline missed):
    /// their numbers are skipped, they count as dropped, and the next sample is discontinuous.
    mutating func skip(_ type: SampleType, count: UInt64 = 1, late: Bool = false) {
        sequences[type, default: 0] += count
        dropTaken(type, count: count)
        if late { counters[type, default: StreamCounters()].late = (counters[type]?.late ?? 0) + count }
    }

    /// A sample that had its sequence number but could not be queued.
    mutating func dropTaken(_ type: SampleType, count: UInt64 = 1) {
        counters[type, default: StreamCounters()].dropped += count
        discontinuous.insert(type)
    }

    mutating func delivered(_ type: SampleType, until end: UInt64) {
        counters[type, default: StreamCounters()].delivered += 1
        deliveredUntil[type] = end
        discontinuous.remove(type)
    }

    /// An audio chunk taken for the handler (delivered or not): how far its stream has come.
    mutating func reached(_ type: SampleType, until end: UInt64) {
        deliveredUntil[type] = end
    }

    mutating func repeated() {
        counters[.video, default: StreamCounters()].repeated += 1
    }

    func isDiscontinuous(_ type: SampleType) -> Bool { discontinuous.contains(type) }

    mutating func markDiscontinuous(_ type: SampleType) { discontinuous.insert(type) }

    /// A live stretch begins: every stream's next sample is discontinuous, nothing is delivered yet.
    mutating func beginStretch() {
        discontinuous = Set(SampleType.allCases)
        deliveredUntil = [:]
    }

    /// The counters as status and SERVICE_INFO carry them, every stream present.
    var streams: [String: StreamCounters] {
        // The camera's only for a broadcast that takes it.
        let types = SampleType.allCases.filter { $0 != .videoCamera || counters[$0] != nil }
        return Dictionary(uniqueKeysWithValues: types.map { ($0.description, counters[$0] ?? StreamCounters()) })
    }
}
