import BroadcastCapture
import CXCB

/// Windows never captured (`--exclude-window CLASS`): the parts of them that show on screen are blacked out
/// in every frame before any handler sees it. The visible parts are worked out again whenever a top-level
/// window is created, mapped, unmapped, moved, resized, restacked or destroyed (SubstructureNotify on the
/// root window), not every frame: a frame in which nothing moved costs only the blacking out.
final class WindowExclusion {
    /// WM_CLASS names (instance or class), compared without regard to case.
    let classes: Set<String>
    /// The visible parts of excluded windows, in root-window pixels.
    private(set) var rectangles: [ScreenRect] = []
    /// Set by events: the rectangles must be worked out again.
    private(set) var stale = true
    private let connection: XConnection
    private let windows: XWindows
    /// The excluded windows' whole frames (covered parts too), by top-level window, as last worked out; and where
    /// ConfigureNotify says they went since.
    private var excludedFrames: [xcb_window_t: ScreenRect] = [:]
    private var movedTo: [ScreenRect] = []
    /// Whether each top-level window (a root child) is excluded, worked out once it is shown with a class: a
    /// client sets WM_CLASS before it maps its window (ICCCM), so the answer holds until the window is mapped
    /// again or a window manager reparents a window.
    private var excludedByWindow: [xcb_window_t: Bool] = [:]

    init(connection: XConnection, classes: [String]) {
        self.connection = connection
        self.classes = Set(classes.map { $0.lowercased() })
        windows = XWindows(connection)
        let mask = [UInt32(XCB_EVENT_MASK_SUBSTRUCTURE_NOTIFY.rawValue)]
        _ = xcb_change_window_attributes(connection.raw, connection.root, UInt32(XCB_CW_EVENT_MASK.rawValue), mask)
        connection.flush()
    }

    /// Notes events that may change what is visible; the event is left for others too.
    func note(_ event: UnsafeMutablePointer<xcb_generic_event_t>) {
        switch Int32(event.pointee.response_type & 0x7f) {
        case XCB_MAP_NOTIFY:
            // Mapped (again): its class is looked at anew.
            excludedByWindow[
                UnsafeRawPointer(event).assumingMemoryBound(to: xcb_map_notify_event_t.self).pointee.window] = nil
            stale = true
        case XCB_REPARENT_NOTIFY:
            // A window manager took a client into a frame (or gave it back): every class is looked at anew.
            excludedByWindow = [:]
            stale = true
        case XCB_CONFIGURE_NOTIFY:
            let e = UnsafeRawPointer(event).assumingMemoryBound(to: xcb_configure_notify_event_t.self).pointee
            if excludedFrames[e.window] != nil {
                let border = 2 * Int(e.border_width)
                movedTo.append(
                    ScreenRect(x: Int(e.x), y: Int(e.y), width: Int(e.width) + border, height: Int(e.height) + border))
            }
            stale = true
        case XCB_CREATE_NOTIFY, XCB_DESTROY_NOTIFY, XCB_UNMAP_NOTIFY, XCB_CIRCULATE_NOTIFY:
            stale = true
        default:
            break
        }
    }

    /// Works the visible parts out again when events said so; the rectangles before, when they changed.
    func refresh() -> [ScreenRect]? {
        guard stale else { return nil }
        stale = false
        movedTo = []
        let before = rectangles
        rectangles = visibleNow()
        return rectangles == before ? nil : before
    }

    /// After a frame was grabbed with the rectangles as they were, and its events read (those of changes made before
    /// the grab's replies come before them): when excluded windows moved, or what shows of them changed, the pixels
    /// may show one where no rectangle was. Every place each excluded window was since, its whole frame, is returned
    /// to be blacked out in that frame too; nil when nothing that matters changed.
    func placesSinceGrab() -> [ScreenRect]? {
        guard stale else { return nil }
        let framesBefore = Array(excludedFrames.values)
        let moves = movedTo
        guard refresh() != nil || !moves.isEmpty else { return nil }
        return framesBefore + moves + excludedFrames.values
    }

    /// One request for the stacking order; the class of each window shown since the last look; the geometry of
    /// the excluded windows and of those above them only. With no excluded window shown, that is the tree alone.
    /// Pop-ups (override-redirect: menus, tooltips) are looked at every time: one is excluded by its class, or as
    /// a pop-up of the same process as an excluded window (_NET_WM_PID), and any other covers what lies below it.
    private func visibleNow() -> [ScreenRect] {
        let toplevels = windows.children(of: connection.root)
        let present = Set(toplevels)
        excludedByWindow = excludedByWindow.filter { present.contains($0.key) }
        var entries: [xcb_window_t: XWindows.Entry] = [:]
        for toplevel in toplevels where excludedByWindow[toplevel] == nil {
            guard let entry = windows.entry(toplevel, includingPopups: true) else { continue }
            entries[toplevel] = entry
            // Remembered once shown with a class: a frame whose client is not in it yet is looked at again.
            let named = !entry.window.instance.isEmpty || !entry.window.className.isEmpty
            if !entry.overrideRedirect, isExcluded(entry.window) || (entry.window.mapped && named) {
                excludedByWindow[toplevel] = isExcluded(entry.window)
            }
        }
        guard
            let lowest = toplevels.firstIndex(where: {
                excludedByWindow[$0] == true || entries[$0].map { $0.overrideRedirect && isExcluded($0.window) } == true
            })
        else {
            excludedFrames = [:]
            return []
        }
        let stack = toplevels[lowest...].compactMap { entries[$0] ?? windows.entry($0, includingPopups: true) }
        let processes = Set(stack.filter { excludedByWindow[$0.toplevel] == true }.compactMap(\.window.pid))
        let excluded = { [excludedByWindow] (entry: XWindows.Entry) in
            excludedByWindow[entry.toplevel] == true || self.isExcluded(entry.window)
                || (entry.overrideRedirect && entry.window.pid.map(processes.contains) == true)
        }
        excludedFrames = Dictionary(stack.filter { $0.window.mapped && excluded($0) }.map { ($0.toplevel, $0.frame) }) {
            a, _ in a
        }
        return Self.visibleParts(stack, excluded: excluded)
    }

    func isExcluded(_ window: CaptureWindow) -> Bool { window.isOfClass(in: classes) }

    /// The parts of the excluded windows among `windows` (bottom to top) that no shown window above covers.
    static func visibleParts(_ windows: [XWindows.Entry], excluded: (XWindows.Entry) -> Bool) -> [ScreenRect] {
        var parts: [ScreenRect] = []
        for (index, entry) in windows.enumerated() where entry.window.mapped && excluded(entry) {
            var pieces = [entry.frame]
            for above in windows[(index + 1)...] where above.window.mapped && !excluded(above) {
                pieces = pieces.flatMap { $0.subtracting(above.frame) }
            }
            parts += pieces
        }
        return parts
    }
}
