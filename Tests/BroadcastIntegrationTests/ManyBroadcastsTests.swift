import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Testing

/// One capture, several broadcasts: real daemons and handlers, each broadcast judged on its own.
extension Integration {
    @Suite(.serialized) struct ManyBroadcastsTests {
        func counts(_ path: String) throws -> [String: (count: UInt64, dropped: UInt64, gaps: [Double])] {
            let summary = try InspectSummary.load(path)
            return summary.streams.mapValues { ($0.count, $0.sequenceGaps, $0.gaps.map(\.seconds)) }
        }

        /// Waits for every one of `ids` to finish, in any order; how each finished.
        func awaitFinishes(_ daemon: DaemonHarness, _ controller: ControllerClient, _ ids: [UInt32]) throws -> [UInt32:
            BroadcastError?]
        {
            var finished: [UInt32: BroadcastError?] = [:]
            while finished.count < Set(ids).count {
                let event = try daemon.waitFor(controller) {
                    if case .finished(let f) = $0, ids.contains(f.broadcast) { f } else { nil }
                }
                finished[event.broadcast] = .some(event.error)
            }
            return finished
        }

        /// Frames missing between consecutive frame times at 30 fps.
        func missingFrames(_ times: [Double]) -> Int {
            zip(times, times.dropFirst()).reduce(0) { $0 + max(0, Int((($1.1 - $1.0) * 30).rounded()) - 1) }
        }

        /// A broadcast's video lost nothing of its own: whatever it lost, the loop was late for (the machine was
        /// busy), which every broadcast loses alike.
        func expectNoOwnDrops(
            _ controller: ControllerClient, _ id: UInt32, sourceLocation: SourceLocation = #_sourceLocation
        ) throws -> StreamCounters {
            let video = try #require(try status(controller, id).streams?["video"], sourceLocation: sourceLocation)
            #expect(
                video.dropped == (video.late ?? 0) && video.dropped <= 30, "broadcast \(id): \(video)",
                sourceLocation: sourceLocation)
            return video
        }

        func status(_ controller: ControllerClient, _ id: UInt32) throws -> BroadcastStatus {
            try #require(try controller.status().broadcasts?.first { $0.broadcast == id })
        }

