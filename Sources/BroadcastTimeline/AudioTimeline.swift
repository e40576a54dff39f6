#if canImport(Glibc)
    import Glibc
#endif

/// Holds an audio source to the timestamps its chunks carry. A device's sample clock runs a
/// little fast or slow against CLOCK_MONOTONIC, so counting samples drifts away from the video, and
/// a source's timing can shift outright (PipeWire's quantum changing when a low-latency client starts
/// moves it by up to 16 ms); the controller compares where a chunk's timestamp says it belongs with
/// where counting would put it, smooths that error over about 100 ms, and asks for a stretch
/// proportional to it that closes it with a time constant of 0.2 s: 0.2 % or less (a pitch change
/// nobody hears) for drift and errors up to 0.4 ms, at most `maxRate`, 4 %, for a shift, which is
/// within 10 ms a quarter of a second after it and within 1 ms in under a second. Errors under `deadband` are left
/// alone, so a source with exact timestamps passes through bit for bit.
package struct DriftController {
    package var smoothedError = 0.0
    /// Samples of error that are left alone (0.5 ms at 48 kHz).
    let deadband: Double
    /// The error whose stretch closes it at its own size a second: 0.2 s of samples.
    let responseSamples: Double
    /// Frames over which the error is smoothed (100 ms).
    let smoothingFrames: Double
    let maxRate = 0.04

    init(sampleRate: Int) {
        deadband = Double(sampleRate) / 2000
        responseSamples = Double(sampleRate) / 5
        smoothingFrames = Double(sampleRate) / 10
    }

    /// The input samples to consume per output sample for the next chunk of `frames`, given how far (in
    /// samples) its timestamp puts it ahead of where it would be placed.
    mutating func step(forError error: Double, frames: Int) -> Double {
        smoothedError += (1 - exp(-Double(max(1, frames)) / smoothingFrames)) * (error - smoothedError)
        guard abs(smoothedError) > deadband else { return 1 }
        let rate = min(maxRate, max(-maxRate, smoothedError / responseSamples))
        return 1 - rate
    }

    mutating func reset() { smoothedError = 0 }
}

/// Resamples by a ratio within a fraction of a percent of 1 (cubic Catmull-Rom interpolation),
/// carrying its position across chunks. At a ratio of exactly 1 on a whole-sample position it
/// copies its input unchanged.
struct Stretcher {
    let channels: Int
    /// The last three frames of the previous chunk (frames -3, -2, -1).
    private var history: [Float]
    /// Where the next output frame is read, in frames of the next chunk (-2 ..< 1).
    private(set) var readPosition = 0.0

    init(channels: Int) {
        self.channels = channels
        history = Array(repeating: 0, count: 3 * channels)
    }

    mutating func process(_ input: UnsafeBufferPointer<Float>, step: Double, into output: inout [Float]) {
        let frames = input.count / channels
        guard frames > 0 else { return }
        if step == 1 && readPosition == 0 {
            output.append(contentsOf: input)
        } else {
            func sample(_ frame: Int, _ channel: Int) -> Float {
                frame < 0 ? history[(3 + frame) * channels + channel] : input[frame * channels + channel]
            }
            // Frame i needs frames i-1 ... i+2; whole positions need only frame i.
            while true {
                let i = Int(readPosition.rounded(.down))
                let t = Float(readPosition - Double(i))
                if t == 0 ? i >= frames : i + 2 >= frames { break }
                for c in 0..<channels {
                    let x0 = sample(i, c)
                    if t == 0 {
                        output.append(x0)
                        continue
                    }
                    let xm1 = sample(i - 1, c)
                    let x1 = sample(i + 1, c)
                    let x2 = sample(i + 2, c)
                    output.append(
                        x0 + 0.5 * t
                            * (x1 - xm1 + t * (2 * xm1 - 5 * x0 + 4 * x1 - x2 + t * (3 * (x0 - x1) + x2 - xm1))))
                }
                readPosition += step
            }
            readPosition -= Double(frames)
        }
        // Keep the last three frames (fewer in a short chunk: shift the older ones along).
        let keep = min(frames, 3)
        history.removeFirst(keep * channels)
        history.append(contentsOf: input[(frames - keep) * channels..<frames * channels])
    }
}

