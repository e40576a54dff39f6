import BroadcastCapture
import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension Integration {
    /// The `replay` handler through real processes, its saves judged by ffprobe and ffmpeg: a buffer of whole GOPs held to
    /// `length` and `maxMemory`, saved without re-encoding from a keyframe, in sync, while capture goes on.
    @Suite(.serialized) struct ReplayTests {
        static let width = 320, height = 180

        static func daemon(_ extra: [String] = [], environment: [String: String] = [:]) throws -> DaemonHarness {
            try DaemonHarness(
                ["--source", "synthetic", "--size", "\(width)x\(height)", "--fps", "30"] + extra,
                environment: environment)
        }

        /// Waits until `id` has been live `seconds`.
        static func waitLive(_ controller: ControllerClient, _ id: UInt32, _ seconds: Double) throws -> Double {
            let deadline = Date().addingTimeInterval(seconds * 2 + 30)
            while Date() < deadline {
                let status = try controller.status().broadcasts?.first { $0.broadcast == id }
                if let elapsed = status?.elapsed, elapsed >= seconds { return elapsed }
                usleep(100_000)
            }
            throw HarnessError("broadcast \(id) was not live for \(seconds) s in time")
        }

        static func save(_ daemon: DaemonHarness, _ arguments: [String]) throws -> [String: JSONValue] {
            let saved = try daemon.tool("broadcastctl", ["save", "--json"] + arguments)
            guard saved.status == 0,
                let answer = try? JSONDecoder().decode(CommandResult.self, from: Data(saved.stdout.utf8))
            else {
                throw HarnessError("broadcastctl save \(arguments): \(saved)")
            }
            return answer.result
        }

        func keyFrames(_ path: String) throws -> [Bool] {
            let result = try runTool(
                "/usr/bin/ffprobe",
                ["-v", "error", "-select_streams", "v:0", "-show_entries", "frame=key_frame", "-of", "csv=p=0", path])
            return result.stdout.split(separator: "\n").map { $0.hasPrefix("1") }
        }

        /// length=20 saved after 45 s: 20 to 22 s from a keyframe, the first frame the one captured 20 to 22 s before the
        /// save (the synthetic pattern says its number), each flash's beep within 10 ms of it; a second save of the last
        /// 5 s to a Matroska file; capture undisturbed; the result lists both.
        @Test func aSaveHoldsTheLastLengthFromAKeyframeInSyncAndASecondSaveWorks() throws {
            let daemon = try Self.daemon(
                ["--sync-marks"], environment: ["XDG_VIDEOS_DIR": NSTemporaryDirectory() + "/replay-videos-\(getpid())"]
            )
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "replay", url: nil, setupInfo: ["length": "20", "audio": "app"], on: controller)
            try daemon.awaitState(controller, .live)
            let before = try Self.waitLive(controller, id, 45)
            let first = try Self.save(daemon, [])
            guard case .string(let path)? = first["path"] else {
                Issue.record("no path in \(first)")
                return
            }
            defer { try? FileManager.default.removeItem(atPath: NSTemporaryDirectory() + "/replay-videos-\(getpid())") }
            #expect(
                path.hasPrefix(NSTemporaryDirectory() + "/replay-videos-\(getpid())/Replays/")
                    && path.hasSuffix(".mp4"), "\(path)")
            let duration = number(first["duration"])
            let start = number(first["start"])
            #expect(duration >= 20 && duration <= 22.1, "saved \(duration) s")
            #expect(
                start + duration >= before - 0.5 && start + duration <= before + 2,
                "ends at the save: \(start) + \(duration) vs \(before)")

            let file = Recording(path: path, scratch: daemon.runtime)
            let probe = try file.probe()
            #expect(abs((Double(probe.format.duration ?? "") ?? 0) - duration) < 0.1, "\(probe.format)")
            #expect(try keyFrames(path).first == true, "it starts on a keyframe")
            let times = try file.frameTimes()
            #expect(times.first == 0 && zip(times, times.dropFirst()).allSatisfy { $1 - $0 < 0.1 }, "from 0, no hole")
            // The replay's time 0 is its encoder's first frame, capture frame `origin` (a shared encoder starts a few
            // frames into the capture); flashes fall on whole seconds of capture, so the file's first flash gives it.
            // File frame `shown` (1, or 2 when 1 is a flash) shows the pattern captured `shown` intervals after the
            // save's first keyframe.
            let frames = try file.lumaFrames(width: Self.width, height: Self.height)
            func pattern(_ index: Int) throws -> [UInt8] {
                try syntheticLuma(index, width: Self.width, height: Self.height)
            }
            let flashes = file.flashTimes(times, frames)
            let firstFlash = Int((try #require(flashes.first, "no flash") * 30).rounded())
            let startFrame = Int((start * 30).rounded())
            let origin = ((-(startFrame + firstFlash)) % 30 + 30) % 30
            let shown = firstFlash == 1 ? 2 : 1
            let expected = startFrame + origin + shown
            let scores = try (expected - 4...expected + 4).map {
                (index: $0, psnr: psnr(frames[shown], try pattern($0)))
            }
            let best = scores.max { $0.psnr < $1.psnr }!
            #expect(
                best.psnr >= 35 && abs(best.index - expected) <= 1,
                "frame \(shown) decodes as pattern \(best.index), expected \(expected): \(scores)")
            let savedAt = Int((before * 30).rounded()) + origin
            #expect(
                best.index >= savedAt - 22 * 30 - 3 && best.index <= savedAt - 20 * 30 + 3,
                "45·30−600 (±GOP): \(best.index), saved at \(savedAt)")
            // Each flash's beep within 10 ms.
            let audio = try file.audio(track: 0)
            #expect(abs(Double(audio.count) / 48000 - duration) < 0.1, "audio as long as the video")
            let onsets = beepOnsets(audio)
            #expect(flashes.count >= 19, "flashes at \(flashes)")
            let offsets = flashes.dropFirst().map { flash in
                ((onsets.min { abs($0 - flash) < abs($1 - flash) } ?? .infinity) - flash) * 1000
            }
            #expect(offsets.allSatisfy { abs($0) <= 10 }, "beep minus flash, ms: \(offsets)")

            // A second save: the last 5 s, to a file named, in Matroska.
            let clip = daemon.runtime + "/clip.mkv"
            let second = try Self.save(daemon, ["--last", "5", clip])
            #expect(
                second["path"] == .string(clip) && number(second["duration"]) >= 5 && number(second["duration"]) <= 7.1,
                "\(second)")
            #expect(try Recording(path: clip, scratch: daemon.runtime).probe().format.format_name.contains("matroska"))
            #expect(try keyFrames(clip).first == true)

            let status = try controller.status().broadcasts?.first { $0.broadcast == id }
            #expect(status?.state == .live)
            let video = status?.streams?["video"]
            // The saves cost no frame: none dropped for the handler being behind, unless the machine stalled (the
            // loop was late too, as on a busy CI host), and then no more than the loop itself lost.
            let late = video?.late ?? 0
            let behind = (video?.dropped ?? .max) - late
            #expect(behind <= late, "the saves cost no frame: \(String(describing: video))")
            try controller.finish(broadcast: id)
            let finished = try daemon.waitFor(controller, timeout: 30) {
                if case .finished(let f) = $0, f.broadcast == id { f } else { nil }
            }
            #expect(finished.error == nil)
            guard case .array(let saves)? = finished.result?["saves"] else {
                Issue.record("no saves in \(String(describing: finished.result))")
                return
            }
            #expect(saves.count == 2)
        }

        /// Paused time is not in the buffer, and the saved file's time goes on without a hole across the pause.
        @Test func pausedTimeIsNotInTheBuffer() throws {
            let daemon = try Self.daemon()
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let id = try daemon.start(handler: "replay", url: nil, setupInfo: ["length": "30"], on: controller)
            try daemon.awaitState(controller, .live)
            usleep(2_500_000)
            try controller.pause(broadcast: id)
            try daemon.awaitState(controller, .paused)
            usleep(2_000_000)
            try controller.resume(broadcast: id)
            try daemon.awaitState(controller, .live)
            usleep(2_500_000)
            let path = daemon.runtime + "/paused.mp4"
            let saved = try Self.save(daemon, [path])
            let elapsed = try controller.status().elapsed ?? 0
            let duration = number(saved["duration"])
            #expect(
                abs(duration - elapsed) < 0.6 && duration < 6, "saved \(duration) s of \(elapsed) s live (2 s paused)")
            let times = try Recording(path: path, scratch: daemon.runtime).frameTimes()
            #expect(
                zip(times, times.dropFirst()).allSatisfy { abs($1 - $0 - 1.0 / 30) < 0.002 },
                "no hole at the pause: \(times)")
            try controller.finish(broadcast: id)
            #expect(try daemon.awaitFinish(controller, id) == nil)
        }

        /// maxMemory holds: the buffer never reports more, drops GOPs for it, and what it saves is shorter than `length`.
        @Test func maxMemoryHoldsTheBuffer() throws {
            let daemon = try Self.daemon()
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let limit = 200 * 1024
            let id = try daemon.start(
                handler: "replay", url: nil, setupInfo: ["length": "60", "maxMemory": "200K"], on: controller)
            try daemon.awaitState(controller, .live)
            var largest = 0.0
            var reports = 0
            let deadline = Date().addingTimeInterval(9)
            while Date() < deadline {
                if case .serviceInfo(let info)? = try controller.nextEvent(timeoutMilliseconds: 200),
                    info.broadcast == id,
                    let bytes = info.handler?["bufferBytes"]
                {
                    largest = max(largest, number(bytes))
                    reports += 1
                }
            }
            #expect(
                reports >= 5 && largest > 0 && largest <= Double(limit),
                "largest buffer reported: \(largest) in \(reports) reports")
            let saved = try Self.save(daemon, [daemon.runtime + "/small.mp4"])
            #expect(number(saved["duration"]) < 8.5 && number(saved["bytes"]) < Double(limit) * 1.2, "\(saved)")
            try controller.finish(broadcast: id)
            let finished = try daemon.waitFor(controller, timeout: 30) {
                if case .finished(let f) = $0, f.broadcast == id { f } else { nil }
            }
            #expect(
                number(finished.result?["droppedGOPsForMemory"]) > 0
                    && number(finished.result?["bufferBytes"]) <= Double(limit),
                "\(String(describing: finished.result))")
        }

        /// Five minutes of 1080p30 with `length=120` and a `maxMemory` below what 120 s of it take: the buffer never
        /// holds more than `maxMemory`, and once it is full the handler's resident memory stops growing (what it frees
        /// goes back to be used again: nothing piles up beside the buffer).
        @Test func fiveMinutesOf1080pStayWithinMaxMemory() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "1920x1080", "--fps", "30"])
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let limit = 4 << 20  // 120 s of the pattern take 7.2 MiB
            let id = try daemon.start(
                handler: "replay", url: nil, setupInfo: ["length": "120", "maxMemory": "4M"], on: controller)
            try daemon.awaitState(controller, .live)
            let handler = try #require(daemon.children().first)
            func residentKB() -> Double {
                let status = (try? String(contentsOfFile: "/proc/\(handler)/status", encoding: .utf8)) ?? ""
                let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
                return Double(line.split(separator: " ").dropFirst().first ?? "") ?? .nan
            }
            var largest = 0.0
            var full: Date?
            var samples: [(seconds: Int, rss: Double, buffer: Double)] = []
            let start = Date()
            var nextSample = 10.0
            while Date().timeIntervalSince(start) < 300 {
                if case .serviceInfo(let info)? = try controller.nextEvent(timeoutMilliseconds: 200),
                    info.broadcast == id,
                    let bytes = info.handler?["bufferBytes"]
                {
                    largest = max(largest, number(bytes))
                    if full == nil, number(bytes) > Double(limit) * 0.9 { full = Date() }
                }
                let elapsed = Date().timeIntervalSince(start)
                if elapsed >= nextSample {
                    samples.append((Int(elapsed), residentKB() / 1024, largest / 1_048_576))
                    nextSample += 10
                }
            }
            let report = samples.map { "\($0.seconds) s: \(Int($0.rss)) MiB (buffer \(Int($0.buffer)) MiB)" }.joined(
                separator: ", ")
            #expect(largest > 0 && largest <= Double(limit), "largest buffer reported: \(largest)")
            let filled = try #require(full.map { $0.timeIntervalSince(start) }, "the buffer never filled: \(report)")
            // Once full (and a minute on, for the allocator to settle): no more growth than a few MiB.
            let settled = samples.filter { Double($0.seconds) >= filled + 60 }.map(\.rss)
            #expect(
                settled.count >= 5 && settled.max()! - settled.first! <= 8,
                "resident memory once the buffer is full: \(report)")
            try controller.finish(broadcast: id)
            let finished = try daemon.waitFor(controller, timeout: 30) {
                if case .finished(let f) = $0, f.broadcast == id { f } else { nil }
            }
            #expect(number(finished.result?["droppedGOPsForMemory"]) > 0, "\(String(describing: finished.result))")
        }

        /// A replay beside a recording of the same capture: both whole, the recording every frame, the save playable.
        @Test func aReplayBesideARecordingLeavesBothIntact() throws {
            let daemon = try Self.daemon()
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let recording = daemon.runtime + "/beside.mkv"
            let record = try daemon.start(handler: "record", url: "file://" + recording, on: controller)
            try daemon.awaitState(controller, .live)
            let replay = try daemon.start(handler: "replay", url: nil, setupInfo: ["length": "3"], on: controller)
            _ = try Self.waitLive(controller, replay, 6)
            let clip = daemon.runtime + "/beside-replay.mp4"
            let saved = try Self.save(daemon, ["--broadcast", "\(replay)", clip])
            #expect(number(saved["duration"]) >= 3 && number(saved["duration"]) <= 5.1, "\(saved)")
            // Unaddressed, the save goes to the only broadcast that takes it: the recording does not.
            let unaddressed = daemon.runtime + "/unaddressed.mp4"
            let only = try daemon.tool("broadcastctl", ["save", "--last", "1", unaddressed])
            #expect(only.status == 0 && only.stdout == unaddressed + "\n", "\(only)")
            usleep(1_000_000)
            for id in [record, replay] { try controller.finish(broadcast: id) }
            // They finish in either order: both FINISHED events are taken as they come.
            var errors: [UInt32: BroadcastError?] = [:]
            while errors.count < 2 {
                let finished = try daemon.waitFor(controller, timeout: 30) {
                    if case .finished(let f) = $0 { f } else { nil }
                }
                errors[finished.broadcast] = finished.error
            }
            #expect(errors[record]! == nil && errors[replay]! == nil, "\(errors)")
            let times = try Recording(path: recording, scratch: daemon.runtime).frameTimes()
            #expect(
                times.count > 200 && zip(times, times.dropFirst()).allSatisfy { $1 - $0 < 0.1 },
                "the recording is whole: \(times.count) frames")
            let clipTimes = try Recording(path: clip, scratch: daemon.runtime).frameTimes()
            let clipStartsOnAKeyframe = try keyFrames(clip).first == true
            #expect(clipTimes.count >= 85 && clipStartsOnAKeyframe, "\(clipTimes.count) frames")
        }
    }
}

