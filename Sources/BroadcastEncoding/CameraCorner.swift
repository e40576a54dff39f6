import BroadcastCore
import BroadcastHandlerKit

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

/// The camera in the corner of an encoder's frames, composed by capture time: each new camera frame scaled once
/// (libswscale) into a picture of the corner's size, the last few kept with their capture times; each screen frame gets
/// the picture nearest it in time (`CameraPairing`). A screen frame is held back (`pass`) until the next one comes, so
/// that the camera's pictures of its time are in: broadcastd hands on a camera frame at the screen's deadline after
/// it was captured, and those captured while it was busy grabbing a screen that changed after that grab. A camera
/// that goes away leaves its last picture for `lostHold`, then the screen shows through, and no frame is held for it;
/// when it comes back, so does the corner.
public final class CameraCorner {
    /// How long the last picture of a camera that went away stays, ns (capture time, from its last frame).
    public static let lostHold: UInt64 = 2_000_000_000
    /// How many of the camera's pictures are kept for the screen frames to come.
    static let kept = 4

    public let layout: CameraLayout
    /// The encoder's frames: their size and layout.
    private let canvas: VideoFormat
    private var scaler: (source: VideoFormat, box: Letterbox, scaler: VideoScaler)?
    /// The camera's last pictures, oldest first, and where they go; none before the first frame, or once the camera
    /// went away a while ago.
    private var pictures: [(time: UInt64, picture: MediaFrame)] = []
    private var box: Letterbox?
    /// Where the last frame had the corner, and the capture time of the picture in it.
    private var placed: (box: Letterbox, time: UInt64)?
    /// The capture time of the last camera frame.
    private var lastFrame: UInt64 = 0
    private var lost = false
    /// The screen frame held back for the camera's pictures of its time.
    private let held = HeldScreenFrame()
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

    /// A new camera frame, `data` laid out as `layout` and captured at `time` (ns): scaled into a picture of the
    /// corner at once, so that its slot may be given back.
    public func add(_ data: UnsafeRawBufferPointer, layout: VideoFormat, time: UInt64) throws(MediaError) {
        if scaler?.source != layout {
            let box = self.layout.box(camera: (layout.width, layout.height), in: canvas.width, canvas.height)
            scaler = (
                layout, box,
                try VideoScaler(
                    from: layout, toWidth: box.width, height: box.height, pixelFormat: canvas.pixelFormat)
            )
            pictures = []
        }
        guard let scaler else { return }
        let scaled = try scaler.scaler.scale(data, pts: 0)
        // The oldest picture's frame is used again once as many as are kept are in.
        let picture =
            pictures.count >= Self.kept
            ? pictures.removeFirst().picture
            : try MediaFrame.video(
                width: scaler.box.width, height: scaler.box.height, pixelFormat: canvas.pixelFormat)
        picture.place(scaled, at: Letterbox(x: 0, y: 0, width: scaler.box.width, height: scaler.box.height))
        pictures.append((time, picture))
        box = scaler.box
        lost = false
        lastFrame = max(lastFrame, time)
        frames += 1
    }

    /// A screen frame, handed on to `encode` when the camera's pictures of its time are in: held back (copied, its
    /// slot given back) until the next screen frame comes, or at once when the camera is off or gone. `encode` gets
    /// the frame and the time until which the camera's pictures belong to it (for `changes` and `frame`).
    package func pass(
        _ sample: SampleBuffer, encode: (SampleBuffer, _ until: UInt64) throws(MediaError) -> Void
    ) throws(MediaError) {
        try release(before: sample.presentationTime, encode: encode)
        guard holdsScreenFrames else {
            held.forget()
            return try encode(sample, CameraPairing.until(sample, next: nil))
        }
        held.keep(sample)
        sample.releaseFrame()
    }

    /// The screen frame held back, if any, handed on to `encode` (`next`: the capture time of the screen frame after
    /// it; nil: none is coming, the broadcast pauses or finishes).
    package func release(
        before next: UInt64? = nil, encode: (SampleBuffer, _ until: UInt64) throws(MediaError) -> Void
    ) throws(MediaError) {
        guard let sample = held.take() else { return }
        try encode(sample, CameraPairing.until(sample, next: next))
    }

    /// Whether screen frames wait for the camera's: it sends them, and has not gone away.
    var holdsScreenFrames: Bool { !lost && !pictures.isEmpty }

    /// Whether the frame of a screen captured at `time` differs from the last frame for the corner's sake: another
    /// camera picture (the one for `time`, taking the camera's pictures until `until`), or the corner gone (so that a
    /// repeated screen frame is encoded all the same).
    public func changes(at time: UInt64, until: UInt64 = .max) -> Bool {
        expire(at: time)
        guard let shown = pick(until: until), let box else { return placed != nil }
        return placed?.time != shown.time || placed?.box != box
    }

