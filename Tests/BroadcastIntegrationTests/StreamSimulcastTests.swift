import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Testing

/// One encode to an SRT listener and nginx-rtmp at once (`also`): both decode; one server going away leaves
/// the other untouched, and it is reconnected when it is back.
extension Integration.StreamTests {
    /// The largest step between consecutive packets of each stream of `path` (seconds), and their counts.
    func largestGaps(_ path: String) throws -> (video: Double, audio: Double, videoPackets: Int, audioPackets: Int) {
        let result = try runTool(
            "/usr/bin/env",
            ["ffprobe", "-v", "error", "-show_entries", "packet=codec_type,pts_time", "-of", "csv=p=0", path])
        #expect(result.status == 0, "ffprobe \(path): \(result.stderr)")
        var last: [String: Double] = [:]
        var gaps: [String: Double] = [:]
        var counts: [String: Int] = [:]
        for line in result.stdout.split(separator: "\n") {
            let fields = line.split(separator: ",")
            guard fields.count >= 2, let time = Double(fields[1]) else { continue }
            let type = String(fields[0])
            if let previous = last[type] { gaps[type] = max(gaps[type] ?? 0, time - previous) }
            last[type] = time
            counts[type, default: 0] += 1
        }
        return (gaps["video"] ?? .infinity, gaps["audio"] ?? .infinity, counts["video"] ?? 0, counts["audio"] ?? 0)
    }

    /// Each destination's service info: the top-level keys for the URL, `alsoN.*` for the others.
    static func destinations(_ values: [String: JSONValue]?) -> [[String: JSONValue]] {
        guard let values, case .number(let count)? = values["destinations"] else { return [] }
        return (0..<Int(count)).map { index in
            let prefix = index == 0 ? "" : "also\(index)."
            return Dictionary(
                uniqueKeysWithValues: values.compactMap { entry in
                    guard entry.key.hasPrefix(prefix), index > 0 || !entry.key.hasPrefix("also") else { return nil }
                    return (String(entry.key.dropFirst(prefix.count)), entry.value)
                })
        }
    }

    /// Each destination's result.
    static func results(_ values: [String: JSONValue]?) -> [[String: JSONValue]] {
        guard case .array(let list)? = values?["destinations"] else { return [] }
        return list.compactMap { if case .object(let object) = $0 { object } else { nil } }
    }

    @Test func oneEncodeToSRTAndRTMPWhereOneServerGoingAwayLeavesTheOtherUntouched() throws {
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
        let srtPort = try Self.freePort(udp: true)
        let received = daemon.runtime + "/received.ts"
        let srt = try srtListener(port: srtPort, output: received, log: daemon.runtime + "/srt.log")
        try waitForListening(srt, port: srtPort, tcp: false)
        let rtmpPort = try Self.freePort(udp: false, count: 2)
        var nginx = try nginx(port: rtmpPort, in: daemon.runtime)
        let controller = try daemon.subscribedController()
        let id = try daemon.start(
            handler: "stream", url: "srt://127.0.0.1:\(srtPort)",
            setupInfo: ["also": "rtmp://127.0.0.1:\(rtmpPort)/live/sekrit-two", "maxQueue": "1"], maxDuration: 12,
            on: controller)
        // Service info has each destination, both connected.
        let both = try daemon.waitFor(controller, timeout: 15) { event -> [[String: JSONValue]]? in
            guard case .serviceInfo(let info) = event else { return nil }
            let each = Self.destinations(info.handler)
            return each.count == 2 && each.allSatisfy { $0["connected"] == .bool(true) } ? each : nil
        }
        #expect(both[1]["url"] == .string("rtmp://127.0.0.1:\(rtmpPort)/live/***"), "\(both)")
        let before = daemon.runtime + "/before.flv"
        try pull(port: rtmpPort, key: "sekrit-two", seconds: 1, to: before)
        // nginx dies; the SRT destination goes on while the RTMP one reconnects.
        nginx.stop(crash: true)
        let away = try daemon.waitFor(controller, timeout: 10) { event -> [[String: JSONValue]]? in
            guard case .serviceInfo(let info) = event else { return nil }
            let each = Self.destinations(info.handler)
            return each.count == 2 && each[1]["connected"] == .bool(false) ? each : nil
        }
        #expect(away[0]["connected"] == .bool(true), "\(away)")
        usleep(2_500_000)
        nginx = try self.nginx(port: rtmpPort, in: daemon.runtime)
        // Backoff is at most 2 s by now: the RTMP destination is back within a few seconds.
        try daemon.waitFor(controller, timeout: 10) { event -> Bool? in
            guard case .serviceInfo(let info) = event else { return nil }
            let each = Self.destinations(info.handler)
            return each.count == 2 && each[1]["connected"] == .bool(true) && each[1]["reconnects"] == .number(1)
                ? true : nil
        }
        let after = daemon.runtime + "/after.flv"
        try pull(port: rtmpPort, key: "sekrit-two", seconds: 1, to: after)
        #expect(try daemon.awaitFinish(controller, id, timeout: 30) == nil)
        srt.stop()
        nginx.stop()

        #expect(try probe(before).streams == ["h264,320,180", "aac"])
        #expect(try probe(after).streams == ["h264,320,180", "aac"], "after the reconnection")
        let (streams, duration) = try probe(received)
        #expect(streams == ["h264,320,180", "aac"], "\(streams)")
        #expect(abs(duration - 12) < 1, "SRT received \(duration) s of a 12 s broadcast")
        // Not a frame missing on SRT while RTMP was away: 30 fps, AAC every 21 ms.
        let gaps = try largestGaps(received)
        #expect(gaps.video < 0.1 && gaps.audio < 0.1, "SRT had a gap: \(gaps)")
        #expect(gaps.videoPackets >= 330, "\(gaps)")
        let result = try #require(try controller.status().result)
        let each = Self.results(result)
        #expect(each.count == 2, "\(result)")
        guard each.count == 2 else { return }
        #expect(each[0]["reconnects"] == .number(0) && each[0]["droppedVideoFrames"] == .number(0), "SRT: \(each[0])")
        #expect(each[1]["reconnects"] == .number(1), "RTMP: \(each[1])")
        #expect(!daemon.log.contains("sekrit-two"), "the key in `also` is in the daemon's log")
        try daemon.stop()
    }

