import BroadcastEncoding
import BroadcastMedia
import BroadcastProtocol
import Foundation
import Logging

/// The destinations of one stream broadcast, fed by one encode: each packet goes to every `Sender`
/// (its data shared, not copied: `EncodedPacket`), each with its own connection, queue, GOP
/// dropping and reconnection, so that a slow or dead destination never holds up the others.
///
/// Bit rate: the encoder follows the healthiest destination (the connected one least congested: the emptiest
/// queue, or for WebRTC the least loss its receiver reports); a slower one drops whole GOPs from its own queue.
/// The broadcast fails only when every destination has been given up on.
public final class SenderGroup: PacketSink {
    let senders: [Sender]
    private let logger: Logger
    /// Per destination, at the last report: bytes sent and GOP drops.
    private var last: [(bytes: Int64, drops: Int)]
    private var reportedFailures = Set<Int>()
    /// The newest video keyframe, held for the HLS destinations until the next video packet: a stream that ends on one
    /// (its last frame falling on a keyframe's time) does not send it, so that HLS does not end on a segment of one
    /// frame. The others get it at once (a WebRTC receiver that asked for it waits for nothing more).
    private var heldKeyframe: EncodedPacket?
    private let holding: [Sender]
    private let notHolding: [Sender]

    init(_ senders: [Sender], logger: Logger) {
        self.senders = senders
        self.logger = logger
        last = Array(repeating: (0, 0), count: senders.count)
        holding = senders.filter(\.destination.isHLS)
        notHolding = senders.filter { !$0.destination.isHLS }
    }

    /// Starts every destination, once each is prepared (an HLS playlist's lock taken); nothing starts when one
    /// cannot be.
    func start() throws(MediaError) {
        do {
            for sender in senders { try sender.prepare() }
        } catch {
            for sender in senders { sender.release() }
            throw error
        }
        for sender in senders { sender.start() }
    }

    public func write(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
        try write(packet, stream: stream, to: senders)
    }

    /// Hands `packet` to `senders`.
    private func write(_ packet: EncodedPacket, stream: Int, to senders: [Sender]) throws(MediaError) {
        for sender in senders { try sender.write(packet, stream: stream) }
    }

    /// Whether the next video frame should be a keyframe: some connected destination needs one (after a
    /// drop or a reconnection). Clears every destination's request.
    func takeKeyframeRequest() -> Bool {
        senders.map { $0.takeKeyframeRequest() }.contains(true)
    }

    /// Sends what is queued everywhere (at most `timeout` seconds for all of them together).
    /// A video packet (stream 0): a keyframe waits for the next packet (see `heldKeyframe`).
    func writeVideo(_ packet: EncodedPacket) throws(MediaError) {
        if let held = heldKeyframe {
            heldKeyframe = nil
            try write(held, stream: 0, to: holding)
        }
        guard packet.isKeyframe, !holding.isEmpty else { return try write(packet, stream: 0) }
        try write(packet, stream: 0, to: notHolding)
        heldKeyframe = packet
    }

    /// Sends what is queued, without a keyframe still held: the stream's last frame (see `heldKeyframe`).
    func finish(timeout: Double) {
        heldKeyframe = nil
        for sender in senders { sender.requestFinish() }
        let deadline = DispatchTime.now() + timeout
        for sender in senders { sender.finish(deadline: deadline) }
    }

    struct Report {
        var figures: [Sender.Figures]
        /// kbit/s sent to each destination since the last report.
        var bitRates: [Double]
        /// The queue fill, whether it dropped, and the loss its receiver reported (WebRTC, 0...1), of the destination
        /// the bit rate follows.
        var fill: Double
        var dropped: Bool
        var loss: Double
        /// That destination's receiver's estimate of the link (WebRTC's REMB), kbit/s, when it sends one.
        var receiverKbps: Int?
        /// Set when every destination has failed: the broadcast's error.
        var failure: String?
    }

    /// The figures since the last report, `seconds` ago.
    func report(seconds: Double) -> Report {
        let figures = senders.map(\.snapshot)
        let fills = senders.map(\.fill)
        let bitRates = figures.indices.map {
            ((Double(figures[$0].bytesSent - last[$0].bytes) * 8 / 1000) / max(seconds, 0.001)).rounded()
        }
        for (index, f) in figures.enumerated()
        where f.failure != nil && !reportedFailures.contains(index) && figures.count > 1 {
            reportedFailures.insert(index)
            logger.error("stream: \(f.failure!); the other destinations go on")
        }
        let alive = figures.indices.filter { figures[$0].failure == nil }
        let losses = figures.map { ($0.webrtc?.lossPercent ?? 0) / 100 }
        let states = figures.map { DestinationState(failed: $0.failure != nil, connected: $0.connected) }
        let healthiest = Self.healthiest(states, fills: zip(fills, losses).map { Self.congestion(fill: $0, loss: $1) })
        var report = Report(
            figures: figures, bitRates: bitRates, fill: healthiest.map { fills[$0] } ?? 0,
            dropped: healthiest.map { figures[$0].gopDrops > last[$0].drops } ?? false,
            loss: healthiest.map { losses[$0] } ?? 0,
            receiverKbps: healthiest.flatMap { figures[$0].webrtc?.receiverKbps })
        if alive.isEmpty {
            report.failure =
                figures.count == 1
                ? figures[0].failure
                : "every destination failed: " + figures.compactMap(\.failure).joined(separator: "; ")
        }
        last = figures.map { ($0.bytesSent, $0.gopDrops) }
        return report
    }

