import BroadcastCore
import BroadcastProtocol

/// `broadcastctl status --watch` with several broadcasts: one `StatusLine` each, in the order they started,
/// redrawn in place on a terminal (a broadcast that finishes leaves its line).
public struct StatusLines: Sendable {
    private var lines: [(id: UInt32?, line: StatusLine)] = []
    /// Only this broadcast's events count, when set.
    private let only: UInt32?
    /// How many lines are on screen below the last kept line.
    private var shown = 0
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

    /// Redraws the lines in place at `columns` (each cut to fit, so none wraps), with `kept` printed above
    /// them to stay. The cursor is left at the end of the last line.
    public mutating func redraw(columns: Int, keeping kept: String?) {
        func fit(_ text: String) -> String { text.count >= columns ? String(text.prefix(columns - 1)) : text }
        var out = (shown > 1 ? "\u{1B}[\(shown - 1)A" : "") + "\r"
        if let kept { out += "\u{1B}[K" + fit(kept) + "\n\r" }
        let rows = texts.isEmpty ? [""] : texts
        out += rows.map { "\u{1B}[K" + fit($0) }.joined(separator: "\n\r")
        // Fewer lines than before (a broadcast finished): what was below goes.
        if rows.count + (kept == nil ? 0 : 1) < shown { out += "\u{1B}[J" }
        print(out, terminator: "")
        shown = rows.count
    }

    private mutating func slot(_ id: UInt32?) -> Int {
        if let index = lines.firstIndex(where: { $0.id == id }) { return index }
        // A broadcast seen for the first time; the idle line (no id) gives way to it.
        lines.removeAll { $0.id == nil }
        lines.append((id, StatusLine()))
        return lines.count - 1
    }
}
