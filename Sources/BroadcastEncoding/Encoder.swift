import BroadcastCore
import CFFmpeg

/// What a video encoder is asked for. `bitRate` nil means constant quality (`crf`).
public struct VideoEncoderSettings: Equatable, Sendable {
    public var codec: VideoCodec
    public var width: Int
    public var height: Int
    public var framesPerSecond: Int
    /// kbit/s; nil: constant quality.
    public var bitRate: Int?
    /// With constant quality, the highest bit rate (kbit/s, over a second) the encoder keeps to: a busy screen's
    /// quality is lowered to it, so that a stream or replay sharing the encoding gets a rate a link carries. nil:
    /// `defaultMaxBitRate`; 0: none. H.264 and HEVC (SVT-AV1 1.4 takes no cap on its constant quality).
    public var maxBitRate: Int?
    /// Constant quality, on the codec's own scale (`VideoCodec.crfRange`).
    public var crf: Int
    /// An x264 preset name; other encoders take the one that compares (`VideoEncoderImplementation.options`).
    public var preset: String
    public var tune: String?
    /// Seconds of stream time between keyframes (`KeyframeSchedule`).
    public var keyframeInterval: Double
    /// Each keyframe on the first frame at or after its mark, never the nearest one before it: for a segmenter (HLS)
    /// that cuts at the first keyframe at or after each multiple of its segment duration.
    public var keyframesNeverEarly = false
    /// 0: as many as the encoder judges useful.
    public var threads: Int
    /// The frames use the full 0-255 range rather than BT.709's 16-235 (signalled in the stream).
    public var fullRange = false
    /// An H.264 profile libx264 keeps to (`baseline` is constrained baseline, as WebRTC wants it); nil: its choice.
    public var profile: String?

    /// `crf` and `preset` nil: the codec's defaults.
    public init(
        codec: VideoCodec = .h264, width: Int, height: Int, framesPerSecond: Int, bitRate: Int? = nil, crf: Int? = nil,
        preset: String? = nil, tune: String? = "zerolatency", keyframeInterval: Double = 2, threads: Int = 0
    ) {
        self.codec = codec
        self.width = width
        self.height = height
        self.framesPerSecond = framesPerSecond
        self.bitRate = bitRate
        self.crf = crf ?? codec.defaultCRF
        self.preset = preset ?? codec.defaultPreset
        self.tune = tune
        self.keyframeInterval = keyframeInterval
        self.threads = threads
    }

    /// The cap of constant quality unless one is given: 6000 kbit/s at 1080p30 (OBS's and Twitch's highest rate for
    /// it, within YouTube's), in proportion to the pixels a second, from 1000 (a small window) to 40 000 (4K60).
    public static func defaultMaxBitRate(width: Int, height: Int, framesPerSecond: Int) -> Int {
        let pixelsPerSecond = Double(width * height * max(1, framesPerSecond))
        return min(40_000, max(1000, Int((6000 * pixelsPerSecond / (1920 * 1080 * 30)).rounded())))
    }

    /// The cap in effect (kbit/s; nil: none).
    public var effectiveMaxBitRate: Int? {
        guard bitRate == nil, codec != .av1 else { return nil }
        let cap = maxBitRate ?? Self.defaultMaxBitRate(width: width, height: height, framesPerSecond: framesPerSecond)
        return cap > 0 ? cap : nil
    }
}

public struct AudioEncoderSettings: Equatable, Sendable {
    /// An FFmpeg encoder name: `libopus` or `aac`.
    public var codec: String
    public var sampleRate: Int
    public var channels: Int
    /// kbit/s.
    public var bitRate: Int
    /// libopus complexity 0-10 (ignored by other encoders).
    public var complexity: Int?

    public init(codec: String = "libopus", sampleRate: Int = 48000, channels: Int, bitRate: Int, complexity: Int? = nil)
    {
        self.codec = codec
        self.sampleRate = sampleRate
        self.channels = channels
        self.bitRate = bitRate
        self.complexity = complexity
    }
}

/// Where encoded packets go: a muxer, or a queue in front of one.
public protocol PacketSink: AnyObject {
    /// Takes one packet of `stream`.
    func write(_ packet: EncodedPacket, stream: Int) throws(MediaError)
}

/// One libavcodec encoder: libx264, libx265 or SVT-AV1 (libaom) for video (`VideoEncoderImplementation`),
/// libopus or AAC for audio (interleaved float in). Frames go in with `encode`, packets come out of it.
public final class Encoder {
    package let context: UnsafeMutablePointer<AVCodecContext>
    private let packet: UnsafeMutablePointer<AVPacket>
    public let kind: String
    /// For video, which encoder this is.
    public private(set) var implementation: VideoEncoderImplementation?
    /// For video, when keyframes are due; nil: the encoder takes no forced keyframes and makes one every
    /// `keyframeInterval` × `framesPerSecond` frames it encodes, so it must be given every frame.
    public private(set) var keyframes: KeyframeSchedule?
    /// What players call the stream it feeds ("App audio", "Microphone"), set before the stream is added.
    public var title: String?

