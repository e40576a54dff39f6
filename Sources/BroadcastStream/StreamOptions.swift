import BroadcastCore
import BroadcastMedia

/// The error type of BroadcastStream: what failed, and why.
public struct StreamError: Error, CustomStringConvertible, Equatable, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The `stream` handler's settings, from its broadcast URL and setup fields
/// (share/broadcastd/handlers/stream.json lists them with their defaults).
public struct StreamOptions: Equatable, Sendable {
    public enum Scheme: String, Sendable { case srt, rtmp, rtmps }

    public var scheme: Scheme
    /// What libavformat opens: the URL with the stream key put in.
    public var url: String
    /// The URL as logs, errors and status may show it: no stream key, no passphrase.
    public var displayURL: String
    public var container: Muxer.Container
    public var video: VideoEncoderSettings
    public var audioCodec: String
    /// kbit/s.
    public var audioBitRate: Int
    /// Which captured audio goes into the one (mixed) track.
    public var audio: [SampleType]
    /// Seconds of media the send queue may hold before it drops GOPs.
    public var maxQueueSeconds: Double
    /// Seconds to keep trying to (re)connect before the broadcast finishes with an error.
    public var reconnectFor: Double
    /// The URL viewers watch, published to controllers.
    public var publicURL: String?

    public init(url: String?, setupInfo: [String: String]) throws(StreamError) {
        guard let url, !url.isEmpty else { throw StreamError("the stream handler needs a URL: srt://HOST:PORT or rtmp://HOST/APP") }
        guard let colon = url.firstIndex(of: ":"), let scheme = Scheme(rawValue: url[..<colon].lowercased()),
              url[colon...].hasPrefix("://"), url.count > url.distance(from: url.startIndex, to: colon) + 3 else {
            throw StreamError("'\(Self.redacted(url))' is not a stream URL: give srt://HOST:PORT[?streamid=...] or rtmp[s]://HOST/APP")
        }
        self.scheme = scheme
        let key = setupInfo["key"].flatMap { $0.isEmpty ? nil : $0 }
        switch scheme {
        case .srt:
            container = .mpegts
            // The stream key is SRT's streamid, unless the URL names one already.
            if let key, !url.contains("streamid=") {
                self.url = url + (url.contains("?") ? "&" : "?") + "streamid=" + Self.percentEncoded(key)
            } else {
                self.url = url
            }
        case .rtmp, .rtmps:
            container = .flv
            // The stream key is the last path component, as YouTube and Twitch give it.
            self.url = key.map { (url.hasSuffix("/") ? url : url + "/") + $0 } ?? url
        }
        displayURL = Self.redacted(url)

        func number(_ name: String, _ fallback: Double, _ range: ClosedRange<Double>) throws(StreamError) -> Double {
            guard let text = setupInfo[name], !text.isEmpty else { return fallback }
            guard let value = Double(text), range.contains(value) else {
                throw StreamError("\(name) '\(text)': a number from \(range.lowerBound) to \(range.upperBound)")
            }
            return value
        }
        let videoCodecName = setupInfo["codec"].flatMap { $0.isEmpty ? nil : $0.lowercased() } ?? "h264"
        guard let videoCodec = VideoCodec(rawValue: videoCodecName) else { throw StreamError("codec '\(videoCodecName)': h264, or hevc over srt://") }
        guard container.carries(videoCodec) else {
            throw StreamError(container == .flv
                ? "codec \(videoCodec.rawValue): RTMP carries H.264 only (FLV as libavformat 5.1 writes it has no \(videoCodec.displayName)); use h264, or stream over srt://"
                : "codec \(videoCodec.rawValue): libavformat 5.1 has no \(videoCodec.displayName) in MPEG-TS (it would go out as private data no receiver decodes); use h264 or hevc")
        }
        let videoKbps = Int(try number("videoBitRate", 4500, 100...100_000))
        video = VideoEncoderSettings(codec: videoCodec, width: 0, height: 0, framesPerSecond: 30, bitRate: videoKbps,
                                     preset: setupInfo["preset"].flatMap { $0.isEmpty ? nil : $0 } ?? "veryfast", tune: "zerolatency",
                                     keyframeInterval: try number("keyframeInterval", 2, 0.5...10))
        let codec = (setupInfo["audioCodec"].flatMap { $0.isEmpty ? nil : $0 } ?? (scheme == .srt ? "opus" : "aac")).lowercased()
        switch (codec, scheme) {
        case ("aac", _): audioCodec = "aac"
        case ("opus", .srt): audioCodec = "libopus"
        case ("opus", _): throw StreamError("audioCodec opus: RTMP carries AAC only (FLV); use aac, or stream over srt://")
        default: throw StreamError("audioCodec '\(codec)': aac or opus")
        }
        audioBitRate = Int(try number("audioBitRate", 128, 16...512))
        switch setupInfo["audio"].flatMap({ $0.isEmpty ? nil : $0 }) ?? "app,mic" {
        case "app,mic", "mic,app": audio = [.audioApp, .audioMic]
        case "app": audio = [.audioApp]
        case "mic": audio = [.audioMic]
        case "none": audio = []
        case let other: throw StreamError("audio '\(other)': app, mic, 'app,mic' or none")
        }
        maxQueueSeconds = try number("maxQueue", 3, 0.5...30)
        reconnectFor = try number("reconnectFor", 30, 0...3600)
        publicURL = setupInfo["publicURL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// `url` without what must stay private: the values of `streamid` and `passphrase`, and user info.
    public static func redacted(_ url: String) -> String {
        var result = url
        for name in ["streamid", "passphrase"] {
            while let range = result.range(of: name + "="), !result[range.upperBound...].hasPrefix("***") {
                let end = result[range.upperBound...].firstIndex(of: "&") ?? result.endIndex
                result.replaceSubrange(range.upperBound..<end, with: "***")
            }
        }
        if let scheme = result.range(of: "://"), let at = result[scheme.upperBound...].firstIndex(of: "@"),
           !result[scheme.upperBound..<at].contains("/") {
            result.replaceSubrange(scheme.upperBound...at, with: "***@")
        }
        return result
    }

    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            if (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || "-_.~".utf8.contains(byte) {
                out.unicodeScalars.append(UnicodeScalar(byte))
            } else {
                out += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        return out
    }
}
