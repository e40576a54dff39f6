import BroadcastCore
import CPNG

/// The error type of BroadcastImage.
public struct ImageError: Error, CustomStringConvertible, Sendable {
    public var operation: String
    public var reason: String
    public var description: String { "\(operation): \(reason)" }
}

/// PNG files, written by libpng (its simplified API).
public enum PNG {
    /// A PNG of 8-bit RGB pixels, `width * 3` bytes a row.
    public static func encode(rgb: [UInt8], width: Int, height: Int) throws(ImageError) -> [UInt8] {
        precondition(rgb.count == width * height * 3, "\(rgb.count) bytes are not \(width)x\(height) RGB")
        var image = png_image()
        image.version = png_uint_32(cpng_image_version)
        image.width = png_uint_32(width)
        image.height = png_uint_32(height)
        image.format = png_uint_32(cpng_format_rgb)
        let stride = png_int_32(width * 3)
        var size = 0
        // First the size, then the bytes.
        guard
            rgb.withUnsafeBytes({ png_image_write_to_memory(&image, nil, &size, 0, $0.baseAddress, stride, nil) }) != 0
        else {
            throw failure(&image)
        }
        var bytes = [UInt8](repeating: 0, count: size)
        let written = bytes.withUnsafeMutableBytes { out in
            rgb.withUnsafeBytes {
                png_image_write_to_memory(&image, out.baseAddress, &size, 0, $0.baseAddress, stride, nil)
            }
        }
        guard written != 0 else { throw failure(&image) }
        return Array(bytes.prefix(size))
    }

    private static func failure(_ image: inout png_image) -> ImageError {
        let message = withUnsafeBytes(of: &image.message) {
            String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        png_image_free(&image)
        return ImageError(operation: "encode PNG", reason: message.isEmpty ? "libpng failed" : message)
    }
}

/// 8-bit RGB from broadcastd's frame layouts: NV12 and I420 as BT.709 in the given range, BGRx as it is.
public enum RGB {
    public static func convert(_ frame: UnsafeRawBufferPointer, format: VideoFormat, fullRange: Bool) -> [UInt8] {
        let (width, height, planes) = (format.width, format.height, format.planes)
        precondition(
            frame.count >= format.frameByteCount,
            "the frame has \(frame.count) bytes, its format \(format.frameByteCount)")
        var rgb = [UInt8](repeating: 0, count: width * height * 3)
        rgb.withUnsafeMutableBufferPointer { out in
            switch format.pixelFormat {
            case .bgrx:
                for y in 0..<height {
                    let row = planes[0].offset + y * planes[0].stride
                    for x in 0..<width {
                        let p = row + x * 4
                        let o = (y * width + x) * 3
                        (out[o], out[o + 1], out[o + 2]) = (frame[p + 2], frame[p + 1], frame[p])
                    }
                }
            case .nv12, .i420:
                let matrix = YCbCr(fullRange: fullRange)
                let interleaved = format.pixelFormat == .nv12
                for y in 0..<height {
                    let luma = planes[0].offset + y * planes[0].stride
                    let cb = planes[1].offset + (y / 2) * planes[1].stride
                    let cr = interleaved ? cb + 1 : planes[2].offset + (y / 2) * planes[2].stride
                    for x in 0..<width {
                        let c = interleaved ? (x / 2) * 2 : x / 2
                        let o = (y * width + x) * 3
                        (out[o], out[o + 1], out[o + 2]) = matrix.rgb(frame[luma + x], frame[cb + c], frame[cr + c])
                    }
                }
            }
        }
        return rgb
    }

    /// BT.709 Y'CbCr → R'G'B', in fixed point (16 fractional bits).
    struct YCbCr {
        let yScale, cScale, yOffset: Int

        init(fullRange: Bool) {
            yScale = fullRange ? 65536 : 76309  // 255/219
            cScale = fullRange ? 65536 : 74606  // 255/224
            yOffset = fullRange ? 0 : 16
        }

        func rgb(_ y: UInt8, _ cb: UInt8, _ cr: UInt8) -> (UInt8, UInt8, UInt8) {
            let l = (Int(y) - yOffset) * yScale
            let u = (Int(cb) - 128) * cScale >> 8
            let v = (Int(cr) - 128) * cScale >> 8
            // Kr = 0.2126, Kb = 0.0722: R = Y + 1.5748 Cr, G = Y - 0.1873 Cb - 0.4681 Cr, B = Y + 1.8556 Cb.
            let r = l + 403 * v
            let g = l - 48 * u - 120 * v
            let b = l + 475 * u
            return (clamp(r), clamp(g), clamp(b))
        }

        private func clamp(_ value: Int) -> UInt8 { UInt8(max(0, min(255, (value + 32768) >> 16))) }
    }
}
