import BroadcastCore
import BroadcastEncoding

extension StreamOptions {
    /// `encode=shared`: the stream's encoding in the record handler's terms (`EncodingOptions`), which it asks
    /// broadcastd for, so that a `record` or `replay` given the same settings (`videoBitRate=4500 audio=app,mic
    /// mix=true`, with the stream's defaults) shares its encoder: its bit rate (kept: a shared encoder follows no
    /// destination), preset, keyframe interval and `tune=zerolatency`; its one audio track (both streams mixed), in
    /// its codec; the audio bit rate only when given (`audioBitRate`; nil: 64 kbit/s per channel, 128 for a stereo
    /// capture as the stream's own). nil with `encode=own` (the default).
    static func sharedEncoding(
        _ setupInfo: [String: String], video: VideoEncoderSettings, audio: [SampleType], audioCodec: String,
        audioBitRate: Int?, destinations: [StreamDestination], camera: Bool
    ) throws(StreamError) -> EncodingOptions? {
        switch setupInfo["encode"].flatMap({ $0.isEmpty ? nil : $0 }) {
        case nil, "own": return nil
        case "shared": break
        case let other?: throw StreamError("encode '\(other)': own (encode here) or shared (broadcastd's encoder)")
        }
        if let other = destinations.first(where: { $0.isHLS || $0.isWebRTC }) {
            let why =
                other.isHLS
                ? "HLS cuts its segments on keyframes never early, which a shared encoder does not promise"
                : "WebRTC takes constrained baseline H.264, which a shared encoder does not make"
            throw StreamError("encode=shared: \(why); stream to \(other.displayURL) with encode=own")
        }
        if camera {
            throw StreamError("encode=shared: each handler puts the camera in its own picture; use encode=own")
        }
        var options = EncodingOptions()
        options.video = VideoEncoderSettings(
            codec: video.codec, width: 0, height: 0, framesPerSecond: 0, bitRate: video.bitRate, preset: video.preset,
            tune: video.tune, keyframeInterval: video.keyframeInterval)
        options.audio =
            switch audio.count {
            case 0: .none
            case 1: .separate(audio)
            default: .mixed
            }
        options.audioCodec = audioCodec
        options.audioBitRate = audioBitRate
        options.shared = true
        // What broadcastd's encoder reads back: settings it would refuse are refused here.
        guard var settings = options.sharedSettings else { return nil }
        do {
            _ = try EncodingOptions(taking: &settings)
        } catch {
            throw StreamError("encode=shared: \(error.description)")
        }
        return options
    }
}
