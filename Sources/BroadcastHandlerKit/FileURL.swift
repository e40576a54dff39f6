/// Broadcast URLs that name a file: `file:///abs/path` (percent-encoded; query and fragment
/// ignored) or a plain absolute path.
public enum FileURL {
    /// The path, or nil when `url` names no absolute file path.
    public static func path(from url: String?) -> String? {
        guard let url, !url.isEmpty else { return nil }
        if url.hasPrefix("file://") {
            let rest = url.dropFirst("file://".count).prefix(while: { $0 != "?" && $0 != "#" })
            guard rest.hasPrefix("/") else { return nil }
            return percentDecoded(rest)
        }
        return url.hasPrefix("/") ? url : nil
    }

    /// Decodes %XX escapes; nil when an escape is malformed, decodes to a control character (a `%00`
    /// would end the path early, a newline forge a log line), or the result is not UTF-8.
    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next(), let low = iterator.next(),
                let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            else { return nil }
            guard value >= 0x20 && value != 0x7f else { return nil }
            bytes.append(value)
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
