import BroadcastCapture
import BroadcastCore
import Foundation
import Testing

/// Interleaved f32 or s16 samples of the first channel, as Doubles.
private func firstChannel(_ chunk: AudioChunk, _ format: AudioFormat) -> [Double] {
    chunk.bytes.withUnsafeBytes { raw in
        (0..<chunk.frameCount).map { i in
            switch format.sampleFormat {
            case .float32: Double(raw.load(fromByteOffset: i * format.bytesPerFrame, as: Float.self))
            case .s16: Double(raw.load(fromByteOffset: i * format.bytesPerFrame, as: Int16.self)) / 32767
            }
        }
    }
}

/// Every chunk of both streams due by `until`, fetched as the daemon does: at each `nextAudioDeadline()`.
private func chunks(_ source: SyntheticSource, until: UInt64) -> [SampleType: [AudioChunk]] {
    var result: [SampleType: [AudioChunk]] = [:]
    while let due = source.nextAudioDeadline(), due <= until {
        for stream in [SampleType.audioApp, .audioMic] {
            #expect(source.nextAudioChunk(stream, now: due - 1) == nil, "a chunk is not due before its end")
            guard let chunk = source.nextAudioChunk(stream, now: due) else {
                Issue.record("no chunk at its deadline")
                return result
            }
            #expect(chunk.presentationTime + chunk.duration == due)
            result[stream, default: []].append(chunk)
        }
    }
    return result
}

@Suite struct SyncMarkTests {
    /// The bytes of rows `rows` of every plane that carry pixels, per plane.
    func planeRows(_ frame: [UInt8], _ format: VideoFormat, rows: (Plane) -> Range<Int>) -> [[UInt8]] {
        format.planes.enumerated().map { p, plane in
            let rowBytes =
                switch (format.pixelFormat, p) {
                case (.bgrx, _): format.width * 4
                case (.i420, 1), (.i420, 2): format.width / 2
                default: format.width
                }
            return rows(plane).flatMap {
                Array(frame[(plane.offset + $0 * plane.stride)..<(plane.offset + $0 * plane.stride + rowBytes)])
            }
        }
    }

    func white(_ format: PixelFormat, plane: Int) -> UInt8 {
        format == .bgrx ? 255 : plane == 0 ? 235 : 128
    }

    func frame(_ source: SyntheticSource, index: UInt64, deadline: UInt64) throws -> [UInt8] {
        var frame = [UInt8](repeating: 0, count: source.videoFormat.frameByteCount)
        let pts = try frame.withUnsafeMutableBytes {
            try source.captureFrame(index: index, deadline: deadline, into: $0.baseAddress!, previous: nil)
        }
        #expect(pts == deadline)
        return frame
    }

    @Test(arguments: PixelFormat.allCases)
    func everyFpsthFrameFromBeginIsWhite(_ pixelFormat: PixelFormat) throws {
        let format = VideoFormat(width: 320, height: 240, pixelFormat: pixelFormat)
        let source = SyntheticSource(.init(video: format, framesPerSecond: 30, syncMarks: true))
        let plain = SyntheticSource(.init(video: format, framesPerSecond: 30))
        let interval = source.frameInterval
        func isWhite(_ frame: [UInt8]) -> Bool {
            // The lower half: below the frame number box.
            planeRows(frame, format) { $0.height / 2..<$0.height }.enumerated().allSatisfy { p, bytes in
                bytes.allSatisfy { $0 == white(pixelFormat, plane: p) }
            }
        }
        var start: UInt64 = 5_000_000_000
        try source.begin(at: start)
        var flashes: [UInt64] = []
        // The daemon's index runs on across pauses; the flash follows the deadline.
        for k in UInt64(0)..<65 {
            let f = try frame(source, index: 100 + k, deadline: start + k * interval)
            if isWhite(f) {
                flashes.append(k)
                // The frame number is still drawn in, at the top left.
                #expect(planeRows(f, format) { _ in 10..<12 }[0].contains { $0 != white(pixelFormat, plane: 0) })
            } else {
                let normal = try frame(plain, index: 100 + k, deadline: start + k * interval)
                #expect(f == normal, "other frames are the normal pattern")
            }
        }
        // At 30 fps frame 30 is 10 ns before the second; it is the mark (and the beep follows it).
        #expect(flashes == [0, 30, 60])
        // A resume starts the marks again from its own start.
        source.end()
        start += 10 * 1_000_000_000 + 12_345
        try source.begin(at: start)
        flashes = []
        for k in UInt64(0)..<35 {
            if isWhite(try frame(source, index: 200 + k, deadline: start + k * interval)) { flashes.append(k) }
        }
        #expect(flashes == [0, 30])
    }

