import BroadcastCapture
import BroadcastClient
import BroadcastCore
import BroadcastPipeWire
import BroadcastSystem
import Foundation
import Testing

/// Audio from a private PipeWire stack: app audio (the default sink's monitor) and the microphone
/// (the default source) as separate streams.
extension Integration {
    @Suite(.serialized) struct PipeWireAudioTests {
        /// Takes chunks from `stream` every 10 ms for `seconds`, as the daemon's loop does.
        func collect(_ stream: PipeWireAudioStream, seconds: Double) -> [AudioChunk] {
            var chunks: [AudioChunk] = []
            let end = MonotonicClock.now() + UInt64(seconds * 1e9)
            while MonotonicClock.now() < end {
                while let chunk = stream.take(now: MonotonicClock.now()) { chunks.append(chunk) }
                usleep(10_000)
            }
            return chunks
        }

        /// Channel 0 of interleaved float32 audio.
        func firstChannel(_ chunks: [AudioChunk], channels: Int) -> [Float] {
            chunks.flatMap { chunk in
                chunk.bytes.withUnsafeBytes { raw in
                    stride(from: 0, to: chunk.frameCount * channels, by: channels).map {
                        raw.loadUnaligned(fromByteOffset: $0 * 4, as: Float.self)
                    }
                }
            }
        }

        /// The frequency from upward zero crossings, and the RMS level.
        func analyse(_ samples: [Float]) -> (frequency: Double, rms: Double) {
            let crossings = zip(samples, samples.dropFirst()).filter { $0 < 0 && $1 >= 0 }.count
            let rms = (samples.reduce(0.0) { $0 + Double($1 * $1) } / Double(max(1, samples.count))).squareRoot()
            return (Double(crossings) * 48_000 / Double(max(1, samples.count)), rms)
        }

