import BroadcastCore

#if canImport(Glibc)
    import Glibc
#endif

extension EncodingOptions {
    /// These options as ENCODE names them (revision 2.9): every field written out, so that handlers meaning the same
    /// encoding send the same settings and share an encoder, and `init(taking:)` reads them back (broadcastd's
    /// encoder does). nil: options no shared encoder takes (the camera: each handler composes its own corner).
    package var sharedSettings: [String: String]? {
        guard camera == nil else { return nil }
        var settings: [String: String] = [:]
        settings["codec"] = video.codec.rawValue
        settings["crf"] = String(video.crf)
        settings["preset"] = video.preset
        settings["keyframeInterval"] = String(video.keyframeInterval)
        settings["threads"] = String(video.threads)
        settings["size"] = size.map { "\($0.width)x\($0.height)" } ?? "input"
        settings["frameRate"] = framesPerSecond.map { String($0) } ?? "input"
        settings["orientation"] = rotation.map { String($0) } ?? "auto"
        settings["audioChannels"] = channels.map { String($0) } ?? "input"
        settings["opusComplexity"] = String(opusComplexity)
        settings["tune"] = video.tune
        settings["videoBitRate"] = video.bitRate.map { "\($0)" }
        // The cap left at its default is left out, as it was before the key.
        settings["maxVideoBitRate"] = video.maxBitRate.map { "\($0)" }
        settings["audioBitRate"] = audioBitRate.map { "\($0)" }
        // Opus, the default, is left out: the settings of handlers from before the key stay what they were.
        if audioCodec == "aac" { settings["audioCodec"] = "aac" }
        switch audio {
        case .none: settings["audio"] = "none"
        case .mixed: (settings["audio"], settings["mix"]) = ("app,mic", "true")
        case .separate(let streams):
            settings["audio"] = streams.map { $0 == .audioApp ? "app" : "mic" }.joined(separator: ",")
        }
        for (type, key) in [(SampleType.audioApp, "appGain"), (.audioMic, "micGain")] {
            if let gain = gains[type], gain != 1 { settings[key] = "\(20 * log10(Double(gain)))" }
        }
        return settings
    }
}
