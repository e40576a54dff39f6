import BroadcastCore
import BroadcastProtocol
import BroadcastRecord
import Foundation
import Testing

@testable import BroadcastEncoding
@testable import BroadcastHandlerKit
@testable import BroadcastMedia

/// One encode shared by several handlers (#35), in one process: `RecordingEncoder` into a `SharedEncoderOutput`
/// (packets into a packet ring, events told), and handlers' `SharedEncoderInput`s writing files of their own, judged
/// by ffprobe and ffmpeg.
struct SharedEncodingTests {
    static let interval: UInt64 = 1_000_000_000 / 30
    static let width = 160, height = 96

    /// The encoder (the record handler's defaults, or its `fields`; the mic's track) and a ring in memory, fed a
    /// 160x96 picture that changes every frame and a 440 Hz tone.
    final class SharedEncode {
        let memory: PacketRingTests.Memory
        let encoder: RecordingEncoder
        let output: SharedEncoderOutput
        let handler = BroadcastSampleHandler()
        /// What the encoder told, in order.
        var told: [SharedEncoderEvent] = []
        /// What it told since it was last taken.
        private let box: EventBox
        final class EventBox { var events: [SharedEncoderEvent] = [] }

        /// The tone each capture stream plays (Hz).
        static let tones: [SampleType: Double] = [.audioMic: 440, .audioApp: 660]

        /// `streams`: the capture's audio, each playing its tone (`tones`).
        init(ringSize: Int, fields: [String: String] = ["audio": "mic"], streams: [SampleType] = [.audioMic]) throws {
            memory = PacketRingTests.Memory(ringSize)
            let options = try RecordOptions(url: "/dev/null.mp4", setupInfo: fields) { "" }
            handler.videoFormat = VideoFormat(width: SharedEncodingTests.width, height: SharedEncodingTests.height)
            handler.audioStreams = streams
            let box = EventBox()
            output = SharedEncoderOutput(
                ring: PacketRingWriter(base: memory.base, size: memory.size), id: 3
            ) { event throws(MediaError) in
                box.events.append(event)
            }
            encoder = try RecordingEncoder(options.encoding, for: handler, output: output)
            self.box = box
        }

        /// Frames and audio for `seconds`, calling `each` with the events of each frame as they come; the frames in
        /// `still` repeat the one before; those in `paused` the encoder does not get (as `SharedEncoderHandler`, it
        /// pauses, and makes its first frame after a keyframe); the sound of those in `silent` never comes.
        func run(
            seconds: Int, still: Range<Int> = 0..<0, paused: Range<Int> = 0..<0, silent: [Range<Int>] = [],
            each: (Int, [SharedEncoderEvent]) throws -> Void
        ) throws {
            let size = handler.videoFormat.frameByteCount
            var picture = [UInt8](repeating: 0, count: size)
            let frames = seconds * 30
            let audioChunk = 1600  // 1/30 s at 48 kHz
            var played = 0.0  // samples of each stream played
            for index in 0..<frames {
                let time = 5_000_000_000 + UInt64(index) * SharedEncodingTests.interval
                if index == paused.lowerBound { _ = encoder.pause() }
                if index == paused.upperBound { encoder.requestKeyframe() }
                if paused.contains(index) {
                    try each(index, take())  // what pausing gave
                    continue
                }
                let repeated = still.contains(index)
                if !repeated {
                    for i in stride(from: 0, to: size, by: 7) { picture[i] = UInt8(truncatingIfNeeded: i + index * 3) }
                }
                try picture.withUnsafeBytes { data in
                    let timing = SampleTiming(
                        presentationTime: time, duration: SharedEncodingTests.interval, sequence: UInt64(index),
                        discontinuity: false)
                    var sample = SampleBuffer(
                        type: .video, timing: timing, data: data, videoFormat: handler.videoFormat,
                        orientation: nil, audioFormat: nil, frameCount: 0)
                    sample.isRepeat = repeated
                    _ = try encoder.addVideo(sample)
                }
                if silent.contains(where: { $0.contains(index) }) {
                    try each(index, take())
                    continue
                }
                for type in handler.audioStreams {
                    var pcm = [Float](repeating: 0, count: audioChunk * 2)
                    for i in 0..<audioChunk {
                        let value = Float(
                            sin(2 * Double.pi * Self.tones[type, default: 440] * (played + Double(i)) / 48000) * 0.3)
                        pcm[2 * i] = value
                        pcm[2 * i + 1] = value
                    }
                    try pcm.withUnsafeBytes { data in
                        let timing = SampleTiming(
                            presentationTime: time, duration: SharedEncodingTests.interval, sequence: UInt64(index),
                            discontinuity: silent.contains { $0.upperBound == index })
                        let sample = SampleBuffer(
                            type: type, timing: timing, data: data, videoFormat: nil, orientation: nil,
                            audioFormat: AudioFormat(), frameCount: audioChunk)
                        try encoder.addAudio(sample, type)
                    }
                }
                played += Double(audioChunk)
                try output.tellAudioFigures(of: encoder.tracks, at: time)  // as SharedEncoderHandler does
                try each(index, take())
            }
        }

