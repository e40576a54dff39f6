/// Follows the link: the video bit rate goes down by a quarter (to no less than a quarter of the
/// target) when the send queue is over half full or had to drop, or a WebRTC receiver reports more than
/// 10 % loss (then by half the loss when that is more, as WebRTC's loss-based control does), at most
/// every 2 s; it goes back up by a tenth, to the target at most, after 5 s with the queue under a tenth
/// full and under 2 % loss. A WebRTC receiver's estimate of the link (REMB) is a ceiling besides.
public struct BitRateController: Sendable {
    public let target: Int
    public let minimum: Int
    public private(set) var current: Int
    private var lastChange: UInt64 = 0
    private var calmSince: UInt64?

    public init(target: Int) {
        self.target = target
        minimum = max(1, target / 4)
        current = target
    }

    /// Called about once a second with the queue's fill (0...1, the larger of bytes and time), whether it
    /// dropped, the loss the receiver reported (0...1) since the last call, and the video bit rate the receiver's
    /// estimate of the link leaves (kbit/s: a WebRTC receiver's REMB less the audio); returns the new bit rate
    /// when it changes. Above the estimate the rate comes down to it at once (no lower than `minimum`), and it
    /// never climbs past it.
    public mutating func update(fill: Double, dropped: Bool, loss: Double = 0, estimate: Int? = nil, now: UInt64)
        -> Int?
    {
        if let estimate, current > max(minimum, estimate), now >= lastChange + 1_000_000_000 {
            calmSince = nil
            return change(to: max(minimum, estimate), now: now)
        }
        if fill > 0.5 || dropped || loss > 0.1 {
            calmSince = nil
            guard current > minimum, now >= lastChange + 2_000_000_000 else { return nil }
            return change(to: max(minimum, min(current * 3 / 4, Int(Double(current) * (1 - loss / 2)))), now: now)
        }
        guard fill < 0.1, loss < 0.02 else {
            calmSince = nil
            return nil
        }
        let since = calmSince ?? now
        calmSince = since
        let ceiling = min(target, estimate ?? target)
        guard current < ceiling, now >= since + 5_000_000_000, now >= lastChange + 5_000_000_000 else { return nil }
        return change(to: min(ceiling, current + max(1, current / 10)), now: now)
    }

    private mutating func change(to rate: Int, now: UInt64) -> Int {
        current = rate
        lastChange = now
        return rate
    }
}
