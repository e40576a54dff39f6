import BroadcastCapture
import BroadcastCore

#if canImport(Glibc)
    import Glibc
#endif

/// The frame sent instead of the screen while the session is locked (`--on-lock blank`): black, with
/// "SCREEN LOCKED" in white block letters across the middle, so that viewers see why nothing moves.
enum PrivacyFrame {
    static let text = "SCREEN LOCKED"

    /// 5x7 glyphs of the letters `text` uses, one row per byte, the leftmost pixel in bit 4.
    private static let glyphs: [Character: [UInt8]] = [
        "S": [0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E], "C": [0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E],
        "R": [0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11], "E": [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F],
        "N": [0x11, 0x19, 0x15, 0x13, 0x11, 0x11, 0x11], "L": [0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F],
        "O": [0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E], "K": [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11],
        "D": [0x1E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1E], " ": [0, 0, 0, 0, 0, 0, 0],
    ]

    /// Draws the frame into `slot`, laid out as `format.planes`.
    static func draw(_ format: VideoFormat, range: ColorRange, into slot: UnsafeMutableRawPointer) {
        let planes = format.planes
        let (black, white): (UInt8, UInt8) = range == .full ? (0, 255) : (16, 235)
        switch format.pixelFormat {
        case .bgrx:
            memset(slot, 0, planes[0].byteCount)
        case .nv12, .i420:
            memset(slot, Int32(black), planes[0].byteCount)
            for plane in planes.dropFirst() { memset(slot + plane.offset, 128, plane.byteCount) }
        }
        // Letters 6 cells wide (one of space), scaled to take about two thirds of the width.
        let columns = text.count * 6
        let scale = max(1, format.width * 2 / 3 / columns)
        let left = (format.width - columns * scale) / 2
        let top = (format.height - 7 * scale) / 2
        guard left >= 0, top >= 0 else { return }
        for (index, letter) in text.enumerated() {
            guard let rows = glyphs[letter] else { continue }
            for (row, bits) in rows.enumerated() {
                for column in 0..<5 where bits & (0x10 >> UInt8(column)) != 0 {
                    let x = left + (index * 6 + column) * scale
                    let y = top + row * scale
                    for dy in 0..<scale {
                        let line = slot + planes[0].offset + (y + dy) * planes[0].stride
                        if format.pixelFormat == .bgrx {
                            memset(line + x * 4, 0xFF, scale * 4)
                        } else {
                            memset(line + x, Int32(white), scale)
                        }
                    }
                }
            }
        }
    }
}
