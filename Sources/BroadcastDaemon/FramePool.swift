import BroadcastCore
import BroadcastSystem

/// The bounded pool of shared-memory frame slots (one memfd). A slot is free, or held by the handler
/// it was delivered to until that handler releases it (once per delivery: a repeated frame is the
/// same slot delivered again). The slot holding the latest frame stays out of reach of `acquire`, so
/// the next frame can copy what did not change from it, and a repeat can point at it. When no slot is
/// free, the frame is dropped: the pool never grows.
final class FramePool {
    let id: UInt32
    let plan: FramePoolPlan
    let memory: SharedMemory
    /// What handlers get: the pool's memory, read-only and sealed in size.
    let handlerDescriptor: Descriptor
    /// For each slot, how many deliveries of it the handler still holds.
    private var holds: [Int]
    private var holder: Int?
    /// The slot with the most recent frame, when there is one.
    private(set) var latest: Int?

    init(id: UInt32, plan: FramePoolPlan) throws(SystemError) {
        self.id = id
        self.plan = plan
        memory = try SharedMemory(name: "broadcastd-pool-\(id)", size: plan.poolBytes, sealed: true)
        handlerDescriptor = try memory.readOnlyDescriptor()
        holds = Array(repeating: 0, count: plan.slotCount)
    }

    /// A free slot, held once by `holder`, or nil when every slot is in use.
    func acquire(for holder: Int) -> Int? {
        guard let slot = holds.indices.first(where: { holds[$0] == 0 && $0 != latest }) else { return nil }
        hold(slot, for: holder)
        return slot
    }

    /// One more delivery of `slot` to `holder`.
    func hold(_ slot: Int, for holder: Int) {
        self.holder = holder
        holds[slot] += 1
    }

    func pointer(_ slot: Int) -> UnsafeMutableRawPointer {
        memory.base + slot * plan.slotSize
    }

    /// Makes `slot` the one holding the latest frame (nil: there is none to build on).
    func setLatest(_ slot: Int?) {
        latest = slot
    }

    /// Releases one hold on `slot` by `holder`; false when it holds none (a protocol error by the peer).
    @discardableResult
    func release(_ slot: Int, by holder: Int) -> Bool {
        guard slot >= 0 && slot < holds.count && holds[slot] > 0 && self.holder == holder else { return false }
        holds[slot] -= 1
        releases += 1
        return true
    }

    /// Releases so far, of any slot.
    private(set) var releases: UInt64 = 0

    /// Whether `holder` holds any slot.
    func holdsAny(_ holder: Int) -> Bool {
        self.holder == holder && holds.contains { $0 > 0 }
    }

    func releaseAll(heldBy holder: Int) {
        guard self.holder == holder else { return }
        for i in holds.indices { holds[i] = 0 }
    }
}
