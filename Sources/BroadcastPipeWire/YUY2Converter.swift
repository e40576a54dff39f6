import BroadcastCapture
import BroadcastCore
import CSwscale

/// A webcam's YUY2 (packed 4:2:2, its Y'CbCr of limited range as cameras send it) into a picture of `format`, with
/// libswscale: once a frame, on PipeWire's thread, into the picture the frame's slot is then filled from.
/// Its matrix (BT.601, what V4L2 webcams use) is kept: libswscale does not convert between the matrices of two Y'CbCr
/// formats, only their ranges (a full-range slot gets the camera's limited range stretched).
final class YUY2Converter: @unchecked Sendable {
    let format: VideoFormat
    private let context: OpaquePointer

    /// nil when libswscale cannot make that conversion.
    init?(format: VideoFormat, range: ColorRange) {
        let target: AVPixelFormat =
            switch format.pixelFormat {
            case .nv12: AV_PIX_FMT_NV12
            case .i420: AV_PIX_FMT_YUV420P
            case .bgrx: AV_PIX_FMT_BGR0
            }
        guard
            let context = sws_getContext(
                Int32(format.width), Int32(format.height), AV_PIX_FMT_YUYV422,
                Int32(format.width), Int32(format.height), target, SWS_BILINEAR, nil, nil, nil)
        else { return nil }
        let bt601 = sws_getCoefficients(SWS_CS_ITU601)
        sws_setColorspaceDetails(context, bt601, 0, bt601, range == .full ? 1 : 0, 0, 1 << 16, 1 << 16)
        (self.format, self.context) = (format, context)
    }

    deinit { sws_freeContext(context) }

    /// Converts the `format`-sized YUY2 picture at `source` (`stride` bytes a row) into `target`, laid out as
    /// `format` says.
    func convert(_ source: UnsafeRawPointer, stride: Int, into target: UnsafeMutableRawPointer) {
        var sources: [UnsafePointer<UInt8>?] = [source.assumingMemoryBound(to: UInt8.self), nil, nil, nil]
        var sourceStrides: [Int32] = [Int32(stride), 0, 0, 0]
        let planes = format.planes
        var targets: [UnsafeMutablePointer<UInt8>?] =
            planes.map { (target + $0.offset).assumingMemoryBound(to: UInt8.self) } + [nil, nil, nil, nil]
        var targetStrides = planes.map { Int32($0.stride) } + [0, 0, 0, 0]
        sws_scale(context, &sources, &sourceStrides, 0, Int32(format.height), &targets, &targetStrides)
    }
}

extension PipeWireScreenSource.Latest {
    /// Converts the buffer's YUY2 picture (all of it, less an odd last row or column) into `picture`.
    mutating func convertYUY2(
        _ buffer: UnsafeRawPointer, stride: Int, capturedAt: UInt64, pixelFormat: PixelFormat, range: ColorRange
    ) {
        crop = nil
        let size = pictureSize
        let format = VideoFormat(width: size.width, height: size.height, pixelFormat: pixelFormat)
        if picture?.format != format {
            picture = PipeWireScreenSource.Picture(format, range: range)
        }
        if yuy2Converter?.format != format {
            yuy2Converter = YUY2Converter(format: format, range: range)
        }
        guard let picture, let yuy2Converter else { return }
        yuy2Converter.convert(buffer, stride: stride, into: picture.bytes)
        rowsConverted += UInt64(size.height)
        serial += 1
        self.capturedAt = capturedAt
    }
}
