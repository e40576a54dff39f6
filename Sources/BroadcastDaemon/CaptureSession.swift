import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// The capture source while any broadcast is requested: opened once for all of them (one portal grant,
/// one X connection), with the frame pool they share from the first handler's launch on, and closed when
/// the last one finishes. `live` is the capture itself, while any broadcast is live.
final class CaptureSession {
    let source: CaptureSource
    /// What the capture costs in memory, with the pool's slots for the broadcasts sharing it.
    private(set) var plan: FramePoolPlan
    private(set) var pool: FramePool?
    /// Where the pools' ids come from: they count up over the daemon's life (docs/protocol.md, POOL).
    private let poolIDs: PoolIDs
    /// Pools replaced after a resize: releases of their slots are expected and ignored.
    private var retiredPools: Set<UInt32> = []
    /// Told when the capture starts and stops.
    private let indicator: (any CaptureIndicator)?
    private let wakes: WakeRegistry
    /// Frames and audio flowing, while any broadcast is live (or a paused one waits for its audio).
    private(set) var live: LiveCapture?
    /// When the frame in the pool's latest slot was captured.
    private(set) var latestFramePTS: UInt64 = 0
    /// Frame deadlines since the session began, missed ones included.
    private(set) var frameCount: UInt64 = 0
    /// The camera the first broadcast of the capture chose (its `--camera`), with its own pool.
    let cameraFeed: CameraFeed?
    var camera: CameraDescription? { cameraFeed?.camera }

    enum Opened {
        case planned(FramePoolPlan)
        /// The source waits, for the user or its first frame (`openAnswered` becomes readable when it is worth
        /// asking again): why.
        case waiting(String)
    }

    init(
        source: CaptureSource, plan: FramePoolPlan, poolIDs: PoolIDs, wakes: WakeRegistry,
        indicator: (any CaptureIndicator)? = nil, camera: (CameraDescription, CaptureSource)? = nil
    ) {
        self.source = source
        cameraFeed = camera.flatMap { camera, source in
            plan.cameraPool.map { CameraFeed(camera: camera, source: source, plan: $0, poolIDs: poolIDs) }
        }
        self.plan = plan
        self.poolIDs = poolIDs
        self.wakes = wakes
        self.indicator = indicator
    }

    /// Opens `source` and plans the memory for its frames; the source is left closed when either fails.
    /// `waiting`: waits here while the source waits for its first frame (where no START can be kept pending).
    static func open(
        _ source: CaptureSource, budget: MemoryBudget, waiting: Bool = false, camera: CameraDescription? = nil
    ) -> Result<
        Opened, BroadcastError
    > {
        let format: VideoFormat
        do { format = waiting ? try openWaiting(source) : try source.open() } catch {
            return error.pending
                ? .success(.waiting(error.reason)) : .failure(BroadcastError(.captureFailed, error.description))
        }
        do {
            return .success(
                .planned(
                    try FramePoolPlan.plan(
                        format: format, parts: parts(of: source), budgetBytes: budget.bytes,
                        enforced: budget.enforced, camera: camera.map { cost(of: $0, as: format.pixelFormat) })))
        } catch {
            source.close()
            return .failure(error)
        }
    }

    /// What the daemon has besides the pool with `source` open: itself, measured now (everything resident but the
    /// source's shared buffers, which may be resident in part), those buffers at their full size, and what a live
    /// broadcast adds.
    static func parts(of source: CaptureSource) -> [FramePoolPlan.Part] {
        let shared = source.sharedMemory
        let itself =
            (ProcessMemory.residentBytes() ?? FramePoolPlan.daemonOverhead)
            - ProcessMemory.residentBytes(in: shared.flatMap(\.regions))
        return [FramePoolPlan.Part("broadcastd itself", itself)] + shared.map { FramePoolPlan.Part($0.name, $0.bytes) }
            + [FramePoolPlan.Part("what a live broadcast adds", FramePoolPlan.liveReserve + source.liveGrowth)]
    }

