import BroadcastCore
import BroadcastEncoding
import BroadcastMedia

/// `encode=shared`: the packets of the encoding the stream shares with other handlers (or, where broadcastd runs
/// none for it, of the record handler's encoder, `RecordingEncoder`, run here) go to every destination. The senders
/// need the streams' parameters, which come with the encoding's first frame: `start` makes them then. A destination
/// that dropped GOPs asks for a keyframe once (`askForKeyframe`), not again until one came.
final class SharedStreamOutput: EncodedOutput {
    let wantsGlobalHeader: Bool
    private let start: ([StreamParameters]) throws(MediaError) -> SenderGroup
    private var streams: [StreamParameters] = []
    private(set) var group: SenderGroup?
    /// A keyframe was asked for, and none has come since.
    private var keyframeAsked = false

    init(globalHeader: Bool, start: @escaping ([StreamParameters]) throws(MediaError) -> SenderGroup) {
        wantsGlobalHeader = globalHeader
        self.start = start
    }

    func addStream(_ parameters: StreamParameters) throws(MediaError) -> Int {
        streams.append(parameters)
        return streams.count - 1
    }

    func begin(videoStream: Int, orientation: Orientation) throws(MediaError) {
        guard group == nil else { return }
        // The senders take the video as their first stream.
        guard videoStream == 0, streams.first?.isVideo == true else {
            throw MediaError("stream", "the encoding's first stream is not its video")
        }
        group = try start(streams)
    }

    func write(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
        if stream == 0 && packet.isKeyframe { keyframeAsked = false }
        guard let group else { return }
        guard stream == 0 else { return try group.write(packet, stream: stream) }
        try group.writeVideo(packet)
    }

    func writeHoldingBack(_ packet: EncodedPacket, stream: Int) throws(MediaError) { try write(packet, stream: stream) }
    func writeCopy(_ packet: EncodedPacket, stream: Int) throws(MediaError) { try write(packet, stream: stream) }
    func endStream(_ stream: Int, at end: Int64) throws(MediaError) {}
    func pictureUnchanged(through time: Int64) throws(MediaError) {}

    /// Whether to ask the encoder for a keyframe now: a destination `wants` one (it dropped GOPs, connected again, or
    /// its receiver asked: `SenderGroup.takeKeyframeRequest`), and none is on its way.
    func askForKeyframe(_ wants: Bool) -> Bool {
        guard wants, !keyframeAsked else { return false }
        keyframeAsked = true
        return true
    }
}
