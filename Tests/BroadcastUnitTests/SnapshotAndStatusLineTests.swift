import BroadcastCore
import BroadcastImage
import BroadcastProtocol
import Testing

@testable import BroadcastClient

@Suite struct SnapshotAndStatusLineTests {
    @Test func bt709ToRGB() {
        // 16x2 NV12: Y then interleaved CbCr. Limited-range black, white and BT.709 red, green, blue.
        let format = VideoFormat(width: 16, height: 2, pixelFormat: .nv12)
        var frame = [UInt8](repeating: 0, count: format.frameByteCount)
        let samples: [(y: UInt8, cb: UInt8, cr: UInt8, rgb: [UInt8])] = [
            (16, 128, 128, [0, 0, 0]), (235, 128, 128, [255, 255, 255]),
            (63, 102, 240, [255, 0, 0]), (173, 42, 26, [0, 255, 0]), (32, 240, 118, [0, 0, 255]),
        ]
        for (i, sample) in samples.enumerated() {
            for row in 0..<2 {
                frame[row * format.planes[0].stride + 2 * i] = sample.y
                frame[row * format.planes[0].stride + 2 * i + 1] = sample.y
            }
            frame[format.planes[1].offset + 2 * i] = sample.cb
            frame[format.planes[1].offset + 2 * i + 1] = sample.cr
        }
        let rgb = frame.withUnsafeBytes { RGB.convert($0, format: format, fullRange: false) }
        for (i, sample) in samples.enumerated() {
            for x in [2 * i, 2 * i + 1] {
                let pixel = rgb[(16 + x) * 3..<(16 + x) * 3 + 3]
                #expect(
                    zip(pixel, sample.rgb).allSatisfy { abs(Int($0) - Int($1)) <= 2 },
                    "sample \(i): \(Array(pixel)) for \(sample.rgb)")
            }
        }
        // Full range: Y 0 and 255 are black and white.
        let full = VideoFormat(width: 16, height: 2, pixelFormat: .i420)
        var i420 = [UInt8](repeating: 128, count: full.frameByteCount)
        for x in 0..<16 { i420[x] = x < 8 ? 0 : 255 }
        let fullRGB = i420.withUnsafeBytes { RGB.convert($0, format: full, fullRange: true) }
        #expect(Array(fullRGB[0..<3]) == [0, 0, 0] && Array(fullRGB[45..<48]) == [255, 255, 255])
        // BGRx is reordered, x dropped.
        let bgrx = VideoFormat(width: 16, height: 2, pixelFormat: .bgrx)
        var pixels = [UInt8](repeating: 0, count: bgrx.frameByteCount)
        pixels[0..<4] = [10, 20, 30, 99]
        #expect(
            Array(pixels.withUnsafeBytes { RGB.convert($0, format: bgrx, fullRange: false) }[0..<3]) == [30, 20, 10])
    }

    @Test func pngHeader() throws {
        let png = try PNG.encode(rgb: [UInt8](repeating: 200, count: 3 * 5 * 3), width: 5, height: 3)
        #expect(Array(png.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        #expect(Array(png[12..<16]) == Array("IHDR".utf8))
        #expect(Array(png[16..<24]) == [0, 0, 0, 5, 0, 0, 0, 3])
        #expect(png[24] == 8 && png[25] == 2, "8-bit RGB")
        #expect(Array(png.suffix(8).prefix(4)) == Array("IEND".utf8))
    }

    @Test func statusLineFollowsTheEvents() {
        var line = StatusLine()
        #expect(line.text == "connecting")
        var status = BroadcastStatus(state: .live, source: "synthetic")
        status.broadcast = 4
        status.handler = "record"
        line.update(status)
        #expect(line.text == "live  broadcast 4 (record)")
        func info(_ elapsed: Double, _ frames: UInt64, late: UInt64? = nil) -> ServiceInfo {
            ServiceInfo(
                broadcast: 4, elapsed: elapsed,
                streams: [
                    "video": StreamCounters(delivered: frames, dropped: 2, late: late),
                    "audioApp": StreamCounters(delivered: 100),
                    "audioMic": StreamCounters(delivered: 100, dropped: 1),
                ],
                handler: ["bitRate": .number(2450), "segment": .number(1)], daemonMemory: 24_326_963)
        }
        line.update(info(1.0, 29))
        #expect(
            line.text
                == "live  broadcast 4 (record)  0:01.0  dropped video 2, mic 1  29.0 fps  2450 kbit/s  daemon 23.2 MiB  segment 1"
        )
        line.update(info(2.0, 59, late: 1))
        #expect(line.text.contains("0:02.0  dropped video 2 (1 late), mic 1  30.0 fps"), "\(line.text)")
        status.silentAudio = ["audioMic": "PipeWire has no microphone"]
        line.update(status)
        // Drops, silent streams and size come before the less telling figures, within 80 columns.
        #expect(
            line.text.hasPrefix(
                "live  broadcast 4 (record)  0:02.0  dropped video 2 (1 late), mic 1  silent: mic  30.0 fps"),
            "\(line.text)")
        #expect(line.text.prefix(80).contains("silent: mic"))
        status.silentAudio = nil
        status.state = .paused
        line.update(status)
        #expect(line.text.hasPrefix("paused  broadcast 4 (record)  0:02.0"))
        // A new broadcast starts its figures afresh.
        status.broadcast = 5
        line.update(status)
        #expect(line.text == "paused  broadcast 5 (record)")
        #expect(StatusLine.clock(3725.04) == "1:02:05" && StatusLine.clock(59.96) == "1:00.0")
    }

    /// A handler taking a shared encoder's packets (revision 2.9) gets no frames: its frame rate is that of the frames
    /// its file has by its time, as it reports them together (it showed 0.0 fps; and by the elapsed time, which its
    /// once-a-second reports do not keep step with, 397 fps at the end), and their count is not a figure of its own.
    @Test func aSharedHandlersFrameRateIsItsFilesFrames() {
        var line = StatusLine.told(.live, broadcast: 3, handler: "record")
        let reports = [(1.0, 1.0, 30.0, "30.0"), (2.0, 2.0, 59.0, "29.0"), (2.1, 3.0, 89, "30.0")]
        for (elapsed, recorded, frames, fps) in reports {
            line.update(
                ServiceInfo(
                    broadcast: 3, elapsed: elapsed,
                    streams: ["video": StreamCounters(), "encoded": StreamCounters(delivered: UInt64(frames) * 2)],
                    handler: ["videoFrames": .number(frames), "recorded": .number(recorded), "segment": .number(1)]))
            #expect(line.text.hasSuffix("no drops  \(fps) fps  segment 1"), "\(line.text)")
            #expect(!line.text.contains("video frames"), "\(line.text)")
        }
    }

    @Test func theWatchLineSaysSizeAndEveryFigureWithItsUnit() {
        var line = StatusLine.told(.live, broadcast: 2, handler: "record")
        line.update(
            ServiceInfo(
                broadcast: 2, elapsed: 62.4, streams: ["video": StreamCounters(delivered: 1872)],
                handler: [
                    "bitRate": .number(2800), "bytes": .number(21_840_000), "recorded": .number(62.4),
                    "clockOffsetMs": .number(0.3), "queueBytes": .number(2_000_000), "uploadRetryIn": .number(4),
                ],
                daemonMemory: 26_214_400))
        #expect(
            line.text
                == "live  broadcast 2 (record)  1:02.4  21.8 MB  no drops  30.0 fps  2800 kbit/s  daemon 25.0 MiB  "
                + "clock offset 0.3 ms  queue bytes 2.0 MB  upload retry in 4 s", "\(line.text)")
    }

    @Test func aResultReadsInWords() {
        let lines = ResultText.lines([
            "file": .string("/v/a.mp4"), "duration": .number(85.04), "bytes": .number(12_400_000),
            "audioTracks": .array([
                .object(["name": .string("audioApp"), "missingMs": .number(0)]),
                .object(["name": .string("audioMic"), "missingMs": .number(120.5)]),
            ]),
            "videoFrames": .number(2551), "videoCodec": .string("h264"),
        ])
        #expect(
            lines == [
                "file: /v/a.mp4", "duration: 1:25.0", "size: 12.4 MB", "audio tracks:",
                "  name       missing",
                "  app audio  0 ms", "  mic        120.5 ms", "video codec: h264", "video frames: 2551",
            ],
            "\(lines)")
    }

    @Test func aRedrawAfterANarrowingClearsTheRowsTheTerminalWrappedTheLinesOnto() {
        var lines = StatusLines()
        var status = BroadcastStatus(state: .live, source: "synthetic")
        status.broadcast = 1
        status.handler = "record"
        lines.update(status)
        status.broadcast = 2
        lines.update(status)
        _ = lines.redrawing(columns: 120, keeping: nil)
        // Two lines of 26 characters, at 10 columns: 3 rows each; up 5 rows, then clear to the end of the screen.
        let redrawn = lines.redrawing(columns: 10, keeping: nil)
        #expect(redrawn.hasPrefix("\u{1B}[5A\r\u{1B}[J"), "\(redrawn.debugDescription)")
        // Each line keeps the fields that fit whole: "broadcast 1 (record)" does not, at 10 columns.
        #expect(redrawn.hasSuffix("live\n\rlive"), "\(redrawn.debugDescription)")
    }
}

extension StatusLine {
    /// A status line told that `broadcast` of `handler` is in `state` (on the synthetic source).
    static func told(_ state: BroadcastPhase, broadcast: UInt32, handler: String) -> StatusLine {
        var line = StatusLine()
        var status = BroadcastStatus(state: state, source: "synthetic")
        status.broadcast = broadcast
        status.handler = handler
        line.update(status)
        return line
    }
}
