import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

/// X11 capture against private X servers with known content drawn by the tests' own X client.
extension Integration {
    @Suite(.serialized) struct X11CaptureTests {
        static let bars: [(Double, Double, Double)] = [
            (255, 255, 255), (255, 255, 0), (0, 255, 255), (0, 255, 0),
            (255, 0, 255), (255, 0, 0), (0, 0, 255), (0, 0, 0),
        ]

        /// A daemon capturing `x` with `arguments`.
        func daemon(for x: XServer, _ arguments: [String] = []) throws -> DaemonHarness {
            try DaemonHarness(["--source", "x11", "--display", x.display, "--fps", "30"] + arguments)
        }

        /// Runs one inspect broadcast on `daemon`: `during` runs once it is live, then it finishes after `seconds`
        /// more. Returns the summary (with the last frame saved) and the daemon's status at the end.
        func broadcast(
            _ daemon: DaemonHarness, seconds: Double = 0.6, handler: String = "inspect", name: String = "x11",
            during: () throws -> Void = {}
        ) throws -> (summary: InspectSummary, status: BroadcastStatus) {
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath(name)
            let id = try daemon.start(
                handler: handler, url: path, setupInfo: ["frameFile": daemon.runtime + "/\(name).frame"], on: controller
            )
            try daemon.awaitState(controller, .live)
            try during()
            usleep(UInt32(seconds * 1e6))
            try controller.finish()
            let error = try daemon.awaitFinish(controller, id)
            #expect(error == nil, "\(error?.message ?? "")")
            return (try InspectSummary.load(path), try controller.status())
        }

        func lastFrame(_ summary: InspectSummary, range: String = "limited") throws -> RGBFrame {
            guard let dump = summary.lastFrame else { throw HarnessError("the inspect handler saved no frame") }
            return try RGBFrame(dump: dump, range: range)
        }

        @Test(arguments: [
            ["--pixel-format", "nv12"], ["--pixel-format", "i420", "--color-range", "full"],
            ["--pixel-format", "bgrx"],
        ])
        func colourBarsComeBackAbove40dB(_ format: [String]) throws {
            let x = try XServer()
            let painter = try x.painter()
            try painter.bars()
            let daemon = try daemon(for: x, ["--cursor", "hidden"] + format)
            let (summary, _) = try broadcast(daemon)
            let frame = try lastFrame(summary, range: format.contains("full") ? "full" : "limited")
            #expect(frame.width == 640 && frame.height == 480)
            let psnr = frame.psnr { x, _ in Self.bars[x * 8 / 640] }
            #expect(psnr >= 40, "PSNR \(psnr) dB")
            try daemon.stop()
        }

        @Test func everyGrabMethodReadsTheSamePixels() throws {
            let x = try XServer()
            let painter = try x.painter()
            try painter.bars()
            try painter.fill(10, 200, 90, 33, 71, 101, 57)
            var frames: [String: [UInt8]] = [:]
            for method in ["shm-fd", "shm-sysv", "get-image"] {
                let daemon = try daemon(for: x, ["--cursor", "hidden", "--x11-grab", method])
                let (summary, _) = try broadcast(daemon, name: method)
                #expect(daemon.logs("(\(method))"), "the log should name the grab method")
                frames[method] = [UInt8](try Data(contentsOf: URL(fileURLWithPath: summary.lastFrame!.path)))
                try daemon.stop()
            }
            #expect(frames["shm-sysv"] == frames["shm-fd"])
            #expect(frames["get-image"] == frames["shm-fd"])
        }

        @Test func aRegionIsCroppedExactly() throws {
            let x = try XServer()
            let painter = try x.painter()
            try painter.fill(0, 0, 255, 0, 0, 640, 480)
            try painter.fill(255, 0, 0, 100, 50, 16, 16)  // the region's top left corner
            try painter.fill(0, 255, 0, 100 + 320 - 16, 50 + 240 - 16, 16, 16)  // its bottom right corner
            try painter.fill(255, 255, 255, 99, 49, 1, 242)  // just outside: must not show
            let daemon = try daemon(for: x, ["--cursor", "hidden", "--region", "100,50,320x240"])
            let frame = try lastFrame(try broadcast(daemon).summary)
            #expect(frame.width == 320 && frame.height == 240)
            #expect(frame.matches(1, 1, (255, 0, 0)) && frame.matches(14, 14, (255, 0, 0)))
            #expect(frame.matches(0, 0, (255, 0, 0)), "column or row 0 of the region is off by one")
            #expect(frame.matches(17, 17, (0, 0, 255)))
            #expect(frame.matches(319, 239, (0, 255, 0)) && frame.matches(304, 224, (0, 255, 0)))
            #expect(frame.matches(303, 223, (0, 0, 255)))
            try daemon.stop()
        }

