import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Testing

/// The `stream` handler against real media servers on loopback: srt-live-transmit and nginx-rtmp,
/// started and stopped here; what they receive is judged by ffprobe.
extension Integration {
    @Suite(.serialized) struct StreamTests {
        /// A server program with its stdout in `output` and its stderr in `log`.
        final class Server {
            let process: ChildProcess
            let log: String

            init(_ program: String, _ arguments: [String], output: String, log: String) throws {
                guard let path = program.hasPrefix("/") ? program : FileSystem.findProgram(program) else {
                    throw HarnessError(
                        "\(program) is not installed (scripts/test.sh installs srt-tools, nginx and libnginx-mod-rtmp)")
                }
                let out = Descriptor(adopting: open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644))
                let err = Descriptor(adopting: open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644))
                process = try ChildProcess(
                    path: path, arguments: arguments, environment: ["PATH": "/usr/bin:/bin:/usr/sbin"],
                    passing: [(out, 1), (err, 2)])
                self.log = log
            }

            /// SIGINT (a clean stop: srt-live-transmit flushes what it received), or SIGKILL for a crash.
            func stop(crash: Bool = false) {
                guard process.reap() == nil else { return }
                process.send(signal: crash ? SIGKILL : SIGINT)
                let deadline = Date().addingTimeInterval(5)
                while process.reap() == nil && Date() < deadline { usleep(20_000) }
                if process.reap() == nil {
                    process.send(signal: SIGKILL)
                    _ = process.wait()
                }
            }

            deinit { stop(crash: true) }

            /// nginx in the foreground with everything it writes under `prefix`: `modules` loaded, then `config`
            /// (its events and http/rtmp blocks; `temporaries(prefix)` for an http block's paths); returned once it
            /// accepts connections on `port`.
            static func nginx(prefix: String, port: Int, modules: [String] = [], _ config: String) throws -> Server {
                let loads = modules.map { "load_module /usr/lib/nginx/modules/\($0).so;\n" }.joined()
                try """
                \(loads)daemon off;
                master_process off;
                worker_processes 1;
                pid \(prefix)/nginx.pid;
                error_log \(prefix)/error.log info;
                \(config)
                """.write(toFile: prefix + "/nginx.conf", atomically: true, encoding: .utf8)
                let server = try Server(
                    "nginx", ["-p", prefix, "-c", prefix + "/nginx.conf"], output: prefix + "/stdout",
                    log: prefix + "/stderr")
                let deadline = Date().addingTimeInterval(5)
                while !StreamTests.accepts(port: port) {
                    guard Date() < deadline else {
                        throw HarnessError("nginx did not listen on \(port): \(server.log)")
                    }
                    usleep(20_000)
                }
                return server
            }

