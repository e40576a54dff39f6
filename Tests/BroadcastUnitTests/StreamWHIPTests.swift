import BroadcastCore
import CGStreamer
import Foundation
import Testing

@testable import BroadcastStream
@testable import BroadcastWebRTC

/// The logic of the stream handler's WHIP destinations: URLs and tokens, what the endpoint's answers mean, its ICE
/// servers, the receiver's RTCP, and how loss moves the bit rate.
@Suite struct StreamWHIPTests {
    @Test func whipURLsTokensAndSetupFields() throws {
        #expect(try WHIP.endpoint("whips://live.example/whip/abc") == ("https://live.example/whip/abc", nil))
        #expect(try WHIP.endpoint("whip://127.0.0.1:8889/cam/whip?x=1") == ("http://127.0.0.1:8889/cam/whip?x=1", nil))
        // A token in the user info (for `also`) is taken out of the URL: it goes in the Authorization header only.
        #expect(try WHIP.endpoint("WHIPS://t%40ken@h:8443/p") == ("https://h:8443/p", "t@ken"))
        #expect(throws: WebRTCError("WHIP URL whips:///p", "it names no host")) { try WHIP.endpoint("whips:///p") }

        let main = try StreamOptions(
            url: "whips://ingest.example/whip/1", setupInfo: ["key": "s3cret", "also": "srt://b:9"])
        #expect(
            main.primary.url == "https://ingest.example/whip/1" && main.primary.token == "s3cret"
                && main.primary.isWebRTC)
        #expect(main.primary.container == nil && main.primary.format == "WebRTC")
        // Opus (WebRTC carries nothing else), constrained baseline, parameter sets where the encoder can say them.
        #expect(main.audioCodec == "libopus" && main.video.profile == "baseline" && main.globalHeader)
        let also = try StreamOptions(url: "srt://a:1", setupInfo: ["also": "whip://tok3n@127.0.0.1:8080/whip"])
        #expect(
            also.destinations[1].token == "tok3n" && also.destinations[1].displayURL == "whip://***@127.0.0.1:8080/whip"
        )
        #expect(also.destinations[1].url == "http://127.0.0.1:8080/whip" && also.video.profile == "baseline")
        #expect(try StreamOptions(url: "srt://a:1", setupInfo: [:]).video.profile == nil, "no WHIP: x264 chooses")
        #expect(
            try StreamOptions(url: "whip://h/w", setupInfo: ["also": "hls:///tmp/x/i.m3u8"]).audioCodec == "libopus")

        #expect(throws: StreamError("codec hevc: WebRTC (WHIP) is sent as H.264, which every browser takes; use h264"))
        {
            try StreamOptions(url: "whips://h/w", setupInfo: ["codec": "hevc"])
        }
        #expect(throws: StreamError("audioCodec aac: WebRTC (WHIP) carries Opus; use opus")) {
            try StreamOptions(url: "whips://h/w", setupInfo: ["audioCodec": "aac"])
        }
        #expect(
            throws: StreamError(
                "WHIP and RTMP in one broadcast: WebRTC carries Opus and RTMP AAC only, and one audio encode "
                    + "feeds both; stream to them in two broadcasts, or with audio=none")
        ) {
            try StreamOptions(url: "whips://h/w", setupInfo: ["also": "rtmp://r/app/k"])
        }
        #expect(
            try StreamOptions(url: "whips://h/w", setupInfo: ["also": "rtmp://r/app/k", "audio": "none"]).destinations
                .count == 2)

        let ice = try StreamOptions(
            url: "whips://h/w",
            setupInfo: [
                "stun": "stun:stun.example.net, stun:other:19302",
                "turn": "turns://u:p%2Fw@turn.example:443?transport=tcp",
            ]
        ).iceServers
        #expect(
            ice.map(\.webrtcbinURI) == [
                "stun://stun.example.net:3478", "stun://other:19302",
                "turns://u:p%2Fw@turn.example:443?transport=tcp",
            ])
        #expect(ice[2].displayName == "turns:turn.example:443?transport=tcp", "no credentials in logs")
        #expect(throws: StreamError("turn 'turn:relay.example': a TURN server needs a username and a password")) {
            try StreamOptions(url: "whips://h/w", setupInfo: ["turn": "turn:relay.example"])
        }
        #expect(throws: StreamError("stun 'turn://***@t': the stun field takes stun servers")) {
            try StreamOptions(url: "whips://h/w", setupInfo: ["stun": "turn://u:p@t"])
        }
    }

    @Test func theEndpointsAnswersInTheUsersWords() {
        func refusal(_ status: Int, token: Bool = true, before: Bool = false) -> WebRTCError {
            WHIP.refusal(status: status, body: "", url: "whips://h/w", hasToken: token, connectedBefore: before)
        }
        #expect(
            refusal(401).reason == "the WHIP endpoint refused the token (HTTP 401): check the key setup field"
                && refusal(401).final)
        #expect(
            refusal(403, token: false).reason.hasPrefix("the WHIP endpoint wants a token (HTTP 403)")
                && refusal(403).final)
        #expect(refusal(404).reason.hasPrefix("there is no WHIP endpoint at this URL") && refusal(404).final)
        // 409: another stream holds it, or (after this one was live) the session just lost, which it lets go of.
        #expect(refusal(409).final && !refusal(409, before: true).final)
        #expect(refusal(406).final && refusal(415).final)
        #expect(
            !refusal(503).final && !refusal(429).final && refusal(503).reason == "the WHIP endpoint answered HTTP 503")
        let said = WHIP.refusal(
            status: 400, body: WHIP.excerpt(Array("no H264\r\nat all\u{1b}[31m".utf8)), url: "u",
            hasToken: false, connectedBefore: false)
        #expect(said.reason.hasSuffix("(it said: no H264  at all [31m)"), "\(said.reason)")
        #expect(WHIP.excerpt(Array(repeating: UInt8(ascii: "x"), count: 500)).count == 201)

        // The session's URL, after redirects: relative to where the offer was finally POSTed.
        #expect(
            WHIP.resolve("/whip/session/7", against: "http://127.0.0.1:9/redirect")
                == "http://127.0.0.1:9/whip/session/7")
        #expect(WHIP.resolve("session/2", against: "https://h/whip/endpoint") == "https://h/whip/session/2")
        #expect(WHIP.resolve("https://other/s/1", against: "https://h/w") == "https://other/s/1")
        #expect(
            WHIP.resolve("ftp://x/y", against: "https://h/w") == nil && WHIP.resolve("", against: "https://h/w") == nil)
    }

    /// RFC 9725's example of ICE servers in Link headers, one header each or several in one, parameters in any order.
    @Test func iceServersFromLinkHeaders() throws {
        let servers = WHIP.iceServers(fromLinks: [
            "<stun:stun.example.net>; rel=\"ice-server\"",
            "<turn:turn.example.net?transport=udp>; rel=\"ice-server\"; username=\"user\"; credential=\"myPassword\"; "
                + "credential-type=\"password\"",
            "<turns:turn.example.net?transport=tcp>; rel=ice-server; credential=\"p;a,s\\\"s\"; username=\"user\", "
                + "<https://example.net/help>; rel=\"help\", <stun:[2001:db8::1]:3479>; rel=\"ice-server\"",
        ])
        #expect(
            servers.map(\.webrtcbinURI) == [
                "stun://stun.example.net:3478", "turn://user:myPassword@turn.example.net:3478?transport=udp",
                "turns://user:p%3Ba%2Cs%22s@turn.example.net:5349?transport=tcp", "stun://[2001:db8::1]:3479",
            ])
        #expect(servers[2].credential == "p;a,s\"s")
        #expect(
            WHIP.iceServers(fromLinks: ["<turn:t.example>; rel=\"ice-server\""]).isEmpty,
            "a TURN server without credentials")
        #expect(WHIP.iceServers(fromLinks: ["garbage", "<", "<stun:x>; rel"]).isEmpty)
        #expect(throws: WebRTCError("ICE server stun:h:99999", "its port is not a number from 1 to 65535")) {
            try ICEServer("stun:h:99999")
        }
    }

    @Test func h264ParameterSetsAndProfile() {
        let sps: [UInt8] = [0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x1f, 0xda]
        let pps: [UInt8] = [0, 0, 1, 0x68, 0xce]
        let idr: [UInt8] = [0, 0, 0, 1, 0x65, 0x88, 0x80]
        let slice: [UInt8] = [0, 0, 1, 0x41, 0x9a]
        #expect(AnnexB.profileLevelID(sps + pps) == "42c01f")
        #expect(AnnexB.profileLevelID(pps) == nil && AnnexB.profileLevelID([]) == nil)
        #expect(AnnexB.nalUnits((sps + pps + idr)[...]).map { $0.first } == [0x67, 0x68, 0x65])
        #expect((sps + pps + idr).withUnsafeBytes(AnnexB.hasParameterSets))
        #expect(
            !idr.withUnsafeBytes(AnnexB.hasParameterSets) && !(slice + sps).withUnsafeBytes(AnnexB.hasParameterSets))
        // An SEI before the SPS is looked past.
        #expect(([0, 0, 1, 0x06, 5] + sps + idr).withUnsafeBytes(AnnexB.hasParameterSets))
    }

    /// Receiver reports, keyframe requests and bandwidth estimates, in RTCP that GStreamer's own RTCP writer makes.
    @Test func theReceiversRTCP() throws {
        try GStreamer.start()
        var gathered = ReceiverFeedback(videoSSRC: 1111, audioSSRC: 2222)
        func rtcp(_ build: (UnsafeMutablePointer<GstRTCPBuffer>) -> Void) -> UnsafeMutablePointer<GstBuffer> {
            let buffer = gst_rtcp_buffer_new(1400)!
            var rtcp = GstRTCPBuffer()
            _ = gst_rtcp_buffer_map(buffer, GstMapFlags(GST_MAP_READ.rawValue | GST_MAP_WRITE.rawValue), &rtcp)
            build(&rtcp)
            _ = gst_rtcp_buffer_unmap(&rtcp)
            return buffer
        }
        func payloadFeedback(_ type: GstRTCPFBType, media: UInt32, fci: [UInt8]) -> UnsafeMutablePointer<GstBuffer> {
            rtcp { buffer in
                var packet = GstRTCPPacket()
                _ = gst_rtcp_buffer_add_packet(buffer, GST_RTCP_TYPE_PSFB, &packet)
                gst_rtcp_packet_fb_set_type(&packet, type)
                gst_rtcp_packet_fb_set_sender_ssrc(&packet, 99)
                gst_rtcp_packet_fb_set_media_ssrc(&packet, media)
                _ = gst_rtcp_packet_fb_set_fci_length(&packet, UInt16(fci.count / 4))
                if let target = gst_rtcp_packet_fb_get_fci(&packet) { target.update(from: fci, count: fci.count) }
            }
        }
        func report(video: (Int32, UInt32), audio: (Int32, UInt32)) -> UnsafeMutablePointer<GstBuffer> {
            rtcp { buffer in
                var packet = GstRTCPPacket()
                _ = gst_rtcp_buffer_add_packet(buffer, GST_RTCP_TYPE_RR, &packet)
                gst_rtcp_packet_rr_set_ssrc(&packet, 99)
                _ = gst_rtcp_packet_add_rb(&packet, 1111, 64, video.0, video.1, 0, 0, 0)
                _ = gst_rtcp_packet_add_rb(&packet, 2222, 0, audio.0, audio.1, 0, 0, 0)
                _ = gst_rtcp_packet_add_rb(&packet, 3333, 255, 1000, 9, 0, 0, 0)  // not ours
            }
        }
        var buffers: [UnsafeMutablePointer<GstBuffer>] = []
        defer {
            for buffer in buffers {
                gst_mini_object_unref(UnsafeMutableRawPointer(buffer).assumingMemoryBound(to: GstMiniObject.self))
            }
        }
        func received(_ buffer: UnsafeMutablePointer<GstBuffer>, at now: Double) -> Bool {
            buffers.append(buffer)
            return gathered.received(buffer, now: now)
        }
        #expect(!received(report(video: (10, 1000), audio: (2, 500)), at: 10))
        #expect(gathered.lastHeard == 10 && gathered.lostPackets == 12 && gathered.video?.highestSequence == 1000)
        #expect(!received(report(video: (30, 1100), audio: (2, 550)), at: 11.5))
        #expect(
            gathered.longestGap == 1.5
                && gathered.video?.loss(
                    since: ReportBlock(
                        fractionLost: 0, cumulativeLost: 10,
                        highestSequence: 1000)) == 0.2
        )
        // PLI for our video asks for a keyframe; for another stream it does not; FIR names the SSRC in its entries.
        #expect(received(payloadFeedback(GST_RTCP_PSFB_TYPE_PLI, media: 1111, fci: []), at: 12))
        // Feedback alone is a sign of life (under loss, early feedback can hold the regular reports back for
        // seconds: the sender took the endpoint for gone and reconnected); about a stream not ours, it is not.
        #expect(gathered.lastHeard == 12 && gathered.longestGap == 1.5)
        #expect(!received(payloadFeedback(GST_RTCP_PSFB_TYPE_PLI, media: 3333, fci: []), at: 12.5))
        #expect(gathered.lastHeard == 12)
        #expect(!received(payloadFeedback(GST_RTCP_PSFB_TYPE_PLI, media: 2222, fci: []), at: 12))
        #expect(
            received(
                payloadFeedback(
                    GST_RTCP_PSFB_TYPE_FIR, media: 0,
                    fci: [0, 0, 0x08, 0xae, 7, 0, 0, 0] + [0, 0, 0x04, 0x57, 3, 0, 0, 0]),
                at: 12))
        #expect(
            !received(payloadFeedback(GST_RTCP_PSFB_TYPE_FIR, media: 0, fci: [0, 0, 0x08, 0xaf, 7, 0, 0, 0]), at: 12))
        #expect(gathered.keyframeRequests == 2)
        // REMB: 250000 × 2^2 = 1 Mbit/s.
        #expect(
            !received(
                payloadFeedback(
                    GST_RTCP_PSFB_TYPE_AFB, media: 0,
                    fci: Array("REMB".utf8) + [1, 0x0b, 0xd0, 0x90] + [0, 0, 0x04, 0x57]),
                at: 12))
        #expect(gathered.remb == 1_000_000)
        #expect(ReceiverFeedback.remb(Array("ABCD".utf8) + [1, 0x0b, 0xd0, 0x90]) == nil)
        #expect(ReportBlock(fractionLost: 64, cumulativeLost: 5, highestSequence: 9).loss(since: nil) == 0.25)
    }

    /// Trickled candidates: those of the first (bundled) media section not sent yet, with what names the session.
    @Test func trickleFragments() {
        let sdp = [
            "v=0", "o=- 1 0 IN IP4 0.0.0.0", "s=-", "t=0 0", "a=ice-options:trickle", "a=group:BUNDLE video0 audio1",
            "m=video 9 UDP/TLS/RTP/SAVPF 96", "a=ice-ufrag:U1", "a=ice-pwd:P1", "a=mid:video0",
            "a=candidate:1 1 UDP 2015363327 192.0.2.2 44818 typ host",
            "a=candidate:2 1 UDP 1677729535 203.0.113.7 50000 typ srflx raddr 192.0.2.2 rport 44818",
            "m=audio 0 UDP/TLS/RTP/SAVPF 111", "a=ice-ufrag:U1", "a=ice-pwd:P1", "a=mid:audio1", "a=bundle-only",
            "a=candidate:9 1 UDP 1 198.51.100.1 9 typ host",
        ].joined(separator: "\r\n")
        let host = "a=candidate:1 1 UDP 2015363327 192.0.2.2 44818 typ host"
        let reflexive = "a=candidate:2 1 UDP 1677729535 203.0.113.7 50000 typ srflx raddr 192.0.2.2 rport 44818"
        #expect(WHIP.candidates(sdp) == [host, reflexive])
        let fragment = WHIP.trickleFragment(sdp, sent: [host], complete: false)
        #expect(fragment?.candidates == [reflexive])
        #expect(
            fragment?.fragment
                == [
                    "a=group:BUNDLE video0 audio1", "m=video 9 UDP/TLS/RTP/SAVPF 96", "a=ice-ufrag:U1", "a=ice-pwd:P1",
                    "a=mid:video0", reflexive, "",
                ].joined(separator: "\r\n"))
        #expect(WHIP.trickleFragment(sdp, sent: [host, reflexive], complete: false) == nil, "nothing new")
        let end = WHIP.trickleFragment(sdp, sent: [host, reflexive], complete: true)
        #expect(end?.candidates == [] && end?.fragment.hasSuffix("a=mid:video0\r\na=end-of-candidates\r\n") == true)
        #expect(WHIP.trickleFragment("v=0\r\n", sent: [], complete: true) == nil, "no media section")
        // What the endpoint's answer to a PATCH says: 405, 422 (it takes ICE restarts only) and 501 refuse trickling.
        #expect(
            [204, 200, 405, 422, 501, 412, 500].map(TrickleOutcome.init(status:)) == [
                .taken, .taken, .refused(status: 405), .refused(status: 422), .refused(status: 501),
                .failed("HTTP 412"),
                .failed("HTTP 500"),
            ])
    }

    /// webrtcbin (1.22) puts a clocksync before each stream that holds every packet until its timestamp: up to 70 ms
    /// more latency, depending on which stream's packet came first. A WHIP stream sends each as it is handed over.
    @Test func packetsGoOutAsTheyAreHandedOver() throws {
        let peer = try WebRTCPeer(.init(profileLevelID: "42e01f", audio: true, iceServers: []))
        defer { peer.close() }
        _ = try peer.accept(answer: try Self.answer(peer.offer(gatheringTimeout: 2)))
        // Both streams are linked once the answer is taken.
        let deadline = WebRTCPeer.now() + 5
        while peer.clockSyncs.all < 2 && WebRTCPeer.now() < deadline { usleep(10_000) }
        #expect(peer.clockSyncs.all == 2)
        #expect(peer.clockSyncs.waiting == 0)
    }

    /// A receive-only webrtcbin's answer to `offer`.
    static func answer(_ offer: String) throws -> String {
        var error: UnsafeMutablePointer<GError>?
        let webrtc = try #require(gst_parse_launch("webrtcbin bundle-policy=max-bundle", &error))
        defer {
            gst_element_set_state(webrtc, GST_STATE_NULL)
            gst_object_unref(UnsafeMutableRawPointer(webrtc))
        }
        gst_element_set_state(webrtc, GST_STATE_PLAYING)
        func waited(_ emit: (UnsafeMutablePointer<GstPromise>) -> Void) -> UnsafeMutablePointer<GstPromise> {
            let promise = gst_promise_new()!
            emit(promise)
            _ = gst_promise_wait(promise)
            return promise
        }
        var message: UnsafeMutablePointer<GstSDPMessage>?
        #expect(gst_sdp_message_new_from_text(offer, &message) == GST_SDP_OK)
        let remote = gst_webrtc_session_description_new(GST_WEBRTC_SDP_TYPE_OFFER, message)
        defer { gst_webrtc_session_description_free(remote) }
        gst_promise_unref(waited { cgst_webrtc_set_description(webrtc, 0, remote, $0) })
        let reply = waited { cgst_webrtc_create(webrtc, 0, $0) }
        defer { gst_promise_unref(reply) }
        let answer = try #require(cgst_reply_description(gst_promise_get_reply(reply), "answer"))
        defer { gst_webrtc_session_description_free(answer) }
        gst_promise_unref(waited { cgst_webrtc_set_description(webrtc, 1, answer, $0) })
        return try #require(GStreamer.take(gst_sdp_message_as_text(answer.pointee.sdp)))
    }

    @Test func lossFromTheReceiverLowersTheBitRate() {
        var rate = BitRateController(target: 4000)
        let s: UInt64 = 1_000_000_000
        #expect(rate.update(fill: 0, dropped: false, loss: 0.05, now: 10 * s) == nil, "5 % is no reason")
        #expect(rate.update(fill: 0, dropped: false, loss: 0.2, now: 11 * s) == 3000, "by a quarter at least")
        #expect(rate.update(fill: 0, dropped: false, loss: 0.9, now: 12 * s) == nil, "at most every 2 s")
        #expect(
            rate.update(fill: 0, dropped: false, loss: 0.9, now: 13 * s) == 1650, "by half the loss when that is more")
        #expect(rate.update(fill: 0, dropped: false, loss: 0.03, now: 20 * s) == nil)
        #expect(rate.update(fill: 0, dropped: false, loss: 0.03, now: 30 * s) == nil, "3 % is not calm: no way up")
        #expect(rate.update(fill: 0, dropped: false, loss: 0.01, now: 31 * s) == nil)
        #expect(rate.update(fill: 0, dropped: false, loss: 0.01, now: 36 * s) == 1815)
        // The rate follows the least congested destination: a WebRTC one losing 10 % counts as a queue half full.
        #expect(
            SenderGroup.congestion(fill: 0.05, loss: 0.1) == 0.5 && SenderGroup.congestion(fill: 0.7, loss: 0.01) == 0.7
        )
    }

    @Test func aWebRTCReconnectionStartsOnTheNextKeyframe() {
        var queue = SendQueue<String>(maxBytes: 1 << 20, maxDuration: 10_000_000_000)
        for entry in StreamLogicTests.gop("A", start: 0, frames: 3) { queue.push(entry) }
        queue.restartAtNextKeyframe()
        #expect(
            queue.isEmpty && queue.waitingForKeyframe && queue.droppedVideoFrames == 3 && queue.droppedAudioPackets == 3
        )
        let delta = queue.push(.init(isVideo: true, isKeyframe: false, bytes: 1, time: 1, payload: "p"))
        let key = queue.push(.init(isVideo: true, isKeyframe: true, bytes: 1, time: 2, payload: "k"))
        #expect(!delta && key)
    }

    @Test func theReceiversKeyframeRequestsAreServedAtMostTwiceASecond() {
        var requests = ReceiverKeyframes()
        var served: [Bool] = [requests.take(now: 0)]
        requests.ask()
        served += [requests.take(now: 1_000), requests.take(now: 2_000)]
        // Asked again and again on a lossy link: kept, and served once the spacing has passed.
        for time in stride(from: UInt64(100_000_000), to: 500_000_000, by: 100_000_000) {
            requests.ask()
            served.append(requests.take(now: time))
        }
        served += [requests.take(now: 500_001_000), requests.take(now: 900_000_000)]
        // A request after a quiet spell is served at the next frame.
        requests.ask()
        served.append(requests.take(now: 5_000_000_000))
        #expect(served == [false, true, false, false, false, false, false, true, false, true])
    }
}
