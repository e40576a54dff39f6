import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Testing

/// Bad input and failures: clear errors, and nothing else is disturbed.
extension Integration {
    @Suite(.serialized) struct FailureTests {
        /// Sends raw bytes and returns the daemon's error, checking that it then closed the connection.
        func errorAfterSending(_ bytes: [UInt8], to daemon: DaemonHarness) throws -> BroadcastError {
            let peer = try PeerConnection.connect(path: daemon.socketPath)
            try peer.socket.writeAll(bytes)
            let reply = try peer.receive()
            #expect(reply.opcode == .error)
            #expect(throws: ProtocolError.closed) { try peer.receive() }
            return try reply.decode(BroadcastError.self)
        }

        @Test func garbageFromPeersClosesOnlyThemWhileTheBroadcastCarriesOn() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath("carries-on")
            let id = try daemon.start(handler: "inspect", url: path, on: controller)
            try daemon.awaitState(controller, .live)

            var oversized: [UInt8] = []
            Message.appendHeader(to: &oversized, opcode: .hello, seq: 1, payloadSize: 64 << 20, descriptorCount: 0)
            #expect(try errorAfterSending(oversized, to: daemon).message.contains("exceeds the limit"))

            #expect(
                try errorAfterSending([1, 0, 0, 0, 0x77, 0x77, 0, 0, 1, 0, 0, 0, 0], to: daemon).message.contains(
                    "unknown opcode 0x7777"))
            #expect(
                try errorAfterSending(Message.json(.getStatus, seq: 1, Empty()).encoded(), to: daemon).message.contains(
                    "before HELLO"))
            #expect(
                try errorAfterSending(Message(.hello, seq: 1, payload: Array("not json".utf8)).encoded(), to: daemon)
                    .code == .protocolError)
            let helloThenNonsense =
                Message.json(.hello, seq: 1, Hello(role: .controller, client: "x")).encoded()
                + Message.json(.ready, seq: 2, Empty()).encoded()
            let peer = try PeerConnection.connect(path: daemon.socketPath)
            try peer.socket.writeAll(helloThenNonsense)
            #expect(try peer.receive().opcode == .welcome)
            let wrongRole = try peer.receive()
            #expect(wrongRole.opcode == .error && wrongRole.seq == 2)
            #expect(throws: ProtocolError.closed) { try peer.receive() }

            // Revision 2.6: a message of an opcode broadcastd does not know, after HELLO, is a newer peer's: refused as
            // unsupported, and the connection stays.
            let newer = try PeerConnection.connect(path: daemon.socketPath)
            try newer.hello(role: .controller, client: "newer")
            try newer.socket.writeAll([2, 0, 0, 0, 0x00, 0x04, 0, 0, 9, 0, 0, 0] + Array("{}".utf8))
            let unsupported = try newer.receive()
            #expect(unsupported.opcode == .error && unsupported.seq == 9)
            #expect(try unsupported.decode(BroadcastError.self).code == .unsupported)
            #expect(try newer.request(.getStatus).opcode == .status, "the connection stays")
            newer.close()

            // A peer that claims to be a handler over the public socket is refused.
            let impostor = try PeerConnection.connect(path: daemon.socketPath)
            #expect(throws: ProtocolError.self) { try impostor.hello(role: .handler, client: "impostor") }

            let delivered = try controller.status().streams?["video"]?.delivered ?? 0
            usleep(300_000)
            #expect(try controller.status().state == .live)
            #expect((try controller.status().streams?["video"]?.delivered ?? 0) > delivered, "the broadcast stalled")
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, id) == nil)
            let summary = try InspectSummary.load(path)
            #expect(summary.streams.values.allSatisfy { $0.gaps.isEmpty && $0.sequenceGaps == 0 })
            #expect(daemon.logs("closing peer"))
            try daemon.stop()
        }

        @Test func protocolVersionMismatchIsClearOnBothSides() throws {
            let daemon = try DaemonHarness()
            let peer = try PeerConnection.connect(path: daemon.socketPath)
            try peer.send(.json(.hello, seq: 1, Hello(role: .controller, client: "future-client", protocol: 3)))
            let reply = try peer.receive()
            let error = try reply.decode(BroadcastError.self)
            #expect(error.code == .versionMismatch)
            #expect(
                error.message.contains("broadcastd speaks versions 1 to 2")
                    && error.message.contains("future-client speaks version 3"))
            #expect(daemon.logs("protocol version mismatch"))
            try daemon.stop()
        }

        @Test func unknownHandlerListsTheInstalledOnes() throws {
            let daemon = try DaemonHarness()
            let result = try daemon.tool("broadcastctl", ["start", "--handler", "nope", "--url", "/tmp/x.json"])
            #expect(result.status == 1)
            #expect(result.stderr.contains("no handler named 'nope'"))
            #expect(
                result.stderr.contains("installed: ") && result.stderr.contains("inspect")
                    && result.stderr.contains("python-counter"), "\(result.stderr)")
            #expect(try daemon.controller().status().state == .idle)
            try daemon.stop()
        }

        @Test func noDaemonSaysSoAndHowToStartIt() throws {
            let runtime = NSTemporaryDirectory() + "broadcastd-none-\(UUID().uuidString.prefix(8))"
            let result = try runTool(
                Paths.binary("broadcastctl"), ["status", "--socket", runtime + "/broadcastd.sock"])
            #expect(result.status == 69)
            #expect(result.stderr.contains("broadcastd is not running"))
            #expect(result.stderr.contains("start it with"))
        }

        /// A budget the user set that cannot hold the capture's frames: broadcastd starts all the same (start-up plans
        /// nothing: under systemd it was a failing unit), and the START that would open the capture is refused with what
        /// would fit; the daemon goes on.
        @Test func aSetBudgetThatCannotHoldTheFramesRefusesTheStartNotTheDaemon() throws {
            let daemon = try DaemonHarness([
                "--source", "synthetic", "--size", "3840x2160", "--pixel-format", "bgrx", "--memory-budget", "50",
            ])
            let refused = #expect(throws: (any Error).self) {
                _ = try daemon.controller().start(handler: "inspect", maxDuration: 1)
            }
            let said = "\(String(describing: refused))"
            #expect(
                said.contains("more than the memory budget of 50.0 MB") && said.contains("use --memory-budget "),
                "\(said)")
            #expect(try daemon.controller().status().state == .idle)
            #expect(isRunning(daemon.pid))
            try daemon.stop()
        }

        @Test func aSecondDaemonOnTheSameSocketIsRefusedAndTheFirstCarriesOn() throws {
            let daemon = try DaemonHarness()
            let second = try runTool(
                Paths.binary("broadcastd"),
                ["--config", "/dev/null", "--source", "synthetic", "--socket", daemon.socketPath], timeout: 10)
            #expect(second.status != 0)
            #expect(second.stderr.contains("another broadcastd is already listening there"), "\(second.stderr)")
            #expect(try daemon.controller().status().state == .idle)
            try daemon.stop()
        }

        @Test func brokenManifestsAreSkippedWithTheirFileNamedAndMissingProgramsAreReported() throws {
            let extra = NSTemporaryDirectory() + "broadcastd-manifests-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: extra, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: extra) }
            try #"{"name": "broken", "displayName": 3"#.write(
                toFile: extra + "/broken.json", atomically: true, encoding: .utf8)
            try #"{"displayName": "No name", "exec": "x"}"#.write(
                toFile: extra + "/noname.json", atomically: true, encoding: .utf8)
            try #"{"name": "ghost", "displayName": "Ghost", "exec": "/nonexistent/ghost-handler"}"#.write(
                toFile: extra + "/ghost.json", atomically: true, encoding: .utf8)
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360", "--handlers-dir", extra])
            let names = try daemon.controller().handlers().map(\.name)
            #expect(names.contains("inspect") && names.contains("ghost") && !names.contains("broken"))
            #expect(
                daemon.logs(
                    "skipping handler manifest \(extra)/broken.json: parse \(extra)/broken.json: not valid JSON"))
            try #"{"name": "typo", "displayName": 3, "exec": "x"}"#.write(
                toFile: extra + "/typo.json", atomically: true, encoding: .utf8)
            _ = try daemon.controller().handlers()
            #expect(daemon.logs("\(extra)/typo.json: field 'displayName' has the wrong type"))
            #expect(daemon.logs("\(extra)/noname.json: missing field 'name'"))

            let controller = try daemon.subscribedController()
            let id = try daemon.start(handler: "ghost", url: nil, on: controller)
            let error = try daemon.awaitFinish(controller, id)
            #expect(
                error?.message
                    == "handler 'ghost': cannot find its program '/nonexistent/ghost-handler' (is it installed and executable?)"
            )
            try daemon.stop()
        }

        @Test func aSlowHandlerLosesFramesNotTheDaemonsTime() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360", "--fps", "60"])
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath("slow")
            let id = try daemon.start(handler: "slow", url: path, setupInfo: ["sleep": "0.2"], on: controller)
            try daemon.awaitState(controller, .live)
            // While the handler sleeps 200 ms in every video callback, the daemon answers at once and keeps counting.
            for _ in 0..<10 {
                let asked = Date()
                _ = try controller.status()
                #expect(Date().timeIntervalSince(asked) < 0.5, "the daemon was blocked by the slow handler")
                usleep(200_000)
            }
            let streams = try #require(try controller.status().streams)
            #expect(streams["video"]!.dropped > 50, "frames not dropped: \(streams)")
            #expect(streams["video"]!.delivered + streams["video"]!.dropped > 100)
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, id) == nil)
            let summary =
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as! [String: Any]
            let counts = summary["counts"] as? [String: Int] ?? [:]
            #expect((counts["video"] ?? 0) > 0)
            daemon.expectNoChildren()
            try daemon.stop()
        }

        @Test func aHandlerExitingMidBroadcastNamesItsExitStatus() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "slow", url: daemon.summaryPath("exit"), setupInfo: ["exitWith": "3"], on: controller)
            let error = try daemon.awaitFinish(controller, id)
            #expect(error?.code == .handlerFailed)
            #expect(error?.message == "handler 'slow' exited with status 3", "\(String(describing: error))")
            daemon.expectNoChildren()
            try daemon.stop()
        }

        @Test func stoppingTheDaemonFinishesTheLiveBroadcastCleanly() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath("shutdown")
            let id = try daemon.start(handler: "inspect", url: path, on: controller)
            try daemon.awaitState(controller, .live)
            usleep(300_000)
            kill(daemon.pid, SIGTERM)
            let error = try daemon.awaitFinish(controller, id)
            #expect(error?.code == .shutdown)
            #expect(try daemon.stop() == 0)
            // The handler was told and finished its work: its output is complete.
            let summary = try InspectSummary.load(path)
            #expect(summary.sequence.last == "broadcastFinished")
            #expect(summary.streams["video"]!.count > 0)
        }

        /// broadcastd killed outright: the SDKs (Swift: inspect; Python: python-counter) still call the finish
        /// callback, with the reason, and the handler writes its output and exits at once.
        @Test(arguments: ["inspect", "python-counter"])
        func aHandlerFinishesItsWorkWhenTheDaemonIsKilled(handler: String) throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath("killed-\(handler)")
            _ = try daemon.start(handler: handler, url: "file://" + path, on: controller)
            try daemon.awaitState(controller, .live)
            usleep(300_000)
            let pid = try #require(daemon.children().first)
            let killed = Date()
            kill(daemon.pid, SIGKILL)
            daemon.process.waitUntilExit()
            while isRunning(pid) && Date().timeIntervalSince(killed) < 3 { usleep(10_000) }
            let finishedIn = Date().timeIntervalSince(killed)
            #expect(finishedIn < 1, "the handler outlived broadcastd by \(finishedIn) s")
            if isRunning(pid) { kill(pid, SIGKILL) }

            let gone = BroadcastError(
                .shutdown, "broadcastd went away (the connection closed) before the broadcast finished")
            if handler == "inspect" {
                let summary = try InspectSummary.load(path)
                #expect(summary.sequence == ["broadcastStarted", "samples", "broadcastFinished"])
                #expect(summary.finishError == gone)
                #expect(daemon.log.contains("broadcast-handler-inspect: receive: \(gone.message)"), "\(daemon.log)")
            } else {
                let summary =
                    try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
                    as! [String: Any]
                #expect((summary["callbacks"] as? [String])?.last == "broadcastFinished")
                #expect(summary["error"] as? [String: String] == ["code": gone.code.rawValue, "message": gone.message])
            }
        }

        /// A real handler that will not exit is stopped, and no process is left (the logic, the same service info again
        /// and again among it, is DaemonCoreTests').
        @Test func aHandlerThatWillNotExitIsStoppedAndReported() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "slow", url: daemon.summaryPath("stuck"), setupInfo: ["ignoreFinish": "1"], on: controller)
            try daemon.awaitState(controller, .live)
            try controller.finish()
            let error = try daemon.awaitFinish(controller, id, timeout: 30)
            #expect(error?.message.contains("did not finish within 5 s") == true, "\(String(describing: error))")
            daemon.expectNoChildren()
            try daemon.stop()
        }
    }
}

