import BroadcastCore
import Foundation
import Logging
import Testing

@testable import BroadcastEncoding
@testable import BroadcastMedia
@testable import BroadcastStream

/// The `stream` handler with `encode=shared` (#35): the encoding it asks broadcastd for is the one a recording with
/// the same settings asks for; the shared encoder makes AAC when asked; its packets reach every destination; and
/// MPEG-TS (SRT) carries the parameter sets before each keyframe, so that a receiver joining mid-way decodes.
struct SharedStreamTests {
    static func recordSettings(_ fields: [String: String]) throws -> [String: String] {
        try #require(try SharedSettingsTests.options(fields).sharedSettings)
    }

    static func streamOptions(_ url: String, _ fields: [String: String]) throws -> StreamOptions {
        try StreamOptions(url: url, setupInfo: fields.merging(["encode": "shared"]) { given, _ in given })
    }

    static func streamSettings(_ url: String = "srt://h:1", _ fields: [String: String] = [:]) throws -> [String: String]
    {
        let encoding = try #require(try streamOptions(url, fields).sharedEncoding)
        return try #require(encoding.sharedSettings)
    }

    /// By default the stream asks for the encoding record and replay ask for by default, whatever its audio (which it
    /// mixes itself), so that the three share one encoder; its video settings go into it; it encodes on its own when
    /// told to, or by default where a shared encoder cannot serve it.
    @Test func aStreamAsksForTheEncodingOfARecordingWithItsSettings() throws {
        let defaults = try Self.recordSettings([:])
        #expect(try Self.streamSettings() == defaults, "the stream's defaults")
        let byDefault = try #require(try StreamOptions(url: "srt://h:1", setupInfo: [:]).sharedEncoding)
        #expect(byDefault.sharedSettings == defaults, "shared without encode given")
        #expect(try Self.streamSettings("rtmp://h/app") == defaults, "RTMP's AAC is the stream's own")
        #expect(try Self.streamSettings("srt://h:1", ["audio": "none"]) == defaults)
        #expect(try Self.streamSettings("srt://h:1", ["audio": "mic", "audioBitRate": "512"]) == defaults)
        let video = ["videoBitRate": "2500", "keyframeInterval": "1", "preset": "faster", "codec": "hevc"]
        #expect(try Self.streamSettings("srt://h:1", video) == Self.recordSettings(video))
        #expect(try StreamOptions(url: "srt://h:1", setupInfo: ["encode": "own"]).sharedEncoding == nil)
        for (url, fields) in [
            ("hls:///tmp/live/index.m3u8", [:]), ("whips://h/whip", [:]), ("srt://h:1", ["camera": "on"]),
        ] {
            #expect(try StreamOptions(url: url, setupInfo: fields).sharedEncoding == nil, "\(url) \(fields): own")
        }
    }

    @Test(arguments: [
        ("hls:///tmp/live/index.m3u8", [:]), ("whips://h/whip", [:]), ("srt://h:1", ["also": "hls:///tmp/l/i.m3u8"]),
        ("srt://h:1", ["camera": "on"]), ("srt://h:1", ["encode": "both"]),
    ])
    func whatASharedEncoderCannotServeIsRefused(_ url: String, _ fields: [String: String]) {
        #expect(throws: StreamError.self) { try Self.streamOptions(url, fields) }
    }

    /// The shared encode through `SharedStreamOutput` to a destination (HLS in a folder: no server needed): the
    /// senders start with the encoding's video and the stream's one audio track, AAC, which ffmpeg decodes with no
    /// errors and which holds the tone of each capture stream the encoding carries: the microphone's in AAC (`audio=mic
    /// audioCodec=aac`), or app and mic each in an Opus track of its own, record's default, mixed by the stream.
    /// A stream that sends one of the two (`audio=app`) takes only that track of the encoding, and lists only it.
    @Test(arguments: [
        (["audio": "mic", "audioCodec": "aac", "videoBitRate": "1000"], [SampleType.audioMic], "app,mic"),
        ([:], [.audioApp, .audioMic], "app,mic"),
        ([:], [.audioApp, .audioMic], "app"),
    ])
    func theSharedEncodingReachesTheDestinations(
        _ fields: [String: String], _ capture: [SampleType], _ streamAudio: String
    ) throws {
        let shared = try SharedEncodingTests.SharedEncode(ringSize: 1 << 20, fields: fields, streams: capture)
        let folder = FileManager.default.temporaryDirectory.path + "/shared-stream-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let options = try StreamOptions(
            url: "hls://\(folder)/index.m3u8", setupInfo: ["audioCodec": "aac", "audio": streamAudio])
        let logger = Logger(label: "test")
        var started: [StreamParameters] = []
        let audio = SharedStreamOutput.Audio(wanted: options.audio, codec: options.audioCodec, bitRate: 128)
        let output = SharedStreamOutput(globalHeader: true, audio: audio) { streams throws(MediaError) in
            started = streams
            let group = SenderGroup(
                [
                    Sender(
                        destination: options.primary, options: options, streams: streams, bytesPerSecond: 200_000,
                        logger: logger)
                ], logger: logger)
            try group.start()
            return group
        }
        let input = SharedEncoderInput(output: output, ring: shared.memory.reader, keeps: audio.keeps, now: { 0 }) {
            shared.encoder.requestKeyframe()
        }
        try shared.run(seconds: 5) { _, events in
            for event in events { try input.take(event) }
        }
        _ = try input.finish()
        try output.finish()
        let group = try #require(output.group)
        group.finish(timeout: 5)
        #expect(group.report(seconds: 1).failure == nil)
        #expect(started.map(\.kind) == [.video, .audio])
        #expect(input.lostPackets == 0 && input.videoFramesWritten == 150)
        let sent = capture.filter(options.audio.contains)
        #expect(input.audioTracks.map(\.name) == sent.map { AudioTrack.name(titled: AudioTrack.title(of: [$0])) })

