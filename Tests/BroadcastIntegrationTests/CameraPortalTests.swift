import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

extension Integration {
    /// The camera through xdg-desktop-portal's Camera interface where the screen comes through the portal: the
    /// stand-in portal of Tests/fixtures/portal (its camera_portal.py) on a private session bus, and a private
    /// PipeWire with the tests' camera.
    @Suite(.serialized) struct CameraPortalTests {
        /// broadcastd started with a camera asks for it at once, and its log says the refusal; a refusal in the camera
        /// dialog refuses the broadcast in the user's words and starts nothing; the next one asks again, is allowed,
        /// and gets the camera's frames. broadcastd's own PipeWire is an empty folder, so the screen and the camera can
        /// only come through the portal's remotes (the camera's, OpenPipeWireRemote of org.freedesktop.portal.Camera,
        /// for each listing of the cameras and for the stream).
        @Test func theCameraComesThroughThePortalOnlyOnceAllowed() throws {
            let pipewire = try PipeWireHarness(tones: false)
            try pipewire.videoSource("shared-screen", width: 320, height: 180, color: 0x808080)
            try pipewire.testVideoSource(
                "testcam",
                ["--size", "320x240", "--fps", "15", "--format", "NV12", "--role", "Camera", "--color", "3060d0"])
            try pipewire.portal(node: "shared-screen", cameraRefusals: 2)
            let nowhere = pipewire.runtime + "/no-pipewire"
            try FileManager.default.createDirectory(atPath: nowhere, withIntermediateDirectories: true)
            let daemon = try DaemonHarness(
                ["--source", "pipewire", "--fps", "30", "--app-audio", "none", "--mic", "none", "--camera", "default"],
                environment: [
                    "PIPEWIRE_RUNTIME_DIR": nowhere,
                    "DBUS_SESSION_BUS_ADDRESS": pipewire.environment["DBUS_SESSION_BUS_ADDRESS"]!,
                    "XDG_STATE_HOME": pipewire.runtime + "/state",
                ])
            defer { _ = try? daemon.stop() }
            func calls() -> [String] { pipewire.portalCalls().compactMap { $0["call"] as? String } }
            let deadline = Date().addingTimeInterval(10)
            while !daemon.log.contains("the camera was not allowed") && Date() < deadline { usleep(20_000) }
            #expect(daemon.log.contains("camera: the camera was not allowed"), "\(daemon.log)")
            #expect(calls() == ["AccessCamera"], "\(calls())")

            let refused = try daemon.tool(
                "broadcastctl", ["start", "--handler", "inspect", "--camera", "default", "--duration", "1"])
            #expect(refused.status != 0)
            #expect(
                refused.stderr.contains("--camera default: ") && refused.stderr.contains("the camera was not allowed"),
                "\(refused.stderr)\n\(daemon.log)")
            #expect(try daemon.controller().status().state == .idle)
            #expect(calls() == ["AccessCamera", "AccessCamera"], "\(calls())")

            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath("camera")
            let id = try controller.start(
                handler: "inspect", maxDuration: nil, capture: CaptureChoice(camera: "default"))
            try daemon.setup().complete(broadcast: id, url: path, setupInfo: [:])
            try daemon.awaitState(controller, .live)
            usleep(1_200_000)
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, id) == nil)
            let summary = try InspectSummary.load(path)
            #expect((summary.streams["videoCamera"]?.count ?? 0) >= 3, "\(summary.streams.keys)\n\(daemon.log)")
            #expect((summary.streams["video"]?.count ?? 0) >= 20, "\(summary.streams.keys)")
            #expect(summary.camera?.formats == [VideoFormat(width: 320, height: 240)])
            // The camera's colour (BT.601 limited range, as the source makes it), copied from its NV12 frames.
            let expected = [97, 184, 99]
            let pixel = try #require(summary.camera?.lastPixel)
            #expect(zip(pixel, expected).allSatisfy { abs(Int($0) - $1) <= 1 }, "\(pixel), expected \(expected)")
            let asked = calls()
            #expect(
                Array(asked.prefix(3)) == ["AccessCamera", "AccessCamera", "AccessCamera"]
                    && pipewire.portalCalls().filter { $0["call"] as? String == "AccessCamera" }.map {
                        $0["allowed"] as? Bool
                    } == [false, false, true]
                    && asked.filter { $0 == "Camera.OpenPipeWireRemote" }.count >= 2
                    && asked.contains("OpenPipeWireRemote"),
                "\(asked)")
        }
    }
}
