import BroadcastCapture
import BroadcastClient
import BroadcastCore
import BroadcastHandlerKit
import BroadcastInspect
import BroadcastSystem
import Testing

@Suite struct SyntheticSourceTests {
    func render(_ source: SyntheticSource, _ index: UInt64) throws -> [UInt8] {
        var frame = [UInt8](repeating: 0, count: source.videoFormat.frameByteCount)
        let pts = try frame.withUnsafeMutableBytes {
            try source.captureFrame(index: index, deadline: 1000 + index, into: $0.baseAddress!, previous: nil)
        }
        #expect(pts == 1000 + index, "a synthetic frame is stamped with its deadline")
        return frame
    }

    @Test(arguments: PixelFormat.allCases)
    func framesMoveAndCarryTheirNumber(_ format: PixelFormat) throws {
        let source = SyntheticSource(.init(video: VideoFormat(width: 320, height: 240, pixelFormat: format)))
        let a = try render(source, 1)
        let b = try render(source, 2)
        let again = try render(source, 1)
        #expect(a != b)
        #expect(a == again)
        // The pattern scrolls: frames 1 and 1+width/8 differ only in the frame number box.
        let wrapped = try render(source, 1 + 320 / 8)
        #expect(wrapped != a)
    }

    @Test func bt709LimitedRangeColours() {
        let source = SyntheticSource(.init(video: VideoFormat(width: 64, height: 64, pixelFormat: .nv12)))
        #expect(source.videoFormat.planes.count == 2)
    }

    @Test func audioChunksFollowTheClockExactly() throws {
        let source = SyntheticSource(.init(audio: AudioFormat(channels: 2, sampleFormat: .s16)))
        try source.begin(at: 1_000_000_000)
        #expect(source.nextAudioChunk(.audioApp, now: 1_005_000_000) == nil)
        #expect(source.nextAudioDeadline() == 1_010_000_000)
        var chunks: [AudioChunk] = []
        while let c = source.nextAudioChunk(.audioApp, now: 2_000_000_000) { chunks.append(c) }
        #expect(chunks.count == 100)
        #expect(chunks.first?.presentationTime == 1_000_000_000)
        #expect(chunks.last.map { $0.presentationTime + $0.duration } == 2_000_000_000)
        #expect(chunks.allSatisfy { $0.bytes.count == 480 * 4 })
        // A tone, not silence.
        #expect(chunks[0].bytes.contains { $0 != 0 })
        // Mic is its own stream with its own tone.
        let mic = source.nextAudioChunk(.audioMic, now: 2_000_000_000)
        #expect(mic != nil && mic!.bytes != chunks[0].bytes)
    }
}

@Suite struct InspectStatisticsTests {
    func record(_ stats: inout StreamStatistics, pts: UInt64, seq: UInt64, discontinuity: Bool = false) {
        let timing = SampleTiming(presentationTime: pts, duration: 10, sequence: seq, discontinuity: discontinuity)
        [UInt8](repeating: UInt8(seq), count: 13).withUnsafeBytes {
            stats.record(timing: timing, data: $0, receivedAt: pts + 5000)
        }
    }

    @Test func gapsDropsAndOrder() {
        var s = StreamStatistics()
        record(&s, pts: 100, seq: 0, discontinuity: true)
        record(&s, pts: 110, seq: 1)
        record(&s, pts: 200, seq: 2, discontinuity: true)  // a pause
        record(&s, pts: 210, seq: 5, discontinuity: true)  // two dropped
        record(&s, pts: 205, seq: 6)  // out of order
        s.finish()
        #expect(s.count == 5)
        #expect(s.gaps.count == 1)
        #expect(s.gaps[0].pts == 200 && s.gaps[0].discontinuity)
        #expect(s.sequenceGaps == 2)
        #expect(s.nonMonotonic == 1)
        #expect(s.discontinuities == 3)
        #expect(s.latencyMicroseconds?.p50 == 5)
        #expect(s.checksum != StreamStatistics().checksum)
    }

    @Test func fileURLs() {
        #expect(FileURL.path(from: "file:///tmp/a%20b.json") == "/tmp/a b.json")
        #expect(FileURL.path(from: "/tmp/x.json") == "/tmp/x.json")
        #expect(FileURL.path(from: "file:///tmp/x.json?token=1#f") == "/tmp/x.json")
        #expect(FileURL.path(from: "rtmp://host/app") == nil)
        #expect(FileURL.path(from: "file://relative") == nil)
        #expect(FileURL.path(from: nil) == nil)
    }
}

