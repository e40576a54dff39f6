import BroadcastCore
import BroadcastEncoding
import Foundation
import Testing

/// Issue 31, item 5: silence costs little. An Opus track repeats the settled encoder's packet for frames of digital
/// silence instead of encoding them, and what it writes is byte for byte what encoding every frame writes.
@Suite struct OpusSilenceTests {
    private final class PacketLog: PacketSink {
        var packets: [String] = []
        func write(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
            packets.append(
                "\(packet.pts) \(packet.dts) \(packet.duration) \(packet.isKeyframe) \(packet.isDisposable) "
                    + "\(packet.skipSamples) " + packet.data.map { String($0, radix: 16) }.joined())
        }
    }

    enum Sound { case tone, noise, silence }

    /// Sound and digital silence by turns (seconds each), as a capture delivers them: chunks of 1,024 frames of
    /// stereo f32 at 48 kHz; the packets written, and how many silent frames were repeated.
    private func encode(_ parts: [(sound: Sound, seconds: Double)], repeats: Bool, mixed: Bool = false) throws -> (
        packets: [String], repeated: Int
    ) {
        let log = PacketLog()
        let streams: [SampleType] = mixed ? [.audioApp, .audioMic] : [.audioApp]
        let track = try AudioTrack(
            name: "app", streams: streams, gains: [:], settings: AudioEncoderSettings(channels: 2, bitRate: 128),
            globalHeader: true, signalsPriming: true, repeatsSilence: repeats, addStream: { _ in 0 })
        let chunk = 1024
        var frame = 0
        var noise = Noise()
        for part in parts {
            let total = Int(part.seconds * 48_000)
            var done = 0
            while done < total {
                let count = min(chunk, total - done)
                var samples = [Float](repeating: 0, count: count * 2)
                for i in 0..<count where part.sound != .silence {
                    let tone = Float(0.3 * sin(2 * Double.pi * 440 * Double(frame + i) / 48_000))
                    samples[2 * i] = part.sound == .tone ? tone : noise.next()
                    samples[2 * i + 1] = part.sound == .tone ? tone : noise.next()
                }
                let time = Int64(frame) * 1_000_000_000 / 48_000
                for stream in streams {
                    try samples.withUnsafeBytes {
                        try track.add(
                            $0, format: AudioFormat(), frames: count, from: stream, at: time,
                            videoEnd: 3_600_000_000_000, sink: log)
                    }
                }
                frame += count
                done += count
            }
        }
        try track.finish(at: UInt64(frame) * 1_000_000_000 / 48_000, sink: log)
        return (log.packets, track.silentFramesRepeated)
    }

    /// White noise from a fixed seed (a linear congruential generator), ±0.2.
    private struct Noise {
        var state: UInt32 = 12345
        mutating func next() -> Float {
            state = state &* 1_664_525 &+ 1_013_904_223
            return Float(state >> 8) / Float(1 << 24) * 0.4 - 0.2
        }
    }

    @Test func silenceIsRepeatedNotEncodedAndTheTrackIsTheSameByteForByte() throws {
        let parts: [(sound: Sound, seconds: Double)] = [
            (.tone, 0.5), (.silence, 5), (.noise, 0.3), (.silence, 0.05), (.tone, 0.2), (.silence, 4.01),
            (.noise, 0.25), (.silence, 3),
        ]
        let encoded = try encode(parts, repeats: false)
        let repeated = try encode(parts, repeats: true)
        #expect(encoded.repeated == 0)
        // After sound libopus takes ~0.6 s to come down to its packet for silence, then `settleFrames` (2 s) of it
        // are encoded before the rest is repeated: of 5, 4 and 3 s, 120 + 70 + 20 frames.
        #expect(repeated.repeated >= 200, "\(repeated.repeated) silent frames repeated")
        #expect(repeated.packets.count == encoded.packets.count)
        let differing = zip(repeated.packets, encoded.packets).enumerated().filter { $1.0 != $1.1 }.map(\.offset)
        #expect(differing.isEmpty, "packets \(differing.prefix(10)) differ from the ones encoding every frame gives")
    }

    @Test func aMixedTrackOfTwoSilentStreamsRepeatsToo() throws {
        let parts: [(sound: Sound, seconds: Double)] = [(.silence, 3), (.tone, 0.2), (.silence, 3)]
        let encoded = try encode(parts, repeats: false, mixed: true)
        let repeated = try encode(parts, repeats: true, mixed: true)
        // 3 s from the start (settled after 2 s), 3 s after the tone (~0.6 s to come down, 2 s to settle).
        #expect(repeated.repeated >= 60, "\(repeated.repeated) silent frames repeated")
        #expect(repeated.packets == encoded.packets)
    }
}
