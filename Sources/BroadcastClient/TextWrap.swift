/// Text folded to a terminal's width at spaces, never inside a word (a word longer than the line gets
/// a line of its own, whole): `broadcastctl handlers`.
public enum TextWrap {
    /// `text` as lines of at most `width` columns (when its words allow), the first starting with `indent`,
    /// the rest with `continuation`. `width` nil: one line, unfolded.
    public static func wrap(_ text: String, width: Int?, indent: String = "", continuation: String? = nil) -> [String] {
        let continuation = continuation ?? indent
        guard let width else { return [indent + text] }
        var lines: [String] = []
        var line = indent
        var empty = true
        for word in text.split(separator: " ", omittingEmptySubsequences: true) {
            if !empty && line.count + 1 + word.count > width {
                lines.append(line)
                line = continuation
                empty = true
            }
            line += (empty ? "" : " ") + word
            empty = false
        }
        lines.append(line)
        return lines
    }
}
