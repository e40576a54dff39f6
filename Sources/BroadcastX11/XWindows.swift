import BroadcastCapture
import CXCB

#if canImport(Glibc)
    import Glibc
#endif

/// The top-level windows of an X screen and what their clients say about them (ICCCM and EWMH properties).
/// Without a window manager a top-level window is a child of the root; with one, the root's child is the
/// manager's frame and the client window (the one with WM_STATE) lies inside it.
struct XWindows {
    /// A top-level window: the root's child (`toplevel`) and the client window in it (the same without a window manager).
    struct Entry {
        var toplevel: xcb_window_t
        var client: xcb_window_t
        var window: CaptureWindow
        /// The top-level window's outside (border and window-manager frame included), root-window pixels.
        var frame: ScreenRect
        /// A pop-up (menu, tooltip) no window manager handles: override-redirect.
        var overrideRedirect = false
    }

    private let connection: XConnection
    private let wmState: xcb_atom_t
    private let netWMName: xcb_atom_t
    private let netWMPid: xcb_atom_t
    private let utf8String: xcb_atom_t

    init(_ connection: XConnection) {
        self.connection = connection
        wmState = connection.atom("WM_STATE")
        netWMName = connection.atom("_NET_WM_NAME")
        netWMPid = connection.atom("_NET_WM_PID")
        utf8String = connection.atom("UTF8_STRING")
    }

    /// Every top-level window that is shown, or that a window manager manages (a minimised one), bottom to top.
    func list() -> [Entry] {
        children(of: connection.root).compactMap { entry($0) }
    }

    /// The window `selector` names: by id (a client or its frame), or the topmost best match by class, then whole
    /// title, then part of the title; with how it was found. A window of a class in `excluded` (`--exclude-window`,
    /// lower case) is never the one: among equal matches another is taken, else capturing it is refused.
    func find(_ selector: WindowSelector, excluding excluded: Set<String>) throws(CaptureError)
        -> (entry: Entry, how: String)
    {
        let all = list()
        let on = " on \(connection.displayName)\(Self.listing(all))"
        let found: (entry: Entry, how: String)
        switch selector {
        case .id(let id):
            guard let entry = all.first(where: { $0.client == id || $0.toplevel == id }) else {
                throw CaptureError(
                    source: "x11", operation: "find window \(selector)",
                    reason: "no top-level window has id \(selector)" + on)
            }
            found = (entry, "its id")
        case .pid(let pid):
            let candidates = all.filter { $0.window.pid == pid }
            guard let entry = candidates.last(where: { !$0.window.isOfClass(in: excluded) }) ?? candidates.last else {
                throw CaptureError(
                    source: "x11", operation: "find the window of process \(pid)",
                    reason: "no top-level window says it belongs to process \(pid) (_NET_WM_PID)" + on)
            }
            found = (entry, "its process (the topmost of \(candidates.count))")
        case .name(let name):
            let scored = all.map { ($0, $0.window.match(name)) }.filter { $0.1 > 0 }
            guard let best = scored.map(\.1).max() else {
                throw CaptureError(
                    source: "x11", operation: "find window \(selector)",
                    reason: "no top-level window's class or title matches \(selector)" + on)
            }
            // Stacking order is bottom to top: among equals, the last is the topmost.
            let candidates = scored.filter { $0.1 == best }.map(\.0)
            let entry = candidates.last { !$0.window.isOfClass(in: excluded) } ?? candidates.last!
            let others = candidates.count > 1 ? ", the topmost of \(candidates.count) that match so" : ""
            found = (entry, (CaptureWindow.matchKinds[best] ?? "?") + others)
        }
        if found.entry.window.isOfClass(in: excluded) {
            let window = found.entry.window
            let name = [window.instance, window.className].first { excluded.contains($0.lowercased()) } ?? "?"
            throw CaptureError(
                source: "x11", operation: "capture window \(window.label)",
                reason: "windows of class \(name) are never captured (--exclude-window); "
                    + "capture another window, or leave \(name) out of --exclude-window")
        }
        return found
    }

    private static func listing(_ all: [Entry]) -> String {
        guard !all.isEmpty else { return " (it has none)" }
        let shown = all.suffix(8).reversed().map(\.window.label)
        return "; windows: " + shown.joined(separator: ", ")
            + (all.count > 8 ? ", ... (broadcastctl sources lists them all)" : "")
    }

    func children(of window: xcb_window_t) -> [xcb_window_t] {
        let c = connection.raw
        guard let reply = xcb_query_tree_reply(c, xcb_query_tree(c, window), nil) else { return [] }
        defer { free(reply) }
        return Array(
            UnsafeBufferPointer(
                start: xcb_query_tree_children(reply), count: Int(xcb_query_tree_children_length(reply))))
    }

