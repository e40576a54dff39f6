import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import Testing

@testable import BroadcastDaemon

/// Cameras: `--camera` matched against PipeWire's video sources, and a START's camera in the daemon's core.
@Suite struct CameraTests {
    static let screen = CameraDescription(name: "screen-cast", serial: "30", role: nil)
    static let webcam = CameraDescription(
        name: "v4l2_input.pci-0000_00_14.0-usb-0_1_1.0", description: "Integrated Webcam", serial: "57", role: "Camera",
        formats: [CameraFormat(pixelFormat: "YUY2", width: 1280, height: 720, frameRates: [30, 15])])
    static let other = CameraDescription(name: "testcam", description: "Test Camera", serial: "61", role: "Camera")

    /// A camera that offers only formats broadcastd cannot take (MJPG) is refused at START, saying what it offers, why
    /// it is not taken and what to do, rather than a broadcast whose camera never sends a frame.
    @Test func aCameraOfOnlyFormatsBroadcastdCannotTakeIsRefused() throws {
        var mjpg = Self.other
        mjpg.formats = [CameraFormat(pixelFormat: "MJPG", width: 1280, height: 720, frameRates: [30])]
        let refused = CameraRequest("default").pick(from: [mjpg])
        #expect(throws: BroadcastError.self) { try refused.get() }
        guard case .failure(let error) = refused else { return }
        #expect(
            error.message.hasPrefix(
                "--camera default: testcam (Test Camera, serial 61) offers only MJPG; broadcastd does not decode MJPG: "
                    + "a decoder (libavcodec) would take more memory than the daemon's budget allows. broadcastd "
                    + "takes a camera's raw formats (NV12, I420, YV12, NV21, YUY2, UYVY, ")
                && error.message.contains("most webcams offer YUY2 at their lower resolutions")
                && error.message.hasSuffix("(broadcastd(1), --camera)"),
            "\(error)")
        var gray = mjpg
        gray.formats = [CameraFormat(pixelFormat: "GRAY8", width: 640, height: 480, frameRates: [30])]
        guard case .failure(let grey) = CameraRequest("testcam").pick(from: [gray]) else {
            Issue.record("a camera of a raw format broadcastd does not take was picked")
            return
        }
        #expect(grey.message.hasPrefix("--camera testcam: testcam (Test Camera, serial 61) offers only GRAY8. "))
        mjpg.formats.append(CameraFormat(pixelFormat: "UYVY", width: 640, height: 480, frameRates: [30]))
        #expect(try CameraRequest("testcam").pick(from: [mjpg]).get() == mjpg)
    }

    /// PipeWire is asked for the delivered pixel format first (no conversion), then NV12, I420, YUY2, …: the plan
    /// expects the first format the camera lists in the most preferred pixel format it has.
    @Test func theExpectedFormatIsTheFirstListedOfTheMostPreferredPixelFormat() {
        #expect(CameraFormat.preference(delivering: .nv12).prefix(5) == ["NV12", "I420", "YV12", "NV21", "YUY2"])
        #expect(CameraFormat.preference(delivering: .i420).prefix(3) == ["I420", "NV12", "YV12"])
        #expect(CameraFormat.preference(delivering: .bgrx).prefix(2) == ["BGRx", "NV12"])
        let camera = CameraDescription(
            name: "cam", serial: "1",
            formats: [
                CameraFormat(pixelFormat: "MJPG", width: 1920, height: 1080, frameRates: [30]),
                CameraFormat(pixelFormat: "YUY2", width: 640, height: 480, frameRates: [30]),
                CameraFormat(pixelFormat: "I420", width: 1280, height: 720, frameRates: [10]),
                CameraFormat(pixelFormat: "I420", width: 320, height: 240, frameRates: [30]),
            ])
        #expect(camera.expectedFormat(delivering: .nv12)?.width == 1280)
        #expect(camera.expectedFormat(delivering: .bgrx)?.width == 1280)
        #expect(
            CameraDescription(name: "mjpg", serial: "2", formats: [camera.formats[0]]).expectedFormat(delivering: .nv12)
                == nil)
    }

    @Test func aCameraIsMatchedByNodeNameDescriptionInAnyCaseOrSerial() throws {
        let cameras = [Self.screen, Self.webcam, Self.other]
        #expect(try CameraRequest("testcam").pick(from: cameras).get() == Self.other)
        #expect(try CameraRequest("integrated webcam").pick(from: cameras).get() == Self.webcam)
        #expect(try CameraRequest("61").pick(from: cameras).get() == Self.other)
        #expect(try CameraRequest("none").pick(from: cameras).get() == nil)
    }

    /// `default`: the first whose media.role is Camera, not merely the first video source (a screen cast's node).
    @Test func theDefaultIsTheFirstCameraByRoleElseTheFirstVideoSource() throws {
        #expect(try CameraRequest("default").pick(from: [Self.screen, Self.webcam, Self.other]).get() == Self.webcam)
        #expect(try CameraRequest("default").pick(from: [Self.screen]).get() == Self.screen)
    }

    @Test func aNameThatMatchesNothingIsRefusedWithTheListOfCameras() {
        guard case .failure(let error) = CameraRequest("nope").pick(from: [Self.screen, Self.webcam]) else {
            Issue.record("matched")
            return
        }
        #expect(error.code == .captureFailed)
        #expect(
            error.message
                == "--camera nope: no camera of that name, description or serial; PipeWire has screen-cast (serial 30), "
                + "v4l2_input.pci-0000_00_14.0-usb-0_1_1.0 (Integrated Webcam, serial 57)")
        guard case .failure(let none) = CameraRequest("default").pick(from: []) else {
            Issue.record("a default without cameras")
            return
        }
        #expect(none.message == "--camera default: PipeWire has no camera (no node of media.class Video/Source)")
    }

    @Test func aFormatReadsAsPixelFormatSizeAndRates() {
        #expect(Self.webcam.formats[0].description == "YUY2 1280x720 30/15 fps")
        #expect(
            CameraFormat(pixelFormat: "NV12", width: 640, height: 480, frameRates: [7.5]).description
                == "NV12 640x480 7.5 fps")
    }

    @Test func aStartsCameraReplacesBroadcastdsAndIsCheckedLikeTheOtherStrings() {
        let own = CaptureChoice(frameRate: 30, camera: "none")
        #expect(own.choosing(CaptureChoice(camera: "testcam")).camera == "testcam")
        #expect(own.choosing(CaptureChoice(frameRate: 15)).camera == "none")
        #expect(CaptureChoice(camera: "").problem != nil)
        #expect(CaptureChoice(camera: "bad\u{1}").problem != nil)
        #expect(CaptureChoice(camera: "testcam").description == "--camera testcam")
    }

    // MARK: - In the core

    /// A core whose PipeWire has `cameras`, counting how often it was asked; the screen's source never changes. A
    /// camera's frames come from a synthetic source of `size` (each frame new), which goes away when `gone` is set.
    final class Cameras {
        var list: [CameraDescription]
        var looks = 0
        var camera: String
        let size: VideoFormat
        var made: [VanishingCamera] = []
        init(
            _ list: [CameraDescription], camera: String = "none", size: VideoFormat = VideoFormat(width: 32, height: 16)
        ) {
            self.list = list
            self.camera = camera
            self.size = size
        }
        var sources: CaptureSources {
            CaptureSources(
                defaults: CaptureChoice(frameRate: 30, camera: camera),
                make: { choice throws(CaptureError) in
                    throw CaptureError(source: "test", operation: "make", reason: "asked for a new screen: \(choice)")
                },
                cameras: { () throws(CaptureError) in
                    self.looks += 1
                    return self.list
                },
                makeCamera: { _ throws(CaptureError) in
                    let source = VanishingCamera(SyntheticSource(.init(video: self.size, framesPerSecond: 30)))
                    self.made.append(source)
                    return source
                })
        }
    }

    @Test func aStartWithAnUnknownCameraIsRefusedWithTheListAndNothingStarts() throws {
        let cameras = Cameras([Self.screen, Self.webcam])
        let harness = try CoreHarness(sources: cameras.sources)
        let controller = try harness.peer(.controller)
        let reply = try harness.request(
            .start, StartRequest(handler: "stand-in", capture: CaptureChoice(camera: "nope")), from: controller)
        #expect(reply.opcode == .error)
        let error = try reply.decode(BroadcastError.self)
        #expect(error.code == .captureFailed && error.message.contains("PipeWire has screen-cast (serial 30)"))
        #expect(harness.core.capture == nil && cameras.looks == 1)
    }

    /// The first broadcast's camera is the capture's, named in the status; one joining with another camera is
    /// refused as capture-in-use, one with the same (or none) joins.
    @Test func theFirstBroadcastChoosesTheCameraAndOthersJoinOnlyWithIt() throws {
        let cameras = Cameras([Self.screen, Self.webcam, Self.other])
        let harness = try CoreHarness(sources: cameras.sources)
        let controller = try harness.peer(.controller)
        let first = try harness.request(
            .start, StartRequest(handler: "stand-in", capture: CaptureChoice(camera: "default")), from: controller)
        let id = try #require(try first.decode(BroadcastReference.self).broadcast)
        #expect(harness.core.capture?.camera == Self.webcam)
        let status = try harness.request(.getStatus, BroadcastReference(broadcast: id), from: controller)
        #expect(try status.decode(BroadcastStatus.self).camera == Self.webcam.title)

        let other = try harness.request(
            .start, StartRequest(handler: "stand-in", capture: CaptureChoice(camera: "Test Camera")), from: controller)
        let refusal = try other.decode(BroadcastError.self)
        #expect(refusal.code == .captureInUse && refusal.message.contains("--camera Test Camera"), "\(refusal)")
        let same = try harness.request(
            .start, StartRequest(handler: "stand-in", capture: CaptureChoice(camera: "57")), from: controller)
        #expect(same.opcode == .ok)
        let without = try harness.request(
            .start, StartRequest(handler: "stand-in", capture: CaptureChoice(camera: "none")), from: controller)
        #expect(without.opcode == .ok)
    }

    @Test func sourcesListsTheCameras() throws {
        let cameras = Cameras([Self.webcam])
        let harness = try CoreHarness(sources: cameras.sources)
        let controller = try harness.peer(.controller)
        let list = try harness.request(.listSources, from: controller).decode(SourceList.self)
        #expect(list.cameras == [Self.webcam])
    }

    /// A broadcast whose handler takes the camera (setup `camera=on`) gets CAMERA_FORMAT, then a CAMERA_SAMPLE in a
    /// slot of the camera's own pool at each frame deadline, stamped on the clock the screen's frames are; one
    /// that does not take it gets none. The status counts the camera's frames as the stream `videoCamera`.
    @Test func aHandlerThatTakesTheCameraGetsItsFramesInItsOwnPoolAndOthersDoNot() throws {
        let cameras = Cameras([Self.webcam], camera: "default")
        let harness = try CoreHarness(sources: cameras.sources)
        let controller = try harness.peer(.controller)
        let (id, taker) = try harness.startBroadcast(from: controller, setupInfo: ["camera": "on"])
        let (_, other) = try harness.startBroadcast(from: controller)
        let cameraPool = try #require(taker.cameraPool)
        #expect(cameraPool != taker.pool && other.cameraPool == nil)
        try harness.advance(by: 200_000_000)
        let messages = try taker.peer.received()
        let notice = try #require(messages.first { $0.opcode == .cameraFormat }).decode(CameraFormatNotice.self)
        #expect(notice.camera == Self.webcam.title && notice.video?.width == 32 && notice.lost == nil)
        let samples = try messages.filter { $0.opcode == .cameraSample }.map {
            try VideoSampleHeader(decoding: $0.payload)
        }
        #expect(samples.count >= 5, "\(messages.map(\.opcode))")
        #expect(samples.allSatisfy { $0.pool == cameraPool && $0.width == 32 && $0.height == 16 })
        #expect(samples.map(\.timing.sequence) == Array(0..<UInt64(samples.count)))
        #expect(
            samples.first?.timing.discontinuity == true && samples.dropFirst().allSatisfy { !$0.timing.discontinuity })
        // Frames are stamped at their deadlines by the synthetic camera, as the screen's are: strictly increasing.
        #expect(
            zip(samples, samples.dropFirst()).allSatisfy { $0.timing.presentationTime < $1.timing.presentationTime })
        for sample in samples {
            try harness.send(SlotRelease(pool: sample.pool, slot: sample.slot).message, from: taker.peer)
        }
        #expect(try other.peer.received().allSatisfy { $0.opcode != .cameraSample && $0.opcode != .cameraFormat })
        let statuses = try harness.status(controller).broadcasts ?? []
        let status = try #require(statuses.first { $0.broadcast == id })
        #expect(status.streams?["videoCamera"]?.delivered == UInt64(samples.count), "\(status.streams ?? [:])")
        #expect(statuses.first { $0.broadcast != id }?.streams?["videoCamera"] == nil)
    }

    /// A handler that keeps the camera's slots loses camera frames (counted as dropped), never the screen's, and
    /// the daemon never waits for it.
    @Test func aHandlerThatKeepsTheCamerasSlotsLosesCameraFramesOnly() throws {
        let cameras = Cameras([Self.webcam], camera: "default")
        let harness = try CoreHarness(sources: cameras.sources)
        let controller = try harness.peer(.controller)
        let (id, taker) = try harness.startBroadcast(from: controller, setupInfo: ["camera": "on"])
        try harness.advance(by: 300_000_000, releasing: [taker])  // screen frames released, the camera's kept
        let status = try harness.request(.getStatus, BroadcastReference(broadcast: id), from: controller)
            .decode(BroadcastStatus.self)
        let camera = try #require(status.streams?["videoCamera"])
        #expect(camera.delivered == UInt64(FramePoolPlan.minimumSlots), "\(camera)")
        #expect(camera.dropped > 0, "\(camera)")
        #expect(status.streams?["video"]?.dropped == 0)
    }

    /// A camera that goes away: its handler gets CAMERA_FORMAT with why and no more camera frames, the status says
    /// it in cameraLost, and the broadcast goes on with the screen.
    @Test func aCameraThatGoesAwayIsSaidOnceAndTheBroadcastGoesOn() throws {
        let cameras = Cameras([Self.webcam], camera: "default")
        let harness = try CoreHarness(sources: cameras.sources)
        let controller = try harness.peer(.controller)
        let (id, taker) = try harness.startBroadcast(from: controller, setupInfo: ["camera": "on"])
        try harness.advance(by: 100_000_000, releasing: [taker])
        let before = try taker.peer.received()
        for sample in try before.filter({ $0.opcode == .cameraSample }).map({
            try VideoSampleHeader(decoding: $0.payload)
        }) {
            try harness.send(SlotRelease(pool: sample.pool, slot: sample.slot).message, from: taker.peer)
        }
        let screenFrames = taker.framesTaken
        try #require(cameras.made.last).gone = true
        try harness.advance(by: 200_000_000, releasing: [taker])
        let after = try taker.peer.received()
        let notices = try after.filter { $0.opcode == .cameraFormat }.map { try $0.decode(CameraFormatNotice.self) }
        #expect(notices.count == 1 && notices.first?.video == nil, "\(notices)")
        #expect(notices.first?.lost?.contains("went away") == true)
        #expect(!after.contains { $0.opcode == .cameraSample })
        let status = try harness.request(.getStatus, BroadcastReference(broadcast: id), from: controller)
            .decode(BroadcastStatus.self)
        #expect(status.state == .live && status.cameraLost?.contains(Self.webcam.name) == true)
        #expect(taker.framesTaken - screenFrames >= 5, "the screen's frames go on")
    }

    /// `--on-lock blank`: while the session is locked the broadcast stays live with the privacy frame, and its handler
    /// gets no camera frames; they come again once it is unlocked.
    @Test func aLockedSessionWithBlankingStopsTheCamerasFramesUntilUnlocked() throws {
        let cameras = Cameras([Self.webcam], camera: "default")
        let harness = try CoreHarness(sources: cameras.sources) { $0.onLock = .blank }
        let lock = try StandInLock()
        harness.core.sessionLock = lock
        let controller = try harness.peer(.controller)
        let (id, taker) = try harness.startBroadcast(from: controller, setupInfo: ["camera": "on"])
        func cameraFrames(for nanoseconds: UInt64) throws -> Int {
            try harness.advance(by: nanoseconds, releasing: [taker])
            let samples = try taker.peer.received().filter { $0.opcode == .cameraSample }
            for sample in try samples.map({ try VideoSampleHeader(decoding: $0.payload) }) {
                try harness.send(SlotRelease(pool: sample.pool, slot: sample.slot).message, from: taker.peer)
            }
            return samples.count
        }
        // The camera's two slots are given back only after each stretch: two frames in each, at most.
        #expect(try cameraFrames(for: 200_000_000) == 2)
        lock.set(locked: true, harness)
        #expect(harness.core.broadcast(id)?.phase == .live)
        #expect(try cameraFrames(for: 300_000_000) == 0)
        lock.set(locked: false, harness)
        #expect(try cameraFrames(for: 200_000_000) == 2)
    }

    /// The plan counts the camera: its own slots (as many as the screen's, following the broadcasts), its two pictures
    /// and PipeWire's buffers; an enforced budget refuses what does not fit, naming the camera.
    @Test func thePlanCountsTheCamerasSlotsPictureAndBuffers() throws {
        let screen = VideoFormat(width: 1920, height: 1080)
        let camera = FramePoolPlan.CameraCost(width: 1280, height: 720, pixelFormat: .nv12)
        let parts = [FramePoolPlan.Part("broadcastd itself", 8 << 20)]
        let plan = FramePoolPlan(format: screen, parts: parts, budgetBytes: 50 << 20, enforced: false, camera: camera)
        let slot = FramePoolPlan.slotSize(camera.format)
        #expect(camera.format.frameByteCount == 1280 * 720 * 3 / 2)
        let beside = 2 * camera.format.frameByteCount + 3 * 1280 * 720 * 4 + FramePoolPlan.CameraCost.connectionBytes
        #expect(plan.cameraBytes == 2 * slot + beside)
        #expect(plan.totalBytes == plan.baseBytes + plan.poolBytes + plan.cameraBytes)
        let three = try plan.changing(broadcasts: 3)
        #expect(three.cameraBytes == 7 * slot + beside)
        #expect(plan.cameraPool?.slotCount == 2 && three.cameraPool?.slotCount == 7)
        #expect("\(plan)".contains("the camera"))
        #expect(throws: BroadcastError.self) {
            try FramePoolPlan.plan(format: screen, parts: parts, budgetBytes: 25 << 20, enforced: true, camera: camera)
        }
        do {
            _ = try FramePoolPlan.plan(
                format: screen, parts: parts, budgetBytes: 25 << 20, enforced: true, camera: camera)
        } catch {
            #expect(error.message.contains("for the camera (1280x720"), "\(error.message)")
        }
        #expect((try? FramePoolPlan.plan(format: screen, parts: parts, budgetBytes: 25 << 20, enforced: true)) != nil)
    }

    /// The camera's buffers are planned in its own format (YUY2: 2 bytes a pixel), three at most; once its frames
    /// come, as they are mapped.
    @Test func theCamerasBuffersArePlannedInItsOwnFormatThenAsMapped() throws {
        let cost = CaptureSession.cost(of: Self.webcam, as: .nv12)
        let connection = FramePoolPlan.CameraCost.connectionBytes
        #expect(
            cost.format == VideoFormat(width: 1280, height: 720) && cost.buffersBytes == 3 * 1280 * 720 * 2 + connection
        )
        var nv12 = Self.webcam
        nv12.formats.insert(CameraFormat(pixelFormat: "NV12", width: 640, height: 480, frameRates: [30]), at: 1)
        #expect(CaptureSession.cost(of: nv12, as: .nv12).buffersBytes == 3 * 640 * 480 * 3 / 2 + connection)
        #expect(CaptureSession.cost(of: Self.other, as: .nv12).buffersBytes == 3 * 1280 * 720 * 4 + connection)
        // libswscale's part only where the frames are converted.
        #expect(cost.conversionBytes == FramePoolPlan.CameraCost.converterBytes)
        #expect(CaptureSession.cost(of: nv12, as: .nv12).conversionBytes == 0)
    }

    /// A camera that lists 16x8 frames and sends 320x240 ones.
    static func growingCamera() -> Cameras {
        let small = CameraDescription(
            name: "small", serial: "7", role: "Camera",
            formats: [CameraFormat(pixelFormat: "BGRx", width: 16, height: 8, frameRates: [30])])
        return Cameras([small], camera: "default", size: VideoFormat(width: 320, height: 240))
    }

    /// A camera whose frames change size before the handler said HELLO: the handler hears of it after WELCOME, in
    /// what follows its HELLO (the camera's pool and CAMERA_FORMAT then are the current ones), not before WELCOME
    /// (PictureInPictureTests failed now and then: "unexpected CAMERA_FORMAT: expected WELCOME in answer to HELLO").
    @Test func aHandlerHearsOfTheCameraOnlyOnceWelcomed() throws {
        let harness = try CoreHarness(sources: Self.growingCamera().sources)
        let controller = try harness.peer(.controller)
        let (_, first) = try harness.startBroadcast(from: controller, setupInfo: ["camera": "on"])
        // The second's handler is launched; the camera's frames grow before it says HELLO.
        let id = try harness.setUpBroadcast(from: controller, setupInfo: ["camera": "on"])
        try harness.advance(by: 100_000_000, releasing: [first])
        #expect(try first.peer.received().contains { $0.opcode == .cameraFormat }, "the camera's frames grew")
        let second = try harness.connectHandler(of: id)
        let notice = try #require(second.peer.inbox.first { $0.opcode == .cameraFormat })
        #expect(try notice.decode(CameraFormatNotice.self).video?.width == 320)
    }

    /// Camera frames larger than the format the camera listed get a larger pool of their own (a new POOL to the
    /// handlers that take them, before CAMERA_FORMAT), and the plan counts them at their size.
    @Test func cameraFramesLargerThanListedGetALargerPoolAndThePlanFollows() throws {
        let harness = try CoreHarness(sources: Self.growingCamera().sources)
        let controller = try harness.peer(.controller)
        let (_, taker) = try harness.startBroadcast(from: controller, setupInfo: ["camera": "on"])
        #expect(harness.core.capture?.plan.camera?.format == VideoFormat(width: 16, height: 8))
        try harness.advance(by: 100_000_000, releasing: [taker])
        let messages = try taker.peer.received()
        let pools = try messages.filter { $0.opcode == .pool }.map { try $0.decode(PoolAnnouncement.self) }
        let pool = try #require(pools.first, "\(messages.map(\.opcode))")
        #expect(pool.camera == true && pool.pool != taker.cameraPool && pool.slotSize >= 320 * 240 * 3 / 2)
        let first = try #require(messages.firstIndex { $0.opcode == .pool })
        #expect(messages[(first + 1)...].first { $0.opcode != .videoSample }?.opcode == .cameraFormat)
        #expect(
            try messages.filter { $0.opcode == .cameraSample }.allSatisfy {
                try VideoSampleHeader(decoding: $0.payload).pool == pool.pool
            })
        #expect(harness.core.capture?.plan.camera?.format == VideoFormat(width: 320, height: 240))
    }

    /// The core's plan has the camera's part once a camera is chosen (from the first format the camera lists).
    @Test func theCoresPlanHasTheCameraFromItsFirstFormat() throws {
        let cameras = Cameras([Self.webcam], camera: "default")
        let harness = try CoreHarness(sources: cameras.sources)
        let controller = try harness.peer(.controller)
        _ = try harness.startBroadcast(from: controller)
        let plan = try #require(harness.core.capture?.plan)
        #expect(plan.camera?.format == VideoFormat(width: 1280, height: 720))
        let status = try harness.status(controller)
        #expect(status.memoryPlanned == plan.totalBytes && plan.cameraBytes > 0)
    }
}

