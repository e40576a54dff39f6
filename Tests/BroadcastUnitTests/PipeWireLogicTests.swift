import BroadcastCapture
import BroadcastCore
import CPipeWire
import Testing

@testable import BroadcastPipeWire

/// The PipeWire audio path's pure logic: the stream timeline and the default-device metadata.
@Suite struct PipeWireLogicTests {
    func buffer(_ frames: Int, value: UInt8 = 1) -> [UInt8] { [UInt8](repeating: value, count: frames * 8) }
    let quantum: UInt64 = 1024 * 1_000_000_000 / 48_000

    /// Buffers that follow on from each other (the graph's clock says no sample was lost) go where their stamps say:
    /// a shift of the stamps (a timer-driven graph whose quantum goes from 1024 to 256 runs one cycle of the old
    /// length:
    /// 16 ms) is passed on whole, for the handler to follow by stretching, and no sample is cut or made up (the stream
    /// followed a quarter of the way per buffer, and a second shift before the first was followed, 32 ms on the
    /// microphone, was taken for a new device: 65 ms of zeros went in, a click, counted as missing by the handler).
    @Test func aShiftOfTheStampsIsPassedOnWholeAndNoSampleIsCutOrMadeUp() {
        var timeline = PipeWireAudioStream.Shared()
        timeline.live = true
        timeline.enqueue(bytes: buffer(1024), frames: 1024, stamped: 1_000_000_000, lost: nil, bytesPerFrame: 8)
        #expect(timeline.chunks.last?.discontinuity == true, "the first")
        // 32 ms later than where the last one ended, twice: no gap filled, nothing flagged.
        for i in 1...2 {
            let stamped = timeline.next + 32_000_000
            timeline.enqueue(bytes: buffer(256), frames: 256, stamped: stamped, lost: 0, bytesPerFrame: 8)
            #expect(timeline.chunks.last?.presentationTime == stamped && timeline.chunks.count == i + 1)
        }
        // From here on the stamps say 48 ms earlier: never before the middle of the last chunk, caught up in 18 chunks.
        let small = UInt64(256) * 1_000_000_000 / 48_000
        let base = timeline.next
        for k in 0..<24 {
            let before = timeline.chunks.last!.presentationTime
            timeline.enqueue(
                bytes: buffer(256), frames: 256, stamped: base + UInt64(k) * small - 48_000_000, lost: 0,
                bytesPerFrame: 8)
            #expect(timeline.chunks.last!.presentationTime > before)
        }
        #expect(timeline.chunks.last!.presentationTime == base + 23 * small - 48_000_000)
        #expect(timeline.chunks.allSatisfy { $0.frameCount == $0.bytes.count / 8 })
        #expect(timeline.chunks.dropFirst().allSatisfy { !$0.discontinuity })
        #expect(timeline.figures.resyncs == 0)
        // Back to 1024: the graph's clock moves 768 samples on, the stamps do not: no sample is missing.
        timeline.enqueue(bytes: buffer(1024), frames: 1024, stamped: timeline.next, lost: 768, bytesPerFrame: 8)
        #expect(timeline.chunks.last?.discontinuity == false && timeline.figures.resyncs == 0)
        // Samples lost (an xrun): the clock and the stamps both moved a cycle on. Where its stamp says, flagged,
        // nothing filled in.
        let stamped = timeline.next + quantum
        timeline.enqueue(bytes: buffer(1024), frames: 1024, stamped: stamped, lost: 1024, bytesPerFrame: 8)
        #expect(timeline.chunks.last?.presentationTime == stamped && timeline.chunks.last?.discontinuity == true)
        #expect(timeline.figures.resyncs == 1)
    }

