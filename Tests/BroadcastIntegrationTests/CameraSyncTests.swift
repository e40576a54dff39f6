import BroadcastClient
import BroadcastCore
import Foundation
import Testing

extension Integration {
    /// The camera and the screen on one clock, judged in a recording with the camera in a corner: the X screen and
    /// the tests' camera (on a private PipeWire) turned white and back at the same instants by the test.
    @Suite(.serialized) struct CameraSyncTests {
        static let width = 640, height = 480, fps = 30.0

        /// Four flashes, each on the X screen (the painter, which returns once the server drew it) and in the camera
        /// (SIGUSR1 to the source, SIGUSR2 to end it) at once: in the recording the corner turns white and back within
        /// a frame of the screen. The screen is seen at its next capture tick; the camera at its own next frame (30
        /// fps, its phase apart), so the two are less than a frame apart in capture time, and the handler puts each
        /// camera picture in the screen frame nearest it. The flashes come at different phases of the frames (their
        /// waits are not whole frames), and each one changes the whole screen, whose grab (640x480 converted by a
        /// debug build) keeps broadcastd's loop busy for 100 to 200 ms, deadlines missed: before the camera's pictures
        /// were paired by capture time, and kept while the loop was busy, the corner turned a whole grab (100 to 300
        /// ms) after the screen whenever the camera's flash came after the screen's deadline. Each edge is held to a
        /// frame and 10 ms: the capture times of the screen's frames are when the loop woke for them, a few ms late
        /// on a loaded machine.
        @Test func theCameraAndTheScreenFlashWithinAFrameOfEachOther() throws {
            let x = try XServer(.xvfb, width: Self.width, height: Self.height)
            defer { x.stop() }
            let painter = try x.painter()
            try painter.fill(0, 0, 0, 0, 0, Self.width, Self.height)
            let pipewire = try PipeWireHarness(tones: false)
            let camera = try pipewire.testVideoSource(
                "synccam", ["--size", "320x240", "--fps", "30", "--role", "Camera", "--color", "000000", "--band", "0"])
            let daemon = try DaemonHarness(
                [
                    "--source", "x11", "--display", x.display, "--fps", "30", "--cursor", "hidden",
                    "--camera", "synccam",
                ],
                environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/sync.mkv"
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "record", url: path,
                setupInfo: ["camera": "on", "cameraPosition": "top-left", "cameraSize": "30", "audio": "none"],
                on: controller)
            try daemon.awaitState(controller, .live)
            usleep(1_000_000)
            for flash in 0..<4 {
                try painter.fill(255, 255, 255, 0, 0, Self.width, Self.height)
                kill(camera.processIdentifier, SIGUSR1)
                usleep(400_000 + UInt32(flash) * 9_000)
                try painter.fill(0, 0, 0, 0, 0, Self.width, Self.height)
                kill(camera.processIdentifier, SIGUSR2)
                usleep(600_000 + UInt32(flash) * 13_000)
            }
            try controller.finish(broadcast: id)
            let finished = try daemon.waitFor(controller, timeout: 30) {
                if case .finished(let f) = $0, f.broadcast == id { f } else { nil }
            }
            #expect(finished.error == nil, "\(daemon.log)")

            // The corner: 192x144 at (12, 12) (4:3 at 30 % of 640, 2 % in); the screen: its lower right quarter.
            let recording = Recording(path: path, scratch: daemon.runtime)
            let times = try recording.frameTimes()
            let frames = try recording.lumaFrames(width: Self.width, height: Self.height)
            func mean(_ frame: [UInt8], _ x0: Int, _ y0: Int, _ w: Int, _ h: Int) -> Int {
                var sum = 0
                for y in stride(from: y0, to: y0 + h, by: 4) {
                    for x in stride(from: x0, to: x0 + w, by: 4) { sum += Int(frame[y * Self.width + x]) }
                }
                return sum / ((w / 4) * (h / 4))
            }
            /// The times a region turned white (true) or dark (false), in order.
            func edges(_ x0: Int, _ y0: Int, _ w: Int, _ h: Int) -> [(Double, Bool)] {
                var result: [(Double, Bool)] = []
                var white = false
                for (time, frame) in zip(times, frames) where (mean(frame, x0, y0, w, h) > 128) != white {
                    white.toggle()
                    result.append((time, white))
                }
                return result
            }
            let corner = edges(24, 24, 168, 120)
            let screen = edges(400, 300, 200, 150)
            #expect(corner.count == 8 && screen.count == 8, "corner \(corner), screen \(screen)")
            let apart = zip(corner, screen).map { abs($0.0 - $1.0) }
            let what = zip(corner, screen).map { "\($0.1 ? "white" : "dark") \($0.0) s / \($1.0) s" }
            #expect(zip(corner, screen).allSatisfy { $0.1 == $1.1 }, "corner / screen: \(what)")
            #expect(apart.allSatisfy { $0 <= 1 / Self.fps + 0.01 }, "corner / screen: \(what)")
        }
    }
}
