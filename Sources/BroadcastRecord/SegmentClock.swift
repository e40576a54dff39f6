/// Maps capture time to file time. Every start/resume opens a segment that begins on its first
/// video frame, placed where the previous segment ended, so the file has no frozen picture or
/// silence for the time spent paused; a pause closes the segment at the end of its last frame.
struct SegmentClock {
    struct Segment: Equatable {
        /// File time, ns.
        var start: UInt64
        var end: UInt64
        var frames: Int
    }

    private(set) var segments: [Segment] = []
    /// Capture time minus file time in the open segment; nil between segments.
    private(set) var offset: UInt64?
    /// End of the closed segments, ns of file time.
    private(set) var closedEnd: UInt64 = 0
    private var open: Segment?

    /// The file time of a video frame captured at `pts` lasting `duration`.
    mutating func placeFrame(pts: UInt64, duration: UInt64) -> UInt64 {
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
    func fileTime(ofCapture pts: UInt64) -> Int64? {
        offset.map { Int64(bitPattern: pts &- $0) }
    }

    /// Closes the open segment; returns its end (file time), or nil when no frame opened one.
    mutating func close() -> UInt64? {
        guard let segment = open else { return nil }
        segments.append(segment)
        closedEnd = segment.end
        open = nil
        offset = nil
        return segment.end
    }

    /// File time covered so far, the open segment included.
    var duration: UInt64 { open?.end ?? closedEnd }
}
