import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Testing

/// libsrt's statistics in the stream handler's service info: plausible on loopback, and loss shows up when the
/// link drops packets (a token bucket filter slower than the stream, `tc` in a network namespace of the test's
/// own: this kernel has no netem).
extension Integration.StreamTests {
    /// Service info of the stream broadcast once `match` holds for it (within `timeout` seconds).
    func info(
        _ daemon: DaemonHarness, _ controller: ControllerClient, timeout: TimeInterval = 15,
        _ match: @escaping ([String: JSONValue]) -> Bool
    ) throws -> [String: JSONValue] {
        try daemon.waitFor(controller, timeout: timeout) { event -> [String: JSONValue]? in
            guard case .serviceInfo(let info) = event, let handler = info.handler, match(handler) else { return nil }
            return handler
        }
    }

    static func number(_ value: JSONValue?) -> Double? { if case .number(let n)? = value { n } else { nil } }

    @Test func srtStatisticsArePresentAndPlausibleOnLoopback() throws {
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
        let port = try Self.freePort(udp: true)
        let server = try srtListener(
            port: port, output: daemon.runtime + "/received.ts", log: daemon.runtime + "/srt.log")
        try waitForListening(server, port: port, tcp: false)
        let controller = try daemon.subscribedController()
        let id = try daemon.start(
            handler: "stream", url: "srt://127.0.0.1:\(port)?latency=120000", maxDuration: 5, on: controller)
        // libsrt's smoothed RTT starts at 100 ms and comes down as ACKs are answered.
        let info = try info(daemon, controller) { info in
            guard let rtt = Self.number(info["rttMs"]) else { return false }
            return rtt < 20 && (Self.number(info["sendRateMbps"]) ?? 0) > 0
        }
        #expect(Self.number(info["rttMs"])! >= 0 && Self.number(info["bandwidthMbps"])! > 0, "\(info)")
        #expect(Self.number(info["lostPackets"]) != nil && Self.number(info["retransmittedPackets"]) != nil, "\(info)")
        #expect(try daemon.awaitFinish(controller, id) == nil)
        server.stop()
        #expect(try probe(daemon.runtime + "/received.ts").streams == ["h264,320,180", "opus"])
        try daemon.stop()
    }

    @Test func srtLossInjectedInAPrivateNetworkShowsUp() throws {
        for tool in ["unshare", "nsenter", "tc", "ip"] where FileSystem.findProgram(tool) == nil {
            throw HarnessError("\(tool) is not installed (scripts/test.sh installs util-linux and iproute2)")
        }
        // broadcastd and its handler in a network namespace of their own, its loopback up.
        let daemon = try DaemonHarness(
            ["--source", "synthetic", "--size", "320x180"],
            launcher: ["/usr/bin/unshare", "-n", "--", "/bin/sh", "-c", "ip link set lo up && exec \"$@\"", "sh"])
        let inside = ["-t", String(daemon.pid), "-n", "--"]
        let port = 9000
        let server = try Server(
            "nsenter", inside + ["srt-live-transmit", "-q", "srt://:\(port)?mode=listener", "file://con"],
            output: daemon.runtime + "/received.ts", log: daemon.runtime + "/srt.log")
        defer { server.stop() }
        let controller = try daemon.subscribedController()
        let id = try daemon.start(
            handler: "stream", url: "srt://127.0.0.1:\(port)", setupInfo: ["videoBitRate": "2000"], maxDuration: 10,
            on: controller)
        let before = try info(daemon, controller) { Self.number($0["sendRateMbps"]).map { $0 > 0 } ?? false }
        #expect(Self.number(before["lostPackets"]) == 0, "loss before any was injected: \(before)")
        // A link slower than the stream: the token bucket drops what it cannot send.
        let shaped = try runTool(
            "/usr/bin/env",
            ["nsenter"] + inside + [
                "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "300kbit",
                "burst", "4kb", "latency", "20ms",
            ])
        #expect(shaped.status == 0, "tc: \(shaped.stderr)")
        let lossy = try info(daemon, controller, timeout: 8) { info in
            (Self.number(info["lostPackets"]) ?? 0) > 0 && (Self.number(info["retransmittedPackets"]) ?? 0) > 0
        }
        #expect(Self.number(lossy["rttMs"]) != nil, "\(lossy)")
        _ = try daemon.awaitFinish(controller, id, timeout: 30)
        try daemon.stop()
    }

    /// The handler opens SRT with libsrt itself: an option of libavformat's it does not take is refused by name.
    @Test func anSRTOptionTheHandlerDoesNotTakeIsRefusedByName() throws {
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
        let controller = try daemon.subscribedController()
        let id = try daemon.start(
            handler: "stream", url: "srt://127.0.0.1:9?mode=listener", setupInfo: ["reconnectFor": "0"],
            maxDuration: 10, on: controller)
        let error = try daemon.awaitFinish(controller, id)
        #expect(
            error?.message.contains("mode=listener: the stream handler connects as an SRT caller") == true,
            "\(String(describing: error))")
        let other = try daemon.start(
            handler: "stream", url: "srt://127.0.0.1:9?lossmaxttl=3", setupInfo: ["reconnectFor": "0"], maxDuration: 10,
            on: controller)
        let unknown = try daemon.awaitFinish(controller, other)
        #expect(
            unknown?.message.contains("the SRT option 'lossmaxttl' is not supported; these are: streamid, passphrase")
                == true,
            "\(String(describing: unknown))")
        try daemon.stop()
    }
}
