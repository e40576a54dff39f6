import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

// Revision 2.9 (encoded samples): what a handler sends to share an encoder, and what broadcastd's encoder sends.
extension BroadcastSampleHandler {
    /// Asks to share an encoder of these settings (ENCODE) instead of taking samples; `encodingAnswered` follows.
    /// Called from `broadcastStarted`, ENCODE goes out right after READY (docs/protocol.md 10.7: after READY).
    public final func requestEncoding(_ settings: [String: String]) {
        let message = Message.json(.encode, EncodeRequest(settings: settings))
        awaitingEncoding = true
        if readySent { try? connection?.send(message) } else { pendingEncode = message }
    }

    /// Asks the shared encoder for a keyframe (REQUEST_KEYFRAME): the handler joined, resumed or lost packets.
    public final func requestKeyframe() {
        try? connection?.send(.json(.requestKeyframe, Empty()))
    }

    /// broadcastd's encoder: its packet ring (SHARE_RING), `descriptor` read-only.
    public final func shareRing(size: Int, descriptor: Descriptor) throws(ProtocolError) {
        try send(.json(.shareRing, PacketRingAnnouncement(ring: 0, size: size), descriptors: [descriptor]))
    }

    /// broadcastd's encoder: its streams (SHARE_STREAMS).
    public final func shareStreams(_ streams: [EncodedStreamDescription]) throws(ProtocolError) {
        try send(.json(.shareStreams, EncodedStreams(ring: 0, streams: streams)))
    }

    /// broadcastd's encoder: a packet written into its ring (SHARE_PACKET).
    public final func sharePacket(_ header: EncodedPacketHeader) throws(ProtocolError) {
        try send(header.message(.sharePacket))
    }

    /// broadcastd's encoder: its picture stood still through `time` (SHARE_PICTURE_UNCHANGED).
    public final func sharePictureUnchanged(through time: Int64) throws(ProtocolError) {
        try send(PictureUnchanged(through: time).message(.sharePictureUnchanged))
    }

    /// broadcastd's encoder: how one of its audio streams fared (SHARE_AUDIO_FIGURES, revision 2.10).
    public final func shareAudioFigures(_ figures: AudioFigures) throws(ProtocolError) {
        try send(.json(.shareAudioFigures, figures))
    }

    private func send(_ message: Message) throws(ProtocolError) {
        guard let connection else { throw .closed }
        try connection.send(message)
    }
}