    @Test(arguments: [0, 1000, -2500])
    func beepsStartAtTheFlashToTheSample(ppm: Int) throws {
        let format = AudioFormat(channels: 1, sampleFormat: .float32)
        let start: UInt64 = 1_000_000_123
        let source = SyntheticSource(.init(framesPerSecond: 30, audio: format, syncMarks: true, audioClockPPM: ppm))
        let steady = SyntheticSource(.init(framesPerSecond: 30, audio: format, audioClockPPM: ppm))
        try source.begin(at: start)
        try steady.begin(at: start)
        let period = 1e9 / (48_000 * (1 + Double(ppm) * 1e-6))
        let flashes = (0..<4).map { start + UInt64($0) * 30 * source.frameInterval }
        let allBeeped = chunks(source, until: start + 3_500_000_000)
        let allPlain = chunks(steady, until: start + 3_500_000_000)
        for stream in [SampleType.audioApp, .audioMic] {
            let beeped = allBeeped[stream] ?? []
            let plain = allPlain[stream] ?? []
            #expect(beeped.count == plain.count && beeped.map(\.presentationTime) == plain.map(\.presentationTime))
            // Runs of samples that differ from the steady tone (same phase), with their time from chunk pts + index.
            var runs: [(first: Int, count: Int, time: Double, indexInChunk: Int)] = []
            var n = 0
            var peak = 0.0
            var error = 0.0
            for (b, p) in zip(beeped, plain) {
                for (i, (x, y)) in zip(firstChannel(b, format), firstChannel(p, format)).enumerated() {
                    if x != y {
                        error = max(error, abs(x - y * SyntheticSource.beepLevel / SyntheticSource.toneLevel))
                        peak = max(peak, abs(x))
                        if let last = runs.last, last.first + last.count == n {
                            runs[runs.count - 1].count += 1
                        } else {
                            runs.append((n, 1, Double(b.presentationTime) + Double(i) * period, i))
                        }
                    }
                    n += 1
                }
            }
            #expect(error < 1e-5, "a beep is the same sine, louder")
            #expect(peak > 0.79 && peak < 0.8001)
            // Mark 0 starts at sample 0, whose value is sin(0) = 0 either way.
            #expect(runs.count == 4)
            #expect(runs.first.map { $0.first == 1 && $0.count == SyntheticSource.beepFrames - 1 } == true)
            for (m, run) in runs.enumerated().dropFirst() {
                #expect(run.count == SyntheticSource.beepFrames)
                // The onset is the first sample at or after the flash: within one sample period after it.
                let flash = Double(flashes[m])
                #expect(
                    run.time >= flash - 1 && run.time - period < flash + 1,
                    "mark \(m): onset \(run.time) vs flash \(flash)")
            }
            // Marks are whole seconds from the start, so at the nominal rate beeps start on chunk boundaries;
            // on a skewed clock the flash falls inside a chunk and so does the beep.
            if ppm != 0 {
                #expect(
                    runs.dropFirst().allSatisfy { $0.indexInChunk != 0 }, "the beep starts mid-chunk, at its sample")
            }
        }
    }
}

