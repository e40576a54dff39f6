import BroadcastCapture
import BroadcastCore
import Testing

@testable import BroadcastPipeWire

/// A webcam's YUY2 into the camera's slots: libswscale, each plane where the slot's format says.
@Suite struct YUY2ConverterTests {
    /// A 16x4 YUY2 picture whose luma rises along each row (16, 26, … 166) over one chroma (U 100, V 200), its rows
    /// 64 bytes apart (a buffer's stride wider than the picture).
    func picture() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 64 * 4)
        for y in 0..<4 {
            for pair in 0..<8 {
                let at = y * 64 + pair * 4
                bytes[at..<at + 4] = [UInt8(16 + 20 * pair), 100, UInt8(26 + 20 * pair), 200]
            }
        }
        return bytes
    }

    func converted(_ pixelFormat: PixelFormat, _ range: ColorRange = .limited) throws -> (VideoFormat, [UInt8]) {
        let format = VideoFormat(width: 16, height: 4, pixelFormat: pixelFormat)
        let converter = try #require(YUY2Converter(format: format, range: range))
        var slot = [UInt8](repeating: 0, count: format.frameByteCount)
        picture().withUnsafeBytes { source in
            slot.withUnsafeMutableBytes { converter.convert(source.baseAddress!, stride: 64, into: $0.baseAddress!) }
        }
        return (format, slot)
    }

    func rows(_ slot: [UInt8], _ plane: Plane, width: Int) -> [[UInt8]] {
        (0..<plane.height).map {
            Array(slot[plane.offset + $0 * plane.stride..<plane.offset + $0 * plane.stride + width])
        }
    }

    @Test func nv12TakesTheLumaAsItIsAndTheChromaInterleaved() throws {
        let (format, slot) = try converted(.nv12)
        let luma = (0..<16).map { UInt8(16 + 10 * $0) }
        #expect(rows(slot, format.planes[0], width: 16) == Array(repeating: luma, count: 4))
        #expect(
            rows(slot, format.planes[1], width: 16)
                == Array(
                    repeating: [UInt8](repeating: 0, count: 8)
                        .flatMap { _ in [UInt8(100), 200] }, count: 2))
    }

    @Test func i420TakesEachChromaInAPlaneOfItsOwn() throws {
        let (format, slot) = try converted(.i420)
        #expect(rows(slot, format.planes[0], width: 16)[3] == (0..<16).map { UInt8(16 + 10 * $0) })
        #expect(rows(slot, format.planes[1], width: 8) == Array(repeating: Array(repeating: 100, count: 8), count: 2))
        #expect(rows(slot, format.planes[2], width: 8) == Array(repeating: Array(repeating: 200, count: 8), count: 2))
    }

    /// For full-range slots the camera's limited range is stretched: luma 16 is 0.
    @Test func fullRangeSlotsGetTheLumaStretched() throws {
        let (format, slot) = try converted(.nv12, .full)
        let row = rows(slot, format.planes[0], width: 16)[0]
        #expect(row.first == 0 && row[1] == 12, "\(row)")
    }
}
