import BroadcastCore

/// The camera picture-in-picture, as the setup fields `camera`, `cameraPosition` and `cameraSize` ask for it: the
/// camera's picture, its proportions kept, in a corner of the encoder's frame, as wide as `sizePercent` of the frame
/// and `marginPercent` of the frame's width in from its edges.
public struct CameraLayout: Equatable, Sendable {
    public enum Position: String, CaseIterable, Sendable {
        case bottomRight = "bottom-right"
        case bottomLeft = "bottom-left"
        case topRight = "top-right"
        case topLeft = "top-left"
    }

    /// The margin from the frame's edges (both), in percent of the frame's width.
    public static let marginPercent = 2.0
    /// What `cameraSize` may say, in percent of the frame's width.
    public static let sizes = 5.0...50.0

    public var position = Position.bottomRight
    public var sizePercent = 25.0

    public init(position: Position = .bottomRight, sizePercent: Double = 25) {
        self.position = position
        self.sizePercent = sizePercent
    }

    /// Takes `camera`, `cameraPosition` and `cameraSize` out of `fields` (empty values already removed); nil: the
    /// camera is off. `track` (a second video track) is refused when `trackRefusal` says why.
    package static func taking(_ fields: inout [String: String], trackRefusal: String? = nil)
        throws(SetupFieldError) -> CameraSetting?
    {
        var layout = CameraLayout()
        if let text = fields.removeValue(forKey: "cameraPosition") {
            guard let position = Position(rawValue: text.lowercased()) else {
                let names = Position.allCases.map(\.rawValue).joined(separator: ", ")
                throw SetupFieldError("cameraPosition '\(text)': one of \(names)")
            }
            layout.position = position
        }
        if let text = fields.removeValue(forKey: "cameraSize") {
            let number = text.hasSuffix("%") ? String(text.dropLast()) : text
            guard let percent = Double(number), sizes.contains(percent) else {
                throw SetupFieldError(
                    "cameraSize '\(text)': the camera's width in percent of the video's, "
                        + "\(Int(sizes.lowerBound))-\(Int(sizes.upperBound))")
            }
            layout.sizePercent = percent
        }
        switch fields.removeValue(forKey: "camera")?.lowercased() {
        case nil, "off", "false", "no", "0": return nil
        case "on", "true", "yes", "1": return .corner(layout)
        case "track":
            if let trackRefusal {
                throw SetupFieldError("camera track: \(trackRefusal); use on (picture-in-picture) or off")
            }
            return .track
        case let other?:
            throw SetupFieldError(
                "camera '\(other)': off, on (picture-in-picture)\(trackRefusal == nil ? " or track" : "")")
        }
    }

    /// Where a `camera`-sized picture goes in a frame of `width`x`height`: `sizePercent` of its width (less if the
    /// frame is too low for it), the camera's proportions kept; offsets and sizes even, for 4:2:0.
    public func box(camera: (width: Int, height: Int), in width: Int, _ height: Int) -> Letterbox {
        func even(_ value: Double) -> Int { max(2, Int(value / 2) * 2) }
        let margin = Int(Double(width) * Self.marginPercent / 100 / 2) * 2
        let aspect = Double(max(1, camera.width)) / Double(max(1, camera.height))
        var w = even(Double(width) * sizePercent / 100)
        var h = even(Double(w) / aspect)
        let room = (width: max(2, width - 2 * margin), height: max(2, height - 2 * margin))
        if h > room.height {
            h = even(Double(room.height))
            w = even(Double(h) * aspect)
        }
        w = min(w, even(Double(room.width)))
        let left = position == .topLeft || position == .bottomLeft
        let top = position == .topLeft || position == .topRight
        let x = left ? margin : max(0, (width - margin - w) / 2 * 2)
        let y = top ? margin : max(0, (height - margin - h) / 2 * 2)
        return Letterbox(x: x, y: y, width: w, height: h)
    }
}

/// What the `camera` setup field asks for: the camera in a corner of the picture, or as a video track of its own.
public enum CameraSetting: Equatable, Sendable {
    case corner(CameraLayout)
    case track

