import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

extension Integration {
    /// Revision 2.9 (#35): handlers asking for the same encoding share one encoder, run by broadcastd in a process
    /// of its own; each handler's file is whole, on its own time line.
    @Suite(.serialized) struct SharedEncoderTests {
        static let width = 640, height = 360

        /// Waiting for a broadcast to be live, and finishing one (its FINISHED event).
        static func steps(_ daemon: DaemonHarness, _ controller: ControllerClient)
            -> (live: (UInt32) throws -> Void, finish: (UInt32) throws -> FinishedEvent)
        {
            let live = { (id: UInt32) throws -> Void in
                _ = try daemon.waitFor(controller) {
                    if case .stateChanged(let s) = $0, s.broadcast == id, s.state == .live { true } else { nil }
                }
            }
            let finish = { (id: UInt32) throws -> FinishedEvent in
                try controller.finish(broadcast: id)
                return try daemon.waitFor(controller, timeout: 30) {
                    if case .finished(let f) = $0, f.broadcast == id { f } else { nil }
                }
            }
            return (live, finish)
        }

        /// Two recordings with `encode=shared`, the second joining 1.5 s after the first: one encoder process for
        /// both (three children: two record handlers and it), gone when both finished. Each file starts with a
        /// keyframe at 0, has every frame at 30 fps, decodes to the synthetic pattern and has both tones; the first
        /// lasts about 4.5 s, the second 2 s; neither lost a packet.
        @Test func twoRecordingsShareOneEncoderAndEachFileIsWhole() throws {
            let daemon = try DaemonHarness([
                "--source", "synthetic", "--size", "\(Self.width)x\(Self.height)", "--fps", "30",
            ])
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let (live, finish) = Self.steps(daemon, controller)
            let (firstPath, secondPath) = (daemon.runtime + "/first.mkv", daemon.runtime + "/second.mp4")
            let first = try daemon.start(
                handler: "record", url: firstPath, setupInfo: ["encode": "shared"], on: controller)
            try live(first)
            usleep(1_500_000)
            let second = try daemon.start(
                handler: "record", url: secondPath, setupInfo: ["encode": "shared"], on: controller)
            try live(second)
            usleep(2_000_000)
            #expect(daemon.children().count == 3, "two record handlers and one encoder: \(daemon.children())")
            let secondEnd = try finish(second)
            usleep(1_000_000)
            let firstEnd = try finish(first)
            daemon.expectNoChildren()

            for (end, path, duration) in [(firstEnd, firstPath, 4.5), (secondEnd, secondPath, 2.0)] {
                #expect(end.error == nil, "\(end.error?.message ?? "")\n\(daemon.log)")
                let result = end.result ?? [:]
                #expect(
                    result["sharedEncoder"] != nil && result["sharedEncoder"] == firstEnd.result?["sharedEncoder"],
                    "\(result)\n\(daemon.log)")
                #expect(number(result["lostPackets"]) == 0)
                #expect(abs(number(result["duration"]) - duration) < 0.4, "\(path): \(result)")
                let file = Recording(path: path, scratch: daemon.runtime)
                let probe = try file.probe()
                #expect(probe.streams.map(\.codec_name) == ["h264", "opus", "opus"])
                let (keyframes, _) = try file.keyframeTimes()
                #expect(keyframes.first == 0, "\(path) starts with a keyframe: \(keyframes)")
                let times = try file.frameTimes()
                #expect(
                    zip(times.dropFirst(), times.dropFirst(2)).allSatisfy { abs($1 - $0 - 1.0 / 30) < 0.002 },
                    "\(path): every frame at 30 fps")
                let frames = try file.lumaFrames(width: Self.width, height: Self.height)
                let decoded = frames[30]
                let best =
                    try (0...200).map { psnr(decoded, try syntheticLuma($0, width: Self.width, height: Self.height)) }
                    .max() ?? 0
                #expect(best >= 35, "\(path): frame 30 is the synthetic pattern at \(best) dB")
                for (track, frequency) in [(0, 440.0), (1, 880.0)] {
                    let audio = try file.audio(track: track)
                    #expect(abs(dominantFrequency(audio[4800..<52800]) - frequency) < 2, "\(path) track \(track)")
                }
            }
        }

        /// A recording and a stream over SRT with their defaults share one encoder: three children (the two handlers
        /// and it). What srt-live-transmit received, joined mid-way at a keyframe (the parameter sets come in-band,
        /// before each keyframe), decodes with no errors at the capture's size, with its one audio track, which the
        /// stream mixed from the encoder's two: both tones in it; the recording has the same encoder's video and its
        /// two Opus tracks.
        @Test func aRecordingAndAStreamOverSRTShareOneEncoder() throws {
            let daemon = try DaemonHarness([
                "--source", "synthetic", "--size", "\(Self.width)x\(Self.height)", "--fps", "30",
            ])
            defer { _ = try? daemon.stop() }
            let port = try StreamTests.freePort(udp: true)
            let received = daemon.runtime + "/received.ts"
            let streams = StreamTests()
            let server = try streams.srtListener(port: port, output: received, log: daemon.runtime + "/srt.log")
            defer { server.stop() }
            try streams.waitForListening(server, port: port, tcp: false)
            let controller = try daemon.subscribedController()
            let (live, finish) = Self.steps(daemon, controller)
            let path = daemon.runtime + "/recording.mkv"
            let record = try daemon.start(
                handler: "record", url: path, on: controller)
            try live(record)
            let stream = try daemon.start(
                handler: "stream", url: "srt://127.0.0.1:\(port)", on: controller)
            try live(stream)
            usleep(4_000_000)
            #expect(daemon.children().count == 3, "a record and a stream handler, one encoder: \(daemon.children())")
            let streamEnd = try finish(stream)
            let recordEnd = try finish(record)
            daemon.expectNoChildren()
            server.stop()

            for end in [streamEnd, recordEnd] {
                #expect(end.error == nil, "\(end.error?.message ?? "")\n\(daemon.log)")
                let result = end.result ?? [:]
                #expect(result["sharedEncoder"] != nil && result["sharedEncoder"] == recordEnd.result?["sharedEncoder"])
                #expect(number(result["lostPackets"]) == 0, "\(result)")
            }
            #expect(
                try Recording(path: path, scratch: daemon.runtime).probe().streams.map(\.codec_name) == [
                    "h264", "opus", "opus",
                ])

            // Joined at the encoder's first keyframe by time (the join's own came at once): from its TS packet, less
            // the PAT and PMT the muxer writes before it.
            let packets = try runTool(
                "/usr/bin/ffprobe",
                [
                    "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time,pos,flags", "-of",
                    "csv=p=0", received,
                ])
            let lines = packets.stdout.split(separator: "\n").map { $0.split(separator: ",") }.filter { $0.count == 3 }
            let start = try #require(lines.first.flatMap { Double($0[0]) }, "\(packets.stderr)")
            let keyframe = lines.first { $0[2].hasPrefix("K") && (Double($0[0]) ?? 0) - start >= 1 }
            let position = try #require(keyframe.flatMap { Int($0[1]) }, "no keyframe 1 s in: \(packets.stdout)")
            let all = try Data(contentsOf: URL(fileURLWithPath: received))
            let joined = daemon.runtime + "/joined.ts"
            try all.subdata(in: max(0, position - 4 * 188)..<all.count).write(to: URL(fileURLWithPath: joined))
            let decoded = try runTool(
                "/usr/bin/ffprobe",
                [
                    "-v", "error", "-count_frames", "-show_entries", "stream=codec_name,width,height,nb_read_frames",
                    "-of", "csv=p=0", joined,
                ])
            #expect(decoded.stderr.isEmpty, "decoding the stream joined mid-way: \(decoded.stderr)")
            let found = Set(decoded.stdout.split(separator: "\n").map(String.init))
            let video = found.first { $0.hasPrefix("h264,") }?.split(separator: ",")
            #expect(video?.count == 4 && video?[1] == "\(Self.width)" && video?[2] == "\(Self.height)", "\(found)")
            #expect(Int(video?.last ?? "") ?? 0 >= 30, "frames decoded after the join: \(found)")
            #expect(found.contains { $0.hasPrefix("opus") }, "audio: \(found)")
            let errors = try runTool("/usr/bin/ffmpeg", ["-v", "error", "-i", joined, "-f", "null", "-"])
            #expect(errors.status == 0 && errors.stderr.isEmpty, "\(errors.stderr)")
            let audio = try Recording(path: joined, scratch: daemon.runtime).audio(track: 0)
            #expect(audio.count > 48000, "\(audio.count) samples of sound")
            let steady = audio.dropFirst(4800).prefix(48000)
            for frequency in [440.0, 880.0] {
                #expect(amplitude(frequency, in: steady) > 0.05, "\(frequency) Hz: \(amplitude(frequency, in: steady))")
            }
        }
    }
}
