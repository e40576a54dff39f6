import BroadcastCapture
import BroadcastCore
import BroadcastSystem
import CXCB
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// Captures an X11 screen, one RandR output of it, or a region: MIT-SHM grabs band by band, each band
/// converted straight into the pool slot. With DAMAGE, only bands that changed are grabbed again (the
/// rest is copied from the previous frame, and a frame in which nothing changed is not captured at
/// all); with XFixes the cursor is drawn in, reported as metadata, or left out; with RandR a resized
/// screen or output keeps the broadcast going in the new size. A window target is read from its XComposite
/// pixmap (see `WindowCapture`): resized, it changes the format as RandR does; unmapped, its last frame repeats;
/// closed, capture fails with "the window closed".
public final class X11ScreenSource: CaptureSource {
    public struct Configuration: Sendable {
        /// nil: $DISPLAY.
        public var display: String?
        public var target: CaptureTarget = .screen
        public var framesPerSecond = 30
        public var pixelFormat: PixelFormat = .nv12
        public var colorRange: ColorRange = .limited
        public var cursor: CursorMode = .embedded
        public var grabMethod: GrabMethod = .auto
        /// Use XDamage to skip what did not change (when the server has it).
        public var useDamage = true
        /// WM_CLASS names of windows whose visible parts are blacked out (screen, output and region targets).
        public var excludedWindows: [String] = []
        public var audio = AudioFormat()

        public init(display: String? = nil) {
            self.display = display
        }
    }

    public private(set) var configuration: Configuration
    private let logger: Logger
    private var connection: XConnection?
    private var window: WindowCapture?
    private var exclusion: WindowExclusion?
    /// The excluded windows' visible parts in frame coordinates, and the rectangles and area they were worked
    /// out from: worked out again only when either changes, not every frame.
    private var hidden: (rects: [ScreenRect], from: [ScreenRect], area: ScreenRect) =
        ([], [], ScreenRect(x: 0, y: 0, width: 0, height: 0))
    /// The window is mapped and big enough for a frame; otherwise its last frame repeats.
    private var windowShown = true
    private var grabber: BandGrabber?
    private var converter: FrameConverter?
    private var area = ScreenRect(x: 0, y: 0, width: 0, height: 0)
    private var dirty = DirtyBands(height: 0, bandRows: 2)
    private var damage: xcb_damage_damage_t = 0
    private var damageRegion: xcb_xfixes_region_t = 0
    private var damaged = false
    private var geometryChanged = false
    private var cursorShapeChanged = true
    /// The pointer's hotspot in root coordinates, and its image.
    private var pointer: (x: Int, y: Int)?
    private var sprite: CursorSprite?
    /// Where the cursor was last drawn into a frame, in capture-area coordinates.
    private var drawnCursor: ScreenRect?
    /// The rows of each band to grab for the frame being captured (kept, so that no frame allocates it anew).
    private var bandsToGrab: [Range<Int>] = []
    private struct Counts {
        var framesGrabbed: UInt64 = 0, bandsGrabbed: UInt64 = 0, bandsCopied: UInt64 = 0, resizes: UInt64 = 0
    }
    private var counts = Counts()
    public private(set) var videoFormat: VideoFormat

    public init(_ configuration: Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        videoFormat = VideoFormat(width: 0, height: 0, pixelFormat: configuration.pixelFormat)
    }

    public var description: String {
        let display = connection?.displayName ?? configuration.display ?? Environment.get("DISPLAY") ?? "?"
        var text = "x11 \(display) " + (window.map { "window \($0.label)" } ?? configuration.target.description)
        if connection != nil {
            // The rectangle grabbed, said once: a region's is its own (until a change takes effect, at the next frame).
            if case .region(let rect) = configuration.target, rect == area || geometryChanged {
                text += rect == area ? "" : " from the next frame (now \(area))"
            } else {
                text += " at \(area)"
            }
            text += ", \(configuration.pixelFormat)"
        }
        return text + " @ \(configuration.framesPerSecond) fps, cursor \(configuration.cursor.rawValue)"
    }

