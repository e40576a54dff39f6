import BroadcastClient
import BroadcastInspect
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Testing

extension Integration {
/// broadcastctl as a new user meets it: what is captured chosen per broadcast, one command to record, a line
/// after every command, and nothing silent (no screen, no audio) left unsaid.
@Suite(.serialized) struct BroadcastctlTests {
    @Test func aRegionAndFrameRateFromStartMakeTheFileAndAJoinWithOtherSettingsIsRefused() throws {
        let x = try XServer(width: 640, height: 480)
        defer { x.stop() }
        let daemon = try DaemonHarness(["--source", "x11", "--display", x.display, "--fps", "30", "--app-audio", "none", "--mic", "none"])
        defer { _ = try? daemon.stop() }
        let directory = daemon.runtime + "/work"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // One command, a relative file, the capture chosen by this broadcast (the daemon's own is the whole screen).
        let record = try daemon.tool("broadcastctl", ["record", "clip.mkv", "--region", "16,16,160x96", "--fps", "10", "--duration", "1"],
                                     directory: directory)
        #expect(record.status == 0, "\(record)")
        let path = directory + "/clip.mkv"
        #expect(record.stdout.contains("writing \(path)\n"), "\(record.stdout)")
        #expect(record.stdout.contains("saved \(path) (0:01."), "\(record.stdout)")
        let probe = try Recording(path: path, scratch: daemon.runtime).probe()
        let video = try #require(probe.streams.first { $0.codec_type == "video" })
        #expect(video.width == 160 && video.height == 96, "\(video)")
        // The screen does not change, so the file holds few frames: the handler's count tells the rate.
        let counted = try daemon.tool("broadcastctl", ["record", "--fps", "10", "--duration", "2", "--json"], directory: directory)
        let finished = try JSONDecoder().decode(FinishedEvent.self, from: Data(try #require(counted.stdout.split(separator: "\n").last).utf8))
        guard case .number(let frames)? = finished.result?["videoFrames"] else { throw HarnessError("no videoFrames: \(counted)") }
        #expect((17...23).contains(frames), "10 fps for 2 s: \(frames) frames")

        // Once the capture is back to the daemon's own, a broadcast with a region runs; one asking for
        // another region is refused naming the running capture; one asking only for a lower rate joins it.
        let summary = daemon.summaryPath("region")
        let first = try daemon.tool("broadcastctl", ["start", "--handler", "inspect", "--url", "file://" + summary, "--region", "0,0,320x180"])
        #expect(first.status == 0, "\(first)")
        let other = try daemon.tool("broadcastctl", ["start", "--handler", "inspect", "--url", "file://" + summary + "2", "--output", "screen"])
        #expect(other.status == 1, "\(other)")
        #expect(other.stderr.contains("share the capture running: x11 ") && other.stderr.contains("this one asks for --output screen"),
                "\(other.stderr)")
        let json = try daemon.tool("broadcastctl", ["start", "--handler", "inspect", "--url", "file://" + summary + "3", "--region", "0,0,320x180",
                                                    "--fps", "5", "--json"])
        #expect(json.status == 0, "\(json)")
        let status = try daemon.controller().status()
        let rates = (status.broadcasts ?? []).filter { $0.state == .live }.map { ($0.frameRate ?? 30).rounded() }
        #expect(rates.sorted() == [5, 30], "\(status)")
        #expect(try daemon.tool("broadcastctl", ["stop", "--all"]).status == 0)
    }

    @Test func oneWindowChosenByTheBroadcastWhileTheDaemonCapturesTheScreen() throws {
        let x = try XServer()
        defer { x.stop() }
        let painter = try x.painter()
        try painter.window("subject", 40, 40, 160, 120, (0, 0, 255))
        let daemon = try DaemonHarness(["--source", "x11", "--display", x.display, "--app-audio", "none", "--mic", "none"])
        defer { _ = try? daemon.stop() }
        let path = daemon.summaryPath("window")
        let one = try daemon.tool("broadcastctl", ["start", "--handler", "inspect", "--url", "file://" + path, "--window", "subject",
                                                   "--duration", "1", "--wait"])
        #expect(one.status == 0, "\(one)")
        let summary = try InspectSummary.load(path)
        #expect(summary.video?.width == 160 && summary.video?.height == 120, "\(String(describing: summary.video))")
        // Back to the daemon's own capture once it finished: the whole screen.
        let source = try daemon.controller().status().source
        #expect(source.hasPrefix("x11 :") && source.contains(" screen @ 30 fps"), "\(source)")
    }

    @Test func captureChangesTheRunningCaptureForEveryBroadcastAsAFormatChange() throws {
        let x = try XServer()
        defer { x.stop() }
        let daemon = try DaemonHarness(["--source", "x11", "--display", x.display, "--app-audio", "none", "--mic", "none"])
        defer { _ = try? daemon.stop() }
        let idle = try daemon.tool("broadcastctl", ["capture", "--region", "0,0,320x240"])
        #expect(idle.status == 1 && idle.stderr.contains("no capture runs"), "\(idle)")
        let controller = try daemon.subscribedController()
        let paths = [daemon.summaryPath("c1"), daemon.summaryPath("c2")]
        let ids = try paths.map { try daemon.start(handler: "inspect", url: "file://" + $0, on: controller) }
        try daemon.awaitState(controller, .live)
        usleep(300_000)
        let changed = try daemon.tool("broadcastctl", ["capture", "--region", "0,0,320x240"])
        #expect(changed.status == 0, "\(changed)")
        #expect(changed.stdout.contains("region 320x240+0+0") && changed.stdout.contains("for broadcasts \(ids[0]), \(ids[1])"),
                "\(changed.stdout)")
        let fixed = try daemon.tool("broadcastctl", ["start", "--handler", "inspect", "--url", "file://" + daemon.summaryPath("c3"),
                                                     "--fps", "60"])
        #expect(fixed.status == 1 && fixed.stderr.contains("region 320x240+0+0"), "the running capture is named as it is now: \(fixed)")
        let refused = try daemon.tool("broadcastctl", ["capture", "--region", "700,0,100x100"])
        #expect(refused.status == 1 && refused.stderr.contains("capture region 100x100+700+0 instead of region 320x240+0+0"), "\(refused)")
        usleep(300_000)
        #expect(try daemon.tool("broadcastctl", ["capture", "--fps", "10"]).status == 64, "not an option of capture")
        #expect(try daemon.tool("broadcastctl", ["stop", "--all"]).status == 0)
        for path in paths {
            let summary = try InspectSummary.load(path)
            #expect(summary.video?.width == 640 && summary.formatChanges.map(\.width) == [320], "\(summary.formatChanges)")
        }
        // Once every broadcast finished, broadcastd's own capture (the whole screen) applies again.
        let source = try daemon.controller().status().source
        #expect(source.contains(" screen @ "), "\(source)")
    }

