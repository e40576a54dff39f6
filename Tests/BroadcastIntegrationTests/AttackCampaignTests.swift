import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Testing

/// What the third attack campaign found (issue 32): each attack runs against a real daemon with a broadcast live,
/// and the daemon must refuse it with a reason while the broadcast goes on.
extension Integration {
    @Suite(.serialized) struct AttackCampaignTests {
        @Test func regionsBeyondAScreenAreRefusedAndTheBroadcastGoesOn() throws {
            let x = try XServer()
            defer { x.stop() }
            let daemon = try DaemonHarness([
                "--source", "x11", "--display", x.display, "--app-audio", "none", "--mic", "none",
            ])
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath("live")
            let id = try daemon.start(handler: "inspect", url: "file://" + path, on: controller)
            try daemon.awaitState(controller, .live)
            // x + width overflowed Int in the intersection with the screen: broadcastd trapped (SIGILL).
            for region in [
                "9223372036854775807,0,2x2", "0,9223372036854775807,2x2", "0,0,9223372036854775807x2", "32768,0,16x16",
                "0,0,16x32768", "-0,0,16x16",
            ] {
                let changed = #expect(throws: ProtocolError.self) {
                    try controller.changeCapture(CaptureChoice(region: region))
                }
                #expect(
                    changed?.refusal?.code == .invalidRequest
                        && changed?.refusal?.message.contains(
                            "--region \(region): takes X,Y,WIDTHxHEIGHT "
                                + "with X and Y from 0 to 32767 and sizes from 1 to 32767") == true,
                    "\(String(describing: changed))")
                let started = #expect(throws: ProtocolError.self) {
                    try daemon.controller().start(
                        handler: "inspect", maxDuration: 1, capture: CaptureChoice(region: region))
                }
                #expect(started?.refusal?.code == .invalidRequest, "\(String(describing: started))")
            }
            for command in [
                ["capture", "--region", "9223372036854775807,0,2x2"],
                ["start", "--handler", "inspect", "--region", "0,9223372036854775807,2x2", "--duration", "1"],
            ] {
                let refused = try daemon.tool("broadcastctl", command)
                #expect(
                    refused.status == 64 && refused.stderr.contains("sizes from 1 to 32767"), "\(command): \(refused)")
            }
            // The largest region there is parses, and is refused for not lying within the screen; nothing changes.
            let beyond = #expect(throws: ProtocolError.self) {
                try controller.changeCapture(CaptureChoice(region: "0,0,32767x32767"))
            }
            #expect(
                beyond?.refusal?.code == .captureFailed
                    && beyond?.refusal?.message.contains("does not lie within the 640x480 screen") == true,
                "\(String(describing: beyond))")
            #expect(try controller.status().state == .live && isRunning(daemon.pid))
            try controller.finish(broadcast: id)
            #expect(try daemon.awaitFinish(controller, id) == nil)
            #expect(try InspectSummary.load(path).video?.width == 640)
        }
        @Test func numbersThatOverflowedAreRefusedWhereTheyEnter() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180", "--fps", "30"])
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let replay = try daemon.start(handler: "replay", url: nil, setupInfo: ["length": "10"], on: controller)
            try daemon.awaitState(controller, .live)
            // A frame rate of 1e-300 made the frame divisor overflow when the broadcast started (broadcastd trapped),
            // for a handler that declares the field (record) and one that does not (inspect).
            for handler in ["record", "inspect"] {
                let pending = try controller.start(handler: handler, maxDuration: 1)
                let setup = try daemon.setup()
                #expect(
                    throws: ProtocolError.refused(
                        BroadcastError(
                            .invalidRequest,
                            "setup field 'frameRate' is frames per second, 1 to 240, not '1e-300'"))
                ) {
                    try setup.complete(broadcast: pending, url: nil, setupInfo: ["frameRate": "1e-300"])
                }
                try setup.cancel(broadcast: pending, error: BroadcastError(.setupCancelled, "test"))
                setup.close()
            }
            // save's `last` of 1e300 seconds overflowed in the replay handler, which trapped: the broadcast was lost.
            for last in [1e300, -1e300] {
                let failed = #expect(throws: ProtocolError.self) {
                    try controller.send(
                        command: "save",
                        arguments: ["last": .number(last), "file": .string(daemon.runtime + "/x.mp4")],
                        broadcast: replay)
                }
                #expect(
                    failed?.refusal?.code == .commandFailed
                        && failed?.refusal?.message.contains("--last is a number of seconds above 0 and at most 3600")
                            == true,
                    "\(String(describing: failed))")
            }
            #expect(try controller.status().broadcasts?.first { $0.broadcast == replay }?.state == .live)
            try controller.finish(broadcast: replay)
            #expect(try daemon.awaitFinish(controller, replay) == nil)
        }
        /// 400 marks of 200 characters made record's result 93 KB: it was not sent, and every controller lost the
        /// recording's duration, bytes, chapters and upload status.
        @Test func marksAreBoundedAndTheRecordingsResultArrives() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180", "--fps", "30"])
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let path = daemon.runtime + "/marks.mkv"
            let id = try daemon.start(handler: "record", url: "file://" + path, on: controller)
            try daemon.awaitState(controller, .live)
            let title = String(repeating: "ä", count: 100)
            for (marks, text, refusal) in [
                (0, title + "x", "a title of 201 bytes is longer than 200"),
                (100, title, "there are 100 marks already, the most a recording takes"),
            ] {
                for _ in 0..<marks {
                    _ = try controller.send(command: "mark", arguments: ["text": .string(title)], broadcast: id)
                }
                let refused = #expect(throws: ProtocolError.self) {
                    try controller.send(command: "mark", arguments: ["text": .string(text)], broadcast: id)
                }
                #expect(
                    refused?.refusal?.code == .commandFailed && refused?.refusal?.message.contains(refusal) == true,
                    "\(String(describing: refused))")
            }
            try controller.finish(broadcast: id)
            let finished = try daemon.waitFor(controller) {
                if case .finished(let f) = $0, f.broadcast == id { f } else { nil }
            }
            #expect(finished.error == nil)
            let result = try #require(finished.result, "the result was not sent")
            guard case .array(let chapters)? = result["chapters"], case .number(let bytes)? = result["bytes"] else {
                Issue.record("\(result.keys.sorted())")
                return
            }
            #expect(chapters.count == 100 && bytes > 0 && result["duration"] != nil && result["omitted"] == nil)
        }
        /// A line break in save's file made `a\nb.mp4` and forged a log line; a dangling symbolic link was followed and its
        /// target created.
        @Test func controlCharactersInArgumentsAreRefusedAndSaveFollowsNoLink() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180", "--fps", "30"])
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let folder = daemon.runtime + "/saves"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let replay = try daemon.start(handler: "replay", url: nil, setupInfo: ["length": "10"], on: controller)
            try daemon.awaitState(controller, .live)
            usleep(1_500_000)
            let forged = #expect(throws: ProtocolError.self) {
                try controller.send(
                    command: "save", arguments: ["file": .string(folder + "/a\nbroadcastd: forged.mp4")],
                    broadcast: replay)
            }
            #expect(
                forged?.refusal
                    == BroadcastError(
                        .invalidRequest,
                        "argument 'file' of command 'save' is refused: " + "it contains a control character (U+000A)"),
                "\(String(describing: forged))")
            // A dangling link: what it points to is not created, and the link is kept.
            try FileManager.default.createSymbolicLink(
                atPath: folder + "/link.mp4", withDestinationPath: folder + "/target.mp4")
            let linked = #expect(throws: ProtocolError.self) {
                try controller.send(
                    command: "save", arguments: ["file": .string(folder + "/link.mp4")], broadcast: replay)
            }
            #expect(
                linked?.refusal?.code == .commandFailed
                    && linked?.refusal?.message.contains("the file exists and is kept") == true,
                "\(String(describing: linked))")
            let saved = try controller.send(
                command: "save", arguments: ["file": .string(folder + "/clip.mp4")], broadcast: replay)
            #expect(saved.result["path"] == .string(folder + "/clip.mp4"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder).sorted() == ["clip.mp4", "link.mp4"])
            #expect(!daemon.log.contains("\nbroadcastd: forged"))
            try controller.finish(broadcast: replay)
            #expect(try daemon.awaitFinish(controller, replay) == nil)
        }
        /// `{"broadcast": -1}` was answered "payload is not valid JSON" and the connection closed.
        @Test func aFieldOutOfRangeIsRefusedSayingWhichAndTheConnectionStays() throws {
            let daemon = try DaemonHarness()
            defer { _ = try? daemon.stop() }
            let peer = try PeerConnection.connect(path: daemon.socketPath)
            defer { peer.close() }
            try peer.hello(role: .controller, client: "out-of-range")
            for (payload, field) in [
                (["broadcast": JSONValue.number(-1), "command": .string("count")], "broadcast"),
                (["broadcast": .number(4_294_967_296), "command": .string("count")], "broadcast"),
                (["broadcast": .number(1.5), "command": .string("count")], "broadcast"),
            ] {
                #expect(
                    throws: ProtocolError.refused(
                        BroadcastError(
                            .invalidRequest,
                            "SEND_COMMAND is refused: '\(field)' holds a number its "
                                + "field cannot take (ids and other integers are whole numbers from 0 to 4294967295)"))
                ) {
                    try peer.request(.sendCommand, JSONValue.object(payload))
                }
            }
            #expect(
                throws: ProtocolError.refused(
                    BroadcastError(.invalidRequest, "START is refused: wrong type at 'handler'"))
            ) {
                try peer.request(.start, JSONValue.object(["handler": .number(3)]))
            }
            #expect(try peer.request(.getStatus).opcode == .status, "the connection stays open")
        }

        /// 64 connections that never said HELLO kept a controller waiting until they were closed, 10 s after they came.
        @Test func silentConnectionsMakeRoomForAControllerThatSpeaks() throws {
            let daemon = try DaemonHarness()
            defer { _ = try? daemon.stop() }
            let attack = Process()
            attack.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            attack.arguments = [
                "python3", Paths.root + "/Tests/fixtures/peer_attacks.py", "silent", daemon.socketPath, "64", "8",
            ]
            attack.standardOutput = FileHandle.nullDevice
            try attack.run()
            defer {
                attack.terminate()
                attack.waitUntilExit()
            }
            usleep(1_500_000)
            let asked = Date()
            let status = try daemon.controller().status()
            let waited = Date().timeIntervalSince(asked)
            #expect(status.state == .idle && waited < 1, "a controller waited \(waited) s behind 64 silent connections")
            #expect(daemon.logs("without HELLO, to make room for a new connection: 64 peers were connected"))
        }
    }
}