    public var audioFormat: AudioFormat { configuration.audio }
    /// Audio comes from PipeWire, not from X.
    public var audioStreams: [SampleType] { [] }
    public var frameInterval: UInt64 { 1_000_000_000 / UInt64(configuration.framesPerSecond) }
    /// The root window is already laid out as a rotated output shows it: frames are upright as captured.
    public var orientation: Orientation { .up }
    public var colorRange: ColorRange { configuration.colorRange }
    public var sharedMemory: [SharedBuffers] {
        guard let region = grabber?.sharedRegion else { return [] }
        return [SharedBuffers(name: "MIT-SHM bands", regions: [region])]
    }
    public var statistics: [String: UInt64] {
        [
            "framesGrabbed": counts.framesGrabbed, "bandsGrabbed": counts.bandsGrabbed,
            "bandsCopied": counts.bandsCopied, "resizes": counts.resizes,
        ]
    }

    public var cursor: CursorState? {
        guard configuration.cursor == .metadata, let pointer else { return nil }
        let x = pointer.x - area.x
        let y = pointer.y - area.y
        return CursorState(
            x: Int32(x), y: Int32(y), visible: x >= 0 && y >= 0 && x < area.width && y < area.height, sprite: sprite)
    }

    // MARK: - Opening

    public func open() throws(CaptureError) -> VideoFormat {
        close()
        counts = Counts()
        let connection = try XConnection(display: configuration.display)
        self.connection = connection
        do throws(CaptureError) {
            try setUpArea()
            try setUpEvents()
            if window == nil && !configuration.excludedWindows.isEmpty {
                exclusion = WindowExclusion(connection: connection, classes: configuration.excludedWindows)
            }
        } catch {
            close()
            throw error
        }
        var using = ["MIT-SHM \(connection.shm?.version ?? "missing") (\(grabber!.method.rawValue))"]
        using.append(connection.xfixes.map { "XFixes \($0.version)" } ?? "no XFixes (no cursor)")
        using.append(connection.randr.map { "RandR \($0.version)" } ?? "no RandR (fixed size)")
        if window != nil { using.append("Composite \(connection.composite!.version)") }
        if let exclusion {
            using.append("windows of class \(exclusion.classes.sorted().joined(separator: ", ")) blacked out")
        }
        using.append(
            damage != 0
                ? "DAMAGE \(connection.damage!.version)"
                : connection.damage == nil ? "no DAMAGE (every frame grabbed whole)" : "DAMAGE not used")
        logger.info(
            "X display \(connection.displayName): capturing \(configuration.target) \(area); using \(using.joined(separator: ", "))"
        )
        return videoFormat
    }

    public func close() {
        grabber = nil
        converter = nil
        if let connection, damage != 0 {
            xcb_damage_destroy(connection.raw, damage)
            xcb_xfixes_destroy_region(connection.raw, damageRegion)
            connection.flush()
        }
        damage = 0
        damageRegion = 0
        window = nil
        windowShown = true
        exclusion = nil
        connection = nil
        pointer = nil
        sprite = nil
        drawnCursor = nil
    }

    /// The screen and its outputs, on this source's connection when it has one.
    public func outputs() throws(CaptureError) -> CaptureOutputs {
        let connection: XConnection
        if let open = self.connection {
            connection = open
        } else {
            connection = try XConnection(display: configuration.display)
        }
        return CaptureOutputs(
            kind: "x11", screen: ScreenRect(x: 0, y: 0, width: connection.screenWidth, height: connection.screenHeight),
            outputs: connection.outputs(), windows: XWindows(connection).list().map(\.window))
    }

