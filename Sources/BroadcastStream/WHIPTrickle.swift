import BroadcastSystem
import BroadcastWebRTC
import Foundation
import Logging

/// Trickle ICE for one WHIP session (RFC 9725 section 4.3.1): the offer went out before ICE gathering was complete
/// (a STUN or TURN server is slow to answer, or does not), and the candidates gathered after it are PATCHed to the
/// session as they come, then the end of candidates. On a thread of its own, every `interval` s, until gathering is
/// complete, the endpoint refuses (`refused` is called: it takes no PATCH), a PATCH fails, `limit` s have passed or
/// `stop` is called.
final class WHIPTrickle: @unchecked Sendable {
    static let interval = 0.1
    static let limit = 30.0

    private let condition = NSCondition()
    // Guarded by `condition`.
    private var stopping = false
    private var running = true

    init(
        peer: WebRTCPeer, client: WHIPClient, location: String, etag: String?, sent: Set<String>,
        refused: @escaping @Sendable () -> Void, logger: Logger
    ) throws(SystemError) {
        try BackgroundThread.start { [self] in
            run(
                peer: peer, client: client, location: location, etag: etag, sent: sent, refused: refused, logger: logger
            )
            condition.lock()
            running = false
            condition.broadcast()
            condition.unlock()
        }
    }

    /// Stops trickling, and waits until the thread no longer uses the peer.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        while running { condition.wait() }
        condition.unlock()
    }

    private func run(
        peer: WebRTCPeer, client: WHIPClient, location: String, etag: String?, sent: Set<String>,
        refused: @Sendable () -> Void, logger: Logger
    ) {
        var sent = sent
        let deadline = WebRTCPeer.now() + Self.limit
        while WebRTCPeer.now() < deadline {
            condition.lock()
            if !stopping { _ = condition.wait(until: Date().addingTimeInterval(Self.interval)) }
            let stop = stopping
            condition.unlock()
            if stop { return }
            let complete = peer.gatheringComplete
            guard let sdp = peer.localDescription(),
                let (fragment, candidates) = WHIP.trickleFragment(sdp, sent: sent, complete: complete)
            else { continue }
            switch client.trickle(fragment, to: location, etag: etag) {
            case .taken:
                sent.formUnion(candidates)
                if complete { return }
            case .refused(let status):
                logger.info(
                    "stream: \(client.displayURL) takes no trickled ICE candidates (HTTP \(status)): its next connections offer them all at once"
                )
                return refused()
            case .failed(let reason):
                return logger.warning("stream: trickling ICE candidates to \(client.displayURL) failed: \(reason)")
            }
        }
    }
}
