import BroadcastCore
import BroadcastMedia
import BroadcastSystem
import BroadcastUpload
import Testing

@testable import BroadcastRecord
@testable import BroadcastTimeline

#if canImport(Glibc)
    import Glibc
#endif

/// A 440 Hz tone of amplitude 0.25, as the synthetic source plays it, frames `start ..< start + count`.
private func tone(_ start: Int, _ count: Int, rate: Double = 48000, frequency: Double = 440) -> [Float] {
    (start..<(start + count)).map { Float(0.25 * sin(2 * Double.pi * frequency * Double($0) / rate)) }
}

/// The largest step between neighbouring samples: a 440 Hz tone at 0.25 moves at most 0.0144 a sample.
private func largestStep(_ samples: ArraySlice<Float>) -> Float {
    zip(samples.dropFirst(), samples).map { abs($0 - $1) }.max() ?? 0
}

@Suite struct AudioTimelineTests {
    @Test func exactTimestampsPassThroughUnchanged() {
        var timeline = AudioTimeline(channels: 1, sampleRate: 48000, gains: [1])
        var out: [Float] = []
        for chunk in 0..<100 {
            tone(chunk * 480, 480).withUnsafeBufferPointer { timeline.place(0, $0, at: Int64(chunk * 480)) }
            timeline.drain(upTo: timeline.ready(limit: .max), into: &out)
        }
        timeline.endSegment(at: 48000)
        timeline.drain(upTo: 48000, into: &out)
        #expect(out.count == 48000)
        // Bit for bit, apart from the 10 ms fade-in at the start and fade-out at the end.
        #expect(Array(out[480..<47520]) == Array(tone(0, 48000)[480..<47520]))
        #expect(timeline.counters == AudioTimeline.Counters())
    }

