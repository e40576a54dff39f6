import BroadcastCore
import BroadcastProtocol

/// A handler's result in words for a person: durations as 1:25.0, sizes in MB, lists of objects as a short
/// table; what it does not know, as `key: value`. `--json` has the result as it came.
public enum ResultText {
    public static func lines(_ result: [String: JSONValue]) -> [String] {
        var lines: [String] = []
        var rest = result
        if case .string(let file)? = rest.removeValue(forKey: "file") { lines.append("file: \(file)") }
        if case .number(let seconds)? = rest.removeValue(forKey: "duration") { lines.append("duration: \(StatusLine.clock(seconds))") }
        if case .number(let bytes)? = rest.removeValue(forKey: "bytes") { lines.append("size: \(megabytes(bytes))") }
        for (key, value) in rest.sorted(by: { $0.key < $1.key }) {
            if case .array(let items) = value, !items.isEmpty, let table = table(items) {
                lines.append("\(words(key)):")
                lines += table.map { "  " + $0 }
            } else {
                lines.append("\(words(key)): \(plain(value))")
            }
        }
        return lines
    }

    /// "12.4 MB" (10^6 bytes, as file managers count).
    public static func megabytes(_ bytes: Double) -> String { String(format1: bytes / 1e6) + " MB" }

    /// "audioTracks" → "audio tracks".
    static func words(_ key: String) -> String {
        var out = ""
        for character in key {
            if character.isUppercase { out += " " + character.lowercased() } else { out.append(character) }
        }
        return out
    }

    static func plain(_ value: JSONValue) -> String {
        switch value {
        case .number(let n): n == n.rounded() && abs(n) < 1e15 ? String(Int(n)) : String(format1: n)
        case .string(let s): s
        case .bool(let b): b ? "yes" : "no"
        case .null: "-"
        case .array(let items): items.map(plain).joined(separator: ", ")
        case .object: compactJSON(value)
        }
    }

    /// Objects with simple values, one row each under a header of their keys ("name" first), columns aligned.
    static func table(_ items: [JSONValue]) -> [String]? {
        var rows: [[String: JSONValue]] = []
        for item in items {
            guard case .object(let object) = item, !object.values.contains(where: { if case .object = $0 { true } else { false } }) else { return nil }
            rows.append(object)
        }
        let keys = Set(rows.flatMap(\.keys)).sorted { ($0 == "name" ? 0 : 1, $0) < ($1 == "name" ? 0 : 1, $1) }
        let cells = [keys.map(words)] + rows.map { row in keys.map { row[$0].map(plain) ?? "-" } }
        let widths = keys.indices.map { column in cells.map { $0[column].count }.max() ?? 0 }
        return cells.map { row in
            row.enumerated().map { $1.padding(to: widths[$0]) }.joined(separator: "  ").trailingSpacesRemoved
        }
    }
}

extension String {
    func padding(to width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
    var trailingSpacesRemoved: String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}
