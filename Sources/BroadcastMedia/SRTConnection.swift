import BroadcastEncoding
import BroadcastSystem
import CSRT
import Foundation

/// What libsrt says of a connection, for service info.
public struct SRTStatistics: Equatable, Sendable {
    /// Smoothed round-trip time, ms.
    public var rttMs: Double
    /// Packets the receiver reported lost, retransmitted, and dropped as too late to send (totals).
    public var lostPackets: Int
    public var retransmittedPackets: Int
    public var droppedPackets: Int
    /// The link's estimated bandwidth and the current sending rate, Mbit/s.
    public var bandwidthMbps: Double
    public var sendRateMbps: Double
}

/// An SRT caller connection opened with libsrt itself (live mode, as libavformat's `srt` protocol opens it) and an
/// output over it for the MPEG-TS muxer (`CustomOutput`), so that libsrt's statistics can be read: libavformat does not
/// expose them. Each write is one SRT message of at most 1316 bytes (seven TS packets).
///
/// The URL takes the options of libavformat's srt:// URLs that make sense for a caller that sends: `streamid`,
/// `passphrase`, `pbkeylen`, `latency`, `rcvlatency`, `peerlatency` (µs), `connect_timeout` (ms), `maxbw`
/// (bytes/s), `oheadbw` (%), `mode=caller`; others are refused with their name.
package final class SRTConnection {
    static let payloadSize: Int32 = 1316
    static let supportedOptions = [
        "streamid", "passphrase", "pbkeylen", "latency", "rcvlatency", "peerlatency", "connect_timeout",
        "maxbw", "oheadbw", "mode",
    ]

    private let socket: SRTSOCKET
    package private(set) var output: CustomOutput?
    /// libsrt's message for the last failed send.
    package private(set) var lastError: String?

    /// Connects to `url` (srt://HOST:PORT[?options]); `displayURL` names it in errors. `sendTimeout`: seconds a
    /// send may block (a dead peer is an error then, as libavformat's rw_timeout).
    package init(url: String, displayURL: String, sendTimeout: Double = 5) throws(MediaError) {
        let options = try Self.options(of: url, displayURL: displayURL)
        guard let components = URLComponents(string: url), let host = components.host, let port = components.port else {
            throw MediaError("open \(displayURL)", "an SRT URL is srt://HOST:PORT")
        }
        srt_startup()
        socket = srt_create_socket()
        guard socket != SRT_INVALID_SOCK else {
            srt_cleanup()
            throw MediaError("open \(displayURL)", Self.lastLibraryError())
        }
        do throws(MediaError) {
            try configure(options, sendTimeout: sendTimeout, displayURL: displayURL)
            try connect(
                host: host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port: port, displayURL: displayURL)
            output = try CustomOutput(packetSize: Int(Self.payloadSize)) { [unowned self] in send($0) }
        } catch {
            srt_close(socket)
            srt_cleanup()
            throw error
        }
    }

    deinit {
        srt_close(socket)
        srt_cleanup()
    }

    /// The URL's options, checked: only those this caller supports.
    static func options(of url: String, displayURL: String) throws(MediaError) -> [String: String] {
        var options: [String: String] = [:]
        for item in URLComponents(string: url)?.queryItems ?? [] {
            guard supportedOptions.contains(item.name) else {
                throw MediaError(
                    "open \(displayURL)",
                    "the SRT option '\(item.name)' is not supported; these are: \(supportedOptions.joined(separator: ", "))"
                )
            }
            options[item.name] = item.value ?? ""
        }
        if let mode = options["mode"], mode != "caller" {
            throw MediaError(
                "open \(displayURL)",
                "mode=\(mode): the stream handler connects as an SRT caller; run the listener on the server")
        }
        return options
    }

    private func configure(_ options: [String: String], sendTimeout: Double, displayURL: String) throws(MediaError) {
        func set(_ option: SRT_SOCKOPT, _ value: Int32, _ name: String) throws(MediaError) {
            var value = value
            guard srt_setsockflag(socket, option, &value, Int32(MemoryLayout<Int32>.size)) == 0 else {
                throw MediaError("open \(displayURL)", "\(name): \(Self.lastLibraryError())")
            }
        }
        func set64(_ option: SRT_SOCKOPT, _ value: Int64, _ name: String) throws(MediaError) {
            var value = value
            guard srt_setsockflag(socket, option, &value, Int32(MemoryLayout<Int64>.size)) == 0 else {
                throw MediaError("open \(displayURL)", "\(name): \(Self.lastLibraryError())")
            }
        }
        func string(_ option: SRT_SOCKOPT, _ value: String, _ name: String) throws(MediaError) {
            let ok = value.withCString { srt_setsockflag(socket, option, $0, Int32(strlen($0))) == 0 }
            guard ok else { throw MediaError("open \(displayURL)", "\(name): \(Self.lastLibraryError())") }
        }
        func number(_ name: String) throws(MediaError) -> Int64? {
            guard let text = options[name] else { return nil }
            guard let value = Int64(text), value >= 0 else {
                throw MediaError("open \(displayURL)", "the SRT option \(name)='\(text)' is not a number")
            }
            return value
        }
        try set(SRTO_TRANSTYPE, Int32(SRTT_LIVE.rawValue), "transtype")
        try set(SRTO_SENDER, 1, "sender")
        try set(SRTO_PAYLOADSIZE, Self.payloadSize, "payload_size")
        try set(SRTO_SNDTIMEO, Int32(sendTimeout * 1000), "send timeout")
        if let latency = try number("latency") { try set(SRTO_LATENCY, Int32(clamping: latency / 1000), "latency") }
        if let latency = try number("rcvlatency") {
            try set(SRTO_RCVLATENCY, Int32(clamping: latency / 1000), "rcvlatency")
        }
        if let latency = try number("peerlatency") {
            try set(SRTO_PEERLATENCY, Int32(clamping: latency / 1000), "peerlatency")
        }
        try set(SRTO_CONNTIMEO, Int32(clamping: try number("connect_timeout") ?? 3000), "connect_timeout")
        if let maxbw = try number("maxbw") { try set64(SRTO_MAXBW, maxbw, "maxbw") }
        if let overhead = try number("oheadbw") { try set(SRTO_OHEADBW, Int32(clamping: overhead), "oheadbw") }
        if let length = try number("pbkeylen") { try set(SRTO_PBKEYLEN, Int32(clamping: length), "pbkeylen") }
        if let passphrase = options["passphrase"] { try string(SRTO_PASSPHRASE, passphrase, "passphrase") }
        if let streamID = options["streamid"] { try string(SRTO_STREAMID, streamID, "streamid") }
    }

    private func connect(host: String, port: Int, displayURL: String) throws(MediaError) {
        let addresses: [NetworkAddress]
        do { addresses = try NetworkAddress.datagram(host: host, port: port) } catch {
            throw MediaError("open \(displayURL)", "cannot resolve \(host): \(error.reason)")
        }
        var problem = "no address"
        for address in addresses {
            if address.withSocketAddress({ srt_connect(socket, $0, $1) }) != SRT_ERROR { return }
            problem = Self.lastLibraryError()
        }
        throw MediaError("open \(displayURL)", problem)
    }

    /// Sends `data` in messages of at most `payloadSize`; false when one could not be (`lastError` says why).
    private func send(_ data: UnsafeRawBufferPointer) -> Bool {
        guard let base = data.baseAddress else { return true }
        var offset = 0
        while offset < data.count {
            let chunk = min(data.count - offset, Int(Self.payloadSize))
            let sent = srt_sendmsg2(socket, (base + offset).assumingMemoryBound(to: CChar.self), Int32(chunk), nil)
            guard sent != SRT_ERROR else {
                lastError = Self.lastLibraryError()
                return false
            }
            offset += chunk
        }
        return true
    }

    /// libsrt's figures for this connection (thread-safe: libsrt locks them).
    package var statistics: SRTStatistics? {
        var perf = SRT_TRACEBSTATS()
        guard srt_bstats(socket, &perf, 0) == 0 else { return nil }
        return SRTStatistics(
            rttMs: perf.msRTT, lostPackets: Int(perf.pktSndLossTotal), retransmittedPackets: Int(perf.pktRetransTotal),
            droppedPackets: Int(perf.pktSndDropTotal), bandwidthMbps: perf.mbpsBandwidth,
            sendRateMbps: perf.mbpsSendRate)
    }

    static func lastLibraryError() -> String { String(cString: srt_getlasterror_str()) }
}