    /// A buffer taken just as the next cycle began, before that cycle's buffer came, reads the next cycle's time and
    /// clock: it looks a cycle late, after a lost cycle. It is held back until the next buffer says which it was (the
    /// clock where it was: late; it goes where it follows on, unflagged), for at most `holdLimit` (every one of
    /// them counted a cycle missing, and faded out and in, on a loaded machine).
    @Test func aBufferTakenLateIsNotTakenForALoss() {
        var timeline = PipeWireAudioStream.Shared()
        timeline.live = true
        let small = UInt64(256) * 1_000_000_000 / 48_000
        timeline.enqueue(bytes: buffer(256), frames: 256, stamped: 1_000_000_000, lost: nil, bytesPerFrame: 8)
        #expect(timeline.take(now: 1_000_000_000, bytesPerFrame: 8) != nil)
        let end = timeline.next
        timeline.enqueue(bytes: buffer(256), frames: 256, stamped: end + small, lost: 256, bytesPerFrame: 8)
        #expect(timeline.take(now: end, bytesPerFrame: 8) == nil, "held back")
        timeline.enqueue(bytes: buffer(256), frames: 256, stamped: end + small, lost: -256, bytesPerFrame: 8)
        let late = timeline.take(now: end, bytesPerFrame: 8)
        #expect(late?.presentationTime == end && late?.discontinuity == false && timeline.figures.resyncs == 0)
        #expect(timeline.chunks.map(\.presentationTime) == [end + small] && timeline.chunks[0].discontinuity == false)
        // A real loss: the next buffer finds the clock moved on as usual; the one held is handed on as it was.
        _ = timeline.take(now: end, bytesPerFrame: 8)
        let after = timeline.next + 2 * small
        timeline.enqueue(bytes: buffer(256), frames: 256, stamped: after, lost: 512, bytesPerFrame: 8)
        timeline.enqueue(bytes: buffer(256), frames: 256, stamped: after + small, lost: 0, bytesPerFrame: 8)
        #expect(timeline.chunks.map(\.discontinuity) == [true, false] && timeline.chunks[0].presentationTime == after)
        // Two cycles looked lost, one of them was lateness: one is lost, and the chunk goes a cycle back, flagged.
        _ = timeline.take(now: after, bytesPerFrame: 8)
        _ = timeline.take(now: after, bytesPerFrame: 8)
        let both = timeline.next + 2 * small
        timeline.enqueue(bytes: buffer(256), frames: 256, stamped: both, lost: 512, bytesPerFrame: 8)
        timeline.enqueue(bytes: buffer(256), frames: 256, stamped: both, lost: -256, bytesPerFrame: 8)
        #expect(timeline.chunks.map(\.discontinuity) == [true, false])
        #expect(timeline.chunks[0].presentationTime == both - small)
        // None comes: handed on after holdLimit.
        _ = timeline.take(now: after, bytesPerFrame: 8)
        _ = timeline.take(now: after, bytesPerFrame: 8)
        let last = timeline.next + small
        timeline.enqueue(bytes: buffer(256), frames: 256, stamped: last, lost: 256, bytesPerFrame: 8)
        #expect(timeline.take(now: last, bytesPerFrame: 8) == nil)
        #expect(timeline.heldUntil == timeline.next + PipeWireAudioStream.holdLimit)
        let handedOn = timeline.take(now: timeline.next + PipeWireAudioStream.holdLimit, bytesPerFrame: 8)
        #expect(handedOn?.presentationTime == last)
    }

