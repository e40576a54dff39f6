import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

extension Integration {
    /// The encoding handlers on a quiet desktop (`QuietDesktop`: a clock ticking once a second, a terminal), where most
    /// frames repeat the one before, beside the moving pattern the other suites record.
    @Suite(.serialized) struct QuietDesktopTests {
        static let width = 640, height = 480
        /// The keyframe interval (the default, 2 s) and one frame at 30 fps, with a millisecond for timestamp rounding.
        static let longestGOP = 2 + 1.0 / 30 + 0.001

        /// One session of 21 s live with a pause, recorded, kept by a replay buffer (`length=5`) and streamed to HLS and
        /// SRT at once (one encode): every output has a keyframe at least every 2 s and a frame (one keyframe in the whole
        /// recording, and a save of the last 3 s held 16.8, when keyframes were counted in encoded frames, which a still
        /// screen does not make); HLS segments last 2 s. After 12 s `capture --region` narrows the capture to a square
        /// with a red square in it: in the recording, the replay's save, the SRT stream and HLS it stays square (the
        /// square area was stretched to the 4:3 canvas), scaled to fit with black bars.
        @Test func keyframesComeOnTimeAndANewAreaKeepsItsShapeInEveryOutput() throws {
            let x = try XServer(.xvfb, width: Self.width, height: Self.height)
            defer { x.stop() }
            let desktop = try QuietDesktop(on: x)
            defer { desktop.stop() }
            let painter = try x.painter()
            try painter.fill(255, 0, 0, 40, 40, 64, 64)
            let daemon = try DaemonHarness([
                "--source", "x11", "--display", x.display, "--fps", "30", "--cursor", "hidden",
                "--app-audio", "none", "--mic", "none",
            ])
            defer { _ = try? daemon.stop() }
            let streamTests = StreamTests()
            let port = try StreamTests.freePort(udp: true)
            let received = daemon.runtime + "/received.ts"
            let srt = try streamTests.srtListener(port: port, output: received, log: daemon.runtime + "/srt.log")
            defer { srt.stop() }
            try streamTests.waitForListening(srt, port: port, tcp: false)
            let hls = daemon.runtime + "/hls"
            let recording = daemon.runtime + "/quiet.mp4"
            let clip = daemon.runtime + "/clip.mkv"

            let controller = try daemon.subscribedController()
            let record = try daemon.start(handler: "record", url: "file://" + recording, on: controller)
            let replay = try daemon.start(handler: "replay", url: nil, setupInfo: ["length": "5"], on: controller)
            let stream = try daemon.start(
                handler: "stream", url: "hls://\(hls)/index.m3u8",
                setupInfo: ["also": "srt://127.0.0.1:\(port)", "playlistLength": "20"],
                on: controller)
            let ids = [record, replay, stream]
            _ = try ReplayTests.waitLive(controller, replay, 5)
            for id in ids { try controller.pause(broadcast: id) }
            usleep(1_500_000)
            for id in ids { try controller.resume(broadcast: id) }
            _ = try ReplayTests.waitLive(controller, replay, 12)
            let narrowed = try daemon.tool("broadcastctl", ["capture", "--region", "0,0,240x240"])
            #expect(narrowed.status == 0, "\(narrowed)")
            _ = try ReplayTests.waitLive(controller, replay, 20.5)
            let saved = try ReplayTests.save(daemon, ["--broadcast", String(replay), "--last", "3", clip])
            #expect(try daemon.tool("broadcastctl", ["stop", "--all"]).status == 0)
            var results: [UInt32: [String: JSONValue]] = [:]
            while results.count < ids.count {
                let finished = try daemon.waitFor(controller, timeout: 30) {
                    if case .finished(let f) = $0, ids.contains(f.broadcast) { f } else { nil }
                }
                #expect(finished.error == nil, "broadcast \(finished.broadcast): \(finished.error?.message ?? "")")
                results[finished.broadcast] = finished.result ?? [:]
            }
            srt.stop()

            // Quiet: most frames were repeats, not encoded.
            let frames = number(results[record]?["videoFrames"])
            let encoded = number(results[record]?["encodedFrames"])
            #expect(frames >= 550 && encoded < frames / 3, "\(encoded) of \(frames) frames encoded")
            // Keyframes on time everywhere, HLS segments of 2 s.
            for path in [recording, received] {
                let file = Recording(path: path, scratch: daemon.runtime)
                let keyframes = try file.keyframeTimes().keyframes
                #expect(try file.longestKeyframeGap() <= Self.longestGOP, "\(path): keyframes at \(keyframes)")
            }
            let duration = number(saved["duration"])
            #expect(duration >= 3 && duration <= 5.1, "save --last 3 of a length=5 buffer: \(saved)")
            #expect(
                try Recording(path: clip, scratch: daemon.runtime).keyframeTimes().keyframes.first == 0,
                "the save starts on a keyframe")
            let segments = StreamHLSTests.segmentDurations(
                try String(contentsOfFile: hls + "/index.m3u8", encoding: .utf8))
            #expect(segments.count >= 9 && segments.allSatisfy { $0 <= Self.longestGOP }, "segments of \(segments) s")

            // The square area fitted into 640x480: 480x480 in the middle, the 64x64 red square 128x128 in it.
            for path in [recording, clip, received, hls + "/index.m3u8"] {
                let square = try Self.redSquare(path, scratch: daemon.runtime)
                let ratio = Double(square.width) / Double(max(1, square.height))
                #expect(
                    abs(ratio - 1) <= 0.1 && abs(square.height - 128) <= 13,
                    "\(path): the red square is \(square.width)x\(square.height)")
            }
            try daemon.stop()
        }

        /// Where the red square is in the last frame ffmpeg decodes from `input` (one frame a second): its width and
        /// height.
        static func redSquare(_ input: String, scratch: String) throws -> (width: Int, height: Int) {
            let output = scratch + "/frames-\(UUID().uuidString.prefix(6)).rgb"
            defer { try? FileManager.default.removeItem(atPath: output) }
            let result = try runTool(
                "/usr/bin/ffmpeg",
                [
                    "-v", "error", "-y", "-i", input, "-vf", "fps=1", "-f", "rawvideo",
                    "-pix_fmt", "rgb24", output,
                ], timeout: 120)
            guard result.status == 0 else { throw HarnessError("ffmpeg could not decode \(input): \(result.stderr)") }
            let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: output)))
            let size = width * height * 3
            guard data.count >= size else { throw HarnessError("\(input): no \(width)x\(height) frame decoded") }
            let last = (data.count / size - 1) * size
            var xs: [Int] = []
            var ys: [Int] = []
            for y in 0..<height {
                for x in 0..<width {
                    let pixel = last + (y * width + x) * 3
                    if data[pixel] > 160 && data[pixel + 1] < 90 && data[pixel + 2] < 90 {
                        xs.append(x)
                        ys.append(y)
                    }
                }
            }
            guard let left = xs.min(), let right = xs.max(), let top = ys.min(), let bottom = ys.max() else {
                return (0, 0)
            }
            return (right - left + 1, bottom - top + 1)
        }
    }
}
