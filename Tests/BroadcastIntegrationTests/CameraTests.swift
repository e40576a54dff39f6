import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

extension Integration {
    /// A camera on a private PipeWire: the tests' video source as a node of media.role Camera.
    @Suite(.serialized) struct CameraTests {
        /// broadcastctl sources lists PipeWire's video sources with the formats their EnumFormat params say; a START
        /// whose camera matches none is refused with that list, and nothing starts.
        @Test func camerasAreListedWithTheirFormatsAndAnUnknownOneIsRefused() throws {
            let pipewire = try PipeWireHarness(tones: false)
            try pipewire.testVideoSource("screen-node", ["--size", "320x180", "--fps", "30"])
            try pipewire.testVideoSource(
                "testcam", ["--size", "640x360", "--fps", "15", "--role", "Camera", "--description", "Test Camera"])
            let daemon = try DaemonHarness(
                ["--source", "synthetic"],
                environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
            defer { _ = try? daemon.stop() }

            let cameras = try #require(try daemon.controller().sources().cameras)
            #expect(cameras.map(\.name) == ["screen-node", "testcam"], "\(cameras)")
            let camera = try #require(cameras.last)
            #expect(camera.description == "Test Camera" && camera.role == "Camera" && !camera.serial.isEmpty)
            #expect(camera.formats == [CameraFormat(pixelFormat: "BGRx", width: 640, height: 360, frameRates: [15])])

            let listed = try daemon.tool("broadcastctl", ["sources"])
            #expect(listed.status == 0, "\(listed.stderr)")
            #expect(
                listed.stdout.contains("cameras:\n  screen-node (serial ")
                    && listed.stdout.contains("testcam (Test Camera, serial \(camera.serial))  role Camera\n"
                        + "    BGRx 640x360 15 fps\n"),
                "\(listed.stdout)")

            let refused = try daemon.tool(
                "broadcastctl", ["start", "--handler", "inspect", "--camera", "front", "--duration", "1"])
            #expect(refused.status != 0)
            #expect(
                refused.stderr.contains("--camera front: no camera of that name, description or serial; PipeWire has "
                    + "screen-node (serial "),
                "\(refused.stderr)")
            #expect(try daemon.controller().status().state == .idle)
        }
    }
}
