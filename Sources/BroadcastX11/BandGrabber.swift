import BroadcastCapture
import BroadcastSystem
import CXCB

#if canImport(Glibc)
    import Glibc
#endif

/// How pixels come from the X server.
public enum GrabMethod: String, Sendable, CaseIterable {
    /// Pick the best the server offers: shm-fd, then shm-sysv, then get-image.
    case auto
    /// MIT-SHM 1.2 into a memfd the server maps (xcb_shm_attach_fd).
    case shmFD = "shm-fd"
    /// MIT-SHM into a System V segment.
    case shmSysV = "shm-sysv"
    /// Plain GetImage: every pixel travels over the socket. Works with remote servers; slow.
    case getImage = "get-image"
}

/// Grabs a capture area band by band: a band is a few rows of BGRx pixels, a quarter of a
/// megabyte or so, and only `depth` bands exist at a time. Requests are pipelined: the X server
/// copies the next bands while this process converts the one that arrived, and the full-size BGRx
/// frame never exists in memory.
final class BandGrabber {
    private(set) var method: GrabMethod = .getImage
    let width: Int
    let bandRows: Int
    /// Bands in flight at once.
    let depth = 4
    private let connection: XConnection
    private let bandBytes: Int
    private var segment: xcb_shm_seg_t = 0
    private var memfd: SharedMemory?
    private var sysv: SysVSharedMemory?
    private var base: UnsafeMutableRawPointer?
    /// The sequence numbers of the requests in flight, by band modulo `depth`.
    private lazy var inFlight = [UInt32](repeating: 0, count: depth)

    /// The band memory shared with the X server (none for GetImage, whose bands come through the socket).
    var sharedRegion: (start: UInt, count: Int)? {
        guard let base, method != .getImage else { return nil }
        return (UInt(bitPattern: base), (bandBytes * depth + 4095) / 4096 * 4096)
    }

    /// Bytes of band memory to aim for.
    static let targetBandBytes = 256 * 1024

    static func bandRows(width: Int) -> Int {
        max(2, Self.targetBandBytes / (width * 4) & ~1)
    }

    /// Sets up band memory for areas `width` pixels wide; `method` .auto tries the fast ways first.
    init(connection: XConnection, width: Int, method: GrabMethod, warn: (String) -> Void) throws(CaptureError) {
        self.connection = connection
        self.width = width
        bandRows = Self.bandRows(width: width)
        bandBytes = width * 4 * bandRows
        let size = (bandBytes * depth + 4095) / 4096 * 4096
        var reasons: [String] = []
        var chosen: GrabMethod?
        let candidates: [GrabMethod] = method == .auto ? [.shmFD, .shmSysV] : method == .getImage ? [] : [method]
        for candidate in candidates {
            if let why = attach(candidate, size: size) {
                reasons.append("\(candidate.rawValue): \(why)")
            } else {
                chosen = candidate
                break
            }
        }
        if chosen == nil && method != .auto && method != .getImage {
            throw CaptureError(
                source: "x11", operation: "set up \(method.rawValue) grabbing", reason: reasons.joined(separator: "; "))
        }
        if chosen == nil && method == .auto {
            warn(
                "MIT-SHM is not usable on X display \(connection.displayName) (\(reasons.joined(separator: "; "))); falling back to GetImage, which copies every pixel through the socket and is much slower"
            )
        }
        if let chosen { self.method = chosen }
    }

    deinit {
        if segment != 0 {
            xcb_shm_detach(connection.raw, segment)
            connection.flush()
        }
    }

