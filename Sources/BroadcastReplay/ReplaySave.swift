import BroadcastCore
import BroadcastMedia
import BroadcastRecord
import CFFmpeg

/// Writes a part of the replay buffer into a file as it is, without re-encoding (libavformat): fragmented MP4 or
/// Matroska, starting at time 0 on a keyframe, audio on the same clock: each track starts with the packet its content
/// at the keyframe is in, and says to skip what of it comes before (as a whole stream says to skip Opus's priming),
/// so that its first sample plays with the first frame.
enum ReplaySave {
    struct Written {
        var duration: Double
        var bytes: Int64
        var videoFrames: Int
        var audioPackets: Int
    }

    static func write(_ snapshot: ReplayBuffer.Snapshot, frameDuration: Int64, to path: String,
                      container: Muxer.Container) throws(MediaError) -> Written {
        let muxer = try Muxer(url: path, container: container)
        let nanoseconds = AVRational(num: 1, den: 1_000_000_000)
        var indices: [Int] = []
        // What each stream's pts less: the keyframe's time for video; for audio its first packet's pts, whose samples
        // before the keyframe the decoder skips.
        var shifts: [Int64] = []
        for (index, stream) in snapshot.streams.enumerated() {
            let parameters = try CodecParameters(copying: stream.parameters)
            let origin = av_rescale_q(snapshot.origin, nanoseconds, stream.timeBase)
            var shift = origin
            if !stream.isVideo, let first = snapshot.packets.first(where: { $0.stream == index }) {
                shift = first.packet.pointee.pts
                parameters.setPriming(Int(max(0, origin + stream.parameters.priming - shift)))
            }
            shifts.append(shift)
            indices.append(try muxer.addStream(parameters: parameters, timeBase: stream.timeBase))
        }
        let video = snapshot.streams.firstIndex(where: \.isVideo) ?? 0
        muxer.setOrientation(stream: indices[video], degrees: Int(snapshot.orientation.degrees), mirrored: snapshot.orientation.mirrored)
        try muxer.addChapters(Chapters.spans(snapshot.marks, end: snapshot.end + frameDuration - snapshot.origin))
        try muxer.start()
        var written = Written(duration: Double(snapshot.end + frameDuration - snapshot.origin) / 1e9, bytes: 0, videoFrames: 0, audioPackets: 0)
        for buffered in snapshot.packets {
            let stream = snapshot.streams[buffered.stream]
            let shift = shifts[buffered.stream]
            let packet = buffered.packet
            packet.pointee.pts -= shift
            packet.pointee.dts -= shift
            if stream.isVideo {
                try muxer.writeHoldingBack(packet, stream: indices[buffered.stream], timeBase: stream.timeBase)
                written.videoFrames += 1
            } else {
                try muxer.write(packet, stream: indices[buffered.stream], timeBase: stream.timeBase)
                written.audioPackets += 1
            }
        }
        let end = av_rescale_q(snapshot.end + frameDuration - snapshot.origin, nanoseconds, snapshot.streams[video].timeBase)
        try muxer.endStream(indices[video], at: end)
        try muxer.finish()
        written.bytes = Int64(muxer.bytesWritten)
        return written
    }
}
