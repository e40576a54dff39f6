import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Testing

/// WHIP out against a WHIP endpoint that is not ours: GStreamer's webrtcbin answering through python3-gi
/// (Tests/fixtures/whip_endpoint.py), which decodes what arrives (openh264dec, opusdec) and says so a JSON line at
/// a time. The logic (URLs, answers, RTCP, the bit rate) is in the unit tests' StreamWHIPTests.
extension Integration.StreamTests {
    /// The fixture endpoint on loopback `port` (TCP), its events in `DIR/whip-events-N.jsonl`.
    final class WHIPEndpoint {
        let server: Server
        let events: String

        init(port: Int, token: String?, in directory: String, extra: [String] = []) throws {
            events = directory + "/whip-events-\(UUID().uuidString.prefix(6)).jsonl"
            var arguments = [
                Paths.root + "/Tests/fixtures/whip_endpoint.py", "--port", String(port), "--out", directory,
            ]
            if let token { arguments += ["--token", token] }
            // Debian's python3, which has python3-gi (not the tests' venv's).
            server = try Server(
                "/usr/bin/python3", arguments + extra, output: events, log: directory + "/whip-endpoint.log")
            _ = try wait("listening", timeout: 15) { _ in true }
        }

        /// The events so far, one object a line.
        var all: [[String: Any]] {
            let text = (try? String(contentsOfFile: events, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }

        func named(_ name: String) -> [[String: Any]] { all.filter { $0["event"] as? String == name } }

        /// The first event `name` that `match` takes, within `timeout` seconds.
        @discardableResult
        func wait(
            _ name: String, timeout: TimeInterval,
            _ match: ([String: Any]) -> Bool
        ) throws -> [String: Any] {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if let event = named(name).first(where: match) { return event }
                if server.process.reap() != nil { break }
                usleep(50_000)
            }
            let log = (try? String(contentsOfFile: server.log, encoding: .utf8)) ?? ""
            throw HarnessError("the WHIP endpoint said no '\(name)' within \(timeout) s:\n\(all)\n\(log)")
        }
    }

    /// The service info of both destinations (the URL's, then `also`'s) once `match` holds for them.
    func destinations(
        _ daemon: DaemonHarness, _ controller: ControllerClient, timeout: TimeInterval,
        _ match: @escaping ([[String: JSONValue]]) -> Bool
    ) throws -> [[String: JSONValue]] {
        try daemon.waitFor(controller, timeout: timeout) { event -> [[String: JSONValue]]? in
            guard case .serviceInfo(let info) = event else { return nil }
            let each = Self.destinations(info.handler)
            return each.count == 2 && match(each) ? each : nil
        }
    }

    static func whipNumber(_ event: [String: Any], _ key: String) -> Double {
        (event[key] as? NSNumber)?.doubleValue ?? -1
    }

    /// One daemon: refusals in the user's words, then a broadcast whose video (at the capture's size) and audio
    /// the endpoint decodes without errors, whose keyframes follow the receiver's PLIs within 100 ms, which shows the
    /// receiver's figures in service info and whose session is DELETEd at the end, the token nowhere.
    @Test func whipPublishesVideoAndAudioThatTheEndpointDecodes() throws {
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
        let port = try Self.freePort(udp: false)
        let token = "tok-\(UUID().uuidString.prefix(8))"
        let endpoint = try WHIPEndpoint(port: port, token: token, in: daemon.runtime, extra: ["--pli-every", "1"])
        defer { endpoint.server.stop() }
        let controller = try daemon.subscribedController()
        let url = "whip://127.0.0.1:\(port)/whip"

        // A wrong token, no endpoint at the path: final at once (no retrying for reconnectFor), in words.
        let wrong = try daemon.start(
            handler: "stream", url: url, setupInfo: ["key": "wrong-token"], maxDuration: 20,
            on: controller)
        let refused = try daemon.awaitFinish(controller, wrong, timeout: 10)
        #expect(
            refused?.message.contains("the WHIP endpoint refused the token (HTTP 401)") == true,
            "\(String(describing: refused))")
        let nowhere = try daemon.start(
            handler: "stream", url: "whip://127.0.0.1:\(port)/nope", setupInfo: ["key": token],
            maxDuration: 20, on: controller)
        let missing = try daemon.awaitFinish(controller, nowhere, timeout: 10)
        #expect(
            missing?.message.contains("there is no WHIP endpoint at this URL") == true, "\(String(describing: missing))"
        )

