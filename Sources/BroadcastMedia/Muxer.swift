import BroadcastCore
import BroadcastEncoding
import CFFmpeg

#if canImport(Glibc)
    import Glibc
#endif

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
        /// NUT: any codec, timestamps in the streams' own time bases, exactly; the replay handler's fragment files.
        case nut

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
            case (_, .h264), (.fragmentedMP4, _), (.matroska, _), (.nut, _), (.mpegts, .hevc): true
            case (.flv, _), (.mpegts, .av1), (.hls, _): false
            }
        }
    }

    /// Options for the output's protocol (avio_open2), e.g. `rw_timeout` for a network URL.
    public var ioOptions: [String: String] = [:]
    /// Options for the muxer itself (avformat_write_header), after the container's own.
    public var formatOptions: [String: String] = [:]

    /// An output the caller writes itself (e.g. over a socket of its own), instead of `url` opened
    /// through libavformat's protocols; the muxer flushes it but never closes it. Before `start`.
    public var customOutput: CustomOutput?

    /// The outputs the muxer opens itself (HLS: the playlist, init file and segments) go through `watch`. Before
    /// `start`.
    public func watchOutputs(_ watch: OutputWatch) {
        guard let context else { return }
        watched = watch
        cff_watch_outputs(context, watch.watch)
    }
    private var watched: OutputWatch?
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
        try check(
            avformat_alloc_output_context2(&context, nil, container.formatName, url),
            "prepare the \(container.formatName) muxer")
        self.context = context
        self.url = url
        self.displayURL = url
        self.container = container
        // Each packet goes to the file (or socket) when written, not when a buffer fills.
        context!.pointee.flush_packets = 1
    }

    deinit {
        if let context {
            if started { closeOutput(context) }
            avformat_free_context(context)
        }
    }

    /// Whether encoders must put their parameter sets in the header (`Encoder` `globalHeader`).
    public var wantsGlobalHeader: Bool { (context!.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER) != 0 }

    /// A track as players show it: its title, and in MP4 its handler's name, which is what they read there; a video
    /// track's frame rate, the capture's, for players that take it from the container (Matroska's default duration):
    /// a quiet screen's frames are far apart, and their measured average says nothing of how the picture moves.
    private func describe(_ stream: UnsafeMutablePointer<AVStream>, title: String?, frameRate: AVRational?) {
        if let title {
            av_dict_set(&stream.pointee.metadata, "title", title, 0)
            if container == .fragmentedMP4 || container == .hls {
                av_dict_set(&stream.pointee.metadata, "handler_name", title, 0)
            }
        }
        if let frameRate, frameRate.num > 0, frameRate.den > 0 {
            stream.pointee.avg_frame_rate = frameRate
            stream.pointee.r_frame_rate = frameRate
        }
    }

    /// Adds a stream carrying packets described by `parameters` (an encoder's, or kept: the replay buffer's); returns
    /// its index.
    @discardableResult
    public func addStream(_ parameters: StreamParameters) throws(MediaError) -> Int {
        guard let stream = avformat_new_stream(context, nil) else { throw MediaError("add a stream", "out of memory") }
        try parameters.fill(stream.pointee.codecpar)
        // HEVC in MP4 as `hvc1` (parameter sets in the header only), which Apple's players require and
        // every other takes; libavformat's default, `hev1`, QuickTime and Safari refuse.
        if container == .fragmentedMP4 && parameters.isHEVC {
            stream.pointee.codecpar.pointee.codec_tag = Self.tag("hvc1")
        }
        stream.pointee.time_base = parameters.timeBase.av
        describe(stream, title: parameters.title, frameRate: parameters.frameRate?.av)
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
            let matrix = av_stream_new_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, 9 * 4)
        else { return }
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
        case .mpegts:
            // Each video PES says its length (when under 64 KiB), so that a receiver's demuxer hands a frame on once
            // it has all of it, not when the next one begins: a frame later at best, and a quiet screen's frames are
            // far apart.
            av_dict_set(&options, "omit_video_pes_length", "0", 0)
        case .flv, .hls, .nut:
            break
        }
        for (key, value) in formatOptions { av_dict_set(&options, key, value, 0) }
        if let customOutput {
            context.pointee.pb = customOutput.io
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

    /// Writes one packet of `stream`.
    public func write(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
        guard let context else { return }
        try packet.withAVPacket { avPacket throws(MediaError) in
            avPacket.pointee.stream_index = Int32(stream)
            av_packet_rescale_ts(avPacket, packet.timeBase.av, context.pointee.streams[stream]!.pointee.time_base)
            try check(
                interleaved ? av_interleaved_write_frame(context, avPacket) : av_write_frame(context, avPacket),
                "write to \(displayURL)")
        }
    }

    /// Packets held back until the next one of their stream says how long they last.
    private var held: [Int: EncodedPacket] = [:]

    /// Like `write`, for a stream whose frames last until the next one (variable frame rate, no
    /// B-frames): the packet is written when the next one comes, or at `finish`, with its duration.
    /// A frame stamped no later than the one before it (SVT-AV1 at a variable frame rate gave two frames the same
    /// time now and then: the MP4 muxer refused the second, and the recording ended) is taken a tick after it, as
    /// ffmpeg's own tool does; counted in `retimedFrames`.
    public func writeHoldingBack(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
        var packet = packet
        if let before = lastDTS[stream], packet.dts <= before {
            packet.dts = before + 1
            packet.pts = max(packet.pts, packet.dts)
            retimedFrames += 1
        }
        lastDTS[stream] = packet.dts
        try release(stream, until: packet.dts)
        held[stream] = packet
    }

    /// The dts of the last packet each stream held back.
    private var lastDTS: [Int: Int64] = [:]
    /// Frames `writeHoldingBack` moved a tick later than their encoder stamped them.
    public private(set) var retimedFrames = 0

    /// Writes the held packet of `stream`, lasting until `end` (in its time base).
    private func release(_ stream: Int, until end: Int64) throws(MediaError) {
        guard var packet = held.removeValue(forKey: stream) else { return }
        packet.duration = max(1, end - packet.pts)
        try write(packet, stream: stream)
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

    /// Adds chapters (libavformat's), times in ns of file time: before `start` they go into the header (MP4, Matroska);
    /// after it, only into the trailer, which Matroska writes them in (fragmented MP4, whose header is written first,
    /// does not).
    public func addChapters(_ chapters: [(start: Int64, end: Int64, title: String)]) throws(MediaError) {
        guard let context else { return }
        for chapter in chapters {
            guard let added = av_mallocz(MemoryLayout<AVChapter>.size)?.assumingMemoryBound(to: AVChapter.self) else {
                throw MediaError("add a chapter", "out of memory")
            }
            added.pointee.id = Int64(context.pointee.nb_chapters) + 1
            added.pointee.time_base = AVRational(num: 1, den: 1_000_000_000)
            added.pointee.start = chapter.start
            added.pointee.end = max(chapter.end, chapter.start)
            av_dict_set(&added.pointee.metadata, "title", chapter.title, 0)
            var array = UnsafeMutableRawPointer(context.pointee.chapters)
            var count = Int32(context.pointee.nb_chapters)
            av_dynarray_add(&array, &count, added)
            context.pointee.chapters = array?.assumingMemoryBound(to: UnsafeMutablePointer<AVChapter>?.self)
            context.pointee.nb_chapters = UInt32(count)
        }
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
        if customOutput != nil {
            if let pb = context.pointee.pb { avio_flush(pb) }
            context.pointee.pb = nil
        } else {
            avio_closep(&context.pointee.pb)
        }
    }
}

extension Muxer: EncodedOutput {
    /// The header goes out with the first frame, whose orientation it records.
    package func begin(videoStream: Int, orientation: Orientation) throws(MediaError) {
        guard !started else { return }
        setOrientation(stream: videoStream, degrees: Int(orientation.degrees), mirrored: orientation.mirrored)
        try start()
    }

    package func writeCopy(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
        try writeHoldingBack(packet, stream: stream)
    }

    package func pictureUnchanged(through time: Int64) throws(MediaError) {}
}

/// Reads the packets of a file libavformat wrote (the replay handler's fragment files), in the order they are stored.
public final class PacketReader {
    private var context: UnsafeMutablePointer<AVFormatContext>?
    private let packet: UnsafeMutablePointer<AVPacket>
    private let path: String

    public init(path: String) throws(MediaError) {
        self.path = path
        guard let packet = av_packet_alloc() else { throw MediaError("read \(path)", "out of memory") }
        self.packet = packet
        try check(avformat_open_input(&context, path, nil, nil), "open \(path)")
    }

    deinit {
        avformat_close_input(&context)
        var owned: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&owned)
    }

    /// The next packet and its stream's index, or nil at the end. Its times are in its stream's time base in the file;
    /// a packet NUT stored without a dts (where it equals the pts: no B-frames here) gets its pts.
    public func next() throws(MediaError) -> (packet: EncodedPacket, stream: Int)? {
        guard let context else { return nil }
        av_packet_unref(packet)
        let read = av_read_frame(context, packet)
        if read == cff_error_eof() { return nil }
        try check(read, "read \(path)")
        let stream = context.pointee.streams[Int(packet.pointee.stream_index)]!.pointee
        let kind: MediaKind = stream.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO ? .video : .audio
        var stored = try EncodedPacket(packet, kind: kind, timeBase: TimeBase(stream.time_base))
        if packet.pointee.dts == cff_nopts() { stored.dts = stored.pts }
        return (stored, Int(packet.pointee.stream_index))
    }
}