    @Test func withoutAScreenStartSaysWhatToDoAndNeverBroadcastsATestPattern() throws {
        let x = try XServer(width: 320, height: 240)
        defer { x.stop() }
        let daemon = try DaemonHarness(["--source", "auto", "--app-audio", "none", "--mic", "none"],
                                       environment: ["DISPLAY": "", "WAYLAND_DISPLAY": ""])
        defer { _ = try? daemon.stop() }
        let status = try daemon.tool("broadcastctl", ["status"])
        #expect(status.stdout.contains("source: nothing to capture (neither DISPLAY nor WAYLAND_DISPLAY"), "\(status.stdout)")
        let refused = try daemon.tool("broadcastctl", ["start", "--handler", "inspect", "--url", "file://" + daemon.summaryPath("none"),
                                                       "--wait"])
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("systemctl --user import-environment DISPLAY XAUTHORITY"), "\(refused.stderr)")
        #expect(refused.stderr.contains("--source synthetic for a test pattern"), "\(refused.stderr)")
        // A display given with the broadcast is captured all the same.
        let path = daemon.summaryPath("display")
        let given = try daemon.tool("broadcastctl", ["start", "--handler", "inspect", "--url", "file://" + path, "--display", x.display,
                                                     "--duration", "1", "--wait"])
        #expect(given.status == 0, "\(given)")
        let summary = try InspectSummary.load(path)
        #expect(summary.video?.width == 320 && summary.video?.height == 240, "\(String(describing: summary.video))")
    }

