import BroadcastCore

/// A rectangle in root-window pixels.
public struct ScreenRect: Equatable, Sendable, CustomStringConvertible {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int

    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    public var description: String { "\(width)x\(height)+\(x)+\(y)" }

    /// What is left of this rectangle once `other` is taken out of it: at most four rectangles.
    public func subtracting(_ other: ScreenRect) -> [ScreenRect] {
        guard let cut = intersection(other) else { return [self] }
        var pieces: [ScreenRect] = []
        if cut.y > y { pieces.append(ScreenRect(x: x, y: y, width: width, height: cut.y - y)) }
        if cut.y + cut.height < y + height {
            pieces.append(
                ScreenRect(x: x, y: cut.y + cut.height, width: width, height: y + height - cut.y - cut.height))
        }
        if cut.x > x { pieces.append(ScreenRect(x: x, y: cut.y, width: cut.x - x, height: cut.height)) }
        if cut.x + cut.width < x + width {
            pieces.append(
                ScreenRect(x: cut.x + cut.width, y: cut.y, width: x + width - cut.x - cut.width, height: cut.height))
        }
        return pieces
    }

    public func intersection(_ other: ScreenRect) -> ScreenRect? {
        let left = max(x, other.x)
        let top = max(y, other.y)
        let right = min(x + width, other.x + other.width)
        let bottom = min(y + height, other.y + other.height)
        guard right > left && bottom > top else { return nil }
        return ScreenRect(x: left, y: top, width: right - left, height: bottom - top)
    }

    /// Parses `X,Y,WxH` (as `--region` takes it), within what a screen can have (`ScreenRegion`).
    public init?(region text: String) {
        guard let region = ScreenRegion(text) else { return nil }
        self.init(x: region.x, y: region.y, width: region.width, height: region.height)
    }
}

/// A RandR monitor or output the user can name with `--output`.
public struct ScreenOutput: Equatable, Sendable {
    public var name: String
    public var rect: ScreenRect
    /// The output's RandR rotation in degrees counter-clockwise (0, 90, 180, 270) and reflection, for information:
    /// the root window is already laid out as the rotated monitor shows it, so frames need no turning.
    public var rotation: Int
    public var reflected: Bool
    public var primary: Bool

    public init(name: String, rect: ScreenRect, rotation: Int = 0, reflected: Bool = false, primary: Bool = false) {
        self.name = name
        self.rect = rect
        self.rotation = rotation
        self.reflected = reflected
        self.primary = primary
    }
}

/// What part of the screen to capture.
public enum CaptureTarget: Equatable, Sendable, CustomStringConvertible {
    /// The whole root window.
    case screen
    /// One RandR monitor or output, by name.
    case output(String)
    /// A fixed rectangle of the root window.
    case region(ScreenRect)
    /// One top-level window, wherever it is and whatever covers it (X11: through XComposite).
    case window(WindowSelector)

    public var description: String {
        switch self {
        case .screen: "screen"
        case .output(let name): "output \(name)"
        case .region(let rect): "region \(rect)"
        case .window(let selector): "window \(selector)"
        }
    }

    /// The rectangle to grab on a screen of `screenWidth`x`screenHeight` with `outputs`. Frames have even
    /// sizes (4:2:0 chroma), so an odd width or height loses its last column or row. A region must lie within
    /// the screen, unless `clipsRegion` (the screen shrank under a running capture): then it is clipped to it.
    /// Throws a message a user can act on when nothing is left to capture.
    public func resolve(
        screenWidth: Int, screenHeight: Int, outputs: [ScreenOutput],
        clipsRegion: Bool = false
    ) throws(CaptureAreaError) -> ScreenRect {
        let screen = ScreenRect(x: 0, y: 0, width: screenWidth, height: screenHeight)
        var rect: ScreenRect
        switch self {
        case .screen:
            rect = screen
        case .output(let name):
            guard let output = outputs.first(where: { $0.name == name }) else {
                let names = outputs.map(\.name)
                throw CaptureAreaError(
                    "no output named '\(name)'; "
                        + (names.isEmpty ? "the X server lists none" : "available: \(names.joined(separator: ", "))"))
            }
            guard let visible = output.rect.intersection(screen) else {
                throw CaptureAreaError("output '\(name)' (\(output.rect)) lies outside the screen")
            }
            rect = visible
        case .region(let region):
            guard let visible = region.intersection(screen), visible == region || clipsRegion else {
                throw CaptureAreaError("region \(region) does not lie within the \(screenWidth)x\(screenHeight) screen")
            }
            rect = visible
        case .window(let selector):
            throw CaptureAreaError("window \(selector) is found by the X11 source, not on a screen's geometry")
        }
        rect.width &= ~1
        rect.height &= ~1
        guard rect.width >= 16 && rect.height >= 16 else {
            throw CaptureAreaError("\(self) is \(rect.width)x\(rect.height): frames must be at least 16x16")
        }
        return rect
    }
}

public struct CaptureAreaError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
