import BroadcastCapture
import BroadcastCore
import BroadcastPortal
import BroadcastSystem
import CPipeWire
import Glibc
import Logging
import Synchronization

/// Screen capture from a PipeWire video node: the stream a user shares through the desktop portal's
/// ScreenCast dialog (`broadcastd --source pipewire`, Wayland), or a node named directly
/// (`--pipewire-node NAME|SERIAL`: a kiosk's or headless server's video source). Raw BGRx or BGRA in
/// shared memory (MemFd or MemPtr; DMA-BUF is not negotiated) arrives on PipeWire's thread, which
/// converts it at once into the picture (the broadcast's pixel format, kept by this source) and gives
/// the buffer straight back, so two buffers keep the producer at its full rate; at each frame deadline
/// the loop copies the picture into a pool slot, or repeats the last one when no new frame came. A
/// frame PipeWire marks corrupted is skipped. A crop region (a window within a larger buffer, say) is
/// the picture; damage metadata limits the conversion to the rows that changed. The pointer is what the
/// node draws in, except in the metadata cursor mode: then it comes from the buffers' cursor metadata (the
/// portal is asked for that mode), and a buffer with no picture (size 0: mutter's when only the pointer
/// moved) updates the pointer alone.
///
/// `open` never blocks: through the portal, it runs the portal's conversation on a thread of its own and
/// throws a `pending` error until it is answered (the dialog may stay open for minutes); then, as for a
/// node named directly, until the node's first frame has come (its size is the format) or
/// `startTimeout` has passed. `openAnswered` becomes readable whenever it is worth asking again, and the
/// daemon's loop goes on meanwhile. The restore token the portal returns is stored after every session,
/// so the next broadcast starts without the dialog.
public final class PipeWireScreenSource: CaptureSource {
    public enum Target: Sendable {
        /// A node by name (`node.name`) or serial number (`object.serial`).
        case node(String)
        /// The stream the user chooses in the portal's share dialog; `tokens` keeps the grant between broadcasts.
        case portal(ScreenCastRequest, tokens: RestoreTokenStore?)
    }

    public struct Configuration: Sendable {
        public var target: Target
        public var framesPerSecond = 30
        public var pixelFormat: PixelFormat = .nv12
        public var colorRange: ColorRange = .limited
        /// In the metadata mode, the pointer is read from the buffers' metadata.
        public var cursor: CursorMode = .embedded
        public var audio = AudioFormat()
        /// How long `open` waits for the node's first frame.
        public var startTimeout: UInt64 = 5_000_000_000
        /// A camera's node, beside the screen (revision 2.8): the stream says media.role Camera.
        public var camera = false
        /// A new connection to PipeWire for each stream (the Camera portal's remote, which shows only the cameras the
        /// user allowed), instead of the daemon's own.
        public var remote: (@Sendable () throws(CaptureError) -> Int32)?
        public init(target: Target) { self.target = target }
    }

    private let configuration: Configuration
    private var connection: PipeWireConnection?
    private var stream: OpaquePointer?
    private let events = UnsafeMutablePointer<pw_stream_events>.allocate(capacity: 1)
    private let listener = UnsafeMutablePointer<spa_hook>.allocate(capacity: 1)

    private let latest = Mutex(Latest())
    private let logger: Logger
    /// The portal's conversation, shared with the thread that holds it: in flight, or its answer.
    private final class PortalQuestion: Sendable {
        enum State: Sendable {
            case idle
            case asking(Cancellation)
            case answered(Result<ScreenCastPortal, PortalError>)
        }
        let state = Mutex(State.idle)
        /// Signalled when the answer is in.
        let answered: Wakeup
        init(answered: Wakeup) { self.answered = answered }
    }
    /// Signalled when a pending `open` is worth calling again: the portal answered, the first frame came,
    /// the stream failed.
    private let ready: Wakeup
    /// While `open` waits for the first frame: until when, and whether PipeWire's thread should signal `ready`
    /// as frames come.
    private var firstFrameDue: UInt64?
    private let awaitingFirstFrame = Atomic(false)
    /// Why the wait for the first frame was withdrawn (`cancelOpen`).
    private var withdrawn: String?
    private let question: PortalQuestion?
    /// The portal's session while the screen is shared.
    private var portal: ScreenCastPortal?
    /// What the stream targets: the configured node, or the node the portal shared.
    private var node: String
    private var seen: UInt64 = 0
    private var format: VideoFormat
    /// The pointer comes as metadata (set before the stream connects).
    private var readsCursor = false

