import BroadcastCore
import Testing

@Suite struct ModelTests {
    @Test func planeLayouts() {
        let nv12 = VideoFormat(width: 1920, height: 1080, pixelFormat: .nv12)
        #expect(nv12.planes == [Plane(offset: 0, stride: 1920, height: 1080), Plane(offset: 1920 * 1080, stride: 1920, height: 540)])
        #expect(nv12.frameByteCount == 3_110_400)
        let i420 = VideoFormat(width: 1280, height: 720, pixelFormat: .i420)
        #expect(i420.planes.map(\.stride) == [1280, 640, 640])
        #expect(i420.frameByteCount == 1280 * 720 * 3 / 2)
        let odd = VideoFormat(width: 1366, height: 768, pixelFormat: .nv12)
        #expect(odd.planes[0].stride == 1408) // rounded up to 64
        #expect(VideoFormat(width: 1920, height: 1080, pixelFormat: .bgrx).frameByteCount == 1920 * 1080 * 4)
    }

    @Test func sizeParsing() {
        #expect(VideoFormat.parseSize("1920x1080")! == (1920, 1080))
        #expect(VideoFormat.parseSize("1921x1080") == nil)
        #expect(VideoFormat.parseSize("abc") == nil)
        #expect(VideoFormat.parseSize("0x0") == nil)
    }

    @Test func poolPlanFits1080pInTheDefaultBudget() throws {
        let plan = try FramePoolPlan.plan(format: VideoFormat(width: 1920, height: 1080), budgetBytes: 50 << 20)
        #expect(plan.slotCount >= FramePoolPlan.minimumSlots)
        #expect(plan.poolBytes + FramePoolPlan.daemonOverhead <= 50 << 20)
    }

    @Test func poolPlanFits4KNV12InTheDefaultBudget() throws {
        let plan = try FramePoolPlan.plan(format: VideoFormat(width: 3840, height: 2160), budgetBytes: 50 << 20)
        #expect(plan.slotCount == 3)
    }

    /// What the source maps (PipeWire's buffers and libraries) leaves fewer slots, and is named when nothing fits.
    @Test func poolPlanLeavesRoomForTheSource() throws {
        let format = VideoFormat(width: 1920, height: 1080), slot = (format.frameByteCount + 4095) / 4096 * 4096
        let plan = try FramePoolPlan.plan(format: format, budgetBytes: 50 << 20, sourceBytes: 24 << 20)
        #expect(plan.slotCount == ((50 - 14 - 24) << 20) / slot && plan.slotCount >= FramePoolPlan.minimumSlots)
        let error = #expect(throws: BroadcastError.self) { try FramePoolPlan.plan(format: format, budgetBytes: 50 << 20, sourceBytes: 30 << 20) }
        #expect(error?.message.contains("plus 14.0 MB for the daemon and 30.0 MB for the source (its buffers and libraries)") == true, "\(error?.message ?? "")")
    }

    @Test func poolPlanRefusalSaysWhatWouldFit() {
        let error = #expect(throws: BroadcastError.self) {
            try FramePoolPlan.plan(format: VideoFormat(width: 3840, height: 2160, pixelFormat: .bgrx), budgetBytes: 50 << 20)
        }
        #expect(error?.code == .budget)
        let message = error?.message ?? ""
        #expect(message.contains("use --memory-budget 111"), "\(message)")
        #expect(message.contains("a smaller size such as 1920x1080"), "\(message)")
        #expect(message.contains("--pixel-format nv12"), "\(message)")
    }

    @Test func manifestValidationFillsDefaultsAndRejectsUnknownKeys() throws {
        let manifest = HandlerManifest(
            name: "stream", displayName: "Stream", exec: "x",
            url: .init(prompt: "Server", required: true),
            setupFields: [.init(name: "key", prompt: "Stream key", required: true, secret: true),
                          .init(name: "bitrate", prompt: "Bit rate", default: "6000")])
        let ok = try manifest.validate(url: "rtmp://x", setupInfo: ["key": "k"])
        #expect(ok.setupInfo == ["key": "k", "bitrate": "6000"])
        #expect(ok.url == "rtmp://x")
        #expect(throws: BroadcastError.self) { try manifest.validate(url: nil, setupInfo: ["key": "k"]) }
        #expect(throws: BroadcastError.self) { try manifest.validate(url: "rtmp://x", setupInfo: [:]) }
        let unknown = #expect(throws: BroadcastError.self) { try manifest.validate(url: "rtmp://x", setupInfo: ["key": "k", "typo": "1"]) }
        #expect(unknown?.message.contains("typo") == true)
        #expect(unknown?.message.contains("key, bitrate") == true)
    }
}
