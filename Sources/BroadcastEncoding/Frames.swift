import BroadcastCore
import CFFmpeg

/// An AVFrame for the encoders, with buffers of its own: video frames are copied or scaled from a sample (whose
/// slot goes back to broadcastd before the frame is encoded); audio frames own interleaved float samples.
public final class MediaFrame {
    package let frame: UnsafeMutablePointer<AVFrame>

    private init() throws(MediaError) {
        guard let frame = av_frame_alloc() else { throw MediaError("allocate a frame", "out of memory") }
        self.frame = frame
    }

    deinit {
        var frame: UnsafeMutablePointer<AVFrame>? = self.frame
        av_frame_free(&frame)
    }

    /// An owned frame of `format` (for copied or scaled video).
    public static func video(width: Int, height: Int, pixelFormat: PixelFormat) throws(MediaError) -> MediaFrame {
        let owned = try MediaFrame()
        owned.frame.pointee.width = Int32(width)
        owned.frame.pointee.height = Int32(height)
        owned.frame.pointee.format = (pixelFormat == .i420 ? AV_PIX_FMT_YUV420P : AV_PIX_FMT_NV12).rawValue
        try check(av_frame_get_buffer(owned.frame, 0), "allocate a \(width)x\(height) frame")
        return owned
    }

    /// Another reference to this frame's buffers, with its properties (what a frame encoded on another thread holds:
    /// its owner makes the buffers writable, copying them, before it writes into them again).
    func clone() throws(MediaError) -> MediaFrame {
        let clone = try MediaFrame()
        try check(av_frame_ref(clone.frame, frame), "reference a frame")
        return clone
    }

    /// Copies `data` (laid out as `format`, which has this owned frame's size and layout) into this frame, stamped
    /// `pts`, so that the sample's memory may be given back before the frame is encoded.
    public func copy(_ data: UnsafeRawBufferPointer, format: VideoFormat, pts: Int64) throws(MediaError) {
        try check(av_frame_make_writable(frame), "prepare a frame for a copy")
        let planes = format.planes
        withUnsafeBytes(of: frame.pointee.data) { pointers in
            withUnsafeBytes(of: frame.pointee.linesize) { sizes in
                for (i, plane) in planes.enumerated() {
                    guard
                        let target = pointers.load(
                            fromByteOffset: i * MemoryLayout<UnsafeMutablePointer<UInt8>?>.stride,
                            as: UnsafeMutablePointer<UInt8>?.self)
                    else { continue }
                    let targetStride = Int(sizes.load(fromByteOffset: i * 4, as: Int32.self))
                    let row = min(plane.stride, targetStride)
                    for y in 0..<plane.height {
                        (target + y * targetStride).update(
                            from: (data.baseAddress! + plane.offset + y * plane.stride)
                                .assumingMemoryBound(to: UInt8.self), count: row)
                    }
                }
            }
        }
        frame.pointee.pts = pts
    }

    /// An owned frame of up to `samples` interleaved float samples (planar when `planar`, for AAC).
    public static func audio(samples: Int, channels: Int, sampleRate: Int, planar: Bool) throws(MediaError)
        -> MediaFrame
    {
        let owned = try MediaFrame()
        owned.frame.pointee.nb_samples = Int32(samples)
        owned.frame.pointee.format = (planar ? AV_SAMPLE_FMT_FLTP : AV_SAMPLE_FMT_FLT).rawValue
        owned.frame.pointee.sample_rate = Int32(sampleRate)
        av_channel_layout_default(&owned.frame.pointee.ch_layout, Int32(channels))
        try check(av_frame_get_buffer(owned.frame, 0), "allocate an audio frame")
        return owned
    }

    /// Fills this audio frame with `samples` interleaved frames of `channels` floats, stamped `pts`.
    public func fillAudio(_ samples: UnsafeBufferPointer<Float>, frames: Int, pts: Int64) throws(MediaError) {
        try check(av_frame_make_writable(frame), "prepare an audio frame")
        let channels = Int(frame.pointee.ch_layout.nb_channels)
        frame.pointee.nb_samples = Int32(frames)
        frame.pointee.pts = pts
        if frame.pointee.format == AV_SAMPLE_FMT_FLTP.rawValue {
            for c in 0..<channels {
                let plane = frame.pointee.extended_data[c]!.withMemoryRebound(to: Float.self, capacity: frames) { $0 }
                for i in 0..<frames { plane[i] = samples[i * channels + c] }
            }
        } else {
            frame.pointee.data.0!.withMemoryRebound(to: Float.self, capacity: frames * channels) { out in
                out.update(from: samples.baseAddress!, count: frames * channels)
            }
        }
    }
}

