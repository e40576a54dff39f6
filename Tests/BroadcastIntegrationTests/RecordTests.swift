import BroadcastCapture
import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

/// What ffprobe and ffmpeg (decoders no one here wrote) find in a recording.
struct Recording {
    let path: String
    let scratch: String

    struct Stream: Decodable {
        var codec_type: String
        var codec_name: String
        var codec_tag_string: String?
        var profile: String?
        var width: Int?
        var height: Int?
        var channels: Int?
        var sample_rate: String?
        var color_range: String?
        var r_frame_rate: String?
        var avg_frame_rate: String?
        var tags: [String: String]?
    }
    struct Probe: Decodable {
        struct Format: Decodable {
            var format_name: String
            var duration: String?
        }
        var streams: [Stream]
        var format: Format
    }

    func probe() throws -> Probe {
        let result = try runTool(
            "/usr/bin/ffprobe", ["-v", "error", "-of", "json", "-show_streams", "-show_format", path])
        guard result.status == 0 else { throw HarnessError("ffprobe \(path): \(result.stderr)") }
        return try JSONDecoder().decode(Probe.self, from: Data(result.stdout.utf8))
    }

    /// Presentation times of the video frames, s.
    func frameTimes() throws -> [Double] {
        let result = try runTool(
            "/usr/bin/ffprobe",
            ["-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts_time", "-of", "csv=p=0", path])
        guard result.status == 0 else { throw HarnessError("ffprobe frames of \(path): \(result.stderr)") }
        return result.stdout.split(separator: "\n").compactMap { Double($0.split(separator: ",")[0]) }
    }

    /// Presentation times of the video keyframes (packets flagged K), and where the last video packet starts, s.
    func keyframeTimes() throws -> (keyframes: [Double], last: Double) {
        let result = try runTool(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-select_streams", "v:0",
                "-show_entries", "packet=pts_time,flags", "-of", "csv=p=0", path,
            ])
        guard result.status == 0 else { throw HarnessError("ffprobe packets of \(path): \(result.stderr)") }
        let packets = result.stdout.split(separator: "\n").compactMap { line -> (Double, Bool)? in
            let fields = line.split(separator: ",")
            return fields.count >= 2 ? Double(fields[0]).map { ($0, fields[1].hasPrefix("K")) } : nil
        }
        return (packets.filter(\.1).map(\.0), packets.map(\.0).max() ?? 0)
    }

    /// The longest time from a keyframe to the next, or to the last frame, s (infinity without a keyframe).
    func longestKeyframeGap() throws -> Double {
        let (keyframes, last) = try keyframeTimes()
        guard let first = keyframes.first else { return .infinity }
        return zip([first] + keyframes, keyframes + [last]).map { $1 - $0 }.max() ?? 0
    }

    /// Decodes with ffmpeg into a raw file and reads it back.
    private func decode(_ arguments: [String], _ name: String) throws -> Data {
        let out = scratch + "/" + name
        let result = try runTool(
            "/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", path] + arguments + [out], timeout: 120)
        guard result.status == 0 else { throw HarnessError("ffmpeg could not decode \(path): \(result.stderr)") }
        return try Data(contentsOf: URL(fileURLWithPath: out))
    }

    /// Every frame's luma plane as decoded, limited range as stored (no frame added or dropped).
    func lumaFrames(width: Int, height: Int) throws -> [[UInt8]] {
        let data = try decode(
            ["-map", "0:v:0", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "yuv420p"], "video.raw")
        let size = width * height
        let frame = size * 3 / 2
        return stride(from: 0, to: data.count - frame + 1, by: frame).map { [UInt8](data[$0..<($0 + size)]) }
    }

    /// The first channel of audio track `track`, float at 48 kHz.
    func audio(track: Int) throws -> [Float] {
        let data = try decode(["-map", "0:a:\(track)", "-af", "pan=mono|c0=c0", "-f", "f32le"], "audio\(track).raw")
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }
}

extension Recording {
    /// Times of the frames that are flashes (a mean luma over 200), s.
    func flashTimes(_ times: [Double], _ frames: [[UInt8]]) -> [Double] {
        zip(times, frames).filter { $0.1.reduce(0) { $0 + Int($1) } / $0.1.count > 200 }.map(\.0)
    }
}

