/// What a capture costs in memory, and the shared frame pool within it: the plan the daemon makes when a
/// capture opens and keeps up to date as broadcasts join and leave. Everything broadcastd has resident is in
/// it: what it measured of itself once the source was open (binary, libraries, heap, stacks), the source's
/// shared buffers (PipeWire's, MIT-SHM's, which that measurement leaves out), what a live broadcast adds, and
/// the pool's slots in use.
///
/// The pool's memory has room for `maximumSlots` slots, but a slot costs memory only once a frame has been
/// written into it, and the daemon uses `slotCount` of them: two for one broadcast (one being filled, one with
/// the handler, which copies what it keeps and gives the slot back at once); with several, one being filled and
/// two for each (the frame it has and one to spare, so that a handler a frame behind loses nothing while another
/// took the latest), at most ten.
public struct FramePoolPlan: Equatable, Sendable, CustomStringConvertible {
    /// One slot being filled, one with the handler.
    public static let minimumSlots = 2
    /// What the pool's memory has room for.
    public static let maximumSlots = 10
    /// What a live broadcast adds to the resident memory of a daemon with its source open, measured once the
    /// broadcast runs (docs/benchmarks.md, "Memory"): the code and data of the live path (capture, fan-out),
    /// sample messages queued for handlers, the heap's growth. A source adds its own (`CaptureSource.liveGrowth`).
    public static let liveReserve = 2 << 20
    /// What the daemon needs besides the pool and its source when it cannot measure itself.
    public static let daemonOverhead = 14 << 20

    static let commonSizes = [
        (3840, 2160), (2560, 1440), (1920, 1080), (1600, 900), (1280, 720), (960, 540), (640, 360),
    ]
    .map { (width: $0.0, height: $0.1) }

    /// One named part of what the daemon has besides the pool ("the compositor's buffers: 2 x 8.3 MB").
    public struct Part: Equatable, Sendable {
        public var name: String
        public var bytes: Int
        public init(_ name: String, _ bytes: Int) {
            self.name = name
            self.bytes = bytes
        }
    }

    public var format: VideoFormat
    public var slotSize: Int
    /// The broadcasts sharing the pool.
    public var broadcasts: Int
    /// Slots in use: `slots(forBroadcasts:)` of the broadcasts sharing the pool.
    public var slotCount: Int { Self.slots(forBroadcasts: broadcasts) }
    /// Everything but the pool: the daemon as measured, the source's buffers, the live reserve.
    public var parts: [Part]
    public var budgetBytes: Int
    /// Revision 2.8: the camera's frames, when the capture has a camera: its own slots (as many as the screen's) of
    /// its format, its picture (the last frame converted, kept by its source) and PipeWire's buffers.
    public var camera: CameraCost?
    public struct CameraCost: Equatable, Sendable {
        public var format: VideoFormat
        /// The camera's buffers PipeWire maps into broadcastd.
        public var buffersBytes: Int
        /// When its frames are converted (not in the delivered format): libswscale's code as it runs and its context.
        public var conversionBytes = 0
        public init(format: VideoFormat, buffersBytes: Int) {
            self.format = format
            self.buffersBytes = buffersBytes
        }

        /// What a camera that sends `width`x`height` in a format of `bytesPerPixel` (`CameraFormat.bytesPerPixel`;
        /// 4 when not known) costs beside its slots, delivered as `pixelFormat`: three of its buffers at most (its
        /// stream asks for two or three), and its PipeWire connection (a thread and its context, as much as an audio
        /// stream's: `connectionBytes`).
        /// `converting`: its frames are not in the delivered format (`conversionBytes`).
        public init(
            width: Int, height: Int, pixelFormat: PixelFormat, bytesPerPixel: Double = 4, converting: Bool = false
        ) {
            format = VideoFormat(width: width, height: height, pixelFormat: pixelFormat)
            buffersBytes = 3 * Int((Double(width * height) * bytesPerPixel).rounded(.up)) + Self.connectionBytes
            conversionBytes = converting ? Self.converterBytes : 0
        }

        /// A PipeWire connection's thread, context and stream, as the audio streams are counted (`liveGrowth`).
        public static let connectionBytes = 3 << 19
        /// libswscale converting a camera's frames: its code, resident once it runs (about 1 MB of RssFile, as
        /// measured with a 1280x720 YUY2 camera against an NV12 one, which is copied), and its context.
        public static let converterBytes = 5 << 18
    }
    /// The budget was set by the user (`--memory-budget`, the configuration file): a plan over it is refused.
    /// The built-in budget is a goal: a capture that cannot fit it runs at its minimum, saying by how much it is over.
    public var enforced: Bool

    public init(
        format: VideoFormat, broadcasts: Int = 1, parts: [Part], budgetBytes: Int, enforced: Bool,
        camera: CameraCost? = nil
    ) {
        self.format = format
        self.camera = camera
        slotSize = Self.slotSize(format)
        self.broadcasts = max(1, broadcasts)
        self.parts = parts
        self.budgetBytes = budgetBytes
        self.enforced = enforced
    }

    public static func slotSize(_ format: VideoFormat) -> Int { (format.frameByteCount + 4095) / 4096 * 4096 }

    /// Slots the pool uses while `broadcasts` share it.
    public static func slots(forBroadcasts broadcasts: Int) -> Int {
        broadcasts <= 1 ? minimumSlots : min(maximumSlots, 2 * broadcasts + 1)
    }

