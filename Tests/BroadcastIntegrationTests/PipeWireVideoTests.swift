import BroadcastClient
import BroadcastCore
import Foundation
import Testing

extension Integration {
    /// A PipeWire video node that writes the buffer metadata a compositor does (the tests' own source).
    @Suite(.serialized) struct PipeWireVideoTests {
        /// Broadcasts the tests' video source (started with `source` arguments) to inspect for `seconds`, with
        /// broadcastd given `arguments` too; the summary, the last frame, the capture figures read just before the finish, and the daemon's log.
        func broadcast(source: [String], _ arguments: [String] = [], seconds: Double) throws
            -> (summary: InspectSummary, frame: RGBFrame, capture: [String: UInt64], log: String)
        {
            let pipewire = try PipeWireHarness(tones: false)
            try pipewire.testVideoSource("test-video", source)
            let daemon = try DaemonHarness(
                [
                    "--source", "pipewire", "--pipewire-node", "test-video", "--fps", "30", "--app-audio", "none",
                    "--mic", "none",
                ] + arguments,
                environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath("video")
            let id = try daemon.start(
                handler: "inspect", url: path, setupInfo: ["frameFile": daemon.runtime + "/video.frame"], on: controller
            )
            try daemon.awaitState(controller, .live)
            usleep(UInt32(seconds * 1_000_000))
            let capture = try #require(try daemon.controller().status().capture)
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, id) == nil)
            let summary = try InspectSummary.load(path)
            return (summary, try RGBFrame(dump: try #require(summary.lastFrame)), capture, daemon.log)
        }

        /// The crop region is the picture (the red around it never shows), and damage metadata limits the
        /// conversion to the rows that changed: the rest is copied from the previous frame and still right.
        @Test func theCropRegionIsThePictureAndDamageLimitsTheConversion() throws {
            let (_, frame, capture, _) = try broadcast(
                source: ["--size", "320x240", "--crop", "40,30,240x180", "--band", "16", "--damage", "--fps", "30"],
                seconds: 2)
            #expect(frame.width == 240 && frame.height == 180, "\(frame.width)x\(frame.height): the crop region's size")
            // The band (picture rows 82..<98) alternates green and white; the rest is the base colour.
            let band: (r: Double, g: Double, b: Double) =
                frame[120, 90].g > 220 && frame[120, 90].r > 220 ? (255, 255, 255) : (0x20, 0xc0, 0x40)
            let psnr = frame.psnr { _, y in y >= 82 && y < 98 ? band : (0x30, 0x60, 0xd0) }
            #expect(psnr >= 30, "PSNR \(psnr) dB against the picture the source draws")
            let converted = capture["pipewireRowsConverted"] ?? 0
            let copied = capture["pipewireRowsKept"] ?? 0
            let frames = capture["pipewireFrames"] ?? 0
            #expect(frames >= 40, "\(frames) frames from a 30 fps source in 2 s")
            #expect(
                copied > 4 * converted && converted > 0,
                "rows converted \(converted), copied from the previous frame \(copied)")
        }

