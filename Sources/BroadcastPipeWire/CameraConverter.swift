import BroadcastCapture
import BroadcastCore
import CPipeWire
import CSwscale

/// A raw pixel format a camera may send (`CameraFormat.taken`): PipeWire's name and id for it, how its planes lie
/// in a buffer, and libswscale's name for it.
struct CameraPixels: Equatable, Sendable {
    enum Layout: Equatable, Sendable {
        /// One plane of `bytes` a pixel.
        case packed(bytes: Int)
        /// A Y plane, then one of interleaved chroma at half the width and height (NV12, NV21).
        case semiPlanar
        /// Y, then two chroma planes at half the width and height: U first, or V first (`swapped`, YV12).
        case planar(swapped: Bool)
    }
    let name: String
    let spa: UInt32
    let av: AVPixelFormat
    let layout: Layout

    /// BGRx and BGRA: the screen's own, converted by the screen's converter (with its crop region and damage).
    var isScreens: Bool { name == "BGRx" || name == "BGRA" }
    var isRGB: Bool { if case .packed(let bytes) = layout { bytes > 2 } else { false } }

    /// Every format of `CameraFormat.taken`, by PipeWire's id.
    static let all: [UInt32: CameraPixels] = Dictionary(
        uniqueKeysWithValues: [
            ("NV12", SPA_VIDEO_FORMAT_NV12, AV_PIX_FMT_NV12, Layout.semiPlanar),
            ("I420", SPA_VIDEO_FORMAT_I420, AV_PIX_FMT_YUV420P, .planar(swapped: false)),
            ("YV12", SPA_VIDEO_FORMAT_YV12, AV_PIX_FMT_YUV420P, .planar(swapped: true)),
            ("NV21", SPA_VIDEO_FORMAT_NV21, AV_PIX_FMT_NV21, .semiPlanar),
            ("YUY2", SPA_VIDEO_FORMAT_YUY2, AV_PIX_FMT_YUYV422, .packed(bytes: 2)),
            ("UYVY", SPA_VIDEO_FORMAT_UYVY, AV_PIX_FMT_UYVY422, .packed(bytes: 2)),
            ("YVYU", SPA_VIDEO_FORMAT_YVYU, AV_PIX_FMT_YVYU422, .packed(bytes: 2)),
            ("BGRx", SPA_VIDEO_FORMAT_BGRx, AV_PIX_FMT_BGR0, .packed(bytes: 4)),
            ("BGRA", SPA_VIDEO_FORMAT_BGRA, AV_PIX_FMT_BGR0, .packed(bytes: 4)),
            ("RGBx", SPA_VIDEO_FORMAT_RGBx, AV_PIX_FMT_RGB0, .packed(bytes: 4)),
            ("RGBA", SPA_VIDEO_FORMAT_RGBA, AV_PIX_FMT_RGB0, .packed(bytes: 4)),
            ("xRGB", SPA_VIDEO_FORMAT_xRGB, AV_PIX_FMT_0RGB, .packed(bytes: 4)),
            ("xBGR", SPA_VIDEO_FORMAT_xBGR, AV_PIX_FMT_0BGR, .packed(bytes: 4)),
            ("RGB", SPA_VIDEO_FORMAT_RGB, AV_PIX_FMT_RGB24, .packed(bytes: 3)),
            ("BGR", SPA_VIDEO_FORMAT_BGR, AV_PIX_FMT_BGR24, .packed(bytes: 3)),
        ].map { ($0.1.rawValue, CameraPixels(name: $0.0, spa: $0.1.rawValue, av: $0.2, layout: $0.3)) })

    static func named(_ name: String) -> CameraPixels? { all.values.first { $0.name == name } }

    /// PipeWire's ids of `names`, in their order (those it knows).
    static func ids(_ names: [String]) -> [UInt32] { names.compactMap { named($0)?.spa } }