    public init(_ configuration: Configuration, logger: Logger) throws(CaptureError) {
        self.configuration = configuration
        self.logger = logger
        do { ready = try Wakeup() } catch {
            throw CaptureError(source: "pipewire", operation: "prepare the capture", reason: error.description)
        }
        switch configuration.target {
        case .node(let name):
            node = name
            question = nil
        case .portal:
            node = "from the portal"
            question = PortalQuestion(answered: ready)
        }
        format = VideoFormat(width: 16, height: 16, pixelFormat: configuration.pixelFormat)
        events.initialize(to: pw_stream_events())
        listener.initialize(to: spa_hook())
        events.pointee.version = bd_pw_version_stream_events()
        events.pointee.process = { data in
            Unmanaged<PipeWireScreenSource>.fromOpaque(data!).takeUnretainedValue().process()
        }
        events.pointee.add_buffer = { data, buffer in
            guard let region = PipeWireScreenSource.region(of: buffer) else { return }
            Unmanaged<PipeWireScreenSource>.fromOpaque(data!).takeUnretainedValue().latest.withLock {
                $0.mapped[region.start] = region.count
            }
        }
        events.pointee.remove_buffer = { data, buffer in
            guard let region = PipeWireScreenSource.region(of: buffer) else { return }
            Unmanaged<PipeWireScreenSource>.fromOpaque(data!).takeUnretainedValue().latest.withLock {
                $0.mapped[region.start] = nil
            }
        }
        events.pointee.param_changed = { data, id, param in
            guard id == SPA_PARAM_Format.rawValue else { return }
            Unmanaged<PipeWireScreenSource>.fromOpaque(data!).takeUnretainedValue().formatChanged(param)
        }
        events.pointee.state_changed = { data, _, state, error in
            let me = Unmanaged<PipeWireScreenSource>.fromOpaque(data!).takeUnretainedValue()
            let text =
                String(cString: pw_stream_state_as_string(state)) + (error.map { ": " + String(cString: $0) } ?? "")
            me.latest.withLock { $0.state = text }
            if state == PW_STREAM_STATE_ERROR || state == PW_STREAM_STATE_UNCONNECTED { me.ready.signal() }
        }
    }

    deinit {
        close()
        events.deallocate()
        listener.deallocate()
    }

    public var description: String {
        switch configuration.target {
        case .node(let name): "pipewire node \(name) @ \(configuration.framesPerSecond) fps"
        case .portal(let request, _):
            "pipewire \(request.sources.rawValue) shared through the desktop portal\(portal.map { " (node \($0.cast?.node ?? 0))" } ?? "")"
                + (question?.state.withLock { if case .asking = $0 { true } else { false } } == true
                    ? " (share dialog open)" : "")
                + " @ \(configuration.framesPerSecond) fps"
        }
    }
    public var openAnswered: Descriptor? { ready.descriptor }
    public var openRetryAt: UInt64? { firstFrameDue }
    public var choosesScreenAtStart: Bool { question != nil }
    /// PipeWire's buffers, shared with the producer (the compositor, through the portal); the converted picture
    /// and libpipewire are the daemon's own memory, which it measures.
    public var sharedMemory: [SharedBuffers] {
        let regions = latest.withLock { $0.mapped.sorted { $0.key < $1.key }.map { (start: $0.key, count: $0.value) } }
        guard let first = regions.first else { return [] }
        let producer =
            if case .portal = configuration.target { "the compositor's buffers" } else { "node \(node)'s buffers" }
        return [SharedBuffers(name: "\(producer) (\(regions.count) x \(megabytes(first.count)))", regions: regions)]
    }