    /// Video time base: 90 kHz, the usual one for H.264 in MP4 and Matroska.
    public static let videoTimeBase = TimeBase.video

    /// A time in ns in `videoTimeBase`.
    public static func videoPTS(_ nanoseconds: UInt64) -> Int64 { Int64((nanoseconds * 9 + 50_000) / 100_000) }

    private init(
        codecName: String, kind: String, configure: (UnsafeMutablePointer<AVCodecContext>) throws(MediaError) -> Void
    ) throws(MediaError) {
        guard let codec = avcodec_find_encoder_by_name(codecName) else {
            throw MediaError(
                "open the \(kind) encoder",
                "this FFmpeg has no \(codecName) encoder (install Debian's libavcodec59, built with it)")
        }
        guard let context = avcodec_alloc_context3(codec), let packet = av_packet_alloc() else {
            throw MediaError("open the \(kind) encoder", "out of memory")
        }
        self.context = context
        self.packet = packet
        self.kind = kind
        try configure(context)  // on failure, deinit frees both
    }

    deinit {
        var context: UnsafeMutablePointer<AVCodecContext>? = self.context
        avcodec_free_context(&context)
        var packet: UnsafeMutablePointer<AVPacket>? = self.packet
        av_packet_free(&packet)
    }

    /// A video encoder for `settings.codec`, the best this FFmpeg has (`VideoEncoderImplementation.best`), or
    /// `implementation`. It takes frames in `implementation.inputFormat(for:)`. `globalHeader`: the container
    /// keeps the parameter sets in its header (MP4, Matroska), not in keyframes.
    public static func video(
        _ settings: VideoEncoderSettings, pixelFormat: PixelFormat, globalHeader: Bool,
        implementation: VideoEncoderImplementation? = nil
    ) throws(MediaError) -> Encoder {
        let chosen: VideoEncoderImplementation
        if let implementation {
            chosen = implementation
        } else {
            chosen = try VideoEncoderImplementation.best(for: settings.codec)
        }
        let what = "the \(settings.codec.displayName) encoder (\(chosen.encoderName))"
        let encoder = try Encoder(codecName: chosen.encoderName, kind: settings.codec.displayName) {
            context throws(MediaError) in
            context.pointee.width = Int32(settings.width)
            context.pointee.height = Int32(settings.height)
            context.pointee.pix_fmt = pixelFormat == .i420 ? AV_PIX_FMT_YUV420P : AV_PIX_FMT_NV12
            context.pointee.time_base = videoTimeBase.av
            context.pointee.framerate = AVRational(num: Int32(settings.framesPerSecond), den: 1)
            // Keyframes come by time, forced (`encodeVideo`). The encoder's own count of frames stays as a backstop
            // at twice the interval's: each forced keyframe starts it again, so it never comes while they do, nor
            // a frame before one. An encoder that takes no forced keyframes counts the interval itself.
            let frames = max(1, Int((settings.keyframeInterval * Double(settings.framesPerSecond)).rounded()))
            context.pointee.gop_size = Int32(chosen.forcesKeyframes(settings) ? 2 * frames : frames)
            // Packets come in presentation order (Muxer.writeHoldingBack counts on it).
            context.pointee.max_b_frames = 0
            context.pointee.thread_count = Int32(settings.threads)
            // The capture path converts with BT.709, in the range broadcastd says: the stream says the same.
            context.pointee.color_range = settings.fullRange ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG
            context.pointee.colorspace = AVCOL_SPC_BT709
            context.pointee.color_primaries = AVCOL_PRI_BT709
            context.pointee.color_trc = AVCOL_TRC_BT709
            if globalHeader { context.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER }
            if let bitRate = settings.bitRate {
                context.pointee.bit_rate = Int64(bitRate) * 1000
                // A VBV of one second keeps the rate near the target, as streaming needs (SVT-AV1 refuses a
                // maximum equal to the target; it keeps the rate with its own buffer).
                if chosen != .libsvtav1 {
                    context.pointee.rc_max_rate = Int64(bitRate) * 1000
                    context.pointee.rc_buffer_size = Int32(bitRate * 1000)
                }
            } else if let cap = settings.effectiveMaxBitRate {
                context.pointee.rc_max_rate = Int64(cap) * 1000
                context.pointee.rc_buffer_size = Int32(cap * 1000)
            }
            try open(context, options: chosen.options(settings), what: what)
        }
        encoder.implementation = chosen
        if chosen.forcesKeyframes(settings) {
            let halfFrame = Int64(90000 / max(1, settings.framesPerSecond) / 2)
            encoder.keyframes = KeyframeSchedule(
                interval: Int64((settings.keyframeInterval * 90000).rounded()),
                slack: settings.keyframesNeverEarly ? 0 : halfFrame)
        }
        return encoder
    }

