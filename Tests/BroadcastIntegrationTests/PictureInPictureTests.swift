import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

extension Integration {
    /// The record handler puts the camera (the tests' video source on a private PipeWire, of role Camera) in a corner
    /// of the picture, judged by decoding the file with ffmpeg.
    @Suite(.serialized) struct PictureInPictureTests {
        static let width = 640, height = 360

        /// An orange camera (BGRx ff8000: Y 141, Cb 59, Cr 189 in BT.709's limited range) at cameraPosition=top-left,
        /// cameraSize=30 over the synthetic screen's colour bars (none orange): 192x144 (its 4:3 at 30 % of 640),
        /// 12 pixels in (2 % of 640, made even), the bars elsewhere. Killed after 1.5 s: the recording goes on and
        /// finishes cleanly, the corner keeps the last picture for 2 s, then the screen shows through. Beside it, on
        /// the same capture, a recording with the camera as a track of its own and a stream with the camera in its
        /// default corner.
        @Test func theCameraIsInTheChosenCornerAtTheChosenSizeUntilItGoesAway() throws {
            let pipewire = try PipeWireHarness(tones: false)
            let camera = try pipewire.testVideoSource(
                "testcam", ["--size", "320x240", "--fps", "15", "--role", "Camera", "--color", "ff8000", "--band", "0"])
            let daemon = try DaemonHarness(
                ["--source", "synthetic", "--size", "\(Self.width)x\(Self.height)"],
                environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/pip.mp4"
            // broadcastctl's --camera turns the record handler's camera on.
            let controller = try daemon.subscribedController()
            let started = try daemon.tool(
                "broadcastctl",
                [
                    "start", "--handler", "record", "--url", path, "--camera", "testcam",
                    "--set", "cameraPosition=top-left", "--set", "cameraSize=30", "--set", "audio=none",
                ])
            #expect(started.status == 0, "\(started.stderr)\n\(daemon.log)")
            let live = Date()
            let id = try #require(try daemon.controller().status().broadcasts?.first?.broadcast)
            // Beside it, sharing the capture, the camera as a track of its own in Matroska.
            let trackPath = daemon.runtime + "/track.mkv"
            let track = try daemon.start(
                handler: "record", url: trackPath, setupInfo: ["camera": "track", "audio": "none"], on: controller)
            // And the stream handler's corner (bottom-right, 25 %: 160x120 at (468, 228)), as HLS in a folder.
            let playlist = daemon.runtime + "/hls/index.m3u8"
            try FileManager.default.createDirectory(atPath: daemon.runtime + "/hls", withIntermediateDirectories: true)
            let stream = try daemon.start(
                handler: "stream", url: "hls://" + playlist, setupInfo: ["camera": "on", "audio": "none"],
                on: controller)
            usleep(1_500_000)
            pipewire.kill(camera)
            let killed = Date().timeIntervalSince(live)
            usleep(2_800_000)
            var cameraFrames: [Double] = []
            for broadcast in [id, track, stream] {
                // One that ended by itself is a failure; its log says why (once, in a full run, one had).
                do { try controller.finish(broadcast: broadcast) } catch {
                    throw HarnessError("finishing broadcast \(broadcast): \(error)\n\(daemon.log)")
                }
                let finished = try daemon.waitFor(controller, timeout: 30) {
                    if case .finished(let f) = $0, f.broadcast == broadcast { f } else { nil }
                }
                #expect(finished.error == nil, "\(daemon.log)")
                cameraFrames.append(number(finished.result?["cameraFrames"]))
            }
            let trackFrames = try Self.checkTrack(Recording(path: trackPath, scratch: daemon.runtime))
            let streamed = try Self.decode(Recording(path: playlist, scratch: daemon.runtime))
            let streamedBounds = streamed.count > 30 ? Self.orangeBounds(streamed[30]) : nil
            let corner = try #require(streamedBounds, "no orange in the stream's frame 30 of \(streamed.count)")
            #expect(
                abs(corner.x - 468) <= 2 && abs(corner.y - 228) <= 2 && abs(corner.width - 160) <= 4
                    && abs(corner.height - 120) <= 4, "the stream's camera at \(corner), not (468, 228) 160x120")
            // Each recording counts the camera's frames it got; the track has them all.
            #expect(
                cameraFrames[0] >= 5 && cameraFrames[1] == Double(trackFrames),
                "\(cameraFrames), \(trackFrames) in the track")

