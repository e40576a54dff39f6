import BroadcastClient
import BroadcastCore
import BroadcastSystem
import Foundation
import Testing

/// The longest run of samples within `level` of zero, and where it starts.
func longestQuietRun(_ samples: ArraySlice<Float>, level: Float) -> (length: Int, start: Int) {
    var best = (length: 0, start: 0)
    var run = 0
    for i in samples.indices {
        run = abs(samples[i]) < level ? run + 1 : 0
        if run > best.length { best = (run, i - run + 1) }
    }
    return best
}

/// The largest step from one sample to the next, and where it is.
func largestStep(_ samples: ArraySlice<Float>) -> (step: Float, at: Int) {
    var best = (step: Float(0), at: samples.startIndex)
    for i in samples.indices.dropFirst() where abs(samples[i] - samples[i - 1]) > best.step {
        best = (abs(samples[i] - samples[i - 1]), i)
    }
    return best
}

/// The `quantile` (0...1) of the steps from one sample to the next.
func stepQuantile(_ samples: ArraySlice<Float>, _ quantile: Double) -> Float {
    let steps = zip(samples, samples.dropFirst()).map { abs($1 - $0) }.sorted()
    return steps.isEmpty ? 0 : steps[min(steps.count - 1, Int(Double(steps.count) * quantile))]
}

/// Audio through a real PipeWire graph at the joins: the start of a recording and every resume.
extension Integration {
    @Suite(.serialized) struct AudioJoinTests {
        /// An application plays a tone and a microphone carries another, from before the broadcast starts to after it
        /// ends, each made in every cycle as the cycle asks (pipewire-test-beeps --tone, its node asking for 2048 samples
        /// as pw-play's 100 ms do; pw-play itself runs dry for a cycle when the quantum grows, a hole in what the graph
        /// carries); recorded in four segments (three pauses) through six changes of the graph's quantum (a client asking
        /// for 256 samples starts and stops three times, once across a pause: the stamps shift by 37 ms, the microphone's
        /// twice), each track is the tone throughout: no run of silence (PipeWire's audio from before each segment's first
        /// frame is there, where it used to be 34 to 52 ms of zeros; a shift of the stamps was taken for a new device
        /// once it added up to 40 ms: 65 ms of zeros went in), no step from one sample to the next anywhere in the file
        /// larger than four times the file's own 99.9th percentile (a click: they were 0.16 to 0.19, twenty times the
        /// tone's own, where the zeros went in), and nothing counted missing, but for what the graph lost (an xrun, on a
        /// loaded machine, said by the players). App audio is the application's, linked to broadcastd, and the
        /// microphone a source of its own: a null sink's monitor jumps by four samples when the quantum drops (a step
        /// five times the tone's), and a loopback, not at realtime priority, loses cycles on a loaded machine.
        @Test func aContinuousToneHasNoHoleNorClickThroughPausesAndQuantumChanges() throws {
            let pipewire = try PipeWireHarness(tones: false)
            defer { pipewire.stop() }
            let app = try BeepPlayer(pipewire: pipewire, latency: 2048, tone: PipeWireHarness.appFrequency)
            defer { app.stop() }
            let mic = try BeepPlayer(
                pipewire: pipewire, latency: 2048, source: "tone_mic",
                tone: PipeWireHarness.micFrequency)
            defer { mic.stop() }
            let silence = pipewire.runtime + "/silence.wav"
            let made = try runTool(
                "/usr/bin/ffmpeg",
                [
                    "-loglevel", "error", "-f", "lavfi", "-i",
                    "anullsrc=r=48000:cl=stereo", "-t", "30", silence,
                ])
            #expect(made.status == 0, "\(made.stderr)")
            let x = try XServer()
            defer { x.stop() }
            let daemon = try DaemonHarness(
                [
                    "--source", "x11", "--display", x.display, "--fps", "30", "--app-audio",
                    "test-beeps", "--mic", "tone_mic",
                ],
                environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/tone.mkv"
            var client: Process?
            var live: [(from: UInt64, to: UInt64)] = []
            var since = MonotonicClock.now()
            let (error, result) = try daemon.record(to: path, seconds: 1.2) { controller in
                since = MonotonicClock.now()
                for round in 0..<3 {
                    usleep(700_000)
                    // The quantum drops to 256 while live, and goes back up during the pause or after it.
                    client = try pipewire.spawn("pw-play", ["--latency=256", "--target", "test_sink", silence])
                    usleep(UInt32(800_000 + 200_000 * round))
                    live.append((since, MonotonicClock.now()))
                    try controller.pause()
                    try daemon.awaitState(controller, .paused)
                    usleep(700_000)
                    if round != 1, let running = client { pipewire.kill(running) }
                    try controller.resume()
                    try daemon.awaitState(controller, .live)
                    since = MonotonicClock.now()
                    usleep(600_000)
                    if round == 1, let running = client { pipewire.kill(running) }
                }
            }
            live.append((since, MonotonicClock.now()))
            #expect(error == nil, "\(error?.message ?? "")")
            #expect(app.quantaSeen.filter { $0 == 256 }.count == 3, "the quantum changes: \(app.quantaSeen)")
            let missing = missingAudio(result)
            guard case .array(let segments) = result["segments"], segments.count == 4, missing.count == 2 else {
                Issue.record("not four segments and two tracks: \(result)")
                return
            }
            let starts = segments.map { segment -> Double in
                if case .object(let fields) = segment { return number(fields["start"]) } else { return .nan }
            }
            let file = Recording(path: path, scratch: daemon.runtime)
            for (track, name, player) in [(0, "app", app), (1, "mic", mic)] {
                let lost = player.lost(within: live)
                #expect(
                    missing[track] <= lost.total,
                    "\(name): \(missing[track]) ms counted missing, \(lost.total) ms lost by the graph")
                let audio = try file.audio(track: track)
                guard audio.count > 6 * 48_000 else {
                    Issue.record("\(name): only \(audio.count) samples")
                    continue
                }
                // The last 20 ms may fade out (the recording's end); a loss fades out before it and in after it.
                let whole = audio[0..<(audio.count - 960)]
                let quiet = longestQuietRun(whole, level: 0.005)
                #expect(
                    quiet.length <= 96 + Int(lost.longest * 48) + (lost.longest > 0 ? 960 : 0),
                    Comment(
                        rawValue: "\(name): \(Double(quiet.length) / 48) ms of silence at sample "
                            + "\(quiet.start); joins at \(starts) s"))
                let usual = stepQuantile(whole, 0.999)
                let step = largestStep(whole)
                #expect(
                    step.step <= 4 * usual,
                    Comment(
                        rawValue: "\(name): a step of \(step.step) at \(Double(step.at) / 48_000) s, "
                            + "the 99.9th percentile \(usual); joins at \(starts) s"))
            }
        }
    }
}