    /// Where a buffer's picture is mapped (its first data block, MAP_BUFFERS), and its size.
    private static func region(of buffer: UnsafeMutablePointer<pw_buffer>?) -> (start: UInt, count: Int)? {
        guard let spa = buffer?.pointee.buffer, spa.pointee.n_datas > 0, let data = spa.pointee.datas,
            let base = data[0].data
        else { return nil }
        return (UInt(bitPattern: base), Int(data[0].maxsize))
    }
    public var videoFormat: VideoFormat { format }
    public var audioFormat: AudioFormat { configuration.audio }
    public var audioStreams: [SampleType] { [] }
    public var frameInterval: UInt64 { 1_000_000_000 / UInt64(configuration.framesPerSecond) }
    public var orientation: Orientation { Orientation(degrees: 0, mirrored: false) }
    public var colorRange: ColorRange { configuration.colorRange }
    public var cursor: CursorState? { readsCursor ? latest.withLock { $0.cursor.state } : nil }
    public var statistics: [String: UInt64] {
        latest.withLock {
            [
                "pipewireFrames": $0.serial, "pipewireCorrupted": $0.corrupted, "pipewireCursorOnly": $0.cursorOnly,
                "pipewireRowsConverted": $0.rowsConverted, "pipewireRowsKept": $0.rowsCopied,
            ]
        }
    }

    public func outputs() throws(CaptureError) -> CaptureOutputs {
        CaptureOutputs(
            kind: "pipewire",
            screen: format.width > 16 ? ScreenRect(x: 0, y: 0, width: format.width, height: format.height) : nil,
            outputs: [])
    }

    /// Connects to the node and takes its first frame's size as the format; through the portal, first asks
    /// for the node. Pending until the user has answered, then until the first frame has come.
    public func open() throws(CaptureError) -> VideoFormat {
        ready.acknowledge()
        if connection == nil {
            if case .portal(let request, let tokens) = configuration.target, portal == nil {
                try askPortal(request, tokens)
            }
            do { try connect() } catch {
                close()
                throw error
            }
            firstFrameDue = MonotonicClock.now() + configuration.startTimeout
        }
        let (picture, state, cursorSeen) = latest.withLock { ($0.picture, $0.state, $0.cursorSeen) }
        if let picture {
            stopWaitingForFirstFrame()
            if readsCursor && !cursorSeen {
                logger.warning(
                    "node '\(node)' sends no cursor metadata: no CURSOR messages, and the pointer is as the node draws it"
                )
            }
            format = picture.format
            return format
        }
        let hint = "; is it there? `pw-cli ls Node` lists the nodes"
        let failure: String?
        if let withdrawn {
            failure = withdrawn
        } else if state.hasPrefix("error") || state == "unconnected" {
            // The session manager drops a stream whose target is not there at once.
            failure = "the stream is \(state)" + hint
        } else if MonotonicClock.now() >= firstFrameDue ?? 0 {
            failure = "no frame within \(configuration.startTimeout / 1_000_000_000) s (stream \(state))" + hint
        } else {
            failure = nil
        }
        if let failure {
            close()
            throw CaptureError(source: "pipewire", operation: "capture node '\(node)'", reason: failure)
        }
        awaitingFirstFrame.store(true, ordering: .relaxed)
        throw CaptureError(
            source: "pipewire", operation: "capture node '\(node)'",
            reason: "waiting for node '\(node)' to send its first frame", pending: true)
    }

