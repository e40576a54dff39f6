import BroadcastCapture
import CXCB
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// One top-level window captured through XComposite: the server keeps the window's content in a pixmap of its
/// own (automatic redirection: the screen still shows it), so the window is read as it is, covered or off
/// screen. The pixmap is named again after the window is resized or mapped (the old one keeps the old content).
/// Follows the window's moves (the cursor is placed relative to it), resizes, unmapping and destruction through
/// StructureNotify events on the top-level window and on the client inside it.
final class WindowCapture {
    let toplevel: xcb_window_t
    let client: xcb_window_t
    let label: String
    private let connection: XConnection
    private let logger: Logger
    /// The named pixmap of `toplevel`; 0 while the window is unmapped.
    private(set) var pixmap: xcb_pixmap_t = 0
    /// Where the client's content starts in the pixmap (border and window-manager frame left out).
    private(set) var offset = (x: 0, y: 0)
    /// The top-level window's border width: DAMAGE reports in window coordinates, the pixmap includes the border.
    private(set) var border = 0
    /// The client's content in root-window pixels.
    private(set) var rect: ScreenRect
    private(set) var mapped = false
    private(set) var closed = false
    /// A StructureNotify event came: look at the geometry again.
    private(set) var changed = false

    init(connection: XConnection, entry: XWindows.Entry, logger: Logger) throws(CaptureError) {
        self.connection = connection
        self.logger = logger
        toplevel = entry.toplevel
        client = entry.client
        label = entry.window.label
        rect = entry.window.rect
        guard connection.composite != nil else {
            throw CaptureError(
                source: "x11", operation: "capture window \(label)",
                reason: "X display \(connection.displayName) has no Composite extension, which window capture needs")
        }
        let c = connection.raw
        let mask = [UInt32(XCB_EVENT_MASK_STRUCTURE_NOTIFY.rawValue)]
        for window in Set([toplevel, client]) {
            _ = xcb_change_window_attributes(c, window, UInt32(XCB_CW_EVENT_MASK.rawValue), mask)
        }
        if let error = connection.check(
            xcb_composite_redirect_window_checked(c, toplevel, UInt8(XCB_COMPOSITE_REDIRECT_AUTOMATIC.rawValue)))
        {
            throw CaptureError(source: "x11", operation: "redirect window \(label) with XComposite", reason: error)
        }
        try refresh()
    }

    deinit {
        let c = connection.raw
        if pixmap != 0 { xcb_free_pixmap(c, pixmap) }
        if !closed {
            xcb_composite_unredirect_window(c, toplevel, UInt8(XCB_COMPOSITE_REDIRECT_AUTOMATIC.rawValue))
            let none = [UInt32(0)]
            for window in Set([toplevel, client]) {
                _ = xcb_change_window_attributes(c, window, UInt32(XCB_CW_EVENT_MASK.rawValue), none)
            }
        }
        connection.flush()
    }

    /// Makes the next `refresh` look again (a grab failed: the window changed under it, most likely).
    func markChanged() { changed = true }

    /// Takes the events about this window; false for events about others.
    func handle(_ event: UnsafeMutablePointer<xcb_generic_event_t>) -> Bool {
        let raw = UnsafeRawPointer(event)
        let window: xcb_window_t
        switch Int32(event.pointee.response_type & 0x7f) {
        case XCB_CONFIGURE_NOTIFY:
            window = raw.assumingMemoryBound(to: xcb_configure_notify_event_t.self).pointee.window
        case XCB_MAP_NOTIFY: window = raw.assumingMemoryBound(to: xcb_map_notify_event_t.self).pointee.window
        case XCB_UNMAP_NOTIFY: window = raw.assumingMemoryBound(to: xcb_unmap_notify_event_t.self).pointee.window
        case XCB_REPARENT_NOTIFY: window = raw.assumingMemoryBound(to: xcb_reparent_notify_event_t.self).pointee.window
        case XCB_DESTROY_NOTIFY:
            window = raw.assumingMemoryBound(to: xcb_destroy_notify_event_t.self).pointee.window
            if window == toplevel || window == client { closed = true }
        default: return false
        }
        guard window == toplevel || window == client else { return false }
        changed = true
        return true
    }

    /// Reads the window's state and geometry again and names a new pixmap when it is mapped and its size changed
    /// (or it has none). Throws when the window is gone.
    func refresh() throws(CaptureError) {
        changed = false
        guard !closed else { throw closedError }
        let c = connection.raw
        guard let attributes = xcb_get_window_attributes_reply(c, xcb_get_window_attributes(c, toplevel), nil) else {
            try connection.checkAlive("read window \(label)")
            closed = true
            throw closedError
        }
        mapped = attributes.pointee.map_state == UInt8(XCB_MAP_STATE_VIEWABLE.rawValue)
        free(attributes)
        let windows = XWindows(connection)
        guard let clientRect = windows.rootRect(of: client), let frame = windows.rootRect(of: toplevel),
            let geometry = xcb_get_geometry_reply(c, xcb_get_geometry(c, toplevel), nil)
        else {
            try connection.checkAlive("read window \(label)")
            closed = true
            throw closedError
        }
        border = Int(geometry.pointee.border_width)
        free(geometry)
        let resized =
            clientRect.width != rect.width || clientRect.height != rect.height || frame.width != frameSize.width
            || frame.height != frameSize.height
        rect = clientRect
        frameSize = (frame.width, frame.height)
        offset = (clientRect.x - frame.x + border, clientRect.y - frame.y + border)
        guard mapped else {
            // Unmapped (minimised, hidden): the server drops the window's pixmap; a new one is named when it is shown.
            if pixmap != 0 { xcb_free_pixmap(c, pixmap) }
            pixmap = 0
            return
        }
        if pixmap == 0 || resized {
            if pixmap != 0 { xcb_free_pixmap(c, pixmap) }
            pixmap = connection.generateID()
            if let error = connection.check(xcb_composite_name_window_pixmap_checked(c, toplevel, pixmap)) {
                // Unmapped between the two requests: its MapNotify will bring us back here.
                pixmap = 0
                mapped = false
                logger.debug("window \(label): naming its pixmap failed (\(error)); it is unmapped")
            }
        }
    }

    private var frameSize = (width: 0, height: 0)

    private var closedError: CaptureError {
        CaptureError(source: "x11", operation: "capture window \(label)", reason: "the window closed")
    }
}
