import CGStreamer
import Foundation

/// One WebRTC send-only peer connection, all of it GStreamer's: webrtcbin (ICE through libnice, DTLS-SRTP, RTP and RTCP
/// in one BUNDLEd transport) fed through appsrc with already encoded H.264 (Annex B access units, payloaded by
/// rtph264pay with packetization-mode 1) and Opus packets. The offer is made once ICE gathering is complete, or
/// after a while with the candidates gathered by then (the others are trickled: `localDescription`); the receiver's
/// RTCP is read as it comes (`ReceiverFeedback`): keyframe requests go to `keyframeRequested` at once, and its reports
/// tell loss, and that it is still there.
public final class WebRTCPeer: @unchecked Sendable {
    public struct Configuration: Sendable {
        /// H.264's profile-level-id as the SDP gives it (the encoder's SPS: "42c01f" is constrained baseline,
        /// level 3.1).
        public var profileLevelID: String
        public var audio: Bool
        public var iceServers: [ICEServer]
        public init(profileLevelID: String, audio: Bool, iceServers: [ICEServer]) {
            self.profileLevelID = profileLevelID
            self.audio = audio
            self.iceServers = iceServers
        }
    }

    /// Called on a GStreamer thread when the receiver asks for a keyframe (PLI or FIR).
    public var keyframeRequested: (@Sendable () -> Void)?
    private let pipeline: UnsafeMutablePointer<GstElement>
    private let webrtc: UnsafeMutablePointer<GstElement>
    private let videoSource: UnsafeMutablePointer<GstElement>
    private let audioSource: UnsafeMutablePointer<GstElement>?
    private let lock = NSLock()
    // Guarded by `lock`.
    private var feedback: ReceiverFeedback
    private var rtt: Double?
    private var lossBase: ReportBlock?
    private var session: UnsafeMutablePointer<GObject>?
    private var rtcpHandler: gulong = 0
    /// Running time (ns) minus media time: the first packet's media time is now.
    private var timeOffset: Int64?
    private var connectedAt: Double?
    /// Since when packets have been going out without a pause of a second (a paused broadcast sends nothing, and
    /// receivers report only on what they receive), and the last one.
    private var sendingSince = 0.0
    private var lastSent = 0.0
    private var closed = false