    /// What `camera` is planned to cost, from the format PipeWire is asked for first (`expectedFormat`), delivered
    /// in the screen's pixel format; 1280x720 of 32-bit pixels when it lists none. A camera whose frames turn out
    /// larger gets a larger pool when they come; the plan follows what it sends (`cameraStarted`).
    static func cost(of camera: CameraDescription, as pixelFormat: PixelFormat) -> FramePoolPlan.CameraCost {
        let first = camera.expectedFormat(delivering: pixelFormat)
        return FramePoolPlan.CameraCost(
            width: (first?.width ?? 1280) & ~1, height: (first?.height ?? 720) & ~1, pixelFormat: pixelFormat,
            bytesPerPixel: first?.bytesPerPixel ?? 4,
            converting: first?.pixelFormat != CameraFormat.preference(delivering: pixelFormat)[0])
    }

    /// `source.open()`, waiting here (blocking) while the source waits for its first frame: for a snapshot while
    /// idle. A source that asks the user still throws its pending error.
    static func openWaiting(_ source: CaptureSource) throws(CaptureError) -> VideoFormat {
        while true {
            do { return try source.open() } catch {
                guard error.pending, !source.choosesScreenAtStart, let ready = source.openAnswered else { throw error }
                let now = MonotonicClock.now()
                let due = source.openRetryAt ?? now + 100_000_000
                _ = try? Poller.wait(
                    [(ready.raw, .readable)], timeoutMilliseconds: due > now ? Int32((due - now) / 1_000_000 + 1) : 0)
            }
        }
    }

    /// The plan for `broadcasts` sharing the capture: a slot more for each (the pool's memory has room for
    /// them); throws when an enforced budget cannot hold them, changing nothing.
    func share(with broadcasts: Int) throws(BroadcastError) {
        guard max(1, broadcasts) != plan.broadcasts else { return }
        plan = try plan.changing(broadcasts: broadcasts)
        pool?.use(plan)
        cameraFeed?.share(with: broadcasts)
    }

    /// The camera's frames came (in `format`; perhaps larger than planned, in a larger pool): the plan counts them
    /// at their size, and PipeWire's buffers as they are mapped (`mappedBytes`: two or three, of the camera's own
    /// format) rather than at the most the stream may get; 32-bit pixels when nothing is mapped. Its conversion is
    /// as planned.
    func cameraStarted(_ format: VideoFormat, mappedBytes: Int) {
        var cost = FramePoolPlan.CameraCost(width: format.width, height: format.height, pixelFormat: format.pixelFormat)
        if mappedBytes > 0 { cost.buffersBytes = mappedBytes + FramePoolPlan.CameraCost.connectionBytes }
        cost.conversionBytes = plan.camera?.conversionBytes ?? 0
        plan.camera = cost
    }

    /// The pool, made when the first handler is launched.
    @discardableResult
    func makePool() throws(BroadcastError) -> FramePool {
        if let pool { return pool }
        let made = try poolIDs.pool(plan, for: "the frame pool")
        pool = made
        try cameraFeed?.makePool()
        return made
    }

    /// A handler gave back `slot` of pool `id`: false when it did not hold it. Releases of a pool replaced after a
    /// resize are expected and ignored.
    func release(pool id: UInt32, slot: Int, by holder: Int) -> Bool {
        if retiredPools.contains(id) { return true }
        if let released = cameraFeed?.release(pool: id, slot: slot, by: holder) { return released }
        guard let pool, pool.id == id else { return false }
        return pool.release(slot, by: holder)
    }

    /// A handler is gone: every slot it held is free of it.
    func releaseAll(heldBy holder: Int) {
        pool?.releaseAll(heldBy: holder)
        cameraFeed?.releaseAll(heldBy: holder)
    }

    // MARK: - Capture

    /// A broadcast goes live: capture begins, if it is the first (the indicator is told).
    func beginLive(now: UInt64, clock: DaemonClock) throws(CaptureError) -> LiveCapture {
        if let live {
            live.resumeFrames(now: now)
            return live
        }
        let camera = cameraFeed.flatMap { $0.lost == nil ? $0.camera.title : nil }
        let begun = try LiveCapture(
            source: source, now: now, clock: clock, wakes: wakes, indicator: indicator, camera: camera)
        live = begun
        return begun
    }