    /// The graph's clock (ticks, at 48 kHz here) tells a loss from a shift: at a quantum change the clock moves on
    /// by the last buffer's length, whatever the stamps do; in an xrun by cycles that never came.
    @Test func theGraphClockTellsSamplesLostFromAShift() {
        var clock = GraphClock()
        let rate = spa_fraction(num: 1, denom: 48_000)
        #expect(clock.advance(frames: [1024], ticks: 48_000, rate: rate, waiting: 0) == nil)
        #expect(
            clock.advance(frames: [256], ticks: 49_024, rate: rate, waiting: 0) == 0,
            "the quantum went from 1024 to 256")
        #expect(clock.advance(frames: [256, 256], ticks: 49_536, rate: rate, waiting: 0) == 0, "two taken at once")
        #expect(clock.advance(frames: [256], ticks: 50_048, rate: rate, waiting: 0) == 256, "a cycle lost")
        #expect(clock.advance(frames: [256], ticks: 50_560, rate: rate, waiting: 1) == 0, "one more waits")
        #expect(
            clock.advance(frames: [256, 256], ticks: 50_816, rate: rate, waiting: 0) == 0,
            "the one that waited, and the next")
        // A graph at 44.1 kHz: its ticks in its own rate, the frames (converted) at 48 kHz.
        var other = GraphClock()
        let cd = spa_fraction(num: 1, denom: 44_100)
        _ = other.advance(frames: [1115], ticks: 44_100, rate: cd, waiting: 0)
        #expect(abs(other.advance(frames: [1114], ticks: 45_124, rate: cd, waiting: 0)!) < 2)
        #expect(other.advance(frames: [1], ticks: 0, rate: cd, waiting: 0) == nil, "no clock")
    }

    /// A buffer whose frame i carries the byte i % 256.
    func numbered(_ frames: Int) -> [UInt8] { (0..<frames).flatMap { [UInt8](repeating: UInt8($0 % 256), count: 8) } }

    /// The daemon's callback came late, after the next cycles' buffers were there too, and PipeWire's time report
    /// is the newest cycle's: the buffers taken at once are stamped back from it, each ending where the next
    /// begins, and go on the timeline exactly where they belong (each stamped with the newest cycle's time, the
    /// older ones were a quantum or two late, and a stall of three cycles made a resync 42 ms late).
    @Test func buffersTakenLateAreStampedBackFromTheNewestCycle() {
        let now: Int64 = 5_000_000_000
        let q = Int64(quantum)
        // What a sink plays: from its cycle's start on.
        #expect(PipeWireAudioStream.stamps(frames: [1024], now: now, delay: 0, waiting: 0, capturesSink: true) == [now])
        #expect(
            PipeWireAudioStream.stamps(frames: [1024, 1024, 1024], now: now, delay: 0, waiting: 0, capturesSink: true)
                == [now - 2 * q, now - q, now])
        // One more came between taking them and reading the time: all are a cycle earlier.
        #expect(
            PipeWireAudioStream.stamps(frames: [1024, 1024], now: now, delay: 0, waiting: 1, capturesSink: true)
                == [now - 2 * q, now - q])
        // A device's buffer was captured until `delay` before its cycle began.
        let delay: Int64 = 3_000_000
        let small = Int64(256 * 1_000_000_000 / 48_000)
        #expect(
            PipeWireAudioStream.stamps(frames: [256, 1024], now: now, delay: delay, waiting: 0, capturesSink: false)
                == [now - delay - q - small, now - delay - q])
        // On the timeline: a buffer at 4 s - 3 quanta, then a stall of three cycles; all go back to back.
        var timeline = PipeWireAudioStream.Shared()
        timeline.live = true
        timeline.enqueue(bytes: buffer(1024), frames: 1024, stamped: UInt64(now - 3 * q), lost: nil, bytesPerFrame: 8)
        for stamp in PipeWireAudioStream.stamps(
            frames: [1024, 1024, 1024], now: now, delay: 0, waiting: 0, capturesSink: true)
        {
            timeline.enqueue(bytes: buffer(1024), frames: 1024, stamped: UInt64(stamp), lost: 0, bytesPerFrame: 8)
        }
        #expect(
            timeline.chunks.map { Int64($0.presentationTime) } == [now - 3 * q, now - 2 * q, now - q, now]
                && timeline.figures.resyncs == 0,
            "\(timeline.chunks.map(\.presentationTime))")
    }

    @Test func theFirstBufferGoesExactlyWhereItsStampSays() {
        // 5 ms (240 frames) after the timeline's end: there, with nothing before it (no zeros that would pass
        // for audio: the handler counts what is missing), not a 5 ms error kept for good.
        var late = PipeWireAudioStream.Shared()
        late.next = 1_000_000_000
        late.enqueue(bytes: buffer(1024), frames: 1024, stamped: 1_005_000_000, lost: nil, bytesPerFrame: 8)
        #expect(late.chunks.map(\.frameCount) == [1024] && late.chunks.first?.presentationTime == 1_005_000_000)
        // 5 ms before (from before the broadcast began): those 240 frames are cut.
        var early = PipeWireAudioStream.Shared()
        early.next = 1_000_000_000
        early.enqueue(bytes: numbered(1024), frames: 1024, stamped: 995_000_000, lost: nil, bytesPerFrame: 8)
        #expect(early.chunks.map(\.frameCount) == [784] && early.chunks[0].presentationTime == 1_000_000_000)
        #expect(early.chunks[0].bytes.first == 240)
        #expect(late.figures.resyncs == 0 && early.figures.resyncs == 0)
    }

    /// When the graph's clock cannot tell, a stamp more than 40 ms from where the last buffer ended is a resync: the
    /// buffer goes where its stamp says, flagged, a gap left as it is or the samples that overlap cut.
    @Test func aStrayBufferIsPutBackInPlace() {
        var timeline = PipeWireAudioStream.Shared()
        timeline.live = true
        timeline.next = 1_000_000_000
        timeline.enqueue(bytes: buffer(1024), frames: 1024, stamped: 1_000_000_000, lost: nil, bytesPerFrame: 8)
        // 100 ms later than where it would go.
        let stamped = timeline.next + 100_000_000
        timeline.enqueue(bytes: buffer(1024), frames: 1024, stamped: stamped, lost: nil, bytesPerFrame: 8)
        #expect(timeline.chunks.map(\.frameCount) == [1024, 1024] && timeline.figures.resyncs == 1)
        #expect(timeline.chunks.last?.presentationTime == stamped && timeline.chunks.last?.discontinuity == true)
        // 30 ms later: followed, not a resync.
        timeline.enqueue(
            bytes: buffer(1024), frames: 1024, stamped: timeline.next + 30_000_000, lost: nil,
            bytesPerFrame: 8)
        #expect(timeline.chunks.last?.discontinuity == false && timeline.figures.resyncs == 1)
        // 45 ms earlier: its first 2160 frames overlap what is there and are cut.
        let end = timeline.next
        timeline.enqueue(bytes: numbered(4096), frames: 4096, stamped: end - 45_000_000, lost: nil, bytesPerFrame: 8)
        #expect(timeline.chunks.last?.presentationTime == end && timeline.chunks.last?.frameCount == 4096 - 2160)
        #expect(timeline.chunks.last?.bytes.first == UInt8(2160 % 256) && timeline.figures.resyncs == 2)
        // All of it before the end: nothing to place.
        timeline.enqueue(bytes: buffer(1024), frames: 1024, stamped: 500_000_000, lost: nil, bytesPerFrame: 8)
        #expect(timeline.chunks.count == 4 && timeline.figures.resyncs == 3)
    }

    @Test func afterSilenceTheNextBufferIsPlacedExactly() {
        var timeline = PipeWireAudioStream.Shared()
        timeline.enqueue(bytes: buffer(1024), frames: 1024, stamped: 0, lost: nil, bytesPerFrame: 8)
        while timeline.take(now: 1_000_000_000, bytesPerFrame: 8) != nil {}
        let end = timeline.next
        #expect(end >= 800_000_000 && timeline.silentSince == quantum)
        // Audio comes back 5 ms after the silence's end: within 20 ms, but no longer in step.
        timeline.enqueue(bytes: buffer(1024), frames: 1024, stamped: end + 5_000_000, lost: 0, bytesPerFrame: 8)
        #expect(timeline.chunks.map(\.frameCount) == [1024])
        #expect(timeline.chunks.first?.presentationTime == end + 5_000_000)
        #expect(timeline.chunks.first?.discontinuity == true)
        #expect(timeline.silentSince == nil && timeline.figures.resyncs == 0)
    }

    @Test func theQueueHoldsHalfASecondAndCountsWhatItDrops() {
        var timeline = PipeWireAudioStream.Shared()
        timeline.live = true
        for i in 0..<40 {
            timeline.enqueue(bytes: buffer(1024), frames: 1024, stamped: UInt64(i) * quantum, lost: 0, bytesPerFrame: 8)
        }
        #expect(timeline.queued <= PipeWireAudioStream.queueLimit)
        #expect(timeline.figures.dropped == UInt64(40 - timeline.chunks.count) && timeline.figures.dropped > 0)
        #expect(timeline.chunks.first?.discontinuity == true, "what follows a chunk dropped comes after a gap")
    }

    /// While the broadcast is not live (before it starts, while paused) the stream keeps the last `preRoll` of
    /// audio, dropping older chunks without counting them; going live takes what lies within `preRoll` of it.
    @Test func aPreRollIsKeptUntilTheBroadcastGoesLive() {
        var timeline = PipeWireAudioStream.Shared()
        for i in 0..<40 {
            let stamped = 1_000_000_000 + UInt64(i) * quantum
            timeline.enqueue(bytes: buffer(1024), frames: 1024, stamped: stamped, lost: 0, bytesPerFrame: 8)
        }
        let preRoll = PipeWireAudioStream.preRoll
        #expect(timeline.queued <= preRoll && timeline.queued + quantum > preRoll)
        #expect(timeline.figures.dropped == 0 && timeline.chunks.last?.presentationTime == 1_000_000_000 + 39 * quantum)
        let resume = timeline.next - 30_000_000
        timeline.goLive(at: resume)
        let first = timeline.chunks.first!
        #expect(timeline.live && first.presentationTime + first.duration > resume - preRoll)
        #expect(first.presentationTime < resume - 10_000_000, "audio from before the first frame, for the fade")
        // Long after the last audio (the device went away while paused): silence starts at the resume.
        timeline.leaveLive()
        timeline.goLive(at: timeline.next + 5_000_000_000)
        #expect(timeline.chunks.isEmpty && timeline.next == resume + 30_000_000 + 5_000_000_000)
    }

    @Test func nothingComingMeansSilenceBehindTheClock() {
        let stream = PipeWireAudioStream(
            name: "mic", target: .defaultDevice, format: AudioFormat(channels: 1, sampleFormat: .float32),
            capturesSink: false)
        stream.reset()
        stream.goLive(at: 0)
        #expect(stream.take(now: PipeWireAudioStream.silenceAfter) == nil)
        var covered: UInt64 = 0
        while let chunk = stream.take(now: 1_000_000_000) {
            #expect(chunk.presentationTime == covered && chunk.bytes.count == chunk.frameCount * 4)
            covered += chunk.duration
        }
        #expect(covered == 1_000_000_000 - PipeWireAudioStream.silenceAfter)
        #expect(stream.silentSince == 0)
    }

    @Test func theDefaultDeviceIsReadFromTheMetadata() {
        #expect(PipeWireSession.jsonName("{\"name\":\"alsa_input.usb-mic\"}") == "alsa_input.usb-mic")
        #expect(PipeWireSession.jsonName("{ \"name\": \"test_sink\" }") == "test_sink")
        #expect(PipeWireSession.jsonName("{}") == nil && PipeWireSession.jsonName("{\"name\":\"\"}") == nil)
    }
}