    /// The encoder's frame for a screen frame (see `VideoInput.frame`) captured at `captured`, with the corner in:
    /// the camera's picture for it, taking the camera's pictures until `until`.
    func frame(
        from input: VideoInput, _ data: UnsafeRawBufferPointer, layout: VideoFormat, time: UInt64, captured: UInt64,
        until: UInt64 = .max
    ) throws(MediaError) -> MediaFrame {
        expire(at: captured)
        let shown = pick(until: until)
        // Where the corner was and is no more: the bars there again, where the screen does not cover it.
        if let placed, shown == nil || placed.box != box { try input.blank(placed.box) }
        let frame = try input.frame(data, layout: layout, time: time)
        if let shown, let box {
            frame.place(shown.picture, at: box)
            placed = (box, shown.time)
        } else {
            placed = nil
        }
        return frame
    }

    private func pick(until: UInt64) -> (time: UInt64, picture: MediaFrame)? {
        CameraPairing.pick(pictures.map(\.time), until: until).map { pictures[$0] }
    }

    private func expire(at time: UInt64) {
        if lost, !pictures.isEmpty, time >= lastFrame + Self.lostHold { pictures = [] }
    }
}

/// Which of the camera's pictures goes into which screen frame, by capture time: each picture belongs to the screen
/// frame nearest it, so a screen frame takes the camera's pictures until halfway to the next screen frame (`until`),
/// and shows the last of them.
package enum CameraPairing {
    /// The time until which the camera's pictures belong to a screen frame captured at `screen`: halfway to the next
    /// one's (`next`) when the screen changed, else (a repeat, or the next not known) half the frame's `duration`
    /// after it. A screen that changed may keep broadcastd's loop grabbing it past the next deadlines (its rows are
    /// read meanwhile, and the camera's pictures of that time come after it); a repeat takes no time to grab, and a
    /// gap after it is deadlines missed, to which the next screen frame is nearer.
    package static func until(_ screen: UInt64, changed: Bool, next: UInt64?, duration: UInt64) -> UInt64 {
        guard changed, let next, next > screen else { return screen + duration / 2 }
        return screen + max(next - screen, duration) / 2
    }

    /// `until` for a screen frame's `sample`.
    static func until(_ sample: SampleBuffer, next: UInt64?) -> UInt64 {
        until(sample.presentationTime, changed: !sample.isRepeat, next: next, duration: sample.duration)
    }

    /// Which of the camera's pictures, captured at `times` (oldest first), a screen frame that takes those until
    /// `until` shows: the last captured before it, else (all are later) the first; nil when there is none.
    package static func pick(_ times: [UInt64], until: UInt64) -> Int? {
        guard !times.isEmpty else { return nil }
        return times.lastIndex { $0 < until } ?? 0
    }
}

/// A screen frame held back by the handler: its sample with the picture copied into memory of its own (the slot goes
/// back to broadcastd at once), the copy skipped for a repeat that comes right after the frame the memory holds (a
/// still screen costs no copy).
final class HeldScreenFrame {
    private var memory = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    /// The sequence number of the screen frame whose picture the memory holds.
    private var holds: UInt64?
    private var sample: SampleBuffer?

    deinit { memory.deallocate() }

    /// Keeps `sample` until `take`.
    func keep(_ sample: SampleBuffer) {
        let same = sample.isRepeat && holds.map { $0 + 1 == sample.sequence } == true
        if !same || memory.count != sample.data.count {
            if memory.count != sample.data.count {
                memory.deallocate()
                memory = .allocate(byteCount: sample.data.count, alignment: 64)
            }
            memory.copyMemory(from: sample.data)
        }
        holds = sample.sequence
        self.sample = sample.holding(UnsafeRawBufferPointer(memory))
    }

    /// The frame kept, if any; its data is valid until the next `keep`.
    func take() -> SampleBuffer? {
        defer { sample = nil }
        return sample
    }

    /// A screen frame went on without being kept: the memory does not hold the last picture.
    func forget() {
        holds = nil
    }
}

extension VideoInput {
    /// The encoder's frame for captured `data` (see `frame(_:layout:time:)`), captured at `captured` (ns), with the
    /// camera's `corner` in it when there is one: its picture for a screen frame taking the camera's pictures until
    /// `until` (`CameraPairing`; by default its newest).
    public func frame(
        _ data: UnsafeRawBufferPointer, layout: VideoFormat, time: UInt64, captured: UInt64, corner: CameraCorner?,
        until: UInt64 = .max
    ) throws(MediaError) -> MediaFrame {
        guard let corner else { return try frame(data, layout: layout, time: time) }
        return try corner.frame(from: self, data, layout: layout, time: time, captured: captured, until: until)
    }
}
