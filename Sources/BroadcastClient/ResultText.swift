import BroadcastCore
import BroadcastProtocol

/// A handler's result in words for a person: durations as 1:25.0, sizes in MB, other figures with the unit their
/// name tells, lists of objects as a short table, an object as indented lines. `--json` has the result as it came.
public enum ResultText {
    public static func lines(_ result: [String: JSONValue]) -> [String] {
        var lines: [String] = []
        var rest = result
        for key in ["file", "path", "duration", "bytes"] {
            if let value = rest.removeValue(forKey: key) { lines.append("\(label(key)): \(Self.value(key, value))") }
        }
        for (key, value) in rest.sorted(by: { $0.key < $1.key }) {
            switch value {
            case .array(let items) where !items.isEmpty && table(items) != nil:
                lines.append("\(label(key)):")
                let rows = table(items)!
                if rows.allSatisfy({ $0.count <= tableWidth }) {
                    lines += rows.map { "  " + $0 }
                } else {
                    // Too wide for a table (a long message in it): each item as lines of its own.
                    for case .object(let object) in items {
                        lines += Self.lines(object).enumerated().map { ($0.offset == 0 ? "  - " : "    ") + $0.element }
                    }
                }
            case .object(let object) where !object.isEmpty:
                lines.append("\(label(key)):")
                lines += Self.lines(object).map { "  " + $0 }
            default:
                lines.append("\(label(key)): \(Self.value(key, value))")
            }
        }
        return lines
    }

    /// The file a result names, with its duration and size: "/v/a.mp4 (1:25.0, 12.4 MB)"; nil when it names none.
    public static func brief(_ result: [String: JSONValue]?) -> String? {
        guard case .string(let file)? = result?["file"] ?? result?["path"] else { return nil }
        let figures = ["duration", "bytes"].compactMap { key in
            result?[key].flatMap { if case .number = $0 { value(key, $0) } else { nil } }
        }
        return file + (figures.isEmpty ? "" : " (\(figures.joined(separator: ", ")))")
    }

    /// The widest table row shown: beyond it, a list's items are shown one after the other.
    static let tableWidth = 76

    /// "12.4 MB" (10^6 bytes, as file managers count).
    public static func megabytes(_ bytes: Double) -> String { String(format1: bytes / 1e6) + " MB" }

    /// A key in words, without the unit its value is shown with: "audioTracks" → "audio tracks", "queueMs" →
    /// "queue", "bytes" → "size".
    static func label(_ key: String) -> String {
        if key == "bytes" { return "size" }
        if key.hasSuffix("Ms") && key.count > 2 { return words(String(key.dropLast(2))) }
        return words(key)
    }

    /// "audioTracks" → "audio tracks"; a run of capitals is one word, kept as it is: "droppedGOPsForLength" →
    /// "dropped GOPs for length", "httpStatus" → "http status".
    static func words(_ key: String) -> String {
        let characters = Array(key)
        var out = ""
        var word = ""
        func flush() {
            guard !word.isEmpty else { return }
            let capitals = word.filter(\.isUppercase).count
            out += (out.isEmpty ? "" : " ") + (capitals > 1 ? word : word.lowercased())
            word = ""
        }
        for (index, character) in characters.enumerated() {
            let previous = index > 0 ? characters[index - 1] : nil
            let next = index + 1 < characters.count ? characters[index + 1] : nil
            let afterNext = index + 2 < characters.count ? characters[index + 2] : nil
            if character.isUppercase, let previous {
                // A capital after a small letter starts a word; within a run of capitals, the last one starts the
                // next word when small letters follow it (HTTPStatus), unless that is a plural s (GOPsFor, GOPs).
                let plural = next == "s" && (afterNext == nil || afterNext!.isUppercase)
                if !previous.isUppercase || (next?.isLowercase == true && !plural) { flush() }
            }
            word.append(character)
        }
        flush()
        return out
    }

    /// A value with the unit its key's name tells: sizes (…bytes, bytes…, …memory) in MB, times (duration, start,
    /// time, buffered, recorded, elapsed, …Duration, …seconds) as 1:25.0, …Ms and milliseconds in ms, …BitRate in
    /// kbit/s, …Rate (bytes per second) in MB/s, …In in seconds.
    public static func value(_ key: String, _ value: JSONValue) -> String {
        let lower = key.lowercased()
        switch value {
        case .number(let n):
            let memory = ["memory", "maxMemory", "daemonMemory"].contains(key)
            if lower.hasSuffix("bytes") || lower.hasPrefix("bytes") || memory { return megabytes(n) }
            if ["duration", "start", "time", "buffered", "recorded", "elapsed", "seconds"].contains(key)
                || lower.hasSuffix("duration")
            {
                return StatusLine.clock(n)
            }
            if key.hasSuffix("Ms") || key == "milliseconds" { return plain(value) + " ms" }
            if lower.hasSuffix("bitrate") { return "\(Int(n)) kbit/s" }
            if lower.hasSuffix("framerate") { return String(format1: n) + " fps" }
            if lower.hasSuffix("rate") { return String(format1: n / 1e6) + " MB/s" }
            if key.hasSuffix("In") { return "\(Int(n)) s" }
            return plain(value)
        case .string(let s) where key == "name" && (s == "audioApp" || s == "audioMic"):
            return s == "audioApp" ? "app audio" : "mic"
        case .array(let items):
            return items.map { Self.value(key, $0) }.joined(separator: ", ")
        case .object(let object):
            // A chapter as "Title at 0:03.2"; any other object as its figures in words.
            if case .string(let title)? = object["title"], let start = object["start"] ?? object["time"] {
                return "\(title) at \(Self.value("start", start))"
            }
            return object.sorted { $0.key < $1.key }.map { "\(label($0.key)) \(Self.value($0.key, $0.value))" }
                .joined(separator: ", ")
        default:
            return plain(value)
        }
    }

    public static func plain(_ value: JSONValue) -> String {
        switch value {
        case .number(let n): n == n.rounded() && abs(n) < 1e15 ? String(Int(n)) : String(format1: n)
        case .string(let s): s
        case .bool(let b): b ? "yes" : "no"
        case .null: "-"
        case .array(let items): items.map(plain).joined(separator: ", ")
        case .object: compactJSON(value)
        }
    }

    /// Objects with simple values, one row each under a header of their keys (what names each first), columns aligned.
    static func table(_ items: [JSONValue]) -> [String]? {
        var rows: [[String: JSONValue]] = []
        for item in items {
            guard case .object(let object) = item,
                !object.values.contains(where: { if case .object = $0 { true } else { false } })
            else { return nil }
            rows.append(object)
        }
        let first = ["name", "path", "file", "url"]
        let rank = { (key: String) in first.firstIndex(of: key) ?? first.count }
        let keys = Set(rows.flatMap(\.keys)).sorted { (rank($0), $0) < (rank($1), $1) }
        let cells = [keys.map(label)] + rows.map { row in keys.map { key in row[key].map { value(key, $0) } ?? "-" } }
        let widths = keys.indices.map { column in cells.map { $0[column].count }.max() ?? 0 }
        return cells.map { row in
            row.enumerated().map { $1.padding(to: widths[$0]) }.joined(separator: "  ").trailingSpacesRemoved
        }
    }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
    var trailingSpacesRemoved: String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}