    public init(_ configuration: Configuration) throws(WebRTCError) {
        try GStreamer.start()
        let videoSSRC = UInt32.random(in: 1...UInt32.max)
        let audioSSRC = UInt32.random(in: 1...UInt32.max)
        feedback = ReceiverFeedback(videoSSRC: videoSSRC, audioSSRC: audioSSRC)
        // MTU 1200: room for TURN and VPN headers on any path.
        var description = """
            webrtcbin name=webrtc bundle-policy=max-bundle \
            appsrc name=video is-live=true format=time max-bytes=4000000 \
              caps=video/x-h264,stream-format=byte-stream,alignment=au \
            ! h264parse ! rtph264pay pt=96 ssrc=\(videoSSRC) mtu=1200 aggregate-mode=zero-latency \
            ! application/x-rtp,media=video,encoding-name=H264,payload=96,clock-rate=90000,\
            packetization-mode=(string)1,profile-level-id=(string)\(configuration.profileLevelID),\
            level-asymmetry-allowed=(string)1 ! webrtc.
            """
        if configuration.audio {
            description += """
                 appsrc name=audio is-live=true format=time max-bytes=400000 \
                  caps=audio/x-opus,channel-mapping-family=0,channels=2,rate=48000 \
                ! rtpopuspay pt=111 ssrc=\(audioSSRC) mtu=1200 \
                ! application/x-rtp,media=audio,encoding-name=OPUS,payload=111,clock-rate=48000,\
                encoding-params=(string)2 ! webrtc.
                """
        }
        var error: UnsafeMutablePointer<GError>?
        let made = gst_parse_launch(description, &error)
        guard let made, error == nil else {
            if let made { gst_object_unref(UnsafeMutableRawPointer(made)) }
            throw WebRTCError("make the WebRTC pipeline", GStreamer.message(error))
        }
        pipeline = made
        let bin = UnsafeMutableRawPointer(made).assumingMemoryBound(to: GstBin.self)
        webrtc = gst_bin_get_by_name(bin, "webrtc")
        videoSource = gst_bin_get_by_name(bin, "video")
        audioSource = configuration.audio ? gst_bin_get_by_name(bin, "audio") : nil
        cgst_webrtc_send_unsynced(webrtc)
        if let stun = configuration.iceServers.first(where: { $0.kind == .stun }) {
            cgst_set_string(webrtc, "stun-server", stun.webrtcbinURI)
        }
        for turn in configuration.iceServers where turn.kind != .stun {
            guard cgst_webrtc_add_turn_server(webrtc, turn.webrtcbinURI) != 0 else {
                close()
                throw WebRTCError("use the TURN server \(turn.displayName)", "webrtcbin does not take it", final: true)
            }
        }
        guard gst_element_set_state(pipeline, GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE else {
            close()
            throw WebRTCError("start the WebRTC pipeline", busError() ?? "GStreamer could not start it")
        }
        // Send-only; video (the first, as linked above) takes retransmission requests (NACK, RTX).
        for index in 0..<(configuration.audio ? 2 : 1) {
            guard let transceiver = cgst_webrtc_transceiver(webrtc, Int32(index)) else { continue }
            let object = UnsafeMutableRawPointer(transceiver)
            cgst_set_int(object, "direction", Int32(GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_SENDONLY.rawValue))
            if index == 0 { cgst_set_boolean(object, "do-nack", 1) }
            gst_object_unref(object)
        }
    }

    deinit { close() }

    /// The SDP offer, once ICE gathering is complete (at most `gatheringTimeout` seconds; then with what it has).
    public func offer(gatheringTimeout: Double) throws(WebRTCError) -> String {
        let reply = try call("create the offer") { cgst_webrtc_create(webrtc, 1, $0) }
        defer { gst_promise_unref(reply.promise) }
        guard let offer = cgst_reply_description(reply.structure, "offer") else {
            throw WebRTCError(
                "create the offer", GStreamer.take(cgst_reply_error(reply.structure)) ?? "webrtcbin made none")
        }
        defer { gst_webrtc_session_description_free(offer) }
        try set(offer, local: true)
        let deadline = Self.now() + gatheringTimeout
        while !gatheringComplete && Self.now() < deadline { usleep(10_000) }
        guard let text = localDescription() else {
            throw WebRTCError("create the offer", "webrtcbin has no local description")
        }
        return text
    }

    /// ICE has gathered all its candidates (those of the STUN and TURN servers too, or given up on them).
    public var gatheringComplete: Bool {
        cgst_get_int(webrtc, "ice-gathering-state") == Int32(GST_WEBRTC_ICE_GATHERING_STATE_COMPLETE.rawValue)
    }

    /// The offer as webrtcbin has it now: with the candidates gathered so far.
    public func localDescription() -> String? {
        guard
            let local = cgst_get_object(webrtc, "local-description")?.assumingMemoryBound(
                to: GstWebRTCSessionDescription.self)
        else { return nil }
        defer { gst_webrtc_session_description_free(local) }
        return GStreamer.take(gst_sdp_message_as_text(local.pointee.sdp))
    }

    /// Takes the endpoint's answer. Its video refused is an error; its audio refused, a warning returned.
    public func accept(answer: String) throws(WebRTCError) -> String? {
        var message: UnsafeMutablePointer<GstSDPMessage>?
        guard gst_sdp_message_new_from_text(answer, &message) == GST_SDP_OK, let message else {
            throw WebRTCError("take the WHIP endpoint's answer", "it is not SDP")
        }
        var warning: String?
        for index in 0..<gst_sdp_message_medias_len(message) {
            guard let media = gst_sdp_message_get_media(message, index), gst_sdp_media_get_port(media) == 0,
                gst_sdp_media_get_attribute_val(media, "bundle-only") == nil
            else { continue }
            let kind = String(cString: gst_sdp_media_get_media(media))
            if kind == "video" {
                gst_sdp_message_free(message)
                throw WebRTCError(
                    "take the WHIP endpoint's answer", "it refused the video (H.264, constrained baseline)", final: true
                )
            }
            warning = "the WHIP endpoint refused the \(kind) (Opus): the stream goes on without it"
        }
        try set(gst_webrtc_session_description_new(GST_WEBRTC_SDP_TYPE_ANSWER, message), local: false, free: true)
        return warning
    }

    /// Waits until ICE and DTLS have connected (at most `timeout` seconds), then listens to the receiver's RTCP.
    public func waitConnected(timeout: Double) throws(WebRTCError) {
        let deadline = Self.now() + timeout
        while true {
            if let error = busError() { throw WebRTCError("connect", error) }
            let state = cgst_get_int(webrtc, "connection-state")
            if state == Int32(GST_WEBRTC_PEER_CONNECTION_STATE_CONNECTED.rawValue) { break }
            if state == Int32(GST_WEBRTC_PEER_CONNECTION_STATE_FAILED.rawValue) {
                throw WebRTCError(
                    "connect", "ICE or DTLS failed: no path to the media server (a firewall? give a turn server)")
            }
            guard Self.now() < deadline else {
                throw WebRTCError(
                    "connect", "ICE and DTLS did not connect within \(Int(timeout)) s (a firewall? give a turn server)")
            }
            usleep(10_000)
        }
        let rtpbin = gst_bin_get_by_name(UnsafeMutableRawPointer(webrtc).assumingMemoryBound(to: GstBin.self), "rtpbin")
        defer { if let rtpbin { gst_object_unref(UnsafeMutableRawPointer(rtpbin)) } }
        lock.lock()
        defer { lock.unlock() }
        connectedAt = Self.now()
        guard let rtpbin, let session = cgst_rtpbin_session(rtpbin, 0) else { return }
        self.session = session
        let callback:
            @convention(c) (UnsafeMutableRawPointer?, UnsafeMutablePointer<GstBuffer>?, UnsafeMutableRawPointer?) ->
                Void = {
                    _, buffer, context in
                    guard let buffer, let context else { return }
                    Unmanaged<WebRTCPeer>.fromOpaque(context).takeUnretainedValue().receivedRTCP(buffer)
                }
        rtcpHandler = cgst_connect(
            session, "on-receiving-rtcp", unsafeBitCast(callback, to: GCallback.self),
            Unmanaged.passUnretained(self).toOpaque())
    }

    private func receivedRTCP(_ buffer: UnsafeMutablePointer<GstBuffer>) {
        lock.lock()
        let keyframe = !closed && feedback.received(buffer, now: Self.now())
        let request = keyframeRequested
        lock.unlock()
        if keyframe { request?() }
    }

    /// Sends an encoded packet: `video` (an H.264 access unit, Annex B) or Opus; `time` its media time (ns), the same
    /// clock for both. The first packet's time is now.
    public func send(_ data: UnsafeRawBufferPointer, time: Int64, video: Bool, keyframe: Bool) throws(WebRTCError) {
        guard let source = video ? videoSource : audioSource, let base = data.baseAddress else { return }
        let now = Self.now()
        lock.lock()
        if timeOffset == nil { timeOffset = Int64(clamping: UInt64(cgst_running_time(pipeline))) - time }
        let pts = max(0, time + (timeOffset ?? 0))
        if now - lastSent > 1 { sendingSince = now }
        lastSent = now
        lock.unlock()
        let buffer = cgst_buffer(base, gsize(data.count), GstClockTime(pts), keyframe ? 1 : 0)
        let flow = gst_app_src_push_buffer(
            UnsafeMutableRawPointer(source).assumingMemoryBound(to: GstAppSrc.self), buffer)
        guard flow == GST_FLOW_OK else {
            throw WebRTCError("send", busError() ?? "GStreamer refused the packet (flow \(flow.rawValue))")
        }
    }

    /// Why the connection no longer carries the stream, or nil while it does: ICE or DTLS failed, GStreamer reported an
    /// error, or the receiver's RTCP stopped while we sent (`silence` seconds, or three of its own report intervals
    /// when longer, up to four times `silence`; three times `silence` before its first).
    public func failure(silence: Double) -> String? {
        if let error = busError() { return error }
        let ice = cgst_get_int(webrtc, "ice-connection-state")
        if ice == Int32(GST_WEBRTC_ICE_CONNECTION_STATE_FAILED.rawValue) {
            return "ICE failed: the media server is no longer reachable"
        }
        if cgst_get_int(webrtc, "connection-state") == Int32(GST_WEBRTC_PEER_CONNECTION_STATE_FAILED.rawValue) {
            return "the connection failed"
        }
        lock.lock()
        defer { lock.unlock() }
        let now = Self.now()
        if let last = feedback.lastHeard {
            let limit = min(max(silence, 3 * feedback.longestGap), 4 * silence)
            if now - max(last, sendingSince) > limit {
                return "the media server sent no RTCP (reports, feedback) for \(Int(now - last)) s: it is gone"
            }
        } else if let connectedAt, now - max(connectedAt, sendingSince) > 3 * silence {
            return "the media server sent no RTCP in \(Int(now - connectedAt)) s since it connected"
        }
        return nil
    }

    /// Waits until the packets handed over have gone out (at most `timeout` seconds).
    public func drain(timeout: Double) {
        let deadline = Self.now() + timeout
        for source in [videoSource, audioSource].compactMap({ $0 }) {
            while cgst_get_uint64(source, "current-level-bytes") > 0 && Self.now() < deadline { usleep(5000) }
        }
    }

    /// The receiver's figures; `lossPercent` over the time since the previous call.
    public func statistics() -> WebRTCStatistics {
        refreshRoundTrip()
        lock.lock()
        defer { lock.unlock() }
        var figures = WebRTCStatistics()
        figures.rttMs = rtt.map { ($0 * 1000 * 100).rounded() / 100 }
        figures.lostPackets = feedback.lostPackets
        if let video = feedback.video {
            figures.lossPercent = (video.loss(since: lossBase) * 1000).rounded() / 10
            lossBase = video
        }
        figures.keyframeRequests = feedback.keyframeRequests
        figures.nacks = feedback.nacks
        figures.receiverKbps = feedback.remb.map { Int(min($0 / 1000, UInt64(Int.max))) }
        return figures
    }

    /// The round-trip time webrtcbin computed from the receiver's reports (its `remote-inbound-rtp` statistics).
    private func refreshRoundTrip() {
        guard let reply = try? call("read the statistics", { cgst_webrtc_get_stats(webrtc, $0) }) else { return }
        defer { gst_promise_unref(reply.promise) }
        guard let stats = reply.structure else { return }
        for index in 0..<gst_structure_n_fields(stats) {
            guard let name = gst_structure_nth_field_name(stats, UInt32(index)),
                let entry = cgst_value_structure(gst_structure_get_value(stats, name)),
                gst_structure_has_name(entry, "remote-inbound-rtp") != 0
            else { continue }
            var seconds = 0.0
            if gst_structure_get_double(entry, "round-trip-time", &seconds) != 0, seconds > 0 {
                lock.lock()
                rtt = seconds
                lock.unlock()
            }
        }
    }

    /// webrtcbin's clocksync elements (one per stream, once it is linked), and how many hold packets back until their
    /// time (none should: see `cgst_clocksync_off`).
    var clockSyncs: (all: Int, waiting: Int) {
        var waiting: guint = 0
        let all = cgst_clocksyncs(webrtc, &waiting)
        return (Int(all), Int(waiting))
    }

    /// Stops everything; GStreamer calls nothing here after it.
    public func close() {
        lock.lock()
        if closed { return lock.unlock() }
        closed = true
        lock.unlock()
        gst_element_set_state(pipeline, GST_STATE_NULL)
        if let session {
            if rtcpHandler != 0 { g_signal_handler_disconnect(session, rtcpHandler) }
            g_object_unref(session)
        }
        for element in [webrtc, videoSource, audioSource, pipeline] {
            if let element { gst_object_unref(UnsafeMutableRawPointer(element)) }
        }
    }

    private struct Reply {
        var promise: UnsafeMutablePointer<GstPromise>
        var structure: UnsafePointer<GstStructure>?
    }

    /// Emits an action signal that answers through a promise, and waits (webrtcbin answers each in a few ms).
    private func call(_ operation: String, _ emit: (UnsafeMutablePointer<GstPromise>) -> Void) throws(WebRTCError)
        -> Reply
    {
        guard let promise = gst_promise_new() else { throw WebRTCError(operation, "out of memory") }
        emit(promise)
        guard gst_promise_wait(promise) == GST_PROMISE_RESULT_REPLIED else {
            gst_promise_unref(promise)
            throw WebRTCError(operation, "webrtcbin did not answer")
        }
        return Reply(promise: promise, structure: gst_promise_get_reply(promise))
    }

    private func set(_ description: UnsafeMutablePointer<GstWebRTCSessionDescription>?, local: Bool, free: Bool = false)
        throws(WebRTCError)
    {
        defer { if free, let description { gst_webrtc_session_description_free(description) } }
        let operation = local ? "use the offer" : "use the WHIP endpoint's answer"
        let reply = try call(operation) { cgst_webrtc_set_description(webrtc, local ? 1 : 0, description, $0) }
        defer { gst_promise_unref(reply.promise) }
        if let error = GStreamer.take(cgst_reply_error(reply.structure)) {
            throw WebRTCError(operation, error, final: !local)
        }
    }

    /// The first error GStreamer posted since the last call, in words.
    private func busError() -> String? {
        guard let bus = gst_element_get_bus(pipeline) else { return nil }
        defer { gst_object_unref(UnsafeMutableRawPointer(bus)) }
        guard let message = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR) else { return nil }
        defer { gst_message_unref(message) }
        var error: UnsafeMutablePointer<GError>?
        var debug: UnsafeMutablePointer<gchar>?
        gst_message_parse_error(message, &error, &debug)
        g_free(debug)
        let source = message.pointee.src.map { String(cString: $0.pointee.name) } ?? "GStreamer"
        return "\(source): \(GStreamer.message(error))"
    }

    public static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