    /// After samples the source lost (the chunk after them carries the discontinuity flag): 100 ms missing are counted
    /// silence, and a chunk that overlaps the audio before it by 60 ms crossfades with its last 10 ms, the rest
    /// dropped.
    @Test func aGapBecomesCountedSilenceAndAnOverlapIsDropped() {
        var timeline = AudioTimeline(channels: 1, sampleRate: 48000, gains: [1])
        var out: [Float] = []
        tone(0, 4800).withUnsafeBufferPointer { timeline.place(0, $0, at: 0) }
        tone(9600, 4800).withUnsafeBufferPointer { timeline.place(0, $0, at: 9600, discontinuity: true) }
        tone(11520, 4800).withUnsafeBufferPointer { timeline.place(0, $0, at: 11520, discontinuity: true) }
        timeline.endSegment(at: 14400)
        timeline.drain(upTo: 14400, into: &out)
        #expect(timeline.counters.missingFrames == 4800)
        #expect(timeline.counters.droppedFrames == 2880 - 480)
        #expect(out.count == 14400)
        #expect(out[4800..<9600].allSatisfy { $0 == 0 })
        #expect(
            largestStep(out[...]) < 0.0144 * 1.5,
            "faded out before the gap and in after it, crossfaded at the overlap")
    }

    /// A source's timestamps jumping without the discontinuity flag is a shift of its timing, however far (the
    /// stream's samples follow on): followed by stretching, nothing counted missing nor dropped (jumps of 40 ms and
    /// more were taken for gaps: silence went in without a fade-out, a click, and was counted missing).
    @Test(arguments: [45.0, -45.0])
    func anUnflaggedJumpIsAShiftNotAGap(_ shiftMs: Double) {
        var timeline = AudioTimeline(channels: 1, sampleRate: 48000, gains: [1])
        var out: [Float] = []
        let shift = Int(shiftMs * 48)
        for chunk in 0..<400 {
            let at = chunk * 480 + (chunk >= 100 ? shift : 0)
            tone(chunk * 480, 480).withUnsafeBufferPointer { timeline.place(0, $0, at: Int64(at)) }
            timeline.drain(upTo: timeline.ready(limit: .max), into: &out)
        }
        #expect(timeline.counters.missingFrames == 0 && timeline.counters.droppedFrames == 0)
        #expect(largestStep(out[...]) < 0.0144 * 1.1)
        #expect(abs(Double(timeline.inputs[0].position! - Int64(400 * 480 + shift))) < 48, "followed within 1 ms")
    }

    /// Segment A ends at 0.5 s; B's audio starts 20 ms before its first frame: the two overlap and
    /// are crossfaded; nothing jumps more than the tone itself does.
    @Test func segmentJoinsCrossfadeWithoutAClick() {
        var timeline = AudioTimeline(channels: 1, sampleRate: 48000, gains: [1])
        var out: [Float] = []
        for chunk in 0..<52 {  // A runs 20 ms past the join (the end of its video); that part is cut
            tone(chunk * 480, 480).withUnsafeBufferPointer { timeline.place(0, $0, at: Int64(chunk * 480)) }
            timeline.drain(upTo: timeline.ready(limit: 24000), into: &out)
        }
        timeline.endSegment(at: 24000)
        // B: a tone of another phase, starting 20 ms before the join.
        for chunk in 0..<50 {
            tone(chunk * 480 + 77, 480).withUnsafeBufferPointer {
                timeline.place(0, $0, at: Int64(23040 + chunk * 480))
            }
            timeline.drain(upTo: timeline.ready(limit: .max), into: &out)
        }
        timeline.endSegment(at: 47040)
        timeline.drain(upTo: 47040, into: &out)
        #expect(out.count == 47040)
        let join = out[23000..<24500]
        #expect(largestStep(join) < 0.0144 * 1.5, "equal-power crossfade: steps stay within the tone's own")
        // Over the crossfade, A's and B's weights are cos and sin of the same angle.
        #expect(abs(out[23760] - (tone(23760, 1)[0] * 0.7071 + tone(23760 - 23040 + 77, 1)[0] * 0.7071)) < 0.01)
        #expect(timeline.counters.missingFrames == 0)
    }

    /// A join where B's audio starts only after its first frame: A fades out, B fades in, the
    /// silence between is counted, and nothing clicks.
    @Test func aJoinWithMissingAudioFadesWithoutAClick() {
        var timeline = AudioTimeline(channels: 2, sampleRate: 48000, gains: [1])
        var out: [Float] = []
        func stereo(_ mono: [Float]) -> [Float] { mono.flatMap { [$0, $0] } }
        for chunk in 0..<40 {
            stereo(tone(chunk * 480, 480)).withUnsafeBufferPointer { timeline.place(0, $0, at: Int64(chunk * 480)) }
        }
        timeline.endSegment(at: 20000)  // 800 frames after the last audio
        for chunk in 0..<20 {
            stereo(tone(chunk * 480 + 5, 480)).withUnsafeBufferPointer {
                timeline.place(0, $0, at: Int64(20960 + chunk * 480))
            }
        }
        timeline.endSegment(at: 30560)
        timeline.drain(upTo: 30560, into: &out)
        #expect(timeline.counters.missingFrames == 800 + 960)
        #expect(largestStep(out[...]) < 0.0144 * 1.5)
    }

    /// A source's pre-roll: audio from before the first frame is cut at the start, not counted as dropped,
    /// and the fade-in is spent on real audio from the start on.
    @Test func audioFromBeforeTheStartIsCutAndTheFadeInIsOnRealAudio() {
        var timeline = AudioTimeline(channels: 1, sampleRate: 48000, gains: [1])
        var out: [Float] = []
        for chunk in 0..<20 {
            tone(chunk * 480, 480).withUnsafeBufferPointer { timeline.place(0, $0, at: Int64(chunk * 480 - 2400)) }
        }
        timeline.endSegment(at: 4800)
        timeline.drain(upTo: 4800, into: &out)
        #expect(timeline.counters == AudioTimeline.Counters())
        #expect(Array(out[480..<4320]) == Array(tone(2400, 4800)[480..<4320]))
        #expect(abs(out[1]) < 0.01 && largestStep(out[...]) < 0.0144 * 1.5)
    }

    /// Samples lost while the timeline still follows a shift of the timestamps (16 ms, a quantum change): only what
    /// was lost is counted missing, and the following goes on after the join (the shift not yet followed was counted
    /// missing too, 14 ms more, and jumped over at once).
    @Test func aLossWhileFollowingAShiftCountsOnlyWhatWasLost() {
        var timeline = AudioTimeline(channels: 1, sampleRate: 48000, gains: [1])
        var out: [Float] = []
        var source = 0  // the source's own sample count
        for chunk in 0..<300 {
            if chunk == 110 { source += 256 }  // lost
            let stamp = source + (chunk >= 100 ? 768 : 0)
            tone(source, 256).withUnsafeBufferPointer {
                timeline.place(0, $0, at: Int64(stamp), discontinuity: chunk == 110)
            }
            source += 256
            timeline.drain(upTo: timeline.ready(limit: .max), into: &out)
        }
        // Within what the stretch took in by the join: 4 % of a chunk.
        #expect(
            abs(timeline.counters.missingFrames - 256) <= 12 && timeline.counters.droppedFrames == 0,
            "\(timeline.counters)")
        #expect(abs(Double(timeline.inputs[0].position! - Int64(source + 768))) < 48, "followed within 1 ms")
        #expect(largestStep(out[...]) < 0.0144 * 1.5)
    }

    /// Audio that never came in the middle of a segment (the source says so): counted, the audio before it fades out
    /// and what comes after it fades in (no click).
    @Test func aGapIsCountedAndFadedIn() {
        var timeline = AudioTimeline(channels: 1, sampleRate: 48000, gains: [1])
        var out: [Float] = []
        for chunk in 0..<40 where chunk < 10 || chunk >= 20 {
            let samples = tone(chunk * 480 + (chunk < 10 ? 0 : 100), 480)
            samples.withUnsafeBufferPointer {
                timeline.place(0, $0, at: Int64(chunk * 480), discontinuity: chunk == 20)
            }
        }
        timeline.endSegment(at: 19200)
        timeline.drain(upTo: 19200, into: &out)
        #expect(timeline.counters.missingFrames == 4800)
        #expect(abs(out[9601]) < 0.01 && largestStep(out[9000...]) < 0.0144 * 1.5)
    }

    /// Two inputs mixed with their gains; a stalled one does not hold the other back beyond the latency bound.
    @Test func mixingAndAStalledInput() {
        var timeline = AudioTimeline(channels: 1, sampleRate: 48000, gains: [1, 0.5])
        var out: [Float] = []
        for chunk in 0..<50 {
            [Float](repeating: 0.2, count: 480).withUnsafeBufferPointer {
                timeline.place(0, $0, at: Int64(chunk * 480))
            }
            if chunk < 10 {
                [Float](repeating: 0.2, count: 480).withUnsafeBufferPointer {
                    timeline.place(1, $0, at: Int64(chunk * 480))
                }
            }
            timeline.drain(upTo: timeline.ready(limit: .max), into: &out)
        }
        #expect(abs(out[2400] - 0.3) < 1e-6)
        #expect(
            out.count >= 50 * 480 - Int(timeline.latencyFrames) - timeline.fadeFrames,
            "the track went on without the stalled input")
        #expect(abs(out[out.count - 1] - 0.2) < 1e-6)
    }
}

