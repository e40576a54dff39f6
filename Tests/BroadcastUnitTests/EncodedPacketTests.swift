import BroadcastCore
import BroadcastMedia
import CFFmpeg
import Foundation
import Testing

@testable import BroadcastEncoding

/// Encoded packets and stream descriptions as values (`EncodedPacket`, `StreamParameters`): what a muxer is fed
/// with, so that it can later be fed from bytes that came through shared memory.
@Suite struct EncodedPacketTests {
    /// Ten frames at 30 fps with a keyframe interval of 0.1 s: a packet per frame, in order, owning its bytes, its pts
    /// in 90 kHz, a keyframe at 0 and on the first frame at or after each 0.1 s mark (every third frame).
    @Test func tenFramesComeOutAsPacketsWithTheirTimesAndKeyframes() throws {
        var settings = VideoEncoderSettings(codec: .h264, width: 64, height: 48, framesPerSecond: 30)
        settings.keyframeInterval = 0.1
        let encoder = try Encoder.video(settings, pixelFormat: .nv12, globalHeader: true, implementation: .libx264)
        let frame = try MediaFrame.video(width: 64, height: 48, pixelFormat: .nv12)
        var packets: [EncodedPacket] = []
        for index in 0..<10 {
            try check(av_frame_make_writable(frame.frame), "writable")
            for (plane, (data, stride)) in frame.planes.enumerated() {
                for offset in 0..<(stride * (plane == 0 ? 48 : 24)) {
                    data[offset] = UInt8(truncatingIfNeeded: offset + index)
                }
            }
            frame.frame.pointee.pts = Int64(index * 3000)
            try encoder.encodeVideo(frame) { packets.append($0) }
        }
        try encoder.encode(nil) { packets.append($0) }
        #expect(packets.map(\.pts) == (0..<10).map { Int64($0 * 3000) })
        #expect(packets.allSatisfy { $0.kind == .video && $0.timeBase == .video && !$0.data.isEmpty })
        #expect(packets.map(\.isKeyframe) == (0..<10).map { $0 % 3 == 0 }, "\(packets.map(\.isKeyframe))")
        #expect(packets[3].time == 100_000_000)
        let parameters = try encoder.parameters
        #expect(
            parameters.isVideo && parameters.width == 64 && parameters.height == 48 && parameters.timeBase == .video)
        #expect(parameters.extradata.count > 8, "the parameter sets, for a container's header")
        #expect(parameters.frameRate == TimeBase(30, 1))
    }

    /// Two frames an encoder stamped alike (SVT-AV1 did, at a variable frame rate) no longer end an MP4 recording
    /// with "non monotonically increasing dts": the second is taken a tick later, and every frame is in the file.
    @Test func framesStampedAlikeAreAllWrittenATickApart() throws {
        let settings = VideoEncoderSettings(codec: .h264, width: 64, height: 48, framesPerSecond: 30)
        let encoder = try Encoder.video(settings, pixelFormat: .nv12, globalHeader: true, implementation: .libx264)
        let frame = try MediaFrame.video(width: 64, height: 48, pixelFormat: .nv12)
        var packets: [EncodedPacket] = []
        for index in 0..<4 {
            try check(av_frame_make_writable(frame.frame), "writable")
            frame.frame.pointee.pts = Int64(index * 3000)
            try encoder.encodeVideo(frame) { packets.append($0) }
        }
        try encoder.encode(nil) { packets.append($0) }
        packets[2].pts = packets[1].pts
        packets[2].dts = packets[1].dts
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("alike-\(getpid())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let muxer = try Muxer(url: folder + "/alike.mp4", container: .fragmentedMP4)
        let stream = try muxer.addStream(try encoder.parameters)
        try muxer.start()
        for packet in packets { try muxer.writeHoldingBack(packet, stream: stream) }
        try muxer.endStream(stream, at: 12000)
        try muxer.finish()
        #expect(muxer.retimedFrames == 1)
        let reader = try PacketReader(path: folder + "/alike.mp4")
        var times: [Int64] = []
        while let (packet, _) = try reader.next() { times.append(packet.dts) }
        #expect(times.count == 4 && zip(times, times.dropFirst()).allSatisfy { $0 < $1 }, "\(times)")
    }

    /// A packet through libavcodec's AVPacket and back (a muxer's way in, a reader's way out) is the same packet:
    /// bytes, times, flags, and the samples an Opus packet says to skip.
    @Test func aPacketSurvivesTheWayThroughAnAVPacket() throws {
        var packet = EncodedPacket(
            kind: .audio, data: [1, 2, 3, 250], pts: 960, dts: 940, duration: 960, timeBase: TimeBase(1, 48000),
            isKeyframe: true)
        packet.isDisposable = true
        packet.skipSamples = (0, 123)
        let back = try packet.withAVPacket { avPacket throws(MediaError) in
            try EncodedPacket(avPacket, kind: .audio, timeBase: TimeBase(1, 48000))
        }
        #expect(back.data == packet.data && back.pts == 960 && back.dts == 940 && back.duration == 960)
        #expect(back.isKeyframe && back.isDisposable && back.skipSamples == (0, 123))
        let rescaled = packet.rescaled(to: .video)
        #expect(
            rescaled.pts == 1800 && rescaled.dts == 1763 && rescaled.duration == 1800 && rescaled.timeBase == .video)
    }

    /// A stream's description through AVCodecParameters and back is the same description: an Opus encoder's, whose
    /// pre-skip a save changes in OpusHead as well.
    @Test func streamParametersSurviveTheWayThroughAVCodecParameters() throws {
        let encoder = try Encoder.audio(AudioEncoderSettings(channels: 2, bitRate: 96), globalHeader: true)
        encoder.title = "App audio"
        var parameters = try encoder.parameters
        #expect(parameters.kind == .audio && parameters.channels == 2 && parameters.sampleRate == 48000)
        #expect(
            parameters.priming == 312 && parameters.timeBase == TimeBase(1, 48000) && parameters.title == "App audio")
        var codecpar = avcodec_parameters_alloc()
        defer { avcodec_parameters_free(&codecpar) }
        try parameters.fill(try #require(codecpar))
        var back = StreamParameters(try #require(codecpar), timeBase: parameters.timeBase)
        (back.title, back.frameRate) = (parameters.title, parameters.frameRate)
        #expect(back == parameters)
        parameters.setPriming(100)
        #expect(parameters.priming == 100 && parameters.extradata[10] == 100 && parameters.extradata[11] == 0)
    }
}
