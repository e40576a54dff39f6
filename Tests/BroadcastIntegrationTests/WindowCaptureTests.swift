import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

/// `--window`: one X11 window captured through XComposite, with windows drawn by the tests' painter on Xvfb.
extension Integration {
    @Suite(.serialized) struct WindowCaptureTests {
        /// The subject window's content at 160x120: blue, a red quarter top left and a green quarter bottom right.
        static func content(_ x: Int, _ y: Int, width: Int = 160, height: Int = 120) -> (
            r: Double, g: Double, b: Double
        ) {
            if x < 80 && y < 60 { return (255, 0, 0) }
            if x >= 80 && y >= 60 && x < 160 && y < 120 { return (0, 255, 0) }
            return (0, 0, 255)
        }

        /// A grey screen with the subject window at (40, 40) and, on top of part of it, a yellow cover window.
        func scene(_ x: XServer) throws -> (painter: Painter, id: String) {
            let painter = try x.painter()
            try painter.fill(128, 128, 128, 0, 0, 640, 480)
            let id = try painter.window("subject", 40, 40, 160, 120, (0, 0, 255))
            try painter.fill(in: "subject", 255, 0, 0, 0, 0, 80, 60)
            try painter.fill(in: "subject", 0, 255, 0, 80, 60, 80, 60)
            try painter.window("cover", 100, 80, 200, 200, (255, 255, 0))
            return (painter, id)
        }

        func daemon(for x: XServer, _ arguments: [String]) throws -> DaemonHarness {
            try DaemonHarness(
                [
                    "--source", "x11", "--display", x.display, "--fps", "30", "--cursor", "hidden", "--app-audio",
                    "none", "--mic", "none",
                ] + arguments)
        }

