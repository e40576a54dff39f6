import BroadcastCore
import FoundationEssentials

/// One encoded packet in a packet ring (`PacketRingLayout`): 64 bytes, little-endian.
///
/// | offset | bytes | what |
/// |---|---|---|
/// | 0 | 4 | the ring |
/// | 4 | 4 | the stream (its index in the encoder's streams) |
/// | 8 | 8 | the packet's sequence number in the ring |
/// | 16 | 8 | its offset in the ring |
/// | 24 | 4 | its length in bytes |
/// | 28 | 4 | flags: 1 keyframe, 2 disposable, 4 a copy of a keyframe at a later time, 8 lasts until the next |
/// | 32 | 8 | pts, in the stream's time base (signed) |
/// | 40 | 8 | dts |
/// | 48 | 8 | duration (0: not known) |
/// | 56 | 4 | samples a decoder drops from the start of the packet |
/// | 60 | 4 | and from its end |
public struct EncodedPacketHeader: Equatable, Sendable {
    public static let size = 64
    public var ring: UInt32
    public var stream: UInt32
    public var sequence: UInt64
    public var offset: UInt64
    public var length: UInt32
    public var flags: Flags
    public var pts: Int64
    public var dts: Int64
    public var duration: Int64
    public var skipStart: UInt32 = 0
    public var skipEnd: UInt32 = 0

    public struct Flags: OptionSet, Equatable, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Decodable on its own.
        public static let keyframe = Flags(rawValue: 1)
        /// No other frame refers to it.
        public static let disposable = Flags(rawValue: 2)
        /// A keyframe encoded before, sent again at a later time (a still screen's keyframe by time).
        public static let copy = Flags(rawValue: 4)
        /// A video frame that lasts until the next one of its stream.
        public static let lastsUntilNext = Flags(rawValue: 8)
        static let known: Flags = [.keyframe, .disposable, .copy, .lastsUntilNext]
    }

    public init(
        ring: UInt32, stream: UInt32, sequence: UInt64, offset: UInt64, length: UInt32, flags: Flags, pts: Int64,
        dts: Int64, duration: Int64
    ) {
        self.ring = ring
        self.stream = stream
        self.sequence = sequence
        self.offset = offset
        self.length = length
        self.flags = flags
        self.pts = pts
        self.dts = dts
        self.duration = duration
    }

    public func encode(into bytes: inout [UInt8]) {
        bytes.appendLittleEndian(ring)
        bytes.appendLittleEndian(stream)
        bytes.appendLittleEndian(sequence)
        bytes.appendLittleEndian(offset)
        bytes.appendLittleEndian(length)
        bytes.appendLittleEndian(flags.rawValue)
        bytes.appendLittleEndian(pts)
        bytes.appendLittleEndian(dts)
        bytes.appendLittleEndian(duration)
        bytes.appendLittleEndian(skipStart)
        bytes.appendLittleEndian(skipEnd)
    }

    /// The header in `p`; nil when it is not 64 bytes or has flags this revision does not know.
    public init?(decoding p: [UInt8]) {
        guard p.count == Self.size else { return nil }
        let flags = Flags(rawValue: p.loadLittleEndian(UInt32.self, at: 28))
        guard Flags.known.isSuperset(of: flags) else { return nil }
        ring = p.loadLittleEndian(UInt32.self, at: 0)
        stream = p.loadLittleEndian(UInt32.self, at: 4)
        sequence = p.loadLittleEndian(UInt64.self, at: 8)
        offset = p.loadLittleEndian(UInt64.self, at: 16)
        length = p.loadLittleEndian(UInt32.self, at: 24)
        self.flags = flags
        pts = p.loadLittleEndian(Int64.self, at: 32)
        dts = p.loadLittleEndian(Int64.self, at: 40)
        duration = p.loadLittleEndian(Int64.self, at: 48)
        skipStart = p.loadLittleEndian(UInt32.self, at: 56)
        skipEnd = p.loadLittleEndian(UInt32.self, at: 60)
    }
}