    /// Each plane's least row length in bytes and its rows, for a `width`x`height` picture, in libswscale's order
    /// (Y, U, V).
    func extents(width: Int, height: Int) -> [(bytes: Int, rows: Int)] {
        let (even, chromaRows) = ((width + 1) & ~1, (height + 1) / 2)
        switch layout {
        case .packed(let bytes): return [((bytes == 2 ? even : width) * bytes, height)]
        case .semiPlanar: return [(width, height), (even, chromaRows)]
        case .planar: return [(width, height), (even / 2, chromaRows), (even / 2, chromaRows)]
        }
    }

    /// Where the planes of a `width`x`height` picture lie in one block whose first plane's rows are `stride` bytes,
    /// in libswscale's order: one after the other, the chroma planes' rows as long as the luma's for NV12 and half
    /// as long for I420 (as V4L2's single-planar formats have them). nil when a row does not fit its stride.
    func planes(width: Int, height: Int, stride: Int) -> [(offset: Int, stride: Int)]? {
        let extents = extents(width: width, height: height)
        let strides = extents.indices.map { $0 == 0 || layout == .semiPlanar ? stride : stride / 2 }
        guard zip(extents, strides).allSatisfy({ $0.bytes <= $1 }) else { return nil }
        var offset = 0
        var planes: [(offset: Int, stride: Int)] = []
        for (extent, stride) in zip(extents, strides) {
            planes.append((offset, stride))
            offset += stride * extent.rows
        }
        if layout == .planar(swapped: true) { planes.swapAt(1, 2) }
        return planes
    }
}

/// A camera's picture into a picture of `format` (the camera stream's delivered format, the camera's size), once a
/// frame on PipeWire's thread. Copied plane by plane when it is already in that format, else converted by
/// libswscale; between the ranges of two Y'CbCr formats through a table (libswscale's shortcuts between them, as
/// NV12 into I420, leave the values as they are). Y'CbCr keeps its matrix (BT.601, what V4L2 webcams use); RGB is
/// converted with BT.709, as the screen is, and Y'CbCr into BGRx with BT.601.
final class CameraConverter: @unchecked Sendable {
    let source: CameraPixels
    let format: VideoFormat
    let sourceFullRange: Bool
    /// nil: the planes are copied.
    private let context: OpaquePointer?
    /// Between the ranges of two Y'CbCr formats: each luma and chroma value's in the target's range.
    private let tables: (luma: [UInt8], chroma: [UInt8])?

    /// nil when libswscale cannot make that conversion.
    init?(from source: CameraPixels, fullRange sourceFullRange: Bool, to format: VideoFormat, range: ColorRange) {
        let target: AVPixelFormat =
            switch format.pixelFormat {
            case .nv12: AV_PIX_FMT_NV12
            case .i420: AV_PIX_FMT_YUV420P
            case .bgrx: AV_PIX_FMT_BGR0
            }
        (self.source, self.format, self.sourceFullRange) = (source, format, sourceFullRange)
        let full = range == .full
        let yCbCr = !source.isRGB && format.pixelFormat != .bgrx
        tables =
            yCbCr && sourceFullRange != full
            ? (Self.table(full: full, chroma: false), Self.table(full: full, chroma: true)) : nil
        if source.av == target {
            context = nil
            return
        }
        guard
            let context = sws_getContext(
                Int32(format.width), Int32(format.height), source.av,
                Int32(format.width), Int32(format.height), target, SWS_BILINEAR, nil, nil, nil)
        else { return nil }
        let matrix = sws_getCoefficients(source.isRGB ? SWS_CS_ITU709 : SWS_CS_ITU601)
        let sourceRange: Int32 = source.isRGB || (yCbCr ? full : sourceFullRange) ? 1 : 0
        let targetRange: Int32 = format.pixelFormat == .bgrx || full ? 1 : 0
        sws_setColorspaceDetails(context, matrix, sourceRange, matrix, targetRange, 0, 1 << 16, 1 << 16)
        self.context = context
    }

    deinit { if let context { sws_freeContext(context) } }

