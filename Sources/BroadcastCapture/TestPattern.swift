import BroadcastCore

/// Draws the synthetic source's picture: eight colour bars scrolling left by 8 pixels a frame,
/// with the frame number in large digits at the top left. Rows are copied from a prepared
/// double-width row, so a 1080p frame costs little more than a memcpy.
struct TestPattern {
    static let scrollPixelsPerFrame = 8
    static let bars: [(r: Double, g: Double, b: Double)] = [
        (1, 1, 1), (1, 1, 0), (0, 1, 1), (0, 1, 0), (1, 0, 1), (1, 0, 0), (0, 0, 1), (0, 0, 0),
    ]

    let format: VideoFormat
    let planes: [Plane]
    /// Per plane: one row of bars, twice over, so any scroll offset reads a whole row.
    private let rows: [[UInt8]]
    /// Per plane: the bytes of a row that carry pixels (without stride padding).
    private let rowBytes: [Int]

    init(format: VideoFormat) {
        self.format = format
        planes = format.planes
        var rows: [[UInt8]] = []
        var rowBytes: [Int] = []
        for plane in planes.indices {
            let pixels = Self.planePixels(format, plane)
            let bytes = pixels.count
            rowBytes.append(bytes)
            rows.append(pixels + pixels)
        }
        self.rows = rows
        self.rowBytes = rowBytes
    }

    /// Bytes of one pattern row of `plane`.
    private static func planePixels(_ format: VideoFormat, _ plane: Int) -> [UInt8] {
        let w = format.width
        func bar(_ x: Int) -> (r: Double, g: Double, b: Double) { bars[x * bars.count / w] }
        switch (format.pixelFormat, plane) {
        case (.bgrx, _):
            return (0..<w).flatMap { x -> [UInt8] in
                let c = bar(x)
                return [UInt8(c.b * 255), UInt8(c.g * 255), UInt8(c.r * 255), 255]
            }
        case (_, 0):
            return (0..<w).map { yuv(bar($0)).y }
        case (.nv12, _):
            return stride(from: 0, to: w, by: 2).flatMap { x -> [UInt8] in
                let c = yuv(bar(x))
                return [c.u, c.v]
            }
        default:
            return stride(from: 0, to: w, by: 2).map { plane == 1 ? yuv(bar($0)).u : yuv(bar($0)).v }
        }
    }

    /// BT.709, limited range.
    static func yuv(_ c: (r: Double, g: Double, b: Double)) -> (y: UInt8, u: UInt8, v: UInt8) {
        let y = 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b
        let u = (c.b - y) / 1.8556
        let v = (c.r - y) / 1.5748
        return (UInt8((16 + 219 * y).rounded()), UInt8((128 + 224 * u).rounded()), UInt8((128 + 224 * v).rounded()))
    }

    func render(index: UInt64, into slot: UnsafeMutableRawPointer) {
        let shift = Int(index % UInt64(format.width / Self.scrollPixelsPerFrame)) * Self.scrollPixelsPerFrame
        for (p, plane) in planes.enumerated() {
            let offset = shift * rowBytes[p] / format.width
            rows[p].withUnsafeBytes { row in
                let source = row.baseAddress! + offset
                var destination = slot + plane.offset
                for _ in 0..<plane.height {
                    destination.copyMemory(from: source, byteCount: rowBytes[p])
                    destination += plane.stride
                }
            }
        }
        drawNumber(index, into: slot)
    }

    /// The sync-mark flash: the whole frame white (Y=235, U=V=128; BGRx 255), the frame number still drawn in.
    func renderWhite(index: UInt64, into slot: UnsafeMutableRawPointer) {
        fill(x: 0, y: 0, width: format.width, height: format.height, color: (1, 1, 1), slot)
        drawNumber(index, into: slot)
    }

    // MARK: - Frame number

    /// 3x5 bitmaps of the digits, one row of three bits per entry.
    private static let font: [[UInt8]] = [
        [7, 5, 5, 5, 7], [2, 6, 2, 2, 7], [7, 1, 7, 4, 7], [7, 1, 7, 1, 7], [5, 5, 7, 1, 1],
        [7, 4, 7, 1, 7], [7, 4, 7, 5, 7], [7, 1, 1, 1, 1], [7, 5, 7, 5, 7], [7, 5, 7, 1, 7],
    ]

    private func drawNumber(_ index: UInt64, into slot: UnsafeMutableRawPointer) {
        let digits = Array(String(index).utf8).map { Int($0 - 48) }
        let scale = max(2, format.height / 60) & ~1
        let margin = scale * 2
        let boxWidth = min(format.width - margin, (digits.count * 4 + 1) * scale) & ~1
        let boxHeight = min(format.height - margin, 7 * scale) & ~1
        fill(x: margin, y: margin, width: boxWidth, height: boxHeight, color: (0, 0, 0), slot)
        for (i, digit) in digits.enumerated() {
            for (row, bits) in Self.font[digit].enumerated() {
                for column in 0..<3 where bits & (4 >> column) != 0 {
                    let x = margin + (1 + i * 4 + column) * scale
                    let y = margin + (1 + row) * scale
                    if x + scale <= margin + boxWidth && y + scale <= margin + boxHeight {
                        fill(x: x, y: y, width: scale, height: scale, color: (1, 1, 1), slot)
                    }
                }
            }
        }
    }

    /// Fills a rectangle (even position and size) with one colour, in every plane.
    private func fill(
        x: Int, y: Int, width: Int, height: Int, color: (r: Double, g: Double, b: Double),
        _ slot: UnsafeMutableRawPointer
    ) {
        let c = Self.yuv(color)
        switch format.pixelFormat {
        case .bgrx:
            let pixel: [UInt8] = [UInt8(color.b * 255), UInt8(color.g * 255), UInt8(color.r * 255), 255]
            fillPlane(planes[0], x: x * 4, y: y, width: width * 4, height: height, pattern: pixel, slot)
        case .nv12:
            fillPlane(planes[0], x: x, y: y, width: width, height: height, pattern: [c.y], slot)
            fillPlane(planes[1], x: x, y: y / 2, width: width, height: height / 2, pattern: [c.u, c.v], slot)
        case .i420:
            fillPlane(planes[0], x: x, y: y, width: width, height: height, pattern: [c.y], slot)
            fillPlane(planes[1], x: x / 2, y: y / 2, width: width / 2, height: height / 2, pattern: [c.u], slot)
            fillPlane(planes[2], x: x / 2, y: y / 2, width: width / 2, height: height / 2, pattern: [c.v], slot)
        }
    }

    private func fillPlane(
        _ plane: Plane, x: Int, y: Int, width: Int, height: Int, pattern: [UInt8], _ slot: UnsafeMutableRawPointer
    ) {
        let row = (0..<width).map { pattern[$0 % pattern.count] }
        row.withUnsafeBytes { source in
            for line in y..<(y + height) {
                (slot + plane.offset + line * plane.stride + x).copyMemory(from: source.baseAddress!, byteCount: width)
            }
        }
    }
}