        /// A compositor stamps each frame with when it took it, before copying and sending it (xdg-desktop-portal-wlr
        /// does); between its frames broadcastd repeats the last one at each deadline. A new frame older than the last
        /// repeat handed out still comes after it: timestamps never go backwards.
        @Test func aCompositorsFrameTimesNeverGoBackwards() throws {
            let (summary, _, _, _) = try broadcast(
                source: ["--size", "320x180", "--fps", "10", "--latency", "25"], seconds: 2)
            let video = try #require(summary.streams["video"])
            #expect(
                video.count >= 45 && summary.repeatedFrames >= 20,
                "\(video.count) frames, \(summary.repeatedFrames) repeated")
            #expect(
                video.nonMonotonic == 0, "\(video.nonMonotonic) of \(video.count) frames earlier than the one before")
        }

        /// In the metadata cursor mode the pointer comes from the buffers' cursor metadata, in picture
        /// coordinates (the crop region's origin taken off): a position every frame, the image only when it
        /// changed (not each time the node sends it again), and invisible while the node says the pointer is
        /// elsewhere. The buffers that carry only the pointer (size 0, magenta) never reach the picture.
        @Test func cursorMetadataComesAsCursorMessages() throws {
            let (summary, frame, capture, log) = try broadcast(
                source: ["--size", "320x240", "--crop", "40,30,240x180", "--fps", "60", "--cursor"],
                ["--cursor", "metadata"], seconds: 2.5)
            let cursor = try #require(summary.cursor, "no CURSOR messages:\n\(log)")
            #expect(cursor.count >= 50, "\(cursor.count) CURSOR messages in 2.5 s at 30 fps: one a frame")
            #expect(
                cursor.y == 50 && (40..<100).contains(cursor.x),
                "hotspot at (\(cursor.x), \(cursor.y)) in picture coordinates")
            #expect(
                (2...5).contains(cursor.sprites),
                "\(cursor.sprites) sprites: the image changes every second and is sent again every 5 buffers")
            #expect(
                cursor.invisible > 0 && cursor.invisible < cursor.count / 3,
                "\(cursor.invisible) of \(cursor.count) said invisible")
            let sprite = (
                cursor.spriteWidth ?? 0, cursor.spriteHeight ?? 0, cursor.hotspotX ?? -1, cursor.hotspotY ?? -1,
                cursor.spriteMiddle ?? 0
            )
            #expect(
                sprite == (16, 16, 2, 3, 0xffff_d000) || sprite == (24, 24, 12, 12, 0x8000_0080),
                "last sprite \(sprite)")
            #expect(frame.width == 240 && frame.height == 180)
            let psnr = frame.psnr { _, y in y >= 82 && y < 98 ? (0x20, 0xc0, 0x40) : (0x30, 0x60, 0xd0) }
            #expect(psnr >= 30, "PSNR \(psnr) dB: buffers with no picture were converted?")
            let pictures = Double(capture["pipewireFrames"] ?? 0)
            let pointerOnly = Double(capture["pipewireCursorOnly"] ?? 0)
            #expect(
                pointerOnly > 50 && abs(pictures / pointerOnly - 1) < 0.2,
                "\(pictures) pictures, \(pointerOnly) buffers with only the pointer: half each")
        }

        /// A node that is there but sends nothing yet (a compositor before its first frame): START waits for
        /// the first frame (its size is the broadcast's) while broadcastd answers everything else at once.
        /// One that sends nothing refuses the broadcast after 5 s, or at once when it is finished meanwhile.
        @Test func aStartWaitsForTheFirstFrameWhileBroadcastdKeepsAnswering() throws {
            let pipewire = try PipeWireHarness(tones: false)
            try pipewire.testVideoSource("held", ["--hold", "2"])
            try pipewire.testVideoSource("silent", ["--hold", "600"])
            func daemon(_ node: String) throws -> DaemonHarness {
                try DaemonHarness(
                    ["--source", "pipewire", "--pipewire-node", node, "--app-audio", "none", "--mic", "none"],
                    environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
            }
            /// Status and a second START meanwhile: both answered at once, the START refused with what is awaited.
            func answersMeanwhile(_ daemon: DaemonHarness, _ node: String) throws {
                let controller = try daemon.controller()
                let asked = Date()
                #expect(try controller.status().state == .idle)
                let busy = #expect(throws: (any Error).self) {
                    _ = try controller.start(handler: "inspect", maxDuration: 1)
                }
                #expect(
                    Date().timeIntervalSince(asked) < 0.5, "status and START took \(Date().timeIntervalSince(asked)) s")
                #expect(
                    "\(String(describing: busy))".contains(
                        "the screen is waiting for node '\(node)' to send its first frame"),
                    "\(String(describing: busy))")
            }

            /// A START left waiting, `meanwhile` done half a second in: its exit status, what it said, and when it ended.
            func request(_ daemon: DaemonHarness, meanwhile: (DaemonHarness) throws -> Void) throws -> (
                status: Int32, said: String, seconds: Double
            ) {
                let requested = Date()
                let (start, output) = try daemon.startInBackground()
                defer { if start.isRunning { start.terminate() } }
                usleep(500_000)
                try meanwhile(daemon)
                start.waitUntilExit()
                return (
                    start.terminationStatus, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "",
                    Date().timeIntervalSince(requested)
                )
            }

            let held = try daemon("held")
            defer { _ = try? held.stop() }
            let controller = try held.subscribedController()
            let started = try request(held) { try answersMeanwhile($0, "held") }
            #expect(started.status == 0, "\(started.said)\n\(held.log)")
            #expect(
                started.seconds > 1.5 && started.seconds < 4,
                "START answered after \(started.seconds) s for a node that holds its first frame 2 s")
            try held.awaitState(controller, .live)
            try controller.finish()

            let silent = try daemon("silent")
            defer { _ = try? silent.stop() }
            let withdrawn = try request(silent) { try $0.controller().finish() }
            #expect(
                withdrawn.status != 0 && withdrawn.said.contains("finished before the screen was chosen"),
                "exit \(withdrawn.status): \(withdrawn.said)")
            let refused = try request(silent) { try answersMeanwhile($0, "silent") }
            #expect(
                refused.status != 0 && refused.said.contains("no frame within 5 s"),
                "exit \(refused.status): \(refused.said)")
            #expect(abs(refused.seconds - 5) < 1.5, "refused after \(refused.seconds) s")
            #expect(try silent.controller().status().state == .idle)
        }
    }
}
