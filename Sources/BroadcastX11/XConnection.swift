import BroadcastCapture
import BroadcastSystem
import CXCB

#if canImport(Glibc)
    import Glibc
#endif

/// One connection to an X server: the screen's root window, its pixel layout, and the extensions
/// capture uses, probed once when connecting.
final class XConnection {
    struct Extension: Equatable {
        var major: Int
        var minor: Int
        /// The first event number the server gave the extension.
        var firstEvent: UInt8
        var version: String { "\(major).\(minor)" }
    }

    let raw: OpaquePointer
    let displayName: String
    let root: xcb_window_t
    let rootVisual: xcb_visualid_t
    var screenWidth: Int
    var screenHeight: Int
    private(set) var shm: Extension?
    private(set) var xfixes: Extension?
    private(set) var randr: Extension?
    private(set) var damage: Extension?
    private(set) var composite: Extension?

    /// Connects to `display` (nil: $DISPLAY) and checks that its pixels are 32-bit BGRx, the layout capture reads.
    init(display: String?) throws(CaptureError) {
        let name = display ?? Environment.get("DISPLAY")
        guard let name, !name.isEmpty else {
            throw CaptureError(
                source: "x11", operation: "connect", reason: "no X display given: DISPLAY is not set (use --display :N)"
            )
        }
        displayName = name
        var screenNumber: Int32 = 0
        let connection = xcb_connect(name, &screenNumber)!
        let status = xcb_connection_has_error(connection)
        guard status == 0 else {
            xcb_disconnect(connection)
            throw CaptureError(
                source: "x11", operation: "connect to X display \(name)", reason: Self.describeConnectionError(status))
        }
        raw = connection
        var screens = xcb_setup_roots_iterator(xcb_get_setup(connection))
        for _ in 0..<screenNumber where screens.rem > 0 { xcb_screen_next(&screens) }
        guard screens.rem > 0, let screen = screens.data?.pointee else {
            xcb_disconnect(connection)
            throw CaptureError(
                source: "x11", operation: "connect to X display \(name)",
                reason: "screen \(screenNumber) does not exist")
        }
        root = screen.root
        rootVisual = screen.root_visual
        screenWidth = Int(screen.width_in_pixels)
        screenHeight = Int(screen.height_in_pixels)
        do throws(CaptureError) {
            try checkPixelLayout(depth: screen.root_depth)
        } catch {
            xcb_disconnect(connection)
            throw error
        }
        probeExtensions()
    }

    deinit {
        xcb_disconnect(raw)
    }

    /// Throws when the server has closed the connection (it exited or crashed, say).
    func checkAlive(_ operation: String) throws(CaptureError) {
        let status = xcb_connection_has_error(raw)
        if status != 0 {
            throw CaptureError(
                source: "x11", operation: operation,
                reason: "the connection to X display \(displayName) was lost (\(Self.describeConnectionError(status)))")
        }
    }

    func generateID() -> UInt32 { xcb_generate_id(raw) }

    func flush() { xcb_flush(raw) }

    /// The error of a checked request, as text, or nil when it succeeded.
    func check(_ cookie: xcb_void_cookie_t) -> String? {
        guard let error = xcb_request_check(raw, cookie) else { return nil }
        defer { free(error) }
        return "X error \(error.pointee.error_code) (request \(error.pointee.major_code).\(error.pointee.minor_code))"
    }