    public var corner: CameraLayout? {
        if case .corner(let layout) = self { layout } else { nil }
    }
}

/// The camera in the corner of an encoder's frames: each new camera frame scaled once (libswscale) into a picture of
/// the corner's size, which is copied into every frame after the screen's picture. A camera that goes away leaves
/// its last picture for `lostHold`, then the screen shows through; when it comes back, so does the corner.
public final class CameraCorner {
    /// How long the last picture of a camera that went away stays, ns (capture time, from its last frame).
    public static let lostHold: UInt64 = 2_000_000_000

    public let layout: CameraLayout
    /// The encoder's frames: their size and layout.
    private let canvas: VideoFormat
    private var scaler: (source: VideoFormat, box: Letterbox, scaler: VideoScaler)?
    /// The picture to show, and where; nil: none (no frame yet, or the camera went away a while ago).
    private var shown: (picture: MediaFrame, box: Letterbox)?
    /// Where the last frame had the corner.
    private var placed: Letterbox?
    /// A picture not in a frame yet.
    private var fresh = false
    /// The capture time of the last camera frame.
    private var lastFrame: UInt64 = 0
    private var lost = false
    public private(set) var frames = 0

    /// A corner laid out as `layout` in frames of `canvas`.
    public init(_ layout: CameraLayout, canvas: VideoFormat) {
        self.layout = layout
        self.canvas = canvas
    }

    /// The camera's frames come again (`format`), or (nil) it went away.
    public func cameraChanged(to format: VideoFormat?) {
        lost = format == nil
    }

    /// A new camera frame, `data` laid out as `layout` and captured at `time` (ns): scaled into the corner's picture
    /// at once, so that its slot may be given back.
    public func add(_ data: UnsafeRawBufferPointer, layout: VideoFormat, time: UInt64) throws(MediaError) {
        if scaler?.source != layout {
            let box = self.layout.box(camera: (layout.width, layout.height), in: canvas.width, canvas.height)
            scaler = (
                layout, box,
                try VideoScaler(
                    from: layout, toWidth: box.width, height: box.height, pixelFormat: canvas.pixelFormat)
            )
        }
        guard let scaler else { return }
        shown = (try scaler.scaler.scale(data, pts: 0), scaler.box)
        fresh = true
        lost = false
        lastFrame = time
        frames += 1
    }

    /// Whether the frame of a screen captured at `time` differs from the last frame for the corner's sake: a new
    /// camera picture, or the corner gone (so that a repeated screen frame is encoded all the same).
    public func changes(at time: UInt64) -> Bool {
        expire(at: time)
        return fresh || placed != shown?.box
    }

    /// The encoder's frame for a screen frame (see `VideoInput.frame`) captured at `captured`, with the corner in.
    func frame(
        from input: VideoInput, _ data: UnsafeRawBufferPointer, layout: VideoFormat, time: UInt64, captured: UInt64
    ) throws(MediaError) -> MediaFrame {
        expire(at: captured)
        // Where the corner was and is no more: the bars there again, where the screen does not cover it.
        if let placed, placed != shown?.box { try input.blank(placed) }
        let frame = try input.frame(data, layout: layout, time: time)
        if let shown { frame.place(shown.picture, at: shown.box) }
        placed = shown?.box
        fresh = false
        return frame
    }

    private func expire(at time: UInt64) {
        if lost, shown != nil, time >= lastFrame + Self.lostHold { shown = nil }
    }
}

extension VideoInput {
    /// The encoder's frame for captured `data` (see `frame(_:layout:time:)`), captured at `captured` (ns), with the
    /// camera's `corner` in it when there is one.
    public func frame(
        _ data: UnsafeRawBufferPointer, layout: VideoFormat, time: UInt64, captured: UInt64, corner: CameraCorner?
    ) throws(MediaError) -> MediaFrame {
        guard let corner else { return try frame(data, layout: layout, time: time) }
        return try corner.frame(from: self, data, layout: layout, time: time, captured: captured)
    }
}
