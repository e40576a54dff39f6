import BroadcastCore

/// VIDEO_SAMPLE payload: 56 bytes, little-endian. The pixels are in the named pool slot.
public struct VideoSampleHeader: Equatable, Sendable {
    public static let size = 56
    public var timing: SampleTiming
    public var orientation: Orientation
    public var pool: UInt32
    public var slot: UInt32
    public var width: UInt32
    public var height: UInt32
    public var fourcc: UInt32
    public var byteCount: UInt32

    public init(timing: SampleTiming, orientation: Orientation, pool: UInt32, slot: UInt32, format: VideoFormat) {
        self.timing = timing
        self.orientation = orientation
        self.pool = pool
        self.slot = slot
        self.width = UInt32(format.width)
        self.height = UInt32(format.height)
        self.fourcc = format.pixelFormat.rawValue
        self.byteCount = UInt32(format.frameByteCount)
    }

    public func encode(into bytes: inout [UInt8]) {
        timing.encode(into: &bytes)
        bytes.appendLittleEndian(orientation.degrees)
        bytes.append(orientation.mirrored ? 1 : 0)
        bytes.append(0)
        bytes.appendLittleEndian(pool)
        bytes.appendLittleEndian(slot)
        bytes.appendLittleEndian(width)
        bytes.appendLittleEndian(height)
        bytes.appendLittleEndian(fourcc)
        bytes.appendLittleEndian(byteCount)
    }

    public init(decoding p: [UInt8]) throws(ProtocolError) {
        guard p.count == Self.size else { throw .malformed(.videoSample, "payload is \(p.count) bytes, expected \(Self.size)") }
        timing = SampleTiming(decoding: p)
        let degrees = p.loadLittleEndian(UInt16.self, at: 28)
        guard [0, 90, 180, 270].contains(degrees) else { throw .malformed(.videoSample, "orientation \(degrees) is not 0, 90, 180 or 270") }
        orientation = Orientation(degrees: degrees, mirrored: p[30] != 0)
        pool = p.loadLittleEndian(UInt32.self, at: 32)
        slot = p.loadLittleEndian(UInt32.self, at: 36)
        width = p.loadLittleEndian(UInt32.self, at: 40)
        height = p.loadLittleEndian(UInt32.self, at: 44)
        fourcc = p.loadLittleEndian(UInt32.self, at: 48)
        byteCount = p.loadLittleEndian(UInt32.self, at: 52)
    }
}

/// AUDIO_SAMPLE payload: a 40-byte little-endian header followed by interleaved PCM.
public struct AudioSampleHeader: Equatable, Sendable {
    public static let size = 40
    public var timing: SampleTiming
    public var type: SampleType
    public var format: AudioFormat
    public var frameCount: UInt32

    public init(timing: SampleTiming, type: SampleType, format: AudioFormat, frameCount: UInt32) {
        self.timing = timing
        self.type = type
        self.format = format
        self.frameCount = frameCount
    }

    public var dataByteCount: Int { Int(frameCount) * format.bytesPerFrame }

    public func encode(into bytes: inout [UInt8]) {
        timing.encode(into: &bytes)
        bytes.append(type.rawValue)
        bytes.append(format.sampleFormat.rawValue)
        bytes.append(UInt8(format.channels))
        bytes.append(0)
        bytes.appendLittleEndian(UInt32(format.sampleRate))
        bytes.appendLittleEndian(frameCount)
    }

    public init(decoding p: [UInt8]) throws(ProtocolError) {
        guard p.count >= Self.size else { throw .malformed(.audioSample, "payload is \(p.count) bytes, shorter than its \(Self.size)-byte header") }
        timing = SampleTiming(decoding: p)
        guard let type = SampleType(rawValue: p[28]), type != .video else { throw .malformed(.audioSample, "sample type \(p[28]) is not audioApp (2) or audioMic (3)") }
        guard let sampleFormat = AudioSampleFormat(rawValue: p[29]) else { throw .malformed(.audioSample, "sample format \(p[29]) is not 1 (f32) or 2 (s16)") }
        guard p[30] == 1 || p[30] == 2 else { throw .malformed(.audioSample, "\(p[30]) channels, expected 1 or 2") }
        self.type = type
        format = AudioFormat(channels: Int(p[30]), sampleFormat: sampleFormat)
        format.sampleRate = Int(p.loadLittleEndian(UInt32.self, at: 32))
        frameCount = p.loadLittleEndian(UInt32.self, at: 36)
        guard p.count == Self.size + dataByteCount else {
            throw .malformed(.audioSample, "\(frameCount) frames need \(dataByteCount) bytes of PCM, \(p.count - Self.size) came")
        }
    }
}

/// RELEASE_SLOT payload: pool and slot, 8 bytes.
public struct SlotRelease: Equatable, Sendable {
    public static let size = 8
    public var pool: UInt32
    public var slot: UInt32
    public init(pool: UInt32, slot: UInt32) {
        self.pool = pool
        self.slot = slot
    }

    public var message: Message {
        var bytes: [UInt8] = []
        bytes.appendLittleEndian(pool)
        bytes.appendLittleEndian(slot)
        return Message(.releaseSlot, payload: bytes)
    }

    public init(decoding p: [UInt8]) throws(ProtocolError) {
        guard p.count == Self.size else { throw .malformed(.releaseSlot, "payload is \(p.count) bytes, expected \(Self.size)") }
        pool = p.loadLittleEndian(UInt32.self, at: 0)
        slot = p.loadLittleEndian(UInt32.self, at: 4)
    }
}

extension SampleTiming {
    static let discontinuityFlag: UInt32 = 1

    /// The 28 bytes every sample starts with: pts, duration, sequence (u64 each), flags (u32).
    func encode(into bytes: inout [UInt8]) {
        bytes.appendLittleEndian(presentationTime)
        bytes.appendLittleEndian(duration)
        bytes.appendLittleEndian(sequence)
        bytes.appendLittleEndian(discontinuity ? Self.discontinuityFlag : 0)
    }

    init(decoding p: [UInt8]) {
        self.init(presentationTime: p.loadLittleEndian(UInt64.self, at: 0),
                  duration: p.loadLittleEndian(UInt64.self, at: 8),
                  sequence: p.loadLittleEndian(UInt64.self, at: 16),
                  discontinuity: p.loadLittleEndian(UInt32.self, at: 24) & Self.discontinuityFlag != 0)
    }
}
