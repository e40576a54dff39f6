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
            func live(_ id: UInt32) throws {
                try daemon.waitFor(controller) {
                    if case .stateChanged(let s) = $0, s.broadcast == id, s.state == .live { true } else { nil }
                }
            }
            func finish(_ id: UInt32) throws -> FinishedEvent {
                try controller.finish(broadcast: id)
                return try daemon.waitFor(controller, timeout: 30) {
                    if case .finished(let f) = $0, f.broadcast == id { f } else { nil }
                }
            }
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
    }
}