    /// No broadcast is live or waiting for its audio: capture ends.
    func endLive() {
        live?.end()
        live = nil
    }

    /// The number of the frame due now, after `missed` deadlines that were never captured.
    func takeFrameIndex(missed: UInt64) -> UInt64 {
        let index = frameCount + missed
        frameCount = index + 1
        return index
    }

    /// `slot` holds the latest frame (nil: there is none to build on), captured at `pts`.
    func keepLatest(_ slot: Int?, pts: UInt64? = nil) {
        pool?.setLatest(slot)
        if let pts { latestFramePTS = pts }
    }

    /// The frame size changed: a bigger pool when the slots are too small for it (nil when the pool stays).
    /// Throws when the new size does not fit an enforced memory budget.
    func resize(to format: VideoFormat) throws(BroadcastError) -> FramePool? {
        guard let pool else { return nil }
        pool.setLatest(nil)
        guard format.frameByteCount > pool.slotSize else { return nil }
        let plan: FramePoolPlan
        do {
            plan = try self.plan.changing(format: format)
        } catch {
            throw BroadcastError(.budget, "the screen was resized: \(error.message)")
        }
        // The old pool goes first, so that the daemon never maps both; handlers drop their mapping on POOL.
        retiredPools.insert(pool.id)
        self.pool = nil
        self.plan = plan
        return try makePool()
    }

    func close() {
        endLive()
        cameraFeed?.close()
        pool = nil
        retiredPools = []
        source.close()
    }

    /// The latest frame, copied into a sealed memfd without mapping the copy; nil when there is none.
    func copyLatest(broadcast: UInt32?) -> Result<
        (description: SnapshotDescription, frame: Descriptor), BroadcastError
    >? {
        guard let pool, let latest = pool.latest else { return nil }
        let format = source.videoFormat
        let description = SnapshotDescription(
            video: VideoDescription(format), colorRange: source.colorRange.rawValue,
            presentationTime: latestFramePTS, broadcast: broadcast)
        do {
            let frame = try SharedMemory.sealedCopy(
                name: "broadcastd-snapshot",
                of: UnsafeRawBufferPointer(start: pool.pointer(latest), count: format.frameByteCount))
            return .success((description, frame))
        } catch {
            return .failure(BroadcastError(.budget, "cannot copy the frame for the snapshot: \(error)"))
        }
    }

    /// One frame grabbed now into a memfd of its own, for a snapshot while nothing is captured.
    static func grab(_ source: CaptureSource, now: UInt64) -> Result<
        (description: SnapshotDescription, frame: Descriptor), BroadcastError
    > {
        let format = source.videoFormat
        do {
            let memory = try SharedMemory(name: "broadcastd-snapshot", size: format.frameByteCount, sealed: true)
            let pts = try source.captureFrame(index: 0, deadline: now, into: memory.base, previous: nil)
            let description = SnapshotDescription(
                video: VideoDescription(format), colorRange: source.colorRange.rawValue,
                presentationTime: pts, broadcast: nil)
            return .success((description, try memory.readOnlyDescriptor()))
        } catch let error as CaptureError {
            return .failure(BroadcastError(.captureFailed, error.description))
        } catch {
            return .failure(
                BroadcastError(
                    .budget, "cannot allocate \(megabytes(format.frameByteCount)) for the snapshot: \(error)"))
        }
    }
}

/// The pools' ids, counting up over the daemon's life.
final class PoolIDs {
    private var next: UInt32 = 1

    func take() -> UInt32 {
        defer { next &+= 1 }
        return next
    }

    /// A pool of `plan` with the next id, or a budget error naming `what`.
    func pool(_ plan: FramePoolPlan, for what: String) throws(BroadcastError) -> FramePool {
        do {
            return try FramePool(id: take(), plan: plan)
        } catch {
            throw BroadcastError(.budget, "cannot allocate \(what) (\(plan)): \(error)")
        }
    }
}
