import BroadcastCore
import BroadcastStream
import Testing

@Suite struct StreamLogicTests {
    typealias Queue = SendQueue<String>

    /// A GOP of `frames` video packets every 33 ms from `start` (the first a keyframe), each with a 20 ms audio packet after it.
    static func gop(_ name: String, start: Int64, frames: Int, bytes: Int = 1000) -> [Queue.Entry] {
        (0..<frames).flatMap { i -> [Queue.Entry] in
            let t = start + Int64(i) * 33_000_000
            return [
                .init(isVideo: true, isKeyframe: i == 0, bytes: bytes, time: t, payload: "\(name)v\(i)"),
                .init(isVideo: false, isKeyframe: false, bytes: 100, time: t + 1, payload: "\(name)a\(i)"),
            ]
        }
    }

    @Test func anOverflowingQueueDropsTheOldestWholeGOP() {
        var queue = Queue(maxBytes: 1 << 30, maxDuration: 1_000_000_000)
        for entry in Self.gop("A", start: 0, frames: 20) + Self.gop("B", start: 660_000_000, frames: 20) {
            queue.push(entry)
        }
        // A (0.66 s) and B reach 1.29 s: A goes, video and audio, and B is kept whole from its keyframe.
        #expect(queue.drops == 1 && queue.droppedVideoFrames == 20 && queue.droppedAudioPackets == 20)
        #expect(queue.pop()?.payload == "Bv0")
        #expect(queue.duration <= 1_000_000_000)
        #expect(!queue.waitingForKeyframe)
    }

    @Test func withNoLaterKeyframeVideoWaitsForTheNextOne() {
        var queue = Queue(maxBytes: 30_000, maxDuration: 10_000_000_000)
        for entry in Self.gop("A", start: 0, frames: 40) { queue.push(entry) }
        // 40 KB of one GOP in a 30 KB queue: all its video goes, and frames until a keyframe are refused.
        #expect(queue.waitingForKeyframe)
        #expect(queue.droppedVideoFrames > 0)
        let late = queue.push(
            .init(isVideo: true, isKeyframe: false, bytes: 1000, time: 2_000_000_000, payload: "late"))
        let key = queue.push(.init(isVideo: true, isKeyframe: true, bytes: 1000, time: 2_033_000_000, payload: "key"))
        #expect(!late && key)
        var sent: [String] = []
        while let entry = queue.pop() { sent.append(entry.payload) }
        let firstVideo = sent.first { $0.contains("v") || $0 == "key" }
        #expect(firstVideo == "key", "video resumed with \(String(describing: firstVideo)): \(sent)")
        #expect(queue.bytes == 0 && queue.isEmpty)
    }

    @Test func afterAReconnectionTheFirstVideoSentIsAKeyframe() {
        var queue = Queue(maxBytes: 1 << 30, maxDuration: 10_000_000_000)
        for entry in Self.gop("A", start: 0, frames: 5) + Self.gop("B", start: 165_000_000, frames: 5) {
            queue.push(entry)
        }
        _ = queue.pop()
        _ = queue.pop()
        queue.restartAtKeyframe()
        #expect(queue.pop()?.payload == "Bv0")
        // Nothing queued but the middle of a GOP: wait for the next keyframe.
        var middle = Queue(maxBytes: 1 << 30, maxDuration: 10_000_000_000)
        for entry in Self.gop("C", start: 0, frames: 5) { middle.push(entry) }
        _ = middle.pop()
        middle.restartAtKeyframe()
        #expect(middle.waitingForKeyframe)
        let accepted = middle.push(.init(isVideo: true, isKeyframe: false, bytes: 1, time: 1_000_000_000, payload: "p"))
        #expect(!accepted)
    }

    @Test func theBitRateFollowsTheLink() {
        var rate = BitRateController(target: 4000)
        let s: UInt64 = 1_000_000_000
        #expect(rate.update(fill: 0.7, dropped: false, now: 10 * s) == 3000)
        #expect(rate.update(fill: 0.7, dropped: false, now: 11 * s) == nil, "at most every 2 s")
        #expect(rate.update(fill: 0.2, dropped: true, now: 12 * s) == 2250)
        for t in 13...30 { _ = rate.update(fill: 0.9, dropped: true, now: UInt64(t) * s) }
        #expect(rate.current == 1000, "no lower than a quarter of the target")
        // Calm for 5 s: a tenth back up, every 5 s, to the target at most.
        #expect(rate.update(fill: 0.05, dropped: false, now: 40 * s) == nil)
        #expect(rate.update(fill: 0.05, dropped: false, now: 45 * s) == 1100)
        #expect(rate.update(fill: 0.3, dropped: false, now: 48 * s) == nil)
        var t: UInt64 = 49
        while rate.current < 4000 && t < 2000 {
            _ = rate.update(fill: 0, dropped: false, now: t * s)
            t += 1
        }
        #expect(rate.current == 4000)
    }