    /// The pool's memory, as big as it may ever be used (a slot costs nothing until it is).
    public var capacityBytes: Int { Self.maximumSlots * slotSize }
    public var poolBytes: Int { slotCount * slotSize }
    public var baseBytes: Int { parts.reduce(0) { $0 + $1.bytes } }
    /// The camera's slots (as many as the screen's), its two pictures (the newest, and one kept while the loop is busy)
    /// and its buffers; 0 without a camera.
    public var cameraBytes: Int {
        camera.map {
            slotCount * Self.slotSize($0.format) + 2 * $0.format.frameByteCount + $0.buffersBytes + $0.conversionBytes
        } ?? 0
    }
    /// The camera's own pool, beside the screen's.
    public var cameraPool: FramePoolPlan? {
        camera.map {
            FramePoolPlan(
                format: $0.format, broadcasts: broadcasts, parts: [], budgetBytes: budgetBytes, enforced: false)
        }
    }
    /// Everything the daemon should have resident at most with this plan.
    public var totalBytes: Int { baseBytes + poolBytes + cameraBytes }
    /// How far the plan is over the budget (0 when within it).
    public var excessBytes: Int { max(0, totalBytes - budgetBytes) }

    public var description: String {
        "\(slotCount) slots of \(megabytes(slotSize)) (\(megabytes(poolBytes))) + "
            + parts.map { "\($0.name) \(megabytes($0.bytes))" }.joined(separator: " + ")
            + (camera == nil ? "" : " + the camera \(megabytes(cameraBytes))") + " = \(megabytes(totalBytes))"
    }

    /// The plan for `format` shared by `broadcasts`, beside `parts`. Within an enforced budget it fits, or an error
    /// says what would; over the built-in one it runs anyway (`overBudgetWarning` says so).
    public static func plan(
        format: VideoFormat, broadcasts: Int = 1, parts: [Part], budgetBytes: Int,
        enforced: Bool, camera: CameraCost? = nil
    ) throws(BroadcastError) -> FramePoolPlan {
        let plan = FramePoolPlan(
            format: format, broadcasts: broadcasts, parts: parts, budgetBytes: budgetBytes, enforced: enforced,
            camera: camera)
        if enforced && plan.excessBytes > 0 { throw plan.refusal() }
        return plan
    }

    /// This plan for `broadcasts` sharing the pool, or for frames of another `format`; throws when an enforced
    /// budget cannot hold it.
    public func changing(broadcasts: Int? = nil, format: VideoFormat? = nil) throws(BroadcastError) -> FramePoolPlan {
        try Self.plan(
            format: format ?? self.format, broadcasts: broadcasts ?? self.broadcasts, parts: parts,
            budgetBytes: budgetBytes,
            enforced: enforced, camera: camera)
    }

    /// What the plan needs, said as the parts it is made of.
    var need: String {
        "\(format) needs \(slotCount) frame slots of \(megabytes(slotSize)) plus "
            + parts.map { "\(megabytes($0.bytes)) for \($0.name)" }.joined(separator: ", ")
            + (camera.map { ", \(megabytes(cameraBytes)) for the camera (\($0.format))" } ?? "")
            + ": \(megabytes(totalBytes)) in all"
    }

    /// Over the built-in budget: by how much and why, for START's answer, status and the log; nil within it.
    public var overBudgetWarning: String? {
        guard excessBytes > 0 else { return nil }
        return "running \(megabytes(excessBytes)) over the memory budget of \(megabytes(budgetBytes)): \(need) "
            + "(the least it can run with; --memory-budget \(Self.advisedMegabytes(totalBytes)) says this is expected)"
    }

    private static func advisedMegabytes(_ bytes: Int) -> Int { (bytes + (2 << 20) + (1 << 20) - 1) >> 20 }

    private func refusal() -> BroadcastError {
        let available = budgetBytes - baseBytes - cameraBytes
        var alternatives = ["use --memory-budget \(Self.advisedMegabytes(totalBytes))"]
        func fits(_ f: VideoFormat) -> Bool { slotCount * Self.slotSize(f) <= available }
        if let size = Self.commonSizes.first(where: {
            $0.width < format.width
                && fits(VideoFormat(width: $0.width, height: $0.height, pixelFormat: format.pixelFormat))
        }) {
            alternatives.append("a smaller size such as \(size.width)x\(size.height)")
        }
        if format.pixelFormat != .nv12
            && fits(VideoFormat(width: format.width, height: format.height, pixelFormat: .nv12))
        {
            alternatives.append("--pixel-format nv12")
        }
        if broadcasts > 1 {
            let fitting = (1..<broadcasts).last {
                FramePoolPlan(
                    format: format, broadcasts: $0, parts: parts, budgetBytes: budgetBytes, enforced: true,
                    camera: camera
                ).excessBytes == 0
            }
            alternatives.append(
                fitting.map { "at most \($0) broadcast(s) at once at this size" } ?? "a smaller capture")
        }
        return BroadcastError(
            .budget,
            "\(need), more than the memory budget of \(megabytes(budgetBytes)); "
                + alternatives.joined(separator: ", or "))
    }
}

public func megabytes(_ bytes: Int) -> String {
    let tenths = (bytes * 10 + (1 << 19)) >> 20
    return "\(tenths / 10).\(tenths % 10) MB"
}