@Suite struct SetupFormTests {
    let manifest = HandlerManifest(
        name: "stream", displayName: "Stream", exec: "x",
        url: .init(prompt: "Server URL", default: "rtmp://localhost/live", required: true),
        setupFields: [
            .init(name: "key", prompt: "Stream key", required: true, secret: true),
            .init(name: "title", prompt: "Title", default: "My stream"),
            .init(name: "preset", prompt: "x264 preset", default: "veryfast", advanced: true),
        ])

    @Test func asksEverythingWhenNothingWasGivenAndKeepsSecretsQuiet() throws {
        var form = SetupForm(manifest: manifest, url: nil, values: [:])
        var asked: [(String, Bool)] = []
        let answers = ["", "s3cret", "Talk"]
        try form.fill(interactive: true) { q, secret in
            asked.append((q, secret))
            return asked.count <= answers.count ? answers[asked.count - 1] : ""
        }
        // Advanced fields keep their defaults unless given with --set.
        #expect(asked.map(\.0) == ["Server URL [rtmp://localhost/live]: ", "Stream key: ", "Title [My stream]: "])
        #expect(asked.map(\.1) == [false, true, false])
        #expect(form.url == "rtmp://localhost/live")
        #expect(form.values == ["key": "s3cret", "title": "Talk"])
    }

    @Test func asksOnlyForMissingRequiredFieldsWhenSomethingWasGiven() throws {
        var form = SetupForm(manifest: manifest, url: "rtmp://x/app", values: [:])
        var asked: [String] = []
        try form.fill(interactive: true) { q, _ in
            asked.append(q)
            return "k"
        }
        #expect(asked == ["Stream key: "])
    }

    @Test func anEmptyAnswerToARequiredFieldAsksAgain() throws {
        var form = SetupForm(manifest: manifest, url: "rtmp://x/app", values: [:])
        var asked: [String] = []
        let answers = ["", "", "k"]
        try form.fill(interactive: true) { q, _ in
            asked.append(q)
            return answers[asked.count - 1]
        }
        #expect(
            asked == [
                "Stream key: ", "Stream key (required; Ctrl-C cancels): ", "Stream key (required; Ctrl-C cancels): ",
            ])
        #expect(form.values == ["key": "k"])
        // Empty lines for ever end, as a cancellation.
        var endless = SetupForm(manifest: manifest, url: "rtmp://x/app", values: [:])
        let error = #expect(throws: BroadcastError.self) { try endless.fill(interactive: true) { _, _ in "" } }
        #expect(error?.code == .setupCancelled && error?.message.contains("Stream key") == true)
    }

    @Test func problemsNameTheOptionsAsTyped() {
        func problem(url: String? = "rtmp://x/app", _ values: [String: String]) -> String? {
            SetupForm(manifest: manifest, url: url, values: values).problem()?.message
        }
        #expect(
            problem(["key": "k", "titel": "Talk"])
                == "--set titel=Talk: handler 'stream' has no setup field 'titel'; did you mean --set title=Talk?")
        #expect(problem(["key": "k", "zzzzzz": "1"])?.hasSuffix("(its fields: key, title, preset)") == true)
        #expect(problem([:]) == "handler 'stream' needs setup field 'key' (Stream key): give --set key=VALUE")
        #expect(problem(["key": "k\u{7}"])?.hasPrefix("--set key=…: setup field 'key' is refused") == true)
        #expect(problem(["key": "k", "frameRate": "500"])?.hasPrefix("--set frameRate=…:") == true)
        #expect(problem(url: "rtmp://x/\u{1}", ["key": "k"])?.hasPrefix("--url: the URL is refused") == true)
        #expect(problem(["key": "k"]) == nil)
    }

    @Test func neverAsksWhenNotInteractive() throws {
        var form = SetupForm(manifest: manifest, url: nil, values: [:])
        try form.fill(interactive: false) { _, _ in
            Issue.record("asked")
            return nil
        }
        #expect(form.url == nil)
    }

    @Test func endOfInputCancels() {
        var form = SetupForm(manifest: manifest, url: nil, values: [:])
        let error = #expect(throws: BroadcastError.self) { try form.fill(interactive: true) { _, _ in nil } }
        #expect(error?.code == .setupCancelled)
    }

    @Test func assignments() throws {
        #expect(try SetupForm.parseAssignments(["a=1", "b=x=y"]) == ["a": "1", "b": "x=y"])
        #expect(throws: BroadcastError.self) { try SetupForm.parseAssignments(["novalue"]) }
    }
}