    func atomName(_ atom: xcb_atom_t) -> String? {
        guard let reply = xcb_get_atom_name_reply(raw, xcb_get_atom_name(raw, atom), nil) else { return nil }
        defer { free(reply) }
        let length = Int(xcb_get_atom_name_name_length(reply))
        let bytes = UnsafeRawBufferPointer(start: xcb_get_atom_name_name(reply), count: length)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The root window's size as the server reports it now.
    func refreshScreenSize() throws(CaptureError) {
        guard let reply = xcb_get_geometry_reply(raw, xcb_get_geometry(raw, root), nil) else {
            try checkAlive("read the screen size")
            throw CaptureError(
                source: "x11", operation: "read the screen size", reason: "GetGeometry on the root window failed")
        }
        defer { free(reply) }
        screenWidth = Int(reply.pointee.width)
        screenHeight = Int(reply.pointee.height)
    }

    private func checkPixelLayout(depth: UInt8) throws(CaptureError) {
        let setup = xcb_get_setup(raw)!
        var formats = xcb_setup_pixmap_formats_iterator(setup)
        var bitsPerPixel: UInt8 = 0
        while formats.rem > 0 {
            if formats.data.pointee.depth == depth { bitsPerPixel = formats.data.pointee.bits_per_pixel }
            xcb_format_next(&formats)
        }
        let littleEndian = setup.pointee.image_byte_order == UInt8(XCB_IMAGE_ORDER_LSB_FIRST.rawValue)
        guard (depth == 24 || depth == 32) && bitsPerPixel == 32 && littleEndian else {
            throw CaptureError(
                source: "x11", operation: "check the screen's pixel format",
                reason:
                    "X display \(displayName) has depth \(depth) at \(bitsPerPixel) bits per pixel\(littleEndian ? "" : ", big-endian"); capture needs 24-bit colour in 32-bit little-endian pixels"
            )
        }
    }

    private func probeExtensions() {
        /// The extension's version, when the server has it: `query` asks for it (nil: no reply),
        /// `version` reads major and minor out of the reply.
        func probe<Reply>(
            _ id: OpaquePointer, _ query: () -> UnsafeMutablePointer<Reply>?,
            _ version: (Reply) -> (Int, Int)
        ) -> Extension? {
            guard let data = xcb_get_extension_data(raw, id), data.pointee.present != 0, let reply = query() else {
                return nil
            }
            defer { free(reply) }
            let (major, minor) = version(reply.pointee)
            return Extension(major: major, minor: minor, firstEvent: data.pointee.first_event)
        }
        shm = probe(cxcb_shm_extension(), { xcb_shm_query_version_reply(raw, xcb_shm_query_version(raw), nil) }) {
            (Int($0.major_version), Int($0.minor_version))
        }
        // XFixes and DAMAGE must be told which version the client speaks before any other request.
        xfixes = probe(
            cxcb_xfixes_extension(), { xcb_xfixes_query_version_reply(raw, xcb_xfixes_query_version(raw, 5, 0), nil) }
        ) {
            (Int($0.major_version), Int($0.minor_version))
        }
        randr = probe(
            cxcb_randr_extension(), { xcb_randr_query_version_reply(raw, xcb_randr_query_version(raw, 1, 5), nil) }
        ) {
            (Int($0.major_version), Int($0.minor_version))
        }
        damage = probe(
            cxcb_damage_extension(), { xcb_damage_query_version_reply(raw, xcb_damage_query_version(raw, 1, 1), nil) }
        ) {
            (Int($0.major_version), Int($0.minor_version))
        }
        composite = probe(
            cxcb_composite_extension(),
            { xcb_composite_query_version_reply(raw, xcb_composite_query_version(raw, 0, 4), nil) }
        ) {
            (Int($0.major_version), Int($0.minor_version))
        }
    }

    /// RandR monitors (1.5) and the outputs driving a CRTC, by name; monitors first, each name once.
    func outputs() -> [ScreenOutput] {
        guard let randr else { return [] }
        var result: [ScreenOutput] = []
        var crtcOfOutput: [xcb_randr_output_t: xcb_randr_crtc_t] = [:]
        var crtcs: [xcb_randr_crtc_t: (rect: ScreenRect, rotation: UInt16)] = [:]
        if let resources = xcb_randr_get_screen_resources_current_reply(
            raw, xcb_randr_get_screen_resources_current(raw, root), nil)
        {
            defer { free(resources) }
            let timestamp = resources.pointee.config_timestamp
            let outputIDs = UnsafeBufferPointer(
                start: xcb_randr_get_screen_resources_current_outputs(resources),
                count: Int(xcb_randr_get_screen_resources_current_outputs_length(resources)))
            var named: [(String, xcb_randr_crtc_t)] = []
            for output in outputIDs {
                guard
                    let info = xcb_randr_get_output_info_reply(
                        raw, xcb_randr_get_output_info(raw, output, timestamp), nil)
                else { continue }
                defer { free(info) }
                let name = String(
                    decoding: UnsafeRawBufferPointer(
                        start: xcb_randr_get_output_info_name(info),
                        count: Int(xcb_randr_get_output_info_name_length(info))), as: UTF8.self)
                guard info.pointee.crtc != 0 else { continue }
                crtcOfOutput[output] = info.pointee.crtc
                named.append((name, info.pointee.crtc))
            }
            for crtc in Set(crtcOfOutput.values) {
                guard let info = xcb_randr_get_crtc_info_reply(raw, xcb_randr_get_crtc_info(raw, crtc, timestamp), nil)
                else { continue }
                defer { free(info) }
                let p = info.pointee
                crtcs[crtc] = (
                    ScreenRect(x: Int(p.x), y: Int(p.y), width: Int(p.width), height: Int(p.height)), p.rotation
                )
            }
            if randr.major > 1 || randr.minor >= 5,
                let monitors = xcb_randr_get_monitors_reply(raw, xcb_randr_get_monitors(raw, root, 1), nil)
            {
                defer { free(monitors) }
                var iterator = xcb_randr_get_monitors_monitors_iterator(monitors)
                while iterator.rem > 0 {
                    let monitor = iterator.data!
                    let m = monitor.pointee
                    let firstOutput = m.nOutput > 0 ? xcb_randr_monitor_info_outputs(monitor).pointee : 0
                    let rotation = crtcOfOutput[firstOutput].flatMap { crtcs[$0]?.rotation } ?? 1
                    if let name = atomName(m.name) {
                        result.append(
                            Self.output(
                                name, ScreenRect(x: Int(m.x), y: Int(m.y), width: Int(m.width), height: Int(m.height)),
                                rotation: rotation, primary: m.primary != 0))
                    }
                    xcb_randr_monitor_info_next(&iterator)
                }
            }
            for (name, crtc) in named where !result.contains(where: { $0.name == name }) {
                guard let c = crtcs[crtc] else { continue }
                result.append(Self.output(name, c.rect, rotation: c.rotation, primary: false))
            }
        }
        return result
    }

    private static func output(_ name: String, _ rect: ScreenRect, rotation: UInt16, primary: Bool) -> ScreenOutput {
        let degrees = rotation & 2 != 0 ? 90 : rotation & 4 != 0 ? 180 : rotation & 8 != 0 ? 270 : 0
        return ScreenOutput(
            name: name, rect: rect, rotation: degrees, reflected: rotation & 0x30 != 0, primary: primary)
    }

    static func describeConnectionError(_ status: Int32) -> String {
        switch status {
        case XCB_CONN_ERROR:
            "no X server answered, or it refused this client (is the X server running, and may this user use it? check DISPLAY and XAUTHORITY)"
        case XCB_CONN_CLOSED_EXT_NOTSUPPORTED: "the server lacks an extension capture needs"
        case XCB_CONN_CLOSED_MEM_INSUFFICIENT: "out of memory"
        case XCB_CONN_CLOSED_REQ_LEN_EXCEED: "a request exceeded the server's maximum length"
        case XCB_CONN_CLOSED_PARSE_ERR: "the display name is not valid (expected something like :0)"
        case XCB_CONN_CLOSED_INVALID_SCREEN: "the display has no such screen"
        case XCB_CONN_CLOSED_FDPASSING_FAILED: "passing a file descriptor to the server failed"
        default: "connection error \(status)"
        }
    }
}
