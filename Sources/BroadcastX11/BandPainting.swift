import BroadcastCapture

#if canImport(Glibc)
    import Glibc
#endif

/// What the X11 source paints into a band of grabbed BGRx pixels before it is converted: the excluded windows'
/// black and the cursor.
extension X11ScreenSource {
    /// Blacks out `rect` (area coordinates, within the area) in the band of BGRx `pixels` holding `rows`.
    static func blackOut(_ rect: ScreenRect, in pixels: UnsafeMutableRawPointer, stride: Int, rows: Range<Int>) {
        let top = max(rect.y, rows.lowerBound)
        let bottom = min(rect.y + rect.height, rows.upperBound)
        guard top < bottom else { return }
        for y in top..<bottom { memset(pixels + (y - rows.lowerBound) * stride + rect.x * 4, 0, rect.width * 4) }
    }

    /// Blends `sprite` (premultiplied ARGB), placed at `rect` in area coordinates, over the band of BGRx `pixels` holding `rows`.
    static func draw(
        _ sprite: CursorSprite, at rect: ScreenRect, into pixels: UnsafeMutableRawPointer, stride: Int, rows: Range<Int>
    ) {
        let width = stride / 4
        let top = max(rect.y, rows.lowerBound)
        let bottom = min(rect.y + rect.height, rows.upperBound)
        let left = max(rect.x, 0)
        let right = min(rect.x + rect.width, width)
        guard top < bottom && left < right else { return }
        for y in top..<bottom {
            let row = (pixels + (y - rows.lowerBound) * stride).assumingMemoryBound(to: UInt32.self)
            let spriteRow = (y - rect.y) * sprite.width - rect.x
            for x in left..<right {
                let s = sprite.pixels[spriteRow + x]
                let alpha = s >> 24
                if alpha == 0 { continue }
                if alpha == 255 {
                    row[x] = s & 0x00ff_ffff
                    continue
                }
                let d = row[x]
                let inverse = 255 - alpha
                var out: UInt32 = 0
                for shift: UInt32 in [0, 8, 16] {
                    let channel = (s >> shift & 0xff) + ((d >> shift & 0xff) * inverse + 127) / 255
                    out |= min(channel, 255) << shift
                }
                row[x] = out
            }
        }
    }
}
