import CGStreamer

/// What a WebRTC destination reports, for service info.
public struct WebRTCStatistics: Equatable, Sendable {
    /// Round-trip time from the receiver's reports, ms.
    public var rttMs: Double?
    /// Packets the receiver reported lost, video and audio (totals).
    public var lostPackets = 0
    /// Video packets lost since the previous figures, %.
    public var lossPercent = 0.0
    /// Keyframes the receiver asked for (PLI, FIR).
    public var keyframeRequests = 0
    /// Retransmissions the receiver asked for (NACK).
    public var nacks = 0
    /// The receiver's estimate of what the link takes (REMB), kbit/s, when it sends one.
    public var receiverKbps: Int?

    public init() {}
}

/// One receiver report block about a stream we send (RFC 3550 6.4.1).
public struct ReportBlock: Equatable, Sendable {
    public var fractionLost: UInt8
    public var cumulativeLost: Int32
    public var highestSequence: UInt32

    public init(fractionLost: UInt8, cumulativeLost: Int32, highestSequence: UInt32) {
        self.fractionLost = fractionLost
        self.cumulativeLost = cumulativeLost
        self.highestSequence = highestSequence
    }

    /// The fraction of packets lost between `earlier` and this report: lost over expected (RFC 3550 A.3), 0...1;
    /// with no earlier report (or no packets between), the receiver's own fraction for its last interval.
    public func loss(since earlier: ReportBlock?) -> Double {
        guard let earlier, highestSequence > earlier.highestSequence else { return Double(fractionLost) / 256 }
        let expected = Double(highestSequence - earlier.highestSequence)
        return min(1, max(0, Double(Int64(cumulativeLost) - Int64(earlier.cumulativeLost)) / expected))
    }
}

/// The receiver's RTCP about what we send, gathered as it arrives (`received`, on GStreamer's thread; the caller
/// locks): its report blocks for our streams, keyframe requests (PLI, FIR), NACKs and bandwidth estimates (REMB).
struct ReceiverFeedback {
    let videoSSRC: UInt32
    let audioSSRC: UInt32
    /// CLOCK_MONOTONIC seconds of the receiver's latest RTCP about our streams (a report block, a keyframe request,
    /// a NACK, an estimate: under loss its regular reports may wait behind early feedback), and the longest gap
    /// between two.
    private(set) var lastHeard: Double?
    private(set) var longestGap = 0.0
    private(set) var video: ReportBlock?
    private var audioLost: Int32 = 0
    private(set) var keyframeRequests = 0
    private(set) var nacks = 0
    private(set) var remb: UInt64?

    init(videoSSRC: UInt32, audioSSRC: UInt32) {
        self.videoSSRC = videoSSRC
        self.audioSSRC = audioSSRC
    }

    var lostPackets: Int { Int(max(0, video?.cumulativeLost ?? 0)) + Int(max(0, audioLost)) }