@Suite struct DriftTests {
    /// A device running `ppm` fast (or slow) with ±1 ms of timestamp jitter, 20 ms chunks, for
    /// `minutes`: the samples stay within 10 ms of where their timestamps put them, and drift is
    /// stretched away, never cut. At 8 kHz (the controller works in time, not samples), so that
    /// half an hour of audio is quick to simulate.
    @Test(arguments: [(300.0, 30), (-1500.0, 2)])
    func driftStaysWithinTenMilliseconds(_ ppm: Double, _ minutes: Int) {
        let rate = 8000
        let chunkFrames = 160
        var timeline = AudioTimeline(channels: 1, sampleRate: rate, gains: [1])
        var out: [Float] = []
        var worst = 0.0
        var seed: UInt64 = 42
        let chunk = [Float](repeating: 0.1, count: chunkFrames)
        var atStart = AudioTimeline.Counters()
        for n in 0..<(minutes * 60 * 50) {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let jitter = (Double(seed >> 33) / Double(1 << 31) - 0.5) * Double(rate) / 500  // ±1 ms
            let trueTime = Double(n * chunkFrames) / (1 + ppm * 1e-6)  // in nominal frames
            if let position = timeline.inputs[0].position {
                worst = max(worst, abs(trueTime - Double(position)) * 1000 / Double(rate))
            }
            chunk.withUnsafeBufferPointer { timeline.place(0, $0, at: Int64((trueTime + jitter).rounded())) }
            if n == 0 { atStart = timeline.counters }
            timeline.drain(upTo: timeline.ready(limit: .max), into: &out)
            out.removeAll(keepingCapacity: true)
        }
        #expect(worst < 10, "worst offset \(worst) ms")
        #expect(
            timeline.counters.missingFrames == atStart.missingFrames && timeline.counters.droppedFrames == 0,
            "drift is stretched, never cut")
    }

    /// A source's timing shifts by 16 ms, later or earlier (PipeWire's quantum changing from 1024 to 256 when a
    /// low-latency client starts): the samples follow their timestamps, smoothly (stretched, never cut), within
    /// 10 ms of them a quarter of a second after the shift and within 1 ms from 0.8 s on; the result shows it.
    @Test(arguments: [16.0, -16.0])
    func aTimingShiftIsFollowedNotIgnored(_ shiftMs: Double) {
        let rate = 48_000
        let chunkFrames = 256
        var timeline = AudioTimeline(channels: 1, sampleRate: rate, gains: [1])
        var out: [Float] = []
        let chunk = [Float](repeating: 0.1, count: chunkFrames)
        let shiftAt = 2 * rate
        let shift = shiftMs * Double(rate) / 1000
        var worstAfterHalf = 0.0
        var worstAfterOne = 0.0
        for n in 0..<(6 * rate / chunkFrames) {
            let stamp = Double(n * chunkFrames) + (n * chunkFrames >= shiftAt ? shift : 0)
            if let position = timeline.inputs[0].position {
                let frames = stamp - Double(position) + timeline.inputs[0].stretcher.readPosition
                let offset = abs(frames) * 1000 / Double(rate)
                if n * chunkFrames >= shiftAt + rate / 4 { worstAfterHalf = max(worstAfterHalf, offset) }
                if n * chunkFrames >= shiftAt + rate * 4 / 5 { worstAfterOne = max(worstAfterOne, offset) }
            }
            chunk.withUnsafeBufferPointer { timeline.place(0, $0, at: Int64(stamp.rounded())) }
            timeline.drain(upTo: timeline.ready(limit: .max), into: &out)
        }
        #expect(
            worstAfterHalf < 10 && worstAfterOne < 1,
            "offset \(worstAfterHalf) ms from 0.25 s after the shift, \(worstAfterOne) ms from 0.8 s")
        #expect(timeline.counters.missingFrames == 0 && timeline.counters.droppedFrames == 0, "stretched, never cut")
        #expect(timeline.counters.maxDriftFrames * 1000 / Double(rate) > 10, "the shift shows in maxClockOffsetMs")
    }

    @Test func stretchingASineKeepsItSmooth() {
        var stretcher = Stretcher(channels: 1)
        var out: [Float] = []
        let input = tone(0, 48000)
        for start in stride(from: 0, to: 48000, by: 480) {
            input[start..<start + 480].withUnsafeBufferPointer { stretcher.process($0, step: 0.998, into: &out) }
        }
        #expect(abs(out.count - Int(48000 / 0.998)) <= 3)
        #expect(largestStep(out[...]) < 0.0144 * 1.01)
        // Interpolated values sit on the sine: compare with the exact tone at the stretched times.
        let errors = (100..<47000).map {
            abs(out[$0] - Float(0.25 * sin(2 * Double.pi * 440 * Double($0) * 0.998 / 48000)))
        }
        #expect(errors.max()! < 1e-3)
    }
}