extension Integration.ReplayTests {
    func chapters(_ path: String) throws -> [(start: Double, title: String)] {
        let result = try runTool("/usr/bin/ffprobe", ["-v", "error", "-show_chapters", "-of", "compact", path])
        return result.stdout.split(separator: "\n").compactMap { line in
            let pairs = line.split(separator: "|").map { $0.split(separator: "=", maxSplits: 1).map(String.init) }
            let fields = Dictionary(pairs.filter { $0.count == 2 }.map { ($0[0], $0[1]) }) { a, _ in a }
            guard let start = fields["start_time"].flatMap(Double.init), let title = fields["tag:title"] else {
                return nil
            }
            return (start, title)
        }
    }

    /// `broadcastctl mark`: chapters that ffprobe sees in a Matroska recording and in a replay's Matroska saves, each
    /// from its mark; an MP4 recording lists them in its result, an MP4 save in its answer.
    @Test func marksAreChaptersInRecordingsAndSaves() throws {
        let daemon = try Self.daemon()
        defer { _ = try? daemon.stop() }
        let controller = try daemon.subscribedController()
        let recording = daemon.runtime + "/marked.mkv"
        let mp4 = daemon.runtime + "/marked.mp4"
        let record = try daemon.start(handler: "record", url: "file://" + recording, on: controller)
        try daemon.awaitState(controller, .live)
        let other = try daemon.start(handler: "record", url: "file://" + mp4, on: controller)
        let replay = try daemon.start(handler: "replay", url: nil, setupInfo: ["length": "10"], on: controller)
        _ = try Self.waitLive(controller, replay, 1.5)
        var times: [UInt32: [Double]] = [:]
        for text in ["bug here", ""] {
            for id in [record, other, replay] {
                let marked = try daemon.tool(
                    "broadcastctl", ["mark", "--json", "--broadcast", "\(id)"] + (text.isEmpty ? [] : [text]))
                let answer = try JSONDecoder().decode(CommandResult.self, from: Data(marked.stdout.utf8))
                times[id, default: []].append(number(answer.result["time"]))
                if id == other { #expect(answer.result["note"] != nil, "an MP4 recording says where its chapters go") }
            }
            usleep(1_500_000)
        }
        for (file, container) in [("marked-save.mp4", "mp4"), ("marked-save.mkv", "matroska")] {
            let saved = try Self.save(daemon, ["--broadcast", "\(replay)", daemon.runtime + "/" + file])
            let marks = times[replay]!.map { $0 - number(saved["start"]) }
            guard case .array(let listed)? = saved["chapters"] else {
                Issue.record("no chapters in \(saved)")
                continue
            }
            #expect(listed.count == 2, "the answer lists them: \(saved)")
            // An MP4 save holds no chapter track: libavformat's is a stray data stream (bin_data) that `ffmpeg -map 0`
            // cannot copy. The answer lists them.
            let streams = try runTool(
                "/usr/bin/ffprobe",
                [
                    "-v", "error", "-show_entries", "stream=codec_type",
                    "-of", "csv=p=0", daemon.runtime + "/" + file,
                ])
            #expect(streams.stdout == "video\naudio\naudio\n", "\(container): \(streams.stdout)")
            let found = try chapters(daemon.runtime + "/" + file)
            if container == "mp4" {
                #expect(found.isEmpty, "\(found)")
                continue
            }
            #expect(found.map(\.title) == ["Start", "bug here", "Mark 2"], "\(container): \(found)")
            #expect(
                zip(found.dropFirst().map(\.start), marks).allSatisfy { abs($0 - $1) < 0.01 },
                "\(container): \(found) vs \(marks)")
        }
        for id in [record, other, replay] { try controller.finish(broadcast: id) }
        var results: [UInt32: [String: JSONValue]] = [:]
        while results.count < 3 {
            let finished = try daemon.waitFor(controller, timeout: 30) {
                if case .finished(let f) = $0 { f } else { nil }
            }
            results[finished.broadcast] = finished.result ?? [:]
        }
        let found = try chapters(recording)
        #expect(found.map(\.title) == ["Start", "bug here", "Mark 2"], "\(found)")
        #expect(
            zip(found.dropFirst().map(\.start), times[record]!).allSatisfy { abs($0 - $1) < 0.01 },
            "\(found) vs \(times[record]!)")
        guard case .array(let listed)? = results[other]?["chapters"] else {
            Issue.record("no chapters in \(String(describing: results[other]))")
            return
        }
        #expect(listed.count == 2)
    }
}

