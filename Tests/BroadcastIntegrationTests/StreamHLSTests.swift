import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Testing

extension Integration {
    /// The `stream` handler's HLS (libavformat's hls muxer, fMP4 segments): into a private directory that nginx serves
    /// to many viewers at once (light Python clients following the live playlist, and ffmpeg decoders), and by PUT and
    /// DELETE to nginx's WebDAV. The number of viewers and how long they watch: BROADCASTD_HLS_VIEWERS (50) and
    /// BROADCASTD_HLS_SECONDS (12).
    @Suite(.serialized) struct StreamHLSTests {
        typealias Server = StreamTests.Server
        let streamTests = StreamTests()

        static var viewers: Int {
            ProcessInfo.processInfo.environment["BROADCASTD_HLS_VIEWERS"].flatMap(Int.init) ?? 50
        }
        static var seconds: Double {
            ProcessInfo.processInfo.environment["BROADCASTD_HLS_SECONDS"].flatMap(Double.init) ?? 12
        }

        /// nginx on loopback `port` serving `prefix/www`, HLS types, not cached under /live/; WebDAV PUT and DELETE under
        /// /dav/; under /refused/ every request answered 403; with `smallRoot`, WebDAV under /small/ into that folder
        /// (a small disk: a PUT that does not fit is answered 500).
        func nginx(port: Int, prefix: String, smallRoot: String? = nil) throws -> Server {
            try FileManager.default.createDirectory(atPath: prefix + "/www/dav", withIntermediateDirectories: true)
            let small =
                smallRoot.map {
                    "location /small/ { alias \($0)/; dav_methods PUT DELETE; create_full_put_path on; "
                        + "client_body_temp_path \($0)/.put; }"
                } ?? ""
            return try Server.nginx(
                prefix: prefix, port: port,
                """
                events { worker_connections 512; }
                http { log_format hls '$request $status'; access_log \(prefix)/access.log hls;
                       \(Server.temporaries(prefix))
                       types { application/vnd.apple.mpegurl m3u8; video/iso.segment m4s; video/mp4 mp4; }
                       server { listen 127.0.0.1:\(port); root \(prefix)/www; client_max_body_size 0;
                                location /live/ { add_header Cache-Control no-cache; }
                                location /dav/ { dav_methods PUT DELETE; create_full_put_path on;
                                                 dav_access user:rw all:r; }
                                location /refused/ { return 403; }
                                \(small) } }
                """)
        }

        /// The durations a playlist gives its segments (#EXTINF), s.
        static func segmentDurations(_ playlist: String) -> [Double] {
            playlist.split(separator: "\n").compactMap { line in
                line.hasPrefix("#EXTINF:") ? Double(line.dropFirst(8).prefix { $0 != "," }) : nil
            }
        }

