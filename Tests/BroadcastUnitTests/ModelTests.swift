import BroadcastCore
import Testing

@Suite struct ModelTests {
    @Test func planeLayouts() {
        let nv12 = VideoFormat(width: 1920, height: 1080, pixelFormat: .nv12)
        #expect(
            nv12.planes == [
                Plane(offset: 0, stride: 1920, height: 1080), Plane(offset: 1920 * 1080, stride: 1920, height: 540),
            ])
        #expect(nv12.frameByteCount == 3_110_400)
        let i420 = VideoFormat(width: 1280, height: 720, pixelFormat: .i420)
        #expect(i420.planes.map(\.stride) == [1280, 640, 640])
        #expect(i420.frameByteCount == 1280 * 720 * 3 / 2)
        let odd = VideoFormat(width: 1366, height: 768, pixelFormat: .nv12)
        #expect(odd.planes[0].stride == 1408)  // rounded up to 64
        #expect(VideoFormat(width: 1920, height: 1080, pixelFormat: .bgrx).frameByteCount == 1920 * 1080 * 4)
    }

    @Test func sizeParsing() {
        #expect(VideoFormat.parseSize("1920x1080")! == (1920, 1080))
        #expect(VideoFormat.parseSize("1921x1080") == nil)
        #expect(VideoFormat.parseSize("abc") == nil)
        #expect(VideoFormat.parseSize("0x0") == nil)
    }

    /// What broadcastd has besides the pool in these plans: itself (measured), the source's buffers, a live broadcast.
    static func parts(daemon: Int = 15, source: Int = 0) -> [FramePoolPlan.Part] {
        [.init("broadcastd itself", daemon << 20)]
            + (source > 0 ? [.init("the compositor's buffers (2 x 8.0 MB)", source << 20)] : [])
            + [.init("what a live broadcast adds", 4 << 20)]
    }

    /// One broadcast uses two slots (one being filled, one with its handler); each broadcast that joins one more,
    /// beside the latest frame they share; the pool's memory has room for the most it may use.
    @Test func slotsGrowWithTheBroadcastsSharingThePool() throws {
        #expect((1...9).map(FramePoolPlan.slots(forBroadcasts:)) == [2, 5, 7, 9, 10, 10, 10, 10, 10])
        let plan = try FramePoolPlan.plan(
            format: VideoFormat(width: 1920, height: 1080), parts: Self.parts(), budgetBytes: 50 << 20, enforced: true)
        #expect(plan.slotCount == 2 && plan.slotSize == 3_112_960)
        #expect(plan.totalBytes == (19 << 20) + 2 * 3_112_960)
        #expect(plan.capacityBytes == 10 * 3_112_960)
        let three = try plan.changing(broadcasts: 3)
        #expect(three.slotCount == 7 && three.totalBytes == plan.totalBytes + 5 * 3_112_960)
        #expect(plan.overBudgetWarning == nil)
    }

    /// A 4K X11 screen with PipeWire audio fits the built-in budget with two slots.
    @Test func fourKNV12FitsTheBuiltInBudget() throws {
        let plan = try FramePoolPlan.plan(
            format: VideoFormat(width: 3840, height: 2160), parts: Self.parts(daemon: 18, source: 1),
            budgetBytes: 50 << 20, enforced: false)
        #expect(plan.slotCount == 2 && plan.excessBytes == 0, "\(plan)")
    }

    /// Over the built-in budget the capture runs at its least, saying by how much and why; a budget the user set is
    /// enforced, and the refusal names the parts and what would fit.
    @Test func theBuiltInBudgetIsAGoalAndASetOneIsAPromise() throws {
        let format = VideoFormat(width: 3840, height: 2160)
        let plan = try FramePoolPlan.plan(
            format: format, parts: Self.parts(daemon: 20, source: 64), budgetBytes: 50 << 20, enforced: false)
        let warning = try #require(plan.overBudgetWarning)
        #expect(
            warning.hasPrefix(
                "running \(megabytes(plan.excessBytes)) over the memory budget of 50.0 MB: 3840x2160 nv12 needs 2 frame slots of 11.9 MB"
            ),
            "\(warning)")
        #expect(
            warning.contains("64.0 MB for the compositor's buffers (2 x 8.0 MB)")
                && warning.contains("20.0 MB for broadcastd itself"), "\(warning)")
        let error = #expect(throws: BroadcastError.self) {
            try FramePoolPlan.plan(
                format: format, parts: Self.parts(daemon: 20, source: 64), budgetBytes: 50 << 20, enforced: true)
        }
        #expect(error?.code == .budget)
        #expect(
            error?.message.contains("more than the memory budget of 50.0 MB; use --memory-budget 114") == true,
            "\(error?.message ?? "")")
    }

    @Test func aRefusalSaysWhatWouldFit() throws {
        let error = #expect(throws: BroadcastError.self) {
            try FramePoolPlan.plan(
                format: VideoFormat(width: 3840, height: 2160, pixelFormat: .bgrx), parts: Self.parts(),
                budgetBytes: 50 << 20, enforced: true)
        }
        let message = error?.message ?? ""
        #expect(
            message.contains("82.3 MB in all, more than the memory budget of 50.0 MB; use --memory-budget 85"),
            "\(message)")
        #expect(message.contains("a smaller size such as 2560x1440"), "\(message)")
        #expect(message.contains("--pixel-format nv12"), "\(message)")
        let plan = try FramePoolPlan.plan(
            format: VideoFormat(width: 1920, height: 1080), parts: Self.parts(), budgetBytes: 35 << 20, enforced: true)
        let joining = #expect(throws: BroadcastError.self) { try plan.changing(broadcasts: 3) }
        #expect(
            joining?.message.contains("at most 2 broadcast(s) at once at this size") == true,
            "\(joining?.message ?? "")")
    }

    @Test func manifestValidationFillsDefaultsAndRejectsUnknownKeys() throws {
        let manifest = HandlerManifest(
            name: "stream", displayName: "Stream", exec: "x",
            url: .init(prompt: "Server", required: true),
            setupFields: [
                .init(name: "key", prompt: "Stream key", required: true, secret: true),
                .init(name: "bitrate", prompt: "Bit rate", default: "6000"),
            ])
        let ok = try manifest.validate(url: "rtmp://x", setupInfo: ["key": "k"])
        #expect(ok.setupInfo == ["key": "k", "bitrate": "6000"])
        #expect(ok.url == "rtmp://x")
        #expect(throws: BroadcastError.self) { try manifest.validate(url: nil, setupInfo: ["key": "k"]) }
        #expect(throws: BroadcastError.self) { try manifest.validate(url: "rtmp://x", setupInfo: [:]) }
        let unknown = #expect(throws: BroadcastError.self) {
            try manifest.validate(url: "rtmp://x", setupInfo: ["key": "k", "typo": "1"])
        }
        #expect(unknown?.message.contains("typo") == true)
        #expect(unknown?.message.contains("key, bitrate") == true)
    }
}
