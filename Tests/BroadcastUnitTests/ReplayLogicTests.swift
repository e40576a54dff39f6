import BroadcastCore
import CFFmpeg
import Foundation
import Testing

@testable import BroadcastEncoding
@testable import BroadcastHandlerKit
@testable import BroadcastMedia
@testable import BroadcastReplay

/// The replay handler's settings.
@Suite struct ReplayLogicTests {
    @Test func lengthAndMaxMemoryAreReadAndTheRestIsRecordsSettings() throws {
        let options = try ReplayOptions(setupInfo: ["length": "120", "maxMemory": "64M", "crf": "30", "audio": "app"])
        #expect(options.length == 120_000_000_000 && options.maxMemory == 64 << 20)
        let defaults = try ReplayOptions(setupInfo: [:])
        #expect(defaults.length == 30_000_000_000 && defaults.maxMemory == 256 << 20 && !defaults.onDisk)
        #expect(try ReplayOptions(setupInfo: ["buffer": "disk"]).onDisk)
        #expect(
            ReplayOptions.bytes("512K") == 512 << 10 && ReplayOptions.bytes("2G") == 2 << 30
                && ReplayOptions.bytes("1000") == 1000)
        #expect(ReplayOptions.bytes("lots") == nil && ReplayOptions.bytes("-1M") == nil)
        for (key, value, message) in [
            ("length", "0", "length '0': seconds to keep, 1-3600"),
            ("maxMemory", "1K", "maxMemory '1K': bytes of encoded video and audio kept, e.g. 256M or 2G (64K-64G)"),
            ("upload", "https://x/", "replay does not upload; upload a saved file with the record handler's tools"),
            ("buffer", "tape", "buffer 'tape': memory, or disk (a ring of files in $XDG_CACHE_HOME/broadcastd)"),
            ("colour", "red", "unknown setup field 'colour'"),
        ] {
            #expect(throws: Error.self, "\(key)") { try ReplayOptions(setupInfo: [key: value]) }
            do { _ = try ReplayOptions(setupInfo: [key: value]) } catch { #expect(error.description == message) }
        }
    }
}

/// What a save writes, from real encoders' packets in a buffer.
@Suite struct ReplaySaveTests {
    /// The audio encoder works a packet or so behind the video: a save ends where the audio does, not with frames
    /// that would play without sound (a save's last flash had no beep, 1 in 20 saves); and `--last` counts back from
    /// there (a save of the last 5 s from a keyframe exactly 5 s before the newest frame lasted 4.98 s).
    @Test(arguments: [("mp4", nil), ("mkv", nil), ("mp4", 0.9)] as [(String, Double?)])
    func aSaveEndsWhereItsAudioEnds(_ ext: String, _ last: Double?) throws {
        let fps = 30
        var videoSettings = VideoEncoderSettings(codec: .h264, width: 160, height: 96, framesPerSecond: fps)
        videoSettings.keyframeInterval = 1  // keyframes at 0 and 1 s
        let implementation = try VideoEncoderImplementation.best(for: .h264)
        let pixelFormat = implementation.inputFormat(for: .nv12)
        let video = try Encoder.video(
            videoSettings, pixelFormat: pixelFormat, globalHeader: true, implementation: implementation)
        let audio = try Encoder.audio(AudioEncoderSettings(channels: 2, bitRate: 96), globalHeader: true)
        let buffer = ReplayBuffer(length: 10_000_000_000, maxBytes: 64 << 20)
        let videoStream = try buffer.addStream(video.parameters)
        let audioStream = try buffer.addStream(audio.parameters)
        // 2 s of video, 1.9 s of audio (as the audio track's frames carry the encoder's priming).
        let picture = try MediaFrame.video(width: 160, height: 96, pixelFormat: pixelFormat)
        for index in 0..<2 * fps {
            try check(av_frame_make_writable(picture.frame), "writable")
            picture.frame.pointee.pts = Int64(index * 90_000 / fps)
            try video.encode(picture) { packet throws(MediaError) in
                try buffer.writeHoldingBack(packet, stream: videoStream)
            }
        }
        try video.encode(nil) { packet throws(MediaError) in try buffer.writeHoldingBack(packet, stream: videoStream) }
        let size = audio.frameSize
        let sound = try MediaFrame.audio(samples: size, channels: 2, sampleRate: 48000, planar: false)
        let silence = [Float](repeating: 0, count: size * 2)
        let priming = try audio.parameters.priming
        for index in 0..<(48000 * 19 / 10 / size) {
            try silence.withUnsafeBufferPointer { samples throws(MediaError) in
                try sound.fillAudio(samples, frames: size, pts: Int64(index * size) + priming)
            }
            try audio.encode(sound) { packet throws(MediaError) in try buffer.write(packet, stream: audioStream) }
        }
        let path = FileManager.default.temporaryDirectory.path + "/replay-end-\(getpid())-\(last ?? 0).\(ext)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let snapshot = try #require(try buffer.snapshot(last: last, id: 1))
        let saved = try ReplayFile.save(
            snapshot, frameDuration: 1_000_000_000 / Int64(fps), to: path,
            container: try #require(Muxer.Container(fileExtension: ext)))
        #expect(
            saved.duration > 1.8 && saved.duration <= 1.9,
            "ends with the audio at 1.9 s at the latest: \(saved.duration)")
        #expect(saved.videoFrames == Int((saved.duration * Double(fps)).rounded(.up)), "\(saved.videoFrames) frames")
        #expect(saved.duration >= last ?? 0, "at least the last \(last ?? 0) s: \(saved.duration)")
    }
}