        @Test func appAudioAndTheMicrophoneArriveSeparatelyWithTheirOwnTonesOnOneClock() throws {
            let pipewire = try PipeWireHarness()
            setenv("PIPEWIRE_REMOTE", pipewire.socketPath, 1)
            defer { unsetenv("PIPEWIRE_REMOTE") }
            let arrival = try Wakeup()
            let app = PipeWireAudioStream(
                name: "app audio", target: .defaultDevice, format: AudioFormat(channels: 2, sampleFormat: .float32),
                capturesSink: true, arrival: arrival)
            let mic = PipeWireAudioStream(
                name: "mic", target: .defaultDevice, format: AudioFormat(channels: 2, sampleFormat: .float32),
                capturesSink: false, arrival: arrival)
            let session = PipeWireSession(streams: [app, mic])
            try session.start(at: MonotonicClock.now())
            // Both taken as the daemon's loop does: when PipeWire's thread signals that audio came, or when a
            // stream falls due for silence. Linking takes a moment: from the second second on, both tones must be there.
            var wakes = 0
            // With the time each chunk was taken.
            func collectBoth(seconds: Double) throws -> (app: [(AudioChunk, UInt64)], mic: [(AudioChunk, UInt64)]) {
                var chunks: (app: [(AudioChunk, UInt64)], mic: [(AudioChunk, UInt64)]) = ([], [])
                let end = MonotonicClock.now() + UInt64(seconds * 1e9)
                while MonotonicClock.now() < end {
                    let due = min(app.silenceDue, mic.silenceDue)
                    let now = MonotonicClock.now()
                    let wait = due > now ? Int32(min((due - now) / 1_000_000 + 1, 100)) : 0
                    if try Poller.wait([(arrival.descriptor.raw, .readable)], timeoutMilliseconds: wait)[0].readable {
                        arrival.acknowledge()
                        wakes += 1
                    }
                    while let chunk = app.take(now: MonotonicClock.now()) {
                        chunks.app.append((chunk, MonotonicClock.now()))
                    }
                    while let chunk = mic.take(now: MonotonicClock.now()) {
                        chunks.mic.append((chunk, MonotonicClock.now()))
                    }
                }
                return chunks
            }
            _ = try collectBoth(seconds: 1)
            wakes = 0
            let (appTaken, micTaken) = try collectBoth(seconds: 2)
            // A wake-up at least every PipeWire cycle (1024 or 2048 samples, as the graph settles: 21 or 43 ms).
            #expect(wakes > 40, "\(wakes) wake-ups in 2 s")
            session.stop()
            for (name, taken, expected, stream) in [
                ("app", appTaken, PipeWireHarness.appFrequency, app),
                ("mic", micTaken, PipeWireHarness.micFrequency, mic),
            ] {
                let chunks = taken.map(\.0)
                let (frequency, rms) = analyse(firstChannel(chunks, channels: 2))
                #expect(
                    abs(frequency - expected) < expected * 0.02,
                    "\(name): \(frequency) Hz, expected \(expected) (\(stream.status))\n\(pipewire.logs)")
                // ffmpeg's sine has amplitude 1/8: RMS 0.088, -21 dBFS. Through a sink's monitor PipeWire gives it
                // back 3 dB lower; within 4 dB of it is the right level (a wrong format or channel is far off).
                let level = 20 * log10(rms / 0.0884)
                #expect(abs(level) < 4, "\(name): RMS \(rms), \(level) dB from what was played")
                let covered = chunks.reduce(0) { $0 + $1.duration }
                #expect(covered > 1_900_000_000 && covered < 2_100_000_000, "\(name): \(covered) ns of audio in 2 s")
                // Continuous: each chunk starts where the last ended.
                let gaps = zip(chunks, chunks.dropFirst()).filter {
                    $0.presentationTime + $0.duration != $1.presentationTime
                }.count
                #expect(gaps == 0, "\(name): \(gaps) discontinuities")
                // On CLOCK_MONOTONIC, from PipeWire's timing: a source's chunk was captured until the cycle began;
                // the sink's monitor carries what the sink plays from the cycle's start on. Either way that is
                // moments before the loop, woken as the buffer is queued, takes the chunk.
                let since = taken.map { chunk, at in
                    Int64(at) - Int64(chunk.presentationTime + (name == "app" ? 0 : chunk.duration))
                }.sorted()
                #expect(
                    since[since.count / 2] > 0 && since[since.count / 2] < 10_000_000,
                    "\(name): \(Double(since[since.count / 2]) / 1e6) ms from a chunk's stamp to when it was taken, at the median"
                )
                #expect(stream.status.figures.dropped == 0, "\(name): \(stream.status)")
            }
            pipewire.stop()
        }

        /// A second of app audio (after one to settle) captured from `target` while the harness plays, besides
        /// its own two tones, 660 Hz into test_sink as the application `tone-660`: the first channel, and the stream.
        func captureApplication(_ target: String) throws -> (samples: [Float], stream: PipeWireAudioStream) {
            let pipewire = try PipeWireHarness()
            defer { pipewire.stop() }
            try pipewire.play(frequency: 660, into: "test_sink", application: "tone-660")
            setenv("PIPEWIRE_REMOTE", pipewire.socketPath, 1)
            defer { unsetenv("PIPEWIRE_REMOTE") }
            let app = PipeWireAudioStream(
                name: "app audio", target: .node(target), format: AudioFormat(channels: 2, sampleFormat: .float32),
                capturesSink: true)
            let session = PipeWireSession(streams: [app])
            try session.start(at: MonotonicClock.now())
            _ = collect(app, seconds: 1)
            let chunks = collect(app, seconds: 1)
            session.stop()
            return (firstChannel(chunks, channels: 2), app)
        }

        @Test func oneApplicationCanBeCapturedByItsName() throws {
            let (samples, app) = try captureApplication("tone-660")
            // Only that application: its tone alone at its level, not the sink's mix with the 440 Hz one.
            let (frequency, rms) = analyse(samples)
            #expect(abs(frequency - 660) < 660 * 0.02, "\(frequency) Hz (\(app.status))")
            #expect(abs(20 * log10(rms / 0.0884)) < 4, "RMS \(rms)")  // the mix would be 3 dB louder and two tones
        }

        /// An application by its program's name too (the client process's executable; here pw-cat, which
        /// pw-play is): every stream it plays, whatever application name each gives itself.
        @Test func anApplicationIsFoundByItsProgramsName() throws {
            let (samples, app) = try captureApplication("PW-CAT")
            // The harness's two tones (into test_sink and mic_in) and tone-660, each of amplitude 1/8.
            let levels = Dictionary(
                uniqueKeysWithValues: [440, 660, 880, 1000].map { ($0, amplitude(Double($0), in: samples)) })
            #expect(
                levels[440]! > 0.08 && levels[660]! > 0.08 && levels[880]! > 0.08 && levels[1000]! < 0.01,
                "\(levels) (\(app.status))")
        }

        /// A sink or a source named by its object.serial, as `pw-cli ls Node` shows it: `mic_in`, a sink that
        /// is not the default, whose 880 Hz becomes the app audio instead of the default sink's 440 Hz; and
        /// `test_mic`, the source.
        @Test func aSinkOrSourceIsFoundByItsSerial() throws {
            let pipewire = try PipeWireHarness()
            setenv("PIPEWIRE_REMOTE", pipewire.socketPath, 1)
            defer { unsetenv("PIPEWIRE_REMOTE") }
            let nodes = try pipewire.nodes()
            let (sink, source) = (try #require(nodes["mic_in"]).serial, try #require(nodes["test_mic"]).serial)
            let app = PipeWireAudioStream(
                name: "app audio", target: .node(sink), format: AudioFormat(channels: 2, sampleFormat: .float32),
                capturesSink: true)
            let mic = PipeWireAudioStream(
                name: "mic", target: .node(source), format: AudioFormat(channels: 2, sampleFormat: .float32),
                capturesSink: false)
            let session = PipeWireSession(streams: [app, mic])
            try session.start(at: MonotonicClock.now())
            _ = collect(app, seconds: 1)
            let appChunks = collect(app, seconds: 1)
            let micChunks = collect(mic, seconds: 1)
            session.stop()
            // Not found, either would carry silence.
            for (chunks, stream) in [(appChunks, app), (micChunks, mic)] {
                let (frequency, _) = analyse(firstChannel(chunks, channels: 2))
                #expect(
                    abs(frequency - PipeWireHarness.micFrequency) < PipeWireHarness.micFrequency * 0.02,
                    "\(stream.name): \(frequency) Hz (\(stream.status))")
            }
            pipewire.stop()
        }

        /// An application by name, in any case: every one of its playback streams, mixed by PipeWire, as they
        /// come and go, and nothing else (not the sink's other tone, not another application); mono averages
        /// the two channels rather than adding them.
        @Test func everyStreamOfAnApplicationIsCapturedAsTheyComeAndGo() throws {
            let pipewire = try PipeWireHarness()
            let first = try pipewire.play(frequency: 660, into: "test_sink", application: "Tone-App")
            try pipewire.play(frequency: 1320, into: "test_sink", application: "other-app")
            setenv("PIPEWIRE_REMOTE", pipewire.socketPath, 1)
            defer { unsetenv("PIPEWIRE_REMOTE") }
            let app = PipeWireAudioStream(
                name: "app audio", target: .node("tone-app"), format: AudioFormat(channels: 2, sampleFormat: .float32),
                capturesSink: true)
            let mono = PipeWireAudioStream(
                name: "mono", target: .node("tone-app"), format: AudioFormat(channels: 1, sampleFormat: .float32),
                capturesSink: true)
            let session = PipeWireSession(streams: [app, mono])
            try session.start(at: MonotonicClock.now())
            var chunks: [AudioChunk] = []
            var monoChunks: [AudioChunk] = []
            /// The stereo stream's first channel over the next `seconds`, after `settle` seconds.
            func window(settle: Double, seconds: Double) -> [Float] {
                var taken: [AudioChunk] = []
                let end = MonotonicClock.now() + UInt64((settle + seconds) * 1e9)
                let from = MonotonicClock.now() + UInt64(settle * 1e9)
                while MonotonicClock.now() < end {
                    let now = MonotonicClock.now()
                    while let chunk = app.take(now: now) {
                        chunks.append(chunk)
                        if now >= from { taken.append(chunk) }
                    }
                    while let chunk = mono.take(now: now) { monoChunks.append(chunk) }
                    usleep(10_000)
                }
                return firstChannel(taken, channels: 2)
            }
            let one = window(settle: 1, seconds: 1)
            let monoOne = firstChannel(Array(monoChunks.suffix(50)), channels: 1)
            try pipewire.play(frequency: 1000, into: "test_sink", application: "Tone-App")
            let two = window(settle: 0.5, seconds: 1)
            pipewire.kill(first)
            let last = window(settle: 0.5, seconds: 1)
            session.stop()
            func levels(_ samples: [Float]) -> [Int: Double] {
                Dictionary(
                    uniqueKeysWithValues: [440, 660, 1000, 1320].map { ($0, amplitude(Double($0), in: samples)) })
            }
            // A sine of amplitude 1/8 played; what is not that application's is not there.
            let (l1, l2, l3) = (levels(one), levels(two), levels(last))
            #expect(
                l1[660]! > 0.08 && l1[1000]! < 0.01 && l1[440]! < 0.01 && l1[1320]! < 0.01,
                "one stream: \(l1) (\(app.status))")
            #expect(l2[660]! > 0.08 && l2[1000]! > 0.08 && l2[440]! < 0.01 && l2[1320]! < 0.01, "two streams: \(l2)")
            #expect(l3[660]! < 0.01 && l3[1000]! > 0.08 && l3[440]! < 0.01 && l3[1320]! < 0.01, "the first gone: \(l3)")
            let monoLevel = amplitude(660, in: monoOne)
            #expect(
                abs(20 * log10(monoLevel / l1[660]!)) < 1,
                "mono \(monoLevel) against stereo \(l1[660]!): averaged, not added")
            let gaps = zip(chunks, chunks.dropFirst()).filter {
                $0.presentationTime + $0.duration != $1.presentationTime
            }.count
            #expect(gaps == 0, "\(gaps) gaps as streams came and went")
            #expect(app.status.figures.silentChunks == 0, "\(app.status)")
            pipewire.stop()
        }

        @Test func appAudioFollowsTheDefaultSinkWithoutSilenceGoingIn() throws {
            let pipewire = try PipeWireHarness()
            try pipewire.createSink("other_sink")
            try pipewire.play(frequency: 660, into: "other_sink")
            setenv("PIPEWIRE_REMOTE", pipewire.socketPath, 1)
            defer { unsetenv("PIPEWIRE_REMOTE") }
            let app = PipeWireAudioStream(
                name: "app audio", target: .defaultDevice, format: AudioFormat(channels: 2, sampleFormat: .float32),
                capturesSink: true)
            let session = PipeWireSession(streams: [app])
            try session.start(at: MonotonicClock.now())
            _ = collect(app, seconds: 1)
            let before = collect(app, seconds: 1)
            try pipewire.setDefault("other_sink")
            let during = collect(app, seconds: 1)
            let after = collect(app, seconds: 1)
            session.stop()
            #expect(abs(analyse(firstChannel(before, channels: 2)).frequency - 440) < 9)
            #expect(abs(analyse(firstChannel(after, channels: 2)).frequency - 660) < 13, "\(app.status)")
            let chunks = before + during + after
            // Across the switch the stream is linked anew, and what the new sink played meanwhile (12 to 41 ms here) was
            // not captured. No silence goes in for it (it would click): the first chunk from the new sink either follows
            // on, its stamp's shift (under 40 ms) passed on whole for the handler to follow by stretching, or, further,
            // it is a resync and carries the discontinuity flag (the handler fades across the gap and counts it missing).
            let joins = zip(chunks, chunks.dropFirst()).map { previous, chunk in
                (
                    jump: Int64(chunk.presentationTime) - Int64(previous.presentationTime + previous.duration),
                    flagged: chunk.discontinuity
                )
            }
            let followed = joins.allSatisfy { $0.flagged ? $0.jump >= 0 : abs($0.jump) < 40_000_000 }
            #expect(
                followed && joins.filter(\.flagged).count <= 1,
                "across the switch: \(joins.filter { abs($0.jump) > 1_000_000 || $0.flagged }); \(app.status)")
            #expect(app.status.figures.silentChunks == 0 && app.status.figures.resyncs <= 1, "\(app.status)")
            pipewire.stop()
        }

        /// Asked for s16 (broadcastd --audio-format s16), PipeWire converts: the same tone at the same level.
        @Test func s16IsWhatPipeWireDeliversWhenAskedFor() throws {
            let pipewire = try PipeWireHarness()
            setenv("PIPEWIRE_REMOTE", pipewire.socketPath, 1)
            defer { unsetenv("PIPEWIRE_REMOTE") }
            let app = PipeWireAudioStream(
                name: "app audio", target: .defaultDevice, format: AudioFormat(channels: 1, sampleFormat: .s16),
                capturesSink: true)
            let session = PipeWireSession(streams: [app])
            try session.start(at: MonotonicClock.now())
            _ = collect(app, seconds: 1)
            let chunks = collect(app, seconds: 1)
            session.stop()
            #expect(chunks.allSatisfy { $0.bytes.count == $0.frameCount * 2 }, "two bytes a frame")
            let samples = chunks.flatMap { chunk in
                chunk.bytes.withUnsafeBytes { raw in
                    (0..<chunk.frameCount).map {
                        Float(raw.loadUnaligned(fromByteOffset: $0 * 2, as: Int16.self)) / 32767
                    }
                }
            }
            let (frequency, rms) = analyse(samples)
            #expect(abs(frequency - PipeWireHarness.appFrequency) < 9, "\(frequency) Hz")
            #expect(abs(20 * log10(rms / 0.0884)) < 4, "RMS \(rms)")
            pipewire.stop()
        }

        @Test func aMissingMicrophoneGivesSilenceNotAGap() throws {
            let pipewire = try PipeWireHarness(tones: false)
            setenv("PIPEWIRE_REMOTE", pipewire.socketPath, 1)
            defer { unsetenv("PIPEWIRE_REMOTE") }
            let mic = PipeWireAudioStream(
                name: "mic", target: .node("no_such_microphone"),
                format: AudioFormat(channels: 1, sampleFormat: .float32), capturesSink: false)
            let session = PipeWireSession(streams: [mic])
            let start = MonotonicClock.now()
            try session.start(at: start)
            let chunks = collect(mic, seconds: 1)
            session.stop()
            let covered = chunks.reduce(0) { $0 + $1.duration }
            #expect(covered >= 700_000_000, "\(covered) ns of silence in 1 s")
            #expect(chunks.allSatisfy { $0.bytes.allSatisfy { $0 == 0 } })
            #expect(chunks.first?.presentationTime == start)
            #expect(mic.silentSince == start)
            pipewire.stop()
        }

        /// broadcastd on an X screen with PipeWire's audio, recorded: two Opus tracks, app audio and the
        /// microphone, each with its own tone from start to end; the microphone unplugged midway leaves
        /// silence in its track, not a gap, and the broadcast goes on.
        @Test func aScreenBroadcastCarriesBothAudioStreamsAndSurvivesTheMicGoingAway() throws {
            let pipewire = try PipeWireHarness()
            let x = try XServer()
            defer { x.stop() }
            let daemon = try DaemonHarness(
                ["--source", "x11", "--display", x.display, "--fps", "30"],
                environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let path = daemon.runtime + "/screen.mp4"
            // Sharing an encoder (the default): its finish waits for the encoder's silence of the mic, which comes a
            // quarter of a second behind once the mic is gone (it ended that much short).
            let id = try daemon.start(handler: "record", url: "file://" + path, on: controller)
            try daemon.awaitState(controller, .live)
            usleep(3_000_000)
            pipewire.kill("pw-loopback")  // the microphone goes away
            // Subscribers hear of it: a STATE_CHANGED whose status names the silent stream, and only that one.
            let silent = try daemon.waitFor(controller, timeout: 2) {
                if case .stateChanged(let s) = $0, let silent = s.silentAudio { silent } else { nil }
            }
            #expect(silent == ["audioMic": "PipeWire has no microphone"], "\(silent)")
            #expect(try daemon.controller().status().silentAudio?.keys.sorted() == ["audioMic"])
            usleep(1_500_000)
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, id) == nil)
            #expect(daemon.logs("mic (default): nothing from PipeWire for 200 ms"), "\(daemon.log)")

            let file = Recording(path: path, scratch: daemon.runtime)
            let probe = try file.probe()
            #expect(probe.streams.map(\.codec_name) == ["h264", "opus", "opus"], "\(probe.streams)")
            let duration = Double(probe.format.duration ?? "") ?? 0
            let app = try file.audio(track: 0)
            let mic = try file.audio(track: 1)
            for (name, samples) in [("app", app), ("mic", mic)] {
                #expect(
                    abs(Double(samples.count) / 48_000 - duration) < 0.1,
                    "\(name): \(Double(samples.count) / 48_000) s of \(duration) s")
            }
            // From 1 s to 2.5 s both tones are there, each in its own track.
            let steady = 48_000..<120_000
            #expect(
                abs(dominantFrequency(app[steady]) - PipeWireHarness.appFrequency) < 10,
                "app: \(dominantFrequency(app[steady])) Hz")
            #expect(
                abs(dominantFrequency(mic[steady]) - PipeWireHarness.micFrequency) < 10,
                "mic: \(dominantFrequency(mic[steady])) Hz")
            // After the microphone went away: silence in its track, although WirePlumber then offers the sink's
            // monitor as the default source; app audio goes on.
            let after = (mic.count - 48_000)..<(mic.count - 4_800)
            #expect(rms(mic[after]) < 0.001, "mic after unplugging: RMS \(rms(mic[after]))")
            #expect(rms(app[after]) > 0.05, "app audio after the mic went away: RMS \(rms(app[after]))")
        }

        /// A microphone's chunk reaches broadcastd a PipeWire cycle after its first sample (42.7 ms here). A pause
        /// and a finish wait for it: the recording's audio reaches the end of each segment's picture, with
        /// nothing missing (it used to lose about a cycle of the microphone at each).
        @Test func aPauseOrFinishWaitsForTheAudioCapturedBeforeIt() throws {
            let pipewire = try PipeWireHarness()
            defer { pipewire.stop() }
            let x = try XServer()
            defer { x.stop() }
            let daemon = try DaemonHarness(
                ["--source", "x11", "--display", x.display, "--fps", "30"],
                environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
            defer { _ = try? daemon.stop() }
            let (error, result) = try daemon.record(to: daemon.runtime + "/paused.mkv", seconds: 1.5) { controller in
                try daemon.pauseAndResume(controller, after: 1.5, for: 0.5)
            }
            #expect(error == nil, "\(error?.message ?? "")")
            let missing = missingAudio(result)
            #expect(
                missing.count == 2 && missing.allSatisfy { $0 < 2 },
                "ms of app audio and microphone missing: \(missing)")
        }

        /// broadcastd --source pipewire --pipewire-node: the node's frames, at its size and in its colour,
        /// at the broadcast's rate; a node that is not there refuses the broadcast and says how to list nodes.
        @Test func aPipeWireVideoNodeIsCapturedLikeAScreen() throws {
            let pipewire = try PipeWireHarness(tones: false)
            // 320x180: a debug build converts a whole 640x360 frame in about 40 ms, too slow for 30 fps.
            try pipewire.videoSource("test-video", width: 320, height: 180, color: 0x20c040)
            let daemon = try DaemonHarness(
                [
                    "--source", "pipewire", "--pipewire-node", "test-video", "--fps", "30", "--app-audio", "none",
                    "--mic", "none",
                ],
                environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath("node")
            let id = try daemon.start(
                handler: "inspect", url: path, setupInfo: ["frameFile": daemon.runtime + "/node.frame"], on: controller)
            try daemon.awaitState(controller, .live)
            usleep(2_000_000)
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, id) == nil)
            let summary = try InspectSummary.load(path)
            let video = try #require(summary.streams["video"])
            #expect(
                video.count >= 55 && video.sequenceGaps == 0,
                "\(video.count) frames in 2 s at 30 fps, \(video.sequenceGaps) lost")
            let dump = try #require(summary.lastFrame)
            let frame = try RGBFrame(dump: dump)
            #expect(frame.width == 320 && frame.height == 180)
            let psnr = frame.psnr { _, _ in (32, 192, 64) }
            #expect(psnr >= 35, "PSNR \(psnr) dB against the node's colour")

            // The node goes away mid-broadcast: the broadcast finishes with the reason.
            let again = try daemon.start(handler: "inspect", url: daemon.summaryPath("gone"), on: controller)
            try daemon.awaitState(controller, .live)
            usleep(500_000)
            pipewire.kill("gst-launch-1.0")
            let gone = try daemon.awaitFinish(controller, again, timeout: 10)
            #expect(
                gone?.code == .captureFailed && gone?.message.contains("node 'test-video'") == true
                    && gone?.message.contains("went away") == true,
                "\(String(describing: gone))")

            // At once, not after the 5 s wait for a first frame: WirePlumber drops a stream whose target is missing.
            let asked = MonotonicClock.now()
            let missing = try DaemonHarness(
                ["--source", "pipewire", "--pipewire-node", "no-such-node", "--app-audio", "none", "--mic", "none"],
                environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
            defer { _ = try? missing.stop() }
            let refused = #expect(throws: (any Error).self) {
                _ = try missing.controller().start(handler: "inspect", maxDuration: 1)
            }
            #expect(
                MonotonicClock.now() - asked < 3_000_000_000,
                "started and refused in \(Double(MonotonicClock.now() - asked) / 1e9) s")
            #expect(
                "\(String(describing: refused))".contains("node 'no-such-node'")
                    && "\(String(describing: refused))".contains("pw-cli ls Node"),
                "\(String(describing: refused))")
        }
    }
}
