import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// The camera of a capture that has one (its first broadcast's `--camera`), from its START until the capture
/// closes: the camera's source (its PipeWire node), opened without waiting (its first frame comes when it comes),
/// and a pool of its own, planned with the screen's. At each frame deadline of the screen it is asked once for what
/// is new: a frame, grabbed once into a free slot of its pool (dropped when none is free: a slow handler is never
/// waited for), its format, or that it went away. Frames are stamped by the source on CLOCK_MONOTONIC, as the
/// screen's are. A camera that went away stays lost while the capture runs; the broadcasts go on without it.
final class CameraFeed {
    let camera: CameraDescription
    let source: CaptureSource
    /// Its pool, made with the screen's (the format planned from the camera's first format), and made anew when
    /// the frames do not fit its slots.
    private(set) var pool: FramePool?
    private let poolIDs: PoolIDs
    private var plan: FramePoolPlan
    /// Pools replaced: releases of their slots are expected and ignored.
    private var retiredPools: Set<UInt32> = []
    /// The format of its frames, once the first has come.
    private(set) var format: VideoFormat?
    /// Why its frames stopped, once they did.
    private(set) var lost: String?
    private var begun = false
    private var lastPTS: UInt64 = 0

    /// What the camera did since it was last asked.
    enum Update: Equatable {
        case nothing
        /// Frames are `format` from now on; in `pool` when a new one was made for them.
        case format(VideoDescription, newPool: Bool)
        /// A new frame in `slot` of the pool, captured at `pts`.
        case frame(slot: Int, pts: UInt64)
        /// A new frame that no slot was free for: lost for every handler that takes it.
        case dropped
        case lost(String)
    }

    init(camera: CameraDescription, source: CaptureSource, plan: FramePoolPlan, poolIDs: PoolIDs) {
        self.camera = camera
        self.source = source
        self.plan = plan
        self.poolIDs = poolIDs
    }

    /// Connects to the camera at once (its first frame comes while the broadcast is set up); a camera that cannot be
    /// reached is lost from the start, and said so when its handlers connect.
    func connect() {
        do { _ = try source.open() } catch {
            if !error.pending { lost = "the camera \(camera.name) cannot be captured: \(error.reason)" }
        }
    }

    /// The pool for the broadcasts' handlers: made with the screen's, when the first is launched.
    @discardableResult
    func makePool() throws(BroadcastError) -> FramePool {
        if let pool { return pool }
        let made = try poolIDs.pool(plan, for: "the camera's pool")
        pool = made
        return made
    }

    /// The slots used follow the broadcasts sharing the capture, as the screen's do.
    func share(with broadcasts: Int) {
        guard let planned = try? plan.changing(broadcasts: broadcasts) else { return }
        plan = planned
        pool?.use(planned)
    }

    /// What the camera has new at `now`: its first frame's format (after which frames come), a frame, or that it
    /// went away. `takers` is whether any handler would get a frame (none: nothing is grabbed).
    func update(now: UInt64, takers: Bool) -> Update {
        guard lost == nil, let pool else { return .nothing }
        guard format != nil else {
            do {
                let opened = try source.open()
                try source.begin(at: now)
                begun = true
                return adopt(opened, pool: pool)
            } catch {
                return error.pending ? .nothing : loseIt(error.reason)
            }
        }
        let change: FrameChange
        do { change = try source.checkForChanges() } catch { return loseIt(error.reason) }
        switch change {
        case .unchanged:
            return .nothing
        case .resized(let new):
            return adopt(new, pool: pool)
        case .changed:
            guard takers else { return .nothing }
            guard let slot = pool.acquire() else { return .dropped }
            let captured: UInt64
            do {
                captured = try source.captureFrame(index: 0, deadline: now, into: pool.pointer(slot), previous: nil)
            } catch {
                return error.transient ? .nothing : loseIt(error.reason)
            }
            let pts = max(captured, lastPTS + 1)
            lastPTS = pts
            return .frame(slot: slot, pts: pts)
        }
    }

    /// Frames of `new` from now on: in a new pool when the slots are too small for them.
    private func adopt(_ new: VideoFormat, pool: FramePool) -> Update {
        format = new
        let description = VideoDescription(new, colorRange: source.colorRange.rawValue)
        guard new.frameByteCount <= pool.slotSize else {
            retiredPools.insert(pool.id)
            self.pool = nil
            plan = FramePoolPlan(
                format: new, broadcasts: plan.broadcasts, parts: [], budgetBytes: plan.budgetBytes, enforced: false)
            do { try makePool() } catch { return loseIt(error.message) }
            return .format(description, newPool: true)
        }
        return .format(description, newPool: false)
    }

    private func loseIt(_ reason: String) -> Update {
        let why = "the camera \(camera.name) went away: \(reason)"
        lost = why
        close()
        return .lost(why)
    }

    /// A handler gave back `slot` of pool `id`; false when that is not one of the camera's pools or it did not hold
    /// it. Releases of a replaced pool are ignored.
    func release(pool id: UInt32, slot: Int, by holder: Int) -> Bool? {
        if retiredPools.contains(id) { return true }
        guard let pool, pool.id == id else { return nil }
        return pool.release(slot, by: holder)
    }

    func releaseAll(heldBy holder: Int) {
        pool?.releaseAll(heldBy: holder)
    }

    /// Whether `id` is (or was) the camera's pool.
    func owns(pool id: UInt32) -> Bool { pool?.id == id || retiredPools.contains(id) }

    /// The CAMERA_FORMAT a handler gets now: the format, or why the camera is lost; nil before its first frame.
    var notice: CameraFormatNotice? {
        if let lost { return CameraFormatNotice(camera: camera.title, lost: lost) }
        return format.map {
            CameraFormatNotice(
                camera: camera.title, video: VideoDescription($0, colorRange: source.colorRange.rawValue))
        }
    }

    func close() {
        if begun { source.end() }
        begun = false
        source.close()
    }
}
