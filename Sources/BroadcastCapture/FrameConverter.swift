import BroadcastCore
// TEMPORARY scalar stand-in until the vectorised converter lands (same API).
public enum ColorRange: String, Sendable, CaseIterable { case limited, full }
public struct FrameConverter: Sendable {
    public let format: VideoFormat
    public let range: ColorRange
    let planes: [Plane]
    public init(format: VideoFormat, range: ColorRange = .limited) { self.format = format; self.range = range; planes = format.planes }
    public func convert(bgrx: UnsafeRawPointer, sourceStride: Int, firstRow: Int, rowCount: Int, into slot: UnsafeMutableRawPointer) {
        for r in 0..<rowCount {
            let src = bgrx + r * sourceStride
            let y = firstRow + r
            for x in 0..<format.width {
                let b = Double(src.load(fromByteOffset: x * 4, as: UInt8.self)), g = Double(src.load(fromByteOffset: x * 4 + 1, as: UInt8.self)), rr = Double(src.load(fromByteOffset: x * 4 + 2, as: UInt8.self))
                let luma = 0.2126 * rr + 0.7152 * g + 0.0722 * b
                switch format.pixelFormat {
                case .bgrx: slot.storeBytes(of: src.load(fromByteOffset: x * 4, as: UInt32.self), toByteOffset: y * planes[0].stride + x * 4, as: UInt32.self)
                default:
                    slot.storeBytes(of: UInt8(min(255, max(0, (16 + luma * 219 / 255).rounded()))), toByteOffset: y * planes[0].stride + x, as: UInt8.self)
                    if y % 2 == 0 && x % 2 == 0 {
                        let cb = UInt8(min(255, max(0, (128 + 224 / 255 * (b - luma) / 1.8556).rounded())))
                        let cr = UInt8(min(255, max(0, (128 + 224 / 255 * (rr - luma) / 1.5748).rounded())))
                        if format.pixelFormat == .nv12 {
                            slot.storeBytes(of: cb, toByteOffset: planes[1].offset + y / 2 * planes[1].stride + x, as: UInt8.self)
                            slot.storeBytes(of: cr, toByteOffset: planes[1].offset + y / 2 * planes[1].stride + x + 1, as: UInt8.self)
                        } else {
                            slot.storeBytes(of: cb, toByteOffset: planes[1].offset + y / 2 * planes[1].stride + x / 2, as: UInt8.self)
                            slot.storeBytes(of: cr, toByteOffset: planes[2].offset + y / 2 * planes[2].stride + x / 2, as: UInt8.self)
                        }
                    }
                }
            }
        }
    }
    public func copyRows(firstRow: Int, rowCount: Int, from previous: UnsafeRawPointer, to slot: UnsafeMutableRawPointer) {
        for (i, p) in planes.enumerated() {
            let shift = i == 0 ? 0 : 1
            let start = p.offset + (firstRow >> shift) * p.stride
            (slot + start).copyMemory(from: previous + start, byteCount: (rowCount >> shift) * p.stride)
        }
    }
}
