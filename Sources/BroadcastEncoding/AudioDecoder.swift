import BroadcastCore
import CFFmpeg

/// One libavcodec audio decoder: packets of a stream an encoder described (`StreamParameters`) in, interleaved float
/// out. The stream handler mixes the two tracks of the encoding it shares (app and mic, as record takes them) into its
/// one with it.
public final class AudioDecoder {
    private var context: UnsafeMutablePointer<AVCodecContext>?
    private var frame: UnsafeMutablePointer<AVFrame>?
    private let timeBase: TimeBase
    private var samples: [Float] = []
    /// The end of the last piece of sound (ns): the time of one whose frame has none.
    private var end: Int64 = 0
    /// What `decode` hands on: interleaved float, at the stream's rate and channels.
    public let format: AudioFormat

    public init(_ parameters: StreamParameters) throws(MediaError) {
        let operation = "open an audio decoder"
        guard parameters.kind == .audio, let codec = avcodec_find_decoder(AVCodecID(rawValue: parameters.codecID))
        else { throw MediaError(operation, "libavcodec has no decoder for this stream") }
        context = avcodec_alloc_context3(codec)
        frame = av_frame_alloc()
        var codecParameters = avcodec_parameters_alloc()
        defer { avcodec_parameters_free(&codecParameters) }
        guard let context, frame != nil, let codecParameters else { throw MediaError(operation, "out of memory") }
        try parameters.fill(codecParameters)
        try check(avcodec_parameters_to_context(context, codecParameters), operation)
        context.pointee.pkt_timebase = parameters.timeBase.av
        try check(avcodec_open2(context, codec, nil), operation)
        var format = AudioFormat(channels: Int(context.pointee.ch_layout.nb_channels), sampleFormat: .float32)
        format.sampleRate = Int(context.pointee.sample_rate)
        guard format.channels > 0, format.sampleRate > 0 else {
            throw MediaError(operation, "the stream names no channels or rate")
        }
        self.format = format
        timeBase = parameters.timeBase
    }

    deinit {
        avcodec_free_context(&context)
        av_frame_free(&frame)
    }

    /// Decodes `packet` and hands `body` each piece of sound it holds: its samples (interleaved float, `format`), its
    /// frame count, and its time (ns, on the packet's clock; the encoder's priming already skipped by the decoder).
    public func decode(
        _ packet: EncodedPacket, _ body: (UnsafeRawBufferPointer, Int, Int64) throws(MediaError) -> Void
    ) throws(MediaError) {
        guard let context, let frame else { return }
        try packet.withAVPacket { avPacket throws(MediaError) in
            try check(avcodec_send_packet(context, avPacket), "decode audio")
        }
        while true {
            let received = avcodec_receive_frame(context, frame)
            if received == cff_error_eagain() || received == cff_error_eof() { return }
            try check(received, "decode audio")
            defer { av_frame_unref(frame) }
            let count = Int(frame.pointee.nb_samples)
            let pts = frame.pointee.best_effort_timestamp
            let time = pts == cff_nopts() ? end : timeBase.rescale(pts, to: .nanoseconds)
            end = time + Int64(count) * 1_000_000_000 / Int64(format.sampleRate)
            try interleave(frame, frames: count)
            try samples.withUnsafeBytes { bytes in
                Result { () throws(MediaError) in try body(bytes, count, time) }
            }.get()
        }
    }

    /// The frame's samples into `samples`, interleaved float, from float or 16-bit, planar or not.
    private func interleave(_ frame: UnsafeMutablePointer<AVFrame>, frames: Int) throws(MediaError) {
        let sampleFormat = AVSampleFormat(rawValue: frame.pointee.format)
        let packed = av_get_packed_sample_fmt(sampleFormat)
        let channels = format.channels
        guard Int(frame.pointee.ch_layout.nb_channels) == channels else {
            throw MediaError(
                "decode audio", "a frame of \(frame.pointee.ch_layout.nb_channels) channels, not \(channels)")
        }
        let planes = av_sample_fmt_is_planar(sampleFormat) != 0 ? channels : 1
        let data = (0..<planes).compactMap { frame.pointee.extended_data[$0].map { UnsafeRawPointer($0) } }
        guard packed == AV_SAMPLE_FMT_FLT || packed == AV_SAMPLE_FMT_S16, data.count == planes else {
            throw MediaError(
                "decode audio", "the decoder gives samples as \(sampleFormat.rawValue), not float or 16-bit")
        }
        /// Sample `index` of a plane.
        func value(_ plane: UnsafeRawPointer, _ index: Int) -> Float {
            packed == AV_SAMPLE_FMT_FLT
                ? plane.loadUnaligned(fromByteOffset: index * 4, as: Float.self)
                : Float(plane.loadUnaligned(fromByteOffset: index * 2, as: Int16.self)) / 32768
        }
        samples.removeAll(keepingCapacity: true)
        samples.reserveCapacity(frames * channels)
        for index in 0..<frames {
            for channel in 0..<channels {
                samples.append(planes == 1 ? value(data[0], index * channels + channel) : value(data[channel], index))
            }
        }
    }
}