    /// Tries to share band memory with the server by `method`; the reason it failed, or nil.
    private func attach(_ method: GrabMethod, size: Int) -> String? {
        guard let shm = connection.shm else { return "the server has no MIT-SHM extension" }
        let id = connection.generateID()
        switch method {
        case .shmFD:
            guard shm.major > 1 || shm.minor >= 2 else {
                return "MIT-SHM \(shm.version) cannot take a descriptor (needs 1.2)"
            }
            let memory: SharedMemory
            let fd: Int32
            do {
                memory = try SharedMemory(name: "broadcastd-x11-bands", size: size, sealed: false)
                fd = try memory.descriptor.duplicate().take()
            } catch { return "\(error)" }
            // The server receives the descriptor and libxcb closes its copy.
            if let error = connection.check(xcb_shm_attach_fd_checked(connection.raw, id, fd, 0)) { return error }
            memfd = memory
            base = memory.base
        case .shmSysV:
            let memory: SysVSharedMemory
            do { memory = try SysVSharedMemory(size: size) } catch { return "\(error)" }
            if let error = connection.check(xcb_shm_attach_checked(connection.raw, id, UInt32(memory.id), 0)) {
                return "\(error) (is the X server on another machine or in another IPC namespace?)"
            }
            memory.markForRemoval()
            sysv = memory
            base = memory.base
        case .auto, .getImage:
            return "not a shared-memory method"
        }
        segment = id
        return nil
    }

    /// Grabs rows `bands` (each within the area, `bandRows` rows at most) of the area of `drawable` (nil: the root
    /// window; a window's named pixmap) whose top left corner is (`x`, `y`), and calls `convert(band, pixels, stride)` for each in order. `pixels` is writable
    /// (the cursor is drawn into it) and valid only during the call.
    func grab(
        from drawable: xcb_drawable_t? = nil, x: Int, y: Int, bands: [Range<Int>],
        convert: (Range<Int>, UnsafeMutableRawPointer, Int) -> Void
    ) throws(CaptureError) {
        let c = connection.raw
        let drawable = drawable ?? connection.root
        let format = UInt8(XCB_IMAGE_FORMAT_Z_PIXMAP.rawValue)
        if method == .getImage {
            try pipeline(
                bands,
                request: { band in
                    xcb_get_image(
                        c, format, drawable, Int16(x), Int16(y + bands[band].lowerBound), UInt16(width),
                        UInt16(bands[band].count), UInt32.max
                    ).sequence
                },
                finish: { band, sequence throws(CaptureError) in
                    guard let reply = xcb_get_image_reply(c, xcb_get_image_cookie_t(sequence: sequence), nil) else {
                        try fail(bands[band])
                    }
                    defer { free(reply) }
                    convert(bands[band], UnsafeMutableRawPointer(xcb_get_image_data(reply)!), width * 4)
                })
            return
        }
        try pipeline(
            bands,
            request: { band in
                xcb_shm_get_image(
                    c, drawable, Int16(x), Int16(y + bands[band].lowerBound), UInt16(width), UInt16(bands[band].count),
                    UInt32.max, format, segment, UInt32(band % depth * bandBytes)
                ).sequence
            },
            finish: { band, sequence throws(CaptureError) in
                guard let reply = xcb_shm_get_image_reply(c, xcb_shm_get_image_cookie_t(sequence: sequence), nil) else {
                    try fail(bands[band])
                }
                free(reply)
                convert(bands[band], base! + band % depth * bandBytes, width * 4)
            })
    }

    /// Keeps `depth` requests in flight: band n + depth is asked for once band n (whose memory it reuses) is done.
    private func pipeline(
        _ bands: [Range<Int>], request: (Int) -> UInt32, finish: (Int, UInt32) throws(CaptureError) -> Void
    ) throws(CaptureError) {
        for band in 0..<min(depth, bands.count) { inFlight[band % depth] = request(band) }
        for band in bands.indices {
            try finish(band, inFlight[band % depth])
            if band + depth < bands.count { inFlight[band % depth] = request(band + depth) }
        }
    }

    private func fail(_ rows: Range<Int>) throws(CaptureError) -> Never {
        try connection.checkAlive("grab rows \(rows)")
        throw CaptureError(
            source: "x11", operation: "grab rows \(rows.lowerBound)-\(rows.upperBound - 1)",
            reason: "the X server refused the request (did the screen shrink?)", transient: true)
    }
}