        /// What it told since the last time, kept in `told` too.
        private func take() -> [SharedEncoderEvent] {
            let events = box.events
            box.events = []
            told += events
            return events
        }
    }

    /// A handler of the shared encode, writing an MP4 file (or `container`).
    final class Consumer {
        let path: String
        let muxer: Muxer
        let input: SharedEncoderInput

        init(
            _ name: String, _ shared: SharedEncode, container: Muxer.Container = .fragmentedMP4,
            clock: @escaping () -> UInt64 = { 0 }, askKeyframe: @escaping () -> Void
        ) throws {
            let ext = container == .mpegts ? "ts" : container.rawValue
            path = FileManager.default.temporaryDirectory.path + "/shared-\(name)-\(UUID().uuidString).\(ext)"
            muxer = try Muxer(url: path, container: container)
            input = SharedEncoderInput(
                output: muxer, ring: shared.memory.reader, now: clock, requestKeyframe: askKeyframe)
        }

        func take(_ events: [SharedEncoderEvent]) throws {
            for event in events { try input.take(event) }
        }

        func finish() throws -> Int64 {
            let duration = try input.finish()
            try muxer.finish()
            return duration
        }

        deinit { try? FileManager.default.removeItem(atPath: path) }

        /// The video packets' (or `stream` a: the audio's) times (s) and whether each is a keyframe, as ffprobe reads
        /// them.
        func videoPackets(stream: String = "v") throws -> [(time: Double, key: Bool)] {
            let text = String(
                decoding: try StillScreenTests.StillScreen.run(
                    "ffprobe",
                    [
                        "-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time,flags", "-of",
                        "csv=p=0", path,
                    ]
                ).output, as: UTF8.self)
            return text.split(separator: "\n").compactMap { line in
                let fields = line.split(separator: ",")
                guard fields.count >= 2, let time = Double(fields[0]) else { return nil }
                return (time, fields[1].contains("K"))
            }
        }

        /// The first audio packet's time (s) and the audio's duration, as ffprobe reads them.
        func audio() throws -> (start: Double, duration: Double) {
            let text = String(
                decoding: try StillScreenTests.StillScreen.run(
                    "ffprobe",
                    [
                        "-v", "error", "-select_streams", "a", "-show_entries", "stream=start_time,duration", "-of",
                        "csv=p=0", path,
                    ]
                ).output, as: UTF8.self)
            let fields = text.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",").compactMap {
                Double($0)
            }
            return (fields.first ?? -1, fields.dropFirst().first ?? -1)
        }

