import BroadcastCapture
import CPipeWire

/// Where a stream's buffers have come to on PipeWire's graph clock (`pw_time.ticks`, the driver's position in
/// samples at the graph's rate): with the stamps, it tells samples lost (an xrun: the clock and the time moved on by
/// more than came) from a mere shift of the stamps. A timer-driven graph whose quantum changes runs one cycle of the
/// old length with the new number of samples, and then one of the two jumps alone: from 1024 to 256 the stamps move
/// 16 ms on while the clock does not, back to 1024 the clock moves 768 samples on while the stamps of a sink's
/// monitor do not (and a source's go back), and not a sample is missing. Touched only by `process`.
struct GraphClock {
    /// Where, in frames at 48 kHz on the graph's clock, the next buffer should begin; nil: not known.
    private var expected: Int64?

    /// The frames missing (negative: repeated) before the first of `frames`, taken at once, oldest first, in the cycle
    /// whose clock stands at `ticks` (`rate`: seconds a tick), `waiting` buffers after the newest of them; nil when
    /// it cannot be told (the first buffers, no clock).
    mutating func advance(frames: [Int], ticks: UInt64, rate: spa_fraction, waiting: Int) -> Int? {
        guard ticks > 0, ticks < 1 << 50, rate.num > 0, rate.denom > 0, let newest = frames.last else {
            expected = nil
            return nil
        }
        let position = Int64(ticks) * Int64(PipeWireAudioStream.rate) * Int64(rate.num) / Int64(rate.denom)
        let newestStart = position - Int64(waiting * newest)
        let first = newestStart - Int64(frames.dropLast().reduce(0, +))
        defer { expected = newestStart + Int64(newest) }
        return expected.map { Int(first - $0) }
    }
}

extension PipeWireAudioStream.Shared {
    /// A chunk that looks like audio after a loss, held back until the next buffer says whether it was rather taken
    /// late: the frames that looked lost, its stamp, and where it goes if it follows on.
    struct Held {
        var lost: Int
        var stamp: UInt64
        var followOn: UInt64
    }

    /// See `PipeWireAudioStream.goLive`.
    mutating func goLive(at time: UInt64) {
        live = true
        let from = time > PipeWireAudioStream.preRoll ? time - PipeWireAudioStream.preRoll : 0
        while let first = chunks.first, first.presentationTime + first.duration <= from {
            queued -= chunks.removeFirst().duration
        }
        // Nothing since before the pre-roll (or ever): silence, if it comes to that, starts at `time`.
        if chunks.isEmpty && next < from {
            next = time
            inStep = false
        }
    }

    /// See `PipeWireAudioStream.leaveLive`.
    mutating func leaveLive() {
        live = false
        trim()
    }

    /// Drops the oldest chunks past the queue's limit (counted), or, while not live, past the pre-roll.
    private mutating func trim() {
        let limit = live ? PipeWireAudioStream.queueLimit : PipeWireAudioStream.preRoll
        while queued > limit, !chunks.isEmpty {
            queued -= chunks.removeFirst().duration
            // Live, what follows a chunk dropped comes after a gap.
            if live { figures.dropped += 1 }
            if live, !chunks.isEmpty { chunks[0].discontinuity = true }
        }
    }

