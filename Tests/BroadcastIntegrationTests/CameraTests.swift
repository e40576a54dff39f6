import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

@testable import BroadcastPipeWire

extension Integration {
    /// A camera on a private PipeWire: the tests' video source as a node of media.role Camera.
    @Suite(.serialized) struct CameraTests {
        /// broadcastctl sources lists PipeWire's video sources with the formats their EnumFormat params say; a START
        /// whose camera matches none is refused with that list, and nothing starts.
        @Test func camerasAreListedWithTheirFormatsAndAnUnknownOneIsRefused() throws {
            let pipewire = try PipeWireHarness(tones: false)
            try pipewire.testVideoSource("screen-node", ["--size", "320x180", "--fps", "30"])
            // A webcam's own format (packed 4:2:2), the default camera (the first of role Camera).
            try pipewire.testVideoSource(
                "webcam", ["--size", "320x240", "--fps", "15", "--format", "YUY2", "--role", "Camera"])
            let testcam = try pipewire.testVideoSource(
                "testcam", ["--size", "640x360", "--fps", "15", "--role", "Camera", "--description", "Test Camera"])
            let daemon = try DaemonHarness(
                ["--source", "synthetic"],
                environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
            defer { _ = try? daemon.stop() }

            let cameras = try #require(try daemon.controller().sources().cameras)
            #expect(cameras.map(\.name) == ["screen-node", "webcam", "testcam"], "\(cameras)")
            #expect(
                cameras.dropFirst().first?.formats == [
                    CameraFormat(pixelFormat: "YUY2", width: 320, height: 240, frameRates: [15])
                ])
            let camera = try #require(cameras.first { $0.name == "testcam" })
            #expect(camera.description == "Test Camera" && camera.role == "Camera" && !camera.serial.isEmpty)
            #expect(camera.formats == [CameraFormat(pixelFormat: "BGRx", width: 640, height: 360, frameRates: [15])])

            let listed = try daemon.tool("broadcastctl", ["sources"])
            #expect(listed.status == 0, "\(listed.stderr)\n\(daemon.log)")
            #expect(
                listed.stdout.contains("cameras:\n  screen-node (serial ")
                    && listed.stdout.contains(
                        "testcam (Test Camera, serial \(camera.serial))  role Camera\n"
                            + "    BGRx 640x360 15 fps\n")
                    && listed.stdout.contains("webcam (serial ")
                    && listed.stdout.contains("    YUY2 320x240 15 fps\n"),
                "\(listed.stdout)\n\(daemon.log)")

            let refused = try daemon.tool(
                "broadcastctl", ["start", "--handler", "inspect", "--camera", "front", "--duration", "1"])
            #expect(refused.status != 0)
            #expect(
                refused.stderr.contains(
                    "--camera front: no camera of that name, description or serial; PipeWire has "
                        + "screen-node (serial "),
                "\(refused.stderr)")
            #expect(try daemon.controller().status().state == .idle)

