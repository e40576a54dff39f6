import BroadcastCore
import BroadcastEncoding

/// `encode=shared`: the stream's one audio track, made from the tracks of the encoding it shares. That encoding's
/// audio is record's (app and mic, each a track of its own), so that record, replay and the stream ask for the same
/// encoding; the stream decodes the tracks it sends (`audio`), mixes them and encodes the mix in its own codec (Opus
/// or, for RTMP and HLS, AAC) and bit rate: a few per cent of a core, where a second video encode is most of one.
final class SharedAudioMix {
    private let decoders: [Int: (decoder: AudioDecoder, type: SampleType)]
    private let track: AudioTrack
    /// Where the video has got to (file time, ns): the mix is encoded up to it, as the stream's own encoding does.
    private var videoEnd: UInt64 = 0

    /// nil when `streams` (the encoding's, video first) have none of the `wanted` audio. `addStream` makes the
    /// stream the mix goes to and returns its index.
    init?(
        streams: [StreamParameters], wanted: [SampleType], codec: String, bitRate: Int, globalHeader: Bool,
        addStream: (StreamParameters) throws(MediaError) -> Int
    ) throws(MediaError) {
        var decoders: [Int: (decoder: AudioDecoder, type: SampleType)] = [:]
        for (index, stream) in streams.enumerated() where stream.kind == .audio {
            guard let type = Self.source(titled: stream.title), wanted.contains(type) else { continue }
            decoders[index] = (try AudioDecoder(stream), type)
        }
        guard let sampleRate = decoders.values.first?.decoder.format.sampleRate else { return nil }
        let types = wanted.filter { type in decoders.values.contains { $0.type == type } }
        track = try AudioTrack(
            name: types.map(\.description).joined(separator: "+"), streams: types, gains: [:],
            settings: AudioEncoderSettings(codec: codec, sampleRate: sampleRate, channels: 2, bitRate: bitRate),
            globalHeader: globalHeader, addStream: addStream)
        self.decoders = decoders
    }

    /// The capture stream a track of a shared encoding carries, by its title (`AudioTrack.title`); nil: both mixed,
    /// or a track no handler of ours makes.
    static func source(titled title: String?) -> SampleType? {
        [SampleType.audioApp, .audioMic].first { AudioTrack.title(of: [$0]) == title }
    }

    /// The video got to file time `time` (ns): a packet's start, or the end of a still stretch.
    func videoReached(_ time: UInt64) { videoEnd = max(videoEnd, time) }

    /// A packet of one of the encoding's tracks: its sound goes into the mix, and what of the mix is ready to `sink`.
    func add(_ packet: EncodedPacket, stream: Int, sink: PacketSink) throws(MediaError) {
        guard let (decoder, type) = decoders[stream] else { return }
        try decoder.decode(packet) { samples, frames, time throws(MediaError) in
            try track.add(
                samples, format: decoder.format, frames: frames, from: type, at: time, videoEnd: videoEnd, sink: sink)
        }
    }

    /// The stream ends at file time `end` (ns): the rest of the mix to `sink`.
    func finish(at end: UInt64, sink: PacketSink) throws(MediaError) {
        try track.finish(at: end, sink: sink)
    }
}