extension Integration {
    @Suite(.serialized) struct CommandLineTests {
        @Test func startWaitStatusAndHandlersFromTheCommandLine() throws {
            let daemon = try DaemonHarness()
            let handlers = try daemon.tool("broadcastctl", ["handlers", "--json"])
            #expect(handlers.status == 0)
            let list = try JSONDecoder().decode(HandlerList.self, from: Data(handlers.stdout.utf8))
            #expect(list.handlers.map(\.name).contains("inspect"))
            let text = try daemon.tool("broadcastctl", ["handlers"])
            #expect(text.stdout.contains("inspect — Inspect"))

            let path = daemon.summaryPath("cli")
            let start = try daemon.tool(
                "broadcastctl",
                ["start", "--handler", "inspect", "--url", "file://" + path, "--duration", "1", "--wait"])
            #expect(start.status == 0, "\(start)")
            #expect(start.stdout.contains("started with handler inspect") && start.stdout.contains("finished"))
            #expect(try InspectSummary.load(path).streams["video"]!.count > 20)
            #expect(!daemon.log.contains(" warning "), "a clean broadcast logged warnings:\n\(daemon.log)")

            let status = try daemon.tool("broadcastctl", ["status", "--json"])
            let decoded = try JSONDecoder().decode(BroadcastStatus.self, from: Data(status.stdout.utf8))
            #expect(decoded.state == .finished)
            #expect(decoded.video?.pixelFormat == .nv12)
            let idle = try daemon.tool("broadcastctl", ["status"])
            #expect(
                idle.stdout.hasPrefix("state: idle\n")
                    && idle.stdout.contains("  broadcast 1 (inspect) finished; saved \(path)"),
                "\(idle)")
            let human = try daemon.tool("broadcastctl", ["status", "--broadcast", "1"])
            #expect(human.stdout.contains("state: finished"))
            #expect(human.stdout.contains("video: "))