            // The Python example takes the camera when its setup says camera=on (the daemon's own default camera: the
            // webcam, its YUY2 converted into the camera's slots).
            let controller = try daemon.subscribedController()
            let counted = daemon.summaryPath("counter")
            let counter = try controller.start(
                handler: "python-counter", maxDuration: nil, capture: CaptureChoice(camera: "default"))
            try daemon.setup().complete(broadcast: counter, url: "file://" + counted, setupInfo: ["camera": "on"])
            try daemon.awaitState(controller, .live)
            usleep(1_000_000)
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, counter) == nil)
            let counts = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: counted)))
                    as? [String: Any])
            let perStream = try #require(counts["counts"] as? [String: Int])
            // A second of a 15 fps source: as many as the machine lets it make (see below), a few at least.
            #expect((perStream["videoCamera"] ?? 0) >= 3, "\(counts)")
            #expect((counts["nonMonotonic"] as? [String: Int])?["videoCamera"] == 0)
            let cameraSeen = counts["camera"] as? [String: Any]
            #expect(cameraSeen?["formats"] as? [String] == ["320x240 nv12"], "\(String(describing: cameraSeen))")

            // The camera by its description, to inspect (its manifest takes the camera): 1.5 s of it, then it goes
            // away.
            let path = daemon.summaryPath("camera")
            let id = try controller.start(
                handler: "inspect", maxDuration: nil, capture: CaptureChoice(camera: "test camera"))
            try daemon.setup().complete(broadcast: id, url: path, setupInfo: [:])
            try daemon.awaitState(controller, .live)
            usleep(1_500_000)
            #expect(try daemon.controller().status().camera == camera.title)
            pipewire.kill(testcam)
            let lost = try daemon.waitFor(controller, timeout: 5) { event -> String? in
                guard case .stateChanged(let status) = event else { return nil }
                return status.cameraLost
            }
            #expect(lost.contains("the camera testcam went away"), "\(lost)")
            usleep(300_000)
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, id) == nil)
            let summary = try InspectSummary.load(path)
            let frames = try #require(summary.streams["videoCamera"], "\(summary.streams.keys)")
            // The source makes 15 frames a second for the 1.5 s, each new one delivered once at the next 30 fps
            // deadline: at most 30 with the wait for the finish. How many it makes depends on the machine (quiet, they
            // came in pairs, about 10 a second; beside other builds, 6 in 1.1 s), so what is required of the daemon is
            // frames over most of that time, none delivered twice (pts increasing).
            #expect(frames.count >= 4 && frames.count <= 30, "\(frames.count) camera frames \(frames)")
            let cameraSpan = (frames.lastPts ?? 0) - (frames.firstPts ?? 0)
            #expect(cameraSpan >= 700_000_000, "camera frames over \(cameraSpan) ns")
            #expect(frames.nonMonotonic == 0)
            #expect(
                summary.camera?.formats == [VideoFormat(width: 640, height: 360)],
                "\(String(describing: summary.camera))")
            #expect(summary.camera?.lost?.contains("went away") == true)
            // The screen went on after the camera went away (0.3 s of it before the finish).
            let screenLast = try #require(summary.streams["video"]?.lastPts)
            #expect(screenLast > (frames.lastPts ?? 0) + 150_000_000)
        }

        /// Cameras that send NV12 or I420 only: each is taken (PipeWire is asked for the formats broadcastd takes,
        /// the delivered one first) and the inspect handler gets `videoCamera` frames in the broadcast's pixel format
        /// with the camera's colour in their planes: an NV12 camera's copied into NV12, an I420 camera's converted
        /// into NV12, and copied into I420 by a daemon whose pixel format is I420.
        @Test func nv12AndI420CamerasAreDeliveredWithTheirColours() throws {
            let pipewire = try PipeWireHarness(tones: false)
            for format in ["NV12", "I420"] {
                try pipewire.testVideoSource(
                    format.lowercased() + "cam",
                    ["--size", "320x240", "--fps", "15", "--format", format, "--role", "Camera", "--color", "3060d0"])
            }
            // BT.601 limited range, as the source makes it: Y, Cb, Cr of 0x3060d0.
            let (r, g, b) = (0x30, 0x60, 0xd0)
            let y: Int = ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16
            let u: Int = ((-38 * r - 74 * g + 112 * b + 128) >> 8) + 128
            let v: Int = ((112 * r - 94 * g - 18 * b + 128) >> 8) + 128
            let expected = [y, u, v]
            for pixelFormat in [PixelFormat.nv12, .i420] {
                let daemon = try DaemonHarness(
                    ["--source", "synthetic", "--size", "320x180", "--pixel-format", pixelFormat.description],
                    environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
                defer { _ = try? daemon.stop() }
                let cameras = try #require(try daemon.controller().sources().cameras)
                #expect(
                    cameras.map { $0.formats.map(\.description) } == [
                        ["NV12 320x240 15 fps"], ["I420 320x240 15 fps"],
                    ],
                    "\(cameras)")
                let controller = try daemon.subscribedController()
                for camera in ["nv12cam", "i420cam"] where pixelFormat == .nv12 || camera == "i420cam" {
                    let path = daemon.summaryPath(camera)
                    let id = try controller.start(
                        handler: "inspect", maxDuration: nil, capture: CaptureChoice(camera: camera))
                    try daemon.setup().complete(broadcast: id, url: path, setupInfo: [:])
                    try daemon.awaitState(controller, .live)
                    usleep(1_200_000)
                    try controller.finish()
                    #expect(try daemon.awaitFinish(controller, id) == nil)
                    let summary = try InspectSummary.load(path)
                    let what = "\(camera) into \(pixelFormat)"
                    #expect((summary.streams["videoCamera"]?.count ?? 0) >= 3, "\(what): \(summary.streams.keys)")
                    #expect(
                        summary.camera?.formats == [VideoFormat(width: 320, height: 240, pixelFormat: pixelFormat)],
                        "\(what): \(String(describing: summary.camera))")
                    let pixel = try #require(summary.camera?.lastPixel, "\(what)")
                    #expect(
                        zip(pixel, expected).allSatisfy { abs(Int($0) - $1) <= 1 },
                        "\(what): \(pixel), expected \(expected)\n\(daemon.log)")
                }
                try daemon.stop()
            }
        }

        /// PipeWire may answer the listing before the connection's init has returned (a loaded machine, the caller
        /// descheduled): the answer must not be lost. Before the fix the registry's `done` found no connection yet and
        /// was dropped, and the listing waited 2 s and failed; the delay here makes that happen every time.
        @Test func theListingHoldsWhenPipeWireAnswersBeforeItWaits() throws {
            let pipewire = try PipeWireHarness(tones: false)
            try pipewire.testVideoSource("testcam", ["--size", "320x180", "--fps", "15", "--role", "Camera"])
            setenv("PIPEWIRE_REMOTE", pipewire.socketPath, 1)
            PipeWireCameras.connected = { usleep(200_000) }
            defer {
                PipeWireCameras.connected = nil
                unsetenv("PIPEWIRE_REMOTE")
            }
            let cameras = try PipeWireCameras.list()
            #expect(cameras.map(\.name) == ["testcam"] && cameras.first?.formats.count == 1, "\(cameras)")
        }
    }
}