/// The record and replay handlers' encoding (`RecordingEncoder`) on a still screen: one frame, then 20 s of repeats.
@Suite struct StillScreenTests {
    /// `record`: a keyframe every `keyframeInterval` of file time on a still screen too (one in the whole file, when
    /// keyframes were counted in encoded frames), and no more encoded than the changes need: two keyframes after each,
    /// then copies of them in turn (the keyframe every 2 s of a 1080p still screen was most of an always-on
    /// recording's CPU), their `idr_pic_id`s different in a row. SVT-AV1 in low delay, which counts frames for
    /// keyframes, is given every one.
    @Test(arguments: ["h264", "av1"]) func aRecordingHasKeyframesByTimeMostlyCopied(_ codec: String) throws {
        let path = FileManager.default.temporaryDirectory.path + "/record-still-\(getpid())-\(codec).mp4"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let still = try StillScreen(codec: codec, changes: [30, 330, 585], recordTo: path)
        let encoded = still.encoder.encodedFrames
        // 0, the change at 1 s, keyframes at 2 and 4 s; the change at 11 s (a keyframe: due) and one at 13 s; 19.5 s.
        #expect(codec == "av1" ? encoded == 600 : encoded == 7, "\(encoded) of 600 frames encoded")
        let keyframes = try StillScreen.keyframeTimes(path)
        let gaps = zip(keyframes, keyframes.dropFirst()).map { $1 - $0 }
        #expect(keyframes.first == 0 && (keyframes.last ?? 0) >= 18, "keyframes at \(keyframes)")
        #expect(gaps.allSatisfy { $0 <= 2 + 1.0 / 30 + 0.001 }, "keyframes at \(keyframes)")
        // Every frame shows the picture of its time: a copy never brings back one from before a change.
        let decoded = try StillScreen.decode(path)
        let shown = decoded.luma.map { (Int($0) - 100 + 25) / 50 }
        #expect(decoded.errors.isEmpty && shown == shown.sorted() && shown.last == 3, "\(decoded)")
        if codec == "h264" {
            let pictures = try StillScreen.pictures(path)
            for (first, second) in zip(pictures, pictures.dropFirst()) {
                guard let first, let second else { continue }
                #expect(first != second, "two IDR pictures in a row with idr_pic_id \(first): \(pictures)")
            }
        }
    }