    /// Whether frames are copied, not converted.
    var copies: Bool { context == nil }

    /// Each 8-bit value of a luma component (limited: 16-235) or a chroma one (16-240 about 128), into full range when
    /// `full`, else from full range into limited.
    private static func table(full: Bool, chroma: Bool) -> [UInt8] {
        let (limitedZero, fullZero, scale) = chroma ? (128.0, 128.0, 255.0 / 224) : (16.0, 0.0, 255.0 / 219)
        return (0..<256).map { value in
            let v = Double(value)
            let mapped = full ? (v - limitedZero) * scale + fullZero : (v - fullZero) / scale + limitedZero
            return UInt8(max(0, min(255, mapped.rounded())))
        }
    }

    /// Converts the `format`-sized picture whose planes are at `planes` (each with its row length in bytes) into
    /// `target`, laid out as `format` says.
    func convert(_ planes: [(pointer: UnsafeRawPointer, stride: Int)], into target: UnsafeMutableRawPointer) {
        let targetPlanes = format.planes
        if let context {
            var sources: [UnsafePointer<UInt8>?] =
                planes.map { $0.pointer.assumingMemoryBound(to: UInt8.self) } + [nil, nil, nil, nil]
            var sourceStrides = planes.map { Int32($0.stride) } + [0, 0, 0, 0]
            var targets: [UnsafeMutablePointer<UInt8>?] =
                targetPlanes.map { (target + $0.offset).assumingMemoryBound(to: UInt8.self) } + [nil, nil, nil, nil]
            var targetStrides = targetPlanes.map { Int32($0.stride) } + [0, 0, 0, 0]
            sws_scale(context, &sources, &sourceStrides, 0, Int32(format.height), &targets, &targetStrides)
        } else {
            for (plane, into) in zip(planes, targetPlanes) {
                for row in 0..<into.height {
                    (target + into.offset + row * into.stride).copyMemory(
                        from: plane.pointer + row * plane.stride, byteCount: min(plane.stride, into.stride))
                }
            }
        }
        guard let tables else { return }
        for (index, plane) in targetPlanes.enumerated() {
            let bytes = (target + plane.offset).assumingMemoryBound(to: UInt8.self)
            (index == 0 ? tables.luma : tables.chroma).withUnsafeBufferPointer { table in
                for i in 0..<plane.byteCount { bytes[i] = table[Int(bytes[i])] }
            }
        }
    }
}

extension PipeWireScreenSource {
    /// Where the planes of a camera's `width`x`height` picture in `pixels` are in `buffer`, each with its row length:
    /// in a data block each (libcamera's), else one after the other in the first (V4L2's); nil when the buffer is too
    /// small for them.
    static func planes(
        of buffer: UnsafeMutablePointer<spa_buffer>, _ pixels: CameraPixels, width: Int, height: Int
    ) -> [(pointer: UnsafeRawPointer, stride: Int)]? {
        guard let datas = buffer.pointee.datas else { return nil }
        let blocks = (0..<Int(buffer.pointee.n_datas)).map { datas[$0] }
        /// A block's picture, its rows (`least` bytes when the chunk says no stride) and the room from it to the end.
        func block(_ data: spa_data, least: Int) -> (base: UnsafeRawPointer, stride: Int, room: Int)? {
            guard let base = data.data, let chunk = data.chunk else { return nil }
            let offset = Int(chunk.pointee.offset)
            guard offset >= 0, offset < Int(data.maxsize) else { return nil }
            let stride = chunk.pointee.stride > 0 ? Int(chunk.pointee.stride) : least
            return (UnsafeRawPointer(base + offset), stride, Int(data.maxsize) - offset)
        }
        let extents = pixels.extents(width: width, height: height)
        if extents.count > 1 && blocks.count >= extents.count {
            var planes: [(pointer: UnsafeRawPointer, stride: Int)] = []
            for (data, extent) in zip(blocks, extents) {
                guard let block = block(data, least: extent.bytes), block.stride >= extent.bytes,
                    block.stride * extent.rows <= block.room
                else { return nil }
                planes.append((block.base, block.stride))
            }
            if pixels.layout == .planar(swapped: true) { planes.swapAt(1, 2) }
            return planes
        }
        guard let first = blocks.first.flatMap({ block($0, least: extents[0].bytes) }),
            let planes = pixels.planes(width: width, height: height, stride: first.stride),
            zip(planes, extents).allSatisfy({ $0.offset + $0.stride * $1.rows <= first.room })
        else { return nil }
        return planes.map { (first.base + $0.offset, $0.stride) }
    }
}

