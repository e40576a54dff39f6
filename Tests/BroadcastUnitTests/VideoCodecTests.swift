import BroadcastCore
import CFFmpeg
import Testing

@testable import BroadcastEncoding
@testable import BroadcastMedia

/// Each video encoder as libavcodec runs it: the settings reach it, and its packets come the way the muxer takes them.
@Suite struct VideoCodecTests {
    struct Encoded {
        var bytes = 0
        /// After the first (key) frame, which the rate control cannot make small for noise.
        var laterBytes = 0
        var pts: [Int64] = []
        var dts: [Int64] = []
    }

    /// 20 frames of a moving gradient with noise on it, 320x180, through `implementation` with `settings`:
    /// noise is where the quality and the bit rate asked for make the most difference.
    func encode(_ implementation: VideoEncoderImplementation, _ change: (inout VideoEncoderSettings) -> Void) throws
        -> Encoded
    {
        var settings = VideoEncoderSettings(codec: implementation.codec, width: 320, height: 180, framesPerSecond: 30)
        change(&settings)
        let format = implementation.inputFormat(for: .nv12)
        let encoder = try Encoder.video(
            settings, pixelFormat: format, globalHeader: true, implementation: implementation)
        #expect(encoder.implementation == implementation)
        let frame = try MediaFrame.video(width: 320, height: 180, pixelFormat: format)
        var out = Encoded()
        var seed: UInt32 = 1
        func collect(_ packet: EncodedPacket) {
            out.bytes += packet.data.count
            if !out.pts.isEmpty { out.laterBytes += packet.data.count }
            out.pts.append(packet.pts)
            out.dts.append(packet.dts)
        }
        for index in 0..<20 {
            try check(av_frame_make_writable(frame.frame), "writable")
            for plane in 0..<(format == .i420 ? 3 : 2) {
                let rows = plane == 0 ? 180 : 90
                let stride = withUnsafeBytes(of: frame.frame.pointee.linesize) {
                    Int($0.load(fromByteOffset: plane * 4, as: Int32.self))
                }
                let base = withUnsafeBytes(of: frame.frame.pointee.data) {
                    $0.load(fromByteOffset: plane * 8, as: UnsafeMutablePointer<UInt8>.self)
                }
                for y in 0..<rows {
                    for x in 0..<stride {
                        seed = seed &* 1_664_525 &+ 1_013_904_223
                        // A moving gradient with noise of 16 levels on top.
                        base[y * stride + x] = UInt8(truncatingIfNeeded: x + 2 * y + 6 * index + Int(seed >> 28))
                    }
                }
            }
            frame.frame.pointee.pts = Int64(index * 3000)
            try encoder.encode(frame, collect)
        }
        try encoder.encode(nil, collect)
        return out
    }

    @Test(arguments: VideoEncoderImplementation.allCases)
    func qualityAndBitRateReachTheEncoderAndPacketsComeInOrder(_ implementation: VideoEncoderImplementation) throws {
        let fine = try encode(implementation) { $0.crf = 10 }
        let coarse = try encode(implementation) { $0.crf = implementation.codec == .av1 ? 60 : 45 }
        #expect(
            fine.bytes > coarse.bytes * 3, "crf: \(fine.bytes) bytes at the fine end, \(coarse.bytes) at the coarse")
        let low = try encode(implementation) { $0.bitRate = 150 }
        let high = try encode(implementation) { $0.bitRate = 3000 }
        // 20 times the rate; libaom, the least exact over 20 frames, makes 3 times the bytes (one the same size if ignored).
        #expect(
            high.laterBytes > low.laterBytes * 5 / 2,
            "bit rate: \(high.laterBytes) bytes at 3000 kbit/s, \(low.laterBytes) at 150")
        // Every frame comes out, in presentation order, decoded as it is presented (Muxer.writeHoldingBack).
        for run in [fine, coarse, low, high] {
            #expect(run.pts == (0..<20).map { Int64($0 * 3000) }, "\(run.pts)")
            #expect(run.dts.enumerated().allSatisfy { $0.element <= run.pts[$0.offset] })
        }
    }

    @Test func presetsAndTunesMapToEachEncodersOwn() {
        // Each codec's own default preset: x265's and SVT-AV1's fastest keep 1080p30 live on two cores.
        #expect(VideoCodec.allCases.map(\.defaultPreset) == ["veryfast", "ultrafast", "ultrafast"])
        #expect(VideoEncoderSettings(codec: .hevc, width: 64, height: 64, framesPerSecond: 30).preset == "ultrafast")
        var settings = VideoEncoderSettings(codec: .av1, width: 64, height: 64, framesPerSecond: 30)
        #expect(
            VideoEncoderImplementation.libsvtav1.options(settings) == [
                "preset": "12", "crf": "35", "svtav1-params": "pred-struct=1:tune=0",
            ])
        #expect(
            VideoEncoderImplementation.libaom.options(settings) == [
                "cpu-used": "8", "row-mt": "1", "usage": "realtime",
                "lag-in-frames": "0", "crf": "35",
            ])
        settings.preset = "slow"
        settings.tune = "none"
        settings.bitRate = 2000
        #expect(
            VideoEncoderImplementation.libsvtav1.options(settings)
                == ["preset": "5", "svtav1-params": "enable-force-key-frames=1:tune=0"])
        settings.codec = .hevc
        #expect(
            VideoEncoderImplementation.libx265.options(settings)
                == ["preset": "slow", "x265-params": "log-level=error", "forced-idr": "1"])
        #expect(
            VideoEncoderImplementation.candidates(for: .av1) == [.libsvtav1, .libaom],
            "SVT-AV1 first, libaom where it is missing")
        #expect(
            VideoEncoderImplementation.libx265.inputFormat(for: .nv12) == .i420
                && VideoEncoderImplementation.libx264.inputFormat(for: .nv12) == .nv12)
        #expect(Muxer.tag("hvc1") == 0x3163_7668)
    }
}