            let recording = Recording(path: path, scratch: daemon.runtime)
            let times = try recording.frameTimes()
            let frames = try Self.decode(recording)
            #expect(frames.count == times.count && frames.count >= 60, "\(frames.count) frames, \(times.count) times")
            // A second in (the camera's first frame comes within a few hundred ms of the start): the corner.
            let during = try #require(zip(times, frames).first { $0.0 >= 1.0 }?.1)
            let bounds = Self.orangeBounds(during)
            let box = try #require(bounds, "no orange in the frame at 1 s")
            #expect(
                abs(box.x - 12) <= 2 && abs(box.y - 12) <= 2 && abs(box.width - 192) <= 4 && abs(box.height - 144) <= 4,
                "the camera at \(box), not (12, 12) 192x144")
            #expect(Self.orangeShare(during, inside: true) > 0.95 && Self.orangeShare(during, inside: false) < 0.01)
            // The screen around it: the lower half is the bars.
            #expect(Self.barShare(during) > 0.9, "the screen outside the corner")
            // 2 s after the camera's last frame, the corner is gone: the bars there too.
            let end = try #require(times.last)
            #expect(end > killed + 2.3, "the last frame at \(end) s, the camera killed at \(killed) s")
            #expect(Self.orangeBounds(frames[times.count - 1]) == nil, "the camera still in the last frame at \(end) s")
        }

        /// camera=track: the screen's stream (the bars, no orange), and the camera's own, 320x240, orange, named
        /// "camera", its frames over the second and a half the camera lived.
        @discardableResult static func checkTrack(_ recording: Recording) throws -> Int {
            let streams = try recording.probe().streams.filter { $0.codec_type == "video" }
            #expect(streams.count == 2, "\(streams)")
            #expect(streams.last?.width == 320 && streams.last?.height == 240, "\(streams)")
            #expect(streams.last?.tags?["title"] == "camera", "\(String(describing: streams.last?.tags))")
            let screen = try decode(recording, stream: 0, width: width, height: height)
            #expect(screen.count >= 60, "\(screen.count) frames")
            #expect(stride(from: 0, to: screen.count, by: 10).allSatisfy { orangeShare(of: screen[$0]) == 0 })
            let camera = try decode(recording, stream: 1, width: 320, height: 240)
            #expect(camera.count >= 5, "\(camera.count) camera frames")
            let orange = camera.map { orangeShare(of: $0, width: 320, height: 240) }
            #expect(orange.allSatisfy { $0 == 1 }, "the share of orange in each camera frame: \(orange)")
            return camera.count
        }

        /// A decoded frame: its three planes, yuv420p.
        struct Frame {
            var y: [UInt8], u: [UInt8], v: [UInt8]
            func pixel(_ x: Int, _ row: Int, width: Int = PictureInPictureTests.width) -> (Int, Int, Int) {
                let c = row / 2 * (width / 2) + x / 2
                return (Int(y[row * width + x]), Int(u[c]), Int(v[c]))
            }
        }

        /// The frames of video stream `stream`, of `width`x`height`.
        static func decode(_ recording: Recording, stream: Int = 0, width: Int = width, height: Int = height) throws
            -> [Frame]
        {
            let raw = recording.scratch + "/decoded.yuv"
            let result = try runTool(
                "/usr/bin/ffmpeg",
                [
                    "-v", "error", "-y", "-i", recording.path, "-map", "0:v:\(stream)", "-fps_mode", "passthrough",
                    "-f", "rawvideo", "-pix_fmt", "yuv420p", raw,
                ], timeout: 120)
            guard result.status == 0 else { throw HarnessError("ffmpeg: \(result.stderr)") }
            let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw)))
            let luma = width * height
            let size = luma * 3 / 2
            return stride(from: 0, to: data.count - size + 1, by: size).map {
                Frame(
                    y: Array(data[$0..<($0 + luma)]), u: Array(data[($0 + luma)..<($0 + luma * 5 / 4)]),
                    v: Array(data[($0 + luma * 5 / 4)..<($0 + size)]))
            }
        }

        static func isOrange(_ p: (Int, Int, Int)) -> Bool {
            abs(p.0 - 141) <= 12 && abs(p.1 - 59) <= 12 && abs(p.2 - 189) <= 12
        }

        /// The share of orange in a `width`x`height` frame, every fourth pixel of every fourth row.
        static func orangeShare(of frame: Frame, width: Int = width, height: Int = height) -> Double {
            let pixels = stride(from: 0, to: height, by: 4).flatMap { row in
                stride(from: 0, to: width, by: 4).map { frame.pixel($0, row, width: width) }
            }
            return Double(pixels.filter(isOrange).count) / Double(pixels.count)
        }

        /// The smallest rectangle that holds the orange pixels; nil: none.
        static func orangeBounds(_ frame: Frame) -> (x: Int, y: Int, width: Int, height: Int)? {
            var (x0, y0, x1, y1) = (width, height, -1, -1)
            for row in 0..<height {
                for x in 0..<width where isOrange(frame.pixel(x, row)) {
                    (x0, y0, x1, y1) = (min(x0, x), min(y0, row), max(x1, x), max(y1, row))
                }
            }
            return x1 < 0 ? nil : (x0, y0, x1 - x0 + 1, y1 - y0 + 1)
        }

        /// The share of orange pixels inside the corner (4 pixels in from its edges, past the encoder's blur), or out
        /// of it (4 pixels away).
        static func orangeShare(_ frame: Frame, inside: Bool) -> Double {
            var (orange, all) = (0, 0)
            for row in 0..<height {
                for x in 0..<width {
                    let within = x >= 16 && x < 200 && row >= 16 && row < 152
                    let near = x >= 8 && x < 208 && row >= 8 && row < 160
                    guard inside ? within : !near else { continue }
                    all += 1
                    if isOrange(frame.pixel(x, row)) { orange += 1 }
                }
            }
            return Double(orange) / Double(max(1, all))
        }

        /// The share of the lower half's pixels whose luma is one of the synthetic screen's eight bars'.
        static func barShare(_ frame: Frame) -> Double {
            let bars = [235, 219, 188, 173, 78, 63, 32, 16]
            let lower = frame.y[(width * height / 2)...]
            return Double(lower.filter { value in bars.contains { abs($0 - Int(value)) <= 6 } }.count)
                / Double(lower.count)
        }
    }
}