        /// What ffmpeg says decoding the whole file (nothing: no errors).
        func decodeErrors() throws -> String {
            try StillScreenTests.StillScreen.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"]).errors
        }
    }

    /// Two handlers of one encode over 10 s: one from the start that pauses from 3 s to 5 s, one that joins at 4 s.
    /// Each file starts with a keyframe at 0, has no gap (the first's pause leaves none), decodes with no errors and
    /// has its audio from its start to its end; the first is 8 s long, the second 6 s. Each asks for a keyframe when
    /// it joins and resumes, and the encoder makes them.
    @Test func handlersShareOneEncodeEachOnItsOwnTimeLine() throws {
        let shared = try SharedEncode(ringSize: 256 * 1024)
        var asked = 0
        let ask = {
            asked += 1
            shared.encoder.requestKeyframe()
        }
        let first = try Consumer("first", shared, askKeyframe: ask)
        let joiner = try Consumer("joiner", shared, askKeyframe: ask)
        try shared.run(seconds: 10) { index, events in
            if index == 90 { first.input.pause() }
            if index == 150 { first.input.resume() }
            try first.take(events)
            if index == 120 {
                // Joining: what the encoder told of its streams first, then what comes.
                try joiner.take(shared.told.filter { if case .streams = $0 { true } else { false } })
            }
            if index > 120 { try joiner.take(events) }
        }
        let firstDuration = try first.finish()
        let joinerDuration = try joiner.finish()
        #expect(first.input.lostPackets == 0 && joiner.input.lostPackets == 0)
        #expect(asked == 3, "the first's join and resume, the joiner's join: \(asked) keyframes asked")
        #expect(shared.encoder.keyframesMadeAsked >= 2, "the resume's and the join's")

        for (consumer, duration, expected) in [(first, firstDuration, 8.0), (joiner, joinerDuration, 6.0)] {
            let packets = try consumer.videoPackets()
            let name = consumer.path
            #expect(packets.first?.key == true && packets.first?.time == 0, "\(name) starts: \(packets.prefix(2))")
            #expect(abs(Double(duration) / 1e9 - expected) < 0.1, "\(name) lasts \(Double(duration) / 1e9) s")
            let gaps = zip(packets, packets.dropFirst()).map { $1.time - $0.time }
            #expect(gaps.allSatisfy { $0 > 0 && $0 < 0.05 }, "\(name) has a gap: \(gaps.max() ?? 0) s")
            let audio = try consumer.audio()
            #expect(audio.start >= 0 && audio.start < 0.05, "\(name)'s audio starts at \(audio.start)")
            #expect(abs(audio.duration - expected) < 0.15, "\(name)'s audio lasts \(audio.duration)")
            let errors = try consumer.decodeErrors()
            #expect(errors.isEmpty, "\(errors)")
        }
    }

    /// A shared handler's result counts what an encoder of its own counts (#35: `encode=shared` is the default):
    /// over 10 s paused from 3 s to 5 s, with the screen still from 6 s to 7 s, it wrote two segments (0-3 s and
    /// 3-8 s of file time) whose frames are its encoded frames and its repeats not encoded, and names its audio track
    /// as an encoder of its own does.
    @Test func aSharedHandlerCountsSegmentsFramesAndTracks() throws {
        let shared = try SharedEncode(ringSize: 256 * 1024)
        let handler = try Consumer("counted", shared) { shared.encoder.requestKeyframe() }
        try shared.run(seconds: 10, still: 180..<210) { index, events in
            if index == 90 { handler.input.pause() }
            if index == 150 { handler.input.resume() }
            try handler.take(events)
        }
        let duration = try handler.finish()
        let input = handler.input
        let segments = input.segments.map { (Double($0.start) / 1e9, Double($0.end - $0.start) / 1e9, $0.frames) }
        #expect(segments.count == 2, "\(segments)")
        #expect(segments.first.map { $0.0 == 0 && abs($0.1 - 3) < 0.05 } == true, "\(segments)")
        #expect(segments.last.map { abs($0.0 - 3) < 0.05 && abs($0.1 - 5) < 0.1 } == true, "\(segments)")
        #expect(abs(Double(duration) / 1e9 - segments.reduce(0) { $0 + $1.1 }) < 0.001)
        #expect(input.segments.reduce(0) { $0 + $1.frames } == input.encodedFrames + input.repeatedFrames)
        #expect(input.repeatedFrames >= 25 && input.repeatedFrames <= 30, "\(input.repeatedFrames) of 30 still frames")
        #expect(input.encodedFrames + input.repeatedFrames > 230, "\(input.encodedFrames) + \(input.repeatedFrames)")
        #expect(
            input.audioTracks.map(\.name) == ["audioMic"],
            "as RecordingEncoder names it: \(shared.encoder.tracks[0].name)")
        #expect(shared.encoder.tracks.map(\.name) == input.audioTracks.map(\.name))
        // The sound up to the pause is all there, though the encoder's last packets of it came after the pause (they
        // were lost, a gap of 47 ms): at the join, the next 20 ms packet starts less than two packets after the last.
        let audio = try handler.videoPackets(stream: "a").map(\.time)
        let gaps = zip(audio, audio.dropFirst()).map { $1 - $0 }
        #expect(gaps.allSatisfy { $0 < 0.04 }, "audio gaps: \(gaps.filter { $0 >= 0.021 })")
    }

    /// A shared handler's audio figures are the encoder's for the stretches it wrote (revision 2.10), as an encoder of
    /// its own would count them: over 8 s, the sound missing for 200 ms while it writes counts, 200 ms missing while
    /// it is paused (3 s to 5 s; the encoder goes on for others) does not. The encoder tells its figures when sound
    /// goes missing, else once a second.
    @Test func aSharedHandlersAudioFiguresAreItsOwnStretches() throws {
        let shared = try SharedEncode(ringSize: 256 * 1024)
        let handler = try Consumer("figures", shared) { shared.encoder.requestKeyframe() }
        try shared.run(seconds: 8, silent: [60..<66, 120..<126]) { index, events in
            if index == 90 { handler.input.pause() }
            if index == 150 { handler.input.resume() }
            try handler.take(events)
        }
        _ = try handler.finish()
        let total = shared.encoder.tracks[0].lostMs.missing
        #expect(abs(total - 400) < 30, "the encoder's sound missing: \(total) ms")
        let tracks = handler.input.audioTracks
        #expect(tracks.map(\.name) == ["audioMic"])
        let mine = try #require(tracks.first?.figures, "no figures: \(tracks)")
        #expect(abs(mine.missingMs - 200) < 30 && mine.droppedMs < 5, "\(mine)")
        let told = shared.told.filter { if case .audioFigures = $0 { true } else { false } }.count
        #expect(told >= 8 && told <= 14, "figures told \(told) times in 8 s")
    }

    /// A handler that finishes while the encoder goes on (for others) ends its file where its sound ends: the encoder
    /// still held the sound of its last frame, so its video went on alone for 40 ms (RecordTests under
    /// `encode=shared`: the audio 40 ms shorter than the recording).
    @Test func aHandlerFinishingWhileTheEncoderGoesOnEndsWithItsSound() throws {
        let shared = try SharedEncode(ringSize: 256 * 1024)
        let handler = try Consumer("ends", shared) { shared.encoder.requestKeyframe() }
        try shared.run(seconds: 3) { index, events in
            if index < 60 { try handler.take(events) }
        }
        let duration = Double(try handler.finish()) / 1e9
        let audio = try handler.audio()
        #expect(abs(audio.start + audio.duration - duration) < 0.005, "sound to \(audio), video to \(duration) s")
        #expect(duration > 1.9 && duration < 2, "\(duration) s")
    }

    /// A handler alone on its encoder, which pauses with it: its sound goes on at the join where it stopped, packet
    /// after packet (the first of the new stretch, which the encoder gives before its keyframe, was dropped).
    @Test func aHandlerAloneOnItsEncoderHasNoHoleInItsSoundAtAPause() throws {
        let shared = try SharedEncode(ringSize: 256 * 1024)
        let handler = try Consumer("alone", shared) { shared.encoder.requestKeyframe() }
        try shared.run(seconds: 6, paused: 90..<150) { index, events in
            if index == 90 { handler.input.pause() }
            if index == 150 { handler.input.resume() }
            try handler.take(events)
        }
        let duration = Double(try handler.finish()) / 1e9
        let audio = try handler.videoPackets(stream: "a").map(\.time)
        let gaps = zip(audio, audio.dropFirst()).map { $1 - $0 }
        #expect(gaps.allSatisfy { abs($0 - 0.02) < 0.001 }, "audio gaps: \(gaps.filter { abs($0 - 0.02) >= 0.001 })")
        #expect(abs(duration - 4) < 0.05 && handler.input.segments.count == 2, "\(duration) s")
        #expect(try handler.decodeErrors().isEmpty)
    }

    /// A handler alone on its encoder hears of its pause before the packets of the frames the encoder had before its
    /// own (two frames in flight, as on a loaded machine): those frames are the end of its stretch, so that the
    /// stretch ends where the encoder's did and its sound goes on at the join packet after packet, each 20 ms packet
    /// where the encoder put it. They were dropped: the file's time went on from the stretch's end a little earlier
    /// than the encoder's, and the sound had a hole or an overlap of up to a packet at the join, which an MP4 closes
    /// (AudioSyncTests under `encode=shared`: the 4th segment's beeps 17 ms from their flashes).
    @Test func framesInFlightAtAPauseEndTheStretch() throws {
        let shared = try SharedEncode(ringSize: 256 * 1024)
        var now: UInt64 = 0
        let handler = try Consumer("in-flight", shared, clock: { now }) { shared.encoder.requestKeyframe() }
        var late: [[SharedEncoderEvent]] = []
        try shared.run(seconds: 6, paused: 90..<150) { index, events in
            now = UInt64(index) * SharedEncodingTests.interval
            late.append(events)
            if index == 90 { handler.input.pause() }
            if index == 150 { handler.input.resume() }
            if late.count > 2 { try handler.take(late.removeFirst()) }
        }
        for events in late { try handler.take(events) }
        let duration = Double(try handler.finish()) / 1e9
        #expect(abs(duration - 4) < 0.05 && handler.input.segments.count == 2, "\(duration) s")
        let audio = try handler.videoPackets(stream: "a").map(\.time)
        let gaps = zip(audio, audio.dropFirst()).map { $1 - $0 }
        #expect(gaps.allSatisfy { abs($0 - 0.02) < 0.001 }, "audio gaps: \(gaps.filter { abs($0 - 0.02) >= 0.001 })")
        let video = try handler.videoPackets().map(\.time)
        #expect(video.count == 120 && zip(video, video.dropFirst()).allSatisfy { abs($1 - $0 - 1.0 / 30) < 0.002 })
        #expect(try handler.decodeErrors().isEmpty)
    }

    /// While another handler keeps the encoder going, what comes after a short pause (five frames, fewer than are kept
    /// for the end of a stretch) is of the pause, though it goes on to the keyframe: it is not written.
    @Test func framesOfAShortPauseWhileTheEncoderGoesOnAreNotWritten() throws {
        let shared = try SharedEncode(ringSize: 256 * 1024)
        var now: UInt64 = 0
        let handler = try Consumer("short", shared, clock: { now }) { shared.encoder.requestKeyframe() }
        try shared.run(seconds: 4) { index, events in
            now = UInt64(index) * SharedEncodingTests.interval
            if index == 60 { handler.input.pause() }
            if index == 65 { handler.input.resume() }
            try handler.take(events)
        }
        let duration = Double(try handler.finish()) / 1e9
        let video = try handler.videoPackets()
        // Frames 0-59, then from the keyframe asked for at the resume (the frame after 65) on: 114 of 120, the last
        // shown until the sound ends (`aHandlerFinishingWhileTheEncoderGoesOnEndsWithItsSound`).
        #expect(
            video.count == 114 && duration > 113.0 / 30 && duration <= 114.0 / 30 + 0.001,
            "\(video.count) frames, \(duration) s")
    }

    /// A handler that stops reading for a second at 3 s, through a ring that holds about half a second, loses
    /// packets of its own, whole GOPs: it asks for a keyframe and goes on from it; its file decodes with no errors.
    /// The handler that kept up lost nothing.
    @Test func aHandlerThatFallsARingBehindLosesWholeGOPsOfItsOwn() throws {
        let shared = try SharedEncode(ringSize: 64 * 1024)
        let prompt = try Consumer("prompt", shared) { shared.encoder.requestKeyframe() }
        let late = try Consumer("late", shared) { shared.encoder.requestKeyframe() }
        var backlog: [SharedEncoderEvent] = []
        try shared.run(seconds: 8) { index, events in
            try prompt.take(events)
            backlog += events
            if !(90..<120).contains(index) {
                try late.take(backlog)
                backlog = []
            }
        }
        _ = try prompt.finish()
        _ = try late.finish()
        #expect(prompt.input.lostPackets == 0)
        #expect(late.input.lostPackets > 10, "lost \(late.input.lostPackets)")
        #expect(late.input.keyframesAsked == 2, "its join's and its loss's")
        let packets = try late.videoPackets()
        #expect(packets.first?.key == true && packets.first?.time == 0)
        #expect(packets.count > 180 && packets.count < 220, "\(packets.count) frames kept of 240")
        let gap = zip(packets, packets.dropFirst()).max { $0.1.time - $0.0.time < $1.1.time - $1.0.time }
        #expect(
            gap.map { $0.1.key && $0.1.time - $0.0.time > 0.5 } == true,
            "the gap ends at a keyframe: \(gap.map { "\($0)" } ?? "")")
        let errors = try late.decodeErrors()
        #expect(errors.isEmpty, "\(errors)")
        #expect(try prompt.videoPackets().count == 240)
    }

    /// Streams as a shared encoder tells them, and back: what a muxer needs survives, and what this libavcodec does
    /// not know is refused with its name.
    @Test func streamDescriptionsCarryWhatAMuxerNeeds() throws {
        let shared = try SharedEncode(ringSize: 256 * 1024)
        try shared.run(seconds: 1) { _, _ in }
        guard case .streams(let streams) = try #require(shared.told.first) else {
            Issue.record("the first event is not the streams: \(shared.told.first.map { "\($0)" } ?? "none")")
            return
        }
        #expect(streams.map(\.codec) == ["h264", "opus"])
        let video = try StreamParameters(streams[0])
        #expect(video.width == 160 && video.height == 96 && !video.extradata.isEmpty)
        #expect(streams[0].pixelFormat == "nv12" && streams[0].rotation == 0, "\(streams[0])")
        let audio = try StreamParameters(streams[1])
        #expect(
            audio.sampleRate == 48000 && audio.channels == 2 && audio.extradata.starts(with: Array("OpusHead".utf8)))
        #expect(streams[1].priming == 312 && streams[1].title == "Microphone")
        var unknown = streams[0]
        unknown.codec = "h267"
        #expect(throws: MediaError.self) { try StreamParameters(unknown) }
        unknown = streams[0]
        unknown.pixelFormat = "yuv999p"
        #expect(throws: MediaError.self) { try StreamParameters(unknown) }
        unknown = streams[0]
        unknown.width = 0
        #expect(throws: MediaError.self) { try StreamParameters(unknown) }
        // Round trip through JSON, as the wire carries it.
        let json = try JSONEncoder().encode(streams)
        #expect(try JSONDecoder().decode([EncodedStreamDescription].self, from: json) == streams)
    }
}

