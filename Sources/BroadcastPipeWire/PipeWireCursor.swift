import BroadcastCapture
import CPipeWire

/// The pointer as a video node's cursor metadata (SPA_META_Cursor) describes it, followed buffer after
/// buffer, in picture coordinates. A buffer may move the pointer, bring its image (new, or the same one
/// again), say it has no image (it is invisible), or say it is not over the stream (cursor id 0, as
/// mutter does when it leaves the shared monitor or window). The image comes premultiplied, as mutter
/// and KWin send it, in one of the 32-bit RGB orders; the sprite keeps its serial while it stays the same.
struct PipeWireCursor {
    /// A buffer's new image, as its metadata lays it out.
    struct Image {
        /// An SPA_VIDEO_FORMAT_* (RGBA, BGRA, ARGB, ABGR or their x variants).
        var format: UInt32
        var width: Int
        var height: Int
        var stride: Int
        var hotspotX: Int
        var hotspotY: Int
        /// nil, or a size of zero: the pointer has no image.
        var pixels: UnsafeRawPointer?
    }

    /// Nil until the first buffer that has cursor metadata.
    private(set) var state: CursorState?
    private var imageless = false

    /// The buffer says the pointer is not over the stream.
    mutating func away() {
        state = CursorState(x: state?.x ?? 0, y: state?.y ?? 0, visible: false, sprite: state?.sprite)
    }

    /// The buffer puts the hotspot at `x`,`y` in buffer coordinates, with a new image or not; the picture
    /// is `picture` within the buffer (its crop region, or the whole buffer).
    mutating func move(x: Int32, y: Int32, image: Image?, picture: (x: Int, y: Int, width: Int, height: Int)) {
        var sprite = state?.sprite
        if let image {
            imageless = image.pixels == nil || image.width == 0 || image.height == 0
            if !imageless, let pixels = Self.premultipliedARGB(image),
                sprite.map({
                    $0.width != image.width || $0.height != image.height || $0.hotspotX != image.hotspotX
                        || $0.hotspotY != image.hotspotY || $0.pixels != pixels
                }) ?? true
            {
                sprite = CursorSprite(
                    width: image.width, height: image.height, hotspotX: image.hotspotX, hotspotY: image.hotspotY,
                    pixels: pixels, serial: (sprite?.serial ?? 0) &+ 1)
            }
        }
        let px = Int(x) - picture.x
        let py = Int(y) - picture.y
        let inside = px >= 0 && py >= 0 && px < picture.width && py < picture.height
        state = CursorState(
            x: Int32(clamping: px), y: Int32(clamping: py), visible: inside && !imageless, sprite: sprite)
    }

    /// The image as premultiplied ARGB values (0xAARRGGBB, as CURSOR carries them); nil for a format not
    /// of 32-bit RGB.
    static func premultipliedARGB(_ image: Image) -> [UInt32]? {
        guard let base = image.pixels else { return nil }
        // Where red, green, blue and alpha lie among each pixel's four bytes; no alpha: opaque.
        let order: (r: Int, g: Int, b: Int, a: Int?)
        switch image.format {
        case SPA_VIDEO_FORMAT_RGBA.rawValue: order = (0, 1, 2, 3)
        case SPA_VIDEO_FORMAT_RGBx.rawValue: order = (0, 1, 2, nil)
        case SPA_VIDEO_FORMAT_BGRA.rawValue: order = (2, 1, 0, 3)
        case SPA_VIDEO_FORMAT_BGRx.rawValue: order = (2, 1, 0, nil)
        case SPA_VIDEO_FORMAT_ARGB.rawValue: order = (1, 2, 3, 0)
        case SPA_VIDEO_FORMAT_xRGB.rawValue: order = (1, 2, 3, nil)
        case SPA_VIDEO_FORMAT_ABGR.rawValue: order = (3, 2, 1, 0)
        case SPA_VIDEO_FORMAT_xBGR.rawValue: order = (3, 2, 1, nil)
        default: return nil
        }
        var pixels = [UInt32]()
        pixels.reserveCapacity(image.width * image.height)
        for y in 0..<image.height {
            let row = (base + y * image.stride).assumingMemoryBound(to: UInt8.self)
            for x in 0..<image.width {
                let p = row + x * 4
                let alpha = order.a.map { UInt32(p[$0]) } ?? 255
                pixels.append(alpha << 24 | UInt32(p[order.r]) << 16 | UInt32(p[order.g]) << 8 | UInt32(p[order.b]))
            }
        }
        return pixels
    }
}