    /// The other way round, through the handler's own libsrt connection: the SRT listener dies (noticed when libsrt's
    /// peer idle timeout, 5 s, runs out), RTMP viewers see no gap meanwhile, and SRT is reconnected when it is back.
    @Test func anSRTListenerGoingAwayLeavesRTMPUntouchedAndIsReconnected() throws {
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
        let srtPort = try Self.freePort(udp: true)
        var srt = try srtListener(port: srtPort, output: daemon.runtime + "/first.ts", log: daemon.runtime + "/srt.log")
        try waitForListening(srt, port: srtPort, tcp: false)
        let rtmpPort = try Self.freePort(udp: false, count: 2)
        let nginx = try nginx(port: rtmpPort, in: daemon.runtime)
        defer { nginx.stop() }
        let controller = try daemon.subscribedController()
        let id = try daemon.start(
            handler: "stream", url: "rtmp://127.0.0.1:\(rtmpPort)/live",
            setupInfo: [
                "key": "sekrit-three", "also": "srt://127.0.0.1:\(srtPort)", "maxQueue": "1",
            ], maxDuration: 22, on: controller)
        try daemon.waitFor(controller, timeout: 15) { event -> Bool? in
            guard case .serviceInfo(let info) = event else { return nil }
            let each = Self.destinations(info.handler)
            return each.count == 2 && each.allSatisfy { $0["connected"] == .bool(true) } ? true : nil
        }
        // A viewer pulls RTMP across the whole SRT outage.
        let pulled = daemon.runtime + "/pulled.flv"
        let viewer = try Server(
            "ffmpeg",
            [
                "-nostdin", "-v", "error", "-y", "-i", "rtmp://127.0.0.1:\(rtmpPort)/live/sekrit-three", "-t", "9",
                "-c", "copy", pulled,
            ], output: daemon.runtime + "/viewer.out", log: daemon.runtime + "/viewer.log")
        sleep(1)
        srt.stop(crash: true)
        let away = try daemon.waitFor(controller, timeout: 12) { event -> [[String: JSONValue]]? in
            guard case .serviceInfo(let info) = event else { return nil }
            let each = Self.destinations(info.handler)
            return each.count == 2 && each[1]["connected"] == .bool(false) ? each : nil
        }
        #expect(away[0]["connected"] == .bool(true), "\(away)")
        srt = try srtListener(port: srtPort, output: daemon.runtime + "/second.ts", log: daemon.runtime + "/srt.log")
        try daemon.waitFor(controller, timeout: 12) { event -> Bool? in
            guard case .serviceInfo(let info) = event else { return nil }
            let each = Self.destinations(info.handler)
            return each.count == 2 && each[1]["connected"] == .bool(true) && each[1]["reconnects"] == .number(1)
                ? true : nil
        }
        _ = viewer.process.wait()
        #expect(try daemon.awaitFinish(controller, id, timeout: 30) == nil)
        srt.stop()

        let (streams, duration) = try probe(pulled)
        #expect(streams == ["h264,320,180", "aac"], "\(streams)")
        #expect(duration > 8, "the RTMP viewer got \(duration) s of 9")
        let gaps = try largestGaps(pulled)
        #expect(gaps.video < 0.1 && gaps.audio < 0.1, "RTMP had a gap while SRT was away: \(gaps)")
        #expect(
            try probe(daemon.runtime + "/second.ts").streams == ["h264,320,180", "aac"], "SRT after the reconnection")
        let each = Self.results(try controller.status().result)
        #expect(
            each.count == 2 && each[0]["reconnects"] == .number(0) && each[1]["reconnects"] == .number(1), "\(each)")
        try daemon.stop()
    }
}
