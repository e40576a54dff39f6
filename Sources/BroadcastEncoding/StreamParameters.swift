import CFFmpeg

/// What a muxer needs to add a stream, as a value: the codec, its parameter sets (`extradata`), the picture's size and
/// colours or the sound's rate and channels, the time base of its packets, and how players name it. Made from an
/// encoder (`Encoder.parameters`) and turned back into libavcodec's `AVCodecParameters` only by the muxer, so that a
/// stream can be described in bytes that came from another process.
public struct StreamParameters: Equatable, Sendable {
    public var kind: MediaKind
    /// libavcodec's codec id (`AVCodecID`) and the container's tag for it (0: the container's choice).
    package var codecID: UInt32
    package var codecTag: UInt32 = 0
    /// The codec's global header: H.264's and HEVC's parameter sets, AV1's sequence header, OpusHead.
    public var extradata: [UInt8] = []
    /// The pixel (`AVPixelFormat`) or sample format (`AVSampleFormat`).
    package var format: Int32 = -1
    public var bitRate: Int64 = 0
    package var bitsPerCodedSample: Int32 = 0
    package var bitsPerRawSample: Int32 = 0
    package var profile: Int32 = 0
    package var level: Int32 = 0
    public var width = 0
    public var height = 0
    package var sampleAspectRatio = TimeBase(0, 1)
    package var fieldOrder: UInt32 = 0
    package var colorRange: UInt32 = 0
    package var colorPrimaries: UInt32 = 0
    package var colorTransfer: UInt32 = 0
    package var colorSpace: UInt32 = 0
    package var chromaLocation: UInt32 = 0
    package var videoDelay: Int32 = 0
    /// Channels, and their layout as a mask of libavutil's channels when it has one (0: unspecified order).
    public var channels = 0
    package var channelMask: UInt64 = 0
    public var sampleRate = 0
    package var blockAlign: Int32 = 0
    /// Samples per audio packet (0: varies, or video).
    public var frameSize = 0
    /// Samples the decoder drops at the start of the stream (Opus's pre-skip); 0 for video.
    public var priming: Int64 = 0
    package var trailingPadding: Int32 = 0
    package var seekPreroll: Int32 = 0
    /// The time base of its packets' timestamps.
    public var timeBase: TimeBase
    /// A video stream's frame rate (the capture's), for players that take it from the container.
    public var frameRate: TimeBase?
    /// What players call the track ("App audio", "Microphone").
    public var title: String?

    public var isVideo: Bool { kind == .video }
    public var isHEVC: Bool { codecID == AV_CODEC_ID_HEVC.rawValue }

    /// A stream of `codecID` whose other parameters are to be filled in.
    package init(kind: MediaKind, codecID: UInt32, timeBase: TimeBase) {
        self.kind = kind
        self.codecID = codecID
        self.timeBase = timeBase
    }

    /// The parameters in `source`, its packets' times in `timeBase`.
    package init(_ source: UnsafePointer<AVCodecParameters>, timeBase: TimeBase) {
        let p = source.pointee
        kind = p.codec_type == AVMEDIA_TYPE_VIDEO ? .video : .audio
        codecID = p.codec_id.rawValue
        codecTag = p.codec_tag
        if let extradata = p.extradata, p.extradata_size > 0 {
            self.extradata = Array(UnsafeBufferPointer(start: extradata, count: Int(p.extradata_size)))
        }
        format = p.format
        bitRate = p.bit_rate
        bitsPerCodedSample = p.bits_per_coded_sample
        bitsPerRawSample = p.bits_per_raw_sample
        profile = p.profile
        level = p.level
        width = Int(p.width)
        height = Int(p.height)
        sampleAspectRatio = TimeBase(p.sample_aspect_ratio)
        fieldOrder = p.field_order.rawValue
        colorRange = p.color_range.rawValue
        colorPrimaries = p.color_primaries.rawValue
        colorTransfer = p.color_trc.rawValue
        colorSpace = p.color_space.rawValue
        chromaLocation = p.chroma_location.rawValue
        videoDelay = p.video_delay
        channels = Int(p.ch_layout.nb_channels)
        channelMask = p.ch_layout.order == AV_CHANNEL_ORDER_NATIVE ? p.ch_layout.u.mask : 0
        sampleRate = Int(p.sample_rate)
        blockAlign = p.block_align
        frameSize = Int(p.frame_size)
        priming = Int64(p.initial_padding)
        trailingPadding = p.trailing_padding
        seekPreroll = p.seek_preroll
        self.timeBase = timeBase
    }

