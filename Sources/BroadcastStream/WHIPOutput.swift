import BroadcastEncoding
import BroadcastMedia
import BroadcastWebRTC
import Foundation
import Logging

/// What a `Sender` sends through once connected: a libavformat muxer, or a WHIP session.
protocol StreamOutput: PacketSink {
    /// Sends what is left and ends the stream.
    func finish() throws(MediaError)
    /// Lets go of a connection that failed (a WHIP session is DELETEd, so that the endpoint frees it).
    func abandon()
}

extension Muxer: StreamOutput {
    func abandon() {}
}

/// A WHIP destination's connection (RFC 9725): a `WebRTCPeer` makes the offer once ICE gathering is complete, or
/// after `trickleAfter` s with the candidates it has, the others trickled (`WHIPTrickle`) unless the endpoint refused
/// that before; it is POSTed to the endpoint (`WHIPClient`), the answer taken and the connection awaited; then the
/// handler's own H.264 and Opus packets go out as they come. The session is DELETEd at the end, and when the
/// connection is given up.
/// The receiver's keyframe requests reach `keyframeRequested` at once; a connection that stops carrying the stream
/// (ICE failed, the receiver's RTCP stopped for `silence` seconds) makes `write` throw, and the sender reconnects.
final class WHIPOutput: StreamOutput {
    /// Seconds without the receiver's reports, while we send, before the connection counts as lost.
    static let silence = 5.0
    /// Seconds ICE gathering may take before the offer goes without the candidates still to come, and the longest
    /// when the endpoint takes no trickled candidates.
    static let trickleAfter = 0.3
    static let gatheringTimeout = 3.0

    private let client: WHIPClient
    private let peer: WebRTCPeer
    private let location: String?
    private var trickle: WHIPTrickle?
    /// The encoder's SPS and PPS (Annex B), put before each keyframe that lacks them (libx264 keeps them out of its
    /// packets when a container wants a global header).
    private let parameterSets: [UInt8]
    private let displayURL: String
    private let logger: Logger

    /// Publishes to `destination`: `streams` are the video stream, then the audio one if any; `iceServers` those of
    /// the setup fields; `learned` those the endpoint named in earlier answers, updated with this one's. `trickles`:
    /// the endpoint has not refused trickled candidates (it is told of a refusal through `trickleRefused`).
    init(
        _ destination: StreamDestination, streams: [StreamParameters], iceServers: [ICEServer],
        learned: inout [ICEServer], trickles: Bool, trickleRefused: @escaping @Sendable () -> Void,
        connectedBefore: Bool, keyframeRequested: @escaping @Sendable () -> Void, logger: Logger
    ) throws(WebRTCError) {
        displayURL = destination.displayURL
        self.logger = logger
        client = WHIPClient(url: destination.url, displayURL: destination.displayURL, token: destination.token)
        let extradata = streams[0].extradata
        parameterSets = extradata
        let servers = iceServers + learned.filter { !iceServers.contains($0) }
        peer = try WebRTCPeer(
            .init(
                profileLevelID: AnnexB.profileLevelID(extradata) ?? "42e01f", audio: streams.count > 1,
                iceServers: servers))
        peer.keyframeRequested = keyframeRequested
        do throws(WebRTCError) {
            let offer = try peer.offer(gatheringTimeout: trickles ? Self.trickleAfter : Self.gatheringTimeout)
            let answer = try client.post(offer: offer, connectedBefore: connectedBefore)
            location = answer.location
            if answer.location == nil {
                logger.warning("stream: \(displayURL) gave no Location: the session cannot be ended at the end")
            }
            let new = answer.iceServers.filter { !servers.contains($0) }
            if !new.isEmpty {
                learned += new
                let names = new.map(\.displayName)
                logger.info("stream: \(displayURL) names ICE servers \(names): used from the next connection on")
            }
            do throws(WebRTCError) {
                if let warning = try peer.accept(answer: answer.sdp) { logger.warning("stream: \(warning)") }
                if !peer.gatheringComplete {
                    // Without a session to PATCH the candidates still to come are lost: the next connections wait.
                    if let location = answer.location {
                        trickle = try? WHIPTrickle(
                            peer: peer, client: client, location: location, etag: answer.etag,
                            sent: WHIP.candidates(offer), refused: trickleRefused, logger: logger)
                    } else {
                        trickleRefused()
                    }
                }
                try peer.waitConnected(timeout: 10)
            } catch {
                trickle?.stop()
                if let location = answer.location { _ = client.delete(location) }
                throw error
            }
        } catch {
            peer.close()
            throw error
        }
    }

    func write(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
        if let reason = peer.failure(silence: Self.silence) { throw MediaError("send to \(displayURL)", reason) }
        let time = packet.time
        let keyframe = packet.isKeyframe
        do throws(WebRTCError) {
            let withParameterSets =
                stream == 0 && keyframe && !parameterSets.isEmpty
                && !packet.data.withUnsafeBytes { AnnexB.hasParameterSets($0) }
            if withParameterSets {
                try (parameterSets + packet.data).withUnsafeBytes { bytes in
                    Result { () throws(WebRTCError) in try peer.send(bytes, time: time, video: true, keyframe: true) }
                }.get()
            } else {
                try packet.data.withUnsafeBytes { bytes throws(WebRTCError) in
                    try peer.send(bytes, time: time, video: stream == 0, keyframe: keyframe)
                }
            }
        } catch {
            throw MediaError("send to \(displayURL)", error.reason)
        }
    }

    func statistics() -> WebRTCStatistics { peer.statistics() }

    func finish() throws(MediaError) {
        peer.drain(timeout: 0.5)
        abandon()
    }

    func abandon() {
        trickle?.stop()
        if let location, let problem = client.delete(location) {
            logger.warning("stream: ending the WHIP session at \(displayURL) failed: \(problem)")
        }
        peer.close()
    }
}
