import BroadcastClient
import BroadcastCore
import BroadcastSystem
import Foundation
import Testing

/// The tests' beep player (pipewire-test-beeps) on a PipeWire stack, read line by line: when PipeWire plays
/// each beep (CLOCK_MONOTONIC ns), and the quanta its cycles asked for.
final class BeepPlayer: @unchecked Sendable {
    let process = Process()
    private let output = Pipe()
    private let lock = NSLock()
    private var beeps: [Int: UInt64] = [:]
    private(set) var quanta: [Int] = []
    private var glitches: [UInt64] = []

    init(pipewire: PipeWireHarness, latency: Int) throws {
        process.executableURL = URL(fileURLWithPath: Paths.binary("pipewire-test-beeps"))
        process.arguments = ["--latency", "\(latency)"]
        process.environment = ProcessInfo.processInfo.environment.merging(pipewire.environment) { $1 }
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let handle = output.fileHandleForReading
        Thread.detachNewThread { [weak self] in
            var buffered = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { return }
                buffered.append(chunk)
                while let newline = buffered.firstIndex(of: 10) {
                    let line = String(decoding: buffered[buffered.startIndex..<newline], as: UTF8.self)
                    let words = line.split(separator: " ")
                    buffered = Data(buffered[(newline + 1)...])
                    guard let self else { return }
                    self.lock.withLock {
                        if words.first == "beep", words.count >= 3, let n = Int(words[1]), let at = UInt64(words[2]) {
                            self.beeps[n] = at
                        }
                        if words.first == "quantum", words.count == 3, let q = Int(words[1]), let at = UInt64(words[2]) {
                            self.quanta.append(q)
                            self.glitches.append(at)
                        }
                        if words.first == "glitch", words.count == 2, let at = UInt64(words[1]) {
                            self.glitches.append(at)
                        }
                    }
                }
            }
        }
    }

    /// When PipeWire plays beep `n`, once the player has said.
    func beep(_ n: Int) -> UInt64? { lock.withLock { beeps[n] } }
    var quantaSeen: [Int] { lock.withLock { quanta } }
    /// When the quantum changed, and cycles that did not start where the last ended (xruns), ns.
    var glitchesSeen: [UInt64] { lock.withLock { glitches } }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// A white flash on the X screen for each beep the player announces, drawn a few ms after PipeWire plays the
/// beep; what it drew, when.
final class Flasher: @unchecked Sendable {
    struct Flash {
        var beep: Int
        /// When the beep is played, and between when the flash was asked for and when the X server had drawn it.
        var played: UInt64, asked: UInt64, drawn: UInt64
    }
    private let lock = NSLock()
    private var flashes: [Flash] = []
    private var stopped = false
    private let done = DispatchSemaphore(value: 0)

    init(painter: Painter, player: BeepPlayer, width: Int, height: Int) {
        nonisolated(unsafe) let painter = painter
        Thread.detachNewThread { [self] in
            var n = 0
            while !lock.withLock({ stopped }) {
                guard let played = player.beep(n) else { usleep(2_000); continue }
                // 0 to 16 ms after the beep, a different delay each time, so that the flashes meet the screen's
                // frames at different phases (the frames and the beeps both keep exact time).
                let due = played + UInt64(n * 7 % 17) * 1_000_000
                let now = MonotonicClock.now()
                if due > now + 1_000_000 { usleep(UInt32((due - now) / 1_000 - 1_000)) }
                while MonotonicClock.now() < due {}
                let asked = MonotonicClock.now()
                _ = try? painter.fill(255, 255, 255, 0, 0, width, height)
                let drawn = MonotonicClock.now()
                lock.withLock { flashes.append(Flash(beep: n, played: played, asked: asked, drawn: drawn)) }
                usleep(150_000)
                _ = try? painter.fill(0, 0, 0, 0, 0, width, height)
                n += 1
            }
            done.signal()
        }
    }

    var drawn: [Flash] { lock.withLock { flashes } }

