import BroadcastCore
import CFFmpeg
import Testing

@testable import BroadcastEncoding

/// Constant quality keeps under a cap (`VideoEncoderSettings.maxBitRate`): 6000 kbit/s at 1080p30 by default, in
/// proportion to the pixels a second, so that a stream or replay sharing record's encoding gets a rate a link carries.
struct VideoRateCapTests {
    @Test func theDefaultCapFollowsThePixelsASecond() {
        #expect(VideoEncoderSettings.defaultMaxBitRate(width: 1920, height: 1080, framesPerSecond: 30) == 6000)
        #expect(VideoEncoderSettings.defaultMaxBitRate(width: 3840, height: 2160, framesPerSecond: 30) == 24000)
        #expect(VideoEncoderSettings.defaultMaxBitRate(width: 1280, height: 720, framesPerSecond: 30) == 2667)
        #expect(VideoEncoderSettings.defaultMaxBitRate(width: 160, height: 96, framesPerSecond: 30) == 1000)
        #expect(VideoEncoderSettings.defaultMaxBitRate(width: 3840, height: 2160, framesPerSecond: 60) == 40000)
        var settings = VideoEncoderSettings(codec: .h264, width: 1920, height: 1080, framesPerSecond: 30)
        #expect(settings.effectiveMaxBitRate == 6000)
        settings.maxBitRate = 0
        #expect(settings.effectiveMaxBitRate == nil, "0: no cap")
        settings.maxBitRate = 2500
        #expect(settings.effectiveMaxBitRate == 2500)
        settings.bitRate = 4000
        #expect(settings.effectiveMaxBitRate == nil, "a bit rate given is its own limit")
    }

    /// Noise (what constant quality spends most on) for 4 s at 192x128: capped at 300 kbit/s, the encoder keeps to it
    /// once its buffer (a second of the cap, full at the start) is spent: over the last 2 s; with no cap it spends
    /// many times that.
    @Test(arguments: [VideoCodec.h264, .hevc]) func constantQualityKeepsUnderItsCap(_ codec: VideoCodec) throws {
        func kbps(cap: Int) throws -> Double {
            var settings = VideoEncoderSettings(codec: codec, width: 192, height: 128, framesPerSecond: 30)
            settings.maxBitRate = cap
            let implementation = try VideoEncoderImplementation.best(for: codec)
            let format = implementation.inputFormat(for: .nv12)
            let encoder = try Encoder.video(
                settings, pixelFormat: format, globalHeader: true, implementation: implementation)
            let frame = try MediaFrame.video(width: 192, height: 128, pixelFormat: format)
            var generator = SystemRandomNumberGenerator()
            var bytes = 0
            func count(_ packet: EncodedPacket) { if packet.pts >= 2 * 90000 { bytes += packet.data.count } }
            for index in 0..<120 {
                try check(av_frame_make_writable(frame.frame), "writable")
                for (number, plane) in frame.planes.enumerated() {
                    for i in 0..<plane.stride * (number == 0 ? 128 : 64) {
                        plane.data[i] = UInt8.random(in: 0...255, using: &generator)
                    }
                }
                frame.frame.pointee.pts = Int64(index * 3000)
                try encoder.encodeVideo(frame, count)
            }
            try encoder.encode(nil, count)
            return Double(bytes) * 8 / 2 / 1000
        }
        let capped = try kbps(cap: 300)
        let free = try kbps(cap: 0)
        #expect(capped < 300 * 1.15, "\(capped) kbit/s under a cap of 300")
        #expect(free > 4 * capped, "\(free) kbit/s with no cap, \(capped) with one")
    }
}
