/// What changed in a PipeWire video node's picture since broadcastd last converted a frame of it, from
/// the buffers' damage metadata, as one span of rows (frames are converted a row pair at a time).
/// Damage is added up over every buffer that arrives, converted or not: a frame skipped between two
/// deadlines still counts. A buffer that says nothing (no damage metadata, or none set) or whose picture
/// moved (a new crop region) makes the whole frame changed.
struct FrameDamage: Equatable {
    /// Everything changed; the first frame always does.
    private(set) var whole = true
    /// The rows that changed, in picture coordinates.
    private(set) var rows: Range<Int>?

    /// Adds a buffer's damage rectangles, given as rows in buffer coordinates (`y`, `height`); nil or
    /// none: the buffer does not say what changed. `pictureTop` is where the picture starts in the buffer.
    mutating func add(_ rectangles: [(y: Int, height: Int)]?, pictureTop: Int, pictureHeight: Int) {
        guard let rectangles, !rectangles.isEmpty else { return invalidate() }
        for rectangle in rectangles {
            let top = max(rectangle.y - pictureTop, 0)
            let bottom = min(rectangle.y + rectangle.height - pictureTop, pictureHeight)
            guard top < bottom else { continue }
            rows = rows.map { min($0.lowerBound, top)..<max($0.upperBound, bottom) } ?? top..<bottom
        }
    }

    mutating func invalidate() { whole = true }

    /// The rows to convert in a frame of `height` (even) rows, widened to even bounds; empty when nothing changed.
    func changedRows(height: Int) -> Range<Int> {
        if whole { return 0..<height }
        guard let rows else { return 0..<0 }
        let top = min(rows.lowerBound & ~1, height)
        let bottom = min((rows.upperBound + 1) & ~1, height)
        return top..<max(top, bottom)
    }

    /// After a conversion: nothing has changed since.
    mutating func reset() { (whole, rows) = (false, nil) }
}