    /// Waits until `delay` after the next flash.
    func afterNextFlash(_ delay: Double) {
        let count = drawn.count
        while drawn.count == count { usleep(5_000) }
        usleep(UInt32(delay * 1e6))
    }

    func stop() {
        lock.withLock { stopped = true }
        done.wait()
    }
}

extension Integration {
@Suite(.serialized) struct AudioSyncTests {
    static let width = 320, height = 240, fps = 60

    /// A beep once a second into the default sink (exactly a second apart in the sink's clock, its node asking
    /// for a 1024-sample quantum) and a white flash on the X screen when PipeWire plays each, recorded by the
    /// record handler through three quantum changes (a client asking for 256 samples starts: app audio's timing
    /// shifts by 16 ms, which placing chunks back to back ignored: beeps sat 16 ms off for seconds) and a pause:
    /// in the file every beep starts within 10 ms of where its flash says (here within 2 ms, but for the odd one
    /// at 5), and the shifts show in `maxClockOffsetMs`.
    @Test func flashesAndBeepsStayTogetherThroughQuantumChangesAndAPause() throws {
        let pipewire = try PipeWireHarness(tones: false)
        defer { pipewire.stop() }
        let x = try XServer(width: Self.width, height: Self.height)
        defer { x.stop() }
        let painter = try x.painter()
        try painter.fill(0, 0, 0, 0, 0, Self.width, Self.height)
        let silence = pipewire.runtime + "/silence.wav"
        let made = try runTool("/usr/bin/ffmpeg", ["-loglevel", "error", "-f", "lavfi",
                                                   "-i", "anullsrc=r=48000:cl=stereo", "-t", "30", silence])
        #expect(made.status == 0, "\(made.stderr)")
        let player = try BeepPlayer(pipewire: pipewire, latency: 1024)
        defer { player.stop() }
        let flasher = Flasher(painter: painter, player: player, width: Self.width, height: Self.height)
        let daemon = try DaemonHarness(["--source", "x11", "--display", x.display, "--fps", "\(Self.fps)"],
                                       environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
        defer { _ = try? daemon.stop() }
        let path = daemon.runtime + "/sync.mp4"
        // Monotonic windows in which the broadcast was certainly live.
        var live: [(from: UInt64, to: UInt64)] = []
        var since = MonotonicClock.now()
        func lowLatencyClient(for seconds: Double) throws {
            flasher.afterNextFlash(0.05)
            let client = try pipewire.spawn("pw-play", ["--latency=256", "--target", "test_sink", silence])
            usleep(UInt32(seconds * 1e6))
            pipewire.kill(client)
        }
        let (error, result) = try daemon.record(to: path, setup: ["audio": "app"], seconds: 4.5) { controller in
            since = MonotonicClock.now()
            usleep(2_500_000)
            try lowLatencyClient(for: 2)
            usleep(1_000_000)
            try lowLatencyClient(for: 2)
            flasher.afterNextFlash(0.15)
            live.append((since, MonotonicClock.now()))
            try controller.pause()
            try daemon.awaitState(controller, .paused)
            usleep(1_000_000)
            try controller.resume()
            try daemon.awaitState(controller, .live)
            since = MonotonicClock.now()
            usleep(1_500_000)
            try lowLatencyClient(for: 3)
        }
        live.append((since, MonotonicClock.now()))
        flasher.stop()
        #expect(error == nil, "\(error?.message ?? "")")
        #expect(player.quantaSeen.filter { $0 == 256 }.count >= 3, "the quantum changes: \(player.quantaSeen)")

        guard case .array(let segments) = result["segments"], segments.count == 2 else {
            Issue.record("not two segments: \(result)")
            return
        }
        let segmentStarts = segments.map { segment -> Double in
            if case .object(let fields) = segment { return number(fields["start"]) } else { return .nan }
        }
        let file = Recording(path: path, scratch: daemon.runtime)
        let times = try file.frameTimes()
        let frames = try file.lumaFrames(width: Self.width, height: Self.height)
        var bright: [Double] = [] // each flash's first bright frame, file time
        for (i, (time, frame)) in zip(times, frames).enumerated() {
            let lit = frame.reduce(0) { $0 + Int($1) } / frame.count > 150
            let before = i > 0 && frames[i - 1].reduce(0) { $0 + Int($1) } / frames[i - 1].count > 150
            if lit && !before { bright.append(time) }
        }
        let audio = try file.audio(track: 0)
        var onsets: [Double] = []
        var i = 0
        while i < audio.count {
            if abs(audio[i]) > 0.25 { onsets.append(Double(i) / 48_000); i += 24_000 } else { i += 1 }
        }
        // The flashes drawn while live (well inside a window), in order, are the bright frames of the file.
        let margin: UInt64 = 100_000_000
        let recorded = flasher.drawn.filter { flash in
            live.contains { flash.asked > $0.from + margin && flash.drawn + margin < $0.to }
        }
        let inSegment = recorded.map { flash in live.firstIndex { flash.asked > $0.from && flash.drawn < $0.to }! }
        #expect(bright.count >= recorded.count && recorded.count >= 12,
                "\(bright.count) flashes in the file, \(recorded.count) drawn while live")
        // Each bright frame was grabbed after its flash was asked for and within a frame of when it was drawn:
        // that pins down capture time minus file time in each segment.
        var offsets: [Double] = [] // beep minus where its flash says, ms
        var skipped = 0
        var details: [String] = [] // each counted beep: its number, offset and the nearest glitch (ms from it)
        // Match by order within each segment.
        for segment in 0..<2 {
            let start = segmentStarts[segment]
            let end = segment + 1 < segmentStarts.count ? segmentStarts[segment + 1] : .infinity
            let flashes = zip(recorded, inSegment).filter { $0.1 == segment }.map(\.0)
            let frameTimes = bright.filter { $0 >= start && $0 < end }
            // Flashes drawn near a segment's edges may be missing from the file: align on the last ones.
            let count = min(flashes.count, frameTimes.count)
            guard count >= 3 else {
                Issue.record("segment \(segment): \(flashes.count) flashes, \(frameTimes.count) in the file")
                continue
            }
            let matched = zip(flashes.suffix(count), frameTimes.suffix(count))
            // No frame is grabbed before its flash was asked for: capture time minus file time is at least
            // `low`, and, the flashes meeting the frames at phases a millisecond or two apart, hardly more (a
            // frame grabbed late, on a loaded machine, only lowers its own bound).
            let low = matched.map { Double($0.0.asked) / 1e9 - $0.1 }.max()!
            let offset = low + 0.001 // capture time - file time
            for (flash, _) in matched {
                // A beep from 100 ms before to 400 ms after a cycle that did not start where the last ended (a
                // quantum change, or an xrun on a loaded machine) is not counted: it may not have been played
                // when the player said, and a shift takes a quarter of a second to follow (DriftTests). The
                // low-latency clients start just after a flash, so this drops marks only when a start is slow.
                let near = player.glitchesSeen.contains {
                    $0 + 400_000_000 > flash.played && $0 < flash.played + 100_000_000
                }
                if near {
                    skipped += 1
                    continue
                }
                let expected = Double(flash.played) / 1e9 - offset
                guard let onset = onsets.min(by: { abs($0 - expected) < abs($1 - expected) }) else { continue }
                offsets.append(((onset - expected) * 10_000).rounded() / 10)
                let nearest = player.glitchesSeen.map { (Double($0) - Double(flash.played)) / 1e6 }.min { abs($0) < abs($1) }
                details.append("beep \(flash.beep): \(offsets.last!) ms, glitch at \(nearest.map { "\(Int($0))" } ?? "-") ms")
            }
        }
        #expect(offsets.count >= 10 && offsets.allSatisfy { abs($0) <= 10 },
                "beep minus its flash: \(details); \(skipped) beeps near a quantum change or xrun not counted; audio: \(result["audioTracks"] ?? .null)")
        if case .array(let tracks) = result["audioTracks"], case .object(let app) = tracks.first {
            #expect(number(app["maxClockOffsetMs"]) >= 5, "the quantum changes were seen and followed: \(app)")
        }
    }
}
}