    /// The root child `toplevel` as a top-level window, or nil when it is not one (input-only, override-redirect
    /// unless `includingPopups` (then only while shown), or neither shown nor managed).
    func entry(_ toplevel: xcb_window_t, includingPopups: Bool = false) -> Entry? {
        let c = connection.raw
        guard let attributes = xcb_get_window_attributes_reply(c, xcb_get_window_attributes(c, toplevel), nil) else {
            return nil
        }
        let a = attributes.pointee
        free(attributes)
        let popup = a.override_redirect != 0
        guard a._class != UInt16(XCB_WINDOW_CLASS_INPUT_ONLY.rawValue), includingPopups || !popup else { return nil }
        let mapped = a.map_state == UInt8(XCB_MAP_STATE_VIEWABLE.rawValue)
        var client = toplevel
        if !popup, !hasProperty(toplevel, wmState),
            let inside = children(of: toplevel).first(where: { hasProperty($0, wmState) })
        {
            client = inside
        }
        guard mapped || (!popup && hasProperty(client, wmState)) else { return nil }
        guard let rect = rootRect(of: client),
            let geometry = xcb_get_geometry_reply(c, xcb_get_geometry(c, toplevel), nil)
        else { return nil }
        let g = geometry.pointee
        free(geometry)
        let frame = ScreenRect(
            x: Int(g.x), y: Int(g.y), width: Int(g.width) + 2 * Int(g.border_width),
            height: Int(g.height) + 2 * Int(g.border_width))
        let wmClass = property(client, XCB_ATOM_WM_CLASS.rawValue, type: XCB_ATOM_STRING.rawValue).split(
            separator: "\0", omittingEmptySubsequences: false)
        var title = property(client, netWMName, type: utf8String)
        if title.isEmpty { title = property(client, XCB_ATOM_WM_NAME.rawValue, type: XCB_ATOM_ANY.rawValue) }
        let pid = cardinal(client, netWMPid)
        let window = CaptureWindow(
            id: client, instance: wmClass.first.map(String.init) ?? "",
            className: wmClass.count > 1 ? String(wmClass[1]) : "",
            title: title, pid: pid.map(Int.init), rect: rect, mapped: mapped)
        return Entry(toplevel: toplevel, client: client, window: window, frame: frame, overrideRedirect: popup)
    }

    /// Where `window`'s inside lies in root-window pixels.
    func rootRect(of window: xcb_window_t) -> ScreenRect? {
        let c = connection.raw
        guard let geometry = xcb_get_geometry_reply(c, xcb_get_geometry(c, window), nil) else { return nil }
        defer { free(geometry) }
        guard
            let origin = xcb_translate_coordinates_reply(
                c, xcb_translate_coordinates(c, window, connection.root, 0, 0), nil)
        else { return nil }
        defer { free(origin) }
        return ScreenRect(
            x: Int(origin.pointee.dst_x), y: Int(origin.pointee.dst_y),
            width: Int(geometry.pointee.width), height: Int(geometry.pointee.height))
    }

    private func hasProperty(_ window: xcb_window_t, _ atom: xcb_atom_t) -> Bool {
        let c = connection.raw
        guard
            let reply = xcb_get_property_reply(
                c, xcb_get_property(c, 0, window, atom, XCB_ATOM_ANY.rawValue, 0, 0), nil)
        else { return false }
        defer { free(reply) }
        return reply.pointee.type != 0
    }

    /// A text property, at most 4 KiB of it.
    private func property(_ window: xcb_window_t, _ atom: xcb_atom_t, type: xcb_atom_t) -> String {
        let c = connection.raw
        guard let reply = xcb_get_property_reply(c, xcb_get_property(c, 0, window, atom, type, 0, 1024), nil) else {
            return ""
        }
        defer { free(reply) }
        let length = Int(xcb_get_property_value_length(reply))
        guard reply.pointee.format == 8, length > 0, let value = xcb_get_property_value(reply) else { return "" }
        var text = String(decoding: UnsafeRawBufferPointer(start: value, count: length), as: UTF8.self)
        while text.hasSuffix("\0") { text.removeLast() }
        return text
    }

    private func cardinal(_ window: xcb_window_t, _ atom: xcb_atom_t) -> UInt32? {
        let c = connection.raw
        guard
            let reply = xcb_get_property_reply(
                c, xcb_get_property(c, 0, window, atom, XCB_ATOM_CARDINAL.rawValue, 0, 1), nil)
        else { return nil }
        defer { free(reply) }
        guard reply.pointee.format == 32, xcb_get_property_value_length(reply) >= 4,
            let value = xcb_get_property_value(reply)
        else { return nil }
        return value.load(as: UInt32.self)
    }
}

extension XConnection {
    /// The atom named `name` (created when the server has none yet); 0 when the server does not answer.
    func atom(_ name: String) -> xcb_atom_t {
        let reply = name.withCString {
            xcb_intern_atom_reply(raw, xcb_intern_atom(raw, 0, UInt16(strlen($0)), $0), nil)
        }
        guard let reply else { return 0 }
        defer { free(reply) }
        return reply.pointee.atom
    }
}