    /// Works out the capture area and sets up grabbing and conversion for its size (`afterResize`: the screen's
    /// size changed under the running capture, and a region is clipped to it).
    private func setUpArea(afterResize: Bool = false) throws(CaptureError) {
        let connection = connection!
        if case .window(let selector) = configuration.target {
            if window == nil {
                let excluded = Set(configuration.excludedWindows.map { $0.lowercased() })
                let (entry, how) = try XWindows(connection).find(selector, excluding: excluded)
                logger.info("window \(selector) is \(entry.window.label), found by \(how)")
                window = try WindowCapture(connection: connection, entry: entry, logger: logger)
            }
            let window = window!
            guard window.mapped else {
                throw CaptureError(
                    source: "x11", operation: "capture window \(window.label)",
                    reason: "the window is not shown (minimised or unmapped): show it, then start")
            }
            guard let rect = Self.frameRect(window.rect) else {
                throw CaptureError(
                    source: "x11", operation: "capture window \(window.label)",
                    reason: "the window is \(window.rect.width)x\(window.rect.height): frames must be at least 16x16")
            }
            area = rect
            try setUpGrabbing()
            return
        }
        do {
            let outputs = configuration.target == .screen ? [] : connection.outputs()
            area = try configuration.target.resolve(
                screenWidth: connection.screenWidth, screenHeight: connection.screenHeight,
                outputs: outputs, clipsRegion: afterResize)
        } catch {
            throw CaptureError(
                source: "x11", operation: "find the capture area on \(connection.displayName)",
                reason: error.description)
        }
        try setUpGrabbing()
    }

    /// The excluded windows' visible parts in frame coordinates.
    private func hiddenInFrame() -> [ScreenRect] {
        let rects = exclusion?.rectangles ?? []
        if rects != hidden.from || area != hidden.area { hidden = (rects.compactMap(inFrame), rects, area) }
        return hidden.rects
    }

    /// The part of `rect` (root-window pixels) within the capture area, in frame coordinates.
    private func inFrame(_ rect: ScreenRect) -> ScreenRect? {
        rect.intersection(area).map {
            ScreenRect(x: $0.x - area.x, y: $0.y - area.y, width: $0.width, height: $0.height)
        }
    }

    /// A window's content rectangle as frames take it: even sizes, at least 16x16; nil when too small.
    private static func frameRect(_ rect: ScreenRect) -> ScreenRect? {
        let even = ScreenRect(x: rect.x, y: rect.y, width: rect.width & ~1, height: rect.height & ~1)
        return even.width >= 16 && even.height >= 16 ? even : nil
    }

    /// Band memory, conversion and the dirty-band account for the area's size.
    private func setUpGrabbing() throws(CaptureError) {
        let connection = connection!
        if grabber?.width != area.width {
            grabber = nil
            grabber = try BandGrabber(connection: connection, width: area.width, method: configuration.grabMethod) {
                logger.warning("\($0)")
            }
        }
        videoFormat = VideoFormat(width: area.width, height: area.height, pixelFormat: configuration.pixelFormat)
        converter = FrameConverter(format: videoFormat, range: configuration.colorRange)
        dirty = DirtyBands(height: area.height, bandRows: grabber!.bandRows)
    }

    private func setUpEvents() throws(CaptureError) {
        let connection = connection!
        let c = connection.raw
        if connection.randr != nil {
            let mask = UInt16(
                XCB_RANDR_NOTIFY_MASK_SCREEN_CHANGE.rawValue | XCB_RANDR_NOTIFY_MASK_CRTC_CHANGE.rawValue
                    | XCB_RANDR_NOTIFY_MASK_OUTPUT_CHANGE.rawValue)
            xcb_randr_select_input(c, connection.root, mask)
        }
        if connection.xfixes != nil && configuration.cursor != .hidden {
            xcb_xfixes_select_cursor_input(
                c, connection.root, UInt32(XCB_XFIXES_CURSOR_NOTIFY_MASK_DISPLAY_CURSOR.rawValue))
        }
        if configuration.useDamage, connection.damage != nil, connection.xfixes != nil {
            damage = connection.generateID()
            damageRegion = connection.generateID()
            let level = UInt8(XCB_DAMAGE_REPORT_LEVEL_NON_EMPTY.rawValue)
            if let error = connection.check(
                xcb_damage_create_checked(c, damage, window?.toplevel ?? connection.root, level))
            {
                logger.warning(
                    "DAMAGE could not watch the \(window == nil ? "root window" : "window") (\(error)); grabbing every frame whole"
                )
                damage = 0
            } else {
                xcb_xfixes_create_region(c, damageRegion, 0, nil)
            }
        }
        connection.flush()
    }