@Suite struct RecordSetupTests {
    func parse(_ url: String?, _ info: [String: String] = [:]) throws(RecordOptions.Invalid) -> RecordOptions {
        try RecordOptions(url: url, setupInfo: info, defaultPath: { "/home/u/Videos/Broadcasts/x.mp4" })
    }

    @Test func defaultsAndContainers() throws {
        let options = try parse(nil)
        #expect(options.path == "/home/u/Videos/Broadcasts/x.mp4")
        #expect(options.container == .fragmentedMP4)
        #expect(
            options.video.preset == "veryfast" && options.video.tune == "zerolatency" && options.video.bitRate == nil)
        #expect(options.audio == .separate([.audioApp, .audioMic]))
        #expect(try parse("file:///tmp/a%20b.mkv").container == .matroska)
        #expect(try parse("/tmp/x.mp4", ["audio": "app,mic", "mix": "true", "micGain": "-6"]).audio == .mixed)
        #expect(abs(try parse("/tmp/x.mp4", ["micGain": "-6"]).gains[.audioMic]! - 0.501) < 0.001)
        #expect(try parse("/tmp/x.mp4", ["audio": "none"]).audio == .none)
        #expect(try parse("/tmp/x.mp4", ["size": "1280x720", "frameRate": "24"]).size?.width == 1280)
        #expect(options.video.codec == .h264 && options.video.crf == 23)
        #expect(try parse("/tmp/x.mp4", ["codec": "hevc"]).video.crf == 28, "each codec's own default quality")
        #expect(options.upload == nil)
        let upload = try #require(
            try parse(
                "/tmp/x.mp4",
                [
                    "upload": "https://h/in/", "uploadHeaders": "{\"B\": \"2\", \"A\": \"1\"}",
                    "uploadMaxRate": "800", "uploadAttempts": "2",
                ]
            ).upload)
        #expect(
            upload.url == "https://h/in/" && upload.headers == ["A: 1", "B: 2"] && upload.maxBytesPerSecond == 100_000
                && upload.attempts == 2)
        #expect(
            try parse("/tmp/x.mp4", ["upload": "http://h/x", "uploadHeaders": "Authorization: Bearer a:b"]).upload?
                .headers
                == ["Authorization: Bearer a:b"])
        #expect(HTTPUpload.destination("https://h/in/", fileName: "take one.mp4") == "https://h/in/take%20one.mp4")
        #expect(HTTPUpload.destination("https://h/in/x.mp4", fileName: "take.mp4") == "https://h/in/x.mp4")
        // The answers worth trying again: the server busy or away for a while, never a refusal.
        #expect([408, 429, 500, 503, 507].allSatisfy(HTTPClient.retries))
        #expect(![400, 401, 403, 404, 413].contains(where: HTTPClient.retries))
        #expect(HTTPClient.describe(status: 507) == "HTTP 507 Insufficient Storage")
        #expect(HTTPClient.describe(status: 599) == "HTTP 599")
        let av1 = try parse("/tmp/x.mp4", ["codec": "AV1", "crf": "63"]).video
        #expect(av1.codec == .av1 && av1.crf == 63)
    }

    @Test(
        arguments: [
            ("rtmp://host/app", [:], "not a file"),
            ("/tmp/x.avi", [:], ".mp4"),
            ("/tmp/x.mp4", ["preset": "quick"], "preset 'quick'"),
            ("/tmp/x.mp4", ["size": "1279x720"], "both even"),
            ("/tmp/x.mp4", ["audio": "speakers"], "audio 'speakers'"),
            ("/tmp/x.mp4", ["codec": "vp9"], "codec 'vp9': h264 (libx264), hevc (libx265) or av1"),
            ("/tmp/x.mp4", ["codec": "hevc", "crf": "52"], "crf '52': HEVC constant quality"),
            ("/tmp/x.mp4", ["codec": "av1", "tune": "film"], "tune 'film': for av1, one of none, zerolatency, psnr"),
            ("/tmp/x.mp4", ["crf": "99"], "crf '99'"),
            ("/tmp/x.mp4", ["keyframeInterval": "0.05"], "keyframeInterval '0.05': seconds between keyframes (0.1-60)"),
            ("/tmp/x.mp4", ["keyframeInterval": "nan"], "keyframeInterval 'nan'"),
            ("/tmp/x.mp4", ["colour": "red"], "unknown setup field 'colour'"),
            ("/tmp/x.mp4", ["upload": "ftp://h/x"], "upload 'ftp://h/x': an http:// or https:// URL"),
            ("/tmp/x.mp4", ["upload": "ftp://u:pw@h/"], "upload 'ftp://***@h/'"),
            ("/tmp/x.mp4", ["uploadHeaders": "X: y"], "uploadHeaders, uploadMaxRate and uploadAttempts need upload"),
            (
                "/tmp/x.mp4", ["upload": "http://h/", "uploadHeaders": "{\"X\": 1}"],
                "uploadHeaders: 'Name: value', or a JSON object"
            ),
        ] as [(String, [String: String], String)])
    func badSettingsSayWhatIsWrong(_ url: String, _ info: [String: String], _ expected: String) {
        #expect {
            _ = try parse(url, info)
        } throws: { error in
            "\(error)".contains(expected)
        }
    }

    @Test func videosFolderFromUserDirs() throws {
        let path = "/tmp/user-dirs-\(getpid()).dirs"
        defer { unlink(path) }
        let text =
            "# written by xdg-user-dirs-update\nXDG_DESKTOP_DIR=\"$HOME/Desktop\"\nXDG_VIDEOS_DIR=\"$HOME/Filme\"\n"
        let file = try #require(fopen(path, "w"))
        fputs(text, file)
        fclose(file)
        #expect(UserDirectories.entry(file: path, key: "XDG_VIDEOS_DIR", home: "/home/u") == "/home/u/Filme")
        #expect(UserDirectories.entry(file: path, key: "XDG_MUSIC_DIR", home: "/home/u") == nil)
        #expect(OutputPath.defaultRecording().hasSuffix(".mp4"))
    }

    @Test func segmentsAreContiguousInFileTime() {
        var clock = SegmentClock()
        #expect(clock.placeFrame(pts: 5_000, duration: 100) == 0)
        #expect(clock.placeFrame(pts: 5_100, duration: 100) == 100)
        #expect(clock.fileTime(ofCapture: 4_990) == -10)
        #expect(clock.close() == 200)
        #expect(clock.fileTime(ofCapture: 9_000) == nil)
        #expect(clock.placeFrame(pts: 9_000, duration: 100) == 200, "the next segment starts where the last ended")
        #expect(clock.fileTime(ofCapture: 8_980) == 180)
        #expect(clock.close() == 300)
        #expect(clock.segments == [.init(start: 0, end: 200, frames: 2), .init(start: 200, end: 300, frames: 1)])
    }
}
