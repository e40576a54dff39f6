import BroadcastCore

#if canImport(Glibc)
    import Glibc
#endif

/// A setup field the handler does not take, or a value out of its range, in words the user can act on.
package struct SetupFieldError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// How the `record` and `replay` handlers encode, from their setup fields (codec, quality, size and rate, audio
/// tracks: share/broadcastd/handlers/record.json lists them with their defaults); `RecordingEncoder` builds the
/// encoders from it.
package struct EncodingOptions: Equatable, Sendable {
    package enum AudioLayout: Equatable {
        /// One track per stream, app first.
        case separate([SampleType])
        /// Both streams mixed into one track.
        case mixed
        case none
    }

    package var video = VideoEncoderSettings(width: 0, height: 0, framesPerSecond: 0)
    /// nil: the captured size.
    package var size: (width: Int, height: Int)?
    /// nil: the captured rate.
    package var framesPerSecond: Int?
    /// nil: what the samples say.
    package var rotation: Int?
    package var audio: AudioLayout = .separate([.audioApp, .audioMic])
    package var gains: [SampleType: Float] = [.audioApp: 1, .audioMic: 1]
    /// nil: the captured channel count.
    package var channels: Int?
    /// kbit/s per track; nil: 64 per channel.
    package var audioBitRate: Int?
    /// The audio encoder, as FFmpeg names it: `libopus` (the default), or `aac` (what RTMP and HLS carry).
    package var audioCodec = "libopus"
    package var opusComplexity = 10
    /// The camera in a corner of the picture (`camera=on`) or a track of its own (`camera=track`); nil: off.
    package var camera: CameraSetting?
    /// `encode=shared` (revision 2.9): share the encoder broadcastd runs for the handlers asking for this encoding,
    /// instead of encoding here (`own`, the default for now); the handler encodes by itself when broadcastd offers
    /// none.
    package var shared = false

    package init() {}

    package static func == (a: EncodingOptions, b: EncodingOptions) -> Bool {
        a.video == b.video && a.size?.width == b.size?.width && a.size?.height == b.size?.height
            && a.framesPerSecond == b.framesPerSecond && a.rotation == b.rotation && a.audio == b.audio
            && a.gains == b.gains && a.channels == b.channels && a.audioBitRate == b.audioBitRate
            && a.audioCodec == b.audioCodec && a.opusComplexity == b.opusComplexity && a.camera == b.camera
    }

    /// Takes the encoding fields out of `fields` (empty values already removed), leaving the others.
    package init(taking fields: inout [String: String]) throws(SetupFieldError) {
        func take(_ key: String) -> String? { fields.removeValue(forKey: key) }
        func integer(_ key: String, _ range: ClosedRange<Int>, _ what: String) throws(SetupFieldError) -> Int? {
            try Self.integer(key, take(key), range, what)
        }
        func decibels(_ key: String) throws(SetupFieldError) -> Float? {
            guard let text = take(key) else { return nil }
            guard let value = Double(text), (-60...30).contains(value) else {
                throw SetupFieldError("\(key) '\(text)': a gain in dB from -60 to 30")
            }
            return Float(pow(10, value / 20))
        }

        let codecName = take("codec")?.lowercased() ?? "h264"
        guard let codec = VideoCodec(rawValue: codecName) else {
            throw SetupFieldError("codec '\(codecName)': h264 (libx264), hevc (libx265) or av1 (SVT-AV1)")
        }
        video = VideoEncoderSettings(codec: codec, width: 0, height: 0, framesPerSecond: 0)
        video.bitRate = try integer("videoBitRate", 100...200_000, "kbit/s; leave it empty for constant quality (crf)")
        video.crf =
            try integer("crf", codec.crfRange, "\(codec.displayName) constant quality, lower is better")
            ?? codec.defaultCRF
        video.maxBitRate = try integer(
            "maxVideoBitRate", 0...200_000, "kbit/s the constant quality keeps under; 0: no cap; empty: 6000 at 1080p30"
        )
        if let preset = take("preset") {
            let presets = VideoCodec.presets
            guard presets.contains(preset) else {
                throw SetupFieldError("preset '\(preset)': one of \(presets.joined(separator: ", "))")
            }
            video.preset = preset
        }
        if let tune = take("tune") {
            let tunes = codec.tunes
            guard tunes.contains(tune) else {
                throw SetupFieldError("tune '\(tune)': for \(codec.rawValue), one of \(tunes.joined(separator: ", "))")
            }
            video.tune = tune
        }
        if let text = take("keyframeInterval") {
            guard let seconds = Double(text), seconds >= 0.1, seconds <= 60 else {
                throw SetupFieldError("keyframeInterval '\(text)': seconds between keyframes (0.1-60)")
            }
            video.keyframeInterval = seconds
        }
        video.threads = try integer("threads", 0...32, "encoder threads, 0 for automatic") ?? 0
        if let text = take("size"), text != "input" {
            let parts = text.split(separator: "x").compactMap { Int($0) }
            guard parts.count == 2, (16...8192).contains(parts[0]), (16...8192).contains(parts[1]), parts[0] % 2 == 0,
                parts[1] % 2 == 0
            else {
                throw SetupFieldError("size '\(text)': 'input' or WIDTHxHEIGHT, both even, e.g. 1280x720")
            }
            size = (parts[0], parts[1])
        }
        if let text = take("frameRate"), text != "input" {
            guard let fps = Int(text), (1...240).contains(fps) else {
                throw SetupFieldError("frameRate '\(text)': 'input' or frames per second (1-240)")
            }
            framesPerSecond = fps
        }
        if let text = take("orientation"), text != "auto" {
            guard let degrees = Int(text), [0, 90, 180, 270].contains(degrees) else {
                throw SetupFieldError("orientation '\(text)': auto, 0, 90, 180 or 270 (degrees clockwise)")
            }
            rotation = degrees
        }

        let mix = try Self.flag(take("mix"), "mix")
        var streams: [SampleType] = []
        for name in (take("audio") ?? "app,mic").split(separator: ",").map({ $0.trimming(" ") }) {
            switch name {
            case "app": streams.append(.audioApp)
            case "mic": streams.append(.audioMic)
            case "none": break
            default: throw SetupFieldError("audio '\(name)': app, mic, 'app,mic' or none")
            }
        }
        audio = streams.isEmpty ? .none : (mix && streams.count == 2 ? .mixed : .separate(streams))
        gains[.audioApp] = try decibels("appGain") ?? 1
        gains[.audioMic] = try decibels("micGain") ?? 1
        if let text = take("audioChannels"), text != "input" {
            guard let count = Int(text), count == 1 || count == 2 else {
                throw SetupFieldError("audioChannels '\(text)': input, 1 or 2")
            }
            channels = count
        }
        switch take("audioCodec")?.lowercased() {
        case nil, "opus": audioCodec = "libopus"
        case "aac": audioCodec = "aac"
        case let other?: throw SetupFieldError("audioCodec '\(other)': opus or aac")
        }
        audioBitRate = try integer("audioBitRate", 6...510, "kbit/s per track")
        opusComplexity = try integer("opusComplexity", 0...10, "Opus complexity") ?? 10
        camera = try CameraLayout.taking(&fields)
        switch take("encode") {
        case "own": shared = false
        case nil, "shared": shared = true
        case let other?: throw SetupFieldError("encode '\(other)': own (encode here) or shared (broadcastd's encoder)")
        }
    }

    /// An integer setup field `key` of `text` in `range`, `what` saying what it is; nil: not given.
    package static func integer(_ key: String, _ text: String?, _ range: ClosedRange<Int>, _ what: String)
        throws(SetupFieldError) -> Int?
    {
        guard let text else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw SetupFieldError("\(key) '\(text)': \(what) (\(range.lowerBound)-\(range.upperBound))")
        }
        return value
    }

    /// A true/false setup field; nil: false.
    package static func flag(_ text: String?, _ key: String) throws(SetupFieldError) -> Bool {
        switch text?.lowercased() {
        case nil, "false", "no", "0": false
        case "true", "yes", "1": true
        default: throw SetupFieldError("\(key) '\(text!)': true or false")
        }
    }
}

extension Substring {
    func trimming(_ character: Character) -> String {
        String(drop(while: { $0 == character }).reversed().drop(while: { $0 == character }).reversed())
    }
}
