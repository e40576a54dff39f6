import CFFmpeg

/// Opus frames of digital silence, repeated instead of encoded. libopus codes a frame of zeros as one short packet,
/// and once its look-ahead and history hold nothing but zeros its state no longer changes: every further silent
/// frame gives the same bytes, and the sound after the silence the same packets whether 3 or 3,000 seconds of it
/// came before. An always-on broadcast is mostly silent (nothing playing, the microphone muted), and encoding its
/// silence was a quarter of a quiet replay handler's work; so once `settleFrames` silent frames in a row gave the
/// same bytes, the next silent frames repeat them, each at its own time, without waking the encoder. Only libopus,
/// whose every frame in gives one packet out (AAC's do not); only whole frames.
final class OpusSilence {
    private struct Coded {
        var bytes: [UInt8]
        var duration: Int64
        var flags: Int32
    }

    private let enabled: Bool
    private let packet: UnsafeMutablePointer<AVPacket>
    /// The packet of the last frame encoded, when that frame was silent.
    private var last: Coded?
    /// Silent frames in a row that gave `last`'s bytes.
    private var same = 0
    /// Identical silent packets in a row before they are repeated: the packets settle first (~0.6 s after sound),
    /// the encoder's analysis of what came before them later; from 20 on the track was the same byte for byte in
    /// OpusSilenceTests, and 2 s (100) leaves a margin.
    static let settleFrames = 100
    /// Silent frames repeated rather than encoded.
    private(set) var repeated = 0
    /// The pts the next packet has: a track's packets follow each other without gaps, and libavcodec stamps an
    /// encoder's packets from the frames it queued, which would put the first after a repeated stretch back in time.
    private var next: Int64?

    init(encoder: Encoder, enabled: Bool) throws(MediaError) {
        self.enabled = enabled && encoder.kind == "Opus"
        guard let packet = av_packet_alloc() else { throw MediaError("prepare the Opus encoder", "out of memory") }
        self.packet = packet
    }

    deinit {
        var packet: UnsafeMutablePointer<AVPacket>? = self.packet
        av_packet_free(&packet)
    }

    /// Whether `samples` (one whole frame) is digital silence.
    static func isSilent(_ samples: UnsafeBufferPointer<Float>) -> Bool {
        samples.allSatisfy { $0 == 0 }
    }

    /// Hands the settled silence packet, stamped for its place, to `body` and returns true; false when the frame must
    /// be encoded (it is not silent, or the encoder has not settled).
    func repeatPacket(
        silent: Bool, _ body: (UnsafeMutablePointer<AVPacket>) throws(MediaError) -> Void
    ) throws(MediaError) -> Bool {
        guard enabled, silent, same >= Self.settleFrames, let last else { return false }
        guard av_new_packet(packet, Int32(last.bytes.count)) == 0 else {
            throw MediaError("repeat a packet of silence", "out of memory")
        }
        defer { av_packet_unref(packet) }
        packet.pointee.data.update(from: last.bytes, count: last.bytes.count)
        packet.pointee.duration = last.duration
        packet.pointee.flags = last.flags
        stamp(packet)
        try body(packet)
        repeated += 1
        return true
    }

    /// Stamps a packet the encoder gave (for a frame, or when flushed at the end) for its place in the track.
    func stamp(_ packet: UnsafeMutablePointer<AVPacket>) {
        guard enabled else { return }
        let pts = next ?? packet.pointee.pts
        packet.pointee.pts = pts
        packet.pointee.dts = pts
        next = pts + packet.pointee.duration
    }

    /// Notes the packet the encoder gave for a frame (`silent`: that frame was), stamped.
    func encoded(_ packet: UnsafeMutablePointer<AVPacket>, silent: Bool) {
        guard enabled, silent, packet.pointee.side_data_elems == 0 else {
            last = nil
            same = 0
            return
        }
        let bytes = Array(UnsafeBufferPointer(start: packet.pointee.data, count: Int(packet.pointee.size)))
        same = last?.bytes == bytes && last?.duration == packet.pointee.duration ? same + 1 : 0
        last = Coded(bytes: bytes, duration: packet.pointee.duration, flags: packet.pointee.flags)
    }
}
