import BroadcastCore
import BroadcastProtocol

/// What an encoder shared by several handlers tells each of them: its streams, once the first frame is coming; its
/// packets, whose bytes are in its packet ring; and the times through which its picture stood still. Times are the
/// encoder's own, from 0 at its first frame, continuous: the encoder never pauses (each handler does, on its own).
package enum SharedEncoderEvent: Equatable {
    case streams([EncodedStreamDescription])
    case packet(EncodedPacketHeader)
    /// The picture has not changed through this time (ns).
    case pictureUnchanged(through: Int64)
    /// How an audio stream fared through its last packet told (revision 2.10).
    case audioFigures(AudioFigures)
}

/// The output of an encoder shared by several handlers (`RecordingEncoder` with this as its output): packets go into
/// the packet ring, and what is to be told about them to `tell`. Parameter sets go in the streams' global headers,
/// which every container the handlers write takes (MPEG-TS gets them from there before each keyframe).
package final class SharedEncoderOutput: EncodedOutput {
    let ring: PacketRingWriter
    let ringID: UInt32
    let tell: (SharedEncoderEvent) throws(MediaError) -> Void
    private var streams: [StreamParameters] = []
    private(set) var begun = false
    /// Packets written, and bytes.
    package private(set) var packets = 0
    package private(set) var bytes = 0
    /// Per audio stream: the figures last told and when (capture time, ns), and the largest clock offset since.
    private var audioTold: [Int: (figures: AudioFigures, at: UInt64)] = [:]
    private var largestOffset: [Int: Double] = [:]

    package init(ring: PacketRingWriter, id: UInt32, tell: @escaping (SharedEncoderEvent) throws(MediaError) -> Void) {
        self.ring = ring
        ringID = id
        self.tell = tell
    }

    package var wantsGlobalHeader: Bool { true }

    package func addStream(_ parameters: StreamParameters) throws(MediaError) -> Int {
        streams.append(parameters)
        return streams.count - 1
    }

    package func begin(videoStream: Int, orientation: Orientation) throws(MediaError) {
        guard !begun else { return }
        begun = true
        try tell(
            .streams(
                streams.enumerated().map { index, stream in
                    stream.description(stream: index, orientation: index == videoStream ? orientation : nil)
                }))
    }

    package func write(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
        try share(packet, stream: stream, flags: [])
    }

    package func writeHoldingBack(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
        try share(packet, stream: stream, flags: .lastsUntilNext)
    }

    package func writeCopy(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
        try share(packet, stream: stream, flags: [.lastsUntilNext, .copy])
    }

    /// Each handler ends its own streams when it finishes.
    package func endStream(_ stream: Int, at end: Int64) throws(MediaError) {}

    package func pictureUnchanged(through time: Int64) throws(MediaError) {
        try tell(.pictureUnchanged(through: time))
    }

    /// Revision 2.10: tells how each of `tracks` fared (`AudioFigures`) once its streams were told: when sound went
    /// missing or was dropped since its figures were last told, else a second of capture time (`time`, ns) after them,
    /// with the largest clock offset in between. Called after each piece of sound, so that the figures go with the
    /// packets they hold through.
    package func tellAudioFigures(of tracks: [AudioTrack], at time: UInt64) throws(MediaError) {
        guard begun else { return }
        for track in tracks {
            let stream = track.outputStream
            let offset = max(largestOffset[stream] ?? 0, track.clockOffsetMs)
            largestOffset[stream] = offset
            let (missing, dropped) = track.lostMs
            if let told = audioTold[stream], told.figures.missingMs == missing, told.figures.droppedMs == dropped,
                time < told.at + 1_000_000_000
            {
                continue
            }
            let figures = AudioFigures(
                ring: ringID, stream: UInt32(stream), missingMs: missing, droppedMs: dropped, maxClockOffsetMs: offset)
            try tell(.audioFigures(figures))
            audioTold[stream] = (figures, time)
            largestOffset[stream] = 0
        }
    }

    private func share(_ packet: EncodedPacket, stream: Int, flags: EncodedPacketHeader.Flags) throws(MediaError) {
        guard let (sequence, offset) = packet.data.withUnsafeBytes({ ring.write($0) }) else {
            throw MediaError(
                "share a packet",
                "a packet of \(packet.data.count) bytes is larger than \(ring.largestPacket), half the ring")
        }
        var flags = flags
        if packet.isKeyframe { flags.insert(.keyframe) }
        if packet.isDisposable { flags.insert(.disposable) }
        var header = EncodedPacketHeader(
            ring: ringID, stream: UInt32(stream), sequence: sequence, offset: UInt64(offset),
            length: UInt32(packet.data.count), flags: flags, pts: packet.pts, dts: packet.dts, duration: packet.duration
        )
        (header.skipStart, header.skipEnd) = packet.skipSamples
        packets += 1
        bytes += packet.data.count
        try tell(.packet(header))
    }
}
