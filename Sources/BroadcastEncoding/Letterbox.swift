/// Where a picture goes on an encoder's canvas of another shape: scaled to fit, its proportions kept, centred, with
/// black bars filling the rest, as OBS's canvas does; never stretched. Offsets and sizes are even, so that the 4:2:0
/// chroma lines up with the luma.
public struct Letterbox: Equatable, Sendable {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
}

extension Letterbox {
    /// A `width`x`height` picture fitted into a `canvasWidth`x`canvasHeight` canvas.
    public init(fitting width: Int, _ height: Int, into canvasWidth: Int, _ canvasHeight: Int) {
        if width * canvasHeight > height * canvasWidth {
            // Wider than the canvas: as wide as it, bars above and below.
            let fitted = Self.even(Double(height * canvasWidth) / Double(max(1, width)), upTo: canvasHeight)
            self.init(x: 0, y: (canvasHeight - fitted) / 4 * 2, width: canvasWidth, height: fitted)
        } else {
            // Narrower or the same shape: as high, bars left and right (none when the shape is the same).
            let fitted = Self.even(Double(width * canvasHeight) / Double(max(1, height)), upTo: canvasWidth)
            self.init(x: (canvasWidth - fitted) / 4 * 2, y: 0, width: fitted, height: canvasHeight)
        }
    }

    /// `value` rounded to an even number of pixels, at least 2; all of `limit` when within a pixel of it.
    private static func even(_ value: Double, upTo limit: Int) -> Int {
        value >= Double(limit - 1) ? limit : max(2, Int((value / 2).rounded()) * 2)
    }
}
