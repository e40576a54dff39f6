import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension Integration {
    /// `record` with `--set upload=http://…`: the finished file goes to nginx's WebDAV PUT on loopback (started here
    /// in a private folder, on a free port, stopped by PID), also when nginx dies mid-upload and comes back; a server
    /// that refuses finishes the broadcast with an error and the file stays.
    @Suite(.serialized) struct UploadTests {
        typealias Server = StreamTests.Server

        /// nginx serving `prefix/www`: PUT under /up/, 403 for everything under /forbidden/.
        func nginx(port: Int, prefix: String) throws -> Server {
            try FileManager.default.createDirectory(atPath: prefix + "/www/up", withIntermediateDirectories: true)
            return try Server.nginx(
                prefix: prefix, port: port,
                """
                events { worker_connections 64; }
                http { log_format put '$request $status auth=$http_authorization';
                       access_log \(prefix)/access.log put; \(Server.temporaries(prefix))
                       server { listen 127.0.0.1:\(port); root \(prefix)/www; client_max_body_size 0;
                                location /up/ { dav_methods PUT; create_full_put_path on; dav_access user:rw; }
                                location /forbidden/ { deny all; } } }
                """)
        }

        /// What controllers saw of a recording with `setup`, finished after `seconds`; `during(info)` sees each
        /// service info the handler sent while finishing.
        func record(
            _ daemon: DaemonHarness, to path: String, setup: [String: String], seconds: Double = 3,
            during: ([String: JSONValue]) throws -> Void = { _ in }
        )
            throws -> (finished: FinishedEvent, urls: [String], progress: [[String: JSONValue]])
        {
            let controller = try daemon.subscribedController()
            let id = try daemon.start(handler: "record", url: path, setupInfo: setup, on: controller)
            try daemon.awaitState(controller, .live)
            usleep(UInt32(seconds * 1e6))
            try controller.finish()
            var urls: [String] = []
            var progress: [[String: JSONValue]] = []
            let finished = try daemon.waitFor(controller, timeout: 90) { event -> FinishedEvent? in
                switch event {
                case .urlUpdated(let update): urls.append(update.url)
                case .serviceInfo(let info) where info.handler?["upload"] != nil:
                    progress.append(info.handler!)
                    try? during(info.handler!)
                case .finished(let f) where f.broadcast == id: return f
                default: break
                }
                return nil
            }
            return (finished, urls, progress)
        }

        static let daemonArguments = [
            "--source", "synthetic", "--size", "640x360", "--fps", "30", "--finish-timeout", "2",
        ]

        /// Slower than the 2 s finish timeout (200 kbit/s for about 200 KB): broadcastd waits as long as progress comes.
        @Test func theFinishedFileGoesUpAndItsURLIsPublished() throws {
            let daemon = try DaemonHarness(Self.daemonArguments)
            defer { _ = try? daemon.stop() }
            let port = try StreamTests.freePort(udp: false)
            let server = try nginx(port: port, prefix: daemon.runtime + "/nginx")
            defer { server.stop() }
            let path = daemon.runtime + "/take one.mp4"
            let (finished, urls, progress) = try record(
                daemon, to: path,
                setup: [
                    "upload": "http://127.0.0.1:\(port)/up/", "uploadHeaders": "Authorization: Bearer t0ken",
                    "uploadMaxRate": "200",
                ])
            let url = "http://127.0.0.1:\(port)/up/take%20one.mp4"
            #expect(finished.error == nil, "\(finished.error?.message ?? "")")
            #expect(finished.result?["uploadedURL"] == .string(url) && urls == [url], "\(urls)")
            let sent = try Data(contentsOf: URL(fileURLWithPath: daemon.runtime + "/nginx/www/up/take one.mp4"))
            #expect(
                sent == (try Data(contentsOf: URL(fileURLWithPath: path))),
                "the server has the file, byte for byte; the local copy stays")
            let sending = progress.filter { $0["upload"] == .string("sending") }
            #expect(sending.count >= 2, "progress about once a second: \(progress)")
            #expect(
                sending.allSatisfy {
                    number($0["uploadedBytes"]) <= number($0["uploadBytes"]) && $0["uploadETA"] != nil
                })
            #expect(
                sending.contains { (15_000...40_000).contains(number($0["uploadRate"])) }, "about 25 kB/s: \(sending)")
            let log = try String(contentsOfFile: daemon.runtime + "/nginx/access.log", encoding: .utf8)
            #expect(
                log.contains("PUT /up/take%20one.mp4 HTTP/1.1 201 auth=Bearer t0ken"), "the header went with it: \(log)"
            )
            #expect(!daemon.log.contains("t0ken"), "the token is a secret")
            // `record` says where the file went, beside where it is.
            let second = daemon.runtime + "/second.mp4"
            let said = try daemon.tool(
                "broadcastctl",
                [
                    "record", second, "--duration", "1",
                    "--set", "upload=http://127.0.0.1:\(port)/up/",
                ])
            // A second; shared (the default), from the encoder's first frame, a tenth or so after the broadcast began.
            #expect(
                said.status == 0
                    && (said.stdout.contains("\nsaved \(second) (0:01.")
                        || said.stdout.contains("\nsaved \(second) (0:00.9"))
                    && said.stdout.hasSuffix("\nuploaded to http://127.0.0.1:\(port)/up/second.mp4\n"), "\(said)")
        }

        @Test func aServerThatDropsTheConnectionMidUploadIsTriedAgain() throws {
            let daemon = try DaemonHarness(Self.daemonArguments)
            defer { _ = try? daemon.stop() }
            let port = try StreamTests.freePort(udp: false)
            let prefix = daemon.runtime + "/nginx"
            var server = try nginx(port: port, prefix: prefix)
            defer { server.stop() }
            let path = daemon.runtime + "/dropped.mkv"
            var restarted = false
            let (finished, _, progress) = try record(
                daemon, to: path, setup: ["upload": "http://127.0.0.1:\(port)/up/", "uploadMaxRate": "200"]
            ) { info in
                guard !restarted, info["upload"] == .string("sending"), number(info["uploadedBytes"]) > 10_000 else {
                    return
                }
                restarted = true
                server.stop(crash: true)  // the connection goes with it
                server = try nginx(port: port, prefix: prefix)
            }
            #expect(restarted, "nginx was killed mid-upload: \(progress)")
            #expect(finished.error == nil, "\(finished.error?.message ?? "")")
            guard case .object(let upload)? = finished.result?["upload"] else {
                Issue.record("no upload in \(String(describing: finished.result))")
                return
            }
            #expect(number(upload["attempts"]) == 2, "\(upload)")
            #expect(progress.contains { $0["upload"] == .string("waiting to retry") })
            let sent = try Data(contentsOf: URL(fileURLWithPath: prefix + "/www/up/dropped.mkv"))
            #expect(
                sent == (try Data(contentsOf: URL(fileURLWithPath: path))), "the whole file, sent again from its start")
        }

        @Test func aServerThatRefusesFinishesWithAnErrorAndTheFileStays() throws {
            let daemon = try DaemonHarness(Self.daemonArguments)
            defer { _ = try? daemon.stop() }
            let port = try StreamTests.freePort(udp: false)
            let server = try nginx(port: port, prefix: daemon.runtime + "/nginx")
            defer { server.stop() }
            let path = daemon.runtime + "/refused.mp4"
            let (finished, urls, _) = try record(
                daemon, to: path, setup: ["upload": "http://127.0.0.1:\(port)/forbidden/"], seconds: 2)
            let message = finished.error?.message ?? ""
            #expect(
                message.contains(
                    "upload \(path) to http://127.0.0.1:\(port)/forbidden/refused.mp4: the server answered HTTP 403"),
                "\(message)")
            #expect(
                message.contains("the recording stays in \(path)") && !message.contains("attempts"),
                "refused: not tried again")
            #expect(FileManager.default.fileExists(atPath: path) && urls.isEmpty)
            #expect(finished.result?["file"] == .string(path) && finished.result?["uploadedURL"] == nil)
        }
    }
}
