import BroadcastCore
import BroadcastEncoding
import BroadcastMedia
import BroadcastWebRTC
import Foundation

/// The error type of BroadcastStream: what failed, and why.
public struct StreamError: Error, CustomStringConvertible, Equatable, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// One place a `stream` broadcast goes to: its own connection, queue and reconnection (see `Sender`).
public struct StreamDestination: Equatable, Sendable {
    public enum Scheme: String, Sendable { case srt, rtmp, rtmps, hls, http, https, whip, whips }

    public var scheme: Scheme
    /// What libavformat opens: the URL with the stream key put in (for hls://, the playlist's path); for WHIP the
    /// endpoint's http(s):// URL.
    public var url: String
    /// The URL as logs, errors and status may show it: no stream key, no passphrase.
    public var displayURL: String
    /// How libavformat sends it; nil for WebRTC (WHIP), which GStreamer's webrtcbin sends.
    public var container: Muxer.Container?
    /// WHIP's bearer token: the `key` for the broadcast URL, the user info (`whips://TOKEN@HOST/PATH`) in `also`.
    public var token: String?

    /// HLS, to a directory (hls:///DIR/NAME.m3u8) or an HTTP origin by PUT (http[s]://…/NAME.m3u8).
    public var isHLS: Bool { container == .hls }
    /// WebRTC to a WHIP endpoint.
    public var isWebRTC: Bool { scheme == .whip || scheme == .whips }
    /// How logs name what it sends.
    public var format: String { container?.rawValue ?? "WebRTC" }

    /// `url` as a destination; `key` (the primary URL's stream key) goes into SRT's streamid, onto RTMP's path, or is
    /// WHIP's bearer token. In `also`, the stream keys are in the URLs themselves. `displayURL` hides them
    /// (`SecretURL`).
    init(_ url: String, key: String?) throws(StreamError) {
        let usage =
            "give srt://HOST:PORT[?streamid=...], rtmp[s]://HOST/APP, hls:///DIR/NAME.m3u8, "
            + "http[s]://HOST/PATH/NAME.m3u8 or whip[s]://HOST/PATH"
        guard let colon = url.firstIndex(of: ":"), let scheme = Scheme(rawValue: url[..<colon].lowercased()),
            url[colon...].hasPrefix("://"), url.count > url.distance(from: url.startIndex, to: colon) + 3
        else {
            throw StreamError("'\(SecretURL.masked(url))' is not a stream URL: \(usage)")
        }
        self.scheme = scheme
        displayURL = SecretURL.masked(url)
        switch scheme {
        case .srt:
            container = .mpegts
            // The stream key is SRT's streamid, unless the URL names one already.
            if let key, !url.contains("streamid=") {
                self.url = url + (url.contains("?") ? "&" : "?") + "streamid=" + StreamOptions.percentEncoded(key)
            } else {
                self.url = url
            }
        case .rtmp, .rtmps:
            container = .flv
            // The stream key is the last path component, as YouTube and Twitch give it.
            self.url = key.map { (url.hasSuffix("/") ? url : url + "/") + $0 } ?? url
        case .hls, .http, .https:
            container = .hls
            let rest = url[url.index(colon, offsetBy: 3)...]
            let path = rest.split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
            guard path.lowercased().hasSuffix(".m3u8") else {
                throw StreamError("'\(displayURL)': an HLS URL names its playlist (…/index.m3u8)")
            }
            if scheme == .hls {
                guard path.hasPrefix("/") else {
                    throw StreamError("'\(displayURL)': hls:// takes an absolute path, hls:///DIR/NAME.m3u8")
                }
                self.url = path
            } else {
                self.url = url
            }
        case .whip, .whips:
            do {
                let endpoint = try WHIP.endpoint(url)
                self.url = endpoint.http
                token = key ?? endpoint.token
            } catch {
                throw StreamError("'\(displayURL)': \(error.reason)")
            }
        }
    }
}

/// The `stream` handler's settings, from its broadcast URL and setup fields
/// (share/broadcastd/handlers/stream.json lists them with their defaults).
public struct StreamOptions: Equatable, Sendable {
    /// At most this many destinations in one broadcast (the URL and `also`): service info has at most
    /// 64 keys, the URL's take 17 and each other's 11.
    public static let maxDestinations = 5

