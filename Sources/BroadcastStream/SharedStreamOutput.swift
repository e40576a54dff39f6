import BroadcastCore
import BroadcastEncoding
import BroadcastMedia
import BroadcastProtocol

/// `encode=shared`: the packets of the encoding the stream shares with other handlers (or, where broadcastd runs
/// none for it, of the record handler's encoder, `RecordingEncoder`, run here) go to every destination. The senders
/// need the streams' parameters, which come with the encoding's first frame: `start` makes them then, given the video
/// and the stream's one audio track, which it mixes from the encoding's (`SharedAudioMix`). A destination that dropped
/// GOPs asks for a keyframe once (`askForKeyframe`), not again until one came.
final class SharedStreamOutput: EncodedOutput {
    /// The stream's audio: the capture streams it mixes, in its codec and bit rate (kbit/s).
    struct Audio {
        var wanted: [SampleType]
        var codec: String
        var bitRate: Int

        /// Whether the stream takes a stream of the encoding: its video, and the audio tracks it mixes (a track
        /// of sound it does not send is neither decoded nor counted in its result).
        func keeps(_ description: EncodedStreamDescription) -> Bool {
            description.kind != "audio" || SharedAudioMix.source(titled: description.title).map(wanted.contains) == true
        }
    }

    let wantsGlobalHeader: Bool
    private let audio: Audio
    private let start: ([StreamParameters]) throws(MediaError) -> SenderGroup
    private var streams: [StreamParameters] = []
    private var mix: SharedAudioMix?
    /// Where the video ended (file time, ns).
    private var end: UInt64?
    private(set) var group: SenderGroup?
    /// A keyframe was asked for, and none has come since.
    private var keyframeAsked = false

    init(
        globalHeader: Bool, audio: Audio, start: @escaping ([StreamParameters]) throws(MediaError) -> SenderGroup
    ) {
        wantsGlobalHeader = globalHeader
        self.audio = audio
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
        var sent = [streams[0]]
        mix = try SharedAudioMix(
            streams: streams, wanted: audio.wanted, codec: audio.codec, bitRate: audio.bitRate,
            globalHeader: wantsGlobalHeader
        ) { parameters throws(MediaError) in
            sent.append(parameters)
            return sent.count - 1
        }
        group = try start(sent)
    }

    func write(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
        if stream == 0 && packet.isKeyframe { keyframeAsked = false }
        guard let group else { return }
        guard stream == 0 else {
            try mix?.add(packet, stream: stream, sink: group)
            return
        }
        mix?.videoReached(UInt64(max(0, packet.timeBase.rescale(packet.pts, to: .nanoseconds))))
        try group.writeVideo(packet)
    }

    func writeHoldingBack(_ packet: EncodedPacket, stream: Int) throws(MediaError) { try write(packet, stream: stream) }
    func writeCopy(_ packet: EncodedPacket, stream: Int) throws(MediaError) { try write(packet, stream: stream) }
    /// The video ends at `end` (90 kHz); the mix ends there too (`finish`).
    func endStream(_ stream: Int, at end: Int64) throws(MediaError) {
        if stream == 0 { self.end = UInt64(max(0, TimeBase.video.rescale(end, to: .nanoseconds))) }
    }

    /// After the encoding finished (its last sound came after its video's end): the rest of the mix, to the video's
    /// end.
    func finish() throws(MediaError) {
        guard let group, let end else { return }
        try mix?.finish(at: end, sink: group)
        mix = nil
    }

    func pictureUnchanged(through time: Int64) throws(MediaError) { mix?.videoReached(UInt64(max(0, time))) }

    /// Whether to ask the encoder for a keyframe now: a destination `wants` one (it dropped GOPs, connected again, or
    /// its receiver asked: `SenderGroup.takeKeyframeRequest`), and none is on its way.
    func askForKeyframe(_ wants: Bool) -> Bool {
        guard wants, !keyframeAsked else { return false }
        keyframeAsked = true
        return true
    }
}