    /// Places a captured buffer on the stream's timeline by PipeWire's own time for its first sample, when it was
    /// heard. The first buffer, and the first after silence, goes exactly there, with nothing before it (a gap the
    /// handler counts as missing, never zeros that would pass for audio). After that, while the buffers follow on
    /// from each other, each goes where its stamp says, however far that is from where the last one ended: the
    /// stamps' shifts (PipeWire's quantum changing moves a timer-driven graph's by the difference of the quanta, 16 ms
    /// from 1024 to 256; a device's drift) are passed on whole, and the handler follows them by stretching, while no
    /// sample is cut or made up; only so that the chunks' times keep increasing, one goes no earlier than the middle
    /// of the last. Samples were lost before a buffer (an xrun) when the graph's clock (`lost`: the frames it moved on
    /// by more than came; nil: not known) moved on by at least half a buffer more and its stamp by as much, or, when
    /// the clock cannot tell, its stamp is more than `resyncLimit` from where the last one ended (a new device, say).
    /// Then it is a resync: the buffer goes exactly where its stamp says, the samples that overlap what is already on
    /// the timeline cut, and it carries the discontinuity flag, so that the handler counts the gap as missing and
    /// fades across it. A buffer taken late, after its cycle (the time read is then the next cycle's, and the clock
    /// too), looks the same until the next comes and finds the clock where it was: so one that looks lost after is
    /// held back until the next says which it was (see `held`).
    mutating func enqueue(bytes: [UInt8], frames: Int, stamped: UInt64, lost: Int?, bytesPerFrame: Int) {
        if let last = held {
            held = nil
            // The clock moved on by less than came: the last one was late by that much, not (all) after a loss. It goes
            // back by as much, and follows on if no more than half a buffer is left lost.
            if let lost, lost < 0, let index = chunks.indices.last, chunks[index].discontinuity {
                let late = UInt64(-lost) * 1_000_000_000 / UInt64(PipeWireAudioStream.rate)
                let followsOn = last.lost + lost < chunks[index].frameCount / 2
                chunks[index].presentationTime =
                    followsOn
                    ? last.followOn : max(last.followOn, last.stamp - min(late, last.stamp))
                chunks[index].discontinuity = !followsOn
                next = chunks[index].presentationTime + chunks[index].duration
                if followsOn { figures.resyncs -= 1 }
            }
        }
        var bytes = bytes
        var frames = frames
        var at = stamped
        let error = Int64(bitPattern: stamped &- next)
        let lostDuration = Int64(lost ?? 0) * 1_000_000_000 / Int64(PipeWireAudioStream.rate)
        let follows =
            if let lost {
                lost < frames / 2 || abs(error - lostDuration) > Int64(lastDuration / 2)
            } else {
                abs(error) <= PipeWireAudioStream.resyncLimit
            }
        if inStep && follows {
            at = max(stamped, next - lastDuration / 2)
            append(frames: frames, bytes: bytes, at: at, discontinuity: false)
        } else {
            if inStep {
                figures.resyncs += 1
                if let lost {
                    let followOn = max(
                        UInt64(bitPattern: Int64(bitPattern: stamped) - lostDuration),
                        next - lastDuration / 2)
                    held = Held(lost: lost, stamp: stamped, followOn: followOn)
                }
            }
            if at < next {
                let overlap = Int((next - at) * UInt64(PipeWireAudioStream.rate) / 1_000_000_000)
                guard overlap < frames else { return }
                bytes.removeFirst(overlap * bytesPerFrame)
                frames -= overlap
                at = next
            }
            append(frames: frames, bytes: bytes, at: at, discontinuity: true)
        }
        inStep = true
        heard = true
        silentSince = nil
        trim()
    }

    /// Until when the last chunk is held back (see `held`): the next buffer comes a cycle later, and if none comes
    /// it is handed on after `holdLimit`.
    var heldUntil: UInt64? { held.map { _ in next + PipeWireAudioStream.holdLimit } }

    /// See `PipeWireAudioStream.take`.
    mutating func take(now: UInt64, bytesPerFrame: Int) -> AudioChunk? {
        if let until = heldUntil, now >= until { held = nil }
        if chunks.count > (held == nil ? 0 : 1) {
            let chunk = chunks.removeFirst()
            queued -= chunk.duration
            return chunk
        }
        guard held == nil, now > next + PipeWireAudioStream.silenceAfter else { return nil }
        if silentSince == nil { silentSince = next }
        inStep = false
        let frames = Int(PipeWireAudioStream.silenceChunk * UInt64(PipeWireAudioStream.rate) / 1_000_000_000)
        let chunk = AudioChunk(
            presentationTime: next, duration: PipeWireAudioStream.silenceChunk, frameCount: frames,
            bytes: [UInt8](repeating: 0, count: frames * bytesPerFrame))
        next += PipeWireAudioStream.silenceChunk
        figures.silentChunks += 1
        return chunk
    }

    private mutating func append(frames: Int, bytes: [UInt8], at time: UInt64, discontinuity: Bool) {
        let duration = UInt64(frames) * 1_000_000_000 / UInt64(PipeWireAudioStream.rate)
        let chunk = AudioChunk(
            presentationTime: time, duration: duration, frameCount: frames, bytes: bytes,
            discontinuity: discontinuity)
        chunks.append(chunk)
        queued += chunk.duration
        next = chunk.presentationTime + chunk.duration
        lastDuration = duration
    }
}
