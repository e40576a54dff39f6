import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

/// `broadcastctl snapshot`: the current frame as a PNG, judged by ffmpeg.
extension Integration {
    @Suite(.serialized) struct SnapshotTests {
        /// Decodes an image (or a raw frame, given ffmpeg input options) to packed RGB with ffmpeg.
        func rgb(_ input: [String], filter: String? = nil, in daemon: DaemonHarness) throws -> [UInt8] {
            let output = daemon.runtime + "/decoded-\(UUID().uuidString.prefix(6)).rgb"
            let result = try runTool(
                "/usr/bin/env",
                ["ffmpeg", "-v", "error", "-y"] + input + (filter.map { ["-vf", $0] } ?? [])
                    + ["-f", "rawvideo", "-pix_fmt", "rgb24", output])
            #expect(result.status == 0, "ffmpeg: \(result.stderr)")
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: output)))
        }

        @Test func anIdleDaemonGrabsAFrameAndTheColoursAreThoseFFmpegGets() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360"])
            // The reference: the daemon's own NV12 frame, converted by ffmpeg (BT.709, limited range).
            let (description, frame) = try daemon.controller().snapshot()
            #expect(
                description.video.format == "nv12" && description.colorRange == "limited"
                    && description.broadcast == nil)
            let raw = daemon.runtime + "/frame.nv12"
            try Data(bytes: frame.base, count: frame.size).write(to: URL(fileURLWithPath: raw))
            let reference = try rgb(
                ["-f", "rawvideo", "-pix_fmt", "nv12", "-s", "640x360", "-i", raw],
                filter: "scale=in_color_matrix=bt709:in_range=tv:out_range=pc:flags=neighbor+full_chroma_int",
                in: daemon)

            let path = daemon.runtime + "/idle.png"
            let saved = try daemon.tool("broadcastctl", ["snapshot", path])
            #expect(saved.status == 0, "\(saved)")
            #expect(
                saved.stdout
                    == "saved 640x360 frame to \(path) (\(try Data(contentsOf: URL(fileURLWithPath: path)).count) bytes)\n"
            )
            let probe = try runTool(
                "/usr/bin/env",
                [
                    "ffprobe", "-v", "error", "-show_entries", "stream=codec_name,width,height,pix_fmt", "-of",
                    "csv=p=0", path,
                ])
            #expect(probe.stdout == "png,640,360,rgb24\n", "\(probe)")
            let ours = try rgb(["-i", path], in: daemon)
            #expect(ours.count == 640 * 360 * 3 && reference.count == ours.count)
            // Same frame (the synthetic source draws frame 0 for both grabs); colours agree within rounding.
            let differences = zip(ours, reference).map { abs(Int($0) - Int($1)) }
            #expect(
                differences.max() ?? 99 <= 2, "largest difference from ffmpeg's conversion: \(differences.max() ?? -1)")
            #expect(daemon.children().isEmpty)
            try daemon.stop()
        }

        @Test func aLiveBroadcastGivesItsLatestFrameAndMistakesAreClear() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360"])
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "inspect", url: daemon.summaryPath("snapshot"), maxDuration: 5, on: controller)
            try daemon.awaitState(controller, .live)
            usleep(300_000)
            let path = daemon.runtime + "/live.png"
            let saved = try daemon.tool("broadcastctl", ["snapshot", "--json", path])
            #expect(saved.status == 0, "\(saved)")
            let json = try JSONSerialization.jsonObject(with: Data(saved.stdout.utf8)) as? [String: Any]
            #expect(
                json?["broadcast"] as? Int == Int(id) && json?["width"] as? Int == 640
                    && json?["file"] as? String == path)
            #expect(try rgb(["-i", path], in: daemon).count == 640 * 360 * 3)
            // Standard output, for a pipe.
            let pipedPath = daemon.runtime + "/piped.png"
            let piped = try runTool(
                "/bin/sh",
                [
                    "-c", "\"$0\" snapshot --socket \"$1\" - > \"$2\"", Paths.binary("broadcastctl"), daemon.socketPath,
                    pipedPath,
                ])
            #expect(piped.status == 0, "\(piped)")
            #expect(try rgb(["-i", pipedPath], in: daemon).count == 640 * 360 * 3, "not a PNG on stdout")

            let nowhere = try daemon.tool("broadcastctl", ["snapshot", daemon.runtime + "/missing/folder/x.png"])
            #expect(
                nowhere.status == 1 && nowhere.stderr.contains("missing/folder/x.png")
                    && nowhere.stderr.contains("No such file or directory"), "\(nowhere)")
            // The broadcast went on undisturbed.
            #expect(try controller.status().state == .live)
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, id) == nil)
            try daemon.stop()
        }
    }
}
