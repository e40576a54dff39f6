import BroadcastCore
import BroadcastProtocol

/// `broadcastctl status --watch` with several broadcasts: one `StatusLine` each, in the order they started,
/// redrawn in place on a terminal (a broadcast that finishes leaves its line).
public struct StatusLines: Sendable {
    private var lines: [(id: UInt32?, line: StatusLine)] = []
    /// Only this broadcast's events count, when set.
    private let only: UInt32?
    /// The width of each line on screen below the last kept line.
    private var shownWidths: [Int] = []
    /// The line of the broadcast the last event was about.
    public private(set) var changed = "connecting"

    public init(only: UInt32? = nil) {
        self.only = only
    }

    public mutating func update(_ status: BroadcastStatus) {
        guard only == nil || status.broadcast == only else { return }
        let index = slot(status.broadcast)
        lines[index].line.update(status)
        changed = lines[index].line.text
    }

    public mutating func update(_ info: ServiceInfo) {
        guard only == nil || info.broadcast == only else { return }
        let index = slot(info.broadcast)
        lines[index].line.update(info)
        changed = lines[index].line.text
    }

    /// The broadcast finished: its line goes (the finish is printed as a line of its own).
    public mutating func finished(_ id: UInt32) {
        lines.removeAll { $0.id == id }
    }

    /// The lines as they stand, one per broadcast.
    public var texts: [String] { lines.map(\.line.text) }

    /// What redraws the lines in place at `columns` (each with the fields that fit, so none wraps), with `kept` above
    /// them to stay; the caller writes it to the terminal. The cursor is left at the end of the last line. After a
    /// resize to fewer columns, the lines drawn before take the rows the terminal wrapped them onto, and all of those
    /// are cleared.
    public mutating func redrawing(columns: Int, keeping kept: String?) -> String {
        func fit(_ text: String) -> String { text.count >= columns ? String(text.prefix(columns - 1)) : text }
        let rowsShown = shownWidths.reduce(0) { $0 + max(1, ($1 + columns - 1) / columns) }
        var out = (rowsShown > 1 ? "\u{1B}[\(rowsShown - 1)A" : "") + "\r\u{1B}[J"
        if let kept { out += fit(kept) + "\n\r" }
        let rows = lines.isEmpty ? [""] : lines.map { $0.line.fitted(columns: columns) }
        out += rows.joined(separator: "\n\r")
        shownWidths = rows.map(\.count)
        return out
    }

    private mutating func slot(_ id: UInt32?) -> Int {
        if let index = lines.firstIndex(where: { $0.id == id }) { return index }
        // A broadcast seen for the first time; the idle line (no id) gives way to it.
        lines.removeAll { $0.id == nil }
        lines.append((id, StatusLine()))
        return lines.count - 1
    }
}