        // Keyframes 10 s apart of their own: those within 100 ms of a PLI are the PLI's. Finished once the endpoint
        // has asked for 4 (a second apart, from its first decoded frame on), however long connecting took.
        let id = try daemon.start(
            handler: "stream", url: url, setupInfo: ["key": token, "keyframeInterval": "10"],
            maxDuration: 60, on: controller)
        try daemon.awaitState(controller, .live)
        try endpoint.wait("connected", timeout: 15) { _ in true }
        let figures = try info(daemon, controller, timeout: 10) { info in
            info["connected"] == .bool(true) && (Self.number(info["keyframeRequests"]) ?? 0) >= 1
                && Self.number(info["rttMs"]) != nil
        }
        #expect(Self.number(figures["lostPackets"]) == 0, "loss on loopback: \(figures)")
        let shown = [compactJSON(try controller.status()), try daemon.tool("broadcastctl", ["status"]).stdout]
        _ = try endpoint.wait("stats", timeout: 15) { _ in endpoint.named("pli").count >= 4 }
        try controller.finish(broadcast: id)
        #expect(try daemon.awaitFinish(controller, id, timeout: 20) == nil)
        let deleted = try endpoint.wait("deleted", timeout: 5) { _ in true }

        let size = try #require(endpoint.named("size").first)
        #expect(Self.whipNumber(size, "width") == 320 && Self.whipNumber(size, "height") == 180, "\(size)")
        // 30 frames and 50 Opus packets a second while connected (a loaded machine may decode late: most of them).
        let connected = try #require(endpoint.named("connected").first)
        let seconds = Self.whipNumber(deleted, "t") - Self.whipNumber(connected, "t")
        #expect(
            seconds > 3 && Self.whipNumber(deleted, "frames") > 0.7 * 30 * seconds
                && Self.whipNumber(deleted, "audio") > 0.7 * 50 * seconds,
            "connected for \(seconds) s: \(deleted) \(endpoint.named("stats"))")
        #expect(Self.whipNumber(deleted, "errors") == 0, "\(endpoint.named("error")) \(endpoint.named("warning"))")
        // The endpoint asked for a keyframe every second: each came within 100 ms.
        let plis = endpoint.named("pli").map { Self.whipNumber($0, "ms") }
        #expect(plis.count >= 4 && plis.allSatisfy { $0 >= 0 && $0 < 100 }, "keyframes after PLIs, ms: \(plis)")
        for text in shown + [compactJSON(try controller.status()), daemon.log] {
            #expect(!text.contains(token), "the token is in \(text)")
        }
        try daemon.stop()
    }

    /// WHIP beside SRT (`also`): the endpoint goes away and comes back; the WHIP destination makes a new POST
    /// (counted in its service info), the SRT one goes on; each session is DELETEd, the token masked.
    @Test func whipAsAnAlsoDestinationReconnectsWhenTheEndpointComesBack() throws {
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
        let srtPort = try Self.freePort(udp: true)
        let received = daemon.runtime + "/received.ts"
        let srt = try srtListener(port: srtPort, output: received, log: daemon.runtime + "/srt.log")
        try waitForListening(srt, port: srtPort, tcp: false)
        let port = try Self.freePort(udp: false)
        var endpoint = try WHIPEndpoint(port: port, token: "sekrit-whip", in: daemon.runtime)
        let controller = try daemon.subscribedController()
        let id = try daemon.start(
            handler: "stream", url: "srt://127.0.0.1:\(srtPort)",
            setupInfo: ["also": "whip://sekrit-whip@127.0.0.1:\(port)/whip"], maxDuration: 60,
            on: controller)
        let both = try destinations(daemon, controller, timeout: 15) { each in
            each.allSatisfy { $0["connected"] == .bool(true) }
        }
        #expect(both[1]["url"] == .string("whip://***@127.0.0.1:\(port)/whip"), "\(both)")
        try endpoint.wait("stats", timeout: 5) { Self.whipNumber($0, "frames") > 0 }
        // The endpoint dies (no DELETE can reach it); its receiver reports stop.
        endpoint.server.stop(crash: true)
        let away = try destinations(daemon, controller, timeout: 12) { $0[1]["connected"] == .bool(false) }
        #expect(away[0]["connected"] == .bool(true), "SRT went on: \(away)")
        endpoint = try WHIPEndpoint(port: port, token: "sekrit-whip", in: daemon.runtime)
        defer { endpoint.server.stop() }
        _ = try destinations(daemon, controller, timeout: 12) { each in
            each[1]["connected"] == .bool(true) && each[1]["reconnects"] == .number(1)
        }
        try endpoint.wait("stats", timeout: 5) { Self.whipNumber($0, "frames") > 30 }
        try controller.finish(broadcast: id)
        #expect(try daemon.awaitFinish(controller, id, timeout: 30) == nil, "an outage shorter than reconnectFor")
        let deleted = try endpoint.wait("deleted", timeout: 5) { _ in true }
        #expect(Self.whipNumber(deleted, "errors") == 0, "\(endpoint.named("error"))")
        #expect(endpoint.named("offer").count == 1, "one new POST after the outage: \(endpoint.named("offer").count)")
        srt.stop()
        #expect(try probe(received).streams == ["h264,320,180", "opus"])
        let result = Self.results(try controller.status().result)
        #expect(result.count == 2 && result[1]["reconnects"] == .number(1), "\(result)")
        let status = compactJSON(try controller.status())
        #expect(!daemon.log.contains("sekrit-whip") && !status.contains("sekrit-whip"), "\(status)")
        try daemon.stop()
    }
}