@Suite struct FrameDamageTests {
    @Test func damageAddsUpInRowsUntilAConversionAndTheFirstFrameIsWhole() {
        var damage = FrameDamage()
        #expect(damage.changedRows(height: 100) == 0..<100)
        damage.reset()
        #expect(damage.changedRows(height: 100).isEmpty)
        // Two buffers' rectangles, in buffer coordinates with the picture starting at row 10: rows widen to even bounds.
        damage.add([(y: 31, height: 4)], pictureTop: 10, pictureHeight: 100)
        damage.add([(y: 50, height: 3), (y: 0, height: 5)], pictureTop: 10, pictureHeight: 100)
        #expect(damage.changedRows(height: 100) == 20..<44)
        // Rectangles outside the picture are clipped away.
        damage.reset()
        damage.add([(y: 200, height: 10)], pictureTop: 10, pictureHeight: 100)
        #expect(damage.changedRows(height: 100).isEmpty)
        damage.add([(y: 105, height: 20)], pictureTop: 10, pictureHeight: 100)
        #expect(damage.changedRows(height: 100) == 94..<100)
        // A buffer that says nothing makes it all changed.
        damage.add(nil, pictureTop: 0, pictureHeight: 100)
        #expect(damage.changedRows(height: 100) == 0..<100)
        damage.reset()
        damage.add([], pictureTop: 0, pictureHeight: 100)
        #expect(damage.whole)
    }
}

