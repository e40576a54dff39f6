/// Maps capture time to file time. Every start/resume opens a segment that begins on its first
/// video frame, placed where the previous segment ended, so the file has no frozen picture or
/// silence for the time spent paused; a pause closes the segment at the end of its last frame.
public struct SegmentClock {
    public struct Segment: Equatable, Sendable {
        /// File time, ns.
        public var start: UInt64
        public var end: UInt64
        public var frames: Int

        public init(start: UInt64, end: UInt64, frames: Int) {
            (self.start, self.end, self.frames) = (start, end, frames)
        }
    }

    public private(set) var segments: [Segment] = []

    public init() {}
    /// Capture time minus file time in the open segment; nil between segments.
    public private(set) var offset: UInt64?
    /// End of the closed segments, ns of file time.
    private(set) var closedEnd: UInt64 = 0
    private var open: Segment?

    /// The file time of a video frame captured at `pts` lasting `duration`.
    public mutating func placeFrame(pts: UInt64, duration: UInt64) -> UInt64 {
        if offset == nil {
            offset = pts &- closedEnd
            open = Segment(start: closedEnd, end: closedEnd, frames: 0)
        }
        let time = pts - offset!
        open!.end = max(open!.end, time + duration)
        open!.frames += 1
        return time
    }

    /// The file time of audio captured at `pts` (negative: before the file starts); nil until the
    /// segment's first frame.
    public func fileTime(ofCapture pts: UInt64) -> Int64? {
        offset.map { Int64(bitPattern: pts &- $0) }
    }

    /// Closes the open segment; returns its end (file time), or nil when no frame opened one.
    public mutating func close() -> UInt64? {
        guard let segment = open else { return nil }
        segments.append(segment)
        closedEnd = segment.end
        open = nil
        offset = nil
        return segment.end
    }

    /// File time covered so far, the open segment included.
    public var duration: UInt64 { open?.end ?? closedEnd }
}