    public static func audio(_ settings: AudioEncoderSettings, globalHeader: Bool) throws(MediaError) -> Encoder {
        try Encoder(codecName: settings.codec, kind: settings.codec == "aac" ? "AAC" : "Opus") {
            context throws(MediaError) in
            context.pointee.sample_rate = Int32(settings.sampleRate)
            context.pointee.sample_fmt = settings.codec == "aac" ? AV_SAMPLE_FMT_FLTP : AV_SAMPLE_FMT_FLT
            av_channel_layout_default(&context.pointee.ch_layout, Int32(settings.channels))
            context.pointee.bit_rate = Int64(settings.bitRate) * 1000
            context.pointee.time_base = AVRational(num: 1, den: Int32(settings.sampleRate))
            if globalHeader { context.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER }
            var options: [String: String] = [:]
            if settings.codec == "libopus" {
                options["application"] = "audio"
                if let complexity = settings.complexity { context.pointee.compression_level = Int32(complexity) }
            }
            try open(context, options: options, what: "the \(settings.codec) encoder")
        }
    }

    private static func open(_ context: UnsafeMutablePointer<AVCodecContext>, options: [String: String], what: String)
        throws(MediaError)
    {
        var dictionary: OpaquePointer?
        for (key, value) in options { av_dict_set(&dictionary, key, value, 0) }
        defer { av_dict_free(&dictionary) }
        try check(avcodec_open2(context, context.pointee.codec, &dictionary), "open \(what)")
        if let unused = av_dict_get(dictionary, "", nil, AV_DICT_IGNORE_SUFFIX) {
            throw MediaError(
                "open \(what)",
                "it does not take the value '\(String(cString: unused.pointee.value))' for '\(String(cString: unused.pointee.key))'"
            )
        }
    }

    /// Changes a bit-rate-driven video encoder's rate (kbit/s) from the next frame on; libx264
    /// reconfigures itself without a new keyframe (the others do not: `changesBitRateWhileRunning`).
    public func setVideoBitRate(_ kbps: Int) {
        context.pointee.bit_rate = Int64(kbps) * 1000
        context.pointee.rc_max_rate = Int64(kbps) * 1000
        context.pointee.rc_buffer_size = Int32(kbps * 1000)
    }

    /// Samples per audio frame the encoder wants (the last may be shorter); 0 for video.
    public var frameSize: Int { Int(context.pointee.frame_size) }
    public var timeBase: TimeBase { TimeBase(context.pointee.time_base) }
    public var mediaKind: MediaKind { context.pointee.codec_type == AVMEDIA_TYPE_VIDEO ? .video : .audio }

    /// What a muxer needs to add a stream of this encoder's packets (its parameter sets once it is open).
    public var parameters: StreamParameters {
        get throws(MediaError) {
            guard let target = avcodec_parameters_alloc() else {
                throw MediaError("describe the \(kind) stream", "out of memory")
            }
            var owned: UnsafeMutablePointer<AVCodecParameters>? = target
            defer { avcodec_parameters_free(&owned) }
            try check(avcodec_parameters_from_context(target, context), "describe the \(kind) stream")
            var parameters = StreamParameters(target, timeBase: timeBase)
            parameters.title = title
            if mediaKind == .video { parameters.frameRate = TimeBase(context.pointee.framerate) }
            return parameters
        }
    }

    /// Whether a video frame at `pts` would be a keyframe by time.
    public func keyframeDue(at pts: Int64) -> Bool { keyframes?.isDue(at: pts) ?? false }

    /// Encodes a video frame as `encode` does: a keyframe (an IDR) when one is due by time or `keyframe` asks for one.
    public func encodeVideo(
        _ frame: MediaFrame, keyframe asked: Bool = false, _ body: (EncodedPacket) throws(MediaError) -> Void
    ) throws(MediaError) {
        markKeyframe(frame, asked: asked)
        try encode(frame, body)
    }

    /// Makes `frame` a keyframe when one is due by time or `asked` (what `encodeVideo` does before it encodes).
    func markKeyframe(_ frame: MediaFrame, asked: Bool) {
        let pts = frame.frame.pointee.pts
        let key = asked || keyframeDue(at: pts)
        if key { keyframes?.made(at: pts) }
        frame.frame.pointee.pict_type = key ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE
    }

    /// Encodes `frame` (nil: flush), then hands every packet that is ready to `body`. The frame's
    /// memory is not used after this returns.
    public func encode(_ frame: MediaFrame?, _ body: (EncodedPacket) throws(MediaError) -> Void) throws(MediaError) {
        try encode(frame?.frame, body)
    }

    private func encode(
        _ frame: UnsafeMutablePointer<AVFrame>?, _ body: (EncodedPacket) throws(MediaError) -> Void
    ) throws(MediaError) {
        let sent = avcodec_send_frame(context, frame)
        if sent < 0 && !(frame == nil && sent == cff_error_eof()) { throw MediaError("encode \(kind)", code: sent) }
        while true {
            let received = avcodec_receive_packet(context, packet)
            if received == cff_error_eagain() || received == cff_error_eof() { return }
            try check(received, "encode \(kind)")
            defer { av_packet_unref(packet) }
            try body(try EncodedPacket(packet, kind: mediaKind, timeBase: timeBase))
        }
    }
}
