import BroadcastCapture
import BroadcastCore
@testable import BroadcastPipeWire
import Testing

/// The PipeWire audio path's pure logic: the stream timeline and the default-device metadata.
@Suite struct PipeWireLogicTests {
    func buffer(_ frames: Int, value: UInt8 = 1) -> [UInt8] { [UInt8](repeating: value, count: frames * 8) }
    let quantum: UInt64 = 1024 * 1_000_000_000 / 48_000

    @Test func buffersFollowEachOtherWhateverTheirStampsJitter() {
        var timeline = PipeWireAudioStream.Shared()
        timeline.next = 1_000_000_000
        // PipeWire's stamps wander by a few ms: the chunks stay back to back.
        for (i, jitter) in [0, 3_000_000, -2_000_000, 15_000_000].enumerated() {
            let stamped = UInt64(Int64(1_000_000_000 + UInt64(i) * quantum) + Int64(jitter))
            timeline.enqueue(bytes: buffer(1024), frames: 1024, duration: quantum, stamped: stamped, bytesPerFrame: 8)
        }
        #expect(timeline.chunks.map(\.presentationTime) == (0..<4).map { 1_000_000_000 + UInt64($0) * quantum })
        #expect(timeline.figures.resyncs == 0)
    }

    @Test func aLateBufferIsPrecededBySilenceNotAGap() {
        var timeline = PipeWireAudioStream.Shared()
        timeline.next = 1_000_000_000
        timeline.enqueue(bytes: buffer(1024), frames: 1024, duration: quantum, stamped: 1_100_000_000, bytesPerFrame: 8)
        #expect(timeline.figures.resyncs == 1)
        #expect(timeline.chunks.count == 2)
        let silence = timeline.chunks[0]
        #expect(silence.presentationTime == 1_000_000_000 && silence.frameCount == 4800 && silence.bytes.allSatisfy { $0 == 0 })
        #expect(timeline.chunks[1].presentationTime == silence.presentationTime + silence.duration)
        // An early stamp cannot go back before what was sent: it goes at the end.
        let end = timeline.next
        timeline.enqueue(bytes: buffer(1024), frames: 1024, duration: quantum, stamped: 500_000_000, bytesPerFrame: 8)
        #expect(timeline.chunks.last?.presentationTime == end && timeline.figures.resyncs == 2)
    }

    @Test func theQueueHoldsHalfASecondAndCountsWhatItDrops() {
        var timeline = PipeWireAudioStream.Shared()
        for i in 0..<40 {
            timeline.enqueue(bytes: buffer(1024), frames: 1024, duration: quantum, stamped: UInt64(i) * quantum, bytesPerFrame: 8)
        }
        #expect(timeline.queued <= PipeWireAudioStream.queueLimit)
        #expect(timeline.figures.dropped == UInt64(40 - timeline.chunks.count) && timeline.figures.dropped > 0)
    }

    @Test func nothingComingMeansSilenceBehindTheClock() {
        let stream = PipeWireAudioStream(name: "mic", target: .defaultDevice, format: AudioFormat(channels: 1, sampleFormat: .float32), capturesSink: false)
        stream.reset(at: 0)
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
