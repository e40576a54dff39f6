import BroadcastCapture
import BroadcastCore

/// What PipeWire's thread leaves for the loop: the newest picture, converted, and what is known of the stream.
extension PipeWireScreenSource {
    /// Written on PipeWire's thread, read by the loop.
    struct Latest {
        var width = 0
        var height = 0
        /// The frames' pixel format (nil: one not taken); all but BGRx and BGRA (a camera's) are converted by
        /// `cameraConverter`.
        var pixels: CameraPixels?
        /// The format says the frames' Y'CbCr is of full range (0-255); else it is taken to be limited.
        var fullRange = false
        var cameraConverter: CameraConverter?
        /// A camera's: the picture the loop missed while it was busy, taken before the newest
        /// (`keepUntakenPicture`), and the buffer it leaves for the next.
        var earlier: (picture: Picture, capturedAt: UInt64)?
        var spare: Picture?
        /// The loop's takes of a camera's picture: the serial taken last, when, and the loop's pace (`interval`).
        var taken: (serial: UInt64, at: UInt64, interval: UInt64) = (0, 0, 33_333_333)
        /// The newest picture, converted, in `pictureFormat`.
        var picture: Picture?
        /// Frames received so far (a new one changes it).
        var serial: UInt64 = 0
        var capturedAt: UInt64 = 0
        var state = "connecting"
        var corrupted: UInt64 = 0
        /// The picture within the buffer, when the newest buffer has a crop region.
        var crop: CropRegion?
        /// What changed since the last conversion.
        var damage = FrameDamage()
        /// The stream's buffers, mapped (MAP_BUFFERS) from the producer: where each is, and its size.
        var mapped: [UInt: Int] = [:]
        var rowsConverted: UInt64 = 0
        var rowsCopied: UInt64 = 0
        /// Buffers that carried only the pointer.
        var cursorOnly: UInt64 = 0
        var cursor = PipeWireCursor()
        /// A buffer had cursor metadata.
        var cursorSeen = false
        /// The picture's size: the crop region's, or the buffer's, less an odd last row or column.
        var pictureSize: (width: Int, height: Int) {
            let size = crop.map { ($0.width, $0.height) } ?? (width, height)
            return (size.0 & ~1, size.1 & ~1)
        }
    }
    struct CropRegion: Equatable {
        var x, y, width, height: Int
    }
    /// The picture in the broadcast's pixel format, and its converter.
    final class Picture: @unchecked Sendable {
        let format: VideoFormat
        let converter: FrameConverter
        let bytes: UnsafeMutableRawPointer
        init(_ format: VideoFormat, range: ColorRange) {
            self.format = format
            converter = FrameConverter(format: format, range: range)
            bytes = .allocate(byteCount: format.frameByteCount, alignment: 64)
        }
        deinit { bytes.deallocate() }
    }
}

extension PipeWireScreenSource.Latest {
    /// Converts the buffer's picture (its crop region, or all of it) into `picture`, as far as damage says it changed.
    mutating func convert(
        _ buffer: UnsafeRawPointer, stride: Int, crop: PipeWireScreenSource.CropRegion?,
        damage: [(y: Int, height: Int)]?,
        capturedAt: UInt64, pixelFormat: PixelFormat, range: ColorRange
    ) {
        // A crop region outside the buffer is ignored: the whole buffer is the picture.
        let region = crop.flatMap { c in
            c.x >= 0 && c.y >= 0 && c.width >= 2 && c.height >= 2 && c.x + c.width <= width && c.y + c.height <= height
                ? c : nil
        }
        if region != self.crop {
            self.crop = region
            self.damage.invalidate()
        }
        let size = pictureSize
        if picture?.format.width != size.width || picture?.format.height != size.height {
            picture = PipeWireScreenSource.Picture(
                VideoFormat(width: size.width, height: size.height, pixelFormat: pixelFormat), range: range)
            self.damage.invalidate()
        }
        self.damage.add(damage, pictureTop: region?.y ?? 0, pictureHeight: size.height)
        let rows = self.damage.changedRows(height: size.height)
        self.damage.reset()
        rowsCopied += UInt64(size.height - rows.count)
        guard !rows.isEmpty, let target = picture else { return }
        let origin = buffer + (region.map { $0.y * stride + $0.x * 4 } ?? 0)
        target.converter.convert(
            bgrx: origin + rows.lowerBound * stride, sourceStride: stride, firstRow: rows.lowerBound,
            rowCount: rows.count, into: target.bytes)
        rowsConverted += UInt64(rows.count)
        serial += 1
        self.capturedAt = capturedAt
    }
}
