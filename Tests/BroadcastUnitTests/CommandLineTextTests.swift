import BroadcastCore
import BroadcastProtocol
import Testing

@testable import BroadcastClient

/// What broadcastctl prints, in words and within the terminal: the progress line's fields dropped whole, results
/// with their units, a stream's connection as it happens, silent audio in one line.
@Suite struct CommandLineTextTests {
    func recording(state: BroadcastPhase = .live) -> StatusLine {
        var line = StatusLine.told(state, broadcast: 42, handler: "record")
        line.update(
            ServiceInfo(
                broadcast: 42, elapsed: 1, streams: ["video": StreamCounters(delivered: 30)],
                handler: [:]))
        line.update(
            ServiceInfo(
                broadcast: 42, elapsed: 62.4,
                streams: ["video": StreamCounters(delivered: 1872, dropped: 16)],
                handler: [
                    "bitRate": .number(2222), "bytes": .number(21_840_000),
                    "segment": .number(1),
                ],
                daemonMemory: 26_214_400))
        return line
    }

    /// At any width, the line holds whole fields: never a figure cut short ("30.0 fps  16", "…222 kbit/b").
    @Test func theProgressLineDropsWholeFieldsAtTheTerminalsWidth() {
        let line = recording()
        #expect(
            line.text == "live  broadcast 42 (record)  1:02.4  21.8 MB  dropped video 16  30.0 fps  2222 kbit/s  "
                + "daemon 25.0 MiB  segment 1", "\(line.text)")
        for columns in 20...160 {
            let fitted = line.fitted(columns: columns)
            #expect(fitted.count < columns || columns < 12, "\(columns): \(fitted)")
            // Fields kept whole, in their order; each left out is one that did not fit where it came.
            var kept = fitted.components(separatedBy: "  ")[...]
            var used = 0
            for field in line.fields {
                if kept.first == field {
                    used += (used == 0 ? 0 : 2) + field.count
                    kept.removeFirst()
                } else {
                    #expect(used + 2 + field.count >= columns, "\(columns): '\(field)' was left out of \(fitted)")
                }
            }
            #expect(kept.isEmpty, "\(columns): a field was cut: \(fitted)")
        }
        #expect(line.fitted(columns: 80) == "live  broadcast 42 (record)  1:02.4  21.8 MB  dropped video 16  30.0 fps")
        #expect(line.fitted(columns: 6) == "live")
    }

    @Test func aPausedRecordingShowsNoFrameRate() {
        let line = recording(state: .paused)
        #expect(!line.text.contains("fps") && !line.text.contains("kbit/s"), "\(line.text)")
        #expect(
            line.text.hasPrefix("paused  broadcast 42 (record)  1:02.4  21.8 MB  dropped video 16  daemon"),
            "\(line.text)")
    }

    /// A stream's frames dropped on the way out count as drops: never "no drops" beside "dropped frames 480".
    @Test func aStreamsUnsentFramesAreItsDrops() {
        var line = StatusLine.told(.live, broadcast: 14, handler: "stream")
        line.update(
            ServiceInfo(
                broadcast: 14, elapsed: 16, streams: ["video": StreamCounters(delivered: 480)],
                handler: [
                    "droppedFrames": .number(480), "connected": .bool(false),
                    "queueMs": .number(0),
                ]))
        #expect(
            line.text.contains("  dropped 480 unsent  ") && !line.text.contains("no drops")
                && !line.text.contains("dropped frames"), "\(line.text)")
    }

    @Test func resultsReadInWordsWithTheirUnits() {
        #expect(ResultText.words("droppedGOPsForLength") == "dropped GOPs for length")
        #expect(ResultText.words("gops") == "gops" && ResultText.words("httpStatus") == "http status")
        #expect(ResultText.words("HTTPStatus") == "HTTP status" && ResultText.words("lastGOPs") == "last GOPs")
        let chapter = JSONValue.object(["start": .number(3.2), "title": .string("bug")])
        let lines = ResultText.lines([
            "maxMemory": .number(268_435_456), "buffered": .number(32.6), "bytesSent": .number(406_844),
            "droppedGOPsForMemory": .number(0),
            "recording": .object([
                "path": .string("/v/r.mp4"), "bytes": .number(784_916), "duration": .number(14.62),
                "chapters": .array([chapter]),
            ]),
            "saves": .array([
                .object([
                    "path": .string("/v/s.mp4"), "duration": .number(5),
                    "chapters": .array([
                        .object([
                            "start": .number(1.5),
                            "title": .string("Mark 1"),
                        ])
                    ]),
                ])
            ]),
        ])
        #expect(
            lines == [
                "buffered: 0:32.6", "bytes sent: 0.4 MB", "dropped GOPs for memory: 0",
                "max memory: 268.4 MB", "recording:", "  path: /v/r.mp4", "  duration: 0:14.6",
                "  size: 0.8 MB", "  chapters:", "    start   title", "    0:03.2  bug",
                "saves:", "  path      chapters          duration",
                "  /v/s.mp4  Mark 1 at 0:01.5  0:05.0",
            ],
            "\(lines)")
        // A list too wide for a table (a long message in it) is shown item after item.
        let long = String(repeating: "why ", count: 30)
        let destination = JSONValue.object(["url": .string("srt://a:9"), "error": .string(long)])
        let wide = ResultText.lines(["destinations": .array([destination])])
        #expect(
            wide.first == "destinations:" && wide.dropFirst().first?.hasPrefix("  - error: why why") == true
                && wide.last == "    url: srt://a:9", "\(wide)")
        let result: [String: JSONValue] = [
            "file": .string("/v/a.mp4"), "duration": .number(85.04),
            "bytes": .number(12_400_000),
        ]
        #expect(ResultText.brief(result) == "/v/a.mp4 (1:25.0, 12.4 MB)")
    }

    @Test func aStreamSaysItsConnectionAsItHappens() {
        var report = ConnectionReport()
        #expect(
            report.update(["connected": .bool(false), "droppedFrames": .number(0)]).isEmpty,
            "still connecting: nothing to say")
        let refused = [
            "connected": JSONValue.bool(false),
            "lastError": .string("Connection setup failure: connection timed out"),
        ]
        #expect(
            report.update(refused)
                == ["stream: cannot connect: Connection setup failure: connection timed out; trying again"])
        #expect(report.update(refused).isEmpty, "said once, not at every update")
        #expect(report.update(["connected": .bool(true)]) == ["stream: connected"])
        #expect(report.update(["connected": .bool(true)]).isEmpty)
        #expect(
            report.update(["connected": .bool(false), "lastError": .string("Broken pipe")])
                == ["stream: connection lost: Broken pipe; reconnecting"])
        #expect(report.update(["connected": .bool(true)]) == ["stream: connected again"])
        #expect(
            report.update(["connected": .bool(false), "failed": .string("the connection was lost")])
                == ["stream: gave up: the connection was lost"])
        // A further destination is named by its URL.
        var two = ConnectionReport()
        let info: [String: JSONValue] = [
            "connected": .bool(true), "also1.connected": .bool(true),
            "also1.url": .string("rtmp://b/app"),
        ]
        #expect(two.update(info) == ["stream: connected", "stream: connected to rtmp://b/app"])
    }

    /// One short line per silent stream the broadcast takes, with the cause and what leaves the stream out of it.
    @Test func silentAudioIsOneLineWithThePerBroadcastRemedy() {
        let noMic = ["audioMic": "PipeWire has no microphone"]
        let both = noMic.merging(["audioApp": "'xclock' plays nothing through PipeWire"]) { a, _ in a }
        #expect(
            SilenceWarning.lines(noMic, audio: "app,mic")
                == ["warning: silent mic: PipeWire has no microphone (--set audio=app leaves it out)"])
        #expect(SilenceWarning.lines(noMic, audio: "app").isEmpty, "the mic is not recorded")
        #expect(
            SilenceWarning.lines(both, audio: "app,mic") == [
                "warning: silent app audio: 'xclock' plays nothing through PipeWire (--set audio=none leaves them out)",
                "warning: silent mic: PipeWire has no microphone (--set audio=none leaves them out)",
            ])
        #expect(
            SilenceWarning.lines(["audioMic": "PipeWire cannot be reached (connection refused)"], audio: nil)
                == [
                    "warning: silent mic: PipeWire cannot be reached (connection refused) "
                        + "(is PipeWire running? systemctl --user status pipewire)"
                ])
        #expect(SilenceWarning.lines(noMic, audio: "app,mic")[0].count <= 80)
    }

    /// Values a handler's manifest says it does not take are refused as typed, before any broadcast is asked for.
    @Test func setupValuesAreCheckedAgainstTheManifest() {
        let manifest = HandlerManifest(
            name: "record", displayName: "Record", exec: "x",
            setupFields: [
                .init(name: "crf", prompt: "Quality", type: .number),
                .init(name: "codec", prompt: "Codec", default: "h264", choices: ["h264", "hevc", "av1"]),
                .init(name: "key", prompt: "Key", required: true),
            ])
        func problem(_ values: [String: String], complete: Bool = true) -> String? {
            SetupForm(manifest: manifest, url: nil, values: values).problem(complete: complete)?.message
        }
        #expect(problem(["crf": "abc", "key": "k"]) == "--set crf=abc: setup field 'crf' is a number, not 'abc'")
        #expect(
            problem(["codec": "vp9", "key": "k"])
                == "--set codec=vp9: setup field 'codec' takes h264, hevc or av1, not 'vp9'")
        #expect(problem(["codec": "HEVC", "crf": "23", "key": "k"]) == nil)
        #expect(problem(["codc": "hevc"], complete: false)?.contains("did you mean --set codec=hevc?") == true)
        #expect(problem([:], complete: false) == nil, "a required field not given may still be asked for")
        #expect(problem([:])?.contains("give --set key=VALUE") == true)
        #expect(throws: BroadcastError.self) {
            try manifest.validate(url: nil, setupInfo: ["key": "k", "codec": "vp9"])
        }
    }

    /// Revision 2.9: status says which broadcasts share which encoder, by their handlers.
    @Test func statusSaysWhoSharesAnEncoder() {
        func status(_ id: UInt32, _ handler: String, encoder: UInt32? = nil, serves: [UInt32]? = nil)
            -> BroadcastStatus
        {
            var s = BroadcastStatus(state: .live, source: "synthetic")
            (s.broadcast, s.handler, s.encoder, s.serves) = (id, handler, encoder, serves)
            return s
        }
        let all = [
            status(1, "record", encoder: 3), status(2, "replay", encoder: 3), status(3, "encoder", serves: [1, 2]),
            status(4, "inspect"),
        ]
        #expect(SharedEncoderText.lines(all) == ["encoder 3: record (1), replay (2)"])
        #expect(
            all.map(SharedEncoderText.line) == [
                "encoding: shared, by encoder 3", "encoding: shared, by encoder 3", "shared encoder of: 1, 2", nil,
            ])
    }

    /// `encode=shared` is the default (#35): right after the last recording finished, its encoder is still finishing,
    /// serving none; broadcastd is idle all the same (status listed the encoder as a running broadcast).
    @Test func anEncoderFinishingAfterItsLastHandlerLeavesBroadcastdIdle() {
        func status(_ id: UInt32, _ state: BroadcastPhase, serves: [UInt32]? = nil) -> BroadcastStatus {
            var s = BroadcastStatus(state: state, source: "synthetic")
            (s.broadcast, s.serves) = (id, serves)
            return s
        }
        let recorded = status(1, .finished)
        #expect(SharedEncoderText.finishedWhenIdle([recorded, status(2, .finishing, serves: [])])?.count == 1)
        #expect(SharedEncoderText.finishedWhenIdle([recorded, status(2, .finished, serves: [])])?.count == 2)
        #expect(SharedEncoderText.finishedWhenIdle([recorded, status(2, .live, serves: [3]), status(3, .live)]) == nil)
        #expect(SharedEncoderText.finishedWhenIdle([status(2, .finishing, serves: [])]) == nil)
    }

    /// `stop --all` finishes the broadcasts that run but not their shared encoder, which broadcastd refuses to
    /// finish (it failed with record's encoder, encode=shared being the default).
    @Test func stopAllLeavesSharedEncodersToBroadcastd() {
        func status(_ id: UInt32, _ state: BroadcastPhase, serves: [UInt32]? = nil) -> BroadcastStatus {
            var s = BroadcastStatus(state: state, source: "synthetic")
            (s.broadcast, s.serves) = (id, serves)
            return s
        }
        let all = [status(1, .live), status(2, .live, serves: [1, 3]), status(3, .paused), status(4, .finished)]
        #expect(SharedEncoderText.toStop(all) == [1, 3])
    }
}