/// Where each beep of `audio` (48 kHz) begins, s: the first sample over `threshold`, then `holdOff` samples passed
/// over (half a second).
func beepOnsets(_ audio: [Float], over threshold: Float = 0.5, holdOff: Int = 24000) -> [Double] {
    var onsets: [Double] = []
    var i = 0
    while i < audio.count {
        if abs(audio[i]) > threshold {
            onsets.append(Double(i) / 48000)
            i += holdOff
        } else {
            i += 1
        }
    }
    return onsets
}

/// Zero crossings per second: twice the frequency of a pure tone.
func dominantFrequency(_ samples: ArraySlice<Float>) -> Double {
    let crossings = zip(samples, samples.dropFirst()).filter { ($0 < 0) != ($1 < 0) }.count
    return Double(crossings) / 2 / (Double(samples.count) / 48000)
}

func rms(_ samples: ArraySlice<Float>) -> Double {
    (samples.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(1, samples.count))).squareRoot()
}

func number(_ value: JSONValue?) -> Double {
    if case .number(let n) = value { return n }
    return .nan
}

/// The record handler's result: each audio track's `missingMs`, the silence standing in for audio that never came.
func missingAudio(_ result: [String: JSONValue]) -> [Double] {
    guard case .array(let tracks) = result["audioTracks"] else { return [.nan] }
    return tracks.map { track in if case .object(let fields) = track { number(fields["missingMs"]) } else { .nan } }
}

extension DaemonHarness {
    /// Records to `path` with `setup`; `during(controller)` runs once live; then it waits `seconds` and finishes.
    /// Returns the finish error and the record handler's result.
    func record(
        to path: String, setup: [String: String] = [:], seconds: Double = 3,
        during: (ControllerClient) throws -> Void = { _ in }
    ) throws -> (error: BroadcastError?, result: [String: JSONValue]) {
        let controller = try subscribedController()
        let id = try start(handler: "record", url: "file://" + path, setupInfo: setup, on: controller)
        try awaitState(controller, .live)
        try during(controller)
        usleep(UInt32(seconds * 1e6))
        try controller.finish()
        let finished = try waitFor(controller, timeout: 30) {
            if case .finished(let f) = $0, f.broadcast == id { f } else { nil }
        }
        return (finished.error, finished.result ?? [:])
    }

    /// `live` seconds more live, then paused for `paused` seconds and live again, each change awaited.
    func pauseAndResume(_ controller: ControllerClient, after live: Double, for paused: Double) throws {
        usleep(UInt32(live * 1e6))
        try controller.pause()
        try awaitState(controller, .paused)
        usleep(UInt32(paused * 1e6))
        try controller.resume()
        try awaitState(controller, .live)
    }
}

extension Integration {
    @Suite(.serialized) struct RecordTests {
        static let width = 640, height = 360

        @Test func recordsH264AndTwoOpusTracksThatDecodeToWhatWasCaptured() throws {
            let daemon = try DaemonHarness([
                "--source", "synthetic", "--size", "\(Self.width)x\(Self.height)", "--fps", "30",
            ])
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/talk.mp4"
            let (error, result) = try daemon.record(to: path, seconds: 3)
            #expect(error == nil, "\(error?.message ?? "")")
            let file = Recording(path: path, scratch: daemon.runtime)
            let probe = try file.probe()
            #expect(probe.format.format_name.contains("mp4"))
            #expect(probe.streams.map(\.codec_name) == ["h264", "opus", "opus"])
            #expect(probe.streams[0].width == Self.width && probe.streams[0].height == Self.height)
            #expect(probe.streams[0].color_range == "tv", "limited range, as broadcastd converts by default")
            // Named for players, so that app and mic can be told apart: in MP4, as each track's handler name.
            #expect(
                probe.streams.map { $0.tags?["handler_name"] ?? "" } == ["VideoHandler", "App audio", "Microphone"],
                "\(probe.streams)")

