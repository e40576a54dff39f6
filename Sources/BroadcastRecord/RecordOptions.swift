import BroadcastCore
import BroadcastHandlerKit
import BroadcastMedia
import BroadcastUpload
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The `record` handler's settings, from its broadcast URL and setup fields
/// (share/broadcastd/handlers/record.json lists them with their defaults).
package struct RecordOptions: Equatable {
    enum AudioLayout: Equatable {
        /// One track per stream, app first.
        case separate([SampleType])
        /// Both streams mixed into one track.
        case mixed
        case none
    }

    package var path: String
    package var container: Muxer.Container
    package var overwrite = false
    var video: VideoEncoderSettings
    /// nil: the captured size.
    var size: (width: Int, height: Int)?
    /// nil: the captured rate.
    package var framesPerSecond: Int?
    /// nil: what the samples say.
    var rotation: Int?
    var audio: AudioLayout = .separate([.audioApp, .audioMic])
    var gains: [SampleType: Float] = [.audioApp: 1, .audioMic: 1]
    /// nil: the captured channel count.
    var channels: Int?
    /// kbit/s per track; nil: 64 per channel.
    var audioBitRate: Int?
    var opusComplexity = 10
    /// Where the file goes when the recording is done (HTTP PUT); nil: nowhere.
    package var upload: HTTPUpload.Settings?

    package static func == (a: RecordOptions, b: RecordOptions) -> Bool {
        a.path == b.path && a.container == b.container && a.overwrite == b.overwrite && a.video == b.video
            && a.size?.width == b.size?.width && a.size?.height == b.size?.height
            && a.framesPerSecond == b.framesPerSecond
            && a.rotation == b.rotation && a.audio == b.audio && a.gains == b.gains && a.channels == b.channels
            && a.audioBitRate == b.audioBitRate && a.opusComplexity == b.opusComplexity && a.upload == b.upload
    }

    package struct Invalid: Error, CustomStringConvertible {
        package var description: String
        package init(_ description: String) { self.description = description }
    }

    /// `defaultPath` is where a broadcast without a URL goes.
    package init(url: String?, setupInfo: [String: String], defaultPath: () -> String) throws(Invalid) {
        let path: String
        if let url, !url.isEmpty {
            guard let file = FileURL.path(from: url) else {
                throw Invalid("'\(url)' is not a file: give a file:// URL or an absolute path ending in .mp4 or .mkv")
            }
            path = file
        } else {
            path = defaultPath()
        }
        let ext =
            path.split(separator: "/").last.flatMap { $0.contains(".") ? $0.split(separator: ".").last : nil }.map(
                String.init) ?? ""
        guard let container = Muxer.Container(fileExtension: ext) else {
            throw Invalid(
                "'\(path)': record writes .mp4 (fragmented MP4, playable even if recording stops abruptly) or .mkv (Matroska); name the file with one of these"
            )
        }
        self.path = path
        self.container = container
        video = VideoEncoderSettings(width: 0, height: 0, framesPerSecond: 0)

        var fields = setupInfo.filter { !$0.value.isEmpty }
        func take(_ key: String) -> String? { fields.removeValue(forKey: key) }
        func integer(_ key: String, _ range: ClosedRange<Int>, _ what: String) throws(Invalid) -> Int? {
            guard let text = take(key) else { return nil }
            guard let value = Int(text), range.contains(value) else {
                throw Invalid("\(key) '\(text)': \(what) (\(range.lowerBound)-\(range.upperBound))")
            }
            return value
        }
        func decibels(_ key: String) throws(Invalid) -> Float? {
            guard let text = take(key) else { return nil }
            guard let value = Double(text), (-60...30).contains(value) else {
                throw Invalid("\(key) '\(text)': a gain in dB from -60 to 30")
            }
            return Float(pow(10, value / 20))
        }

        overwrite = try flag(take("overwrite"), "overwrite")
        let codecName = take("codec")?.lowercased() ?? "h264"
        guard let codec = VideoCodec(rawValue: codecName) else {
            throw Invalid("codec '\(codecName)': h264 (libx264), hevc (libx265) or av1 (SVT-AV1)")
        }
        video = VideoEncoderSettings(codec: codec, width: 0, height: 0, framesPerSecond: 0)
        video.bitRate = try integer("videoBitRate", 100...200_000, "kbit/s; leave it empty for constant quality (crf)")
        video.crf =
            try integer("crf", codec.crfRange, "\(codec.displayName) constant quality, lower is better")
            ?? codec.defaultCRF
        if let preset = take("preset") {
            let presets = VideoCodec.presets
            guard presets.contains(preset) else {
                throw Invalid("preset '\(preset)': one of \(presets.joined(separator: ", "))")
            }
            video.preset = preset
        }
        if let tune = take("tune") {
            let tunes = codec.tunes
            guard tunes.contains(tune) else {
                throw Invalid("tune '\(tune)': for \(codec.rawValue), one of \(tunes.joined(separator: ", "))")
            }
            video.tune = tune
        }
        if let text = take("keyframeInterval") {
            guard let seconds = Double(text), seconds >= 0.1, seconds <= 60 else {
                throw Invalid("keyframeInterval '\(text)': seconds between keyframes (0.1-60)")
            }
            video.keyframeInterval = seconds
        }
        video.threads = try integer("threads", 0...32, "encoder threads, 0 for automatic") ?? 0
        if let text = take("size"), text != "input" {
            let parts = text.split(separator: "x").compactMap { Int($0) }
            guard parts.count == 2, (16...8192).contains(parts[0]), (16...8192).contains(parts[1]), parts[0] % 2 == 0,
                parts[1] % 2 == 0
            else {
                throw Invalid("size '\(text)': 'input' or WIDTHxHEIGHT, both even, e.g. 1280x720")
            }
            size = (parts[0], parts[1])
        }
        if let text = take("frameRate"), text != "input" {
            guard let fps = Int(text), (1...240).contains(fps) else {
                throw Invalid("frameRate '\(text)': 'input' or frames per second (1-240)")
            }
            framesPerSecond = fps
        }
        if let text = take("orientation"), text != "auto" {
            guard let degrees = Int(text), [0, 90, 180, 270].contains(degrees) else {
                throw Invalid("orientation '\(text)': auto, 0, 90, 180 or 270 (degrees clockwise)")
            }
            rotation = degrees
        }

        let mix = try flag(take("mix"), "mix")
        var streams: [SampleType] = []
        for name in (take("audio") ?? "app,mic").split(separator: ",").map({ $0.trimming(" ") }) {
            switch name {
            case "app": streams.append(.audioApp)
            case "mic": streams.append(.audioMic)
            case "none": break
            default: throw Invalid("audio '\(name)': app, mic, 'app,mic' or none")
            }
        }
        audio = streams.isEmpty ? .none : (mix && streams.count == 2 ? .mixed : .separate(streams))
        gains[.audioApp] = try decibels("appGain") ?? 1
        gains[.audioMic] = try decibels("micGain") ?? 1
        if let text = take("audioChannels"), text != "input" {
            guard let count = Int(text), count == 1 || count == 2 else {
                throw Invalid("audioChannels '\(text)': input, 1 or 2")
            }
            channels = count
        }
        audioBitRate = try integer("audioBitRate", 6...510, "Opus kbit/s per track")
        opusComplexity = try integer("opusComplexity", 0...10, "Opus complexity") ?? 10
        upload = try Self.upload(
            take("upload"), headers: take("uploadHeaders"), maxRate: integer("uploadMaxRate", 8...10_000_000, "kbit/s"),
            attempts: integer("uploadAttempts", 1...20, "tries in all"))
        if let key = fields.keys.sorted().first { throw Invalid("unknown setup field '\(key)'") }
    }

    private static func upload(_ url: String?, headers: String?, maxRate: Int?, attempts: Int?) throws(Invalid)
        -> HTTPUpload.Settings?
    {
        guard let url else {
            if headers != nil || maxRate != nil || attempts != nil {
                throw Invalid("uploadHeaders, uploadMaxRate and uploadAttempts need upload")
            }
            return nil
        }
        let scheme = url.prefix { $0 != ":" }.lowercased()
        guard scheme == "http" || scheme == "https", url.dropFirst(scheme.count).hasPrefix("://"),
            url.count > scheme.count + 3
        else {
            throw Invalid(
                "upload '\(SecretURL.masked(url))': an http:// or https:// URL "
                    + "(ending in / to keep the file's name)")
        }
        var settings = HTTPUpload.Settings(url: url)
        if let headers {
            // One `Name: value`, or a JSON object of them ({"Authorization": "Bearer ...", "X-Team": "a"}).
            if headers.hasPrefix("{") {
                guard let fields = try? JSONDecoder().decode([String: String].self, from: Data(headers.utf8)) else {
                    throw Invalid("uploadHeaders: 'Name: value', or a JSON object of string values")
                }
                settings.headers = fields.keys.sorted().map { "\($0): \(fields[$0]!)" }
            } else {
                guard let colon = headers.firstIndex(of: ":"), colon != headers.startIndex else {
                    throw Invalid("uploadHeaders: 'Name: value', or a JSON object of string values")
                }
                settings.headers = [headers]
            }
        }
        if let maxRate { settings.maxBytesPerSecond = Int64(maxRate) * 1000 / 8 }
        if let attempts { settings.attempts = attempts }
        return settings
    }

    private func flag(_ text: String?, _ key: String) throws(Invalid) -> Bool {
        switch text?.lowercased() {
        case nil, "false", "no", "0": false
        case "true", "yes", "1": true
        default: throw Invalid("\(key) '\(text!)': true or false")
        }
    }
}
