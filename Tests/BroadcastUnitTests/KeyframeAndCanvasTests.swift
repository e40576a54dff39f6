import BroadcastCore
import CFFmpeg
import Testing

@testable import BroadcastEncoding

/// Keyframes by stream time, whatever the screen does, and forced keyframes each encoder makes IDRs of.
@Suite struct KeyframeTests {
    @Test func aKeyframeIsDueOnTheFrameNearestEachMark() {
        var schedule = KeyframeSchedule(interval: 180_000, slack: 1500)  // 2 s at 90 kHz, half a frame at 30 fps
        #expect(schedule.isDue(at: 0))
        schedule.made(at: 0)
        // From half a frame before the mark: a repeat stamped at its deadline, 1 ms before it, is on it.
        #expect(!schedule.isDue(at: 178_499) && schedule.isDue(at: 178_500))
        schedule.made(at: 179_910)
        #expect(schedule.next == 360_000 && !schedule.isDue(at: 358_499))
        // A still screen: the first frame after the mark, however late it comes.
        schedule.made(at: 450_000)
        #expect(schedule.next == 540_000, "the marks stay: the next is at 6 s, not 2 s after 5 s")
        // One asked for between the marks (after a reconnection) does not move them either.
        schedule.made(at: 500_000)
        #expect(schedule.next == 540_000)
        // For HLS, never before the mark: it cuts at the first keyframe at or after it.
        var segmented = KeyframeSchedule(interval: 180_000, slack: 0)
        segmented.made(at: 0)
        #expect(!segmented.isDue(at: 179_999) && segmented.isDue(at: 180_000))
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var implementation: VideoEncoderImplementation
        var tune: String
        var testDescription: String { "\(implementation.encoderName), tune \(tune)" }
    }

    /// A 160x96 picture that moves a little with each frame's number.
    static func paint(_ frame: MediaFrame, _ index: Int) throws {
        try check(av_frame_make_writable(frame.frame), "writable")
        for (number, plane) in frame.planes.enumerated() {
            let rows = number == 0 ? 96 : 48
            for y in 0..<rows {
                for x in 0..<plane.stride {
                    plane.data[y * plane.stride + x] = number == 0 ? UInt8(truncatingIfNeeded: x + y + 4 * index) : 128
                }
            }
        }
    }

    /// Encodes frames at `times` (s) with a 2 s keyframe interval: the packets (owned) and their times.
    static func encode(_ c: Case, times: [Double]) throws -> (encoder: Encoder, packets: [EncodedPacket]) {
        var settings = VideoEncoderSettings(
            codec: c.implementation.codec, width: 160, height: 96, framesPerSecond: 30,
            tune: c.tune)
        settings.keyframeInterval = 2
        let format = c.implementation.inputFormat(for: .nv12)
        let encoder = try Encoder.video(
            settings, pixelFormat: format, globalHeader: true,
            implementation: c.implementation)
        let frame = try MediaFrame.video(width: 160, height: 96, pixelFormat: format)
        var packets: [EncodedPacket] = []
        func keep(_ packet: EncodedPacket) { packets.append(packet) }
        for (index, time) in times.enumerated() {
            try paint(frame, index)
            frame.frame.pointee.pts = Int64((time * 90000).rounded())
            try encoder.encodeVideo(frame, keep)
        }
        try encoder.encode(nil, keep)
        return (encoder, packets)
    }

    /// How many frames a decoder of its own decodes from `packets` (the first a keyframe), and whether it said an
    /// error.
    static func decode(_ packets: ArraySlice<EncodedPacket>, like encoder: Encoder) throws -> (
        frames: Int, failed: Bool
    ) {
        let codec = try #require(avcodec_find_decoder(encoder.context.pointee.codec_id))
        var context = avcodec_alloc_context3(codec)
        var parameters = avcodec_parameters_alloc()
        defer {
            avcodec_free_context(&context)
            avcodec_parameters_free(&parameters)
        }
        try check(avcodec_parameters_from_context(parameters, encoder.context), "parameters")
        try check(avcodec_parameters_to_context(context, parameters), "parameters")
        try check(avcodec_open2(context, codec, nil), "open the decoder")
        var frame = av_frame_alloc()
        defer { av_frame_free(&frame) }
        var frames = 0
        var failed = false
        func send(_ packet: UnsafeMutablePointer<AVPacket>?) {
            if avcodec_send_packet(context, packet) < 0 { failed = true }
            while avcodec_receive_frame(context, frame) == 0 { frames += 1 }
        }
        for packet in packets { try packet.withAVPacket { send($0) } }
        send(nil)
        return (frames, failed)
    }

