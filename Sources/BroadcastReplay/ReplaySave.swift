import BroadcastCore
import BroadcastEncoding
import BroadcastMedia

/// A part of the replay buffer written into a file as it is, without re-encoding (libavformat): fragmented MP4 or
/// Matroska, starting at time 0 on a keyframe, audio on the same clock: each track starts with the packet its content
/// at the keyframe is in, and says to skip what of it comes before (as a whole stream says to skip Opus's priming),
/// so that its first sample plays with the first frame. A save writes the snapshot and finishes; `save --and-record`
/// goes on with every packet encoded after it (`append`), until the broadcast finishes.
final class ReplayFile {
    let path: String
    private let muxer: Muxer
    private let streams: [StreamParameters]
    private var indices: [Int] = []
    /// What each stream's pts less: the keyframe's time for video; for audio its first packet's pts, whose samples
    /// before the keyframe the decoder skips.
    private var shifts: [Int64] = []
    private let video: Int
    let origin: Int64
    private(set) var videoFrames = 0
    private(set) var audioPackets = 0

    /// Opens `path` and writes `snapshot` into it, without the packets that start at `until` (file time, ns) or later;
    /// `chapters`: those of the snapshot, in the header (Matroska; an MP4 save has none, see below).
    init(
        _ snapshot: ReplayBuffer.Snapshot, to path: String, container: Muxer.Container, until: Int64 = .max,
        chapters: [(start: Int64, end: Int64, title: String)]
    ) throws(MediaError) {
        self.path = path
        muxer = try Muxer(url: path, container: container)
        streams = snapshot.streams
        origin = snapshot.origin
        video = snapshot.streams.firstIndex(where: \.isVideo) ?? 0
        let packets = SnapshotPackets(snapshot, until: until)
        // Each audio stream's first packet says how much of it to skip (in the header): read ahead until each has
        // one, or 5 s of video have come without (a stream that sent nothing).
        var ahead: [BufferedPacket] = []
        var firstAudio: [Int: Int64] = [:]
        let audioStreams = snapshot.streams.indices.filter { !snapshot.streams[$0].isVideo }
        while firstAudio.count < audioStreams.count, let packet = try packets.next() {
            ahead.append(packet)
            if !snapshot.streams[packet.stream].isVideo, firstAudio[packet.stream] == nil {
                firstAudio[packet.stream] = packet.packet.pts
            }
            if snapshot.streams[packet.stream].isVideo, packet.time > snapshot.origin + 5_000_000_000 { break }
        }
        for (index, stream) in snapshot.streams.enumerated() {
            var parameters = stream
            let origin = TimeBase.nanoseconds.rescale(snapshot.origin, to: stream.timeBase)
            var shift = origin
            if !stream.isVideo, let first = firstAudio[index] {
                shift = first
                parameters.setPriming(Int(max(0, origin + stream.priming - shift)))
            }
            shifts.append(shift)
            indices.append(try muxer.addStream(parameters))
        }
        muxer.setOrientation(
            stream: indices[video], degrees: Int(snapshot.orientation.degrees), mirrored: snapshot.orientation.mirrored)
        // libavformat writes MP4 chapters as a QuickTime text track, a stray data stream (bin_data) beside the picture
        // and sound that stops `ffmpeg -map 0` copying the file: an MP4 save lists them in its answer only.
        if container != .fragmentedMP4 { try muxer.addChapters(chapters) }
        try muxer.start()
        for packet in ahead { try append(packet) }
        while let packet = try packets.next() { try append(packet) }
    }

    /// Writes one packet of the buffer (whose data it may take).
    func append(_ buffered: BufferedPacket) throws(MediaError) {
        var packet = buffered.packet
        packet.shift(by: shifts[buffered.stream])
        if streams[buffered.stream].isVideo {
            try muxer.writeHoldingBack(packet, stream: indices[buffered.stream])
            videoFrames += 1
        } else {
            try muxer.write(packet, stream: indices[buffered.stream])
            audioPackets += 1
        }
    }

    /// The last frame ends at file time `end` (ns, the broadcast's); chapters added now go into the trailer (Matroska).
    func finish(end: Int64, chapters: [(start: Int64, end: Int64, title: String)] = []) throws(MediaError) {
        try muxer.endStream(indices[video], at: TimeBase.nanoseconds.rescale(end - origin, to: streams[video].timeBase))
        try muxer.addChapters(chapters)
        try muxer.finish()
    }

    /// A save: the snapshot, finished where both its video and its audio reach (the audio encoder is a packet or so
    /// behind: the frames after where its audio ends would play without sound).
    static func save(
        _ snapshot: ReplayBuffer.Snapshot, frameDuration: Int64, to path: String,
        container: Muxer.Container
    ) throws(MediaError) -> (duration: Double, videoFrames: Int) {
        let end = max(snapshot.origin + frameDuration, min(snapshot.end + frameDuration, snapshot.audioEnd ?? .max))
        let file = try ReplayFile(
            snapshot, to: path, container: container, until: end,
            chapters: Chapters.spans(snapshot.marks, end: end - snapshot.origin))
        try file.finish(end: end)
        return (Double(end - snapshot.origin) / 1e9, file.videoFrames)
    }
}