        let playlist = folder + "/index.m3u8"
        let probe = try StillScreenTests.StillScreen.run(
            "ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", playlist])
        // The playlist lists its streams twice (in its program, then on their own).
        var streams: [String] = []
        for line in String(decoding: probe.output, as: UTF8.self).split(separator: "\n").map(String.init)
        where !streams.contains(line) {
            streams.append(line)
        }
        #expect(streams == ["h264,160,96", "aac"], "\(streams) \(probe.errors)")
        let decoded = try StillScreenTests.StillScreen.run(
            "ffmpeg", ["-v", "error", "-i", playlist, "-map", "0:a", "-ac", "1", "-f", "f32le", "-"])
        #expect(decoded.errors.isEmpty, "\(decoded.errors)")
        let samples = decoded.output.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        #expect(samples.count > 4 * 48000, "\(samples.count) samples")
        let steady = samples.dropFirst(48000).prefix(3 * 48000)
        for (type, frequency) in SharedEncodingTests.SharedEncode.tones {
            let level = Self.amplitude(frequency, in: steady)
            #expect(sent.contains(type) ? level > 0.1 : level < 0.01, "\(type) \(frequency) Hz: \(level)")
        }
    }

    /// The amplitude of the tone of `frequency` in `samples` (48 kHz): their correlation with it.
    static func amplitude(_ frequency: Double, in samples: ArraySlice<Float>) -> Double {
        var (sine, cosine) = (0.0, 0.0)
        for (i, sample) in samples.enumerated() {
            let phase = 2 * Double.pi * frequency * Double(i) / 48000
            sine += Double(sample) * sin(phase)
            cosine += Double(sample) * cos(phase)
        }
        return 2 * (sine * sine + cosine * cosine).squareRoot() / Double(max(1, samples.count))
    }

    /// A destination that dropped GOPs asks the shared encoder for a keyframe, and not again while that one is on its
    /// way: every packet until it comes would ask otherwise, and every handler of the encoder get a keyframe each.
    @Test func aKeyframeIsAskedForOnceUntilItComes() throws {
        let audio = SharedStreamOutput.Audio(wanted: [], codec: "aac", bitRate: 128)
        let output = SharedStreamOutput(globalHeader: true, audio: audio) { _ throws(MediaError) in
            throw MediaError("start", "no destinations here")
        }
        func frame(keyframe: Bool) -> EncodedPacket {
            EncodedPacket(kind: .video, data: [0], pts: 0, dts: 0, duration: 1, timeBase: .video, isKeyframe: keyframe)
        }
        #expect(!output.askForKeyframe(false), "no destination wants one")
        #expect(output.askForKeyframe(true))
        #expect(!output.askForKeyframe(true), "one is on its way")
        try output.write(frame(keyframe: false), stream: 0)
        #expect(!output.askForKeyframe(true), "still on its way")
        try output.write(frame(keyframe: true), stream: 0)
        #expect(output.askForKeyframe(true), "it came: the next drop asks again")
    }

    /// What SRT carries: the shared encoder's H.264 or HEVC (parameter sets in its global header only) into MPEG-TS,
    /// which libavformat's muxer gives them again before each keyframe. A receiver joining at the keyframe at 2 s (the
    /// file cut there, with the PAT and PMT the muxer writes just before it) decodes every frame from there at the
    /// encoding's size, with no errors.
    @Test(arguments: ["h264", "hevc"]) func mpegTSCarriesTheParameterSetsBeforeEachKeyframe(_ codec: String) throws {
        let shared = try SharedEncodingTests.SharedEncode(ringSize: 1 << 20, fields: ["audio": "mic", "codec": codec])
        let consumer = try SharedEncodingTests.Consumer("ts", shared, container: .mpegts) {
            shared.encoder.requestKeyframe()
        }
        try shared.run(seconds: 5) { _, events in try consumer.take(events) }
        _ = try consumer.finish()
        let packets = try StillScreenTests.StillScreen.run(
            "ffprobe",
            [
                "-v", "error", "-select_streams", "v", "-show_entries", "packet=pts_time,pos,flags", "-of",
                "csv=p=0", consumer.path,
            ])
        let lines = String(decoding: packets.output, as: UTF8.self).split(separator: "\n").map {
            $0.split(separator: ",")
        }
        let start = try #require(lines.first.flatMap { Double($0[0]) })
        // The keyframe by time at 2 s (the join's own came at once).
        let second = lines.first { $0.count == 3 && $0[2].contains("K") && (Double($0[0]) ?? 0) - start > 1.9 }
        let position = try #require(
            second.flatMap { Int($0[1]) }, "keyframes: \(lines.filter { $0.count == 3 && $0[2].contains("K") })")
        let all = try Data(contentsOf: URL(fileURLWithPath: consumer.path))
        let joined = consumer.path + ".joined.ts"
        defer { try? FileManager.default.removeItem(atPath: joined) }
        try all.subdata(in: max(0, position - 4 * 188)..<all.count).write(to: URL(fileURLWithPath: joined))

        let decoded = try StillScreenTests.StillScreen.run(
            "ffprobe",
            [
                "-v", "error", "-select_streams", "v", "-count_frames", "-show_entries",
                "stream=width,height,nb_read_frames", "-of", "csv=p=0", joined,
            ])
        // MPEG-TS lists its streams twice (in its program, then on their own).
        let fields = Set(String(decoding: decoded.output, as: UTF8.self).split(separator: "\n"))
        #expect(fields == ["160,96,90"], "the last 3 s of 5: \(fields) \(decoded.errors)")
        #expect(decoded.errors.isEmpty, "\(decoded.errors)")
    }

    /// Every video PES of the MPEG-TS we write says its length, so that a receiver's demuxer hands each frame on when
    /// it has all of it rather than when the next begins (a quiet screen's next frame may be seconds away). libavformat
    /// leaves the length out by default.
    @Test func mpegTSVideoPacketsSayTheirLength() throws {
        let shared = try SharedEncodingTests.SharedEncode(ringSize: 1 << 20, fields: ["audio": "mic"])
        let consumer = try SharedEncodingTests.Consumer("pes", shared, container: .mpegts) {
            shared.encoder.requestKeyframe()
        }
        try shared.run(seconds: 1) { _, events in try consumer.take(events) }
        _ = try consumer.finish()
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: consumer.path)))
        var lengths: [Int] = []
        for start in stride(from: 0, to: bytes.count - 187, by: 188) where bytes[start] == 0x47 {
            guard bytes[start + 1] & 0x40 != 0 else { continue }  // a PES starts in this packet
            var payload = start + 4
            if bytes[start + 3] & 0x20 != 0 { payload += 1 + Int(bytes[start + 4]) }  // past its adaptation field
            guard payload + 6 <= start + 188, bytes[payload..<payload + 4] == [0, 0, 1, 0xE0] else { continue }
            lengths.append(Int(bytes[payload + 4]) << 8 | Int(bytes[payload + 5]))
        }
        #expect(lengths.count >= 25, "video PES packets: \(lengths.count)")
        #expect(!lengths.contains(0), "PES_packet_length of each video PES: \(lengths)")
    }

    /// broadcastd's shared encoder encodes the first three repeats after each change too, so that a live receiver,
    /// whose MPEG-TS demuxer and parser hand a frame on once more have begun, shows a change within 0.1 s rather than
    /// after the next changes (seconds away on a quiet screen); the repeats after those are not encoded.
    @Test(arguments: [0, 3]) func theFirstRepeatsAfterAChangeAreEncodedWhenAsked(_ asked: Int) throws {
        let shared = try SharedEncodingTests.SharedEncode(ringSize: 1 << 20, fields: ["audio": "mic"])
        shared.encoder.repeatsAfterChange = asked
        var video: UInt32?
        var framesWithVideo: [Int] = []
        try shared.run(seconds: 2, still: 31..<55) { index, events in
            for event in events {
                switch event {
                case .streams(let descriptions): video = descriptions.firstIndex { $0.kind == "video" }.map(UInt32.init)
                case .packet(let header) where header.stream == video: framesWithVideo.append(index)
                default: break
                }
            }
        }
        let still = framesWithVideo.filter { (31..<55).contains($0) }
        #expect(still == Array(31..<31 + asked), "frames of the still stretch encoded: \(still)")
        #expect(framesWithVideo.contains(30) && framesWithVideo.contains(55))
    }
}