    /// The portal's part of `open`: starts the conversation on a thread, or takes its answer.
    private func askPortal(_ request: ScreenCastRequest, _ tokens: RestoreTokenStore?) throws(CaptureError) {
        func failure(_ reason: String, pending: Bool = false) -> CaptureError {
            CaptureError(
                source: "pipewire", operation: "share the screen through the desktop portal", reason: reason,
                pending: pending)
        }
        let question = question!
        let state = question.state.withLock { state in
            defer { if case .answered = state { state = .idle } }
            return state
        }
        switch state {
        case .asking:
            throw failure("being chosen in the screen-share dialog", pending: true)
        case .answered(.failure(let error)):
            throw failure(error.cancelled ? error.reason : error.description)
        case .answered(.success(let portal)):
            self.portal = portal
            let cast = portal.cast!
            if cast.persistence, let tokens {
                do { try tokens.save(cast.restoreToken) } catch {
                    logger.warning(
                        "cannot keep the portal's restore token in \(tokens.path) (\(error)); the share dialog will come back next time"
                    )
                }
            }
        case .idle:
            var ask = request
            ask.restoreToken = tokens?.load(logger: logger)
            let cancellation = Cancellation()
            let logger = logger
            question.state.withLock { $0 = .asking(cancellation) }
            do {
                try BackgroundThread.start { [ask] in
                    let result = Result { () throws(PortalError) in
                        try ScreenCastPortal(ask, cancellation: cancellation, logger: logger)
                    }
                    question.state.withLock { $0 = .answered(result) }
                    question.answered.signal()
                }
            } catch {
                question.state.withLock { $0 = .idle }
                throw failure(error.description)
            }
            throw failure("being chosen in the screen-share dialog", pending: true)
        }
    }

    public func cancelOpen(_ reason: String) {
        question?.state.withLock { if case .asking(let cancellation) = $0 { cancellation.cancel(reason) } }
        if firstFrameDue != nil {
            withdrawn = reason
            ready.signal()
        }
    }

    private func connect() throws(CaptureError) {
        var remote: Int32?
        if let cast = portal?.cast {
            // libpipewire takes the descriptor and closes it; the portal's own copy stays the portal's.
            remote = try? Descriptor.duplicating(cast.remote).take()
            node = String(cast.node)
        } else if let open = configuration.remote {
            remote = try open()
        }
        // Through the portal, only when it granted the metadata mode (it may offer only embedded).
        readsCursor = configuration.cursor == .metadata && (portal?.cast?.cursor ?? .metadata) == .metadata
        connection = try PipeWireConnection(threadName: "broadcastd-video", remote: remote) {
            core, _ throws(CaptureError) in
            let properties = bd_pw_properties_new()
            pw_properties_set(properties, PW_KEY_MEDIA_TYPE, "Video")
            pw_properties_set(properties, PW_KEY_MEDIA_CATEGORY, "Capture")
            pw_properties_set(properties, PW_KEY_MEDIA_ROLE, configuration.camera ? "Camera" : "Screen")
            pw_properties_set(
                properties, PW_KEY_NODE_NAME, configuration.camera ? "broadcastd-camera" : "broadcastd-screen")
            // The portal's node is known by its id (what pw_stream_connect's deprecated target id sets), a direct one by name or serial.
            pw_properties_set(properties, portal == nil ? "target.object" : "node.target", node)
            pw_properties_set(properties, "node.dont-reconnect", "true")
            guard let stream = pw_stream_new(core, "broadcastd screen", properties) else {
                throw CaptureError(
                    source: "pipewire", operation: "capture node '\(node)'", reason: "pw_stream_new failed")
            }
            self.stream = stream
            pw_stream_add_listener(stream, listener, events, Unmanaged.passUnretained(self).toOpaque())
            // A camera: every raw format taken, the delivered one first (no conversion), one param each, so that
            // PipeWire takes the first of ours the camera gives; the screen: BGRx or BGRA.
            let formats = CameraPixels.ids(
                configuration.camera
                    ? CameraFormat.preference(delivering: configuration.pixelFormat) : ["BGRx", "BGRA"])
            let result = bd_pw_stream_connect_video_capture(
                stream, 1920, 1080, UInt32(configuration.framesPerSecond), formats, UInt32(formats.count),
                configuration.camera)
            guard result >= 0 else {
                pw_stream_destroy(stream)
                self.stream = nil
                throw CaptureError(
                    source: "pipewire", operation: "capture node '\(node)'",
                    reason: "cannot connect the stream: \(String(cString: strerror(-result)))")
            }
        }
    }