            let duration = number(result["duration"])
            let times = try file.frameTimes()
            #expect(
                Double(times.count) == number(result["videoFrames"]), "every captured frame is in the file: \(result)")
            #expect(
                abs(times.last! + 1.0 / 30 - duration) < 1.0 / 30, "video ends within a frame of the recorded duration")
            // From the second frame on: MP4 starts the first frame at 0 and every stream 6.5 ms (the Opus
            // encoder's delay) later, so the first frame lasts that much longer.
            #expect(
                zip(times.dropFirst(), times.dropFirst(2)).allSatisfy { abs($1 - $0 - 1.0 / 30) < 0.001 },
                "30 fps, no frame missing")
            let keyframes = try file.keyframeTimes().keyframes
            #expect(try file.longestKeyframeGap() <= 2 + 1.0 / 30 + 0.001, "keyframes at \(keyframes)")

            // A decoded frame shows the synthetic pattern of its own frame number.
            let frames = try file.lumaFrames(width: Self.width, height: Self.height)
            func pattern(_ index: Int) throws -> [UInt8] {
                try syntheticLuma(index, width: Self.width, height: Self.height)
            }
            // The file starts at the first frame its encoder had (a shared encoder starts a few frames in).
            let first = try firstPattern(of: frames, width: Self.width, height: Self.height)
            let decoded = frames[45]
            let scores = try (40...50).map { (index: $0, psnr: psnr(decoded, try pattern(first + $0))) }
            let best = scores.max { $0.psnr < $1.psnr }!
            #expect(
                best.index == 45 && best.psnr >= 35,
                "frame 45 decodes as pattern \(first) + \(best.index) at \(best.psnr) dB: \(scores)")

            // App audio is the 440 Hz tone, mic audio the 880 Hz one, each at its level, for the whole duration.
            for (track, frequency) in [(0, 440.0), (1, 880.0)] {
                let audio = try file.audio(track: track)
                #expect(abs(Double(audio.count) / 48000 - duration) < 1.0 / 30)
                let middle = audio[24000..<120000]
                #expect(abs(dominantFrequency(middle) - frequency) < 2)
                #expect(abs(rms(middle) - 0.25 / 2.squareRoot()) < 0.02)
            }
        }

        /// Two pauses: one file of three segments, no time lost or added, and no click at the joins.
        @Test func pausesMakeSegmentsOfOneContinuousFile() throws {
            let daemon = try DaemonHarness([
                "--source", "synthetic", "--size", "\(Self.width)x\(Self.height)", "--fps", "30",
            ])
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/segments.mkv"
            let (error, result) = try daemon.record(to: path, seconds: 1.2) { controller in
                for _ in 0..<2 { try daemon.pauseAndResume(controller, after: 1.2, for: 0.7) }
            }
            #expect(error == nil, "\(error?.message ?? "")")
            guard case .array(let segments) = result["segments"] else {
                Issue.record("no segments in \(result)")
                return
            }
            #expect(segments.count == 3)
            let lengths = segments.map { segment -> Double in
                if case .object(let fields) = segment { return number(fields["duration"]) } else { return .nan }
            }
            let duration = number(result["duration"])
            #expect(abs(lengths.reduce(0, +) - duration) < 1.0 / 30)
            #expect(abs(duration - 3.6) < 0.3, "the 1.4 s spent paused are not in the file")
            // Audio up to the end of each segment's last frame reaches the handler before it hears of the pause or finish.
            #expect(
                missingAudio(result).allSatisfy { $0 < 1 }, "ms of audio missing per track: \(missingAudio(result))")

            let file = Recording(path: path, scratch: daemon.runtime)
            #expect(try file.probe().format.format_name.contains("matroska"))
            let times = try file.frameTimes()
            #expect(
                zip(times, times.dropFirst()).allSatisfy { abs($1 - $0 - 1.0 / 30) < 0.002 },
                "no frozen picture at the joins: \(times)")
            let audio = try file.audio(track: 0)
            #expect(abs(Double(audio.count) / 48000 - duration) < 1.0 / 30)
            // A 440 Hz tone at 0.25 moves at most 0.0144 a sample; coding adds a little. A click would jump far more.
            let steadyStep = zip(audio[30000..<40000], audio[30001..<40001]).map { abs($0 - $1) }.max()!
            var start = 0.0
            for length in lengths.dropLast() {
                start += length
                let join = Int(start * 48000)
                let around = audio[(join - 960)..<(join + 960)]
                let step = zip(around, around.dropFirst()).map { abs($0 - $1) }.max()!
                #expect(
                    step <= steadyStep * 1.5, "join at \(start) s: largest step \(step), the tone's own \(steadyStep)")
            }
        }

        /// The synthetic source flashes the picture and beeps at the same instant once a second, on an
        /// audio clock running 1000 ppm fast: in the file, each beep starts within 3 ms of its flash (it was
        /// 6 ms early: Opus's pre-skip was taken off twice, by the encoder's pts and by the container).
        @Test func aFlashAndABeepCapturedTogetherStayTogether() throws {
            let daemon = try DaemonHarness([
                "--source", "synthetic", "--size", "\(Self.width)x\(Self.height)", "--fps", "30",
                "--sync-marks", "--audio-clock-ppm", "1000",
            ])
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/sync.mp4"
            let (error, result) = try daemon.record(to: path, setup: ["audio": "app"], seconds: 12.5)
            #expect(error == nil, "\(error?.message ?? "")")
            let file = Recording(path: path, scratch: daemon.runtime)
            let times = try file.frameTimes()
            let frames = try file.lumaFrames(width: Self.width, height: Self.height)
            let flashes = file.flashTimes(times, frames)
            let audio = try file.audio(track: 0)
            let onsets = beepOnsets(audio)
            #expect(flashes.count >= 12, "flashes at \(flashes)")
            let pairs = flashes.dropFirst().map { flash in
                (flash, onsets.min { abs($0 - flash) < abs($1 - flash) } ?? .infinity)
            }
            let offsets = pairs.map { ($0.1 - $0.0) * 1000 }
            #expect(offsets.allSatisfy { abs($0) <= 3 }, "beep minus flash, ms: \(offsets)")
            if case .array(let tracks) = result["audioTracks"], case .object(let app) = tracks.first {
                #expect(number(app["maxClockOffsetMs"]) >= 0.5, "the 1000 ppm clock was seen and corrected")
            }
        }

        @Test func killingTheHandlerLeavesAFileThatPlaysToItsLastFragment() throws {
            let daemon = try DaemonHarness([
                "--source", "synthetic", "--size", "\(Self.width)x\(Self.height)", "--fps", "30",
            ])
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/killed.mp4"
            let controller = try daemon.subscribedController()
            let id = try daemon.start(handler: "record", url: path, on: controller)
            try daemon.awaitState(controller, .live)
            usleep(3_500_000)
            // The record handler, not a shared encoder (a process of its own) when it shares one.
            let handlers = daemon.children().filter {
                (try? String(contentsOfFile: "/proc/\($0)/cmdline", encoding: .utf8))?.contains("handler-record")
                    == true
            }
            #expect(handlers.count == 1)
            for pid in handlers { kill(pid, SIGKILL) }
            let error = try daemon.awaitFinish(controller, id)
            #expect(error != nil, "a killed handler finishes the broadcast with an error")
            let file = Recording(path: path, scratch: daemon.runtime)
            #expect(try file.probe().streams.count == 3)
            let times = try file.frameTimes()
            #expect(times.count >= 60, "at least the first two seconds' fragments decode: \(times.count) frames")
            #expect(try file.lumaFrames(width: Self.width, height: Self.height).count == times.count)
        }

        @Test func whenBroadcastdDiesTheHandlerFinishesTheFile() throws {
            let daemon = try DaemonHarness([
                "--source", "synthetic", "--size", "\(Self.width)x\(Self.height)", "--fps", "30",
            ])
            let path = daemon.runtime + "/orphan.mp4"
            let controller = try daemon.subscribedController()
            _ = try daemon.start(handler: "record", url: path, on: controller)
            try daemon.awaitState(controller, .live)
            usleep(2_000_000)
            let handlers = daemon.children()
            let killed = Date()
            kill(daemon.pid, SIGKILL)
            daemon.process.waitUntilExit()
            // Within a second, the handler notices, finishes the file and exits.
            while handlers.contains(where: isRunning) && Date().timeIntervalSince(killed) < 3 { usleep(10_000) }
            let finishedIn = Date().timeIntervalSince(killed)
            #expect(finishedIn < 1, "the handler exited \(finishedIn) s after broadcastd was killed")
            let file = Recording(path: path, scratch: daemon.runtime)
            let duration = Double(try file.probe().format.duration ?? "") ?? 0
            #expect(duration > 1.8, "the whole recording, trailer included: \(duration) s")
            #expect(try file.frameTimes().count >= 55)
            try? FileManager.default.removeItem(atPath: daemon.socketPath)
            _ = try? daemon.stop()
        }

        @Test func badTargetsFailAtTheStartWithWhatToDo() throws {
            let daemon = try DaemonHarness([
                "--source", "synthetic", "--size", "\(Self.width)x\(Self.height)", "--fps", "30",
            ])
            defer { _ = try? daemon.stop() }
            let existing = daemon.runtime + "/exists.mp4"
            try #require(FileManager.default.createFile(atPath: existing, contents: Data("keep me".utf8)))
            let controller = try daemon.subscribedController()
            for (path, expected) in [
                (daemon.runtime + "/no/such/folder/x.mp4", "does not exist"), (existing, "exists and is kept"),
                (daemon.runtime + "/x.avi", ".mp4"),
            ] {
                let error = try daemon.awaitFinish(
                    controller, try daemon.start(handler: "record", url: path, on: controller))
                #expect(error?.code == .handlerError)
                #expect(error?.message.contains(expected) == true, "\(error?.message ?? "no error")")
            }
            #expect(try String(contentsOfFile: existing, encoding: .utf8) == "keep me")
        }

        /// A 150 KB file system fills up mid-recording: the broadcast finishes with a message that
        /// says so, and what was written decodes.
        @Test func aFullDiskFinishesWithAClearErrorAndKeepsWhatWasWritten() throws {
            let daemon = try DaemonHarness([
                "--source", "synthetic", "--size", "\(Self.width)x\(Self.height)", "--fps", "30",
            ])
            defer { _ = try? daemon.stop() }
            let mount = try daemon.smallDisk("150k")
            let path = mount + "/full.mp4"
            let controller = try daemon.subscribedController()
            let id = try daemon.start(handler: "record", url: path, on: controller)
            let error = try daemon.awaitFinish(controller, id, timeout: 30)
            #expect(error?.message.contains("disk is full") == true, "\(error?.message ?? "no error")")
            #expect(error?.message.contains("stays playable") == true)
            let copy = daemon.runtime + "/full-copy.mp4"
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            #expect(try Recording(path: copy, scratch: daemon.runtime).frameTimes().count >= 30)
        }

        @Test func mixedAudioGoesIntoOneTrack() throws {
            let daemon = try DaemonHarness([
                "--source", "synthetic", "--size", "\(Self.width)x\(Self.height)", "--fps", "30", "--audio-channels",
                "1",
            ])
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/mixed.mp4"
            let (error, _) = try daemon.record(to: path, setup: ["mix": "true", "micGain": "-6"], seconds: 1.5)
            #expect(error == nil, "\(error?.message ?? "")")
            let file = Recording(path: path, scratch: daemon.runtime)
            let streams = try file.probe().streams
            #expect(streams.map(\.codec_name) == ["h264", "opus"])
            #expect(streams[1].channels == 1)
            #expect(streams[1].tags?["handler_name"] == "App audio and microphone", "\(streams[1])")
            let audio = try file.audio(track: 0)
            // 440 Hz at 0.25 plus 880 Hz at 0.125: RMS of the sum.
            #expect(abs(rms(audio[12000..<60000]) - (0.25 * 0.25 / 2 + 0.125 * 0.125 / 2).squareRoot()) < 0.02)
        }

        /// An unchanging X11 screen: the repeats the daemon flags are not encoded (the keyframes by time,
        /// every 2 s, still are, so fragments keep coming), the file stays the right length, and with no audio
        /// (--app-audio none --mic none) the file has no audio track.
        @Test func aStillScreenCostsAlmostNothing() throws {
            let x = try XServer(.xvfb, width: 640, height: 480)
            defer { x.stop() }
            let painter = try x.painter()
            try painter.bars()
            let daemon = try DaemonHarness([
                "--source", "x11", "--display", x.display, "--fps", "30", "--cursor", "hidden",
                "--app-audio", "none", "--mic", "none",
            ])
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/still.mp4"
            let (error, result) = try daemon.record(to: path, seconds: 3)
            #expect(error == nil, "\(error?.message ?? "")")
            let frames = number(result["videoFrames"])
            let encoded = number(result["encodedFrames"])
            #expect(frames >= 85)
            #expect(encoded <= 6, "\(encoded) of \(frames) frames encoded")
            #expect(number(result["repeatedFramesNotEncoded"]) == frames - encoded)
            let file = Recording(path: path, scratch: daemon.runtime)
            #expect(try file.probe().streams.map(\.codec_name) == ["h264"])
            let times = try file.frameTimes()
            #expect(Double(times.count) == encoded)
            let duration = Double(try file.probe().format.duration ?? "") ?? 0
            #expect(abs(duration - number(result["duration"])) < 1.0 / 30)
            let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? .max
            #expect(size < 60_000, "\(size) bytes for 3 s")
            // Matroska says the capture's rate (its default duration), not the few frames a still screen has over its
            // length (avg_frame_rate was 1.2 fps), so players are not misled.
            let mkv = daemon.runtime + "/still.mkv"
            #expect(try daemon.record(to: mkv, seconds: 1.5).0 == nil)
            let video = try #require(try Recording(path: mkv, scratch: daemon.runtime).probe().streams.first)
            #expect(video.r_frame_rate == "30/1" && video.avg_frame_rate == "30/1", "\(video)")
        }

        /// Scaled, at a lower frame rate, turned for display, to the default place when no URL is given.
        /// broadcastd --color-range full: the handler is told, and the H.264 stream says full range.
        @Test func fullRangeFramesMakeAFullRangeFile() throws {
            let x = try XServer(.xvfb, width: 640, height: 480)
            defer { x.stop() }
            let daemon = try DaemonHarness([
                "--source", "x11", "--display", x.display, "--fps", "30", "--color-range", "full",
                "--app-audio", "none", "--mic", "none",
            ])
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/full.mp4"
            let (error, _) = try daemon.record(to: path, seconds: 1)
            #expect(error == nil, "\(error?.message ?? "")")
            #expect(try Recording(path: path, scratch: daemon.runtime).probe().streams.first?.color_range == "pc")
        }

        @Test func videoOptionsShapeTheFileAndTheDefaultPlaceIsTheVideosFolder() throws {
            let videos = FileManager.default.temporaryDirectory.appendingPathComponent(
                "videos-\(UUID().uuidString.prefix(8))"
            ).path
            defer { try? FileManager.default.removeItem(atPath: videos) }
            let daemon = try DaemonHarness(
                ["--source", "synthetic", "--size", "\(Self.width)x\(Self.height)", "--fps", "30"],
                environment: ["XDG_VIDEOS_DIR": videos])
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "record", url: nil,
                setupInfo: ["size": "320x180", "frameRate": "15", "orientation": "90", "audio": "mic"],
                maxDuration: 2, on: controller)
            let finished = try daemon.waitFor(controller, timeout: 30) {
                if case .finished(let f) = $0, f.broadcast == id { f } else { nil }
            }
            #expect(finished.error == nil, "\(finished.error?.message ?? "")")
            guard case .string(let path) = finished.result?["file"] else {
                Issue.record("no file in the result")
                return
            }
            #expect(path.hasPrefix(videos + "/Broadcasts/") && path.hasSuffix(".mp4"), "\(path)")
            let file = Recording(path: path, scratch: daemon.runtime)
            let streams = try file.probe().streams
            #expect(streams.map(\.codec_name) == ["h264", "opus"])
            #expect(streams[0].width == 320 && streams[0].height == 180)
            let times = try file.frameTimes()
            #expect(abs(times.count - 30) <= 1, "15 fps for 2 s: \(times.count) frames")
            let rotation = try runTool(
                "/usr/bin/ffprobe",
                [
                    "-v", "error", "-select_streams", "v:0", "-show_entries", "stream_side_data=rotation",
                    "-of", "csv=p=0", path,
                ])
            #expect(rotation.stdout.contains("-90"), "display matrix: \(rotation.stdout)")
            #expect(abs(dominantFrequency(try file.audio(track: 0)[12000..<60000]) - 880) < 2, "the mic track")
        }
    }
}
