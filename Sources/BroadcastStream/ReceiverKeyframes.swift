/// A WebRTC receiver's keyframe requests (PLI, FIR), served at most one per `spacing`: on a lossy link a receiver's
/// depayloader asks on every loss (78 times in one run at a third of the packets lost), and a keyframe for each would
/// spend the bit rate on keyframes and lose more. A request within the spacing of the last one served is kept and
/// served once the spacing has passed; a first request, or one after a quiet spell, is served at the next frame.
struct ReceiverKeyframes {
    /// 500 ms: a viewer joining, or a loss after a quiet spell, still gets its keyframe within one frame.
    static let spacing: UInt64 = 500_000_000
    private var asked = false
    private var lastServed: UInt64?

    mutating func ask() { asked = true }

    /// Whether the next frame is to be a keyframe for the receivers at `now` (monotonic ns); serves the request.
    mutating func take(now: UInt64) -> Bool {
        guard asked else { return false }
        if let lastServed, now &- lastServed < Self.spacing { return false }
        asked = false
        lastServed = now
        return true
    }
}
