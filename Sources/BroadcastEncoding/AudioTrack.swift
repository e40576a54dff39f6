import BroadcastCore
import BroadcastTimeline

/// One audio track of a recording or a stream: its timeline (placement, drift, joins), its encoder,
/// and the stream its packets go to.
public final class AudioTrack {
    public let name: String
    /// Which capture stream feeds which timeline input.
    public let inputs: [SampleType: Int]
    private(set) var timeline: AudioTimeline
    public let encoder: Encoder
    private let frame: MediaFrame
    private var stream = 0
    private var pending: [Float] = []
    private var converted: [Float] = []
    /// Samples handed to the encoder: the next frame's pts (less `priming`).
    private var encoded: Int64 = 0
    /// Added to each frame's pts: the encoder's own delay (Opus's 312 samples of look-ahead), which it takes
    /// off its packets' pts, for a container that also signals it to decoders (MP4's and Matroska's Opus
    /// pre-skip), which would otherwise skip it twice and play the track 6.5 ms early.
    private let priming: Int64
    private let silence: OpusSilence

    /// `addStream` makes the output stream the track's packets go to and returns its index. `signalsPriming`:
    /// the container tells decoders of the encoder's delay (see `priming`). `repeatsSilence`: Opus frames of digital
    /// silence repeat the settled encoder's packet instead of being encoded (`OpusSilence`; off only to compare).
    public init(
        name: String, streams: [SampleType], gains: [SampleType: Float], settings: AudioEncoderSettings,
        globalHeader: Bool, signalsPriming: Bool = false, repeatsSilence: Bool = true,
        addStream: (StreamParameters) throws(MediaError) -> Int
    ) throws(MediaError) {
        self.name = name
        inputs = Dictionary(uniqueKeysWithValues: streams.enumerated().map { ($1, $0) })
        timeline = AudioTimeline(
            channels: settings.channels, sampleRate: settings.sampleRate, gains: streams.map { gains[$0] ?? 1 })
        encoder = try Encoder.audio(settings, globalHeader: globalHeader)
        encoder.title = Self.title(of: streams)
        frame = try MediaFrame.audio(
            samples: encoder.frameSize, channels: settings.channels, sampleRate: settings.sampleRate,
            planar: settings.codec == "aac")
        let parameters = try encoder.parameters
        stream = try addStream(parameters)
        priming = signalsPriming ? parameters.priming : 0
        silence = OpusSilence(encoder: encoder, enabled: repeatsSilence)
    }

    /// Frames of silence repeated rather than encoded (`OpusSilence`).
    public var silentFramesRepeated: Int { silence.repeated }

    /// What players call a track of `streams`: "App audio", "Microphone", or both mixed.
    public static func title(of streams: [SampleType]) -> String {
        switch (streams.contains(.audioApp), streams.contains(.audioMic)) {
        case (true, true): "App audio and microphone"
        case (false, true): "Microphone"
        default: "App audio"
        }
    }

    /// The name a track titled `title` has in a result (`name`): "audioApp", "audioMic" or "app+mic".
    public static func name(titled title: String?) -> String {
        let streams: [[SampleType]] = [[.audioApp], [.audioMic], [.audioApp, .audioMic]]
        let named = streams.first { Self.title(of: $0) == title } ?? [.audioApp]
        return named.count == 2 ? "app+mic" : named[0].description
    }

    var channels: Int { timeline.channels }
    var sampleRate: Int { timeline.sampleRate }

    /// Places a chunk of `stream` whose first sample belongs at file time `time` (ns) (`discontinuity`: samples were
    /// lost before it), then encodes what is ready, up to the end of the video so far (`videoEnd`, ns), where a pause
    /// may cut.
    public func add(
        _ data: UnsafeRawBufferPointer, format: AudioFormat, frames: Int, from stream: SampleType, at time: Int64,
        discontinuity: Bool = false, videoEnd: UInt64, sink: PacketSink
    ) throws(MediaError) {
        guard let input = inputs[stream] else { return }
        converted.removeAll(keepingCapacity: true)
        PCM.appendFloat(data, format: format, frames: frames, channels: channels, to: &converted)
        let at = self.frames(time)
        converted.withUnsafeBufferPointer { timeline.place(input, $0, at: at, discontinuity: discontinuity) }
        timeline.drain(upTo: timeline.ready(limit: self.frames(Int64(videoEnd))), into: &pending)
        try encodePending(sink: sink, final: false)
    }