    public func close() {
        connection?.close {
            if let stream { pw_stream_destroy(stream) }
        }
        (connection, stream) = (nil, nil)
        latest.withLock { $0 = Latest() }
        seen = 0
        // The share ends with the broadcast; the next one asks again (without the dialog, given a restore token).
        portal?.close()
        portal = nil
        cancelOpen("the broadcast request was withdrawn")
        question?.state.withLock {
            if case .answered(.success(let granted)) = $0 {
                granted.close()
                $0 = .idle
            }
        }
        stopWaitingForFirstFrame()
    }

    private func stopWaitingForFirstFrame() {
        (firstFrameDue, withdrawn) = (nil, nil)
        awaitingFirstFrame.store(false, ordering: .relaxed)
    }

    public func begin(at time: UInt64) throws(CaptureError) {}
    public func end() {}

    public func checkForChanges() throws(CaptureError) -> FrameChange {
        let (picture, serial, state) = latest.withLock { ($0.picture, $0.serial, $0.state) }
        if portal?.endedByTheDesktop() == true {
            throw CaptureError(
                source: "pipewire", operation: "capture the screen shared through the desktop portal",
                reason: "the desktop ended the screen share (its portal session was closed)")
        }
        if state.hasPrefix("error") || state == "unconnected" {
            throw CaptureError(
                source: "pipewire", operation: "capture node '\(node)'",
                reason:
                    "the stream is \(state) (\(portal == nil ? "the node went away?" : "the screen is no longer shared?"))"
            )
        }
        if let picture, picture.format != format {
            format = picture.format
            return .resized(format)
        }
        return serial == seen ? .unchanged : .changed
    }

    public func captureFrame(
        index: UInt64, deadline: UInt64, into slot: UnsafeMutableRawPointer,
        previous: UnsafeRawPointer?
    ) throws(CaptureError) -> UInt64 {
        let format = format
        if configuration.camera {
            return latest.withLock { frame in
                let taken = frame.takeCameraPicture(into: slot, format: format, now: MonotonicClock.now())
                if taken?.newest != false { seen = frame.serial }
                return taken?.capturedAt ?? deadline
            }
        }
        return latest.withLock { frame in
            seen = frame.serial
            guard let picture = frame.picture, picture.format == format else { return deadline }
            slot.copyMemory(from: picture.bytes, byteCount: format.frameByteCount)
            return frame.capturedAt
        }
    }

    public func nextAudioDeadline() -> UInt64? { nil }
    public func nextAudioChunk(_ stream: SampleType, now: UInt64) -> AudioChunk? { nil }

    // MARK: - On PipeWire's thread

    private func formatChanged(_ param: UnsafePointer<spa_pod>?) {
        var width: UInt32 = 0
        var height: UInt32 = 0
        var format: UInt32 = 0
        var fullRange = false
        guard let stream, bd_pw_parse_video_format(param, &width, &height, &format, &fullRange) == 0 else { return }
        bd_pw_stream_request_video_buffers(stream, readsCursor)
        latest.withLock {
            $0.width = Int(width)
            $0.height = Int(height)
            $0.pixels = CameraPixels.all[format]
            $0.fullRange = fullRange
        }
    }