    /// Where the stream goes: the broadcast URL first, then `also`'s, in their order. One encode
    /// feeds them all.
    public var destinations: [StreamDestination]
    public var primary: StreamDestination { destinations[0] }
    public var scheme: StreamDestination.Scheme { primary.scheme }
    public var url: String { primary.url }
    public var displayURL: String { primary.displayURL }
    public var container: Muxer.Container? { primary.container }
    /// Whether the encoders must put their parameter sets in a global header (FLV and fMP4 want it;
    /// the MPEG-TS muxer puts them back before each keyframe).
    public var globalHeader: Bool { destinations.contains { $0.container != .mpegts } }
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
    /// HLS: seconds per segment (cut on a keyframe; the keyframe interval divides it), and segments in the playlist.
    public var segmentDuration: Double
    public var playlistLength: Int
    /// WHIP: the STUN and TURN servers of the `stun` and `turn` setup fields (the endpoint may name more).
    public var iceServers: [ICEServer] = []
    /// The camera in a corner of the picture (`camera=on`); nil: off.
    public var camera: CameraLayout?
    /// `encode=shared`: the encoding asked of broadcastd (`sharedEncoding`); nil: the stream encodes on its own.
    package var sharedEncoding: EncodingOptions?

    public init(url: String?, setupInfo: [String: String]) throws(StreamError) {
        guard let url, !url.isEmpty else {
            throw StreamError(
                "the stream handler needs a URL: srt://HOST:PORT, rtmp://HOST/APP, "
                    + "hls:///DIR/index.m3u8, http(s)://HOST/PATH/index.m3u8 or whips://HOST/PATH")
        }
        let key = setupInfo["key"].flatMap { $0.isEmpty ? nil : $0 }
        var destinations = [try StreamDestination(url, key: key)]
        let also = (setupInfo["also"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        for other in also {
            guard destinations.count < Self.maxDestinations else {
                throw StreamError(
                    "also: at most \(Self.maxDestinations - 1) more destinations (one encode feeds them all)")
            }
            let destination = try StreamDestination(other, key: nil)
            guard !destinations.contains(where: { $0.url == destination.url }) else {
                throw StreamError("also: \(destination.displayURL) is given twice")
            }
            destinations.append(destination)
        }
        self.destinations = destinations

        func number(_ name: String, _ fallback: Double, _ range: ClosedRange<Double>) throws(StreamError) -> Double {
            guard let text = setupInfo[name], !text.isEmpty else { return fallback }
            guard let value = Double(text), range.contains(value) else {
                throw StreamError("\(name) '\(text)': a number from \(range.lowerBound) to \(range.upperBound)")
            }
            return value
        }
        let hasRTMP = destinations.contains { $0.container == .flv }
        let hasWebRTC = destinations.contains(where: \.isWebRTC)
        let videoCodecName = setupInfo["codec"].flatMap { $0.isEmpty ? nil : $0.lowercased() } ?? "h264"
        guard let videoCodec = VideoCodec(rawValue: videoCodecName) else {
            throw StreamError("codec '\(videoCodecName)': h264, or hevc over srt://")
        }
        for destination in destinations where !(destination.container?.carries(videoCodec) ?? (videoCodec == .h264)) {
            switch destination.container {
            case nil:
                throw StreamError(
                    "codec \(videoCodec.rawValue): WebRTC (WHIP) is sent as H.264, which every "
                        + "browser takes; use h264")
            case .flv:
                throw StreamError(
                    "codec \(videoCodec.rawValue): RTMP carries H.264 only (FLV as libavformat 5.1 writes it has no \(videoCodec.displayName)); use h264, or stream over srt://"
                )
            case .hls:
                throw StreamError(
                    "codec \(videoCodec.rawValue): HLS is sent as H.264, which every player takes; use h264")
            default:
                throw StreamError(
                    "codec \(videoCodec.rawValue): libavformat 5.1 has no \(videoCodec.displayName) in MPEG-TS (it would go out as private data no receiver decodes); use h264 or hevc"
                )
            }
        }
        let videoKbps =
            setupInfo["videoBitRate"]?.isEmpty == false
            ? Int(try number("videoBitRate", 4500, 100...100_000)) : nil
        video = VideoEncoderSettings(
            codec: videoCodec, width: 0, height: 0, framesPerSecond: 30, bitRate: videoKbps ?? 4500,
            preset: setupInfo["preset"].flatMap { $0.isEmpty ? nil : $0 }, tune: "zerolatency",
            keyframeInterval: try number("keyframeInterval", 2, 0.5...10))
        switch setupInfo["audio"].flatMap({ $0.isEmpty ? nil : $0 }) ?? "app,mic" {
        case "app,mic", "mic,app": audio = [.audioApp, .audioMic]
        case "app": audio = [.audioApp]
        case "mic": audio = [.audioMic]
        case "none": audio = []
        case let other: throw StreamError("audio '\(other)': app, mic, 'app,mic' or none")
        }
        // Opus where every destination is SRT or WebRTC (which carries nothing else), or with WebRTC; else AAC as soon
        // as one is RTMP or HLS (what every player takes).
        let allOpus = destinations.allSatisfy { $0.container == .mpegts || $0.isWebRTC }
        let defaultCodec = !hasRTMP && (allOpus || hasWebRTC) ? "opus" : "aac"
        let codec = (setupInfo["audioCodec"].flatMap { $0.isEmpty ? nil : $0 } ?? defaultCodec).lowercased()
        switch (codec, hasRTMP) {
        case ("aac", _) where hasWebRTC && !hasRTMP && !audio.isEmpty:
            throw StreamError("audioCodec aac: WebRTC (WHIP) carries Opus; use opus")
        case ("aac", _) where hasWebRTC && !audio.isEmpty, ("opus", true) where hasWebRTC && !audio.isEmpty:
            throw StreamError(
                "WHIP and RTMP in one broadcast: WebRTC carries Opus and RTMP AAC only, and one "
                    + "audio encode feeds both; stream to them in two broadcasts, or with audio=none")
        case ("aac", _): audioCodec = "aac"
        case ("opus", false): audioCodec = "libopus"
        case ("opus", true):
            throw StreamError("audioCodec opus: RTMP carries AAC only (FLV); use aac, or stream over srt://")
        default: throw StreamError("audioCodec '\(codec)': aac or opus")
        }
        audioBitRate = Int(try number("audioBitRate", 128, 16...512))
        maxQueueSeconds = try number("maxQueue", 3, 0.5...30)
        reconnectFor = try number("reconnectFor", 30, 0...3600)
        segmentDuration = try number("segmentDuration", 2, 0.5...30)
        playlistLength = Int(try number("playlistLength", 6, 2...100))
        // HLS cuts a segment at the first keyframe at or after each multiple of its duration: one on every segment's
        // end, so the interval divides the segment (2 s into 3 s segments: 1.5 s), never before it.
        if destinations.contains(where: \.isHLS) {
            video.keyframeInterval = segmentDuration / (segmentDuration / video.keyframeInterval).rounded(.up)
            video.keyframesNeverEarly = true
        }
        if hasWebRTC {
            // Constrained baseline: what every WebRTC receiver decodes (RFC 7742), Firefox's OpenH264 included.
            video.profile = "baseline"
            iceServers = try Self.iceServers(setupInfo)
        }
        var cameraFields = setupInfo.filter { !$0.value.isEmpty }
        do {
            camera = try CameraLayout.taking(&cameraFields, trackRefusal: "a stream carries one video track")?.corner
        } catch {
            throw StreamError(error.description)
        }
        sharedEncoding = try Self.sharedEncoding(
            setupInfo, video: video, bitRate: videoKbps, destinations: destinations, camera: camera != nil)
        // An HLS origin's playlist is what viewers load, unless another address is given.
        let origin = destinations.first { $0.scheme == .http || $0.scheme == .https }
        publicURL =
            setupInfo["publicURL"].flatMap { $0.isEmpty ? nil : $0 } ?? origin.map { Self.withoutUserInfo($0.url) }
    }

    /// The `stun` and `turn` setup fields: comma-separated stun:HOST[:PORT] and turn(s)://USER:PASSWORD@HOST[:PORT].
    static func iceServers(_ setupInfo: [String: String]) throws(StreamError) -> [ICEServer] {
        var servers: [ICEServer] = []
        for (field, kinds) in [("stun", [ICEServer.Kind.stun]), ("turn", [.turn, .turns])] {
            let values = (setupInfo[field] ?? "").split(separator: ",")
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            for value in values {
                do throws(WebRTCError) {
                    let server = try ICEServer(value)
                    guard kinds.contains(server.kind) else {
                        throw WebRTCError("", "the \(field) field takes \(field) servers")
                    }
                    servers.append(server)
                } catch {
                    throw StreamError("\(field) '\(SecretURL.masked(value))': \(error.reason)")
                }
            }
        }
        return servers
    }

    static func withoutUserInfo(_ url: String) -> String {
        guard let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].firstIndex(of: "@"),
            !url[scheme.upperBound..<at].contains("/")
        else { return url }
        var result = url
        result.removeSubrange(scheme.upperBound...at)
        return result
    }

    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            if (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || "-_.~".utf8.contains(byte)
            {
                out.unicodeScalars.append(UnicodeScalar(byte))
            } else {
                out += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        return out
    }
}
