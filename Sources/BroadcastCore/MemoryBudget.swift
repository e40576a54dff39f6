/// Sizes the shared frame pool from the daemon's memory budget.
public struct FramePoolPlan: Equatable, Sendable, CustomStringConvertible {
    /// What the daemon itself needs besides the pool when it cannot measure itself (the daemon passes its
    /// measured resident memory plus `broadcastReserve` instead; see docs/benchmarks.md).
    public static let daemonOverhead = 14 << 20
    /// What a live broadcast adds to the resident memory of a daemon with its source open: samples queued
    /// for the handler (1 MiB), PipeWire's audio streams (their plugins, buffers and thread), MIT-SHM band
    /// buffers, the heap's growth (6.4 MB measured at 4K30 with PipeWire audio; docs/benchmarks.md).
    public static let broadcastReserve = 7 << 20
    /// Added to the budget a refusal advises, so that the advice holds although what the daemon has
    /// resident varies a little from start to start.
    static let adviceMargin = 2 << 20
    /// One slot being filled, one in flight to the handler, one held by the handler.
    public static let minimumSlots = 3
    /// Enough for eight broadcasts at once (each handler holds one slot at least, beside the one being filled
    /// and the latest); more only add latency a slow handler would fill.
    public static let maximumSlots = 10

    static let commonSizes = [(3840, 2160), (2560, 1440), (1920, 1080), (1600, 900), (1280, 720), (960, 540), (640, 360)]
        .map { (width: $0.0, height: $0.1) }

    public var slotCount: Int
    public var slotSize: Int
    public var poolBytes: Int { slotCount * slotSize }

    public var description: String {
        "\(slotCount) slots of \(megabytes(slotSize)) (\(megabytes(poolBytes)))"
    }

    /// The plan for `format` within `budgetBytes`, of which the daemon needs `daemonBytes` (everything it
    /// has resident but the pool: its binary's pages, libraries, heap, stacks) and the capture source maps
    /// `sourceBytes` of its own (PipeWire's buffers), or an error that says what would fit.
    public static func plan(format: VideoFormat, budgetBytes: Int, sourceBytes: Int = 0,
                            daemonBytes: Int = daemonOverhead) throws(BroadcastError) -> FramePoolPlan {
        let slotSize = (format.frameByteCount + 4095) / 4096 * 4096
        let overhead = daemonBytes + sourceBytes
        let available = budgetBytes - overhead
        let slots = min(maximumSlots, max(0, available) / slotSize)
        if slots >= minimumSlots { return FramePoolPlan(slotCount: slots, slotSize: slotSize) }
        let needed = overhead + minimumSlots * slotSize
        var alternatives = ["use --memory-budget \((needed + adviceMargin + (1 << 20) - 1) >> 20)"]
        func fits(_ f: VideoFormat) -> Bool { minimumSlots * f.frameByteCount <= available }
        if let size = commonSizes.first(where: { $0.width < format.width && fits(VideoFormat(width: $0.width, height: $0.height, pixelFormat: format.pixelFormat)) }) {
            alternatives.append("a smaller size such as \(size.width)x\(size.height)")
        }
        if format.pixelFormat != .nv12 && fits(VideoFormat(width: format.width, height: format.height, pixelFormat: .nv12)) {
            alternatives.append("--pixel-format nv12")
        }
        throw BroadcastError(.budget,
            "\(format) needs \(minimumSlots) frame slots of \(megabytes(slotSize)) plus \(megabytes(daemonBytes)) for the daemon" +
            (sourceBytes > 0 ? " and \(megabytes(sourceBytes)) for the source (its buffers and libraries): " : ": ") +
            "\(megabytes(needed)) in all, more than the memory budget of \(megabytes(budgetBytes)); " +
            alternatives.joined(separator: ", or "))
    }
}

public func megabytes(_ bytes: Int) -> String {
    let tenths = (bytes * 10 + (1 << 19)) >> 20
    return "\(tenths / 10).\(tenths % 10) MB"
}