        @Test func recordStreamAndInspectShareOneX11Capture() throws {
            // Small, so that a debug build grabs and converts every frame whole (--no-damage) in well under a frame's time.
            let screen = try XServer(.xvfb, width: 320, height: 180)
            let daemon = try DaemonHarness([
                "--source", "x11", "--display", screen.display, "--fps", "30", "--no-damage",
            ])
            let controller = try daemon.subscribedController()
            let port = try StreamTests.freePort(udp: true)
            let received = daemon.runtime + "/received.ts"
            let server = try StreamTests().srtListener(port: port, output: received, log: daemon.runtime + "/srt.log")
            try StreamTests().waitForListening(server, port: port, tcp: false)
            let inspect = try daemon.start(
                handler: "inspect", url: daemon.summaryPath("inspect"), maxDuration: 10, on: controller)
            try daemon.awaitState(controller, .live)
            // Encoding by itself, so that it takes the frames this counts (a shared encoder's handler gets packets).
            let record = try daemon.start(
                handler: "record", url: daemon.runtime + "/talk.mp4", setupInfo: ["encode": "own"], maxDuration: 9,
                on: controller)
            let stream = try daemon.start(
                handler: "stream", url: "srt://127.0.0.1:\(port)", maxDuration: 8, on: controller)
            let live = try controller.status().broadcasts?.filter {
                [.live, .starting, .awaitingSetup].contains($0.state)
            }.count
            #expect(live == 3, "\(String(describing: try? controller.status().broadcasts))")
            for (id, error) in try awaitFinishes(daemon, controller, [stream, record, inspect]) {
                #expect(error == nil, "broadcast \(id)")
            }
            server.stop()
            let status = try controller.status()
            let grabbed = status.capture?["framesGrabbed"] ?? 0
            // Every handler got every frame captured: what any of them lost was a frame the loop itself was late
            // for (the machine was busy), the same for all; none lost one of its own.
            for id in [inspect, record, stream] { _ = try expectNoOwnDrops(controller, id) }
            let inspected = try #require(status.broadcasts?.first { $0.broadcast == inspect }?.streams?["video"])
            let frames = inspected.delivered
            #expect(
                frames + inspected.dropped >= 295 && frames + inspected.dropped <= 305, "\(inspected) in 10 s at 30 fps"
            )
            // The X server was grabbed once per frame, not once per broadcast.
            #expect(
                grabbed >= frames && grabbed <= frames + 3,
                "\(grabbed) grabs for \(frames) frames delivered to three broadcasts")
            let recorded = try #require(status.broadcasts?.first { $0.broadcast == record }?.streams?["video"])
            let times = try Recording(path: daemon.runtime + "/talk.mp4", scratch: daemon.runtime).frameTimes()
            #expect(
                UInt64(times.count) == recorded.delivered, "\(times.count) frames in the file, \(recorded) delivered")
            let (streams, duration) = try StreamTests().probe(received)
            #expect(streams == ["h264,320,180", "opus"] && abs(duration - 8) < 0.6, "\(streams), \(duration) s")
            try daemon.stop()
        }

        @Test func aSlowHandlerBesideInspectLosesOnlyItsOwnFrames() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360", "--fps", "30"])
            let controller = try daemon.subscribedController()
            let slow = try daemon.start(
                handler: "slow", url: daemon.summaryPath("slow"), setupInfo: ["sleep": "0.2"], maxDuration: 6,
                on: controller)
            let inspect = try daemon.start(
                handler: "inspect", url: daemon.summaryPath("inspect"), maxDuration: 5, on: controller)
            #expect(try awaitFinishes(daemon, controller, [inspect, slow]).values.allSatisfy { $0 == nil })
            // inspect loses nothing of its own: at most a frame the loop itself was late for (the machine was busy).
            let statuses = try controller.status().broadcasts ?? []
            let slowVideo = try #require(statuses.first { $0.broadcast == slow }?.streams?["video"])
            let inspectVideo = try #require(statuses.first { $0.broadcast == inspect }?.streams?["video"])
            #expect(
                slowVideo.dropped > 50 && inspectVideo.dropped == (inspectVideo.late ?? 0) && inspectVideo.dropped <= 5,
                "slow \(slowVideo), inspect \(inspectVideo)")
            #expect(inspectVideo.delivered + inspectVideo.dropped >= 149, "\(inspectVideo)")
            let inspected = try counts(daemon.summaryPath("inspect"))
            for (name, stream) in inspected where name != "video" {
                #expect(stream.dropped == 0 && stream.gaps.isEmpty, "inspect's \(name): \(stream)")
            }
            try daemon.stop()
        }

        @Test func pausingOneOfTwoRecordingsLeavesTheOtherWhole() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180", "--fps", "30"])
            let controller = try daemon.subscribedController()
            // Each encoding by itself, taking the frames this counts (two sharing an encoder: SharedEncodingTests).
            let own = ["encode": "own"]
            let whole = try daemon.start(
                handler: "record", url: daemon.runtime + "/whole.mp4", setupInfo: own, maxDuration: 4, on: controller)
            let paused = try daemon.start(
                handler: "record", url: daemon.runtime + "/paused.mp4", setupInfo: own, on: controller)
            try daemon.waitFor(controller) {
                if case .stateChanged(let s) = $0, s.broadcast == paused, s.state == .live { true } else { nil }
            }
            usleep(1_000_000)
            // Without an id, two running broadcasts are ambiguous: refused, naming both.
            #expect(throws: ProtocolError.self) { try controller.pause() }
            try controller.pause(broadcast: paused)
            usleep(1_000_000)
            try controller.resume(broadcast: paused)
            usleep(1_000_000)
            try controller.finish(broadcast: paused)
            #expect(try awaitFinishes(daemon, controller, [paused, whole]).values.allSatisfy { $0 == nil })
            let wholeVideo = try expectNoOwnDrops(controller, whole)
            let times = try Recording(path: daemon.runtime + "/whole.mp4", scratch: daemon.runtime).frameTimes()
            #expect(
                UInt64(times.count) == wholeVideo.delivered
                    && missingFrames(Array(times.dropFirst())) <= Int(wholeVideo.late ?? 0),
                "the other recording has \(times.count) frames and a gap of \(missingFrames(Array(times.dropFirst()))): \(wholeVideo)"
            )
            let result = try controller.status().broadcasts?.first { $0.broadcast == paused }?.result
            var segments: [JSONValue] = []
            if case .array(let list)? = result?["segments"] { segments = list }
            #expect(segments.count == 2, "segments in \(String(describing: result))")
            try daemon.stop()
        }

        @Test func killingOneHandlerOfThreeLeavesTheOthersAndStopAllEndsThem() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180", "--fps", "30"])
            let controller = try daemon.subscribedController()
            let ids = try (0..<3).map {
                try daemon.start(handler: "inspect", url: daemon.summaryPath("inspect\($0)"), on: controller)
            }
            var live: Set<UInt32> = []
            while live.count < 3 {
                live.insert(
                    try daemon.waitFor(controller) {
                        if case .stateChanged(let s) = $0, s.state == .live { s.broadcast } else { nil }
                    })
            }
            usleep(500_000)
            let victims = daemon.children()
            try #require(victims.count == 3)
            // The middle one's handler, by its place among the children (they started in order).
            let victim = victims.sorted()[1]
            kill(victim, SIGKILL)
            let error = try daemon.waitFor(controller) {
                if case .finished(let f) = $0, f.error != nil { f } else { nil }
            }
            #expect(error.error?.message.contains("SIGKILL") == true, "\(error)")
            let survivors = ids.filter { $0 != error.broadcast }
            let before = try survivors.map { try status(controller, $0).streams?["video"]?.delivered ?? 0 }
            usleep(1_000_000)
            let after = try survivors.map { try status(controller, $0).streams?["video"]?.delivered ?? 0 }
            #expect(
                zip(before, after).allSatisfy { $1 >= $0 + 25 }, "the others stopped receiving: \(before) → \(after)")
            let stopped = try daemon.tool("broadcastctl", ["stop", "--all"])
            #expect(stopped.status == 0, "\(stopped.stderr)")
            #expect(try awaitFinishes(daemon, controller, survivors).values.allSatisfy { $0 == nil })
            for id in survivors { _ = try expectNoOwnDrops(controller, id) }
            daemon.expectNoChildren()
            try daemon.stop()
        }

        @Test func versionOnePeersKeepWorkingAndAreToldWhatTheyCannotSee() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180", "--fps", "30"])
            let controller = try daemon.subscribedController()
            // The Python example speaks version 1 as a handler; a version-1 controller asks for status.
            let first = try daemon.start(handler: "python-counter", url: daemon.summaryPath("v1"), on: controller)
            try daemon.awaitState(controller, .live)
            func askStatus() throws -> Message {
                let peer = try PeerConnection.connect(path: daemon.socketPath)
                defer { peer.close() }
                try peer.send(.json(.hello, seq: 1, Hello(role: .controller, client: "v1-controller", protocol: 1)))
                let welcome = try peer.receive()
                #expect(try welcome.decode(Welcome.self).protocol == 1)
                try peer.send(Message(.getStatus, seq: 2))
                return try peer.receive()
            }
            let one = try askStatus()
            let oneStatus = try one.decode(BroadcastStatus.self)
            #expect(one.opcode == .status && oneStatus.broadcast == first)
            #expect(!String(decoding: one.payload, as: UTF8.self).contains("\"broadcasts\""), "version 1 has no list")
            let second = try daemon.start(handler: "inspect", url: daemon.summaryPath("v2"), on: controller)
            try daemon.waitFor(controller) {
                if case .stateChanged(let s) = $0, s.broadcast == second, s.state == .live { true } else { nil }
            }
            let refused = try askStatus()
            #expect(refused.opcode == .error)
            let error = try refused.decode(BroadcastError.self)
            #expect(
                error.code == .ambiguousBroadcast && error.message.contains("2 broadcasts are running")
                    && error.message.contains("protocol version 1"), "\(error)")
            // A version-2 controller sees both.
            #expect(try controller.status().broadcasts?.compactMap(\.broadcast) == [first, second])
            let stopped = try daemon.tool("broadcastctl", ["stop", "--all"])
            #expect(stopped.status == 0, "\(stopped.stderr)")
            #expect(try awaitFinishes(daemon, controller, [first, second]).values.allSatisfy { $0 == nil })
            let v2 = try #require(
                try controller.status().broadcasts?.first { $0.broadcast == second }?.streams?["video"])
            #expect(v2.dropped == (v2.late ?? 0), "\(v2)")
            try daemon.stop()
        }

        @Test func aHandlerAskingForFewerFramesGetsEveryKthWithDurationsThatAddUp() throws {
            let daemon = try DaemonHarness([
                "--source", "synthetic", "--size", "320x180", "--fps", "30", "--max-broadcasts", "2",
            ])
            let controller = try daemon.subscribedController()
            let full = try daemon.start(
                handler: "inspect", url: daemon.summaryPath("full"), maxDuration: 3, on: controller)
            let tenth = try daemon.start(
                handler: "inspect", url: daemon.summaryPath("ten"), setupInfo: ["frameRate": "10"], maxDuration: 2,
                on: controller)
            // A third is beyond --max-broadcasts 2.
            #expect(throws: ProtocolError.self) { try controller.start(handler: "inspect", maxDuration: 1) }
            #expect(try awaitFinishes(daemon, controller, [tenth, full]).values.allSatisfy { $0 == nil })
            let ten = try InspectSummary.load(daemon.summaryPath("ten"))
            let video = try #require(ten.streams["video"])
            let counters = try expectNoOwnDrops(controller, tenth)
            #expect(
                video.count + counters.dropped >= 19 && video.count + counters.dropped <= 22
                    && video.count == counters.delivered, "\(video)")
            // Every sample lasts three frame intervals: a gap only where the loop was late.
            #expect(video.gaps.count <= Int(counters.late ?? 0), "\(video.gaps)")
            #expect(ten.frameRate == 10, "told \(String(describing: ten.frameRate)) fps")
            try daemon.stop()
        }
    }
}