    /// Captures another part of the screen from the next frame on: the whole screen, an output or a region
    /// (a format change when the size differs). Checked against the screen now; a window cannot be switched to
    /// or from while capturing (its pixmap and damage are set up when the source opens).
    public func retarget(_ target: CaptureTarget) throws(CaptureError) {
        let operation = "capture \(target) instead of \(configuration.target)"
        if case .window = target {
            throw CaptureError(source: "x11", operation: operation, reason: "a window is chosen when capture starts")
        }
        if window != nil {
            throw CaptureError(source: "x11", operation: operation, reason: "a window's capture cannot change target")
        }
        if let connection {
            do {
                _ = try target.resolve(
                    screenWidth: connection.screenWidth, screenHeight: connection.screenHeight,
                    outputs: target == .screen ? [] : connection.outputs())
            } catch {
                throw CaptureError(source: "x11", operation: operation, reason: error.description)
            }
        }
        configuration.target = target
        geometryChanged = true
    }

    // MARK: - Capturing

    public func begin(at time: UInt64) throws(CaptureError) {
        guard connection != nil else {
            throw CaptureError(source: "x11", operation: "begin", reason: "the source is not open")
        }
        // The previous frame may be long gone after a pause: start from a whole grab.
        dirty.markAll()
        cursorShapeChanged = true
    }

    public func end() {}

    public func checkForChanges() throws(CaptureError) -> FrameChange {
        guard let connection else {
            throw CaptureError(source: "x11", operation: "capture", reason: "the source is not open")
        }
        readEvents(connection)
        try connection.checkAlive("capture")
        var resized: VideoFormat?
        if let window {
            geometryChanged = false
            if window.changed || window.closed { resized = try followWindow(window) }
            guard windowShown else { return .unchanged }
        } else if geometryChanged {
            geometryChanged = false
            resized = try followGeometry(connection)
        }
        if let exclusion, let before = exclusion.refresh() {
            for rect in before + exclusion.rectangles {
                dirty.mark(rows: rect.y - area.y, rect.y - area.y + rect.height)
            }
        }
        if configuration.cursor != .hidden && connection.xfixes != nil { try readCursor(connection) }
        if damage != 0 {
            if damaged { try readDamage(connection) }
        } else {
            dirty.markAll()
        }
        if let resized { return .resized(resized) }
        return dirty.isEmpty ? .unchanged : .changed
    }

