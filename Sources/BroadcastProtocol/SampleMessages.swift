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
    /// The picture is the same as the previous sample's, in the same slot (flags bit 1).
    public var repeated: Bool

    public init(
        timing: SampleTiming, orientation: Orientation, pool: UInt32, slot: UInt32, format: VideoFormat,
        repeated: Bool = false
    ) {
        self.timing = timing
        self.repeated = repeated
        self.orientation = orientation
        self.pool = pool
        self.slot = slot
        self.width = UInt32(format.width)
        self.height = UInt32(format.height)
        self.fourcc = format.pixelFormat.rawValue
        self.byteCount = UInt32(format.frameByteCount)
    }

    static let repeatFlag: UInt32 = 2

    public func encode(into bytes: inout [UInt8]) {
        timing.encode(into: &bytes, extraFlags: repeated ? Self.repeatFlag : 0)
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
        guard p.count == Self.size else {
            throw .malformed(.videoSample, "payload is \(p.count) bytes, expected \(Self.size)")
        }
        timing = SampleTiming(decoding: p)
        repeated = p.loadLittleEndian(UInt32.self, at: 24) & Self.repeatFlag != 0
        let degrees = p.loadLittleEndian(UInt16.self, at: 28)
        guard [0, 90, 180, 270].contains(degrees) else {
            throw .malformed(.videoSample, "orientation \(degrees) is not 0, 90, 180 or 270")
        }
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
        guard p.count >= Self.size else {
            throw .malformed(.audioSample, "payload is \(p.count) bytes, shorter than its \(Self.size)-byte header")
        }
        timing = SampleTiming(decoding: p)
        guard let type = SampleType(rawValue: p[28]), type != .video else {
            throw .malformed(.audioSample, "sample type \(p[28]) is not audioApp (2) or audioMic (3)")
        }
        guard let sampleFormat = AudioSampleFormat(rawValue: p[29]) else {
            throw .malformed(.audioSample, "sample format \(p[29]) is not 1 (f32) or 2 (s16)")
        }
        guard p[30] == 1 || p[30] == 2 else { throw .malformed(.audioSample, "\(p[30]) channels, expected 1 or 2") }
        self.type = type
        format = AudioFormat(channels: Int(p[30]), sampleFormat: sampleFormat)
        format.sampleRate = Int(p.loadLittleEndian(UInt32.self, at: 32))
        frameCount = p.loadLittleEndian(UInt32.self, at: 36)
        guard p.count == Self.size + dataByteCount else {
            throw .malformed(
                .audioSample, "\(frameCount) frames need \(dataByteCount) bytes of PCM, \(p.count - Self.size) came")
        }
    }
}

/// CURSOR payload: the pointer, in frame coordinates, at a frame's presentation time; a 28-byte
/// little-endian header, then the sprite's premultiplied ARGB pixels when it is included (it is
/// sent when it changed, and with the first CURSOR of a broadcast or after a resume).
public struct CursorSample: Equatable, Sendable {
    public static let headerSize = 28
    static let visibleFlag: UInt32 = 1
    static let spriteFlag: UInt32 = 2
    public var presentationTime: UInt64
    /// The hotspot's position relative to the frame's top left corner; may lie outside the frame.
    public var x: Int32
    public var y: Int32
    /// The pointer is over the captured area.
    public var visible: Bool
    public var sprite: Sprite?

    public struct Sprite: Equatable, Sendable {
        public var width: UInt16
        public var height: UInt16
        public var hotspotX: UInt16
        public var hotspotY: UInt16
        /// width × height premultiplied ARGB values, row by row.
        public var pixels: [UInt32]
        public init(width: UInt16, height: UInt16, hotspotX: UInt16, hotspotY: UInt16, pixels: [UInt32]) {
            self.width = width
            self.height = height
            self.hotspotX = hotspotX
            self.hotspotY = hotspotY
            self.pixels = pixels
        }
    }