    /// Ends the current segment at file time `end` (ns).
    public func endSegment(at end: UInt64) {
        timeline.endSegment(at: frames(Int64(end)))
    }

    /// Hands on everything up to file time `end` (the end of the recording) and flushes the encoder.
    public func finish(at end: UInt64, sink: PacketSink) throws(MediaError) {
        timeline.endSegment(at: frames(Int64(end)))
        timeline.drain(upTo: frames(Int64(end)), into: &pending)
        try encodePending(sink: sink, final: true)
    }

    /// File time (ns) to samples, rounded to the nearest.
    private func frames(_ ns: Int64) -> Int64 {
        let scaled = ns * Int64(sampleRate)
        return (scaled + (scaled >= 0 ? 500_000_000 : -500_000_000)) / 1_000_000_000
    }

    private func encodePending(sink: PacketSink, final: Bool) throws(MediaError) {
        let frameSize = encoder.frameSize
        var used = 0
        while pending.count - used >= frameSize * channels || (final && pending.count > used) {
            let frames = min(frameSize, (pending.count - used) / channels)
            let pts = encoded + priming
            let silent = pending.withUnsafeBufferPointer { all in
                frames == frameSize
                    && OpusSilence.isSilent(UnsafeBufferPointer(rebasing: all[used..<used + frames * channels]))
            }
            if try silence.repeatPacket(
                silent: silent,
                { packet throws(MediaError) in
                    try sink.write(packet, stream: stream)
                })
            {
                used += frames * channels
                encoded += Int64(frames)
                continue
            }
            try pending.withUnsafeBufferPointer { all in
                Result { () throws(MediaError) in
                    let samples = UnsafeBufferPointer(rebasing: all[used...])
                    try frame.fillAudio(samples, frames: frames, pts: pts)
                }
            }.get()
            used += frames * channels
            encoded += Int64(frames)
            try encoder.encode(frame) { packet throws(MediaError) in
                var packet = packet
                silence.stamp(&packet)
                silence.encoded(packet, silent: silent)
                try sink.write(packet, stream: stream)
            }
        }
        pending.removeFirst(used)
        if final {
            try encoder.encode(nil) { packet throws(MediaError) in
                var packet = packet
                silence.stamp(&packet)
                try sink.write(packet, stream: stream)
            }
        }
    }

    /// What the result reports about this track.
    public var summary: [String: Double] {
        let (missing, dropped) = lostMs
        return [
            "missingMs": missing, "droppedMs": dropped,
            "maxClockOffsetMs": timeline.counters.maxDriftFrames * 1000 / Double(sampleRate),
        ]
    }

    /// The sound that never came, filled with silence, and the sound dropped so far (ms).
    package var lostMs: (missing: Double, dropped: Double) {
        let counters = timeline.counters
        let ms = 1000 / Double(sampleRate)
        return (Double(counters.missingFrames) * ms, Double(counters.droppedFrames) * ms)
    }

    /// The output stream its packets go to.
    package var outputStream: Int { stream }

    /// The current clock offset of the input furthest off, ms.
    public var clockOffsetMs: Double {
        timeline.inputs.lazy.map { abs($0.drift.smoothedError) }.max().map { $0 * 1000 / Double(sampleRate) } ?? 0
    }
}

/// Interleaved PCM as delivered (f32 or s16, 1 or 2 channels) to interleaved float with the
/// track's channel count: mono is copied to both sides, stereo averaged to mono.
enum PCM {
    static func appendFloat(
        _ data: UnsafeRawBufferPointer, format: AudioFormat, frames: Int, channels: Int, to output: inout [Float]
    ) {
        let inChannels = format.channels
        let available = min(frames, data.count / max(1, format.bytesPerFrame))
        func value(_ index: Int) -> Float {
            switch format.sampleFormat {
            case .float32: data.loadUnaligned(fromByteOffset: index * 4, as: Float.self)
            case .s16: Float(data.loadUnaligned(fromByteOffset: index * 2, as: Int16.self)) / 32768
            }
        }
        output.reserveCapacity(output.count + available * channels)
        for f in 0..<available {
            let base = f * inChannels
            if inChannels == channels {
                for c in 0..<channels { output.append(value(base + c)) }
            } else if channels == 1 {
                var sum: Float = 0
                for c in 0..<inChannels { sum += value(base + c) }
                output.append(sum / Float(inChannels))
            } else {
                let v = value(base)
                for c in 0..<channels { output.append(inChannels == 1 ? v : value(base + min(c, inChannels - 1))) }
            }
        }
    }
}
