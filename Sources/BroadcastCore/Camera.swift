/// A camera broadcastd can capture: a PipeWire video source (media.class `Video/Source`), as SOURCES lists it
/// (revision 2.8).
public struct CameraDescription: Codable, Equatable, Sendable {
    /// `node.name`: what `--camera` takes, as it takes the description or the serial.
    public var name: String
    /// `node.description` (or `node.nick`), what a user sees in a mixer; absent when the node has none.
    public var description: String?
    /// `object.serial`: unique while PipeWire runs.
    public var serial: String
    /// `media.role`, "Camera" for a camera's node (WirePlumber's libcamera and V4L2 monitors set it).
    public var role: String?
    /// The formats the node offers (its EnumFormat params), as it lists them.
    public var formats: [CameraFormat]

    public init(
        name: String, description: String? = nil, serial: String, role: String? = nil,
        formats: [CameraFormat] = []
    ) {
        self.name = name
        self.description = description
        self.serial = serial
        self.role = role
        self.formats = formats
    }

    /// Whether `--camera asked` names this camera: by node name, description or serial (the description in any
    /// case).
    public func isNamed(_ asked: String) -> Bool {
        name == asked || serial == asked || description?.lowercased() == asked.lowercased()
    }

    /// "testcam (Test Camera, serial 42)".
    public var title: String {
        "\(name) (" + ([description].compactMap { $0 } + ["serial \(serial)"]).joined(separator: ", ") + ")"
    }
}

/// One format a camera offers: a pixel format, a size and the frame rates it has at that size.
public struct CameraFormat: Codable, Equatable, Sendable, CustomStringConvertible {
    /// The pixel format's short name, as PipeWire says it ("YUY2", "NV12", "BGRx"), or "MJPG" / "H264" for
    /// compressed video.
    public var pixelFormat: String
    /// The size, or the preferred size of a range.
    public var width: Int
    public var height: Int
    /// Frames per second: each of an enumeration, or the lowest and highest of a range; one when fixed.
    public var frameRates: [Double]

    public init(pixelFormat: String, width: Int, height: Int, frameRates: [Double]) {
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.frameRates = frameRates
    }

    /// Bytes a pixel takes in the camera's buffers: 1.5 for 4:2:0 (NV12, I420, YV12, NV21), 2 for packed 4:2:2
    /// (YUY2, UYVY, YVYU), 3 for 24-bit RGB, else 4.
    public var bytesPerPixel: Double {
        switch pixelFormat {
        case "NV12", "I420", "YV12", "NV21": 1.5
        case "YUY2", "UYVY", "YVYU": 2
        case "RGB", "BGR": 3
        default: 4
        }
    }

    /// "YUY2 1280x720 30/15 fps".
    public var description: String {
        let rates = frameRates.map { $0 == $0.rounded() ? "\(Int($0))" : "\($0)" }.joined(separator: "/")
        return "\(pixelFormat) \(width)x\(height)" + (rates.isEmpty ? "" : " \(rates) fps")
    }
}

extension CameraFormat {
    /// The raw pixel formats broadcastd takes from a camera, as PipeWire names them, in its order of preference:
    /// 4:2:0, packed 4:2:2 (what most webcams send), then RGB. Not MJPG or H264, which would need a decoder.
    public static let taken = [
        "NV12", "I420", "YV12", "NV21", "YUY2", "UYVY", "YVYU", "BGRx", "BGRA", "RGBx", "RGBA", "xRGB", "xBGR", "RGB",
        "BGR",
    ]

    /// `taken` with `delivered`'s own name first: a camera that sends it needs no conversion.
    public static func preference(delivering delivered: PixelFormat) -> [String] {
        let own =
            switch delivered {
            case .nv12: "NV12"
            case .i420: "I420"
            case .bgrx: "BGRx"
            }
        return [own] + taken.filter { $0 != own }
    }
}

extension CameraDescription {
    /// The format PipeWire is asked for first and takes when the camera offers it: the first the camera lists in the
    /// most preferred pixel format it has (`CameraFormat.preference`); nil when it lists none broadcastd takes.
    public func expectedFormat(delivering delivered: PixelFormat) -> CameraFormat? {
        for name in CameraFormat.preference(delivering: delivered) {
            if let format = formats.first(where: { $0.pixelFormat == name && $0.width > 0 && $0.height > 0 }) {
                return format
            }
        }
        return nil
    }
}

/// What `--camera` asks for: none, the default camera, or one by name, description or serial.
public enum CameraRequest: Equatable, Sendable, CustomStringConvertible {
    case none
    case defaultCamera
    case named(String)

    public init(_ text: String) {
        switch text {
        case "none": self = .none
        case "default": self = .defaultCamera
        default: self = .named(text)
        }
    }

    public var description: String {
        switch self {
        case .none: "none"
        case .defaultCamera: "default"
        case .named(let name): name
        }
    }

    /// The camera this request picks from `cameras` (in PipeWire's order): none for `none`; for `default` the
    /// first whose media.role is Camera, else the first video source; else the one named. Fails, listing what
    /// there is, when nothing matches, and when the camera lists no format broadcastd takes (only MJPG or H264, say):
    /// its stream could not be negotiated, and no frame would ever come.
    public func pick(from cameras: [CameraDescription]) -> Result<CameraDescription?, BroadcastError> {
        let camera: CameraDescription
        switch self {
        case .none:
            return .success(nil)
        case .defaultCamera:
            guard let first = cameras.first(where: { $0.role == "Camera" }) ?? cameras.first else {
                return .failure(BroadcastError(.captureFailed, "--camera default: " + Self.noCamera(in: cameras)))
            }
            camera = first
        case .named(let name):
            guard let named = cameras.first(where: { $0.isNamed(name) }) else {
                return .failure(BroadcastError(.captureFailed, "--camera \(name): " + Self.noCamera(in: cameras)))
            }
            camera = named
        }
        guard camera.formats.isEmpty || camera.formats.contains(where: { CameraFormat.taken.contains($0.pixelFormat) })
        else { return .failure(BroadcastError(.captureFailed, "--camera \(self): " + Self.untaken(camera))) }
        return .success(camera)
    }

    /// Why `camera`, which offers no format broadcastd takes, is refused, and what to do.
    static func untaken(_ camera: CameraDescription) -> String {
        let offered = Array(Set(camera.formats.map(\.pixelFormat))).sorted()
        let compressed = offered.filter { ["MJPG", "H264"].contains($0) }
        let why =
            compressed.isEmpty
            ? ""
            : "; broadcastd does not decode \(compressed.joined(separator: " or ")): a decoder (libavcodec) would take "
                + "more memory than the daemon's budget allows"
        return "\(camera.title) offers only \(offered.joined(separator: ", "))\(why). broadcastd takes a camera's raw "
            + "formats (\(CameraFormat.taken.joined(separator: ", "))): most webcams offer YUY2 at their lower "
            + "resolutions (`v4l2-ctl --list-formats-ext` lists the device's), or decode it into a raw video source "
            + "of its own and choose that (broadcastd(1), --camera)"
    }

    /// "no such camera; PipeWire has: ..." or "PipeWire has no camera (no Video/Source node)".
    static func noCamera(in cameras: [CameraDescription]) -> String {
        guard !cameras.isEmpty else { return "PipeWire has no camera (no node of media.class Video/Source)" }
        return "no camera of that name, description or serial; PipeWire has "
            + cameras.map(\.title).joined(separator: ", ")
    }
}
