/// `X,Y,WIDTHxHEIGHT` of a screen, as `--region` and START's and CHANGE_CAPTURE's `capture.region` give it
/// (revision 2.5), within what a screen can have: X11's coordinates and sizes are 16-bit, so X and Y are
/// 0 to 32767 and sizes 1 to 32767. Whatever lies outside is refused where it enters, so that no arithmetic
/// on a region (its right edge, an intersection) can overflow.
public struct ScreenRegion: Equatable, Sendable {
    public static let coordinates = 0...32767
    public static let sizes = 1...32767
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int

    public init?(_ text: String) {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 3, let x = Self.number(parts[0], in: Self.coordinates),
            let y = Self.number(parts[1], in: Self.coordinates)
        else { return nil }
        let size = parts[2].lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard size.count == 2, let width = Self.number(size[0], in: Self.sizes),
            let height = Self.number(size[1], in: Self.sizes)
        else { return nil }
        (self.x, self.y, self.width, self.height) = (x, y, width, height)
    }

    /// Why `text` is not a region, for `--region` and `capture.region`; nil when it is one.
    public static func problem(_ text: String) -> String? {
        guard ScreenRegion(text) == nil else { return nil }
        return "takes X,Y,WIDTHxHEIGHT with X and Y from \(coordinates.lowerBound) to \(coordinates.upperBound) "
            + "and sizes from \(sizes.lowerBound) to \(sizes.upperBound), e.g. 0,0,1280x720"
    }

    /// A decimal number of at most 5 digits (a longer one, or one with a sign, is out of range anyway) in `range`.
    private static func number(_ text: Substring, in range: ClosedRange<Int>) -> Int? {
        guard (1...5).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
            let value = Int(text), range.contains(value)
        else { return nil }
        return value
    }
}