    public func captureFrame(
        index: UInt64, deadline: UInt64, into slot: UnsafeMutableRawPointer,
        previous: UnsafeRawPointer?
    ) throws(CaptureError) -> UInt64 {
        guard let grabber, let converter else {
            throw CaptureError(source: "x11", operation: "capture", reason: "the source is not open")
        }
        if previous == nil { dirty.markAll() }
        var bands = bandsToGrab
        bands.removeAll(keepingCapacity: true)
        defer { bandsToGrab = bands }
        for band in 0..<dirty.count {
            let rows = dirty.rows(band)
            if dirty[band] {
                bands.append(rows)
            } else if let previous {
                converter.copyRows(firstRow: rows.lowerBound, rowCount: rows.count, from: previous, to: slot)
            }
        }
        let cursorRect = configuration.cursor == .embedded ? cursorRectInArea() : nil
        let hidden = hiddenInFrame()
        let taken = MonotonicClock.now()
        if let window, window.pixmap == 0 {
            window.markChanged()
            throw CaptureError(
                source: "x11", operation: "capture window \(window.label)", reason: "the window is not shown",
                transient: true)
        }
        do {
            try grabber.grab(
                from: window?.pixmap, x: window?.offset.x ?? area.x, y: window?.offset.y ?? area.y, bands: bands
            ) { rows, pixels, stride in
                for rect in hidden { Self.blackOut(rect, in: pixels, stride: stride, rows: rows) }
                if let cursorRect, let sprite {
                    Self.draw(sprite, at: cursorRect, into: pixels, stride: stride, rows: rows)
                }
                converter.convert(
                    bgrx: pixels, sourceStride: stride, firstRow: rows.lowerBound, rowCount: rows.count, into: slot)
            }
        } catch {
            // Most likely the screen shrank under the grab and RandR's event is on its way: look again next frame.
            geometryChanged = true
            window?.markChanged()
            dirty.markAll()
            throw error
        }
        drawnCursor = cursorRect
        counts.framesGrabbed += 1
        counts.bandsGrabbed += UInt64(bands.count)
        counts.bandsCopied += UInt64(dirty.count - bands.count)
        dirty.clear()
        if let exclusion, let connection {
            // Windows that changed while the frame was grabbed (their events come before its replies) may show an
            // excluded window where no rectangle was: every place one was since is blacked out too, and grabbed anew.
            readEvents(connection)
            for place in (exclusion.placesSinceGrab() ?? []).compactMap(inFrame) {
                converter.fillBlack(place, in: slot)
                dirty.mark(rows: place.y, place.y + place.height)
            }
        }
        return taken
    }

    public func nextAudioDeadline() -> UInt64? { nil }
    public func nextAudioChunk(_ stream: SampleType, now: UInt64) -> AudioChunk? { nil }

    // MARK: - Events

    private func readEvents(_ connection: XConnection) {
        let damageNotify = connection.damage.map { $0.firstEvent + UInt8(XCB_DAMAGE_NOTIFY) }
        let randrFirst = connection.randr?.firstEvent
        let cursorNotify = connection.xfixes.map { $0.firstEvent + UInt8(XCB_XFIXES_CURSOR_NOTIFY) }
        while let event = xcb_poll_for_event(connection.raw) {
            let type = event.pointee.response_type & 0x7f
            exclusion?.note(event)
            if type == damageNotify {
                damaged = true
            } else if let randrFirst,
                type == randrFirst + UInt8(XCB_RANDR_SCREEN_CHANGE_NOTIFY)
                    || type == randrFirst + UInt8(XCB_RANDR_NOTIFY)
            {
                geometryChanged = true
            } else if type == cursorNotify {
                cursorShapeChanged = true
            } else if let window, window.handle(event) {
                // Noted by the window: checkForChanges follows it.
            } else if type == 0 {
                let error = UnsafeRawPointer(event).assumingMemoryBound(to: xcb_generic_error_t.self).pointee
                logger.debug("X error \(error.error_code) on request \(error.major_code).\(error.minor_code)")
            }
            free(event)
        }
    }

    /// Re-reads the screen and output geometry after a RandR event; the new format when the frame size changed.
    private func followGeometry(_ connection: XConnection) throws(CaptureError) -> VideoFormat? {
        try connection.refreshScreenSize()
        let before = area
        try setUpArea(afterResize: true)
        dirty.markAll()
        guard area.width != before.width || area.height != before.height else {
            if area != before { logger.info("capture area moved to \(area)") }
            return nil
        }
        logger.info("capture area resized from \(before) to \(area)")
        counts.resizes += 1
        return videoFormat
    }

