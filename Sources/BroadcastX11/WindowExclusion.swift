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

    init(connection: XConnection, classes: [String]) {
        self.connection = connection
        self.classes = Set(classes.map { $0.lowercased() })
        let mask = [UInt32(XCB_EVENT_MASK_SUBSTRUCTURE_NOTIFY.rawValue)]
        _ = xcb_change_window_attributes(connection.raw, connection.root, UInt32(XCB_CW_EVENT_MASK.rawValue), mask)
        connection.flush()
    }

    /// Notes events that may change what is visible; the event is left for others too.
    func note(_ type: UInt8) {
        switch Int32(type) {
        case XCB_CREATE_NOTIFY, XCB_DESTROY_NOTIFY, XCB_UNMAP_NOTIFY, XCB_MAP_NOTIFY, XCB_REPARENT_NOTIFY, XCB_CONFIGURE_NOTIFY,
             XCB_CIRCULATE_NOTIFY:
            stale = true
        default:
            break
        }
    }

    /// Works the visible parts out again when events said so; the rectangles before, when they changed.
    func refresh() -> [ScreenRect]? {
        guard stale else { return nil }
        stale = false
        let before = rectangles
        rectangles = Self.visibleParts(XWindows(connection).list(), excluded: { isExcluded($0.window) })
        return rectangles == before ? nil : before
    }

    func isExcluded(_ window: CaptureWindow) -> Bool {
        classes.contains(window.instance.lowercased()) || classes.contains(window.className.lowercased())
    }

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