/// One output audio track in file time: one input (app or mic) or several mixed (app + mic),
/// each placed where its timestamps say, in file samples from the start of the recording.
/// What no input covered is silence, counted. Joins (a segment's start after a pause, and, within a
/// segment, a chunk after samples the source lost) fade each input out over its last `fadeFrames` real
/// samples and in over its first ones, on equal-power (sine/cosine) curves, so where the two sides overlap
/// the join is a crossfade and no join ever clicks. Between joins an input's samples follow on from each other
/// and shifts of its timestamps are followed by stretching, never by cutting or padding.
package struct AudioTimeline {
    package struct Input {
        var gain: Float
        /// File position of this input's next sample; nil between segments, and at a join within one.
        var position: Int64?
        package var drift: DriftController
        var stretcher: Stretcher
        /// Samples of fade-in still to apply.
        var fadeIn = 0
        /// Where the audio before a join fades out: what comes after it is dropped before that, and its fade-in
        /// starts no earlier, so an overlap becomes a crossfade.
        var joinStart: Int64?
        /// At a join within a segment, where the audio before it ended: what is missing from there is counted.
        var joinEnd: Int64?
        /// How far the last chunk was from where its timestamp put it, frames (positive: behind).
        var lastError = 0.0
        /// This input's samples from `emitted` on, gain applied.
        var buffer: [Float] = []
    }

    package struct Counters: Equatable {
        /// Frames of silence standing in for audio that never came (gaps, segment ends).
        package var missingFrames: Int64 = 0
        /// Frames dropped because they came too late or overlapped what was already placed.
        package var droppedFrames: Int64 = 0
        /// Largest smoothed clock error seen, in frames.
        package var maxDriftFrames = 0.0
    }

    package let channels: Int
    package let sampleRate: Int
    let fadeFrames: Int
    /// How far an input may fall behind the leading one before the track goes on without it.
    let latencyFrames: Int64
    /// A jump this large between timestamps and placement is no shift of a source's timing but a join, even when the
    /// source does not say it lost samples.
    let jumpFrames: Int64
    package private(set) var inputs: [Input]
    /// File position up to which the track was handed to the encoder.
    private(set) var emitted: Int64 = 0
    /// Where the current segment starts (the audio before it belongs to the previous one).
    private var segmentStart: Int64 = 0
    package private(set) var counters = Counters()
    private var scratch: [Float] = []

    package init(channels: Int, sampleRate: Int, gains: [Float], fadeMilliseconds: Int = 10) {
        self.channels = channels
        self.sampleRate = sampleRate
        fadeFrames = sampleRate * fadeMilliseconds / 1000
        latencyFrames = Int64(sampleRate / 5)
        jumpFrames = Int64(sampleRate / 2)
        inputs = gains.map {
            Input(gain: $0, drift: DriftController(sampleRate: sampleRate), stretcher: Stretcher(channels: channels))
        }
    }

    /// Places a chunk of `input` (interleaved, `channels` wide) whose first sample belongs at file position `position`;
    /// `discontinuity`: the source lost samples before it.
    package mutating func place(
        _ input: Int, _ samples: UnsafeBufferPointer<Float>, at position: Int64,
        discontinuity: Bool = false
    ) {
        // How far this input is still behind its timestamps, following a shift of them: a join within the segment
        // keeps it (only what the source lost is missing), and the following goes on after it.
        var lag: Int64 = 0
        if let placed = inputs[input].position {
            let error = Double(position - placed) - inputs[input].stretcher.readPosition
            if discontinuity { lag = Int64(inputs[input].lastError.rounded()) }
            if (discontinuity && abs(error - Double(lag)) >= 1) || abs(error) > Double(jumpFrames) {
                fadeOut(input, at: placed)
                inputs[input].joinEnd = placed
            } else {
                lag = 0
            }
        }
        var chunk = samples
        var expected = position - lag  // where the chunk's first sample still in `chunk` goes
        var state = inputs[input]
        if state.position == nil {
            // Audio from before the join (a source's pre-roll, or what overlaps the audio before a join within the
            // segment, dropped): from that audio's fade-out on, or, at the start, from the start on.
            let from = state.joinStart ?? segmentStart
            if expected < from {
                let before = min(Int(from - expected), chunk.count / channels)
                if state.joinEnd != nil { counters.droppedFrames += Int64(before) }
                chunk = UnsafeBufferPointer(rebasing: chunk[(before * channels)...])
                expected += Int64(before)
            }
            guard !chunk.isEmpty else { return }
            state.stretcher = Stretcher(channels: channels)
            // At a segment's start it is placed exactly: nothing to follow from before the join.
            if state.joinEnd == nil { state.drift.reset() }
            let previousEnd = max(state.joinEnd ?? segmentStart, emitted)
            if expected > previousEnd { counters.missingFrames += expected - previousEnd }
            state.joinEnd = nil
            state.position = expected
            state.fadeIn = fadeFrames
        }
        state.lastError = Double(expected + lag - state.position!) - state.stretcher.readPosition
        let step = state.drift.step(forError: state.lastError, frames: chunk.count / channels)
        counters.maxDriftFrames = max(counters.maxDriftFrames, abs(state.drift.smoothedError))
        scratch.removeAll(keepingCapacity: true)
        state.stretcher.process(chunk, step: step, into: &scratch)
        let frames = scratch.count / channels
        for f in 0..<min(state.fadeIn, frames) {
            let weight = fadeWeight(fadeFrames - state.fadeIn + f, rising: true)
            for c in 0..<channels { scratch[f * channels + c] *= weight }
        }
        state.fadeIn = max(0, state.fadeIn - frames)
        let start = state.position!
        state.position = start + Int64(frames)
        inputs[input] = state
        write(input, at: start, frames: frames)
    }

    private mutating func write(_ input: Int, at start: Int64, frames: Int) {
        let skip = Int(max(0, emitted - start))
        if skip > 0 { counters.droppedFrames += Int64(min(skip, frames)) }
        guard skip < frames else { return }
        let offset = Int(start + Int64(skip) - emitted) * channels
        let count = (frames - skip) * channels
        if inputs[input].buffer.count < offset + count {
            inputs[input].buffer.append(
                contentsOf: repeatElement(0, count: offset + count - inputs[input].buffer.count))
        }
        let gain = inputs[input].gain
        inputs[input].buffer.withUnsafeMutableBufferPointer { buffer in
            for i in 0..<count { buffer[offset + i] += gain * scratch[skip * channels + i] }
        }
    }

    /// Ends the current segment at file position `end`: what lies beyond is cut, each input fades
    /// out over its last real samples, and what no input reached is counted as missing.
    package mutating func endSegment(at end: Int64) {
        for index in inputs.indices {
            let reached = inputs[index].position ?? inputs[index].joinEnd
            if let reached, reached < end { counters.missingFrames += end - max(reached, emitted) }
            inputs[index].joinEnd = nil
            if let position = inputs[index].position {
                fadeOut(index, at: min(position, end))
            } else {
                inputs[index].joinStart = nil
            }
        }
        segmentStart = end
    }

    /// Input `index` ends at file position `last` (a join follows): what lies beyond is cut, and it fades out over
    /// its last real samples.
    private mutating func fadeOut(_ index: Int, at last: Int64) {
        let keep = Int(max(0, last - emitted)) * channels
        if inputs[index].buffer.count > keep { inputs[index].buffer.removeLast(inputs[index].buffer.count - keep) }
        let fade = min(fadeFrames, keep / channels)
        let first = keep / channels - fade
        inputs[index].joinStart = last - Int64(fade)
        for f in 0..<fade {
            let weight = fadeWeight(f, rising: false)
            for c in 0..<channels { inputs[index].buffer[(first + f) * channels + c] *= weight }
        }
        inputs[index].position = nil
    }

    /// Equal-power curve: sin rising, cos falling, over `fadeFrames`; step `index` of it.
    private func fadeWeight(_ index: Int, rising: Bool) -> Float {
        let angle = Double.pi / 2 * Double(index + 1) / Double(fadeFrames + 1)
        return Float(rising ? sin(angle) : cos(angle))
    }

    /// How far the track can be handed on now: the slowest input that keeps up, and no further
    /// than `limit` (the end of the video so far), less the fade length, since a segment that
    /// ends there fades out those samples.
    package func ready(limit: Int64) -> Int64 {
        let positions = inputs.compactMap(\.position)
        guard let leader = positions.max(), let slowest = positions.min() else { return emitted }
        return max(emitted, min(limit, max(slowest, leader - latencyFrames)) - Int64(fadeFrames))
    }

    /// Mixes and hands on the frames from `emitted` up to `end`, silence where no input reached.
    package mutating func drain(upTo end: Int64, into output: inout [Float]) {
        let frames = Int(max(0, end - emitted))
        guard frames > 0 else { return }
        let count = frames * channels
        let base = output.count
        output.append(contentsOf: repeatElement(0, count: count))
        for index in inputs.indices {
            let available = min(count, inputs[index].buffer.count)
            for i in 0..<available { output[base + i] += inputs[index].buffer[i] }
            inputs[index].buffer.removeFirst(available)
        }
        emitted = end
    }
}