/// Scales NV12/I420 frames to another size or layout (libswscale, bilinear), into an owned frame: all of it, or a
/// `Letterbox` in it, the rest black.
public final class VideoScaler {
    private let context: OpaquePointer
    public let output: MediaFrame
    private let source: VideoFormat
    private let box: Letterbox
    /// With a letterbox: the scaled picture, copied into the box (libswscale writes a little past a row's end).
    private let picture: MediaFrame?
    private let fullRange: Bool

    /// `pixelFormat` nil: the source's. `box`: where in the frame the picture goes (nil: all of it); the rest is black,
    /// of the full 0-255 range when `fullRange`.
    public init(
        from source: VideoFormat, toWidth width: Int, height: Int, pixelFormat: PixelFormat? = nil,
        box: Letterbox? = nil, fullRange: Bool = false
    ) throws(MediaError) {
        let target = pixelFormat ?? source.pixelFormat
        let whole = Letterbox(x: 0, y: 0, width: width, height: height)
        let box = box ?? whole
        guard
            let context = sws_getContext(
                Int32(source.width), Int32(source.height), Self.av(source.pixelFormat),
                Int32(box.width), Int32(box.height), Self.av(target),
                SWS_BILINEAR, nil, nil, nil)
        else {
            throw MediaError("scale video", "libswscale cannot scale \(source) to \(box.width)x\(box.height) \(target)")
        }
        self.context = context
        self.source = source
        self.box = box
        self.fullRange = fullRange
        output = try MediaFrame.video(width: width, height: height, pixelFormat: target)
        picture = box == whole ? nil : try MediaFrame.video(width: box.width, height: box.height, pixelFormat: target)
        // The bars, once: each frame goes into the box only.
        if picture != nil { try output.fillBlack(whole, fullRange: fullRange) }
    }

    deinit { sws_freeContext(context) }

    /// libav's name for `format`.
    static func av(_ format: PixelFormat) -> AVPixelFormat {
        switch format {
        case .nv12: AV_PIX_FMT_NV12
        case .i420: AV_PIX_FMT_YUV420P
        case .bgrx: AV_PIX_FMT_BGR0
        }
    }

    /// Black in `area` of the next frames, where no picture goes (with a letterbox: `area` out of the box).
    public func blank(_ area: Letterbox) throws(MediaError) {
        guard picture != nil else { return }
        try check(av_frame_make_writable(output.frame), "prepare a scaled frame")
        try output.fillBlack(area, fullRange: fullRange)
    }

    /// Scales `data` (laid out as the source format) into `output`, stamped `pts`.
    public func scale(_ data: UnsafeRawBufferPointer, pts: Int64) throws(MediaError) -> MediaFrame {
        // (A copy, bars included, if an encoder still holds the frame.)
        try check(av_frame_make_writable(output.frame), "prepare a scaled frame")
        let scaled = picture ?? output
        let planes = source.planes
        var sources: [UnsafePointer<UInt8>?] = planes.map {
            data.baseAddress!.advanced(by: $0.offset).assumingMemoryBound(to: UInt8.self)
        }
        var strides: [Int32] = planes.map { Int32($0.stride) }
        sources += Array(repeating: nil, count: 4 - sources.count)
        strides += Array(repeating: 0, count: 4 - strides.count)
        let targets = scaled.planes.map { UnsafeMutablePointer<UInt8>?($0.data) } + [nil, nil]
        let targetStrides = scaled.planes.map { Int32($0.stride) } + [0, 0]
        try check(sws_scale(context, sources, strides, 0, Int32(source.height), targets, targetStrides), "scale video")
        if let picture { output.place(picture, at: box) }
        output.frame.pointee.pts = pts
        return output
    }
}

extension MediaFrame {
    /// An owned video frame's planes (2 for NV12, 3 for I420): where each starts and its row stride.
    var planes: [(data: UnsafeMutablePointer<UInt8>, stride: Int)] {
        let count = frame.pointee.format == AV_PIX_FMT_YUV420P.rawValue ? 3 : 2
        let pointers = withUnsafeBytes(of: frame.pointee.data) {
            Array($0.bindMemory(to: UnsafeMutablePointer<UInt8>?.self))
        }
        let strides = withUnsafeBytes(of: frame.pointee.linesize) { Array($0.bindMemory(to: Int32.self)) }
        return (0..<count).map { (pointers[$0]!, Int(strides[$0])) }
    }

