/// Opus frames of digital silence, repeated instead of encoded. libopus codes a frame of zeros as one short packet,
/// and once its look-ahead and history hold nothing but zeros its state no longer changes: every further silent
/// frame gives the same bytes, and the sound after the silence the same packets whether 3 or 3,000 seconds of it
/// came before. An always-on broadcast is mostly silent (nothing playing, the microphone muted), and encoding its
/// silence was a quarter of a quiet replay handler's work; so once `settleFrames` silent frames in a row gave the
/// same bytes, the next silent frames repeat them, each at its own time, without waking the encoder. Only libopus,
/// whose every frame in gives one packet out (AAC's do not); only whole frames.
final class OpusSilence {
    private let enabled: Bool
    /// The packet of the last frame encoded, when that frame was silent.
    private var last: EncodedPacket?
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

    init(encoder: Encoder, enabled: Bool) {
        self.enabled = enabled && encoder.kind == "Opus"
    }

    /// Whether `samples` (one whole frame) is digital silence.
    static func isSilent(_ samples: UnsafeBufferPointer<Float>) -> Bool {
        samples.allSatisfy { $0 == 0 }
    }

    /// Hands the settled silence packet, stamped for its place, to `body` and returns true; false when the frame must
    /// be encoded (it is not silent, or the encoder has not settled).
    func repeatPacket(silent: Bool, _ body: (EncodedPacket) throws(MediaError) -> Void) throws(MediaError) -> Bool {
        guard enabled, silent, same >= Self.settleFrames, var packet = last else { return false }
        stamp(&packet)
        try body(packet)
        repeated += 1
        return true
    }

    /// Stamps a packet the encoder gave (for a frame, or when flushed at the end) for its place in the track.
    func stamp(_ packet: inout EncodedPacket) {
        guard enabled else { return }
        let pts = next ?? packet.pts
        packet.pts = pts
        packet.dts = pts
        next = pts + packet.duration
    }

    /// Notes the packet the encoder gave for a frame (`silent`: that frame was), stamped.
    func encoded(_ packet: EncodedPacket, silent: Bool) {
        guard enabled, silent, packet.skipSamples == (0, 0) else {
            last = nil
            same = 0
            return
        }
        same = last?.data == packet.data && last?.duration == packet.duration ? same + 1 : 0
        last = packet
    }
}