extension Integration.ReplayTests {
    /// `save --and-record`: the buffer, then what comes after the save, in one file without a hole at the save, audio
    /// as long as the picture; a mark after it is a chapter of the file; the result names it.
    @Test func saveAndRecordMakesOneContinuousFile() throws {
        let daemon = try Self.daemon()
        defer { _ = try? daemon.stop() }
        let controller = try daemon.subscribedController()
        let id = try daemon.start(handler: "replay", url: nil, setupInfo: ["length": "3"], on: controller)
        try daemon.awaitState(controller, .live)
        _ = try Self.waitLive(controller, id, 5)
        let path = daemon.runtime + "/preroll.mkv"
        let saved = try Self.save(daemon, ["--and-record", path])
        #expect(
            saved["recording"] == .bool(true) && number(saved["buffered"]) >= 3 && number(saved["buffered"]) <= 5.1,
            "\(saved)")
        let again = try daemon.tool("broadcastctl", ["save", "--and-record", daemon.runtime + "/second.mkv"])
        #expect(again.status == 1 && again.stderr.contains("already recording into \(path)"), "\(again)")
        usleep(1_500_000)
        _ = try daemon.tool("broadcastctl", ["mark", "after the save"])
        usleep(1_500_000)
        try controller.finish(broadcast: id)
        let finished = try daemon.waitFor(controller, timeout: 30) {
            if case .finished(let f) = $0, f.broadcast == id { f } else { nil }
        }
        #expect(finished.error == nil)
        guard case .object(let recording)? = finished.result?["recording"] else {
            Issue.record("no recording in \(String(describing: finished.result))")
            return
        }
        let elapsed = number(finished.result?["duration"])
        let start = number(saved["start"])
        #expect(
            recording["path"] == .string(path) && abs(number(recording["duration"]) - (elapsed - start)) < 0.1,
            "\(recording), \(elapsed)")
        let file = Recording(path: path, scratch: daemon.runtime)
        let times = try file.frameTimes()
        #expect(try keyFrames(path).first == true && times.first == 0)
        #expect(
            zip(times, times.dropFirst()).allSatisfy { abs($1 - $0 - 1.0 / 30) < 0.002 },
            "no hole at the save: \(times)")
        #expect(
            abs((times.last ?? 0) + 1.0 / 30 - (elapsed - start)) < 0.1,
            "to the end: \(times.last ?? 0) vs \(elapsed - start)")
        let audio = try file.audio(track: 0)
        #expect(
            abs(Double(audio.count) / 48000 - (elapsed - start)) < 0.1,
            "audio all along: \(Double(audio.count) / 48000)")
        #expect(try chapters(path).map(\.title) == ["Start", "after the save"])
    }
}

