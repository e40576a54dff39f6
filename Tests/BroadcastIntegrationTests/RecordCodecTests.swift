import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

extension Integration {
    /// `codec=hevc` and `codec=av1`: ffprobe names the codec and the tag players look for, and ffmpeg decodes
    /// the synthetic pattern of the right frame (H.264 is RecordTests' first test).
    @Suite(.serialized) struct RecordCodecTests {
        static let width = 640, height = 360

        struct Case: CustomTestStringConvertible, Sendable {
            var codec: String
            var file: String
            var codecName: String
            /// The sample entry / codec ID ffprobe reports.
            var tag: String
            var encoder: String
            var testDescription: String { "\(codec) in \(file)" }
        }

        static let cases = [
            Case(codec: "hevc", file: "take.mp4", codecName: "hevc", tag: "hvc1", encoder: "libx265"),
            Case(codec: "hevc", file: "take.mkv", codecName: "hevc", tag: "[0][0][0][0]", encoder: "libx265"),
            Case(codec: "av1", file: "take.mp4", codecName: "av1", tag: "av01", encoder: "libsvtav1"),
            Case(codec: "av1", file: "take.mkv", codecName: "av1", tag: "[0][0][0][0]", encoder: "libsvtav1"),
        ]

        @Test(arguments: cases) func recordsTheCodecWithTagsPlayersTakeAndDecodesToThePattern(_ c: Case) throws {
            let daemon = try DaemonHarness([
                "--source", "synthetic", "--size", "\(Self.width)x\(Self.height)", "--fps", "30",
            ])
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/" + c.file
            // The encoder's threads stay below broadcastd's capture: as root, SVT-AV1 made each SCHED_FIFO 99.
            var policies: [String: Int] = [:]
            let (error, result) = try daemon.record(to: path, setup: ["codec": c.codec], seconds: 2) { _ in
                usleep(1_500_000)
                policies = daemon.childThreadPolicies()
            }
            #expect(policies.count > 2 && policies.values.allSatisfy { $0 == 0 }, "\(policies)")
            #expect(error == nil, "\(error?.message ?? "")")
            #expect(
                result["videoCodec"] == .string(c.codec) && result["videoEncoder"] == .string(c.encoder), "\(result)")
            let file = Recording(path: path, scratch: daemon.runtime)
            let probe = try file.probe()
            #expect(probe.streams.map(\.codec_name) == [c.codecName, "opus", "opus"])
            #expect(probe.streams[0].codec_tag_string == c.tag)
            #expect(probe.streams[0].width == Self.width && probe.streams[0].height == Self.height)
            #expect(probe.streams[0].color_range == "tv")

            let times = try file.frameTimes()
            #expect(
                Double(times.count) == number(result["videoFrames"]), "every captured frame is in the file: \(result)")
            #expect(
                zip(times.dropFirst(), times.dropFirst(2)).allSatisfy { abs($1 - $0 - 1.0 / 30) < 0.001 },
                "30 fps, no frame missing")
            let keyframes = try file.keyframeTimes().keyframes
            #expect(try file.longestKeyframeGap() <= 2 + 1.0 / 30 + 0.001, "keyframes at \(keyframes)")

            let frames = try file.lumaFrames(width: Self.width, height: Self.height)
            func pattern(_ index: Int) throws -> [UInt8] {
                try syntheticLuma(index, width: Self.width, height: Self.height)
            }
            let first = try firstPattern(of: frames, width: Self.width, height: Self.height)
            for index in [15, 45, 75] {
                let scores = try (index - 5...index + 5).map {
                    (index: $0, psnr: psnr(frames[index], try pattern(first + $0)))
                }
                let best = scores.max { $0.psnr < $1.psnr }!
                #expect(
                    best.index == index && best.psnr >= 35,
                    "frame \(index) decodes as pattern \(first) + \(best.index) at \(best.psnr) dB")
            }
        }
    }
}
