import BroadcastClient
import BroadcastCore
import Foundation
import Testing

/// `--app PID`: one application's window and its sound, from a real PipeWire graph and a private Xvfb.
extension Integration {
    @Suite(.serialized) struct AppCaptureTests {
        /// The player (pw-play, 660 Hz) has a window (its _NET_WM_PID, as the painter draws it for it); another window
        /// and the harness's 440 Hz tone into the same sink are not the application's and must not be recorded.
        @Test func anAppByPIDRecordsItsWindowAndOnlyTheSoundThatProcessPlays() throws {
            let pipewire = try PipeWireHarness()
            defer { pipewire.stop() }
            let player = try pipewire.play(frequency: 660, into: "test_sink", application: "tone-660")
            let x = try XServer()
            let painter = try x.painter()
            try painter.fill(128, 128, 128, 0, 0, 640, 480)
            try painter.window("other", 20, 20, 100, 80, (255, 0, 0))
            let id = try painter.send("window player 200 100 120 90 0 255 0 \(player.processIdentifier)")
            let daemon = try DaemonHarness(
                [
                    "--source", "x11", "--display", x.display, "--fps", "30", "--cursor", "hidden",
                    "--app", "\(player.processIdentifier)", "--mic", "none",
                ],
                environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
            let path = daemon.runtime + "/app.mkv"
            var source = ""
            let (error, _) = try daemon.record(to: path, seconds: 2.5) { controller in
                source = try controller.status().source
            }
            #expect(error == nil, "\(error?.message ?? "")")
            #expect(
                source.contains("window \(id) (Player, \"player window\")")
                    && source.contains("app audio pid:\(player.processIdentifier)"), "\(source)")
            let file = Recording(path: path, scratch: daemon.runtime)
            let audio = try file.audio(track: 0)
            #expect(audio.count > 48_000 * 2, "\(audio.count) samples")
            let last = audio.suffix(48_000)
            let (own, sink) = (amplitude(660, in: last), amplitude(440, in: last))
            #expect(own > 0.08 && sink < 0.01, "660 Hz (the player's) at \(own), 440 Hz (another program's) at \(sink)")
            let frames = try file.lumaFrames(width: 120, height: 90)
            // The player's window is green: BT.709 limited-range luma 173; the other window's red would be 63.
            let green = frames.count(where: { frame in frame.allSatisfy { abs(Int($0) - 173) <= 4 } })
            #expect(
                !frames.isEmpty && green == frames.count,
                "\(green) of \(frames.count) frames are the player's window alone")
            try daemon.stop()
        }
    }
}