extension Integration.ReplayTests {
    /// `buffer=disk`: a ring of NUT files in $XDG_CACHE_HOME/broadcastd, one per GOP, bounded by length and by bytes;
    /// a save from it is whole and in step (audio as long as the picture, a keyframe first), and the files go when
    /// the broadcast finishes. A ring left by a replay handler that no longer runs goes when the next one starts.
    @Test func aDiskBufferIsARingOfFilesBoundedLikeMemory() throws {
        let cache = NSTemporaryDirectory() + "/replay-cache-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let ended = Process()  // a handler's pid, and it no longer runs
        ended.executableURL = URL(fileURLWithPath: "/bin/true")
        try ended.run()
        ended.waitUntilExit()
        let abandoned = cache + "/broadcastd/replay-\(ended.processIdentifier)"
        let running = cache + "/broadcastd/replay-\(getpid())"
        for folder in [abandoned, running] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: folder + "/gop-1.nut", contents: Data(count: 4096)))
        }
        let daemon = try Self.daemon(environment: ["XDG_CACHE_HOME": cache])
        defer { _ = try? daemon.stop() }
        let controller = try daemon.subscribedController()
        let id = try daemon.start(
            handler: "replay", url: nil, setupInfo: ["length": "4", "buffer": "disk", "maxMemory": "1M"], on: controller
        )
        try daemon.awaitState(controller, .live)
        var largest = (files: 0.0, bytes: 0.0)
        var reports = 0
        var last: [String: JSONValue] = [:]
        let deadline = Date().addingTimeInterval(9)
        while Date() < deadline {
            if case .serviceInfo(let info)? = try controller.nextEvent(timeoutMilliseconds: 200), info.broadcast == id,
                let files = info.handler?["diskFiles"], let bytes = info.handler?["diskBytes"]
            {
                largest = (max(largest.files, number(files)), max(largest.bytes, number(bytes)))
                reports += 1
                last = info.handler ?? [:]
            }
        }
        #expect(
            !FileManager.default.fileExists(atPath: abandoned)
                && FileManager.default.fileExists(atPath: running + "/gop-1.nut"),
            "the abandoned ring is gone, the running one's kept")
        try FileManager.default.removeItem(atPath: running)
        let folder = try FileManager.default.contentsOfDirectory(atPath: cache + "/broadcastd")
        #expect(folder.count == 1 && folder[0].hasPrefix("replay-"), "\(folder)")
        let files = try FileManager.default.contentsOfDirectory(atPath: cache + "/broadcastd/" + folder[0])
        // One file per GOP held (x264 puts a keyframe at each scene cut of the scrolling pattern, besides every 2 s).
        #expect(
            files.allSatisfy { $0.hasSuffix(".nut") } && abs(Double(files.count) - number(last["gops"])) <= 1,
            "\(files), \(last)")
        #expect(number(last["buffered"]) >= 4 && number(last["buffered"]) <= 6.1, "the ring holds `length`: \(last)")
        #expect(
            reports >= 5 && largest.bytes > 0 && largest.bytes <= Double(1 << 20), "\(largest) in \(reports) reports")
        let path = daemon.runtime + "/from-disk.mp4"
        let saved = try Self.save(daemon, [path])
        let duration = number(saved["duration"])
        #expect(duration >= 4 && duration <= 6.1, "\(saved)")
        let file = Recording(path: path, scratch: daemon.runtime)
        let times = try file.frameTimes()
        #expect(try keyFrames(path).first == true && times.first == 0)
        #expect(zip(times, times.dropFirst()).allSatisfy { abs($1 - $0 - 1.0 / 30) < 0.002 }, "whole: \(times)")
        #expect(abs(Double(try file.audio(track: 0).count) / 48000 - duration) < 0.1, "audio as long as the video")
        try controller.finish(broadcast: id)
        #expect(try daemon.awaitFinish(controller, id) == nil)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: cache + "/broadcastd").isEmpty,
            "the ring's files are gone")
    }
}
