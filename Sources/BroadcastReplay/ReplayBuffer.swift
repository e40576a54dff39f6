import BroadcastCore
import BroadcastMedia
import BroadcastRecord
import CFFmpeg

/// One encoded packet kept in the buffer (owned: freed with it).
final class BufferedPacket: @unchecked Sendable {
    let packet: UnsafeMutablePointer<AVPacket>
    let stream: Int
    /// Where its content starts in file time, ns (its pts less its stream's priming).
    let time: Int64
    /// What it costs: its bytes and libavcodec's packet and buffer structures.
    var cost: Int { Int(packet.pointee.size) + Self.overhead }
    static let overhead = 256

    init(taking packet: UnsafeMutablePointer<AVPacket>, stream: Int, time: Int64) throws(MediaError) {
        guard let owned = av_packet_alloc() else { throw MediaError("buffer a packet", "out of memory") }
        av_packet_move_ref(owned, packet)
        self.packet = owned
        self.stream = stream
        self.time = time
    }

    /// A reference to `packet`'s data (no copy), which keeps it as it is.
    init(referencing packet: UnsafeMutablePointer<AVPacket>, stream: Int, time: Int64) throws(MediaError) {
        guard let clone = av_packet_clone(packet) else { throw MediaError("record the buffer", "out of memory") }
        self.packet = clone
        self.stream = stream
        self.time = time
    }

    /// Another reference to the same data (no copy), for a save.
    init(sharing other: BufferedPacket) throws(MediaError) {
        guard let clone = av_packet_clone(other.packet) else { throw MediaError("save the buffer", "out of memory") }
        packet = clone
        stream = other.stream
        time = other.time
    }

    deinit {
        var owned: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&owned)
    }
}

/// The `replay` handler's buffer: the encoded streams, whole GOPs (a keyframe and what follows it, audio included),
/// the oldest dropped first so that it holds the last `length` of file time (rounded up to a GOP) and no more than
/// `maxBytes`. Packets keep the encoders' own timestamps; a save takes references to them, not copies.
final class ReplayBuffer: EncodedOutput {
    struct Stream {
        let parameters: CodecParameters
        let timeBase: AVRational
        let isVideo: Bool
    }

    final class GOP {
        /// File time of its keyframe, ns.
        let start: Int64
        var packets: [BufferedPacket] = []
        var bytes = 0
        init(start: Int64) { self.start = start }
    }

    let length: UInt64
    let maxBytes: Int
    private(set) var streams: [Stream] = []
    private(set) var gops: [GOP] = []
    private(set) var bytes = 0
    /// Every GOP dropped so far for either bound.
    private(set) var droppedForLength = 0
    private(set) var droppedForMemory = 0
    /// The picture's orientation, as the first frame said.
    private(set) var orientation = Orientation.up
    /// Chapters asked for with `mark` (file time, ns), those still in the buffer.
    private(set) var marks: [(time: Int64, title: String)] = []
    /// `save --and-record`: the file every packet goes to as well from the save on.
    var recording: ReplayFile?
    /// Start of the newest video frame, file time ns.
    private(set) var newest: Int64 = 0

    init(length: UInt64, maxBytes: Int) {
        self.length = length
        self.maxBytes = maxBytes
    }

    var wantsGlobalHeader: Bool { true }

    func addStream(for encoder: Encoder) throws(MediaError) -> Int {
        streams.append(Stream(parameters: try CodecParameters(copying: encoder), timeBase: encoder.timeBase,
                              isVideo: encoder.context.pointee.codec_type == AVMEDIA_TYPE_VIDEO))
        return streams.count - 1
    }

    func begin(videoStream: Int, orientation: Orientation) throws(MediaError) {
        if gops.isEmpty { self.orientation = orientation }
    }

    /// File time (ns) of `pts` in `timeBase`, less the stream's priming.
    private func time(_ pts: Int64, stream: Int, timeBase: AVRational) -> Int64 {
        av_rescale_q(pts - streams[stream].parameters.priming, timeBase, AVRational(num: 1, den: 1_000_000_000))
    }

