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

        /// `inside`: nsenter's arguments that run it in another process's network namespace.
        init(port: Int, token: String?, in directory: String, extra: [String] = [], inside: [String]? = nil) throws {
            events = directory + "/whip-events-\(UUID().uuidString.prefix(6)).jsonl"
            // Debian's python3, which has python3-gi (not the tests' venv's).
            var arguments = [
                "/usr/bin/python3", Paths.root + "/Tests/fixtures/whip_endpoint.py", "--port", String(port), "--out",
                directory,
            ]
            if let token { arguments += ["--token", token] }
            if let inside { arguments = ["nsenter"] + inside + arguments }
            server = try Server(
                arguments[0], Array(arguments.dropFirst()) + extra, output: events,
                log: directory + "/whip-endpoint.log")
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
    /// (app and mic mixed) the endpoint decodes without errors, whose keyframes follow the receiver's PLIs within
    /// 100 ms, which shows the receiver's figures in service info and whose session is DELETEd at the end, the token
    /// nowhere.
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
        // A service that forbids the stream, and an endpoint another stream holds: final at once too, in words.
        for (status, words) in [
            (
                403,
                "the WHIP endpoint refused the token (HTTP 403): check the key setup field (it said: forbidden here)"
            ),
            (
                409,
                "the WHIP endpoint is taken by another stream (HTTP 409 Conflict) (it said: a stream is publishing here)"
            ),
        ] {
            let refusing = try daemon.start(
                handler: "stream", url: "whip://127.0.0.1:\(port)/refuse/\(status)", setupInfo: ["key": token],
                maxDuration: 20, on: controller)
            let finish = try daemon.awaitFinish(controller, refusing, timeout: 10)
            #expect(finish?.message.contains(words) == true, "\(status): \(String(describing: finish))")
        }

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
        // Both audio streams in the one Opus track, mixed as over SRT and RTMP: app audio's 440 Hz and the mic's
        // 880 Hz, each at the synthetic source's 0.25 (and nothing at 660 Hz), in a second from the middle.
        let path = daemon.runtime + "/audio-\(Int(Self.whipNumber(deleted, "session"))).f32"
        let samples = try Data(contentsOf: URL(fileURLWithPath: path)).withUnsafeBytes {
            Array($0.bindMemory(to: Float.self)).enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
        }
        try #require(samples.count > 3 * 48_000, "\(samples.count) samples decoded")
        let middle = samples[(samples.count / 2)..<(samples.count / 2 + 48_000)]
        let levels = [440, 660, 880].map { amplitude(Double($0), in: middle) }
        #expect(abs(levels[0] - 0.25) < 0.05 && levels[1] < 0.01 && abs(levels[2] - 0.25) < 0.05, "\(levels)")
        // The endpoint asked for a keyframe every second: each came within 100 ms.
        let plis = endpoint.named("pli").map { Self.whipNumber($0, "ms") }
        #expect(plis.count >= 4 && plis.allSatisfy { $0 >= 0 && $0 < 100 }, "keyframes after PLIs, ms: \(plis)")
        for text in shown + [compactJSON(try controller.status()), daemon.log] {
            #expect(!text.contains(token), "the token is in \(text)")
        }
        try daemon.stop()
    }

    /// A STUN server that does not answer keeps ICE gathering going for seconds: the offer goes out with the host
    /// candidates, and the end of gathering follows as a trickle PATCH (If-Match the session's ETag, its ICE
    /// credentials and mid) to an endpoint that takes them; one that answers 405 is published to all the same.
    @Test func whipTricklesWhatIsGatheredAfterTheOffer() throws {
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
        let controller = try daemon.subscribedController()
        let stun = "stun:127.0.0.1:\(try Self.freePort(udp: true))"
        for trickles in [true, false] {
            let port = try Self.freePort(udp: false)
            let endpoint = try WHIPEndpoint(
                port: port, token: nil, in: daemon.runtime, extra: trickles ? ["--trickle"] : [])
            defer { endpoint.server.stop() }
            let id = try daemon.start(
                handler: "stream", url: "whip://127.0.0.1:\(port)/whip", setupInfo: ["stun": stun], maxDuration: 30,
                on: controller)
            try endpoint.wait("stats", timeout: 15) { Self.whipNumber($0, "frames") > 0 }
            let offer = try #require(endpoint.named("offer").first)
            #expect(!(offer["sdp"] as? String ?? "").contains("end-of-candidates"), "\(offer)")
            if trickles {
                let last = try endpoint.wait("trickle", timeout: 10) { $0["ended"] as? Bool == true }
                #expect(Self.whipNumber(last, "t") - Self.whipNumber(offer, "t") > 1, "gathering went on: \(last)")
                #expect(last["ufrag"] as? Bool == true && last["mid"] as? Bool == true, "\(last)")
            } else {
                try endpoint.wait("patch-refused", timeout: 10) { _ in true }
            }
            try controller.finish(broadcast: id)
            #expect(try daemon.awaitFinish(controller, id, timeout: 20) == nil)
            let deleted = try endpoint.wait("deleted", timeout: 5) { _ in true }
            #expect(Self.whipNumber(deleted, "frames") > 0 && Self.whipNumber(deleted, "errors") == 0, "\(deleted)")
        }
        #expect(daemon.log.contains("takes no trickled ICE candidates (HTTP 405)"), "\(daemon.log)")
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

extension Integration.StreamTests {
    /// Loss on the way to the endpoint, as the SRT test makes it (a token bucket filter in a network namespace of
    /// the test's own), on what goes to the endpoint's ICE port only: its receiver reports come back whole. The link
    /// (160 kbit/s) is narrower than the stream (200 kbit/s of video, 32 of audio): the receiver reports the loss,
    /// the video bit rate goes down and, once the stream fits the link, video decodes at full rate again.
    ///
    /// The endpoint asks for no keyframe when packets are lost (`--no-pli-on-loss`): GStreamer's receiver sends those
    /// requests (its depayloader's and openh264dec's, several a second under loss) as early RTCP without report
    /// blocks, each putting its next regular report a full interval later, so its loss reports were never sent
    /// (lossPercent stayed 0 for 10 s while PLIs came, video stopped decoding: what made the test flaky, with the
    /// reports lost on a lo shaped as a whole). Keyframes come each second of themselves (keyframeInterval 1).
    @Test func whipLossReportedByTheReceiverLowersTheBitRateAndVideoKeepsDecoding() throws {
        for tool in ["unshare", "nsenter", "tc", "ip"] where FileSystem.findProgram(tool) == nil {
            throw HarnessError("\(tool) is not installed (scripts/test.sh installs util-linux and iproute2)")
        }
        // libnice gathers no loopback addresses: a veth pair gives both ends one (what they send each other still
        // goes over lo).
        let network =
            "ip link set lo up && ip link add v0 type veth peer name v1 && ip addr add 10.99.0.1/24 dev v0 "
            + "&& ip link set v0 up && ip link set v1 up && exec \"$@\""
        let daemon = try DaemonHarness(
            ["--source", "synthetic", "--size", "640x360"],
            launcher: ["/usr/bin/unshare", "-n", "--", "/bin/sh", "-c", network, "sh"])
        let inside = ["-t", String(daemon.pid), "-n", "--"]
        let icePort = 40000
        let endpoint = try WHIPEndpoint(
            port: 8443, token: nil, in: daemon.runtime, extra: ["--ice-port", String(icePort), "--no-pli-on-loss"],
            inside: inside)
        defer { endpoint.server.stop() }
        let controller = try daemon.subscribedController()
        let target = 200
        let id = try daemon.start(
            handler: "stream", url: "whip://127.0.0.1:8443/whip",
            // A queue long enough that connecting on a loaded machine does not fill half of it (the rate would go
            // down before the link does).
            setupInfo: [
                "videoBitRate": String(target), "audioBitRate": "32", "keyframeInterval": "1", "maxQueue": "10",
            ],
            maxDuration: 90, on: controller)
        var seen: [[String: JSONValue]] = []
        func watch(_ timeout: TimeInterval, _ match: @escaping ([String: JSONValue]) -> Bool) throws
            -> [String: JSONValue]
        {
            do {
                return try info(daemon, controller, timeout: timeout) { info in
                    seen.append(info)
                    return match(info)
                }
            } catch {
                Issue.record("service info so far: \(seen.suffix(12))\n\(endpoint.named("stats").suffix(12))")
                throw error
            }
        }
        _ = try watch(15) { $0["connected"] == .bool(true) }
        try endpoint.wait("stats", timeout: 10) { Self.whipNumber($0, "fps") > 20 }
        // What the stream takes on a free link at the target: three seconds of it.
        var rates: [Double] = []
        let before = try watch(15) { info in
            if Self.number(info["videoBitRate"]) == Double(target) { rates.append(Self.number(info["bitRate"]) ?? 0) }
            return rates.count >= 3
        }
        #expect(Self.number(before["lostPackets"]) == 0 && Self.number(before["lossPercent"]) == 0, "\(before)")
        let link = 160
        let sent = rates.reduce(0, +) / Double(rates.count)
        try #require(sent > 1.25 * Double(link), "the stream takes \(rates) kbit/s: \(link) kbit/s would lose little")
        // What goes to the endpoint's port through the token bucket (htb's class 1:2), the rest (its reports, the
        // signalling) through class 1:1 as it comes: this kernel has htb, tbf and u32 (not prio).
        let shape = [
            ["qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "1"],
            [
                "class", "add", "dev", "lo", "parent", "1:", "classid", "1:1", "htb", "rate", "1gbit", "quantum",
                "60000",
            ],
            [
                "class", "add", "dev", "lo", "parent", "1:", "classid", "1:2", "htb", "rate", "1gbit", "quantum",
                "60000",
            ],
            [
                "qdisc", "add", "dev", "lo", "parent", "1:2", "handle", "20:", "tbf", "rate", "\(link)kbit", "burst",
                "16kb", "latency", "100ms",
            ],
            [
                "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip",
                "protocol", "17", "0xff", "match", "ip", "dport", String(icePort), "0xffff", "flowid", "1:2",
            ],
            // ICE may pair the veth's IPv6 link-local addresses as well.
            [
                "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ipv6", "prio", "2", "u32", "match", "ip6",
                "protocol", "17", "0xff", "match", "ip6", "dport", String(icePort), "0xffff", "flowid", "1:2",
            ],
        ]
        for arguments in shape {
            let shaped = try runTool("/usr/bin/env", ["nsenter"] + inside + ["tc"] + arguments)
            try #require(shaped.status == 0, "tc \(arguments): \(shaped.stderr)")
        }
        let shapedAt = MonotonicClock.seconds
        // The receiver reports every 0.5 s and the handler reads them each second.
        let lossy = try watch(10) { info in
            (Self.number(info["lossPercent"]) ?? 0) > 10 && (Self.number(info["videoBitRate"]) ?? 0) < Double(target)
        }
        #expect(Self.number(lossy["lostPackets"]) ?? 0 > 0, "\(lossy)")
        // Down a quarter each 2 s while the loss is over 10 %, at least to 50 kbit/s (about 120 kbit/s with the audio
        // and the packets' headers) within 8 s of the first step, then a keyframe within 1 s: full rate again while
        // the link is still narrow, and the receiver's reports kept coming all along (no reconnection).
        try endpoint.wait("stats", timeout: 20) { event in
            Self.whipNumber(event, "t") >= shapedAt + 5 && Self.whipNumber(event, "fps") > 20
        }
        let after = try watch(5) { _ in true }
        #expect(Self.number(after["reconnects"]) == 0 && after["connected"] == .bool(true), "\(after)")
        try controller.finish(broadcast: id)
        #expect(try daemon.awaitFinish(controller, id, timeout: 30) == nil)
        #expect(endpoint.named("error").isEmpty, "\(endpoint.named("error"))")
        try daemon.stop()
    }
}