        @Test func anOutputIsCroppedExactlyAndListedBySources() throws {
            let x = try XServer(.xvnc, width: 800, height: 600)
            try x.run("xrandr", ["--setmonitor", "test-right", "320/85x240/64+400+100", "none"])
            let painter = try x.painter()
            try painter.fill(0, 0, 255, 0, 0, 800, 600)
            try painter.fill(255, 0, 0, 400, 100, 8, 8)
            try painter.fill(0, 255, 0, 712, 332, 8, 8)
            let daemon = try daemon(for: x, ["--cursor", "hidden", "--output", "test-right"])
            let sources = try daemon.tool("broadcastctl", ["sources"])
            #expect(
                sources.status == 0 && sources.stdout.contains("test-right  320x240+400+100"),
                "\(sources.stdout)\(sources.stderr)")
            #expect(sources.stdout.contains("screen: 800x600"))
            let frame = try lastFrame(try broadcast(daemon).summary)
            #expect(frame.width == 320 && frame.height == 240)
            #expect(
                frame.matches(0, 0, (255, 0, 0)) && frame.matches(7, 7, (255, 0, 0)) && frame.matches(8, 8, (0, 0, 255))
            )
            #expect(
                frame.matches(319, 239, (0, 255, 0)) && frame.matches(312, 232, (0, 255, 0))
                    && frame.matches(311, 231, (0, 0, 255)))
            let wrong = try DaemonHarness(["--source", "x11", "--display", x.display, "--output", "nope"])
            let refused = try wrong.tool(
                "broadcastctl", ["start", "--handler", "inspect", "--url", "/tmp/unused.json"])
            #expect(
                refused.status == 1 && refused.stderr.contains("no output named 'nope'")
                    && refused.stderr.contains("test-right"), "\(refused.stderr)")
            try wrong.stop()
            try daemon.stop()
        }

        /// The pointer's hotspot is put at (200, 150) on a grey screen; the X server's default cursor is black and white.
        @Test(arguments: ["embedded", "hidden", "metadata"])
        func theCursorIsDrawnHiddenOrReportedAsAsked(_ mode: String) throws {
            let x = try XServer()
            let painter = try x.painter()
            try painter.fill(128, 128, 128, 0, 0, 640, 480)
            try x.run("xdotool", ["mousemove", "200", "150"])
            let daemon = try daemon(for: x, ["--cursor", mode])
            let (summary, _) = try broadcast(daemon)
            let frame = try lastFrame(summary)
            var differing = 0
            for y in 130..<170 {
                for x in 180..<220 where !frame.matches(x, y, (128, 128, 128), tolerance: 20) { differing += 1 }
            }
            let untouched = (0..<640).allSatisfy { frame.matches($0, 400, (128, 128, 128)) }
            #expect(untouched)
            switch mode {
            case "embedded":
                #expect(differing > 20, "no cursor drawn near (200, 150)")
                #expect(summary.cursor == nil)
            default:
                #expect(differing == 0, "\(differing) pixels of a cursor drawn in \(mode) mode")
            }
            if mode == "metadata" {
                let cursor = try #require(summary.cursor)
                #expect(cursor.x == 200 && cursor.y == 150 && cursor.visible)
                #expect(cursor.sprites == 1, "the sprite is sent once, not every frame")
                #expect(cursor.count >= 10, "a position every frame")
                #expect((cursor.spriteWidth ?? 0) > 0)
            } else if mode == "hidden" {
                #expect(summary.cursor == nil)
            }
            try daemon.stop()
        }

        @Test func aResizeMidBroadcastKeepsItGoingInTheNewSize() throws {
            let x = try XServer(.xvnc, width: 640, height: 480)
            let painter = try x.painter()
            let daemon = try daemon(for: x, ["--cursor", "hidden"])
            let (summary, status) = try broadcast(daemon, seconds: 1) {
                usleep(500_000)
                try x.run("xrandr", ["-s", "1024x768"])
                usleep(300_000)
                try painter.fill(255, 0, 0, 0, 0, 1024, 768)
            }
            #expect(summary.formatChanges.map(\.description) == ["1024x768 nv12"])
            #expect(summary.callbacks.contains { $0.callback == "broadcastVideoFormatChanged" })
            let frame = try lastFrame(summary)
            #expect(frame.width == 1024 && frame.height == 768)
            #expect(frame.matches(1023, 767, (255, 0, 0)))
            #expect(status.capture?["resizes"] == 1)
            #expect(status.video?.width == 1024)
            try daemon.stop()
        }

        @Test func aStaticScreenCostsRepeatsNotGrabsAndOnlyChangedBandsAreRead() throws {
            let x = try XServer()
            let painter = try x.painter()
            try painter.bars()
            let daemon = try daemon(for: x, ["--cursor", "hidden"])
            var afterStatic: [String: UInt64] = [:]
            let (summary, status) = try broadcast(daemon, seconds: 0.5) {
                usleep(1_000_000)
                afterStatic = try daemon.controller().status().capture ?? [:]
                try painter.fill(0, 0, 0, 300, 200, 20, 10)
            }
            // One whole grab at the start, nothing while the screen stood still.
            #expect(afterStatic["framesGrabbed"] == 1, "\(afterStatic)")
            #expect(summary.repeatedFrames >= 20)
            #expect(status.streams?["video"]?.repeated == UInt64(summary.repeatedFrames))
            let bands = status.capture ?? [:]
            #expect(bands["framesGrabbed"] == 2, "\(bands)")
            let perFrame = afterStatic["bandsGrabbed"] ?? 0
            #expect(
                (bands["bandsGrabbed"] ?? 0) - perFrame <= 2,
                "a 10-row change re-read more than the bands it touches: \(bands)")
            #expect((bands["bandsCopied"] ?? 0) >= perFrame - 2)
            #expect((try lastFrame(summary)).matches(305, 205, (0, 0, 0)))
            try daemon.stop()
        }

        @Test func aVariableFrameRateHandlerReceivesOnlyFramesThatChanged() throws {
            let x = try XServer()
            let painter = try x.painter()
            try painter.bars()
            let daemon = try daemon(for: x, ["--cursor", "hidden"])
            let (summary, status) = try broadcast(daemon, seconds: 0.8, handler: "inspect-vfr")
            #expect(summary.streams["video"]?.count == 1)
            #expect(summary.repeatedFrames == 0)
            #expect((status.streams?["video"]?.repeated ?? 0) >= 20)
            try daemon.stop()
        }

        @Test func theXServerGoingAwayEndsTheBroadcastWithAnErrorAndTheDaemonCarriesOn() throws {
            let x = try XServer()
            let daemon = try daemon(for: x)
            let controller = try daemon.subscribedController()
            let id = try daemon.start(handler: "inspect", url: daemon.summaryPath("gone"), on: controller)
            try daemon.awaitState(controller, .live)
            x.stop()
            let error = try daemon.awaitFinish(controller, id, timeout: 10)
            #expect(error?.code == .captureFailed)
            #expect(
                error?.message.contains("connection to X display \(x.display) was lost") == true,
                "\(error?.message ?? "")")
            #expect(try controller.status().state == .finished)
            let again = try daemon.tool(
                "broadcastctl", ["start", "--handler", "inspect", "--url", daemon.summaryPath("again")])
            #expect(again.status == 1 && again.stderr.contains("X display \(x.display)"), "\(again.stderr)")
            try daemon.stop()
        }

        @Test func noXServerIsAClearErrorBeforeTheBroadcastStarts() throws {
            let x = try XServer()
            let missing = ":\(x.number)"
            x.stop()
            let daemon = try DaemonHarness(["--source", "x11", "--display", missing])
            #expect(daemon.logs("broadcasts cannot start until this is resolved"))
            let refused = try daemon.tool(
                "broadcastctl", ["start", "--handler", "inspect", "--url", daemon.summaryPath("none")])
            #expect(refused.status == 1)
            #expect(
                refused.stderr.contains("connect to X display \(missing)")
                    && refused.stderr.contains("is the X server running"), "\(refused.stderr)")
            #expect(try daemon.controller().status().state == .idle)
            try daemon.stop()
        }
    }
}