    /// Writes these parameters into `target` (a stream's, freshly made).
    package func fill(_ target: UnsafeMutablePointer<AVCodecParameters>) throws(MediaError) {
        target.pointee.codec_type = kind == .video ? AVMEDIA_TYPE_VIDEO : AVMEDIA_TYPE_AUDIO
        target.pointee.codec_id = AVCodecID(rawValue: codecID)
        target.pointee.codec_tag = codecTag
        av_freep(&target.pointee.extradata)
        target.pointee.extradata_size = 0
        if !extradata.isEmpty {
            let padded = extradata.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)
            guard let memory = av_mallocz(padded)?.assumingMemoryBound(to: UInt8.self) else {
                throw MediaError("describe a stream", "out of memory")
            }
            memory.update(from: extradata, count: extradata.count)
            target.pointee.extradata = memory
            target.pointee.extradata_size = Int32(extradata.count)
        }
        target.pointee.format = format
        target.pointee.bit_rate = bitRate
        target.pointee.bits_per_coded_sample = bitsPerCodedSample
        target.pointee.bits_per_raw_sample = bitsPerRawSample
        target.pointee.profile = profile
        target.pointee.level = level
        target.pointee.width = Int32(width)
        target.pointee.height = Int32(height)
        target.pointee.sample_aspect_ratio = sampleAspectRatio.av
        target.pointee.field_order = AVFieldOrder(rawValue: fieldOrder)
        target.pointee.color_range = AVColorRange(rawValue: colorRange)
        target.pointee.color_primaries = AVColorPrimaries(rawValue: colorPrimaries)
        target.pointee.color_trc = AVColorTransferCharacteristic(rawValue: colorTransfer)
        target.pointee.color_space = AVColorSpace(rawValue: colorSpace)
        target.pointee.chroma_location = AVChromaLocation(rawValue: chromaLocation)
        target.pointee.video_delay = videoDelay
        av_channel_layout_uninit(&target.pointee.ch_layout)
        if channelMask != 0 {
            try check(av_channel_layout_from_mask(&target.pointee.ch_layout, channelMask), "describe a stream")
        } else if channels > 0 {
            target.pointee.ch_layout.order = AV_CHANNEL_ORDER_UNSPEC
            target.pointee.ch_layout.nb_channels = Int32(channels)
        }
        cff_set_old_channel_fields(target)
        target.pointee.sample_rate = Int32(sampleRate)
        target.pointee.block_align = blockAlign
        target.pointee.frame_size = Int32(frameSize)
        target.pointee.initial_padding = Int32(priming)
        target.pointee.trailing_padding = trailingPadding
        target.pointee.seek_preroll = seekPreroll
    }

    /// Says how many samples decoders drop at the start of the stream: for a stream cut out of a longer one, what its
    /// first packet holds from before the cut (Opus's pre-skip is in OpusHead, bytes 10-11, as well).
    public mutating func setPriming(_ samples: Int) {
        priming = Int64(samples)
        if extradata.count >= 19, extradata.starts(with: Array("OpusHead".utf8)) {
            extradata[10] = UInt8(samples & 0xff)
            extradata[11] = UInt8((samples >> 8) & 0xff)
        }
    }
}