/// What ENCODE says of an encoding (`EncodingOptions.sharedSettings`): the same for handlers meaning the same encoding,
/// and read back by broadcastd's encoder to the same options.
struct SharedSettingsTests {
    static func options(_ fields: [String: String]) throws -> EncodingOptions {
        var fields = fields
        let options = try EncodingOptions(taking: &fields)
        #expect(fields.isEmpty, "left: \(fields)")
        return options
    }

    @Test(arguments: [
        [:], ["codec": "hevc"], ["codec": "av1", "preset": "veryfast"], ["crf": "23"],
        ["videoBitRate": "4000", "keyframeInterval": "1", "size": "1280x720", "frameRate": "30"],
        ["audio": "mic", "audioChannels": "1", "audioBitRate": "96"], ["audio": "app,mic", "mix": "true"],
        ["audio": "none", "orientation": "90", "tune": "film"], ["appGain": "-6", "micGain": "3"],
        ["audio": "app,mic", "mix": "true", "audioCodec": "aac", "audioBitRate": "128"],
    ])
    func settingsAreReadBackToTheSameEncoding(_ fields: [String: String]) throws {
        let options = try Self.options(fields)
        let settings = try #require(options.sharedSettings)
        let back = try Self.options(settings)
        #expect(back.sharedSettings == settings, "\(settings)")
        #expect(back.video == options.video && back.audio == options.audio && back.channels == options.channels)
        #expect(back.audioCodec == options.audioCodec)
        for type in [SampleType.audioApp, .audioMic] {
            #expect(abs((back.gains[type] ?? 1) - (options.gains[type] ?? 1)) < 1e-4)
        }
    }

    @Test func theSameEncodingSaidTwoWaysIsOneSetting() throws {
        #expect(
            try Self.options([:]).sharedSettings == Self.options(["codec": "h264", "audio": "app,mic"]).sharedSettings)
        #expect(try Self.options([:]).sharedSettings != Self.options(["crf": "30"]).sharedSettings)
        #expect(try Self.options(["camera": "on"]).sharedSettings == nil, "each handler composes its own corner")
        // Opus, the default, is not written: the settings from before `audioCodec` stay what they were.
        #expect(try Self.options(["audioCodec": "opus"]).sharedSettings == Self.options([:]).sharedSettings)
        #expect(try Self.options([:]).sharedSettings?["audioCodec"] == nil)
        #expect(try Self.options(["audioCodec": "aac"]).sharedSettings?["audioCodec"] == "aac")
        #expect(throws: SetupFieldError.self) { try Self.options(["audioCodec": "mp3"]) }
    }
}
