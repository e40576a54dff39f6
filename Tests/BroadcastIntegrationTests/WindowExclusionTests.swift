import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

/// `--exclude-window CLASS`: the visible parts of those windows are black in every frame, following them.
extension Integration {
    @Suite(.serialized) struct WindowExclusionTests {
        struct Rect { var x, y, w, h: Int }

        /// Whether (x, y) lies in `r` with `margin` pixels to spare (negative margin: within that distance of it).
        static func inside(_ x: Int, _ y: Int, _ r: Rect, margin: Int = 0) -> Bool {
            x >= r.x + margin && y >= r.y + margin && x < r.x + r.w - margin && y < r.y + r.h - margin
        }

        /// A recording of `x` (320x240) with windows of class `excluded` left out while `scene` runs, decoded: RGB frames
        /// as they came (a frame only when the screen changed), and the daemon, still running.
        static func record(_ x: XServer, excluding excluded: String, options: [String] = [], _ scene: () throws -> Void)
            throws -> (frames: [UInt8], daemon: DaemonHarness)
        {
            let daemon = try DaemonHarness(
                [
                    "--source", "x11", "--display", x.display, "--fps", "30", "--cursor", "hidden",
                    "--app-audio", "none", "--mic", "none", "--exclude-window", excluded,
                ] + options)
            let controller = try daemon.subscribedController()
            let path = daemon.runtime + "/excluded.mp4"
            let broadcast = try daemon.start(handler: "record", url: "file://" + path, on: controller)
            try daemon.awaitState(controller, .live)
            try scene()
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, broadcast) == nil)
            let output = daemon.runtime + "/decoded.rgb"
            let decoded = try runTool(
                "/usr/bin/ffmpeg",
                [
                    "-v", "error", "-y", "-i", path, "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24",
                    output,
                ])
            #expect(decoded.status == 0, "\(decoded.stderr)")
            return ([UInt8](try Data(contentsOf: URL(fileURLWithPath: output))), daemon)
        }

        @Test func anExcludedWindowMovedAndRestackedIsBlackWhereVisibleAndNothingElseIs() throws {
            let x = try XServer(width: 320, height: 240)
            let painter = try x.painter()
            try painter.send("background 128 128 128")
            try painter.window("secret", 40, 40, 100, 80, (255, 0, 0))
            let cover = Rect(x: 100, y: 80, w: 120, h: 100)
            try painter.window("other", cover.x, cover.y, cover.w, cover.h, (0, 255, 0))
            // Where the secret window is, and whether the other window covers part of it, in each state.
            let states: [(secret: Rect, covered: Bool)] = [
                (Rect(x: 40, y: 40, w: 100, h: 80), true), (Rect(x: 120, y: 100, w: 100, h: 80), true),
                (Rect(x: 120, y: 100, w: 100, h: 80), false), (Rect(x: 260, y: 190, w: 100, h: 80), false),
            ]
            let (data, daemon) = try Self.record(x, excluding: "Secret") {
                usleep(300_000)
                try painter.move("secret", 120, 100)
                usleep(300_000)
                try painter.window("raise", "secret")
                usleep(300_000)
                try painter.move("secret", 260, 190)
                usleep(300_000)
            }
            #expect(daemon.logs("windows of class secret blacked out"))
            let size = 320 * 240 * 3
            var seen = Set<Int>()
            for start in stride(from: 0, to: data.count - size + 1, by: size) {
                let frame = data[start..<(start + size)]
                func pixel(_ x: Int, _ y: Int) -> (Int, Int, Int) {
                    let o = start + (y * 320 + x) * 3
                    return (Int(frame[o]), Int(frame[o + 1]), Int(frame[o + 2]))
                }
                var red = 0
                for y in 0..<240 {
                    for x in 0..<320 where pixel(x, y).0 > 150 && pixel(x, y).1 < 100 && pixel(x, y).2 < 100 {
                        red += 1
                    }
                }
                #expect(red == 0, "\(red) pixels of the excluded window's red in frame \(start / size)")
                // The state this frame shows: black exactly where the secret window is visible (edges left out: chroma bleeds).
                var wrong: [Int: [String]] = [:]
                for (index, (secret, covered)) in states.enumerated() {
                    for y in stride(from: 1, to: 240, by: 3) {
                        for x in stride(from: 1, to: 320, by: 3) {
                            let near = [secret, cover].contains {
                                Self.inside(x, y, $0, margin: -3) && !Self.inside(x, y, $0, margin: 3)
                            }
                            if near { continue }
                            let black = Self.inside(x, y, secret) && !(covered && Self.inside(x, y, cover))
                            let p = pixel(x, y)
                            if black != (p.0 < 40 && p.1 < 40 && p.2 < 40) {
                                wrong[index, default: []].append("(\(x),\(y))=\(p)")
                            }
                        }
                    }
                }
                let matching = states.indices.filter { wrong[$0] == nil }
                #expect(
                    matching.count == 1,
                    "frame \(start / size) is black where no state of the excluded window would make it: \(wrong.mapValues { "\($0.count): \($0.prefix(3))" })"
                )
                seen.formUnion(matching)
            }
            #expect(seen == Set(states.indices), "states seen: \(seen.sorted())")
            try daemon.stop()
        }

        /// An excluded window dragged across the screen in steps faster than frames come, every frame grabbed whole: no
        /// frame shows any of it. (The rectangles were worked out before the grab, and a move in between showed a strip of
        /// the window.) The drag lasts 1.5 s whatever the machine's speed; the recording must have caught it in at least
        /// three places (how many frames a loaded machine grabs meanwhile is its own business).
        @Test func anExcludedWindowDraggedFasterThanFramesNeverShows() throws {
            let width = 960
            let height = 540
            let x = try XServer(width: width, height: height)
            let painter = try x.painter()
            try painter.send("background 128 128 128")
            try painter.window("secret", 0, 200, 120, 120, (255, 0, 0))
            let (data, _) = try Self.record(x, excluding: "secret", options: ["--no-damage", "--fps", "60"]) {
                let end = Date().addingTimeInterval(1.5)
                var step = 0
                while Date() < end {
                    try painter.move("secret", (step * 7) % (width - 120), 200 + (step % 3) * 20)
                    step += 1
                    usleep(2_000)
                }
            }
            let size = width * height * 3
            var leaks: [String] = []
            var places = Set<Int>()
            for start in stride(from: 0, to: data.count - size + 1, by: size) {
                var red = 0
                var blackColumns: [Int] = []
                for y in stride(from: 0, to: height, by: 2) {
                    for x in stride(from: 0, to: width, by: 2) {
                        let o = start + (y * width + x) * 3
                        if data[o] > 150 && data[o + 1] < 100 && data[o + 2] < 100 { red += 1 }
                        if y == 260 && data[o] < 40 && data[o + 1] < 40 && data[o + 2] < 40 { blackColumns.append(x) }
                    }
                }
                if red > 0 { leaks.append("frame \(start / size): \(red)") }
                // Where the blacked-out window is, by 60-pixel steps of its left edge.
                if let left = blackColumns.first { places.insert(left / 60) }
            }
            #expect(places.count >= 3, "the drag was caught in \(places.count) place(s) in \(data.count / size) frames")
            #expect(leaks.isEmpty, "red pixels of the excluded window (every other row and column): \(leaks)")
        }

        /// Pop-ups (override-redirect windows: menus, tooltips) no window manager handles: one of an excluded class,
        /// and one of the same process as an excluded window without a class of its own, are black; another
        /// application's tooltip over the excluded window shows (it covers that part). Pop-ups were not looked at: a
        /// password manager's menu showed, and a tooltip over it was blacked out.
        @Test func popUpsOfAnExcludedApplicationAreBlackAndOthersCoverIt() throws {
            let x = try XServer(width: 320, height: 240)
            let painter = try x.painter()
            try painter.send("background 128 128 128")
            let secret = Rect(x: 40, y: 40, w: 100, h: 80)
            let menu = Rect(x: 160, y: 40, w: 60, h: 60)
            let classed = Rect(x: 40, y: 150, w: 60, h: 50)
            let tooltip = Rect(x: 60, y: 60, w: 40, h: 30)
            try painter.send("window secret \(secret.x) \(secret.y) \(secret.w) \(secret.h) 255 0 0 4242")
            try painter.send("popup menu - \(menu.x) \(menu.y) \(menu.w) \(menu.h) 255 0 0 4242")
            try painter.send("popup classed secret \(classed.x) \(classed.y) \(classed.w) \(classed.h) 255 0 0 999")
            try painter.send(
                "popup tooltip tooltip \(tooltip.x) \(tooltip.y) \(tooltip.w) \(tooltip.h) 255 255 255 777")
            // A menu of the excluded application opened while live.
            let late = Rect(x: 200, y: 150, w: 60, h: 40)
            let (data, daemon) = try Self.record(x, excluding: "secret") {
                usleep(400_000)
                try painter.send("popup late - \(late.x) \(late.y) \(late.w) \(late.h) 255 0 0 4242")
                usleep(400_000)
            }
            let size = 320 * 240 * 3
            var lateSeen = [false, false]  // frames before the late menu, and with it
            for start in stride(from: 0, to: data.count - size + 1, by: size) {
                func pixel(_ x: Int, _ y: Int) -> (Int, Int, Int) {
                    let o = start + (y * 320 + x) * 3
                    return (Int(data[o]), Int(data[o + 1]), Int(data[o + 2]))
                }
                let centre = pixel(late.x + late.w / 2, late.y + late.h / 2)
                let withLate = centre.0 < 40 && centre.1 < 40 && centre.2 < 40
                lateSeen[withLate ? 1 : 0] = true
                var wrong: [String] = []
                for y in stride(from: 1, to: 240, by: 3) {
                    for x in stride(from: 1, to: 320, by: 3) {
                        let near = [secret, menu, classed, tooltip, late].contains {
                            Self.inside(x, y, $0, margin: -3) && !Self.inside(x, y, $0, margin: 3)
                        }
                        if near { continue }
                        let p = pixel(x, y)
                        let white = Self.inside(x, y, tooltip)
                        let black =
                            !white
                            && ([secret, menu, classed] + (withLate ? [late] : [])).contains { Self.inside(x, y, $0) }
                        let seen =
                            p.0 > 200 && p.1 > 200 && p.2 > 200
                            ? "white"
                            : p.0 < 40 && p.1 < 40 && p.2 < 40
                                ? "black"
                                : p.0 > 150 && p.1 < 100 && p.2 < 100 ? "red" : "other"
                        if seen != (white ? "white" : black ? "black" : "other") { wrong.append("(\(x),\(y))=\(p)") }
                    }
                }
                #expect(wrong.isEmpty, "frame \(start / size): \(wrong.count) pixels wrong: \(wrong.prefix(5))")
            }
            #expect(lateSeen == [true, true], "frames before the late menu and with it: \(lateSeen)")
            try daemon.stop()
        }

        /// What only X11 can do is refused on Wayland's portal source, each with what to do there instead.
        @Test func windowOptionsAreRefusedWithThePortalSource() throws {
            for (arguments, message) in [
                (["--exclude-window", "Secret"], "exclude-window blacks out X11 windows"),
                (["--window", "firefox"], "set portal-source to window"),
                (["--app", "firefox"], "app chooses an X11 window; with source pipewire"),
            ] {
                let refused = try runTool(
                    Paths.binary("broadcastd"),
                    ["--config", "/dev/null", "--source", "pipewire", "--print-config"] + arguments)
                #expect(refused.status == 64 && refused.stderr.contains(message), "\(arguments): \(refused)")
            }
            let fine = try runTool(
                Paths.binary("broadcastd"), ["--config", "/dev/null", "--source", "pipewire", "--print-config"])
            #expect(fine.status == 0, "the default exclusion list is no mistake there: \(fine.stderr)")
        }

        @Test func passwordManagersAreExcludedByDefaultAndNoneTurnsItOff() throws {
            let x = try XServer(width: 320, height: 240)
            let painter = try x.painter()
            try painter.fill(128, 128, 128, 0, 0, 320, 240)
            try painter.window("keepassxc", 50, 50, 80, 60, (255, 0, 0))
            for (arguments, black) in [([String](), true), (["--exclude-window", "none"], false)] {
                let daemon = try DaemonHarness(
                    [
                        "--source", "x11", "--display", x.display, "--cursor", "hidden",
                        "--app-audio", "none", "--mic", "none",
                    ] + arguments)
                let controller = try daemon.subscribedController()
                let path = daemon.summaryPath("default")
                let id = try daemon.start(
                    handler: "inspect", url: path, setupInfo: ["frameFile": daemon.runtime + "/default.frame"],
                    on: controller)
                try daemon.awaitState(controller, .live)
                usleep(300_000)
                // A password manager started while the broadcast runs: looked at when it is mapped.
                try painter.window("bitwarden", 200, 150, 60, 40, (255, 0, 0))
                usleep(300_000)
                try controller.finish()
                #expect(try daemon.awaitFinish(controller, id) == nil)
                let frame = try RGBFrame(dump: try #require(try InspectSummary.load(path).lastFrame))
                let first =
                    frame.matches(90, 80, black ? (0, 0, 0) : (255, 0, 0)) && frame.matches(20, 20, (128, 128, 128))
                let late = frame.matches(230, 170, black ? (0, 0, 0) : (255, 0, 0))
                #expect(first, "\(arguments)")
                #expect(late, "\(arguments): a window mapped during the broadcast")
                try painter.window("close", "bitwarden")
                try daemon.stop()
            }
        }
        /// An excluded window was captured whole when named: by class, by title or a word of it, by id, or as an app.
        @Test func anExcludedWindowIsRefusedByNameTitleIdOrAppAndTheWindowTakenIsNamed() throws {
            let x = try XServer(width: 320, height: 240)
            let painter = try x.painter()
            let secret = try painter.window("keepassxc", 20, 20, 80, 60, (255, 0, 0))
            try painter.window("passport", 120, 20, 96, 64, (0, 255, 0))
            try painter.window("notes", 20, 120, 64, 48, (0, 0, 255))
            try painter.window("mynotes", 120, 120, 48, 32, (0, 0, 255))
            let daemon = try DaemonHarness([
                "--source", "x11", "--display", x.display, "--cursor", "hidden", "--app-audio", "none", "--mic", "none",
            ])
            defer { _ = try? daemon.stop() }
            func start(_ option: [String]) throws -> (ToolResult, InspectSummary?) {
                let path = daemon.summaryPath("window")
                try? FileManager.default.removeItem(atPath: path)
                let result = try daemon.tool(
                    "broadcastctl",
                    ["start", "--handler", "inspect", "--url", path, "--duration", "0.5", "--wait"] + option)
                return (result, try? InspectSummary.load(path))
            }
            for option in [
                ["--window", "KeePassXC"], ["--window", "keepassxc window"], ["--window", "keepass"],
                ["--window", secret],
                ["--app", "keepassxc"],
            ] {
                let (refused, summary) = try start(option)
                #expect(
                    refused.status == 1
                        && refused.stderr.contains("windows of class keepassxc are never captured (--exclude-window)"),
                    "\(option): \(refused)")
                #expect(summary == nil, "\(option): a broadcast ran")
            }
            // "pass" is part of both titles: the window that is not excluded is taken, and the log says which and how.
            let (part, summary) = try start(["--window", "pass"])
            #expect(part.status == 0 && summary?.video?.width == 96 && summary?.video?.height == 64, "\(part)")
            #expect(
                daemon.log.contains("window 'pass' is 0x")
                    && daemon.log.contains(
                        "(Passport, \"passport window\"), found by part of its title, "
                            + "the topmost of 2 that match so"),
                "\(daemon.log)")
            // A whole title is preferred to part of another, even one above it.
            let (whole, exact) = try start(["--window", "notes window"])
            #expect(whole.status == 0 && exact?.video?.width == 64, "\(whole)")
            #expect(daemon.log.contains("(Notes, \"notes window\"), found by its whole title\n"), "\(daemon.log)")
        }
    }
}
