import BroadcastCore
import BroadcastEncoding

extension StreamOptions {
    /// The encoding the stream asks broadcastd for, in the record handler's terms (`EncodingOptions`): with
    /// `encode=shared`, and by default (`encode` not given) wherever it can. It is record's and replay's default
    /// encoding, so that the three share one encoder: constant quality, capped (`VideoEncoderSettings.maxBitRate`),
    /// or the `videoBitRate` given, kept (a shared encoder follows no destination); the stream's codec, preset and
    /// keyframe interval; app and mic audio each in a track of its own, which the stream mixes into its one, in its
    /// own codec and bit rate (`SharedAudioMix`). nil: the stream encodes on its own, its bit rate following the link:
    /// with `encode=own`, or by default when a destination or the camera needs it.
    static func sharedEncoding(
        _ setupInfo: [String: String], video: VideoEncoderSettings, bitRate: Int?, destinations: [StreamDestination],
        camera: Bool
    ) throws(StreamError) -> EncodingOptions? {
        let asked = setupInfo["encode"].flatMap { $0.isEmpty ? nil : $0 }
        switch asked {
        case "own": return nil
        case nil, "shared": break
        case let other?: throw StreamError("encode '\(other)': own (encode here) or shared (broadcastd's encoder)")
        }
        var refusal: String?
        if let other = destinations.first(where: { $0.isHLS || $0.isWebRTC }) {
            let why =
                other.isHLS
                ? "HLS cuts its segments on keyframes never early, which a shared encoder does not promise"
                : "WebRTC takes constrained baseline H.264, which a shared encoder does not make"
            refusal = "\(why); stream to \(other.displayURL) with encode=own"
        } else if camera {
            refusal = "each handler puts the camera in its own picture; use encode=own"
        }
        if let refusal {
            guard asked == nil else { throw StreamError("encode=shared: \(refusal)") }
            return nil
        }
        var options = EncodingOptions()
        options.video = VideoEncoderSettings(
            codec: video.codec, width: 0, height: 0, framesPerSecond: 0, bitRate: bitRate, preset: video.preset,
            tune: video.tune, keyframeInterval: video.keyframeInterval)
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