/// A camera's source that goes away when told: a synthetic source whose stream then fails, as a PipeWire stream
/// does when its node is removed.
final class VanishingCamera: CaptureSource {
    let inner: SyntheticSource
    var gone = false
    init(_ inner: SyntheticSource) { self.inner = inner }
    var description: String { "vanishing " + inner.description }
    var videoFormat: VideoFormat { inner.videoFormat }
    var audioFormat: AudioFormat { inner.audioFormat }
    var audioStreams: [SampleType] { [] }
    var frameInterval: UInt64 { inner.frameInterval }
    var orientation: Orientation { inner.orientation }
    var colorRange: ColorRange { inner.colorRange }
    var cursor: CursorState? { nil }
    var statistics: [String: UInt64] { [:] }
    func open() throws(CaptureError) -> VideoFormat { try inner.open() }
    func outputs() throws(CaptureError) -> CaptureOutputs { try inner.outputs() }
    func close() { inner.close() }
    func begin(at time: UInt64) throws(CaptureError) { try inner.begin(at: time) }
    func end() { inner.end() }
    func checkForChanges() throws(CaptureError) -> FrameChange {
        if gone {
            throw CaptureError(source: "pipewire", operation: "capture node 'cam'", reason: "the stream is unconnected")
        }
        return try inner.checkForChanges()
    }
    func captureFrame(
        index: UInt64, deadline: UInt64, into slot: UnsafeMutableRawPointer, previous: UnsafeRawPointer?
    ) throws(CaptureError) -> UInt64 {
        try inner.captureFrame(index: index, deadline: deadline, into: slot, previous: previous)
    }
    func nextAudioDeadline() -> UInt64? { nil }
    func nextAudioChunk(_ stream: SampleType, now: UInt64) -> AudioChunk? { nil }
}