@Suite struct PipeWireCursorTests {
    /// One pixel of each 32-bit order, red 0x30, green 0x60, blue 0x90, alpha 0xa0, as bytes in memory.
    @Test func everyByteOrderBecomesPremultipliedARGB() {
        let cases: [(spa_video_format, [UInt8], UInt32)] = [
            (SPA_VIDEO_FORMAT_RGBA, [0x30, 0x60, 0x90, 0xa0], 0xa030_6090),
            (SPA_VIDEO_FORMAT_BGRA, [0x90, 0x60, 0x30, 0xa0], 0xa030_6090),
            (SPA_VIDEO_FORMAT_ARGB, [0xa0, 0x30, 0x60, 0x90], 0xa030_6090),
            (SPA_VIDEO_FORMAT_ABGR, [0xa0, 0x90, 0x60, 0x30], 0xa030_6090),
            (SPA_VIDEO_FORMAT_RGBx, [0x30, 0x60, 0x90, 0x00], 0xff30_6090),
            (SPA_VIDEO_FORMAT_BGRx, [0x90, 0x60, 0x30, 0x00], 0xff30_6090),
            (SPA_VIDEO_FORMAT_xRGB, [0x00, 0x30, 0x60, 0x90], 0xff30_6090),
            (SPA_VIDEO_FORMAT_xBGR, [0x00, 0x90, 0x60, 0x30], 0xff30_6090),
        ]
        for (format, bytes, argb) in cases {
            let pixels = bytes.withUnsafeBytes { PipeWireCursor.premultipliedARGB(image(format, 1, 1, $0.baseAddress)) }
            #expect(pixels == [argb], "\(format)")
        }
        #expect(
            [UInt8](repeating: 0, count: 4).withUnsafeBytes {
                PipeWireCursor.premultipliedARGB(image(SPA_VIDEO_FORMAT_NV12, 1, 1, $0.baseAddress))
            } == nil)
    }

    @Test func theStrideSkipsPaddingBetweenRows() {
        // 2x2 BGRA with 12-byte rows: the last 4 bytes of each row are padding.
        let bytes: [UInt8] = [1, 0, 0, 255, 2, 0, 0, 255, 9, 9, 9, 9, 3, 0, 0, 255, 4, 0, 0, 255, 9, 9, 9, 9]
        let pixels = bytes.withUnsafeBytes {
            PipeWireCursor.premultipliedARGB(image(SPA_VIDEO_FORMAT_BGRA, 2, 2, $0.baseAddress, stride: 12))
        }
        #expect(pixels == [0xff00_0001, 0xff00_0002, 0xff00_0003, 0xff00_0004])
    }

    /// Positions are taken into picture coordinates; the same image again keeps its serial; no image, or
    /// the pointer elsewhere, is invisible (the last position kept); a hotspot outside the picture too.
    @Test func thePointerIsFollowedBufferAfterBuffer() {
        var cursor = PipeWireCursor()
        #expect(cursor.state == nil)
        let picture = (x: 40, y: 30, width: 240, height: 180)
        let yellow: [UInt8] = [0xff, 0xd0, 0x00, 0xff]
        yellow.withUnsafeBytes {
            cursor.move(x: 140, y: 80, image: image(SPA_VIDEO_FORMAT_RGBA, 1, 1, $0.baseAddress), picture: picture)
        }
        #expect(
            cursor.state
                == CursorState(
                    x: 100, y: 50, visible: true,
                    sprite: CursorSprite(
                        width: 1, height: 1, hotspotX: 0, hotspotY: 0, pixels: [0xffff_d000], serial: 1)))
        yellow.withUnsafeBytes {
            cursor.move(x: 141, y: 80, image: image(SPA_VIDEO_FORMAT_RGBA, 1, 1, $0.baseAddress), picture: picture)
        }
        #expect(cursor.state?.sprite?.serial == 1 && cursor.state?.x == 101)
        [UInt8]([0, 0, 0x80, 0x80]).withUnsafeBytes {
            cursor.move(x: 141, y: 80, image: image(SPA_VIDEO_FORMAT_RGBA, 1, 1, $0.baseAddress), picture: picture)
        }
        #expect(cursor.state?.sprite?.serial == 2 && cursor.state?.sprite?.pixels == [0x8000_0080])
        cursor.move(x: 150, y: 90, image: nil, picture: picture)
        #expect(cursor.state?.x == 110 && cursor.state?.visible == true && cursor.state?.sprite?.serial == 2)
        cursor.away()
        #expect(cursor.state?.x == 110 && cursor.state?.y == 60 && cursor.state?.visible == false)
        cursor.move(x: 10, y: 90, image: nil, picture: picture)
        #expect(cursor.state?.x == -30 && cursor.state?.visible == false)
        cursor.move(x: 150, y: 90, image: image(SPA_VIDEO_FORMAT_RGBA, 0, 0, nil), picture: picture)
        #expect(cursor.state?.visible == false, "an empty image: nothing to see")
        cursor.move(x: 150, y: 90, image: nil, picture: picture)
        #expect(cursor.state?.visible == false, "still no image")
    }

    /// An application's channels onto the stereo stream that captures it: same side, both for what has none.
    @Test func applicationChannelsGoToTheirSide() {
        #expect(PipeWireSession.stereoChannels("FL") == ["FL"] && PipeWireSession.stereoChannels("RR") == ["FR"])
        #expect(
            PipeWireSession.stereoChannels("MONO") == ["FL", "FR"]
                && PipeWireSession.stereoChannels("FC") == ["FL", "FR"])
        #expect(
            PipeWireSession.stereoChannels("LFE").isEmpty && PipeWireSession.stereoChannels("AUX3") == ["FL", "FR"])
    }

    /// A linked stream is stereo; a mono broadcast gets each frame's two samples averaged, in either format.
    @Test func stereoIsAveragedToMono() {
        let floats: [Float] = [0.5, 0.25, -1, 1, 0.125, 0.125]
        let mono = floats.withUnsafeBytes { PipeWireAudioStream.averagePairs($0, sampleFormat: .float32) }
        #expect(mono.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) } == [0.375, 0, 0.125])
        let shorts: [Int16] = [32767, 32767, -32768, -32768, 100, -301]
        let monoS16 = shorts.withUnsafeBytes { PipeWireAudioStream.averagePairs($0, sampleFormat: .s16) }
        #expect(monoS16.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) } == [32767, -32768, -100])
    }

    func image(_ format: spa_video_format, _ width: Int, _ height: Int, _ pixels: UnsafeRawPointer?, stride: Int? = nil)
        -> PipeWireCursor.Image
    {
        PipeWireCursor.Image(
            format: format.rawValue, width: width, height: height, stride: stride ?? width * 4, hotspotX: 0,
            hotspotY: 0, pixels: pixels)
    }

    /// A silent stream says the true cause: nothing to connect to (no microphone, no sound output, an app that plays
    /// nothing), not "check that PipeWire runs" while it does.
    @Test func aSilentStreamSaysWhyInTheUsersWords() {
        #expect(
            PipeWireAudioSource.silenceCause(.defaultDevice, capturesSink: false, state: "unconnected")
                == "PipeWire has no microphone")
        #expect(
            PipeWireAudioSource.silenceCause(.node("xclock"), capturesSink: true, state: "unconnected")
                == "'xclock' plays nothing through PipeWire")
        #expect(
            PipeWireAudioSource.silenceCause(.defaultDevice, capturesSink: true, state: "unconnected")
                == "PipeWire has no sound output to capture")
        #expect(
            PipeWireAudioSource.silenceCause(.node("usb-mic"), capturesSink: false, state: "unconnected")
                == "PipeWire has no source 'usb-mic'")
        #expect(
            PipeWireAudioSource.silenceCause(.defaultDevice, capturesSink: false, state: "paused")
                == "nothing comes from PipeWire (its stream is paused)")
    }
}
