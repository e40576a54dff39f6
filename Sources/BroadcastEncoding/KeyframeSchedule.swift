/// When a video encoder makes a keyframe: on the frame nearest each multiple of the keyframe interval of stream time
/// (the first at or after `slack` before it), whatever the screen did meanwhile. Counting encoded frames is no clock
/// when repeated frames are not encoded (a still screen made one keyframe in minutes); this is. Nearest, with half a
/// frame of slack, because repeats are stamped at their deadlines, which lie a grab's latency before the marks when
/// the first frame (time 0) was grabbed; none where a segmenter (HLS) cuts at the first keyframe at or after each
/// multiple of its segment duration. Keyframes made between (one a destination asked for) do not move the marks, so
/// that such a segmenter cuts every segment on time.
public struct KeyframeSchedule: Equatable, Sendable {
    /// In the encoder's time base.
    public let interval: Int64
    /// How far before a mark a frame may be and count as on it.
    public let slack: Int64
    /// The next mark.
    public private(set) var next: Int64 = 0

    public init(interval: Int64, slack: Int64) {
        self.interval = max(1, interval)
        self.slack = min(max(0, slack), self.interval / 2)
    }

    public func isDue(at pts: Int64) -> Bool { pts >= next - slack }

    /// A keyframe is made at `pts`: the next one is due at the first mark after the one it stands for.
    public mutating func made(at pts: Int64) {
        next = (max(0, pts + slack) / interval + 1) * interval
    }
}