extension PipeWireScreenSource.Latest {
    /// Converts a camera's picture (all of it, less an odd last row or column), whose planes are at `planes`, into
    /// `picture`.
    mutating func convertCamera(
        _ planes: [(pointer: UnsafeRawPointer, stride: Int)], pixels: CameraPixels, capturedAt: UInt64,
        pixelFormat: PixelFormat, range: ColorRange
    ) {
        crop = nil
        let size = pictureSize
        let format = VideoFormat(width: size.width, height: size.height, pixelFormat: pixelFormat)
        if picture?.format != format {
            picture = PipeWireScreenSource.Picture(format, range: range)
        }
        if cameraConverter?.format != format || cameraConverter?.source != pixels
            || cameraConverter?.sourceFullRange != fullRange
        {
            cameraConverter = CameraConverter(from: pixels, fullRange: fullRange, to: format, range: range)
        }
        guard let picture, let cameraConverter else { return }
        cameraConverter.convert(planes, into: picture.bytes)
        rowsConverted += UInt64(size.height)
        serial += 1
        self.capturedAt = capturedAt
    }

    /// Before a camera frame received `now` is converted: when the newest picture was not taken and the loop is late
    /// for its next take (busy past its deadline: grabbing a screen that changed, say), that picture is kept aside as
    /// `earlier` and taken first. It is the camera's picture nearest the screen frame the loop is grabbing (the loop
    /// takes the camera's frame just before the screen's), which the handlers pair by capture time; without it only
    /// the newest would be left when the loop comes back, a frame or more after that screen frame.
    mutating func keepUntakenPicture(now: UInt64) {
        guard earlier == nil, serial != taken.serial, taken.at > 0, let picture,
            now > taken.at + taken.interval + taken.interval / 16
        else { return }
        earlier = (picture, capturedAt)
        self.picture = spare?.format == picture.format ? spare : nil
        spare = nil
        damage.invalidate()  // the picture to convert into is another
    }

    /// Copies the camera's picture to take next into `slot`: the one kept aside (`earlier`, unless the loop comes back
    /// half a second or more after it), else the newest; returns its capture time, and whether it was the newest.
    mutating func takeCameraPicture(into slot: UnsafeMutableRawPointer, format: VideoFormat, now: UInt64)
        -> (capturedAt: UInt64, newest: Bool)?
    {
        // The loop's pace: the interval between its takes, which a longer one (a stall, or no new frame at a deadline)
        // lengthens by an eighth at most; a second take within 2 ms is the same deadline's.
        let since = min(now - min(taken.at, now), 1_000_000_000)
        if since > 2_000_000 {
            if taken.at > 0 { taken.interval = min(since, taken.interval + taken.interval / 8) }
            taken.at = now
        }
        if let earlier, earlier.picture.format == format, now < earlier.capturedAt + 500_000_000 {
            slot.copyMemory(from: earlier.picture.bytes, byteCount: format.frameByteCount)
            (spare, self.earlier) = (earlier.picture, nil)
            return (earlier.capturedAt, false)
        }
        if let earlier { (spare, self.earlier) = (earlier.picture, nil) }
        taken.serial = serial
        guard let picture, picture.format == format else { return nil }
        slot.copyMemory(from: picture.bytes, byteCount: format.frameByteCount)
        return (capturedAt, true)
    }
}