    @Test func everyCommandSaysWhatItDidAndSilentAudioIsSaidWhereTheUserLooks() throws {
        let x = try XServer(width: 320, height: 240)
        defer { x.stop() }
        // Audio from PipeWire, and no PipeWire here: both streams are silent.
        let daemon = try DaemonHarness(["--source", "x11", "--display", x.display],
                                       environment: ["PIPEWIRE_RUNTIME_DIR": daemon_nowhere, "PIPEWIRE_REMOTE": "nowhere"])
        defer { _ = try? daemon.stop() }
        let start = try daemon.tool("broadcastctl", ["start", "--handler", "inspect", "--url", "file://" + daemon.summaryPath("said")])
        #expect(start.status == 0, "\(start)")
        #expect(start.stdout.contains("broadcast 1 started with handler inspect"), "\(start.stdout)")
        #expect(start.stderr.contains("warning: app audio is silent: ") && start.stderr.contains("warning: mic is silent: "), "\(start.stderr)")
        #expect(start.stderr.contains("Check that PipeWire runs"), "\(start.stderr)")
        let status = try daemon.tool("broadcastctl", ["status"])
        #expect(status.stdout.contains("\nmic: silent: ") && status.stdout.contains("Check that PipeWire runs"), "\(status.stdout)")
        usleep(1_100_000)
        let paused = try daemon.tool("broadcastctl", ["pause"])
        #expect(paused.status == 0 && paused.stdout.hasPrefix("broadcast 1 paused at 0:01."), "\(paused)")
        let again = try daemon.tool("broadcastctl", ["pause"])
        #expect(again.status == 0 && again.stdout.hasPrefix("broadcast 1 was already paused, at 0:01."), "\(again)")
        let resumed = try daemon.tool("broadcastctl", ["resume"])
        #expect(resumed.status == 0 && resumed.stdout.hasPrefix("broadcast 1 resumed at 0:01."), "\(resumed)")
        let stopped = try daemon.tool("broadcastctl", ["stop"])
        #expect(stopped.status == 0 && stopped.stderr.hasPrefix("stopping broadcast 1 at 0:01."), "\(stopped)")
        #expect(stopped.stdout.hasPrefix("broadcast 1 finished"), "\(stopped.stdout)")
    }
}
}

private let daemon_nowhere = "/nonexistent-pipewire"

extension Integration.BroadcastctlTests {
    /// `broadcastctl start` says the broadcast started, and returns, as soon as it is live: within 100 ms of the
    /// STATE_CHANGED that says so (it asked for the status again and waited up to half a second more for silent audio
    /// to show, so that a 2 s wait between `start` and `stop` recorded 2.6 s).
    @Test func startReturnsAsSoonAsTheBroadcastIsLive() throws {
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x240"])
        defer { _ = try? daemon.stop() }
        let controller = try daemon.subscribedController()
        for round in 0..<3 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Paths.binary("broadcastctl"))
            process.arguments = ["start", "--handler", "inspect", "--url", "file://" + daemon.summaryPath("quick\(round)"),
                                 "--socket", daemon.socketPath]
            process.standardOutput = FileHandle.nullDevice
            let exited = DispatchSemaphore(value: 0)
            process.terminationHandler = { _ in exited.signal() }
            try process.run()
            try daemon.waitFor(controller) { if case .stateChanged(let s) = $0, s.state == .live { true } else { nil } }
            let live = MonotonicClock.now()
            exited.wait()
            let returned = Double(MonotonicClock.now() - live) / 1e6
            #expect(process.terminationStatus == 0)
            #expect(returned <= 100, "round \(round): broadcastctl start returned \(returned) ms after the broadcast went live")
            #expect(try daemon.tool("broadcastctl", ["stop"]).status == 0)
            _ = try daemon.waitFor(controller) { if case .finished = $0 { true } else { nil } }
        }
    }

    /// A microphone that PipeWire does not have is silent from the first frame on, and the status as the broadcast
    /// goes live says so: `start` warns at once (broadcastd said so only 200 ms later, when silence stood in for it).
    @Test func aMissingMicrophoneIsSaidAsTheBroadcastGoesLive() throws {
        let pipewire = try PipeWireHarness()
        defer { pipewire.stop() }
        let x = try XServer(width: 320, height: 240)
        defer { x.stop() }
        let daemon = try DaemonHarness(["--source", "x11", "--display", x.display, "--mic", "no_such_microphone"],
                                       environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
        defer { _ = try? daemon.stop() }
        let controller = try daemon.subscribedController()
        let start = try daemon.tool("broadcastctl", ["start", "--handler", "inspect", "--url", "file://" + daemon.summaryPath("mic")])
        #expect(start.status == 0 && start.stderr.contains("warning: mic is silent: ") && !start.stderr.contains("app audio"),
                "\(start)")
        let live = try daemon.waitFor(controller) { if case .stateChanged(let s) = $0, s.state == .live { s } else { nil } }
        #expect(live.silentAudio?.keys.sorted() == ["audioMic"], "\(live)")
        #expect(try daemon.tool("broadcastctl", ["stop"]).status == 0)
    }
}
