/// Sizes the shared frame pool from the daemon's memory budget.
public struct FramePoolPlan: Equatable, Sendable, CustomStringConvertible {
    /// What the daemon itself needs besides the pool: runtime, buffers, audio queues (measured RSS
    /// of an idle daemon is about 12 MB; see docs/benchmarks.md).
    public static let daemonOverhead = 14 << 20
    /// One slot being filled, one in flight to the handler, one held by the handler.
    public static let minimumSlots = 3
    /// More slots only add latency a slow handler would fill.
    public static let maximumSlots = 8

    public var slotCount: Int
    public var slotSize: Int
    public var poolBytes: Int { slotCount * slotSize }

    public var description: String {
        "\(slotCount) slots of \(megabytes(slotSize)) (\(megabytes(poolBytes)))"
    }

    /// The plan for `format` within `budgetBytes`, or an error that says what would fit.
    public static func plan(format: VideoFormat, budgetBytes: Int) throws(BroadcastError) -> FramePoolPlan {
        let slotSize = (format.frameByteCount + 4095) / 4096 * 4096
        let available = budgetBytes - daemonOverhead
        let slots = min(maximumSlots, max(0, available) / slotSize)
        if slots >= minimumSlots { return FramePoolPlan(slotCount: slots, slotSize: slotSize) }
        let needed = daemonOverhead + minimumSlots * slotSize
        // The largest 16:9 size in this pixel format that fits the given budget.
        var fit = format
        var w = format.width
        while w >= 64 {
            fit.width = w & ~15
            fit.height = (w * 9 / 16) & ~1
            if minimumSlots * fit.frameByteCount <= available { break }
            w -= 16
        }
        let alternative = w >= 64 ? " or a smaller size such as \(fit.width)x\(fit.height)" : ""
        throw BroadcastError(.budget,
            "\(format) needs \(minimumSlots) frame slots of \(megabytes(slotSize)) plus \(megabytes(daemonOverhead)) for the daemon: " +
            "\(megabytes(needed)) in all, more than the memory budget of \(megabytes(budgetBytes)); " +
            "use --memory-budget \((needed + (1 << 20) - 1) >> 20)\(alternative)")
    }
}

public func megabytes(_ bytes: Int) -> String {
    let tenths = (bytes * 10 + (1 << 19)) >> 20
    return "\(tenths / 10).\(tenths % 10) MB"
}