@Suite struct AudioClockSkewTests {
    @Test(arguments: [1000, -1000])
    func timestampsFollowTheSkewedClockWithoutPhaseJumps(ppm: Int) throws {
        let format = AudioFormat(channels: 2, sampleFormat: .float32)
        let source = SyntheticSource(.init(audio: format, audioClockPPM: ppm))
        let start: UInt64 = 7_000_000_000
        try source.begin(at: start)
        let all = chunks(source, until: start + 10_000_000_000)[.audioApp] ?? []
        // 48048 (47952) samples a second: 10 s are 1001 (999) chunks, ending exactly at 10 s.
        let perSecond = 48_000 + 48 * ppm / 1000
        #expect(all.count == 10 * perSecond / 480)
        #expect(all.last.map { $0.presentationTime + $0.duration } == start + 10_000_000_000)
        var n = 0
        var error = 0.0
        let step = 2 * Double.pi * SyntheticSource.appToneHz / 48_000
        for chunk in all {
            #expect(chunk.frameCount == 480)
            let expected = Double(start) + Double(n) * 1e9 / Double(perSecond)
            #expect(abs(Double(chunk.presentationTime) - expected) < 1000)
            // The sine goes on sample after sample at the nominal rate.
            for x in firstChannel(chunk, format) {
                error = max(error, abs(x - SyntheticSource.toneLevel * sin(Double(n) * step)))
                n += 1
            }
        }
        #expect(error < 1e-5)
    }

    /// The tone generator as it was before the skew and the beeps.
    struct ReferenceTone {
        let frequency: Double, format: AudioFormat
        var start: UInt64 = 0, produced: UInt64 = 0, phase = 0.0
        func time(_ n: UInt64) -> UInt64 { start + n * 1_000_000_000 / UInt64(format.sampleRate) }
        mutating func next() -> AudioChunk {
            let pts = time(produced)
            let end = time(produced + 480)
            var bytes = [UInt8](repeating: 0, count: 480 * format.bytesPerFrame)
            let step = 2 * Double.pi * frequency / Double(format.sampleRate)
            bytes.withUnsafeMutableBytes { raw in
                for i in 0..<480 {
                    let value = 0.25 * sin(phase)
                    phase += step
                    if phase > 2 * Double.pi { phase -= 2 * Double.pi }
                    for c in 0..<format.channels {
                        switch format.sampleFormat {
                        case .float32:
                            raw.storeBytes(
                                of: Float(value), toByteOffset: (i * format.channels + c) * 4, as: Float.self)
                        case .s16:
                            raw.storeBytes(
                                of: Int16(value * 32767), toByteOffset: (i * format.channels + c) * 2, as: Int16.self)
                        }
                    }
                }
            }
            produced += 480
            return AudioChunk(presentationTime: pts, duration: end - pts, frameCount: 480, bytes: bytes)
        }
    }

    @Test(arguments: [AudioFormat(channels: 2, sampleFormat: .s16), AudioFormat(channels: 1, sampleFormat: .float32)])
    func withoutSkewTheAudioIsUnchanged(format: AudioFormat) throws {
        let source = SyntheticSource(.init(audio: format, audioClockPPM: 0))
        var app = ReferenceTone(frequency: SyntheticSource.appToneHz, format: format)
        var mic = ReferenceTone(frequency: SyntheticSource.micToneHz, format: format)
        // Two live stretches, as around a pause.
        for start in [UInt64(3_000_000_007), 20_000_000_011] {
            try source.begin(at: start)
            app.start = start
            app.produced = 0
            mic.start = start
            mic.produced = 0
            for _ in 0..<700 {
                let due = source.nextAudioDeadline()!
                for (stream, expected) in [(SampleType.audioApp, app.next()), (.audioMic, mic.next())] {
                    let chunk = try #require(source.nextAudioChunk(stream, now: due))
                    #expect(chunk.presentationTime == expected.presentationTime && chunk.duration == expected.duration)
                    #expect(chunk.bytes == expected.bytes)
                }
            }
            source.end()
        }
    }
}
