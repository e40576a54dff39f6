import CFFmpeg

/// A time base: one tick lasts `numerator`/`denominator` seconds.
public struct TimeBase: Hashable, Sendable, CustomStringConvertible {
    public var numerator: Int32
    public var denominator: Int32

    public init(_ numerator: Int32, _ denominator: Int32) {
        self.numerator = numerator
        self.denominator = denominator
    }

    /// Nanoseconds: file and capture times.
    public static let nanoseconds = TimeBase(1, 1_000_000_000)
    /// 90 kHz: every video encoder's (`Encoder.videoTimeBase`).
    public static let video = TimeBase(1, 90000)

    /// `value` of this time base in `other`, rounded to the nearest tick (libavutil's `av_rescale_q`).
    public func rescale(_ value: Int64, to other: TimeBase) -> Int64 { av_rescale_q(value, av, other.av) }

    package var av: AVRational { AVRational(num: numerator, den: denominator) }
    package init(_ rational: AVRational) { self.init(rational.num, rational.den) }

    public var description: String { "\(numerator)/\(denominator)" }
}

/// What a stream carries.
public enum MediaKind: String, Sendable {
    case video
    case audio
}

/// One encoded packet as a muxer takes it, owning its bytes: what came out of an encoder, kept in the replay buffer,
/// queued for a destination, or (later) read from shared memory. Its times are in `timeBase`, the encoder's (video:
/// 90 kHz, `TimeBase.video`; audio: 1/sample rate), the encoder's own clock, from 0 at the first frame of the file.
/// Copies of a packet share its bytes (`PacketBytes`). A gap (frames the capture lost, a pause) shows in the times:
/// libavcodec's encoders mark no discontinuity of their own.
public struct EncodedPacket: Sendable {
    public var kind: MediaKind
    /// The coded bytes as the encoder made them, shared by the packet's copies (H.264 and HEVC: Annex B NAL units;
    /// their parameter sets are in the stream's `extradata` when the container keeps them in its header).
    public var data: PacketBytes
    /// Presentation and decoding time, in `timeBase`: the encoders make no B-frames (`max_b_frames` 0), so a packet
    /// is decoded in the order it is shown.
    public var pts: Int64
    public var dts: Int64
    /// How long it lasts, in `timeBase`; 0: not known (a video frame lasts until the next one:
    /// `Muxer.writeHoldingBack`).
    public var duration: Int64
    public var timeBase: TimeBase
    /// Decodable on its own: an IDR frame (video); every audio packet is one.
    public var isKeyframe: Bool
    /// No other frame refers to it: a decoder may skip it (MP4 says so in its `sdtp` box).
    public var isDisposable = false
    /// Samples a decoder drops from the start and the end of this audio packet (the last Opus packet's padding).
    public var skipSamples: (start: UInt32, end: UInt32) = (0, 0)

    public init(
        kind: MediaKind, data: PacketBytes, pts: Int64, dts: Int64? = nil, duration: Int64 = 0, timeBase: TimeBase,
        isKeyframe: Bool
    ) {
        self.kind = kind
        self.data = data
        self.pts = pts
        self.dts = dts ?? pts
        self.duration = duration
        self.timeBase = timeBase
        self.isKeyframe = isKeyframe
    }

    /// Its start in nanoseconds.
    public var time: Int64 { timeBase.rescale(pts, to: .nanoseconds) }

    /// The same packet, its times in `other` (libavcodec's `av_packet_rescale_ts`).
    public func rescaled(to other: TimeBase) -> EncodedPacket {
        var packet = self
        packet.pts = timeBase.rescale(pts, to: other)
        packet.dts = timeBase.rescale(dts, to: other)
        if duration > 0 { packet.duration = timeBase.rescale(duration, to: other) }
        packet.timeBase = other
        return packet
    }

    /// Its timestamps moved `ticks` earlier (of its time base).
    public mutating func shift(by ticks: Int64) {
        pts -= ticks
        dts -= ticks
    }
}

extension EncodedPacket {
    /// What `packet` holds (its bytes by reference, not copied), its times in `timeBase`.
    package init(_ packet: UnsafeMutablePointer<AVPacket>, kind: MediaKind, timeBase: TimeBase) throws(MediaError) {
        let p = packet.pointee
        self.init(
            kind: kind, data: try PacketBytes(referencing: packet), pts: p.pts, dts: p.dts, duration: p.duration,
            timeBase: timeBase, isKeyframe: p.flags & AV_PKT_FLAG_KEY != 0)
        isDisposable = p.flags & AV_PKT_FLAG_DISPOSABLE != 0
        var size = 0
        if let skip = av_packet_get_side_data(packet, AV_PKT_DATA_SKIP_SAMPLES, &size), size >= 8 {
            let bytes = UnsafeRawPointer(skip)
            skipSamples = (
                UInt32(littleEndian: bytes.loadUnaligned(as: UInt32.self)),
                UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
            )
        }
    }

    /// Hands `body` an AVPacket of this packet's bytes (a reference to them) and times (in `timeBase`), freed after it
    /// returns.
    package func withAVPacket<Result>(
        _ body: (UnsafeMutablePointer<AVPacket>) throws(MediaError) -> Result
    ) throws(MediaError) -> Result {
        guard let packet = av_packet_alloc() else { throw MediaError("write a packet", "out of memory") }
        defer {
            var owned: UnsafeMutablePointer<AVPacket>? = packet
            av_packet_free(&owned)
        }
        if let (buffer, start) = try data.reference() {
            packet.pointee.buf = buffer
            packet.pointee.data = start
            packet.pointee.size = Int32(data.count)
        }
        packet.pointee.pts = pts
        packet.pointee.dts = dts
        packet.pointee.duration = duration
        packet.pointee.time_base = timeBase.av
        packet.pointee.flags = (isKeyframe ? AV_PKT_FLAG_KEY : 0) | (isDisposable ? AV_PKT_FLAG_DISPOSABLE : 0)
        if skipSamples != (0, 0) {
            guard let side = av_packet_new_side_data(packet, AV_PKT_DATA_SKIP_SAMPLES, 10) else {
                throw MediaError("write a packet", "out of memory")
            }
            let bytes = UnsafeMutableRawPointer(side)
            bytes.storeBytes(of: skipSamples.start.littleEndian, as: UInt32.self)
            bytes.storeBytes(of: skipSamples.end.littleEndian, toByteOffset: 4, as: UInt32.self)
            bytes.storeBytes(of: 0, toByteOffset: 8, as: UInt16.self)
        }
        return try body(packet)
    }
}