    /// `replay`: on a still screen the encoder makes two keyframes after the last change and then nothing, and the
    /// buffer opens a GOP every keyframe interval with a copy of one of them in turn (its bytes, not encoded again), so
    /// the buffer still holds its length, and a save decodes to the still picture (an always-on replay buffer encoded
    /// a 1080p keyframe every 2 s and a repeat every second on a screen where nothing changed, most of its CPU).
    @Test(arguments: [false, true]) func aStillScreenIsTwoKeyframesCopiedNotEncodedAgain(onDisk: Bool) throws {
        let ring = onDisk ? FileManager.default.temporaryDirectory.path + "/replay-ring-\(getpid())" : nil
        if let ring { try FileManager.default.createDirectory(atPath: ring, withIntermediateDirectories: true) }
        defer { if let ring { try? FileManager.default.removeItem(atPath: ring) } }
        let still = try StillScreen(codec: "h264", changes: [30], directory: ring)
        #expect(still.encoder.encodedFrames == 4, "the first frame, the change at 1 s, keyframes at 2 and 4 s")
        try still.expectLengthHeld()
        let snapshot = try #require(try still.buffer?.snapshot(last: 3, id: 2))
        let ext = onDisk ? "mkv" : "mp4"  // both containers, one each
        let path = FileManager.default.temporaryDirectory.path + "/replay-still-\(getpid()).\(ext)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let saved = try ReplayFile.save(
            snapshot, frameDuration: Int64(StillScreen.interval), to: path,
            container: try #require(Muxer.Container(fileExtension: ext)))
        // Copies of the keyframe every 2 s, as a recording of a still screen has keyframes; ffmpeg decodes each
        // without a word, to the picture after the change (luma 150).
        #expect(saved.videoFrames >= 2 && saved.videoFrames <= 3, "\(saved.videoFrames) frames")
        let decoded = try StillScreen.decode(path)
        #expect(decoded.errors.isEmpty, "\(decoded.errors)")
        #expect(
            decoded.luma.count == saved.videoFrames && decoded.luma.allSatisfy { abs(Int($0) - 150) <= 2 },
            "\(decoded.luma)")
        #expect(saved.duration >= 3 && saved.duration <= 5.1, "--last 3 saves \(saved.duration) s")
    }

    /// Two H.264 IDR pictures in a row must differ in `idr_pic_id` (7.4.3), which libx264 alternates between 0 and 1:
    /// the copies alternate between the encoder's last two keyframes, and when a copy of the one before its newest is
    /// the newest frame as the screen changes (libx264's next IDR has that one's id), a copy of its newest comes 10 ms
    /// before. ffmpeg's trace_headers reads the ids from a save of everything: changes at 1 s, after three copies
    /// (11 s: a copy between) and after four (19.5 s).
    @Test func copiedKeyframesInARowDifferInTheirIDs() throws {
        let still = try StillScreen(codec: "h264", changes: [30, 330, 585], length: 30)
        let snapshot = try #require(try still.buffer?.snapshot(last: nil, id: 1))
        // Matroska, whose time base (1 ms) is the coarsest a copy between has to stand apart in.
        let path = FileManager.default.temporaryDirectory.path + "/replay-ids-\(getpid()).mkv"
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try ReplayFile.save(snapshot, frameDuration: Int64(StillScreen.interval), to: path, container: .matroska)
        #expect(try StillScreen.decode(path).errors.isEmpty)
        let pictures = try StillScreen.pictures(path)
        #expect(pictures.filter { $0 == nil }.count == 1, "the P frame of the change at 1 s: \(pictures)")
        #expect(pictures.count >= 13, "\(pictures)")
        for (first, second) in zip(pictures, pictures.dropFirst()) {
            guard let first, let second else { continue }
            #expect(first != second, "two IDR pictures in a row with idr_pic_id \(first): \(pictures)")
        }
    }

    /// A 160x96 screen through `RecordingEncoder` into a replay buffer of `length` (5 s), or recorded into a file: a
    /// grey frame (luma 100), then repeats but at each of `changes` (frame numbers), where the picture turns lighter
    /// (150, 200, 250), for 20 s at 30 fps.
    struct StillScreen {
        static let interval: UInt64 = 1_000_000_000 / 30
        let encoder: RecordingEncoder
        let buffer: ReplayBuffer?
        var lastStart: Int64 = 0
        var longestGOP: Int64 = 0

        init(
            codec: String, changes: [Int] = [], length: Int = 5, directory: String? = nil, recordTo path: String? = nil
        ) throws {
            let options = try ReplayOptions(setupInfo: ["length": "\(length)", "codec": codec, "audio": "none"])
            let handler = BroadcastSampleHandler()
            handler.videoFormat = VideoFormat(width: 160, height: 96)
            handler.audioStreams = []
            let file = try path.map { try Muxer(url: $0, container: .fragmentedMP4) }
            buffer =
                file == nil
                ? ReplayBuffer(length: options.length, maxBytes: options.maxMemory, directory: directory) : nil
            encoder = try RecordingEncoder(options.encoding, for: handler, output: (file ?? buffer)!)
            let size = handler.videoFormat.frameByteCount
            let pictures = (0...changes.count).map {
                [UInt8](repeating: UInt8(100 + 50 * $0), count: size)
            }
            for index in 0..<(20 * 30) {
                let changed = changes.contains(index)
                try pictures[changes.filter { $0 <= index }.count].withUnsafeBytes { data in
                    let timing = SampleTiming(
                        presentationTime: 7_000_000_000 + UInt64(index) * Self.interval,
                        duration: Self.interval, sequence: UInt64(index), discontinuity: false)
                    var sample = SampleBuffer(
                        type: .video, timing: timing, data: data, videoFormat: handler.videoFormat,
                        orientation: nil, audioFormat: nil, frameCount: 0)
                    sample.isRepeat = index > 0 && !changed
                    try encoder.addVideo(sample)
                }
                if let start = buffer?.gops.last?.start, start != lastStart {
                    longestGOP = max(longestGOP, start - lastStart)
                    lastStart = start
                }
            }
            if let file {
                _ = try encoder.finish()
                try file.finish()
            }
        }

        /// GOPs to the end, none longer than the keyframe interval and a frame (and a tick of 90 kHz); `length=5`
        /// holds 5 to 7 s; `--last 3` takes 3–5.
        func expectLengthHeld() throws {
            #expect(
                lastStart >= 18_000_000_000 && longestGOP <= 2_000_000_000 + Int64(Self.interval) + 11112,
                "GOPs up to \(longestGOP) ns")
            let buffer = try #require(buffer)
            let held = Double(buffer.duration) / 1e9
            #expect(held >= 5 && held <= 7.1, "length=5 holds \(held) s in \(buffer.gops.count) GOPs")
            let snapshot = try #require(try buffer.snapshot(last: 3, id: 1))
            let saved = Double(snapshot.end - snapshot.origin + Int64(Self.interval)) / 1e9
            #expect(saved >= 3 && saved <= 5.1, "--last 3 saves \(saved) s")
        }

        /// Runs ffmpeg's `tool` (ffmpeg, ffprobe) with `arguments`: its standard output, and its standard error with
        /// its exit status when that is not 0. Both go through files (trace_headers writes megabytes to the error).
        static func run(_ tool: String, _ arguments: [String]) throws -> (output: Data, errors: String) {
            let base = FileManager.default.temporaryDirectory.path + "/still-\(UUID().uuidString)"
            let (outPath, errPath) = (base + ".out", base + ".err")
            for path in [outPath, errPath] { _ = FileManager.default.createFile(atPath: path, contents: nil) }
            defer { for path in [outPath, errPath] { try? FileManager.default.removeItem(atPath: path) } }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/" + tool)
            process.arguments = arguments
            process.standardOutput = FileHandle(forWritingAtPath: outPath)
            process.standardError = FileHandle(forWritingAtPath: errPath)
            try process.run()
            process.waitUntilExit()
            let errors = String(decoding: try Data(contentsOf: URL(fileURLWithPath: errPath)), as: UTF8.self)
            return (
                try Data(contentsOf: URL(fileURLWithPath: outPath)),
                process.terminationStatus == 0 ? errors : "exit \(process.terminationStatus): " + errors
            )
        }

        /// The times (s) of `path`'s keyframes, as ffprobe reads them.
        static func keyframeTimes(_ path: String) throws -> [Double] {
            let text = String(
                decoding: try run(
                    "ffprobe",
                    [
                        "-v", "error", "-select_streams", "v", "-show_entries", "packet=pts_time,flags", "-of",
                        "csv=p=0", path,
                    ]
                ).output, as: UTF8.self)
            return text.split(separator: "\n").compactMap { line in
                let fields = line.split(separator: ",")
                return fields.count >= 2 && fields[1].hasPrefix("K") ? Double(fields[0]) : nil
            }
        }

        /// Each picture of `path`'s video, as ffmpeg's trace_headers reads its slices: an IDR picture's `idr_pic_id`, or
        /// nil for another.
        static func pictures(_ path: String) throws -> [Int?] {
            let text = try run(
                "ffmpeg", ["-v", "verbose", "-i", path, "-c", "copy", "-bsf:v", "trace_headers", "-f", "null", "-"]
            ).errors
            var pictures: [Int?] = []
            var (nalType, firstMB) = (0, 0)
            for line in text.split(separator: "\n") {
                let fields = line.split(separator: " ")
                // "[trace_headers @ 0x…] BIT NAME BITS = VALUE"
                guard fields.count >= 8, let value = Int(fields[fields.count - 1]) else { continue }
                switch fields[4] {
                case "nal_unit_type": nalType = value
                case "first_mb_in_slice":
                    firstMB = value
                    // A picture starts with its first slice; an IDR picture's is counted at its id.
                    if value == 0 && nalType == 1 { pictures.append(nil) }
                case "idr_pic_id" where nalType == 5 && firstMB == 0: pictures.append(value)
                default: break
                }
            }
            return pictures
        }

        /// ffmpeg's errors decoding `path`, and the mean luma of each frame it shows.
        static func decode(_ path: String) throws -> (errors: String, luma: [UInt8]) {
            let (luma, errors) = try run(
                "ffmpeg",
                [
                    "-v", "error", "-i", path, "-map", "0:v", "-vf", "scale=1:1:flags=area", "-fps_mode", "passthrough",
                    "-enc_time_base", "1/1000", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-",
                ])
            // A 1x1 yuv420p frame is 3 bytes, Y first.
            return (errors, stride(from: 0, to: luma.count - 2, by: 3).map { luma[$0] })
        }
    }
}
