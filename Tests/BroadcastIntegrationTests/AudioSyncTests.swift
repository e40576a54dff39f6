import BroadcastClient
import BroadcastCore
import BroadcastSystem
import Foundation
import Testing

/// The tests' beep player (pipewire-test-beeps) on a PipeWire stack, read line by line: when PipeWire plays
/// each beep (CLOCK_MONOTONIC ns), the quanta its cycles asked for, and the xruns it saw. It plays into the default
/// sink, or `target`; or it is a source named `source`; `tone`: a steady sine of that frequency instead of beeps.
final class BeepPlayer: @unchecked Sendable {
    let process = Process()
    private let output = Pipe()
    private let lock = NSLock()
    private var beeps: [Int: UInt64] = [:]
    private(set) var quanta: [Int] = []
    private var glitches: [UInt64] = []
    private var xruns: [(at: UInt64, lost: UInt64)] = []

    init(
        pipewire: PipeWireHarness, latency: Int, source: String? = nil, target: String? = nil,
        tone: Double? = nil
    ) throws {
        process.executableURL = URL(fileURLWithPath: Paths.binary("pipewire-test-beeps"))
        process.arguments =
            ["--latency", "\(latency)"] + (source.map { ["--source", $0] } ?? [])
            + (target.map { ["--target", $0] } ?? []) + (tone.map { ["--tone", "\(Int($0))"] } ?? [])
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
                    let words = line.split(separator: " ").map(String.init)
                    buffered = Data(buffered[(newline + 1)...])
                    guard let self else { return }
                    self.lock.withLock { self.read(words) }
                }
            }
        }
    }

    private func read(_ words: [String]) {
        let numbers = words.dropFirst().compactMap { UInt64($0) }
        switch (words.first, numbers.count) {
        case ("beep", 2): beeps[Int(numbers[0])] = numbers[1]
        case ("quantum", 2):
            quanta.append(Int(numbers[0]))
            glitches.append(numbers[1])
        case ("glitch", 1): glitches.append(numbers[0])
        case ("xrun", 2): xruns.append((numbers[0], numbers[1]))
        default: break
        }
    }

    /// When PipeWire plays beep `n`, once the player has said.
    func beep(_ n: Int) -> UInt64? { lock.withLock { beeps[n] } }
    var quantaSeen: [Int] { lock.withLock { quanta } }
    /// When the quantum changed, and cycles that did not start where the last ended (xruns), ns.
    var glitchesSeen: [UInt64] { lock.withLock { glitches } }

    /// The audio the graph lost within `windows` (cycles that never came), ms, with a millisecond more for each loss
    /// (a recording counts in samples, rounded), and the longest loss.
    func lost(within windows: [(from: UInt64, to: UInt64)]) -> (total: Double, longest: Double) {
        let inside = lock.withLock { xruns }.filter { xrun in
            windows.contains { xrun.at > $0.from && xrun.at < $0.to + 300_000_000 }
        }
        return (
            Double(inside.reduce(0) { $0 + $1.lost }) / 1e6 + Double(inside.count),
            Double(inside.map(\.lost).max() ?? 0) / 1e6
        )
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// A white flash on the X screen four times a second, from a few ms after PipeWire plays the player's first beep
/// on (every beep has one); what it drew, when.
final class Flasher: @unchecked Sendable {
    struct Flash {
        /// When the flash was asked for and when the X server had drawn it.
        var asked: UInt64, drawn: UInt64
    }
    static let period: UInt64 = 250_000_000
    private let lock = NSLock()
    private var flashes: [Flash] = []
    private var stopped = false
    private let done = DispatchSemaphore(value: 0)

    init(painter: Painter, player: BeepPlayer, width: Int, height: Int) {
        nonisolated(unsafe) let painter = painter
        Thread.detachNewThread { [self] in
            var first: UInt64?
            var n: UInt64 = 0
            while !lock.withLock({ stopped }) {
                guard let start = first ?? player.beep(0) else {
                    usleep(2_000)
                    continue
                }
                first = start
                // 0 to 16 ms after each quarter of a second, a different delay each time, so that the flashes meet the
                // screen's frames at different phases (the frames and the flashes both keep exact time).
                let due = start + n * Self.period + n * 7 % 17 * 1_000_000
                let now = MonotonicClock.now()
                if due > now + 1_000_000 { usleep(UInt32((due - now) / 1_000 - 1_000)) }
                while MonotonicClock.now() < due {}
                let asked = MonotonicClock.now()
                _ = try? painter.fill(255, 255, 255, 0, 0, width, height)
                let drawn = MonotonicClock.now()
                lock.withLock { flashes.append(Flash(asked: asked, drawn: drawn)) }
                usleep(70_000)
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
        /// for a 1024-sample quantum), a microphone that beeps once a second of its own (a source node, saying when
        /// each beep was heard), and a white flash on the X screen four times a second; recorded by the record handler
        /// in four segments (three pauses) through six quantum changes (a client asking for 256 samples starts and stops
        /// three times, once across a pause: the stamps shift by 16 ms each time). In the file every beep, app and mic,
        /// starts where the flashes of its segment say, each track's offsets within 5 ms of each other across the pauses
        /// and the changes (the app's were 11 to 24 ms apart, and the mic's 34 ms, the largest next to the pauses and the
        /// changes), but for beeps from 100 ms before to 800 ms after a change (a shift takes that long to follow: the
        /// mic's is 24 ms, closed at 4 % a second once the smoothing has seen it); and nothing is counted missing but
        /// what the graph lost (an xrun, on a loaded machine, said by the players).
        @Test func flashesAndBeepsStayTogetherThroughPausesAndQuantumChanges() throws {
            let pipewire = try PipeWireHarness(tones: false)
            defer { pipewire.stop() }
            let x = try XServer(width: Self.width, height: Self.height)
            defer { x.stop() }
            let painter = try x.painter()
            try painter.fill(0, 0, 0, 0, 0, Self.width, Self.height)
            let silence = pipewire.runtime + "/silence.wav"
            let made = try runTool(
                "/usr/bin/ffmpeg",
                [
                    "-loglevel", "error", "-f", "lavfi",
                    "-i", "anullsrc=r=48000:cl=stereo", "-t", "30", silence,
                ])
            #expect(made.status == 0, "\(made.stderr)")
            let player = try BeepPlayer(pipewire: pipewire, latency: 1024)
            defer { player.stop() }
            let micPlayer = try BeepPlayer(pipewire: pipewire, latency: 1024, source: "beeping_mic")
            defer { micPlayer.stop() }
            let flasher = Flasher(painter: painter, player: player, width: Self.width, height: Self.height)
            let daemon = try DaemonHarness(
                [
                    "--source", "x11", "--display", x.display, "--fps",
                    "\(Self.fps)", "--mic", "beeping_mic",
                ],
                environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/sync.mp4"
            // Monotonic windows in which the broadcast was certainly live.
            var live: [(from: UInt64, to: UInt64)] = []
            var since = MonotonicClock.now()
            var client: Process?
            func lowLatencyClient(_ on: Bool) throws {
                if on {
                    flasher.afterNextFlash(0.05)
                    client = try pipewire.spawn("pw-play", ["--latency=256", "--target", "test_sink", silence])
                } else if let running = client {
                    flasher.afterNextFlash(0.05)
                    pipewire.kill(running)
                    client = nil
                }
            }
            func pause(for seconds: Double, during: () throws -> Void = {}, _ controller: ControllerClient) throws {
                flasher.afterNextFlash(0.3)
                live.append((since, MonotonicClock.now()))
                try controller.pause()
                try daemon.awaitState(controller, .paused)
                usleep(UInt32(seconds * 1e6))
                try during()
                try controller.resume()
                try daemon.awaitState(controller, .live)
                since = MonotonicClock.now()
            }
            let (error, result) = try daemon.record(to: path, seconds: 0) { controller in
                since = MonotonicClock.now()
                usleep(2_000_000)
                try lowLatencyClient(true)
                usleep(1_200_000)
                try pause(for: 0.8, during: { try lowLatencyClient(false) }, controller)
                usleep(1_500_000)
                try lowLatencyClient(true)
                usleep(1_200_000)
                try lowLatencyClient(false)
                usleep(1_000_000)
                try pause(for: 0.8, controller)
                usleep(1_500_000)
                try lowLatencyClient(true)
                usleep(1_000_000)
                try pause(for: 0.8, controller)
                usleep(1_500_000)
                try lowLatencyClient(false)
                usleep(5_500_000)  // beeps past the last change's 800 ms
                // Finished as it pauses: 0.3 s after a flash, whose frames are all in the file. A flash drawn while the
                // recording finishes has no frame, and counted as live it would let a pairing one flash off (each
                // flash with the frame of the one before) pair as many flashes as the right one.
                flasher.afterNextFlash(0.3)
                live.append((since, MonotonicClock.now()))
            }
            flasher.stop()
            #expect(error == nil, "\(error?.message ?? "")")
            #expect(player.quantaSeen.filter { $0 == 256 }.count >= 3, "the quantum changes: \(player.quantaSeen)")
            guard case .array(let segments) = result["segments"], segments.count == 4 else {
                Issue.record("not four segments: \(result)")
                return
            }
            let starts = segments.map { segment -> Double in
                if case .object(let fields) = segment { return number(fields["start"]) } else { return .nan }
            }
            let file = Recording(path: path, scratch: daemon.runtime)
            let pins = try SegmentPins(
                file: file, flashes: flasher.drawn, live: live, starts: starts, width: Self.width,
                height: Self.height)
            #expect(pins.problems.isEmpty, "\(pins.problems)")
            let missing = missingAudio(result)
            #expect(missing.count == 2, "\(result)")
            for (track, name, beeps) in [(0, "app", player), (1, "mic", micPlayer)] where track < missing.count {
                let lost = beeps.lost(within: live)
                #expect(
                    missing[track] <= lost.total,
                    "\(name): \(missing[track]) ms counted missing, \(lost.total) ms lost by the graph")
                let measured = try pins.offsets(
                    of: beeps, in: file.audio(track: track),
                    glitches: player.glitchesSeen + micPlayer.glitchesSeen)
                let spread = (measured.offsets.max() ?? 0) - (measured.offsets.min() ?? 0)
                #expect(
                    measured.offsets.count >= 8 && spread <= 5,
                    Comment(
                        rawValue: "\(name): beep minus its flash: \(measured.details); \(measured.skipped) "
                            + "beeps near a quantum change or xrun not counted; "
                            + "the flashes' largest bounds: "
                            + "\(pins.summary); audio: \(result["audioTracks"] ?? .null)"))
            }
            if case .array(let tracks) = result["audioTracks"], case .object(let app) = tracks.first {
                #expect(number(app["maxClockOffsetMs"]) >= 5, "the quantum changes were seen and followed: \(app)")
            }
            // A shift larger than a quantum change's (16 to 24 ms here) would not be closed within the 800 ms left out.
            if case .array(let tracks) = result["audioTracks"] {
                for case .object(let track) in tracks {
                    #expect(number(track["maxClockOffsetMs"]) <= 30, "\(track)")
                }
            }
        }
    }
}

/// Capture time minus file time in each segment of a recording of flashes, pinned by the flashes: a flash's first
/// bright frame was grabbed after the flash was asked for, so the offset is at least the flash's time less the
/// frame's; the flashes meet the frames at different phases, and with a dozen in a segment the largest of those
/// bounds is within a ms or two of the offset (a frame grabbed late, on a loaded machine, only lowers its own).
struct SegmentPins {
    /// Per segment: the offset (s), nil where too few flashes were found.
    private(set) var pins: [Double?] = []
    private(set) var problems: [String] = []
    let starts: [Double]

    init(
        file: Recording, flashes: [Flasher.Flash], live: [(from: UInt64, to: UInt64)], starts: [Double], width: Int,
        height: Int
    ) throws {
        self.starts = starts
        let times = try file.frameTimes()
        let luma = try file.lumaFrames(width: width, height: height)
        let lit = luma.map { $0.reduce(0) { $0 + Int($1) } / $0.count > 150 }
        // Each flash's first bright frame, file time.
        let bright = lit.indices.filter { lit[$0] && ($0 == 0 || !lit[$0 - 1]) }.map { times[$0] }
        for (segment, window) in live.enumerated() where segment < starts.count {
            let end = segment + 1 < starts.count ? starts[segment + 1] : .infinity
            let drawn = flashes.filter { $0.asked > window.from && $0.drawn < window.to }.map { Double($0.asked) / 1e9 }
            let frames = bright.filter { $0 >= starts[segment] && $0 < end }
            // Flashes near a segment's edges may be missing from the file. Each pairing of a flash with a frame is a
            // candidate offset; the right one pairs the most flashes with a frame grabbed within 40 ms after them
            // (they come 250 ms apart), and is the largest bound of those it pairs.
            func paired(_ offset: Double) -> [Double] {
                drawn.compactMap { asked in
                    frames.first { $0 + offset - asked >= -1e-6 && $0 + offset - asked < 0.04 }.map { asked - $0 }
                }
            }
            let candidates = drawn.flatMap { asked in frames.map { asked - $0 } }
            let best = candidates.map { (offset: $0, count: paired($0).count) }
                .max { ($0.count, $0.offset) < ($1.count, $1.offset) }
            guard let best, best.count >= 8 else {
                problems.append(
                    "segment \(segment): \(drawn.count) flashes drawn while live, "
                        + "\(frames.count) in the file, \(best?.count ?? 0) paired")
                pins.append(nil)
                continue
            }
            pins.append(best.offset + 0.001)
            bounds.append(paired(best.offset).sorted().suffix(3).map { ((best.offset - $0) * 1e4).rounded() / 10 })
        }
    }
    /// Per segment, how far its three largest bounds are below its offset, ms: how closely they pin it.
    private(set) var bounds: [[Double]] = []

    var summary: String { "\(bounds)" }

    /// Each beep's onset in `audio` (file time) minus where its play time and its segment's offset put it, ms; beeps
    /// from 100 ms before to 800 ms after a cycle that did not start where the last ended (a quantum change, or an
    /// xrun on a loaded machine) are left out (`skipped`): a beep there may not have been played when the player
    /// said, and a shift of up to 30 ms takes up to that long to follow (DriftTests).
    func offsets(of player: BeepPlayer, in audio: [Float], glitches: [UInt64])
        -> (offsets: [Double], details: [String], skipped: Int)
    {
        let onsets = beepOnsets(audio, over: 0.25, holdOff: 4_800)
        var offsets: [Double] = []
        var details: [String] = []
        var skipped = 0
        for n in 0..<1000 {
            guard let played = player.beep(n) else { break }
            let seconds = Double(played) / 1e9
            // The segment it was played in: its offset places it inside.
            guard
                let segment = pins.indices.first(where: { index in
                    guard let pin = pins[index] else { return false }
                    let at = seconds - pin
                    return at > starts[index] + 0.1
                        && at < (index + 1 < starts.count ? starts[index + 1] - 0.1 : .infinity)
                }), let pin = pins[segment]
            else { continue }
            if glitches.contains(where: { $0 + 800_000_000 > played && $0 < played + 100_000_000 }) {
                skipped += 1
                continue
            }
            let expected = seconds - pin
            guard let onset = onsets.min(by: { abs($0 - expected) < abs($1 - expected) }),
                abs(onset - expected) < 0.2
            else {
                details.append("beep \(n): no onset near \(expected) s")
                continue
            }
            offsets.append(((onset - expected) * 10_000).rounded() / 10)
            let nearest = glitches.map { (Double($0) - Double(played)) / 1e6 }.min { abs($0) < abs($1) }
            let glitch = nearest.map { "\(Int($0))" } ?? "-"
            details.append("beep \(n) (segment \(segment)): \(offsets.last!) ms, glitch at \(glitch) ms")
        }
        return (offsets, details, skipped)
    }
}