    /// A screen that changes now and then (a clock, a click), its repeats not encoded: a keyframe on the first frame at
    /// or after every 2 s mark (with frames counted, the only one was the first), each an IDR that a decoder starting
    /// there decodes with every frame after it. libx265 needs `forced-idr` (else an open-GOP I frame, not marked key),
    /// SVT-AV1 `enable-force-key-frames` (else none at all).
    @Test(arguments: [
        Case(implementation: .libx264, tune: "zerolatency"),
        Case(implementation: .libx265, tune: "zerolatency"),
        Case(implementation: .libsvtav1, tune: "none"),
        Case(implementation: .libaom, tune: "zerolatency"),
    ])
    func keyframesComeByTimeOnAQuietScreenAndDecodeOnTheirOwn(_ c: Case) throws {
        let times = [0, 0.5, 1, 2, 2.2, 3.9, 4.3, 5, 6, 6.5, 7, 8.4, 9]
        let (encoder, packets) = try Self.encode(c, times: times)
        #expect(
            encoder.keyframes != nil && encoder.context.pointee.gop_size == 120,
            "forced, the encoder's own count a backstop")
        #expect(packets.count == times.count)
        let keys = packets.filter(\.isKeyframe).map { Double($0.pts) / 90000 }
        #expect(keys == [0, 2, 4.3, 6, 8.4], "keyframes at \(keys)")
        let second = try #require(packets.firstIndex { $0.pts == 4 * 90000 + 27000 })
        let decoded = try Self.decode(packets[second...], like: encoder)
        #expect(decoded.frames == packets.count - second && !decoded.failed, "from the keyframe at 4.3 s: \(decoded)")
    }

    /// SVT-AV1's low-delay prediction (tune zerolatency) takes no forced keyframes: it counts frames for them, and the
    /// handlers give it every frame (`RecordingEncoder`), so that its count is time.
    @Test func svtAV1InLowDelayCountsTheIntervalInFrames() throws {
        let lowDelay = Case(implementation: .libsvtav1, tune: "zerolatency")
        let (encoder, packets) = try Self.encode(lowDelay, times: (0..<65).map { Double($0) / 30 })
        #expect(encoder.keyframes == nil && encoder.context.pointee.gop_size == 60)
        let keys = packets.filter(\.isKeyframe).map(\.pts)
        #expect(keys == [0, 180_000], "\(keys)")
    }
}

/// A new capture area of another shape goes onto the encoder's canvas scaled to fit, centred, with black bars.
@Suite struct CanvasTests {
    @Test func aPictureOfAnotherShapeIsFittedCentredOnEvenPixels() {
        #expect(Letterbox(fitting: 480, 480, into: 1920, 1080) == Letterbox(x: 420, y: 0, width: 1080, height: 1080))
        #expect(Letterbox(fitting: 1920, 1080, into: 640, 480) == Letterbox(x: 0, y: 60, width: 640, height: 360))
        #expect(Letterbox(fitting: 1280, 720, into: 1920, 1080) == Letterbox(x: 0, y: 0, width: 1920, height: 1080))
        #expect(
            Letterbox(fitting: 1366, 768, into: 1920, 1080) == Letterbox(x: 0, y: 0, width: 1920, height: 1080),
            "within a pixel of the canvas: no bar of one pixel")
        #expect(Letterbox(fitting: 101, 77, into: 640, 360) == Letterbox(x: 84, y: 0, width: 472, height: 360))
        #expect(Letterbox(fitting: 16, 4000, into: 640, 360) == Letterbox(x: 318, y: 0, width: 2, height: 360))
    }

    /// A 100x100 picture (it was stretched to the whole 320x180 canvas) into NV12 and I420 canvases, limited and full
    /// range: 180x180 in the middle, black to the left and right.
    @Test(arguments: [PixelFormat.nv12, .i420], [false, true])
    func aNewAreaGoesOntoTheCanvasWithBlackBars(_ layout: PixelFormat, _ fullRange: Bool) throws {
        let input = try VideoInput(
            encoding: VideoFormat(width: 320, height: 180, pixelFormat: layout),
            from: VideoFormat(width: 320, height: 180), fullRange: fullRange)
        let square = VideoFormat(width: 100, height: 100)
        try input.inputChanged(to: square)
        var bytes = [UInt8](repeating: 200, count: square.frameByteCount)
        let chroma = square.planes[1]
        for index in chroma.offset..<(chroma.offset + chroma.byteCount) { bytes[index] = index % 2 == 0 ? 90 : 240 }
        let frame = try bytes.withUnsafeBytes { try input.frame($0, layout: square, time: 0) }
        let planes = frame.planes
        let black: UInt8 = fullRange ? 0 : 16
        let row = (0..<320).map { planes[0].data[90 * planes[0].stride + $0] }
        #expect(row[0..<70].allSatisfy { $0 == black } && row[250...].allSatisfy { $0 == black }, "\(row)")
        #expect(row[72..<248].allSatisfy { abs(Int($0) - 200) <= 2 }, "\(row)")
        // Chroma of the 45th row: neutral in the bars, the picture's (Cb 90, Cr 240) in the box.
        let cb =
            layout == .nv12
            ? (0..<160).map { planes[1].data[45 * planes[1].stride + 2 * $0] }
            : (0..<160).map { planes[1].data[45 * planes[1].stride + $0] }
        let cr =
            layout == .nv12
            ? (0..<160).map { planes[1].data[45 * planes[1].stride + 2 * $0 + 1] }
            : (0..<160).map { planes[2].data[45 * planes[2].stride + $0] }
        #expect(cb[0..<35].allSatisfy { $0 == 128 } && cb[125...].allSatisfy { $0 == 128 })
        #expect(cr[0..<35].allSatisfy { $0 == 128 } && cr[125...].allSatisfy { $0 == 128 })
        #expect(cb[37..<123].allSatisfy { abs(Int($0) - 90) <= 2 }, "\(cb)")
        #expect(cr[37..<123].allSatisfy { abs(Int($0) - 240) <= 2 }, "\(cr)")
        // Back to the canvas's own size: borrowed again, no bars.
        try input.inputChanged(to: VideoFormat(width: 320, height: 180, pixelFormat: layout))
        let whole = VideoFormat(width: 320, height: 180, pixelFormat: layout)
        let same = [UInt8](repeating: 200, count: whole.frameByteCount)
        let borrowed = try same.withUnsafeBytes { try input.frame($0, layout: whole, time: 0) }
        #expect(borrowed.planes[0].data[90 * borrowed.planes[0].stride] == 200)
    }
}
