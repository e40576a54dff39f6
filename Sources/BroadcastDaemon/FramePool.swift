import BroadcastCore
import BroadcastSystem

/// The bounded pool of shared-memory frame slots (one memfd). A slot is free, or held by the handler
/// it was delivered to until that handler releases it. When no slot is free, the frame is dropped:
/// the pool never grows.
final class FramePool {
    let id: UInt32
    let plan: FramePoolPlan
    let memory: SharedMemory
    /// For each slot, the session holding it, or nil when free.
    private var holders: [Int?]

    init(id: UInt32, plan: FramePoolPlan) throws(SystemError) {
        self.id = id
        self.plan = plan
        memory = try SharedMemory(name: "broadcastd-pool-\(id)", size: plan.poolBytes)
        holders = Array(repeating: nil, count: plan.slotCount)
    }

    func acquire(for holder: Int) -> Int? {
        guard let slot = holders.firstIndex(where: { $0 == nil }) else { return nil }
        holders[slot] = holder
        return slot
    }

    func pointer(_ slot: Int) -> UnsafeMutableRawPointer {
        memory.base + slot * plan.slotSize
    }

    /// Releases `slot` if `holder` holds it; false when it does not (a protocol error by the peer).
    @discardableResult
    func release(_ slot: Int, by holder: Int) -> Bool {
        guard slot >= 0 && slot < holders.count && holders[slot] == holder else { return false }
        holders[slot] = nil
        return true
    }

    func releaseAll(heldBy holder: Int) {
        for i in holders.indices where holders[i] == holder { holders[i] = nil }
    }
}
