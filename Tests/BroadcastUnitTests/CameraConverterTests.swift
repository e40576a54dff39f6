import BroadcastCapture
import BroadcastCore
import Testing

@testable import BroadcastPipeWire

/// A camera's pictures into the camera's slots: copied when the camera sends the slots' format, else converted by
/// libswscale, each plane where the slot's format says.
@Suite struct CameraConverterTests {
    /// A 16x4 YUY2 picture whose luma rises along each row (16, 26, … 166) over one chroma (U 100, V 200), its rows
    /// 64 bytes apart (a buffer's stride wider than the picture).
    func rising() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 64 * 4)
        for y in 0..<4 {
            for pair in 0..<8 {
                let at = y * 64 + pair * 4
                bytes[at..<at + 4] = [UInt8(16 + 20 * pair), 100, UInt8(26 + 20 * pair), 200]
            }
        }
        return bytes
    }

    /// `bytes`, a 16x4 picture in `name` whose first plane's rows are `stride` apart, converted into a slot of
    /// `pixelFormat`.
    func converted(
        _ bytes: [UInt8], _ name: String = "YUY2", stride: Int = 64, into pixelFormat: PixelFormat,
        _ range: ColorRange = .limited, fullRange: Bool = false
    ) throws -> (VideoFormat, [UInt8], copied: Bool) {
        let format = VideoFormat(width: 16, height: 4, pixelFormat: pixelFormat)
        let pixels = try #require(CameraPixels.named(name))
        let converter = try #require(CameraConverter(from: pixels, fullRange: fullRange, to: format, range: range))
        let planes = try #require(pixels.planes(width: 16, height: 4, stride: stride))
        var slot = [UInt8](repeating: 0, count: format.frameByteCount)
        bytes.withUnsafeBytes { source in
            slot.withUnsafeMutableBytes {
                converter.convert(
                    planes.map { (UnsafeRawPointer(source.baseAddress! + $0.offset), $0.stride) },
                    into: $0.baseAddress!)
            }
        }
        return (format, slot, converter.copies)
    }

    func rows(_ slot: [UInt8], _ plane: Plane, width: Int) -> [[UInt8]] {
        (0..<plane.height).map {
            Array(slot[plane.offset + $0 * plane.stride..<plane.offset + $0 * plane.stride + width])
        }
    }

    @Test func nv12TakesTheLumaAsItIsAndTheChromaInterleaved() throws {
        let (format, slot, _) = try converted(rising(), into: .nv12)
        let luma = (0..<16).map { UInt8(16 + 10 * $0) }
        #expect(rows(slot, format.planes[0], width: 16) == Array(repeating: luma, count: 4))
        #expect(
            rows(slot, format.planes[1], width: 16)
                == Array(
                    repeating: [UInt8](repeating: 0, count: 8)
                        .flatMap { _ in [UInt8(100), 200] }, count: 2))
    }

    @Test func i420TakesEachChromaInAPlaneOfItsOwn() throws {
        let (format, slot, _) = try converted(rising(), into: .i420)
        #expect(rows(slot, format.planes[0], width: 16)[3] == (0..<16).map { UInt8(16 + 10 * $0) })
        #expect(rows(slot, format.planes[1], width: 8) == Array(repeating: Array(repeating: 100, count: 8), count: 2))
        #expect(rows(slot, format.planes[2], width: 8) == Array(repeating: Array(repeating: 200, count: 8), count: 2))
    }

    /// For full-range slots the camera's limited range is stretched: luma 16 is 0.
    @Test func fullRangeSlotsGetTheLumaStretched() throws {
        let (format, slot, _) = try converted(rising(), into: .nv12, .full)
        let row = rows(slot, format.planes[0], width: 16)[0]
        #expect(row.first == 0 && row[1] == 12, "\(row)")
    }

    // MARK: - A solid colour in each format

    static let rgb = (r: 48, g: 96, b: 208)

    /// `rgb` in BT.601 Y'CbCr of limited range, as a webcam sends it (the test video source's formula).
    static var yuv: (y: UInt8, u: UInt8, v: UInt8) {
        let (r, g, b) = rgb
        return (
            UInt8(((66 * r + 129 * g + 25 * b + 128) >> 8) + 16),
            UInt8(((-38 * r - 74 * g + 112 * b + 128) >> 8) + 128),
            UInt8(((112 * r - 94 * g - 18 * b + 128) >> 8) + 128)
        )
    }

    /// A 16x4 picture of the solid colour in `name`, built here byte by byte, and its first plane's stride: packed
    /// rows 64 bytes apart; planar rows 24 (luma, NV12's chroma) or 12 (I420's chroma) apart.
    static func solid(_ name: String) -> (bytes: [UInt8], stride: Int) {
        let (y, u, v) = yuv
        let (r, g, b) = (UInt8(rgb.r), UInt8(rgb.g), UInt8(rgb.b))
        func rows(_ count: Int, _ row: [UInt8], stride: Int) -> [UInt8] {
            Array(repeating: row + [UInt8](repeating: 0, count: stride - row.count), count: count).flatMap { $0 }
        }
        func repeated(_ pattern: [UInt8], _ times: Int) -> [UInt8] {
            Array(repeating: pattern, count: times).flatMap { $0 }
        }
        let luma = rows(4, repeated([y], 16), stride: 24)
        let packed: [String: [UInt8]] = [
            "YUY2": repeated([y, u, y, v], 8), "UYVY": repeated([u, y, v, y], 8), "YVYU": repeated([y, v, y, u], 8),
            "RGBx": repeated([r, g, b, 0], 16), "RGBA": repeated([r, g, b, 255], 16),
            "xRGB": repeated([0, r, g, b], 16), "xBGR": repeated([0, b, g, r], 16),
            "RGB": repeated([r, g, b], 16), "BGR": repeated([b, g, r], 16),
        ]
        if let row = packed[name] { return (rows(4, row, stride: 64), 64) }
        switch name {
        case "NV12": return (luma + rows(2, repeated([u, v], 8), stride: 24), 24)
        case "NV21": return (luma + rows(2, repeated([v, u], 8), stride: 24), 24)
        case "I420": return (luma + rows(2, repeated([u], 8), stride: 12) + rows(2, repeated([v], 8), stride: 12), 24)
        case "YV12": return (luma + rows(2, repeated([v], 8), stride: 12) + rows(2, repeated([u], 8), stride: 12), 24)
        default: return ([], 0)
        }
    }

    /// The slot's distinct bytes in each of its planes' pictures (NV12's chroma as pairs).
    func values(_ slot: [UInt8], _ format: VideoFormat) -> (luma: Set<UInt8>, chroma: Set<[UInt8]>) {
        let planes = format.planes
        let luma = Set(rows(slot, planes[0], width: 16).flatMap { $0 })
        let chroma = rows(slot, planes[1], width: 16).flatMap { row in
            stride(from: 0, to: 16, by: 2).map { Array(row[$0..<$0 + 2]) }
        }
        return (luma, Set(chroma))
    }

    /// Each Y'CbCr format a camera may send gives the colour's Y'CbCr in an NV12 slot (its matrix kept), copied as it
    /// is from NV12; the slot's planes hold nothing else.
    @Test(arguments: ["NV12", "NV21", "I420", "YV12", "YUY2", "UYVY", "YVYU"])
    func yCbCrCamerasGiveTheColourInAnNV12Slot(_ name: String) throws {
        let (bytes, stride) = Self.solid(name)
        let (format, slot, copied) = try converted(bytes, name, stride: stride, into: .nv12)
        let (y, u, v) = Self.yuv
        let (luma, chroma) = values(slot, format)
        #expect(luma == [y] && chroma == [[u, v]], "\(name): \(luma) \(chroma), expected \(y) \(u) \(v)")
        #expect(copied == (name == "NV12"), "\(name)")
    }

    /// The same into I420 slots: an I420 camera's planes copied, YV12's swapped.
    @Test(arguments: ["NV12", "I420", "YV12", "YUY2", "UYVY"])
    func yCbCrCamerasGiveTheColourInAnI420Slot(_ name: String) throws {
        let (bytes, stride) = Self.solid(name)
        let (format, slot, copied) = try converted(bytes, name, stride: stride, into: .i420)
        let (y, u, v) = Self.yuv
        let planes = format.planes
        #expect(Set(rows(slot, planes[0], width: 16).flatMap { $0 }) == [y], "\(name)")
        #expect(Set(rows(slot, planes[1], width: 8).flatMap { $0 }) == [u], "\(name)")
        #expect(Set(rows(slot, planes[2], width: 8).flatMap { $0 }) == [v], "\(name)")
        #expect(copied == (name == "I420" || name == "YV12"), "\(name)")
    }

    /// RGB cameras are converted as the screen is: BT.709, limited range (within one step of rounding).
    @Test(arguments: ["RGBx", "RGBA", "xRGB", "xBGR", "RGB", "BGR"])
    func rgbCamerasGiveTheColourInBT709(_ name: String) throws {
        let (bytes, stride) = Self.solid(name)
        let (format, slot, _) = try converted(bytes, name, stride: stride, into: .nv12)
        let (r, g, b) = (Double(Self.rgb.r) / 255, Double(Self.rgb.g) / 255, Double(Self.rgb.b) / 255)
        let luma = 0.2126 * r + 0.7152 * g + 0.0722 * b
        let expected = [16 + 219 * luma, 128 + 224 * (b - luma) / 1.8556, 128 + 224 * (r - luma) / 1.5748]
        let (lumas, chroma) = values(slot, format)
        let got = [Double(lumas.first ?? 0)] + (chroma.first ?? []).map(Double.init)
        #expect(lumas.count == 1 && chroma.count == 1, "\(name): \(lumas) \(chroma)")
        #expect(zip(got, expected).allSatisfy { abs($0 - $1) <= 1.5 }, "\(name): \(got), expected \(expected)")
    }

    /// Into BGRx slots, Y'CbCr (BT.601, limited) comes back as the colour it was made from.
    @Test(arguments: ["NV12", "I420", "YUY2", "UYVY"])
    func yCbCrCamerasGiveTheColourInABGRxSlot(_ name: String) throws {
        let (bytes, stride) = Self.solid(name)
        let (_, slot, _) = try converted(bytes, name, stride: stride, into: .bgrx)
        let pixel = Array(slot[0..<3]).map(Int.init)
        #expect(
            zip(pixel, [Self.rgb.b, Self.rgb.g, Self.rgb.r]).allSatisfy { abs($0 - $1) <= 3 }, "\(name): \(pixel)")
    }

    /// A camera whose format says full range has its values brought into a limited slot's range, and the other way
    /// round, also where the planes are copied (libswscale copies them unchanged).
    @Test(arguments: [("NV12", PixelFormat.nv12), ("NV12", .i420), ("I420", .i420), ("YUY2", .nv12), ("UYVY", .i420)])
    func aCameraOfTheOtherRangeIsBroughtIntoTheSlotsRange(_ name: String, _ pixelFormat: PixelFormat) throws {
        let (bytes, stride) = Self.solid(name)
        let (y, u, v) = (Double(Self.yuv.y), Double(Self.yuv.u), Double(Self.yuv.v))
        func limited(_ value: Double, _ span: Double, _ low: Double) -> UInt8 {
            UInt8(((value - (low == 16 ? 0 : 128)) * span / 255 + low).rounded())
        }
        func full(_ value: Double, _ span: Double, _ low: Double) -> UInt8 {
            UInt8(((value - low) * 255 / span + (low == 16 ? 0 : 128)).rounded())
        }
        for (fromFull, into) in [(true, ColorRange.limited), (false, .full)] {
            let (format, slot, _) = try converted(
                bytes, name, stride: stride, into: pixelFormat, into, fullRange: fromFull)
            let map = fromFull ? limited : full
            let planes = format.planes
            let luma = Set(rows(slot, planes[0], width: 16).flatMap { $0 })
            let chroma = Set(rows(slot, planes[1], width: 8 * pixelFormat.chromaBytes).flatMap { $0 })
            let expectedChroma: Set = pixelFormat == .nv12 ? [map(u, 224, 128), map(v, 224, 128)] : [map(u, 224, 128)]
            let what = "\(name) full \(fromFull) into \(pixelFormat) \(into)"
            #expect(
                luma.allSatisfy { abs(Int($0) - Int(map(y, 219, 16))) <= 1 }
                    && chroma.allSatisfy { c in expectedChroma.contains { abs(Int($0) - Int(c)) <= 1 } },
                "\(what): \(luma) \(chroma), expected \(map(y, 219, 16)) \(expectedChroma)")
        }
    }

    /// The planes of one block: NV12's chroma rows as long as the luma's, I420's half as long, YV12's V first; a
    /// stride too short for a row is refused.
    @Test func thePlanesOfOneBlockFollowOneAnother() throws {
        #expect(
            try #require(CameraPixels.named("NV12")).planes(width: 16, height: 4, stride: 24)!.map(\.offset) == [0, 96])
        let i420 = try #require(CameraPixels.named("I420")?.planes(width: 16, height: 4, stride: 24))
        #expect(i420.map(\.offset) == [0, 96, 120] && i420.map(\.stride) == [24, 12, 12])
        #expect(
            try #require(CameraPixels.named("YV12")?.planes(width: 16, height: 4, stride: 24)).map(\.offset) == [
                0, 120, 96,
            ])
        #expect(CameraPixels.named("YUY2")?.planes(width: 16, height: 4, stride: 30) == nil)
        #expect(CameraPixels.named("NV12")?.planes(width: 16, height: 4, stride: 15) == nil)
    }

    /// A camera's picture that broadcastd's loop did not take before the next came, while the loop was busy past its
    /// next deadline (grabbing a screen that changed): kept, and taken before the newest, so that the handlers have
    /// the camera's picture nearest the screen frame being grabbed; on time, the newest replaces it as before.
    @Test func aPictureTheBusyLoopMissedIsKeptAndTakenBeforeTheNewest() throws {
        let format = VideoFormat(width: 16, height: 16)
        let ms: UInt64 = 1_000_000
        var latest = PipeWireScreenSource.Latest()
        /// A camera frame received at `time`, its picture all `value` (as `convertCamera` makes it).
        func receive(_ value: UInt8, at time: UInt64) {
            latest.keepUntakenPicture(now: time)
            if latest.picture == nil { latest.picture = PipeWireScreenSource.Picture(format, range: .limited) }
            latest.picture!.bytes.initializeMemory(as: UInt8.self, repeating: value, count: format.frameByteCount)
            latest.serial += 1
            latest.capturedAt = time
        }
        let slot = UnsafeMutableRawPointer.allocate(byteCount: format.frameByteCount, alignment: 64)
        defer { slot.deallocate() }
        func take(at time: UInt64) -> (UInt64, Bool, UInt8)? {
            latest.takeCameraPicture(into: slot, format: format, now: time).map {
                ($0.capturedAt, $0.newest, slot.load(as: UInt8.self))
            }
        }
        receive(1, at: 10 * ms)
        #expect(take(at: 12 * ms)! == (10 * ms, true, 1))
        receive(2, at: 40 * ms)
        #expect(take(at: 45 * ms)! == (40 * ms, true, 2))
        // On time: a frame not taken yet is replaced by the next (a faster camera).
        receive(3, at: 60 * ms)
        receive(4, at: 75 * ms)
        #expect(latest.earlier == nil)
        #expect(take(at: 78 * ms)! == (75 * ms, true, 4))
        // The loop busy from 78 ms to 200 ms: the first picture it missed (at 90 ms) stays beside the newest.
        receive(5, at: 90 * ms)
        receive(6, at: 123 * ms)
        receive(7, at: 156 * ms)
        receive(8, at: 190 * ms)
        #expect(take(at: 200 * ms)! == (90 * ms, false, 5))
        #expect(take(at: 200 * ms + 10_000)! == (190 * ms, true, 8))
        // Back on time, its buffer used again: nothing kept.
        receive(9, at: 223 * ms)
        #expect(latest.earlier == nil && take(at: 233 * ms)! == (223 * ms, true, 9))
    }
}

extension PixelFormat {
    /// Bytes of chroma a pair of pixels has in the first chroma plane: NV12's U and V, I420's U.
    fileprivate var chromaBytes: Int { self == .nv12 ? 2 : 1 }
}
