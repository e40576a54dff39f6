/// The sample streams, numbered as ReplayKit's RPSampleBufferType, and (revision 2.8) the camera.
public enum SampleType: UInt8, CaseIterable, Codable, Sendable, CustomStringConvertible {
    case video = 1
    case audioApp = 2
    case audioMic = 3
    /// The camera's frames (CAMERA_SAMPLE), for handlers that ask for them.
    case videoCamera = 4

    public var description: String {
        switch self {
        case .video: "video"
        case .audioApp: "audioApp"
        case .audioMic: "audioMic"
        case .videoCamera: "videoCamera"
        }
    }
}

/// Pixel formats, named on the wire by their DRM fourcc.
public enum PixelFormat: UInt32, CaseIterable, Sendable, CustomStringConvertible {
    /// Y plane, then one plane of interleaved U,V at half resolution (4:2:0). The default.
    case nv12 = 0x3231_564E  // "NV12"
    /// Y, U, V planes, U and V at half resolution (4:2:0).
    case i420 = 0x3032_3449  // "I420"
    /// 32-bit B, G, R, unused, in that byte order (DRM XRGB8888 on little-endian).
    case bgrx = 0x3432_5258  // "XR24"

    public var description: String {
        switch self {
        case .nv12: "nv12"
        case .i420: "i420"
        case .bgrx: "bgrx"
        }
    }

    public init?(name: String) {
        guard let match = Self.allCases.first(where: { $0.description == name.lowercased() }) else { return nil }
        self = match
    }
}

/// Where one plane of a frame lies inside its pool slot.
public struct Plane: Equatable, Codable, Sendable {
    public var offset: Int
    public var stride: Int
    public var height: Int
    public var byteCount: Int { stride * height }

    public init(offset: Int, stride: Int, height: Int) {
        self.offset = offset
        self.stride = stride
        self.height = height
    }
}

/// A video format and the layout of one frame of it in memory.
public struct VideoFormat: Equatable, Codable, Sendable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    public var pixelFormat: PixelFormat

    /// Row strides are rounded up to this many bytes so that rows start aligned for vector code.
    public static let strideAlignment = 64

    public init(width: Int, height: Int, pixelFormat: PixelFormat = .nv12) {
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
    }

    private static func aligned(_ n: Int) -> Int { (n + strideAlignment - 1) / strideAlignment * strideAlignment }

    public var planes: [Plane] {
        let chromaHeight = (height + 1) / 2
        switch pixelFormat {
        case .bgrx:
            return [Plane(offset: 0, stride: Self.aligned(width * 4), height: height)]
        case .nv12:
            let luma = Plane(offset: 0, stride: Self.aligned(width), height: height)
            return [
                luma, Plane(offset: luma.byteCount, stride: Self.aligned((width + 1) / 2 * 2), height: chromaHeight),
            ]
        case .i420:
            let luma = Plane(offset: 0, stride: Self.aligned(width), height: height)
            let chromaStride = Self.aligned((width + 1) / 2)
            let u = Plane(offset: luma.byteCount, stride: chromaStride, height: chromaHeight)
            return [luma, u, Plane(offset: u.offset + u.byteCount, stride: chromaStride, height: chromaHeight)]
        }
    }

    /// Bytes one frame takes in a pool slot.
    public var frameByteCount: Int {
        let last = planes.last!
        return last.offset + last.byteCount
    }

    public var description: String { "\(width)x\(height) \(pixelFormat)" }

    /// Parses "WIDTHxHEIGHT".
    public static func parseSize(_ text: String) -> (width: Int, height: Int)? {
        let parts = text.lowercased().split(separator: "x")
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w >= 16, h >= 16, w <= 16384, h <= 16384,
            w % 2 == 0, h % 2 == 0
        else { return nil }
        return (w, h)
    }
}

public enum AudioSampleFormat: UInt8, CaseIterable, Sendable, CustomStringConvertible {
    case float32 = 1
    case s16 = 2

    public var bytesPerSample: Int { self == .float32 ? 4 : 2 }
    public var description: String { self == .float32 ? "f32" : "s16" }

    public init?(name: String) {
        switch name.lowercased() {
        case "f32", "float32": self = .float32
        case "s16": self = .s16
        default: return nil
        }
    }
}

/// Interleaved PCM. Rate is 48 kHz throughout broadcastd.
public struct AudioFormat: Equatable, Codable, Sendable, CustomStringConvertible {
    public static let sampleRate = 48_000
    public var sampleRate: Int
    public var channels: Int
    public var sampleFormat: AudioSampleFormat

    public init(channels: Int = 2, sampleFormat: AudioSampleFormat = .float32) {
        self.sampleRate = Self.sampleRate
        self.channels = channels
        self.sampleFormat = sampleFormat
    }

    public var bytesPerFrame: Int { channels * sampleFormat.bytesPerSample }
    public var description: String { "\(sampleRate) Hz \(channels) ch \(sampleFormat)" }
}

/// The video orientation attachment (ReplayKit's RPVideoSampleOrientationKey).
public struct Orientation: Equatable, Codable, Sendable {
    /// Clockwise rotation the handler must apply to show the frame upright: 0, 90, 180 or 270.
    public var degrees: UInt16
    /// Mirrored left to right before rotation.
    public var mirrored: Bool

    public static let up = Orientation(degrees: 0, mirrored: false)

    public init(degrees: UInt16, mirrored: Bool) {
        precondition([0, 90, 180, 270].contains(degrees), "orientation must be 0, 90, 180 or 270")
        self.degrees = degrees
        self.mirrored = mirrored
    }
}

/// What every sample carries besides its data.
public struct SampleTiming: Equatable, Sendable {
    /// Presentation time, nanoseconds on CLOCK_MONOTONIC.
    public var presentationTime: UInt64
    public var duration: UInt64
    /// Counts every sample the source produced on this stream, delivered or not: a jump means drops.
    public var sequence: UInt64
    /// Set on the first sample after drops, a pause, or a format change.
    public var discontinuity: Bool

    public init(presentationTime: UInt64, duration: UInt64, sequence: UInt64, discontinuity: Bool) {
        self.presentationTime = presentationTime
        self.duration = duration
        self.sequence = sequence
        self.discontinuity = discontinuity
    }
}

/// Formats appear in JSON by name ("nv12", "f32"), as on the command line, not by their raw numbers.
protocol NamedFormat: CustomStringConvertible {
    init?(name: String)
}

extension NamedFormat {
    static func decodeName(_ decoder: Decoder) throws -> Self {
        let name = try decoder.singleValueContainer().decode(String.self)
        guard let value = Self(name: name) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "unknown format '\(name)'"))
        }
        return value
    }

    func encodeName(_ encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}

extension PixelFormat: NamedFormat, Codable {
    public init(from decoder: Decoder) throws { self = try Self.decodeName(decoder) }
    public func encode(to encoder: Encoder) throws { try encodeName(encoder) }
}

extension AudioSampleFormat: NamedFormat, Codable {
    public init(from decoder: Decoder) throws { self = try Self.decodeName(decoder) }
    public func encode(to encoder: Encoder) throws { try encodeName(encoder) }
}