    private func process() {
        guard let stream, let buffer = pw_stream_dequeue_buffer(stream) else { return }
        defer { if awaitingFirstFrame.load(ordering: .relaxed) { ready.signal() } }
        guard let spaBuffer = buffer.pointee.buffer, spaBuffer.pointee.n_datas > 0,
            let data = spaBuffer.pointee.datas, let base = data.pointee.data, let chunk = data.pointee.chunk
        else {
            pw_stream_queue_buffer(stream, buffer)
            return
        }
        var flags: UInt32 = 0
        var pts: Int64 = 0
        let hasHeader = bd_pw_buffer_header(spaBuffer, &flags, &pts) == 0
        let corrupted = hasHeader && flags & bd_spa_meta_header_flag_corrupted() != 0
        let stride = Int(chunk.pointee.stride)
        let offset = Int(chunk.pointee.offset)
        let size = Int(data.pointee.maxsize)
        defer { pw_stream_queue_buffer(stream, buffer) }
        var region = spa_region()
        let crop =
            bd_pw_buffer_crop(spaBuffer, &region) == 0
            ? CropRegion(
                x: Int(region.position.x), y: Int(region.position.y), width: Int(region.size.width),
                height: Int(region.size.height)) : nil
        let damage = withUnsafeTemporaryAllocation(of: spa_region.self, capacity: 16) { regions in
            let count = Int(bd_pw_buffer_damage(spaBuffer, regions.baseAddress, 16))
            return count > 0 ? regions[..<count].map { (y: Int($0.position.y), height: Int($0.size.height)) } : nil
        }
        // The producer's own timestamp when it is on our clock (PipeWire's are CLOCK_MONOTONIC ns), else now.
        let now = MonotonicClock.now()
        let capturedAt =
            hasHeader && pts > 0 && UInt64(pts) <= now && now - UInt64(pts) < 1_000_000_000 ? UInt64(pts) : now
        // A buffer without a picture (size 0) may still move the pointer.
        let hasPicture = chunk.pointee.size > 0
        var pointer = bd_pw_cursor()
        let hasCursor = readsCursor ? bd_pw_buffer_cursor(spaBuffer, &pointer) : -1
        latest.withLock { frame in
            if corrupted {
                frame.corrupted += 1
                return
            }
            guard frame.width > 1, frame.height > 1, let pixels = frame.pixels else { return }
            let (pixelFormat, range) = (configuration.pixelFormat, configuration.colorRange)
            let stride = stride > 0 ? stride : frame.width * 4
            if configuration.camera && hasPicture { frame.keepUntakenPicture(now: now) }
            if !hasPicture {
                frame.cursorOnly += 1
            } else if !pixels.isScreens {
                if let planes = Self.planes(of: spaBuffer, pixels, width: frame.width, height: frame.height) {
                    frame.convertCamera(
                        planes, pixels: pixels, capturedAt: capturedAt, pixelFormat: pixelFormat, range: range)
                }
            } else if offset + stride * (frame.height - 1) + frame.width * 4 <= size {
                frame.convert(
                    UnsafeRawPointer(base + offset), stride: stride, crop: crop, damage: damage,
                    capturedAt: capturedAt, pixelFormat: pixelFormat, range: range)
            }
            guard hasCursor >= 0 else { return }
            frame.cursorSeen = true
            guard hasCursor == 1 else { return frame.cursor.away() }
            let image =
                pointer.format == 0
                ? nil
                : PipeWireCursor.Image(
                    format: pointer.format, width: Int(pointer.width), height: Int(pointer.height),
                    stride: Int(pointer.stride),
                    hotspotX: Int(pointer.hotspot_x), hotspotY: Int(pointer.hotspot_y), pixels: pointer.pixels)
            let size = frame.pictureSize
            frame.cursor.move(
                x: pointer.x, y: pointer.y, image: image,
                picture: (frame.crop?.x ?? 0, frame.crop?.y ?? 0, size.width, size.height))
        }
    }
}