    /// Takes one RTCP packet (compound or reduced-size) received at `now`; returns whether it asked for a keyframe.
    mutating func received(_ buffer: UnsafeMutablePointer<GstBuffer>, now: Double) -> Bool {
        var rtcp = GstRTCPBuffer()
        guard gst_rtcp_buffer_map(buffer, GST_MAP_READ, &rtcp) != 0 else { return false }
        defer { gst_rtcp_buffer_unmap(&rtcp) }
        var packet = GstRTCPPacket()
        var more = gst_rtcp_buffer_get_first_packet(&rtcp, &packet) != 0
        var keyframe = false
        var ours = false
        while more {
            switch gst_rtcp_packet_get_type(&packet) {
            case GST_RTCP_TYPE_SR, GST_RTCP_TYPE_RR:
                for index in 0..<gst_rtcp_packet_get_rb_count(&packet) {
                    var ssrc: guint32 = 0
                    var fraction: guint8 = 0
                    var lost: gint32 = 0
                    var highest: guint32 = 0
                    var jitter: guint32 = 0
                    var lsr: guint32 = 0
                    var dlsr: guint32 = 0
                    gst_rtcp_packet_get_rb(&packet, index, &ssrc, &fraction, &lost, &highest, &jitter, &lsr, &dlsr)
                    ours =
                        report(
                            ssrc, ReportBlock(fractionLost: fraction, cumulativeLost: lost, highestSequence: highest))
                        || ours
                }
            case GST_RTCP_TYPE_PSFB:
                keyframe = payloadFeedback(&packet) || keyframe
                ours = ours || aboutUs(&packet)
            case GST_RTCP_TYPE_RTPFB:
                ours = ours || aboutUs(&packet)
                if gst_rtcp_packet_fb_get_type(&packet) == GST_RTCP_RTPFB_TYPE_NACK,
                    gst_rtcp_packet_fb_get_media_ssrc(&packet) == videoSSRC
                {
                    nacks += 1
                }
            default:
                break
            }
            more = gst_rtcp_packet_move_to_next(&packet) != 0
        }
        if keyframe { keyframeRequests += 1 }
        if ours { heard(now: now) }
        return keyframe
    }

    private mutating func heard(now: Double) {
        if let lastHeard, now - lastHeard > 0.05 { longestGap = max(longestGap, now - lastHeard) }
        lastHeard = now
    }

    /// Keeps a report block about one of our streams; whether it was one.
    private mutating func report(_ ssrc: UInt32, _ block: ReportBlock) -> Bool {
        guard ssrc == videoSSRC || ssrc == audioSSRC else { return false }
        if ssrc == videoSSRC { video = block } else { audioLost = block.cumulativeLost }
        return true
    }

    /// Whether feedback is about our streams (its media SSRC ours, or 0 as FIR and REMB give it).
    private func aboutUs(_ packet: UnsafeMutablePointer<GstRTCPPacket>) -> Bool {
        let media = gst_rtcp_packet_fb_get_media_ssrc(packet)
        return media == videoSSRC || media == audioSSRC || media == 0
    }

    /// PLI or FIR for our video (true), or a REMB.
    private mutating func payloadFeedback(_ packet: UnsafeMutablePointer<GstRTCPPacket>) -> Bool {
        let type = gst_rtcp_packet_fb_get_type(packet)
        let fci = gst_rtcp_packet_fb_get_fci(packet)
        let words = Int(gst_rtcp_packet_fb_get_fci_length(packet))
        let bytes = fci.map { Array(UnsafeBufferPointer(start: $0, count: words * 4)) } ?? []
        switch type {
        case GST_RTCP_PSFB_TYPE_PLI:
            return gst_rtcp_packet_fb_get_media_ssrc(packet) == videoSSRC
        case GST_RTCP_PSFB_TYPE_FIR:
            // Entries of 8 bytes: the SSRC asked for a keyframe, then a sequence number (RFC 5104 4.3.1).
            return stride(from: 0, to: bytes.count - 7, by: 8).contains { Self.word(bytes, $0) == videoSSRC }
        case GST_RTCP_PSFB_TYPE_AFB:
            if let bitRate = Self.remb(bytes) { remb = bitRate }
            return false
        default:
            return false
        }
    }

    static func word(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        bytes[at..<(at + 4)].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The bit rate of a REMB's FCI (draft-alvestrand-rmcat-remb: "REMB", the SSRC count, a 6-bit exponent and an
    /// 18-bit mantissa), or nil for another application-layer message.
    static func remb(_ fci: [UInt8]) -> UInt64? {
        guard fci.count >= 8, fci[0..<4].elementsEqual("REMB".utf8) else { return nil }
        let exponent = UInt64(fci[5] >> 2)
        let mantissa = UInt64(fci[5] & 0x03) << 16 | UInt64(fci[6]) << 8 | UInt64(fci[7])
        guard exponent < 46 else { return UInt64.max }
        return mantissa << exponent
    }
}