        static func segments(in directory: String) -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".m4s") }
        }

        /// A stream whose last frame falls on a keyframe's time (4 s of 30 fps: its 121st frame, at 4.0 s, a segment's
        /// start) does not send it: the playlist does not end on a segment of one frame (it ended "#EXTINF:0.000000").
        @Test func theLastSegmentIsNeverOneFrame() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
            defer { _ = try? daemon.stop() }
            let folder = daemon.runtime + "/live"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            for seconds in ["4", "6"] {
                let streamed = try daemon.tool(
                    "broadcastctl",
                    [
                        "stream", "hls://\(folder)/s\(seconds).m3u8",
                        "--duration", seconds,
                    ])
                #expect(streamed.status == 0, "\(streamed)")
                let playlist = try String(contentsOfFile: "\(folder)/s\(seconds).m3u8", encoding: .utf8)
                let durations = Self.segmentDurations(playlist)
                #expect(!durations.isEmpty && durations.allSatisfy { $0 > 1.9 }, "\(seconds) s: \(durations)")
            }
        }

        /// `ffmpeg` reading the live playlist for `seconds`, its packets copied into `output` (MPEG-TS).
        func decoder(_ url: String, seconds: Double, output: String, log: String) throws -> Server {
            try Server(
                "ffmpeg",
                ["-nostdin", "-v", "error", "-y", "-i", url, "-t", String(seconds), "-map", "0", "-c", "copy", output],
                output: log + ".out", log: log)
        }

        @Test func hlsInADirectoryThatNginxServesToManyViewers() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
            let port = try StreamTests.freePort(udp: false)
            let prefix = daemon.runtime + "/nginx"
            let server = try nginx(port: port, prefix: prefix)
            defer { server.stop() }
            let directory = prefix + "/www/live"
            let url = "http://127.0.0.1:\(port)/live/index.m3u8"
            let controller = try daemon.subscribedController()
            let seconds = Self.seconds
            let id = try daemon.start(
                handler: "stream", url: "hls://\(directory)/index.m3u8",
                setupInfo: ["playlistLength": "4", "publicURL": url], maxDuration: seconds + 10, on: controller)
            // The playlist's first version lists a segment once the first one is done (2 s).
            let published = try daemon.waitFor(controller, timeout: 15) { event -> String? in
                guard case .serviceInfo(let info) = event, case .string(let url)? = info.handler?["publicURL"],
                    FileManager.default.fileExists(atPath: directory + "/index.m3u8")
                else { return nil }
                return url
            }
            #expect(published == url)
            #expect(try controller.status().url == url)
            // Viewers and two ffmpeg decoders at once; the segments on disk counted meanwhile.
            let decoders = try (0..<2).map {
                try decoder(
                    url, seconds: seconds - 2, output: daemon.runtime + "/decoded\($0).ts",
                    log: daemon.runtime + "/ffmpeg\($0).log")
            }
            let viewers = try Server(
                "python3", [Paths.root + "/Tests/fixtures/hls_viewers.py", url, String(Self.viewers), String(seconds)],
                output: daemon.runtime + "/viewers.json", log: daemon.runtime + "/viewers.log")
            var mostSegments = 0
            while viewers.process.reap() == nil {
                mostSegments = max(mostSegments, Self.segments(in: directory).count)
                usleep(200_000)
            }
            for decoder in decoders { _ = decoder.process.wait() }
            #expect(try daemon.awaitFinish(controller, id, timeout: 30) == nil)

            // Every viewer got every segment from where it joined, each an fMP4 fragment, without an error.
            let reports =
                try JSONSerialization.jsonObject(
                    with: Data(contentsOf: URL(fileURLWithPath: daemon.runtime + "/viewers.json"))) as? [[String: Any]]
            #expect(
                reports?.count == Self.viewers,
                "\((try? String(contentsOfFile: daemon.runtime + "/viewers.log", encoding: .utf8)) ?? "")")
            let expected = Int(seconds / 2) - 2
            for (index, report) in (reports ?? []).enumerated() {
                let fetched = report["segments"] as? Int ?? 0
                let missed = report["missed"] as? Int ?? -1
                let errors = report["errors"] as? [String] ?? ["?"]
                let bad = report["badSegments"] as? Int ?? -1
                #expect(fetched >= expected && missed == 0 && errors.isEmpty && bad == 0, "viewer \(index): \(report)")
            }
            // The decoders saw continuous video and audio (30 fps; AAC every 21 ms).
            for index in 0..<2 {
                let path = daemon.runtime + "/decoded\(index).ts"
                let log = (try? String(contentsOfFile: daemon.runtime + "/ffmpeg\(index).log", encoding: .utf8)) ?? ""
                let (streams, duration) = try streamTests.probe(path)
                #expect(streams == ["h264,320,180", "aac"], "decoder \(index): \(streams) \(log)")
                #expect(duration >= seconds - 4, "decoder \(index) got \(duration) s: \(log)")
                let gaps = try streamTests.largestGaps(path)
                #expect(gaps.video < 0.1 && gaps.audio < 0.1, "decoder \(index): \(gaps)")
                let decoded = try runTool("/usr/bin/env", ["ffmpeg", "-v", "error", "-i", path, "-f", "null", "-"])
                #expect(decoded.status == 0 && decoded.stderr.isEmpty, "decoder \(index): \(decoded.stderr)")
            }
            // A sliding playlist of 4, old segments deleted (one more waits for deletion; the one in writing is a .tmp).
            #expect(
                mostSegments >= 4 && mostSegments <= 5,
                "\(mostSegments) segments on disk at most: \(Self.segments(in: directory).sorted())")
            #expect(Self.segments(in: directory).count <= 5, "at the end: \(Self.segments(in: directory).sorted())")
            let playlist = try String(contentsOfFile: directory + "/index.m3u8", encoding: .utf8)
            #expect(
                playlist.contains("#EXT-X-INDEPENDENT-SEGMENTS")
                    && playlist.contains("#EXT-X-MAP:URI=\"index-init.mp4\""), "\(playlist)")
            #expect(
                playlist.contains("#EXT-X-ENDLIST"), "the playlist is closed when the broadcast finishes: \(playlist)")
            #expect(Self.segmentDurations(playlist).allSatisfy { $0 <= 2 + 1.0 / 30 + 0.001 }, "\(playlist)")
            #expect(!FileManager.default.fileExists(atPath: directory + "/index.m3u8.tmp"))
            try daemon.stop()
        }

        @Test func hlsByPutAndDeleteToAnHTTPOrigin() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
            let port = try StreamTests.freePort(udp: false)
            let prefix = daemon.runtime + "/nginx"
            let server = try nginx(port: port, prefix: prefix)
            defer { server.stop() }
            let url = "http://127.0.0.1:\(port)/dav/live/index.m3u8"
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "stream", url: url, setupInfo: ["segmentDuration": "1", "playlistLength": "3"], maxDuration: 8,
                on: controller)
            try daemon.awaitState(controller, .live)
            // The origin's playlist is what viewers load.
            #expect(try controller.status().url == url)
            let origin = prefix + "/www/dav/live"
            let first = Date().addingTimeInterval(10)
            while !FileManager.default.fileExists(atPath: origin + "/index.m3u8") && Date() < first { usleep(100_000) }
            var mostSegments = 0
            let decoder = try decoder(
                url, seconds: 3, output: daemon.runtime + "/decoded.ts", log: daemon.runtime + "/ffmpeg.log")
            let deadline = Date().addingTimeInterval(12)
            while decoder.process.reap() == nil && Date() < deadline {
                mostSegments = max(mostSegments, Self.segments(in: origin).count)
                usleep(200_000)
            }
            #expect(try daemon.awaitFinish(controller, id, timeout: 30) == nil)
            let (streams, duration) = try streamTests.probe(daemon.runtime + "/decoded.ts")
            #expect(streams == ["h264,320,180", "aac"], "\(streams)")
            #expect(duration >= 2.5, "the decoder got \(duration) s")
            // Old segments are deleted from the origin (DELETE) as the playlist slides.
            let access = (try? String(contentsOfFile: prefix + "/access.log", encoding: .utf8)) ?? ""
            #expect(
                access.contains("PUT /dav/live/index.m3u8 HTTP/1.1 201")
                    || access.contains("PUT /dav/live/index.m3u8 HTTP/1.1 204"), "\(access)")
            // (DELETE goes without a body: nginx refuses one with a body, even an empty chunked one, 415.)
            #expect(access.contains("DELETE /dav/live/index") && !access.contains(" 415"), "\(access)")
            #expect(mostSegments >= 3 && mostSegments <= 5, "\(mostSegments) segments on the origin at most")
            let playlist = try String(contentsOfFile: origin + "/index.m3u8", encoding: .utf8)
            #expect(
                Self.segmentDurations(playlist).allSatisfy { $0 <= 1 + 1.0 / 30 + 0.001 },
                "segmentDuration 1: \(playlist)")
            let left = Self.segments(in: origin).count
            #expect(left <= 5, "\(left) segments left on the origin")
            try daemon.stop()
        }
        /// An HTTP origin that refuses (403) ends the broadcast at once with an error naming the status and the file's URL,
        /// its credentials masked: libavformat's http threw the origin's answers away, and the broadcast went on, unseen.
        @Test func anHTTPOriginThatRefusesEndsTheBroadcastNamingTheStatusAndTheURL() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
            defer { _ = try? daemon.stop() }
            let port = try StreamTests.freePort(udp: false)
            let server = try nginx(port: port, prefix: daemon.runtime + "/nginx")
            defer { server.stop() }
            let controller = try daemon.subscribedController()
            let started = Date()
            let id = try daemon.start(
                handler: "stream",
                url: "http://user:sekrit@127.0.0.1:\(port)/refused/live/index.m3u8",
                setupInfo: ["segmentDuration": "1", "reconnectFor": "30"], maxDuration: 60,
                on: controller)
            let error = try daemon.awaitFinish(controller, id, timeout: 45)
            // A refusal is not tried again for reconnectFor (30 s).
            #expect(Date().timeIntervalSince(started) < 20, "\(Date().timeIntervalSince(started)) s")
            let message = error?.message ?? ""
            #expect(
                error?.code == .handlerError
                    && message.contains("HTTP 403 Forbidden for http://***@127.0.0.1:\(port)/refused/live/index"),
                "\(String(describing: error))")
            let shown = daemon.log.split(separator: "\n").filter { $0.contains("sekrit") }
            #expect(!message.contains("sekrit") && shown.isEmpty, "\(shown)")
        }

        /// An HTTP origin whose disk is full (nginx answers 500) is said to be so in service info and tried again; stored
        /// to again once there is room; given up after reconnectFor with an error naming the status and the URL. The
        /// origin's playlist is never empty and names only segments that are there.
        @Test func anHTTPOriginOnAFullDiskIsTriedAgainThenGivenUpNeverWithAnEmptyPlaylist() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
            defer { _ = try? daemon.stop() }
            let disk = try daemon.smallDisk("4m")
            try FileManager.default.createDirectory(atPath: disk + "/.put", withIntermediateDirectories: true)
            let port = try StreamTests.freePort(udp: false)
            let server = try nginx(port: port, prefix: daemon.runtime + "/nginx", smallRoot: disk)
            defer { server.stop() }
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "stream", url: "http://127.0.0.1:\(port)/small/live/index.m3u8",
                setupInfo: ["segmentDuration": "1", "playlistLength": "3", "reconnectFor": "8"],
                maxDuration: 60, on: controller)
            let playlist = disk + "/live/index.m3u8"
            let filler = disk + "/filler"
            var playlists: [String] = []
            func fill() throws {
                let filled = try runTool("/usr/bin/dd", ["if=/dev/zero", "of=" + filler, "bs=64k"])
                #expect(filled.stderr.contains("No space left on device"), "\(filled.stderr)")
            }
            /// The next service info or FINISHED event of the broadcast that `matches`, the playlist read meanwhile.
            func watch<T>(_ what: String, timeout: Double = 20, _ matches: (ControllerClient.Event) -> T?) throws -> T {
                let deadline = Date().addingTimeInterval(timeout)
                while Date() < deadline {
                    if let text = try? String(contentsOfFile: playlist, encoding: .utf8) { playlists.append(text) }
                    if let event = try controller.nextEvent(timeoutMilliseconds: 50), let found = matches(event) {
                        return found
                    }
                }
                throw HarnessError("no \(what) within \(timeout) s")
            }
            func lastError(_ event: ControllerClient.Event) -> String?? {
                guard case .serviceInfo(let info) = event, info.broadcast == id else { return nil }
                if case .string(let error)? = info.handler?["lastError"] { return .some(error) }
                return .some(nil)
            }
            _ = try watch("a playlist on the origin") { _ in
                playlists.last.map { $0.contains(".m4s") } == true ? true : nil
            }
            try fill()
            let retrying = try watch("service info saying the origin fails") { lastError($0).flatMap { $0 } }
            #expect(
                retrying.contains("HTTP 500 Internal Server Error for http://127.0.0.1:\(port)/small/live/index")
                    && retrying.contains("trying again"), "\(retrying)")
            // Room again: the origin is stored to again, and service info says nothing is wrong.
            try FileManager.default.removeItem(atPath: filler)
            let stored = playlists.last ?? ""
            _ = try watch("service info without an error") { event in
                lastError(event).map { $0 == nil && playlists.last != stored } == true ? true : nil
            }
            try fill()
            let finished = try watch("the broadcast's end", timeout: 30) { event -> FinishedEvent? in
                if case .finished(let f) = event, f.broadcast == id { f } else { nil }
            }
            let message = finished.error?.message ?? ""
            #expect(
                finished.error?.code == .handlerError
                    && message.contains(
                        "for 8 s: HTTP 500 Internal Server Error for http://127.0.0.1:\(port)/small/live/"),
                "\(String(describing: finished.error))")
            #expect(
                !playlists.isEmpty && playlists.allSatisfy { $0.hasPrefix("#EXTM3U") },
                "a playlist was empty or cut: \(playlists.filter { !$0.hasPrefix("#EXTM3U") })")
            let named = (playlists.last ?? "").split(separator: "\n").filter { $0.hasSuffix(".m4s") }
            let missing = named.filter { !FileManager.default.fileExists(atPath: disk + "/live/" + $0) }
            #expect(!named.isEmpty && missing.isEmpty, "the playlist names segments that are not there: \(missing)")
        }

        /// Into a small tmpfs the playlist ended at 0 bytes (or stale), the broadcast stayed live and finished without
        /// an error, and nothing was logged.
        @Test func hlsOnAFullDiskSaysSoAndFinishesWithTheCauseNeverWithAnEmptyPlaylist() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
            defer { _ = try? daemon.stop() }
            let mount = try daemon.smallDisk("64k")
            let playlist = mount + "/live/index.m3u8"
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "stream", url: "hls://" + playlist,
                setupInfo: ["segmentDuration": "2", "playlistLength": "3", "reconnectFor": "3"], maxDuration: 40,
                on: controller)
            var reported: String?
            var finished: FinishedEvent?
            var playlists: [String] = []
            let deadline = Date().addingTimeInterval(60)
            while finished == nil && Date() < deadline {
                if let text = try? String(contentsOfFile: playlist, encoding: .utf8) { playlists.append(text) }
                switch try controller.nextEvent(timeoutMilliseconds: 50) {
                case .serviceInfo(let info)?:
                    if case .string(let error)? = info.handler?["lastError"] { reported = reported ?? error }
                case .finished(let f)? where f.broadcast == id: finished = f
                default: break
                }
            }
            #expect(reported?.contains("disk is full") == true, "service info said \(String(describing: reported))")
            #expect(
                finished?.error?.code == .handlerError && finished?.error?.message.contains("disk is full") == true,
                "\(String(describing: finished))")
            if let text = try? String(contentsOfFile: playlist, encoding: .utf8) { playlists.append(text) }
            #expect(
                !playlists.isEmpty && playlists.allSatisfy { $0.hasPrefix("#EXTM3U") },
                "a playlist was empty or cut: \(playlists.filter { !$0.hasPrefix("#EXTM3U") })")
            #expect(daemon.log.contains("disk is full"))
        }

        /// Two broadcasts into one playlist were both accepted and collided; segment files of the names the muxer chose
        /// (index<epoch+n>.m4s) that were there already were written over and then deleted.
        @Test func anHLSFolderIsOneStreamsAndFilesItDidNotWriteAreLeftAlone() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let folder = daemon.runtime + "/live"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            // The names the next minute's segments would take, each another's.
            let now = Int(Date().timeIntervalSince1970)
            let foreign = (now...(now + 60)).map { folder + "/index\($0).m4s" }
            for path in foreign { try "another stream's".write(toFile: path, atomically: false, encoding: .utf8) }
            let collided = try daemon.start(
                handler: "stream", url: "hls://\(folder)/index.m3u8", setupInfo: ["reconnectFor": "2"],
                maxDuration: 20, on: controller)
            let error = try daemon.awaitFinish(controller, collided, timeout: 30)
            #expect(
                error?.message.contains("a segment of that name is there already and was not written by this stream")
                    == true,
                "\(String(describing: error))")
            #expect(
                foreign.allSatisfy { (try? String(contentsOfFile: $0, encoding: .utf8)) == "another stream's" },
                "a segment was written over or deleted")
            for path in foreign { try FileManager.default.removeItem(atPath: path) }

            // One stream at a time: the second is refused naming the first's lock; a lock of a process that is gone is taken over.
            try "999999999\n".write(toFile: folder + "/index.m3u8.lock", atomically: false, encoding: .utf8)
            let first = try daemon.start(
                handler: "stream", url: "hls://\(folder)/index.m3u8", maxDuration: 6, on: controller)
            try daemon.awaitState(controller, .live)
            let second = try daemon.start(
                handler: "stream", url: "hls://\(folder)/index.m3u8", maxDuration: 6, on: controller)
            let refused = try daemon.awaitFinish(controller, second)
            #expect(
                refused?.message.contains("another stream is live to this playlist (process ") == true
                    && refused?.message.contains("holds \(folder)/index.m3u8.lock") == true,
                "\(String(describing: refused))")
            #expect(try daemon.awaitFinish(controller, first) == nil)
            #expect(
                !FileManager.default.fileExists(atPath: folder + "/index.m3u8.lock"),
                "the lock is removed when the stream finishes")
            let playlist = try String(contentsOfFile: folder + "/index.m3u8", encoding: .utf8)
            #expect(playlist.contains("#EXT-X-ENDLIST"), "the second stream touched the first's playlist: \(playlist)")
        }
    }
}