    public init(presentationTime: UInt64, x: Int32, y: Int32, visible: Bool, sprite: Sprite?) {
        self.presentationTime = presentationTime
        self.x = x
        self.y = y
        self.visible = visible
        self.sprite = sprite
    }

    public var message: Message {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.headerSize + (sprite?.pixels.count ?? 0) * 4)
        bytes.appendLittleEndian(presentationTime)
        bytes.appendLittleEndian(UInt32(bitPattern: x))
        bytes.appendLittleEndian(UInt32(bitPattern: y))
        bytes.appendLittleEndian((visible ? Self.visibleFlag : 0) | (sprite != nil ? Self.spriteFlag : 0))
        bytes.appendLittleEndian(sprite?.width ?? 0)
        bytes.appendLittleEndian(sprite?.height ?? 0)
        bytes.appendLittleEndian(sprite?.hotspotX ?? 0)
        bytes.appendLittleEndian(sprite?.hotspotY ?? 0)
        for pixel in sprite?.pixels ?? [] { bytes.appendLittleEndian(pixel) }
        return Message(.cursor, payload: bytes)
    }

    public init(decoding p: [UInt8]) throws(ProtocolError) {
        guard p.count >= Self.headerSize else {
            throw .malformed(.cursor, "payload is \(p.count) bytes, shorter than its \(Self.headerSize)-byte header")
        }
        presentationTime = p.loadLittleEndian(UInt64.self, at: 0)
        x = Int32(bitPattern: p.loadLittleEndian(UInt32.self, at: 8))
        y = Int32(bitPattern: p.loadLittleEndian(UInt32.self, at: 12))
        let flags = p.loadLittleEndian(UInt32.self, at: 16)
        visible = flags & Self.visibleFlag != 0
        let width = p.loadLittleEndian(UInt16.self, at: 20)
        let height = p.loadLittleEndian(UInt16.self, at: 22)
        let spriteBytes = flags & Self.spriteFlag != 0 ? Int(width) * Int(height) * 4 : 0
        guard p.count == Self.headerSize + spriteBytes else {
            throw .malformed(
                .cursor, "a \(width)x\(height) sprite needs \(spriteBytes) bytes, \(p.count - Self.headerSize) came")
        }
        sprite = nil
        if flags & Self.spriteFlag != 0 {
            let pixels = (0..<Int(width) * Int(height)).map {
                p.loadLittleEndian(UInt32.self, at: Self.headerSize + $0 * 4)
            }
            sprite = Sprite(
                width: width, height: height, hotspotX: p.loadLittleEndian(UInt16.self, at: 24),
                hotspotY: p.loadLittleEndian(UInt16.self, at: 26), pixels: pixels)
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
        guard p.count == Self.size else {
            throw .malformed(.releaseSlot, "payload is \(p.count) bytes, expected \(Self.size)")
        }
        pool = p.loadLittleEndian(UInt32.self, at: 0)
        slot = p.loadLittleEndian(UInt32.self, at: 4)
    }
}

extension SampleTiming {
    static let discontinuityFlag: UInt32 = 1

    /// The 28 bytes every sample starts with: pts, duration, sequence (u64 each), flags (u32).
    func encode(into bytes: inout [UInt8], extraFlags: UInt32 = 0) {
        bytes.appendLittleEndian(presentationTime)
        bytes.appendLittleEndian(duration)
        bytes.appendLittleEndian(sequence)
        bytes.appendLittleEndian((discontinuity ? Self.discontinuityFlag : 0) | extraFlags)
    }

    init(decoding p: [UInt8]) {
        self.init(
            presentationTime: p.loadLittleEndian(UInt64.self, at: 0),
            duration: p.loadLittleEndian(UInt64.self, at: 8),
            sequence: p.loadLittleEndian(UInt64.self, at: 16),
            discontinuity: p.loadLittleEndian(UInt32.self, at: 24) & Self.discontinuityFlag != 0)
    }
}
