import CFFmpeg

/// Where encoded packets go: a muxer, or a queue in front of one.
public protocol PacketSink: AnyObject {
    /// Takes one packet of `stream`, its timestamps in `timeBase` (the packet's data may be moved out).
    func write(_ packet: UnsafeMutablePointer<AVPacket>, stream: Int, timeBase: AVRational) throws(MediaError)
}

/// Writes encoded streams into a file or a network URL through libavformat.
public final class Muxer: PacketSink {
    /// The containers broadcastd writes.
    public enum Container: String, Sendable {
        /// MP4 in fragments of at most a second: everything up to the last fragment plays even if
        /// the process dies.
        case fragmentedMP4 = "mp4"
        case matroska
        /// MPEG transport stream, for SRT.
        case mpegts
        /// FLV, for RTMP.
        case flv
        /// HLS: a playlist and fMP4 (CMAF) segments that libavformat's hls muxer writes itself (to files,
        /// or to an HTTP origin by PUT); its options come through `formatOptions`.
        case hls

        /// From a file name's extension, or nil for one broadcastd does not write.
        public init?(fileExtension: String) {
            switch fileExtension.lowercased() {
            case "mp4", "m4v", "mov": self = .fragmentedMP4
            case "mkv": self = .matroska
            default: return nil
            }
        }

        var formatName: String { self == .fragmentedMP4 ? "mp4" : rawValue }

        /// Whether libavformat 5.1 writes `codec` into this container so that receivers decode it: FLV has
        /// H.264 only (the Enhanced RTMP codecs came in FFmpeg 6.1); its MPEG-TS muxer has no AV1 mapping
        /// (it writes AV1 as private data, stream type 0x06, which ffmpeg's own demuxer reads as bin_data).
        public func carries(_ codec: VideoCodec) -> Bool {
            switch (self, codec) {
            case (_, .h264), (.fragmentedMP4, _), (.matroska, _), (.mpegts, .hevc): true
            case (.flv, _), (.mpegts, .av1), (.hls, _): false
            }
        }
    }

    /// Options for the output's protocol (avio_open2), e.g. `rw_timeout` for a network URL.
    public var ioOptions: [String: String] = [:]
    /// Options for the muxer itself (avformat_write_header), after the container's own.
    public var formatOptions: [String: String] = [:]

    /// An output the caller opened and owns (e.g. over a socket of its own), instead of `url` opened
    /// through libavformat's protocols; it must outlive the muxer, which never closes it. Before `start`.
    public var customIO: UnsafeMutablePointer<AVIOContext>?

    /// HLS to an HTTP origin: its DELETE requests (of old segments) go without a body, which nginx's
    /// WebDAV requires (libavformat's http sends an empty chunked one). Before `start`.
    public func sendDeleteWithoutBody() {
        if let context { cff_delete_without_body(context) }
    }
    /// How long (µs) packets may wait to be interleaved with the other streams' when one of them
    /// pauses (a still screen); a live stream keeps this short.
    public var maxInterleaveDelta: Int64 = 1_000_000
    /// Whether packets are interleaved by time across streams before they are written (held until every
    /// stream has caught up, at most `maxInterleaveDelta`); a live MPEG-TS stream writes each as it comes, so
    /// that video never waits for audio that is placed later.
    public var interleaved = true
    /// How errors name the output: the URL, unless it carries a secret (a stream key).
    public var displayURL: String
    private var context: UnsafeMutablePointer<AVFormatContext>?
    private let url: String
    private let container: Container
    public private(set) var started = false

    public init(url: String, container: Container) throws(MediaError) {
        var context: UnsafeMutablePointer<AVFormatContext>?
        try check(avformat_alloc_output_context2(&context, nil, container.formatName, url), "prepare the \(container.formatName) muxer")
        self.context = context
        self.url = url
        self.displayURL = url
        self.container = container
        // Each packet goes to the file (or socket) when written, not when a buffer fills.
        context!.pointee.flush_packets = 1
    }

