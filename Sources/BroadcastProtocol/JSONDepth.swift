/// The nesting depth of JSON text, measured in one pass over its bytes before any decoder sees it:
/// a decoder's cost may grow with depth times size, so text nested deeper than a message can
/// reasonably need is refused at once (docs/protocol.md §5).
public enum JSONDepth {
    /// Deepest nesting of arrays and objects in any JSON payload.
    public static let limit = 32

    /// The first nesting level beyond `limit`, or nil when `bytes` stay within it. Brackets inside
    /// strings do not count; whether the text is valid JSON is the decoder's business.
    public static func excess(_ bytes: [UInt8], limit: Int = limit) -> Int? {
        var depth = 0
        var inString = false
        var escaped = false
        for byte in bytes {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > limit { return depth }
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
        return nil
    }
}