        /// Decodes a recording into packed RGB frames of `width`x`height` with ffmpeg.
        func decodedFrames(_ path: String, width: Int, height: Int, in daemon: DaemonHarness) throws -> [[UInt8]] {
            let output = daemon.runtime + "/decoded.rgb"
            let result = try runTool(
                "/usr/bin/ffmpeg",
                [
                    "-v", "error", "-y", "-i", path, "-fps_mode", "passthrough",
                    "-f", "rawvideo", "-pix_fmt", "rgb24", output,
                ], timeout: 120)
            guard result.status == 0 else { throw HarnessError("ffmpeg could not decode \(path): \(result.stderr)") }
            let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: output)))
            let size = width * height * 3
            return stride(from: 0, to: data.count - size + 1, by: size).map { Array(data[$0..<($0 + size)]) }
        }

        static func psnr(_ frame: [UInt8], width: Int, expected: (Int, Int) -> (r: Double, g: Double, b: Double))
            -> Double
        {
            var squares = 0.0
            for i in 0..<(frame.count / 3) {
                let e = expected(i % width, i / width)
                for (value, wanted) in zip(frame[(i * 3)..<(i * 3 + 3)], [e.r, e.g, e.b]) {
                    squares += (Double(value) - wanted) * (Double(value) - wanted)
                }
            }
            let mse = squares / Double(frame.count)
            return mse == 0 ? .infinity : 10 * log10(255 * 255 / mse)
        }

        @Test func aCoveredWindowMovedMidRecordingIsRecordedAsItsOwnContentOnly() throws {
            let x = try XServer()
            let (painter, id) = try scene(x)
            let daemon = try daemon(for: x, ["--window", "subject"])
            let sources = try daemon.tool("broadcastctl", ["sources"])
            #expect(sources.status == 0, "\(sources.stderr)")
            let line = sources.stdout.split(separator: "\n").first { $0.contains(id) }.map(String.init) ?? ""
            #expect(
                line.contains("Subject") && line.contains("\"subject window\"") && line.contains("160x120+40+40")
                    && line.contains("pid "),
                "sources lists the window with class, title, pid and geometry: \(sources.stdout)")
            let controller = try daemon.subscribedController()
            let path = daemon.runtime + "/window.mp4"
            let broadcast = try daemon.start(handler: "record", url: "file://" + path, on: controller)
            try daemon.awaitState(controller, .live)
            usleep(400_000)
            try painter.move("subject", 300, 200)  // still under part of the cover? no: the cover moves onto it
            try painter.move("cover", 280, 180)
            usleep(400_000)
            try painter.move("subject", -40, 300)  // partly off screen
            usleep(400_000)
            let status = try controller.status()
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, broadcast) == nil)
            #expect(status.video?.width == 160 && status.video?.height == 120, "\(String(describing: status.video))")
            #expect(status.source.contains("window \(id) (Subject, \"subject window\")"), "\(status.source)")
            let frames = try decodedFrames(path, width: 160, height: 120, in: daemon)
            // The recorder writes a frame when the picture changed: at the start and after each move (a full grab).
            #expect(frames.count >= 3, "\(frames.count) frames decoded")
            let scores = frames.map { Self.psnr($0, width: 160) { Self.content($0, $1) } }
            #expect(
                scores.allSatisfy { $0 >= 35 },
                "PSNR against the window's content, lowest \(scores.min() ?? 0) dB: \(scores.map { Int($0) })")
            try daemon.stop()
        }

        @Test func aResizedWindowChangesTheFormatAndAHiddenOneRepeatsItsLastFrame() throws {
            let x = try XServer()
            let (painter, _) = try scene(x)
            let daemon = try daemon(for: x, ["--window", "Subject"])
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath("resized")
            let broadcast = try daemon.start(
                handler: "inspect", url: path, setupInfo: ["frameFile": daemon.runtime + "/resized.frame"],
                on: controller)
            try daemon.awaitState(controller, .live)
            usleep(300_000)
            try painter.window("unmap", "subject")
            usleep(300_000)
            let hidden = try controller.status().capture ?? [:]
            usleep(500_000)
            let stillHidden = try controller.status().capture ?? [:]
            #expect(
                hidden["framesGrabbed"] == stillHidden["framesGrabbed"],
                "a hidden window is not grabbed: \(hidden) then \(stillHidden)")
            try painter.window("map", "subject")
            try painter.resize("subject", 200, 150)
            try painter.fill(in: "subject", 255, 255, 255, 160, 120, 40, 30)
            usleep(500_000)
            let status = try controller.status()
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, broadcast) == nil)
            let summary = try InspectSummary.load(path)
            #expect(summary.formatChanges.map(\.description) == ["200x150 nv12"])
            #expect(status.capture?["resizes"] == 1)
            let frame = try RGBFrame(dump: try #require(summary.lastFrame))
            #expect(frame.width == 200 && frame.height == 150)
            let psnr = frame.psnr { x, y in x >= 160 && y >= 120 ? (255, 255, 255) : Self.content(x, y) }
            #expect(psnr >= 35, "PSNR \(psnr) dB against the resized window's content")
            #expect(
                daemon.logs("is not shown: repeating its last frame") && daemon.logs("resized from 160x120 to 200x150"))
            try daemon.stop()
        }

        /// Under a window manager (twm: a frame with a title bar around each client) the window is its client's
        /// content alone, `sources` lists the client, and an excluded window is black with its frame.
        @Test func underAWindowManagerTheClientIsCapturedAndAnExcludedFrameIsBlack() throws {
            let x = try XServer()
            let manager = try x.windowManager()
            defer {
                kill(manager.processIdentifier, SIGKILL)
                manager.waitUntilExit()
            }
            let painter = try x.painter()
            try painter.send("background 128 128 128")
            let id = try painter.window("subject", 40, 60, 160, 120, (0, 0, 255))
            try painter.fill(in: "subject", 255, 0, 0, 0, 0, 80, 60)
            try painter.fill(in: "subject", 0, 255, 0, 80, 60, 80, 60)
            try painter.window("secret", 300, 200, 120, 90, (255, 0, 0))
            usleep(300_000)
            let daemon = try self.daemon(for: x, ["--window", "subject", "--exclude-window", "Secret"])
            let listed = try daemon.controller().sources()
            let subject = try #require(listed.windows?.first { $0.instance == "subject" }, "\(listed)")
            #expect(
                "0x" + String(subject.id, radix: 16) == id && subject.width == 160 && subject.height == 120,
                "the client, not its frame: \(subject)")
            let secret = try #require(listed.windows?.first { $0.instance == "secret" })
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath("managed")
            let broadcast = try daemon.start(
                handler: "inspect", url: path, setupInfo: ["frameFile": daemon.runtime + "/managed.frame"],
                on: controller)
            try daemon.awaitState(controller, .live)
            usleep(300_000)
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, broadcast) == nil)
            let frame = try RGBFrame(dump: try #require(try InspectSummary.load(path).lastFrame))
            #expect(frame.width == 160 && frame.height == 120)
            let psnr = frame.psnr { Self.content($0, $1) }
            #expect(psnr >= 35, "PSNR \(psnr) dB: the title bar or border came in?")
            try daemon.stop()

            let screen = try self.daemon(for: x, ["--exclude-window", "Secret"])
            let screenController = try screen.subscribedController()
            let screenPath = screen.summaryPath("screen")
            let second = try screen.start(
                handler: "inspect", url: screenPath, setupInfo: ["frameFile": screen.runtime + "/screen.frame"],
                on: screenController)
            try screen.awaitState(screenController, .live)
            usleep(300_000)
            try screenController.finish()
            #expect(try screen.awaitFinish(screenController, second) == nil)
            let whole = try RGBFrame(dump: try #require(try InspectSummary.load(screenPath).lastFrame))
            let client = whole.matches(secret.x + 60, secret.y + 45, (0, 0, 0))
            let titleBar = whole.matches(secret.x + 60, secret.y - 8, (0, 0, 0))
            let around =
                whole.matches(secret.x + 60, secret.y - 40, (128, 128, 128))
                && whole.matches(subject.x + 10, subject.y + 10, (255, 0, 0))
            #expect(client, "the excluded client")
            #expect(titleBar, "its frame's title bar, which shows its title")
            #expect(around, "nothing else is black")
            try screen.stop()
        }

        /// `--app PID`: of two programs' windows, the one whose _NET_WM_PID is that process, and that process's audio.
        @Test func anAppByPIDPicksItsWindowAndThatProcesssAudio() throws {
            let x = try XServer()
            let first = try x.painter()
            let second = try x.painter()
            try first.fill(128, 128, 128, 0, 0, 640, 480)
            try first.window("alpha", 20, 20, 100, 80, (255, 0, 0))
            let id = try second.window("beta", 200, 100, 120, 90, (0, 255, 0))
            let lister = try DaemonHarness(["--source", "x11", "--display", x.display])
            let listed = try lister.controller().sources()
            try lister.stop()
            let beta = try #require(listed.windows?.first { "0x" + String($0.id, radix: 16) == id })
            #expect(listed.windows?.first { $0.instance == "alpha" }?.pid != beta.pid, "two painters, two processes")
            let pid = try #require(beta.pid)
            let daemon = try DaemonHarness([
                "--source", "x11", "--display", x.display, "--cursor", "hidden", "--app", "\(pid)",
            ])
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath("app")
            let broadcast = try daemon.start(
                handler: "inspect", url: path, setupInfo: ["frameFile": daemon.runtime + "/app.frame"], on: controller)
            try daemon.awaitState(controller, .live)
            usleep(300_000)
            let status = try controller.status()
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, broadcast) == nil)
            #expect(status.source.contains("window \(id) (Beta, \"beta window\")"), "\(status.source)")
            #expect(
                status.source.contains("app audio pid:\(pid)"),
                "app audio: the playback streams of that process: \(status.source)")
            let frame = try RGBFrame(dump: try #require(try InspectSummary.load(path).lastFrame))
            let psnr = frame.psnr { _, _ in (0, 255, 0) }
            #expect(
                frame.width == 120 && frame.height == 90 && psnr >= 35,
                "\(frame.width)x\(frame.height), PSNR \(psnr) dB")
            try daemon.stop()
            let both = try runTool(
                Paths.binary("broadcastd"),
                ["--config", "/dev/null", "--app", "\(pid)", "--window", "beta", "--print-config"])
            #expect(
                both.status != 0 && both.stderr.contains("window, output and region cannot be set with it"), "\(both)")
        }

        @Test func aClosedWindowFinishesTheBroadcastAndAMissingOneIsRefusedWithTheList() throws {
            let x = try XServer()
            let (painter, id) = try scene(x)
            let daemon = try daemon(for: x, ["--window", id])
            let controller = try daemon.subscribedController()
            let broadcast = try daemon.start(handler: "inspect", url: daemon.summaryPath("closed"), on: controller)
            try daemon.awaitState(controller, .live)
            usleep(300_000)
            try painter.window("close", "subject")
            let error = try daemon.awaitFinish(controller, broadcast, timeout: 10)
            #expect(
                error?.code == .captureFailed && error?.message.contains("the window closed") == true,
                "\(String(describing: error))")
            let again = try daemon.tool(
                "broadcastctl", ["start", "--handler", "inspect", "--url", daemon.summaryPath("again")])
            #expect(
                again.status == 1 && again.stderr.contains("no top-level window has id \(id)")
                    && again.stderr.contains("Cover"), "\(again.stderr)")
            try daemon.stop()
            let byName = try self.daemon(for: x, ["--window", "nothing-like-it"])
            let refused = try byName.tool(
                "broadcastctl", ["start", "--handler", "inspect", "--url", byName.summaryPath("none")])
            #expect(
                refused.status == 1 && refused.stderr.contains("matches 'nothing-like-it'")
                    && refused.stderr.contains("\"cover window\""), "\(refused.stderr)")
            try byName.stop()
        }
    }
}