    /// What the bit rate policy knows of a destination.
    public struct DestinationState: Equatable, Sendable {
        public var failed: Bool
        public var connected: Bool
        public init(failed: Bool, connected: Bool) {
            self.failed = failed
            self.connected = connected
        }
    }

    /// How congested a destination is, 0...1: its queue's fill, or the loss its receiver reports, 10 % counting as a
    /// queue half full (where `BitRateController` lowers the rate).
    public static func congestion(fill: Double, loss: Double) -> Double { max(fill, min(1, loss * 5)) }

    /// The destination the bit rate follows: of those not given up on, the connected one least congested (`fills`,
    /// 0...1, see `congestion`); with none connected, the emptiest of all (so that a single destination that is away
    /// still lowers the rate as before); nil when every one has failed.
    public static func healthiest(_ states: [DestinationState], fills: [Double]) -> Int? {
        let alive = states.indices.filter { !states[$0].failed }
        let connected = alive.filter { states[$0].connected }
        return (connected.isEmpty ? alive : connected).min { fills[$0] < fills[$1] }
    }

    /// Service info of one destination, its keys after `prefix` (service info is flat: at most 64 keys); for SRT,
    /// libsrt's round-trip time, lost and retransmitted packets (and for the first destination its dropped packets, the
    /// link's estimated bandwidth and the sending rate); for WebRTC, the round-trip time, lost packets and the loss of
    /// the last second from the receiver's reports (and for the first destination the keyframes and retransmissions it
    /// asked for and its bandwidth estimate).
    static func info(_ sender: Sender, _ f: Sender.Figures, bitRate: Double, prefix: String) -> [String: JSONValue] {
        var info: [String: JSONValue] = [
            "bitRate": .number(bitRate), "queueMs": .number(Double(f.queueMs)),
            "droppedFrames": .number(Double(f.droppedVideoFrames)), "reconnects": .number(Double(f.reconnects)),
            "connected": .bool(f.connected),
        ]
        if prefix.isEmpty {
            info["queueBytes"] = .number(Double(f.queueBytes))
        } else {
            info["url"] = .string(sender.destination.displayURL)
        }
        if let error = f.lastError { info["lastError"] = .string(error) }
        if let failure = f.failure { info["failed"] = .string(failure) }
        if let srt = f.srt {
            info["rttMs"] = .number((srt.rttMs * 100).rounded() / 100)
            info["lostPackets"] = .number(Double(srt.lostPackets))
            info["retransmittedPackets"] = .number(Double(srt.retransmittedPackets))
            // The others' figures: service info has at most 64 keys.
            if prefix.isEmpty {
                info["droppedPackets"] = .number(Double(srt.droppedPackets))
                info["bandwidthMbps"] = .number((srt.bandwidthMbps * 10).rounded() / 10)
                info["sendRateMbps"] = .number((srt.sendRateMbps * 100).rounded() / 100)
            }
        }
        // WebRTC: what its receiver reports (and for the first destination, what it asked for).
        if let webrtc = f.webrtc {
            if let rtt = webrtc.rttMs { info["rttMs"] = .number(rtt) }
            info["lostPackets"] = .number(Double(webrtc.lostPackets))
            info["lossPercent"] = .number(webrtc.lossPercent)
            if prefix.isEmpty {
                info["keyframeRequests"] = .number(Double(webrtc.keyframeRequests))
                info["nacks"] = .number(Double(webrtc.nacks))
                if let kbps = webrtc.receiverKbps { info["receiverBitRate"] = .number(Double(kbps)) }
            }
        }
        return Dictionary(uniqueKeysWithValues: info.map { (prefix + $0.key, $0.value) })
    }

    /// The result of each destination.
    static func result(_ sender: Sender, _ f: Sender.Figures) -> [String: JSONValue] {
        var result: [String: JSONValue] = [
            "url": .string(sender.destination.displayURL), "bytesSent": .number(Double(f.bytesSent)),
            "reconnects": .number(Double(f.reconnects)), "droppedVideoFrames": .number(Double(f.droppedVideoFrames)),
            "droppedAudioPackets": .number(Double(f.droppedAudioPackets)),
        ]
        if let failure = f.failure { result["error"] = .string(failure) }
        return result
    }
}