    @Test func theBitRateStaysUnderTheReceiversEstimate() {
        var rate = BitRateController(target: 4000)
        let s: UInt64 = 1_000_000_000
        // A REMB under the rate brings it down at once, however calm the queue; at most once a second.
        #expect(rate.update(fill: 0, dropped: false, estimate: 2500, now: 10 * s) == 2500)
        #expect(rate.update(fill: 0, dropped: false, estimate: 2000, now: 10 * s + s / 2) == nil)
        #expect(rate.update(fill: 0, dropped: false, estimate: 2000, now: 11 * s) == 2000)
        // No lower than the minimum, whatever the estimate.
        #expect(rate.update(fill: 0, dropped: false, estimate: 300, now: 12 * s) == 1000)
        // Calm, it climbs back a tenth every 5 s, but never past the estimate.
        var t: UInt64 = 13
        while t < 200 {
            _ = rate.update(fill: 0, dropped: false, estimate: 1500, now: t * s)
            t += 1
        }
        #expect(rate.current == 1500)
        // The estimate gone (or raised), up to the target again.
        while t < 400 {
            _ = rate.update(fill: 0, dropped: false, now: t * s)
            t += 1
        }
        #expect(rate.current == 4000)
    }

    @Test func urlsKeysAndCodecs() throws {
        let srt = try StreamOptions(url: "srt://ingest.example:9000", setupInfo: ["key": "live/abc 1"])
        #expect(
            srt.url == "srt://ingest.example:9000?streamid=live%2Fabc%201" && srt.container == .mpegts
                && srt.audioCodec == "libopus")
        #expect(srt.displayURL == "srt://ingest.example:9000")
        let own = try StreamOptions(
            url: "srt://h:1?latency=200000&streamid=mine&passphrase=p4ss", setupInfo: ["key": "other"])
        #expect(own.url == "srt://h:1?latency=200000&streamid=mine&passphrase=p4ss")
        #expect(own.displayURL == "srt://h:1?latency=200000&streamid=***&passphrase=***")
        let rtmp = try StreamOptions(
            url: "rtmp://a.rtmp.youtube.com/live2", setupInfo: ["key": "xxxx-yyyy", "videoBitRate": "6000"])
        #expect(
            rtmp.url == "rtmp://a.rtmp.youtube.com/live2/xxxx-yyyy"
                && rtmp.displayURL == "rtmp://a.rtmp.youtube.com/live2")
        #expect(rtmp.container == .flv && rtmp.audioCodec == "aac" && rtmp.video.bitRate == 6000)
        #expect(SecretURL.masked("rtmps://user:pw@host/app") == "rtmps://***@host/app")
        #expect(throws: StreamError("audioCodec opus: RTMP carries AAC only (FLV); use aac, or stream over srt://")) {
            try StreamOptions(url: "rtmp://h/app", setupInfo: ["audioCodec": "opus"])
        }
        #expect(
            throws: StreamError(
                "'ftp://h/x' is not a stream URL: give srt://HOST:PORT[?streamid=...], rtmp[s]://HOST/APP, "
                    + "hls:///DIR/NAME.m3u8, http[s]://HOST/PATH/NAME.m3u8 or whip[s]://HOST/PATH")
        ) {
            try StreamOptions(url: "ftp://h/x", setupInfo: [:])
        }
        #expect(throws: StreamError("videoBitRate 'lots': a number from 100.0 to 100000.0")) {
            try StreamOptions(url: "srt://h:1", setupInfo: ["videoBitRate": "lots"])
        }
        #expect(try StreamOptions(url: "srt://h:1", setupInfo: ["audio": "mic"]).audio == [.audioMic])
        #expect(try StreamOptions(url: "srt://h:1", setupInfo: ["codec": "hevc"]).video.codec == .hevc)
        #expect(
            throws: StreamError(
                "codec hevc: RTMP carries H.264 only (FLV as libavformat 5.1 writes it has no HEVC); use h264, or stream over srt://"
            )
        ) {
            try StreamOptions(url: "rtmp://h/app", setupInfo: ["codec": "hevc"])
        }
        #expect(
            throws: StreamError(
                "codec av1: libavformat 5.1 has no AV1 in MPEG-TS (it would go out as private data no receiver decodes); use h264 or hevc"
            )
        ) {
            try StreamOptions(url: "srt://h:1", setupInfo: ["codec": "av1"])
        }
    }

    @Test func oneEncodeToManyDestinations() throws {
        let options = try StreamOptions(
            url: "rtmp://a.rtmp.youtube.com/live2",
            setupInfo: [
                "key": "yt-key",
                "also":
                    " srt://backup.example:9000?streamid=s3cret , rtmp://live.twitch.tv/app/tw-key,hls:///var/www/live/index.m3u8",
            ])
        #expect(
            options.destinations.map(\.url) == [
                "rtmp://a.rtmp.youtube.com/live2/yt-key", "srt://backup.example:9000?streamid=s3cret",
                "rtmp://live.twitch.tv/app/tw-key", "/var/www/live/index.m3u8",
            ])
        // The keys in `also` are never shown: SRT's streamid, and what follows an RTMP URL's application.
        #expect(
            options.destinations.map(\.displayURL) == [
                "rtmp://a.rtmp.youtube.com/live2", "srt://backup.example:9000?streamid=***",
                "rtmp://live.twitch.tv/app/***", "hls:///var/www/live/index.m3u8",
            ])
        #expect(options.destinations.map(\.container) == [.flv, .mpegts, .flv, .hls])
        // One audio encoder for all: AAC as soon as one destination is RTMP or HLS; global headers for FLV and fMP4.
        #expect(options.audioCodec == "aac" && options.globalHeader)
        let srtOnly = try StreamOptions(url: "srt://a:1", setupInfo: ["also": "srt://b:2"])
        #expect(srtOnly.audioCodec == "libopus" && !srtOnly.globalHeader && srtOnly.destinations.count == 2)
        #expect(throws: StreamError("audioCodec opus: RTMP carries AAC only (FLV); use aac, or stream over srt://")) {
            try StreamOptions(url: "srt://a:1", setupInfo: ["also": "rtmp://h/app", "audioCodec": "opus"])
        }
        #expect(
            throws: StreamError(
                "codec hevc: RTMP carries H.264 only (FLV as libavformat 5.1 writes it has no HEVC); use h264, or stream over srt://"
            )
        ) {
            try StreamOptions(url: "srt://a:1", setupInfo: ["also": "rtmp://h/app/k", "codec": "hevc"])
        }
        #expect(throws: StreamError("also: srt://a:1 is given twice")) {
            try StreamOptions(url: "srt://a:1", setupInfo: ["also": "srt://a:1"])
        }
        let many = (1...5).map { "srt://h:\($0)" }.joined(separator: ",")
        #expect(throws: StreamError("also: at most 4 more destinations (one encode feeds them all)")) {
            try StreamOptions(url: "srt://a:1", setupInfo: ["also": many])
        }
    }

    @Test func hlsToADirectoryOrAnOrigin() throws {
        let directory = try StreamOptions(
            url: "hls:///srv/live/index.m3u8", setupInfo: ["keyframeInterval": "4", "segmentDuration": "1"])
        #expect(directory.url == "/srv/live/index.m3u8" && directory.container == .hls && directory.audioCodec == "aac")
        #expect(directory.publicURL == nil && directory.playlistLength == 6)
        #expect(directory.video.keyframeInterval == 1, "a keyframe at least every segment")
        let longer = try StreamOptions(url: "hls:///srv/live/index.m3u8", setupInfo: ["segmentDuration": "3"])
        #expect(longer.video.keyframeInterval == 1.5, "a keyframe on every segment's end: the 2 s interval divides it")
        let srt = try StreamOptions(url: "srt://a:1", setupInfo: [:])
        #expect(
            longer.video.keyframesNeverEarly && !srt.video.keyframesNeverEarly,
            "HLS cuts at keyframes at or after its marks")
        let origin = try StreamOptions(url: "https://me:pw@origin.example/live/index.m3u8", setupInfo: [:])
        #expect(
            origin.url == "https://me:pw@origin.example/live/index.m3u8"
                && origin.displayURL == "https://***@origin.example/live/index.m3u8")
        #expect(
            origin.publicURL == "https://origin.example/live/index.m3u8", "the origin's playlist is what viewers load")
        #expect(
            try StreamOptions(url: "http://o/i.m3u8", setupInfo: ["publicURL": "https://cdn/i.m3u8"]).publicURL
                == "https://cdn/i.m3u8")
        #expect(throws: StreamError("'http://o/live': an HLS URL names its playlist (…/index.m3u8)")) {
            try StreamOptions(url: "http://o/live", setupInfo: [:])
        }
        #expect(throws: StreamError("'hls://live/index.m3u8': hls:// takes an absolute path, hls:///DIR/NAME.m3u8")) {
            try StreamOptions(url: "hls://live/index.m3u8", setupInfo: [:])
        }
        #expect(throws: StreamError("codec hevc: HLS is sent as H.264, which every player takes; use h264")) {
            try StreamOptions(url: "hls:///a/i.m3u8", setupInfo: ["codec": "hevc"])
        }
        #expect(throws: StreamError("playlistLength '1': a number from 2.0 to 100.0")) {
            try StreamOptions(url: "hls:///a/i.m3u8", setupInfo: ["playlistLength": "1"])
        }
    }

    @Test func theBitRateFollowsTheHealthiestDestination() {
        typealias State = SenderGroup.DestinationState
        let up = State(failed: false, connected: true)
        let away = State(failed: false, connected: false)
        let failed = State(failed: true, connected: false)
        // A slow destination (queue 90 % full) does not pull the rate down while another keeps up.
        #expect(SenderGroup.healthiest([up, up], fills: [0.9, 0.05]) == 1)
        // One that is away (its queue overflowing) neither: the connected one is followed.
        #expect(SenderGroup.healthiest([away, up], fills: [1.0, 0.6]) == 1)
        // With none connected, the emptiest: a single destination that is away still lowers the rate.
        #expect(SenderGroup.healthiest([away], fills: [0.8]) == 0)
        #expect(SenderGroup.healthiest([failed, away], fills: [0, 0.7]) == 1)
        #expect(SenderGroup.healthiest([failed, failed], fills: [0, 0]) == nil)
    }
}