            // --watch prints one line per event, flushed as it comes, until stopped.
            let watch = Process()
            watch.executableURL = URL(fileURLWithPath: Paths.binary("broadcastctl"))
            watch.arguments = ["status", "--watch", "--socket", daemon.socketPath]
            let lines = Pipe()
            watch.standardOutput = lines
            try watch.run()
            let watched = try daemon.tool(
                "broadcastctl",
                ["start", "--handler", "inspect", "--url", "file://" + path, "--duration", "1.2", "--wait"])
            #expect(watched.status == 0)
            usleep(200_000)
            kill(watch.processIdentifier, SIGKILL)  // the test runner's children inherit a mask that blocks SIGTERM
            watch.waitUntilExit()
            let output = String(decoding: lines.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            // Piped, every update is a plain line of its own, without terminal control codes.
            #expect(!output.contains("\u{1B}"), "\(output)")
            #expect(output.contains("\nlive  broadcast 2 (inspect)\n"), "\(output)")
            #expect(output.contains("\nlive  broadcast 2 (inspect)  0:01."), "\(output)")
            #expect(output.contains("  no drops  ") && output.contains(" fps  daemon "), "\(output)")
            #expect(output.contains("\nbroadcast 2 finished; saved \(path)\n"), "\(output)")
            #expect(output.contains("\nfinished  broadcast 2 (inspect)"), "\(output)")

            // --json everywhere: JSON lines from start --wait, a broadcast reference from stop, errors as objects.
            let json = try daemon.tool(
                "broadcastctl",
                ["start", "--handler", "inspect", "--url", "file://" + path, "--duration", "0.5", "--wait", "--json"])
            let jsonLines = json.stdout.split(separator: "\n")
            #expect(json.status == 0 && jsonLines.count == 2, "\(json)")
            #expect(jsonLines.first == #"{"broadcast":3,"handler":"inspect"}"#)
            #expect(try JSONDecoder().decode(FinishedEvent.self, from: Data(jsonLines[1].utf8)).broadcast == 3)
            let refused = try daemon.tool("broadcastctl", ["stop", "--json"])
            #expect(
                refused.status == 1
                    && refused.stdout == #"{"error":{"code":"no-broadcast","message":"no broadcast is live"}}"# + "\n",
                "\(refused)")

            let usage = try daemon.tool("broadcastctl", ["start"])
            #expect(usage.status == 64 && usage.stderr.contains("--handler"), "\(usage)")

            let nothing = try daemon.tool("broadcastctl", ["pause"])
            #expect(nothing.status == 1 && nothing.stderr.contains("no broadcast is live"))
            try daemon.stop()
        }

        @Test func setupWithoutATerminalUsesDefaultsAndRefusesWhatIsMissing() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let id = try controller.start(handler: "python-counter", maxDuration: 1)
            // python-counter requires a URL and has no default: non-interactive setup cancels with the reason.
            let setup = try daemon.tool("broadcast-setup", ["--request", String(id)])
            #expect(setup.status == 64, "a usage error: \(setup)")
            #expect(setup.stderr.contains("needs a URL"), "\(setup.stderr)")
            let error = try daemon.awaitFinish(controller, id)
            #expect(error?.code == .setupCancelled)
            #expect(error?.message.contains("needs a URL") == true)
            try daemon.stop()
        }
    }
}