/// One stream an encoder makes, as its packets' readers need it to add the stream to a container: codecs and
/// formats by their libavcodec/libavutil names (what `ffmpeg -codecs`, `-pix_fmts` and `-sample_fmts` list), so that
/// a reader in any language can hand them to its own libavformat.
public struct EncodedStreamDescription: Codable, Equatable, Sendable {
    /// Its index in the encoder's streams (packets name it).
    public var stream: Int
    /// "video" or "audio".
    public var kind: String
    /// "h264", "hevc", "av1", "opus", "aac".
    public var codec: String
    /// The codec's global header (parameter sets, OpusHead), base64; absent when there is none.
    public var extradata: String?
    public var profile: Int?
    public var level: Int?
    public var bitRate: Int64?
    /// The time base of its packets' times: numerator and denominator.
    public var timeBase: [Int32]
    // Video.
    public var width: Int?
    public var height: Int?
    /// "yuv420p".
    public var pixelFormat: String?
    /// libavutil's names: "tv" or "pc"; "bt709"; "bt709"; "bt709"; "left".
    public var colorRange: String?
    public var colorPrimaries: String?
    public var colorTransfer: String?
    public var colorSpace: String?
    public var chromaLocation: String?
    public var frameRate: [Int32]?
    /// Clockwise degrees, and mirrored: how the picture is shown upright.
    public var rotation: Int?
    public var mirrored: Bool?
    // Audio.
    /// "flt", "fltp", "s16".
    public var sampleFormat: String?
    public var sampleRate: Int?
    public var channels: Int?
    /// libavutil's channel mask (0 or absent: unspecified order).
    public var channelMask: UInt64?
    /// Samples per packet (absent: varies).
    public var frameSize: Int?
    /// Samples decoders drop at the start (Opus's pre-skip).
    public var priming: Int64?
    /// Samples to decode before a point sought to (Opus: 80 ms).
    public var seekPreroll: Int?
    /// What players call the track ("App audio", "Microphone").
    public var title: String?

    public init(stream: Int, kind: String, codec: String, timeBase: [Int32]) {
        self.stream = stream
        self.kind = kind
        self.codec = codec
        self.timeBase = timeBase
    }

    /// `ticks` of its time base in nanoseconds (saturating: a peer's pts may be any number).
    public func nanoseconds(_ ticks: Int64) -> Int64 {
        guard timeBase.count == 2, timeBase[1] > 0 else { return 0 }
        let ns = Int128(ticks) * Int128(timeBase[0]) * 1_000_000_000 / Int128(timeBase[1])
        return Int64(clamping: ns)
    }

    /// A video stream's frame interval (ns), from its frame rate (nil: none told).
    public var frameInterval: Int64? {
        guard let rate = frameRate, rate.count == 2, rate[0] > 0, rate[1] > 0 else { return nil }
        return 1_000_000_000 * Int64(rate[1]) / Int64(rate[0])
    }

    /// The largest global header taken.
    public static let maxExtradata = 64 * 1024

    /// Why the description cannot be used, or nil: every number within what a stream can have.
    public var problem: String? {
        guard kind == "video" || kind == "audio" else { return "kind \(kind) is not video or audio" }
        guard timeBase.count == 2, timeBase[0] > 0, timeBase[1] > 0 else { return "time base \(timeBase) is not n/d" }
        if let extradata, extradata.count > (Self.maxExtradata + 2) / 3 * 4 {
            return "extradata is larger than \(Self.maxExtradata) bytes"
        }
        for name in [codec, pixelFormat, sampleFormat, colorRange, colorPrimaries, colorTransfer, colorSpace]
        where (name?.utf8.count ?? 0) > 32 {
            return "name \(name ?? "") is longer than 32 bytes"
        }
        if (chromaLocation?.utf8.count ?? 0) > 32 || (title?.utf8.count ?? 0) > 256 {
            return "a chroma location longer than 32 bytes or a title longer than 256"
        }
        if kind == "video" {
            guard let width, let height, (1...16384).contains(width), (1...16384).contains(height) else {
                return "a video stream needs a width and height of 1 to 16384"
            }
        } else {
            guard let sampleRate, let channels, (1...384_000).contains(sampleRate), (1...8).contains(channels) else {
                return "an audio stream needs a sample rate of 1 to 384000 and 1 to 8 channels"
            }
        }
        return nil
    }

    /// The global header's bytes.
    public var extradataBytes: [UInt8] {
        extradata.flatMap { Data(base64Encoded: $0) }.map(Array.init) ?? []
    }
}