    deinit {
        for (packet, _) in held.values { var owned: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&owned) }
        if let context {
            if started { closeOutput(context) }
            avformat_free_context(context)
        }
    }

    /// Whether encoders must put their parameter sets in the header (`Encoder` `globalHeader`).
    public var wantsGlobalHeader: Bool { (context!.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER) != 0 }

    /// Adds a stream carrying what `encoder` produces; returns its index.
    @discardableResult
    public func addStream(for encoder: Encoder) throws(MediaError) -> Int {
        guard let stream = avformat_new_stream(context, nil) else { throw MediaError("add a stream", "out of memory") }
        try check(avcodec_parameters_from_context(stream.pointee.codecpar, encoder.context), "add a \(encoder.kind) stream")
        // HEVC in MP4 as `hvc1` (parameter sets in the header only), which Apple's players require and
        // every other takes; libavformat's default, `hev1`, QuickTime and Safari refuse.
        if container == .fragmentedMP4 && encoder.context.pointee.codec_id == AV_CODEC_ID_HEVC {
            stream.pointee.codecpar.pointee.codec_tag = Self.tag("hvc1")
        }
        stream.pointee.time_base = encoder.timeBase
        return Int(stream.pointee.index)
    }

    /// A four-character code as libavformat stores it (MKTAG).
    static func tag(_ code: String) -> UInt32 {
        code.utf8.prefix(4).enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
    }

    /// Whether this container, as libavformat 5.1 writes it, carries `codec` so that receivers decode it.
    public func carries(_ codec: VideoCodec) -> Bool { container.carries(codec) }

    /// Records how the picture is shown upright (a display matrix): turned `degrees` clockwise,
    /// after a left-right flip when `mirrored`. Before `start`.
    public func setOrientation(stream index: Int, degrees: Int, mirrored: Bool) {
        guard degrees % 360 != 0 || mirrored, let stream = context?.pointee.streams[index],
              let matrix = av_stream_new_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, 9 * 4) else { return }
        matrix.withMemoryRebound(to: Int32.self, capacity: 9) { matrix in
            // av_display_rotation_set takes the clockwise angle (ffprobe then reports it as a negative,
            // counter-clockwise rotation, as for a phone's portrait video).
            av_display_rotation_set(matrix, Double(degrees))
            if mirrored { av_display_matrix_flip(matrix, 1, 0) }
        }
    }

    /// Opens the output and writes the header.
    public func start() throws(MediaError) {
        guard let context else { return }
        var options: OpaquePointer?
        defer { av_dict_free(&options) }
        switch container {
        case .fragmentedMP4:
            av_dict_set(&options, "movflags", "+frag_keyframe+empty_moov+default_base_moof", 0)
            av_dict_set(&options, "frag_duration", "1000000", 0)
        case .matroska:
            av_dict_set(&options, "cluster_time_limit", "1000", 0)
        case .mpegts, .flv, .hls:
            break
        }
        for (key, value) in formatOptions { av_dict_set(&options, key, value, 0) }
        if let customIO {
            context.pointee.pb = customIO
            context.pointee.flags |= AVFMT_FLAG_CUSTOM_IO
        } else if (context.pointee.oformat.pointee.flags & AVFMT_NOFILE) == 0 {
            var io: OpaquePointer?
            defer { av_dict_free(&io) }
            for (key, value) in ioOptions { av_dict_set(&io, key, value, 0) }
            try check(avio_open2(&context.pointee.pb, url, AVIO_FLAG_WRITE, nil, &io), "open \(displayURL) for writing")
        }
        started = true
        context.pointee.max_interleave_delta = maxInterleaveDelta
        // Written as they come, the first packet (video at 0) would fix the shift that keeps timestamps
        // non-negative before the audio encoders' priming (AAC: -21 ms) shows up, and those would wrap: all
        // streams start 0.1 s later instead.
        if !interleaved { context.pointee.output_ts_offset = 100_000 }
        try check(avformat_write_header(context, &options), "write the \(container.formatName) header to \(displayURL)")
    }

    /// Writes one packet of `stream`, its timestamps in `timeBase`.
    public func write(_ packet: UnsafeMutablePointer<AVPacket>, stream: Int, timeBase: AVRational) throws(MediaError) {
        guard let context else { return }
        packet.pointee.stream_index = Int32(stream)
        av_packet_rescale_ts(packet, timeBase, context.pointee.streams[stream]!.pointee.time_base)
        try check(interleaved ? av_interleaved_write_frame(context, packet) : av_write_frame(context, packet), "write to \(displayURL)")
    }

    /// Packets held back until the next one of their stream says how long they last.
    private var held: [Int: (packet: UnsafeMutablePointer<AVPacket>, timeBase: AVRational)] = [:]

    /// Like `write`, for a stream whose frames last until the next one (variable frame rate, no
    /// B-frames): the packet is written when the next one comes, or at `finish`, with its duration.
    public func writeHoldingBack(_ packet: UnsafeMutablePointer<AVPacket>, stream: Int, timeBase: AVRational) throws(MediaError) {
        try release(stream, until: packet.pointee.dts)
        guard let copy = av_packet_alloc() else { throw MediaError("write to \(displayURL)", "out of memory") }
        av_packet_move_ref(copy, packet)
        held[stream] = (copy, timeBase)
    }

    /// Writes the held packet of `stream`, lasting until `end` (in its time base).
    private func release(_ stream: Int, until end: Int64) throws(MediaError) {
        guard let (packet, timeBase) = held.removeValue(forKey: stream) else { return }
        defer { var owned: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&owned) }
        packet.pointee.duration = max(1, end - packet.pointee.pts)
        try write(packet, stream: stream, timeBase: timeBase)
    }

    /// Writes the packet `stream` holds back, ending at `end` (a time in the time base it was written with).
    public func endStream(_ stream: Int, at end: Int64) throws(MediaError) {
        try release(stream, until: end)
    }

    /// Bytes written so far.
    public var bytesWritten: Int64 {
        guard let pb = context?.pointee.pb else { return 0 }
        return avio_tell(pb)
    }

    /// Writes what is buffered and the trailer, and closes the output. Safe to call once only.
    public func finish() throws(MediaError) {
        guard let context, started else { return }
        defer {
            closeOutput(context)
            started = false
        }
        try check(av_write_trailer(context), "finish \(displayURL)")
    }

    /// Closes the output libavformat opened; a custom one is flushed and left to its owner.
    private func closeOutput(_ context: UnsafeMutablePointer<AVFormatContext>) {
        if customIO != nil {
            if let pb = context.pointee.pb { avio_flush(pb) }
            context.pointee.pb = nil
        } else {
            avio_closep(&context.pointee.pb)
        }
    }
}
