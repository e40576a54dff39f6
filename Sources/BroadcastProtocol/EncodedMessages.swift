import BroadcastCore

// Revision 2.9 (encoded samples): a handler that asks for an encoding (ENCODE) shares one encoder with every
// handler of the same capture that asks for the same; broadcastd runs that encoder in a process of its own and
// relays what it tells (SHARE_*) to the handlers it serves (PACKET_RING, ENCODED_STREAMS, ENCODED_PACKET,
// PICTURE_UNCHANGED). Packets' bytes are in the encoder's packet ring (`PacketRingLayout`), mapped by each handler.

/// ENCODE: the encoding the handler wants, as its setup fields name it (`codec`, `quality`, `preset`, `size`,
/// `fps`, `audio`, ...): handlers of one capture asking for equal settings share one encoder.
public struct EncodeRequest: Codable, Equatable, Sendable {
    public var settings: [String: String]
    public init(settings: [String: String]) { self.settings = settings }

    public static let maxSettings = 32
    public static let maxKeyBytes = 64
    public static let maxValueBytes = 1024

    /// Why the request cannot be taken, or nil.
    public var problem: String? {
        guard settings.count <= Self.maxSettings else { return "more than \(Self.maxSettings) settings" }
        for (key, value) in settings {
            guard !key.isEmpty, key.utf8.count <= Self.maxKeyBytes, value.utf8.count <= Self.maxValueBytes else {
                return "a setting's name is empty or over \(Self.maxKeyBytes) bytes, or its value over "
                    + "\(Self.maxValueBytes)"
            }
        }
        return nil
    }
}

/// ENCODING: the answer to ENCODE. `encoder` is the broadcast of the shared encoder (its packets follow), or
/// `error` says why there is none (the handler encodes by itself, from the samples it keeps getting).
public struct EncodingNotice: Codable, Equatable, Sendable {
    public var encoder: UInt32?
    /// The broadcasts it serves, this one included.
    public var sharedWith: [UInt32]?
    public var error: String?
    public init(encoder: UInt32? = nil, sharedWith: [UInt32]? = nil, error: String? = nil) {
        self.encoder = encoder
        self.sharedWith = sharedWith
        self.error = error
    }
}

/// PACKET_RING and SHARE_RING: a packet ring of `size` bytes, whose descriptor comes with the message (read-only,
/// sealed in size); `ring` is the encoder's broadcast, which ENCODED_PACKET names.
public struct PacketRingAnnouncement: Codable, Equatable, Sendable {
    public var ring: UInt32
    public var size: Int
    public init(ring: UInt32, size: Int) {
        self.ring = ring
        self.size = size
    }
    /// The largest ring a handler maps.
    public static let maxSize = 256 << 20
}

/// ENCODED_STREAMS and SHARE_STREAMS: the encoder's streams, in the order packets number them.
public struct EncodedStreams: Codable, Equatable, Sendable {
    public var ring: UInt32
    public var streams: [EncodedStreamDescription]
    public init(ring: UInt32, streams: [EncodedStreamDescription]) {
        self.ring = ring
        self.streams = streams
    }
    public static let maxStreams = 8

    /// Why they cannot be taken, or nil.
    public var problem: String? {
        guard !streams.isEmpty, streams.count <= Self.maxStreams else {
            return "\(streams.count) streams; 1 to \(Self.maxStreams) are taken"
        }
        for (index, stream) in streams.enumerated() {
            if stream.stream != index { return "stream \(index) says it is \(stream.stream)" }
            if let problem = stream.problem { return "stream \(index): \(problem)" }
        }
        return nil
    }
}

extension EncodedPacketHeader {
    /// ENCODED_PACKET, or SHARE_PACKET.
    public func message(_ opcode: Opcode) -> Message {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.size)
        encode(into: &bytes)
        return Message(opcode, payload: bytes)
    }

    public init(decoding p: [UInt8], of opcode: Opcode) throws(ProtocolError) {
        guard let header = Self(decoding: p) else {
            throw .malformed(opcode, "a packet header is \(Self.size) bytes with flags 1, 2, 4 and 8 only")
        }
        self = header
    }
}

/// PICTURE_UNCHANGED and SHARE_PICTURE_UNCHANGED: 8 bytes, the encoder's time (ns, signed, little-endian) through
/// which its picture stood still (the repeated frames were not encoded).
public struct PictureUnchanged: Equatable, Sendable {
    public static let size = 8
    public var through: Int64
    public init(through: Int64) { self.through = through }

    public func message(_ opcode: Opcode) -> Message {
        var bytes: [UInt8] = []
        bytes.appendLittleEndian(through)
        return Message(opcode, payload: bytes)
    }

    public init(decoding p: [UInt8], of opcode: Opcode) throws(ProtocolError) {
        guard p.count == Self.size else { throw .malformed(opcode, "payload is \(p.count) bytes, expected 8") }
        through = p.loadLittleEndian(Int64.self, at: 0)
    }
}

/// AUDIO_FIGURES and SHARE_AUDIO_FIGURES (revision 2.10): how one audio stream of a shared encoder fared through its
/// last packet told, so that each handler it serves can say so in its result for the stretches it wrote: the sound
/// the encoder put silence in for (`missingMs`) and dropped (`droppedMs`), both totals since it started, and the
/// largest clock offset it corrected since its last figures of the stream.
public struct AudioFigures: Codable, Equatable, Sendable {
    public var ring: UInt32
    public var stream: UInt32
    public var missingMs: Double
    public var droppedMs: Double
    public var maxClockOffsetMs: Double
    public init(ring: UInt32, stream: UInt32, missingMs: Double, droppedMs: Double, maxClockOffsetMs: Double) {
        self.ring = ring
        self.stream = stream
        self.missingMs = missingMs
        self.droppedMs = droppedMs
        self.maxClockOffsetMs = maxClockOffsetMs
    }

    /// The largest figure taken (ms): about 31 years.
    public static let maxMs = 1e12

    /// Why they cannot be taken, or nil.
    public var problem: String? {
        let figures = [missingMs, droppedMs, maxClockOffsetMs]
        guard figures.allSatisfy({ $0.isFinite && (0...Self.maxMs).contains($0) }) else {
            return "figures of 0 to \(Int(Self.maxMs)) ms are taken, not \(figures)"
        }
        return nil
    }
}
