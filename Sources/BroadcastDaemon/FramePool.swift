import BroadcastCore
import BroadcastSystem

/// The bounded pool of shared-memory frame slots (one memfd), shared by every handler it is announced
/// to. A slot is free, or held by the handlers it was delivered to, each until it releases it (once per
/// delivery: a repeated frame is the same slot delivered again); it is reused only once every holder has
/// released it. The slot holding the latest frame stays out of reach of `acquire`, so the next frame can
/// copy what did not change from it, and a repeat can point at it. When no slot is free, the frame is
/// dropped: the pool never grows beyond its plan. A holder past its `quota` gets a new frame only while the
/// pool has slots to spare for the others (`LiveCapture`), so that one that keeps its slots loses frames of its
/// own and never starves the others, while a merely bursty one can use what nobody needs.
///
/// The memfd has room for the most slots a plan may use (`FramePoolPlan.maximumSlots`), but a slot costs memory
/// only once a frame is written into it, and only the plan's `slotCount` are used: more as broadcasts join.
final class FramePool {
    let id: UInt32
    let slotSize: Int
    /// Slots in use: the plan's.
    private(set) var slotCount: Int
    let memory: SharedMemory
    /// What handlers get: the pool's memory, read-only and sealed in size.
    let handlerDescriptor: Descriptor
    /// For each slot, how many deliveries of it each holder still holds.
    private var holds: [[Int: Int]]
    /// The slot with the most recent frame, when there is one.
    private(set) var latest: Int?
    /// Releases so far, of any slot, by each holder.
    private(set) var releases: [Int: UInt64] = [:]

    init(id: UInt32, plan: FramePoolPlan) throws(SystemError) {
        self.id = id
        slotSize = plan.slotSize
        slotCount = plan.slotCount
        memory = try SharedMemory(name: "broadcastd-pool-\(id)", size: plan.capacityBytes, sealed: true)
        handlerDescriptor = try memory.readOnlyDescriptor()
        holds = Array(repeating: [:], count: FramePoolPlan.maximumSlots)
    }

    /// Every slot the memory has room for, used or not (POOL's `slots`).
    var capacity: Int { holds.count }

    /// Uses `plan`'s number of slots from now on (the slots given up are used again only when it grows).
    func use(_ plan: FramePoolPlan) {
        slotCount = min(plan.slotCount, holds.count)
    }

    /// Most slots one holder may hold when `holders` share the pool: a lone holder all but the one being
    /// filled; several, all but that one and the latest, shared out evenly (one at least).
    func quota(holders: Int) -> Int {
        holders <= 1 ? slotCount - 1 : max(1, (slotCount - 2) / holders)
    }

    /// Slots in use held by nobody, the latest excepted.
    var freeSlots: Int { (0..<slotCount).count { holds[$0].isEmpty && $0 != latest } }

    /// A free slot in use (held by nobody, not the latest), or nil when every one is taken.
    func acquire() -> Int? {
        (0..<slotCount).first { holds[$0].isEmpty && $0 != latest }
    }

    /// Whether `slot` is held by nobody (a slot acquired and then not delivered to anyone goes back by itself).
    func isFree(_ slot: Int) -> Bool { holds[slot].isEmpty }

    /// One more delivery of `slot` to `holder`.
    func hold(_ slot: Int, for holder: Int) {
        holds[slot][holder, default: 0] += 1
    }

    /// Slots `holder` holds at least one delivery of.
    func heldSlots(_ holder: Int) -> Int {
        holds.reduce(0) { $0 + ($1[holder] == nil ? 0 : 1) }
    }

    func pointer(_ slot: Int) -> UnsafeMutableRawPointer {
        memory.base + slot * slotSize
    }

    /// Makes `slot` the one holding the latest frame (nil: there is none to build on).
    func setLatest(_ slot: Int?) {
        latest = slot
    }

    /// Releases one hold on `slot` by `holder`; false when it holds none (a protocol error by the peer).
    @discardableResult
    func release(_ slot: Int, by holder: Int) -> Bool {
        guard slot >= 0 && slot < holds.count, let count = holds[slot][holder] else { return false }
        holds[slot][holder] = count > 1 ? count - 1 : nil
        releases[holder, default: 0] += 1
        return true
    }

    /// Whether `holder` holds any slot.
    func holdsAny(_ holder: Int) -> Bool {
        holds.contains { $0[holder] != nil }
    }

    func releaseAll(heldBy holder: Int) {
        for i in holds.indices { holds[i][holder] = nil }
    }
}