    /// Follows the window after StructureNotify events: moved (the cursor is placed relative to it), resized (the
    /// new format), unmapped or too small (its last frame repeats). Throws "the window closed" when it is gone.
    private func followWindow(_ window: WindowCapture) throws(CaptureError) -> VideoFormat? {
        let wasShown = windowShown
        try window.refresh()
        guard window.mapped, let rect = Self.frameRect(window.rect) else {
            windowShown = false
            if wasShown {
                logger.info(
                    "window \(window.label) is \(window.mapped ? "smaller than 16x16" : "not shown"): repeating its last frame"
                )
            }
            return nil
        }
        windowShown = true
        if !wasShown { logger.info("window \(window.label) is shown again") }
        let before = area
        area = rect
        dirty.markAll()
        guard rect.width != before.width || rect.height != before.height else { return nil }
        try setUpGrabbing()
        logger.info(
            "window \(window.label) resized from \(before.width)x\(before.height) to \(rect.width)x\(rect.height)")
        counts.resizes += 1
        return videoFormat
    }

    /// Marks the bands DAMAGE reports as changed since the last look, and resets its account.
    private func readDamage(_ connection: XConnection) throws(CaptureError) {
        damaged = false
        let c = connection.raw
        xcb_damage_subtract(c, damage, 0, damageRegion)
        guard let reply = xcb_xfixes_fetch_region_reply(c, xcb_xfixes_fetch_region(c, damageRegion), nil) else {
            try connection.checkAlive("read damage")
            dirty.markAll()
            return
        }
        defer { free(reply) }
        let rectangles = UnsafeBufferPointer(
            start: xcb_xfixes_fetch_region_rectangles(reply),
            count: Int(xcb_xfixes_fetch_region_rectangles_length(reply)))
        for r in rectangles {
            var changed = ScreenRect(x: Int(r.x), y: Int(r.y), width: Int(r.width), height: Int(r.height))
            if let window {
                // Window coordinates: placed where the window's content lies in area coordinates.
                changed.x += area.x - window.offset.x + window.border
                changed.y += area.y - window.offset.y + window.border
            }
            if let inside = changed.intersection(area) {
                dirty.mark(rows: inside.y - area.y, inside.y - area.y + inside.height)
            }
        }
    }

    /// Reads where the pointer is (every frame) and its image (when it changed).
    private func readCursor(_ connection: XConnection) throws(CaptureError) {
        let c = connection.raw
        if cursorShapeChanged {
            cursorShapeChanged = false
            guard let reply = xcb_xfixes_get_cursor_image_reply(c, xcb_xfixes_get_cursor_image(c), nil) else {
                try connection.checkAlive("read the cursor")
                return
            }
            defer { free(reply) }
            let r = reply.pointee
            let pixels = Array(
                UnsafeBufferPointer(
                    start: xcb_xfixes_get_cursor_image_cursor_image(reply), count: Int(r.width) * Int(r.height)))
            sprite = CursorSprite(
                width: Int(r.width), height: Int(r.height), hotspotX: Int(r.xhot), hotspotY: Int(r.yhot),
                pixels: pixels, serial: r.cursor_serial)
            pointer = (Int(r.x), Int(r.y))
        } else {
            guard let reply = xcb_query_pointer_reply(c, xcb_query_pointer(c, connection.root), nil) else {
                try connection.checkAlive("read the pointer position")
                return
            }
            pointer = (Int(reply.pointee.root_x), Int(reply.pointee.root_y))
            free(reply)
        }
        if configuration.cursor == .embedded {
            let now = cursorRectInArea()
            if now != drawnCursor {
                for rect in [drawnCursor, now].compactMap({ $0 }) { dirty.mark(rows: rect.y, rect.y + rect.height) }
            }
        }
    }

    /// The sprite's rectangle in capture-area coordinates, when it overlaps the area.
    private func cursorRectInArea() -> ScreenRect? {
        guard let pointer, let sprite, sprite.width > 0 else { return nil }
        let rect = ScreenRect(
            x: pointer.x - sprite.hotspotX - area.x, y: pointer.y - sprite.hotspotY - area.y,
            width: sprite.width, height: sprite.height)
        return rect.intersection(ScreenRect(x: 0, y: 0, width: area.width, height: area.height)) == nil ? nil : rect
    }
}