            /// An http block's temporary files, under `prefix`.
            static func temporaries(_ prefix: String) -> String {
                ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map { "\($0)_temp_path \(prefix);" }.joined(
                    separator: " ")
            }
        }

        /// A UDP or TCP port on loopback that nothing is bound to now.
        /// The first of `count` consecutive free ports.
        static func freePort(udp: Bool, count: Int = 1) throws -> Int {
            // Below the kernel's ephemeral ports, which any outgoing connection may take (even one of the
            // stream handler's own attempts at this port while its server is away): then a server restarted
            // on it cannot bind.
            let ephemeral =
                (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))
                .flatMap { $0.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } } ?? 32768
            for _ in 0..<50 {
                let first = Int.random(in: 10000...max(10001, ephemeral - count - 1))
                if (0..<count).allSatisfy({ (try? freePort(udp: udp, candidate: first + $0)) != nil }) { return first }
            }
            throw HarnessError("no free loopback port found")
        }

        func srtListener(port: Int, output: String, log: String) throws -> Server {
            try Server(
                "srt-live-transmit", ["-q", "srt://:\(port)?mode=listener", "file://con"], output: output, log: log)
        }

        func probe(_ path: String) throws -> (streams: [String], duration: Double) {
            let result = try runTool(
                "/usr/bin/env",
                [
                    "ffprobe", "-v", "error", "-show_entries", "format=duration:stream=codec_name,width,height",
                    "-of", "csv=p=0", path,
                ])
            #expect(result.status == 0, "ffprobe \(path): \(result.stderr)")
            let lines = result.stdout.split(separator: "\n").map(String.init)
            let duration = lines.last.flatMap(Double.init) ?? 0
            // MPEG-TS lists its streams twice (in its program, then on their own).
            var streams: [String] = []
            for line in lines where Double(line) == nil && !line.isEmpty && !streams.contains(line) {
                streams.append(line)
            }
            return (streams, duration)
        }

        /// Until `port` is bound (UDP) or accepts connections (TCP: a bind could fail on a crashed server's
        /// connections alone).
        func waitForListening(_ server: Server, port: Int, tcp: Bool) throws {
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline {
                if tcp ? Self.accepts(port: port) : (try? Self.freePort(udp: true, candidate: port)) == nil { return }
                usleep(20_000)
            }
            throw HarnessError(
                "the server did not listen on \(port):\n\((try? String(contentsOfFile: server.log, encoding: .utf8)) ?? "")"
            )
        }

        @Test(arguments: ["h264", "hevc"]) func srtCarriesH264OrHEVCAndOpusThatFFprobeDecodes(_ codec: String) throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360"])
            let port = try Self.freePort(udp: true)
            let received = daemon.runtime + "/received.ts"
            let server = try srtListener(port: port, output: received, log: daemon.runtime + "/srt.log")
            try waitForListening(server, port: port, tcp: false)
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "stream", url: "srt://127.0.0.1:\(port)", setupInfo: ["codec": codec], maxDuration: 3,
                on: controller)
            #expect(try daemon.awaitFinish(controller, id) == nil)
            server.stop()
            let (streams, duration) = try probe(received)
            #expect(streams == ["\(codec),640,360", "opus"], "\(streams)")
            #expect(abs(duration - 3) < 0.5, "received \(duration) s of a 3 s broadcast")
            let file = Recording(path: received, scratch: daemon.runtime)
            let keyframes = try file.keyframeTimes().keyframes
            #expect(try file.longestKeyframeGap() <= 2 + 1.0 / 30 + 0.001, "keyframes at \(keyframes)")
            let result = try controller.status().result
            #expect(
                result?["reconnects"] == .number(0) && result?["droppedVideoFrames"] == .number(0),
                "\(String(describing: result))")
            try daemon.stop()
        }

        /// nginx with its RTMP module on loopback `port`, application `live`; publishing needs a stream key
        /// that starts with "sekrit-" (checked by nginx itself over HTTP on `port + 1`).
        func nginx(port: Int, in runtime: String) throws -> Server {
            let prefix = runtime + "/nginx"
            try FileManager.default.createDirectory(atPath: prefix + "/logs", withIntermediateDirectories: true)
            return try Server.nginx(
                prefix: prefix, port: port, modules: ["ngx_rtmp_module"],
                """
                events { worker_connections 64; }
                rtmp { server { listen 127.0.0.1:\(port); notify_method get;
                       application live { live on; on_publish http://127.0.0.1:\(port + 1)/auth; } } }
                http { access_log off; \(Server.temporaries(prefix))
                       server { listen 127.0.0.1:\(port + 1);
                                location = /auth { if ($arg_name ~ ^sekrit-) { return 204; } return 403; } } }
                """)
        }

        /// Pulls `seconds` of the live stream back from nginx with ffmpeg.
        func pull(port: Int, key: String, seconds: Double, to path: String) throws {
            let pull = try runTool(
                "/usr/bin/env",
                [
                    "ffmpeg", "-v", "error", "-y", "-i", "rtmp://127.0.0.1:\(port)/live/\(key)", "-t", String(seconds),
                    "-c", "copy", path,
                ],
                timeout: 20)
            #expect(pull.status == 0, "ffmpeg could not pull the stream: \(pull.stderr)")
        }

        @Test func rtmpToNginxWithAStreamKeyThatStaysSecret() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360"])
            let port = try Self.freePort(udp: false, count: 2)
            let nginx = try nginx(port: port, in: daemon.runtime)

            let controller = try daemon.subscribedController()
            let key = "sekrit-\(UUID().uuidString.prefix(6))"
            let id = try daemon.start(
                handler: "stream", url: "rtmp://127.0.0.1:\(port)/live",
                setupInfo: ["key": key, "publicURL": "https://watch.example/abc"], maxDuration: 4, on: controller)
            try daemon.awaitState(controller, .live)
            // The address viewers watch reaches controllers as the broadcast URL (URL_UPDATED, then in the status).
            #expect(try controller.status().url == "https://watch.example/abc")
            // Pull the stream back while it is live.
            sleep(1)
            let pulled = daemon.runtime + "/pulled.flv"
            try pull(port: port, key: key, seconds: 1.5, to: pulled)
            #expect(try daemon.awaitFinish(controller, id) == nil)
            let (streams, _) = try probe(pulled)
            #expect(streams == ["h264,640,360", "aac"], "\(streams)")
            // The key went to the server and nowhere else.
            #expect(!daemon.log.contains(key), "the stream key is in the daemon's log")
            #expect(!compactJSON(try controller.status()).contains(key), "the stream key is in the status")

            // A wrong stream key is refused by the server: a clear error, quickly, without the key.
            let wrongKey = try daemon.start(
                handler: "stream", url: "rtmp://127.0.0.1:\(port)/live",
                setupInfo: ["key": "wrong-key", "reconnectFor": "1"],
                maxDuration: 20, on: controller)
            let keyError = try daemon.awaitFinish(controller, wrongKey)
            #expect(
                keyError?.message.contains("cannot stream to rtmp://127.0.0.1:\(port)/live:") == true,
                "\(String(describing: keyError))")
            #expect(keyError?.message.contains("stream key are right") == true)
            #expect(keyError?.message.contains("wrong-key") == false && !daemon.log.contains("wrong-key"))

            // A wrong application is refused by the server too.
            let refused = try daemon.start(
                handler: "stream", url: "rtmp://127.0.0.1:\(port)/nope", setupInfo: ["key": key, "reconnectFor": "1"],
                maxDuration: 20, on: controller)
            let error = try daemon.awaitFinish(controller, refused)
            #expect(
                error?.message.contains("cannot stream to rtmp://127.0.0.1:\(port)/nope") == true,
                "\(String(describing: error))")
            #expect(error?.message.contains("check that the server runs") == true)
            #expect(error?.message.contains(key) == false)

            // The key in the URL itself, after a password: neither is in the status (broadcastctl's too), any event,
            // the result or the log (the status showed the password, events and the result the key).
            let secretURL = "rtmp://user:PASSWORD@127.0.0.1:\(port)/live/\(key)"
            let inURL = try daemon.start(handler: "stream", url: secretURL, maxDuration: 3, on: controller)
            var shown: [String] = []
            var finished = false
            let deadline = Date().addingTimeInterval(30)
            while !finished && Date() < deadline {
                guard let event = try controller.nextEvent(timeoutMilliseconds: 100) else { continue }
                shown.append("\(event)")
                if case .finished(let f) = event, f.broadcast == inURL { finished = true }
                if case .stateChanged(let s) = event, s.state == .live, s.broadcast == inURL {
                    shown += [
                        compactJSON(try controller.status()), try daemon.tool("broadcastctl", ["status"]).stdout,
                        try daemon.tool("broadcastctl", ["status", "--json"]).stdout,
                    ]
                }
            }
            #expect(finished && shown.count > 4, "\(shown)")
            shown += [compactJSON(try controller.status()), daemon.log]
            #expect(shown.contains { $0.contains("rtmp://***@127.0.0.1:\(port)/live/***") }, "\(shown)")
            for text in shown { #expect(!text.contains("PASSWORD") && !text.contains(key), "\(text)") }
            nginx.stop()
            try daemon.stop()
        }

        @Test func aServerThatGoesAwayAndComesBackIsReconnectedAndMemoryStaysBounded() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360"])
            let port = try Self.freePort(udp: false, count: 2)
            var server = try nginx(port: port, in: daemon.runtime)
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "stream", url: "rtmp://127.0.0.1:\(port)/live",
                setupInfo: ["key": "sekrit-k", "maxQueue": "1"],
                maxDuration: 11, on: controller)
            try daemon.awaitState(controller, .live)
            sleep(2)
            let handler = try #require(daemon.children().first)
            let before = Self.residentKiB(handler)
            server.stop(crash: true)
            // 3 s without a server: connections are refused, the 1 s queue overflows and drops whole GOPs.
            usleep(3_000_000)
            let during = Self.residentKiB(handler)
            let daemonDuring = try controller.status().daemonMemory ?? 0
            server = try nginx(port: port, in: daemon.runtime)
            // Pulled once the handler says it is connected again (backoff may be 4 s by then: a pull that starts
            // before the publisher is back can miss its AVC sequence header and see h264 0x0).
            try daemon.waitFor(controller, timeout: 10) { event -> Bool? in
                guard case .serviceInfo(let info) = event, info.handler?["connected"] == .bool(true),
                    info.handler?["reconnects"] == .number(1)
                else { return nil }
                return true
            }
            let after = daemon.runtime + "/after.flv"
            try pull(port: port, key: "sekrit-k", seconds: 1, to: after)
            #expect(
                try daemon.awaitFinish(controller, id, timeout: 30) == nil,
                "an outage shorter than reconnectFor is not an error")
            server.stop()
            let result = try #require(try controller.status().result)
            guard case .number(let reconnects)? = result["reconnects"],
                case .number(let dropped)? = result["droppedVideoFrames"]
            else {
                Issue.record("no reconnects/droppedVideoFrames in \(result)")
                return
            }
            #expect(reconnects >= 1, "\(result)")
            #expect(dropped > 0, "the outage dropped nothing: \(result)")
            let (streams, _) = try probe(after)
            #expect(streams == ["h264,640,360", "aac"], "after the reconnection: \(streams)")
            #expect(
                during < before + 30_000,
                "the handler grew from \(before) KiB to \(during) KiB while the server was away")
            #expect(daemonDuring < 50 << 20, "broadcastd at \(daemonDuring) bytes")
            try daemon.stop()
        }

        static func residentKiB(_ pid: Int32) -> Int {
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
    }
}

extension Integration.StreamTests {
    static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = loopback(port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        } == 0
    }

    /// Throws when `candidate` cannot be bound (something listens there).
    static func freePort(udp: Bool, candidate: Int) throws -> Int {
        let fd = socket(AF_INET, udp ? Int32(SOCK_DGRAM.rawValue) : Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = loopback(candidate)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw HarnessError("port \(candidate) is taken") }
        return candidate
    }
}