    func write(_ packet: UnsafeMutablePointer<AVPacket>, stream: Int, timeBase: AVRational) throws(MediaError) {
        let isKey = (packet.pointee.flags & AV_PKT_FLAG_KEY) != 0
        let time = time(packet.pointee.pts, stream: stream, timeBase: timeBase)
        if let recording { try recording.append(try BufferedPacket(referencing: packet, stream: stream, time: time)) }
        if streams[stream].isVideo {
            if isKey { gops.append(GOP(start: time)) }
            // After the memory bound took every GOP, the next keyframe starts the buffer anew.
            if gops.isEmpty { return }
            newest = max(newest, time)
            trimForLength()
        } else if gops.isEmpty {
            return // audio before the first keyframe: nothing to play it with
        }
        let kept = try BufferedPacket(taking: packet, stream: stream, time: time)
        gops[gops.count - 1].packets.append(kept)
        gops[gops.count - 1].bytes += kept.cost
        bytes += kept.cost
        trimForMemory()
    }

    /// Video frames are kept as they come: a save gives each its duration (`Muxer.writeHoldingBack`).
    func writeHoldingBack(_ packet: UnsafeMutablePointer<AVPacket>, stream: Int, timeBase: AVRational) throws(MediaError) {
        try write(packet, stream: stream, timeBase: timeBase)
    }

    func endStream(_ stream: Int, at end: Int64) throws(MediaError) {}

    /// The oldest GOP goes once the rest still hold `length`: the buffer holds `length` to `length` + a GOP.
    private func trimForLength() {
        while gops.count > 1, newest - gops[1].start >= Int64(length) {
            drop()
            droppedForLength += 1
        }
    }

    /// Never more than `maxBytes`: a GOP larger than that by itself goes too, and what follows it until the next keyframe.
    private func trimForMemory() {
        while bytes > maxBytes, !gops.isEmpty {
            drop()
            droppedForMemory += 1
        }
    }

    private func drop() {
        bytes -= gops.removeFirst().bytes
        let oldest = gops.first?.start ?? Int64.max
        marks.removeAll { $0.time < oldest }
    }

    func mark(_ mark: (time: Int64, title: String)) {
        marks.append(mark)
    }

    /// File time the buffer covers, ns: from its oldest keyframe to its newest frame.
    var duration: Int64 { gops.first.map { newest - $0.start } ?? 0 }

    /// What a save of the last `seconds` (nil: all) writes: from the newest keyframe at least that far back (the oldest
    /// one when the buffer is shorter), video from it on, audio whose content starts at or after it. References, no copies.
    func snapshot(last seconds: Double?) throws(MediaError) -> Snapshot? {
        guard !gops.isEmpty else { return nil }
        var first = 0
        if let seconds {
            let wanted = newest - Int64(seconds * 1e9)
            first = gops.lastIndex { $0.start <= wanted } ?? 0
        }
        let origin = gops[first].start
        var packets: [BufferedPacket] = []
        // Audio from the packet its content at the keyframe is in (the save says how much of it to skip).
        var openingAudio: [Int: BufferedPacket] = [:]
        for (index, gop) in gops.enumerated().dropFirst(max(0, first - 1)) {
            for packet in gop.packets {
                if streams[packet.stream].isVideo {
                    if index >= first { packets.append(try BufferedPacket(sharing: packet)) }
                } else if packet.time <= origin {
                    openingAudio[packet.stream] = packet
                } else {
                    if let opening = openingAudio.removeValue(forKey: packet.stream) { packets.append(try BufferedPacket(sharing: opening)) }
                    packets.append(try BufferedPacket(sharing: packet))
                }
            }
        }
        let chapters = marks.filter { $0.time >= origin }.map { (time: $0.time - origin, title: $0.title) }
        return Snapshot(streams: streams, orientation: orientation, origin: origin, end: newest, packets: packets, marks: chapters)
    }

    /// A save's part of the buffer.
    struct Snapshot: @unchecked Sendable {
        let streams: [Stream]
        let orientation: Orientation
        /// File time of its first keyframe, ns: time 0 of the saved file.
        let origin: Int64
        let end: Int64
        let packets: [BufferedPacket]
        /// Chapters, their times from the file's start.
        let marks: [(time: Int64, title: String)]
    }
}