    /// The planes of `area` of this 4:2:0 frame: where each starts, its row stride, and its bytes a row and rows.
    private func planes(of area: Letterbox) -> [(data: UnsafeMutablePointer<UInt8>, stride: Int, bytes: Int, rows: Int)]
    {
        // Chroma has half the rows, and NV12's interleaved pairs take two bytes a pixel pair.
        let i420 = frame.pointee.format == AV_PIX_FMT_YUV420P.rawValue
        return planes.enumerated().map { index, plane in
            let chroma = index > 0
            let x = chroma && i420 ? area.x / 2 : area.x
            let y = chroma ? area.y / 2 : area.y
            return (
                plane.data + y * plane.stride + x, plane.stride, chroma && i420 ? area.width / 2 : area.width,
                chroma ? area.height / 2 : area.height
            )
        }
    }

    /// Copies `picture` (of `box`'s size and this frame's layout) into `box`.
    func place(_ picture: MediaFrame, at box: Letterbox) {
        for (from, into) in zip(picture.planes, planes(of: box)) {
            av_image_copy_plane(
                into.data, Int32(into.stride), from.data, Int32(from.stride), Int32(into.bytes), Int32(into.rows))
        }
    }

    /// Paints `area` black (of the full 0-255 range when `fullRange`).
    func fillBlack(_ area: Letterbox, fullRange: Bool) throws(MediaError) {
        let planes = planes(of: area)
        var pointers = planes.map { UnsafeMutablePointer<UInt8>?($0.data) } + [nil, nil]
        let strides = planes.map(\.stride) + [0, 0]
        try check(
            av_image_fill_black(
                &pointers, strides, AVPixelFormat(rawValue: frame.pointee.format),
                fullRange ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG,
                Int32(area.width), Int32(area.height)), "paint a frame's area black")
    }
}

/// What a video encoder is fed from captured frames: the frame itself, borrowed without a copy, when it has the
/// encoder's size and layout; otherwise a copy scaled or converted (NV12 to I420 for the encoders that take only I420)
/// with libswscale. A picture of another size is fitted into the encoder's, centred with black bars where its shape
/// differs (`Letterbox`): the size stays what the stream started with, and nothing is stretched.
public final class VideoInput {
    /// The size and layout the encoder takes.
    public let format: VideoFormat
    private let fullRange: Bool
    /// Where a frame that needs no scaling is copied to.
    private var copied: MediaFrame?
    private var scaler: VideoScaler?

    /// `fullRange`: the frames use the full 0-255 range (the bars' black is 0, not 16).
    public init(encoding format: VideoFormat, from input: VideoFormat, fullRange: Bool = false) throws(MediaError) {
        self.format = format
        self.fullRange = fullRange
        try inputChanged(to: input)
    }

    /// Captured frames now come in `input` (a resize, another area).
    public func inputChanged(to input: VideoFormat) throws(MediaError) {
        guard input != format else {
            scaler = nil
            return
        }
        scaler = try VideoScaler(
            from: input, toWidth: format.width, height: format.height,
            pixelFormat: format.pixelFormat,
            box: Letterbox(fitting: input.width, input.height, into: format.width, format.height),
            fullRange: fullRange)
    }

    /// Black in `area` of the next frame where the captured picture does not cover it (a letterbox's bars).
    public func blank(_ area: Letterbox) throws(MediaError) {
        try scaler?.blank(area)
    }

    /// The encoder's frame for captured `data` laid out as `layout`, stamped `time` (ns) in the 90 kHz time base: a copy
    /// (or the scaled picture), so that the sample's memory can be given back before the frame is encoded.
    public func frame(_ data: UnsafeRawBufferPointer, layout: VideoFormat, time: UInt64) throws(MediaError)
        -> MediaFrame
    {
        let pts = Encoder.videoPTS(time)
        if let scaler { return try scaler.scale(data, pts: pts) }
        if copied.map({ Int($0.frame.pointee.width) != layout.width || Int($0.frame.pointee.height) != layout.height })
            ?? true
        {
            copied = try MediaFrame.video(width: layout.width, height: layout.height, pixelFormat: layout.pixelFormat)
        }
        try copied!.copy(data, format: layout, pts: pts)
        return copied!
    }
}
