import BroadcastClient
import BroadcastCore
import Foundation
import Testing

/// broadcast-setup as a person meets it: prompts on a real terminal (a pty), secrets without echo, Ctrl-C.
extension Integration {
    @Suite(.serialized) struct TerminalTests {
        /// Runs `broadcastctl ARGS` on a pty with the scripted exchange; returns the transcript and exit status.
        func session(_ daemon: DaemonHarness, _ steps: [(String, String)], _ arguments: [String]) throws -> (
            transcript: String, status: Int32
        ) {
            let script = Paths.root + "/Tests/fixtures/pty_session.py"
            let stepArguments = steps.flatMap { ["--" + $0.0, $0.1] }
            let result = try runTool(
                "/usr/bin/env",
                ["python3", script] + stepArguments + ["--", Paths.binary("broadcastctl")] + arguments + [
                    "--socket", daemon.socketPath,
                ],
                timeout: 60)
            #expect(result.status == 0, "pty driver failed: \(result.stdout)\(result.stderr)")
            let status =
                result.stdout.split(separator: "\n").last.flatMap {
                    $0.hasPrefix("EXIT ") ? Int32($0.dropFirst(5)) : nil
                } ?? -1
            return (result.stdout, status)
        }

        @Test func promptsForEveryFieldShowsDefaultsAndHidesSecrets() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath("interactive")
            let (transcript, status) = try session(
                daemon,
                [
                    ("expect", "Summary file: "), ("send", path + "\\n"),
                    ("expect", "Seconds to sleep in each video callback: "), ("send", "\\n"),
                    ("expect", "1 to hang instead of finishing: "), ("send", "\\n"),
                    ("expect", "Exit status to exit with after 5 video samples: "), ("send", "\\n"),
                    ("expect", "A URL to publish as the broadcast URL: "), ("send", "\\n"),
                    ("expect", "A secret token: "), ("send", "hunter2\\n"),
                    ("expect", "1 to report a broadcast result when finishing: "), ("send", "\\n"),
                    ("expect", "started with handler slow"),
                ], ["start", "--handler", "slow"])
            #expect(status == 0, "\(transcript)")
            #expect(transcript.contains("Setting up broadcast"))
            #expect(transcript.contains(path), "the URL is echoed as typed")
            #expect(!transcript.contains("hunter2"), "the secret was echoed: \(transcript)")
            try controller.finish()
            try daemon.waitFor(controller) { if case .finished = $0 { true } else { nil } }
            let summary =
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as! [String: Any]
            #expect((summary["setupInfo"] as? [String: String])?["token"] == "hunter2")
            #expect(!daemon.log.contains("hunter2"), "a secret reached the daemon's log")
            try daemon.stop()
        }

        @Test func statusWatchShowsALineForEveryBroadcast() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let first = try daemon.start(
                handler: "inspect", url: daemon.summaryPath("watch1"), maxDuration: 3, on: controller)
            let second = try daemon.start(
                handler: "inspect", url: daemon.summaryPath("watch2"), maxDuration: 2, on: controller)
            let (transcript, _) = try session(
                daemon,
                [
                    ("expect", "live  broadcast \(second) (inspect)  0:01"), ("expect", "broadcast \(second) finished"),
                    ("expect", "broadcast \(first) finished"), ("send", "\\x03"),
                ], ["status", "--watch"])
            // While both run, a redraw writes both lines: the first broadcast's, a line break, the second's.
            let both = transcript.components(separatedBy: "\r\u{1B}[J").contains {
                $0.contains("broadcast \(first) (inspect)") && $0.contains("\n\rlive  broadcast \(second) (inspect)")
            }
            #expect(both, "\(transcript)")
            for id in [first, second] { _ = try? daemon.awaitFinish(controller, id, timeout: 1) }
            try daemon.stop()
        }

        @Test func statusWatchRedrawsOneLineInPlaceOnATerminal() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "inspect", url: daemon.summaryPath("watch"), maxDuration: 2.5, on: controller)
            let (transcript, _) = try session(
                daemon,
                [
                    ("expect", "live  broadcast \(id) (inspect)  0:01"),
                    ("expect", "live  broadcast \(id) (inspect)  0:02"),
                    ("expect", "broadcast \(id) finished"), ("send", "\\x03"),
                ], ["status", "--watch"])
            // Every update redraws the line ("\r", erase to the end of the screen), and only the finish ends it.
            let updates = transcript.components(separatedBy: "\r\u{1B}[J").dropFirst()
            #expect(updates.count >= 3, "\(transcript)")
            let beforeFinish = updates.prefix(while: { !$0.hasPrefix("broadcast \(id) finished") })
            #expect(
                beforeFinish.allSatisfy { !$0.contains("\n") },
                "an update before the finish ended its line: \(transcript)")
            #expect(
                beforeFinish.contains {
                    ($0.contains("  no drops  ") || $0.contains("  dropped video ")) && $0.contains(" fps  daemon ")
                },
                "\(transcript)")
            // The pty has no size set, so the line is cut to 80 columns less one and never wraps.
            #expect(beforeFinish.allSatisfy { $0.count <= 79 }, "\(transcript)")
            #expect(try daemon.awaitFinish(controller, id) == nil)
            try daemon.stop()
        }

        @Test func recordShowsItsProgressOnATerminalThenTheFile() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
            let path = daemon.runtime + "/progress.mp4"
            let (transcript, status) = try session(
                daemon,
                [
                    ("resize", "120x30"), ("expect", "writing \(path)"), ("expect", "live  broadcast 1 (record)  0:01"),
                    ("expect", "saved \(path) (0:03."),
                ], ["record", path, "--duration", "3"])
            #expect(status == 0, "\(transcript)")
            // Like ffmpeg's: one line redrawn in place (on standard error), with the figures that matter first.
            let progress = transcript.components(separatedBy: "\r\u{1B}[J").dropFirst()
            #expect(progress.count >= 2, "\(transcript)")
            #expect(
                progress.contains {
                    ($0.contains(" MB  no drops  ") || $0.contains(" MB  dropped ")) && $0.contains(" fps  ")
                        && $0.contains(" kbit/s")
                },
                "\(transcript)")
            #expect(progress.dropLast().allSatisfy { !$0.contains("\n") }, "an update ended its line: \(transcript)")
            #expect(FileManager.default.fileExists(atPath: path))
            try daemon.stop()
        }

        @Test func statusWatchRedrawsCleanlyAfterTheTerminalNarrows() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "inspect", url: daemon.summaryPath("narrow"), maxDuration: 4, on: controller)
            let (transcript, _) = try session(
                daemon,
                [
                    ("resize", "100x30"), ("expect", "live  broadcast \(id) (inspect)  0:01"), ("resize", "30x30"),
                    ("expect", "broadcast \(id) finished"), ("send", "\\x03"),
                ], ["status", "--watch"])
            let parts = transcript.components(separatedBy: "<<RESIZED>>")
            #expect(parts.count == 2, "\(transcript)")
            // Before: one line of more than 30 columns. After: at once (SIGWINCH) the cursor goes up over the rows the
            // terminal wrapped it onto, the screen is cleared below, and the line is cut to 29 columns.
            let before = try #require(parts.first?.components(separatedBy: "\r\u{1B}[J").last)
            #expect(before.count > 30, "\(before)")
            let after = parts.last ?? ""
            let rows = (before.count + 29) / 30
            #expect(after.hasPrefix("\u{1B}[\(rows - 1)A\r\u{1B}[J"), "\(after.debugDescription)")
            let lines = after.components(separatedBy: "\r\u{1B}[J").dropFirst().prefix(while: {
                !$0.contains("finished")
            })
            #expect(!lines.isEmpty && lines.allSatisfy { $0.count <= 29 }, "\(after.debugDescription)")
            #expect(try daemon.awaitFinish(controller, id) == nil)
            try daemon.stop()
        }

        @Test func controlCAtSetupIsACancellationAndLeavesTheDaemonIdle() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let (transcript, status) = try session(
                daemon,
                [
                    ("expect", "File to write the summary to"), ("send", "\\x03"),
                    ("expect", "setup cancelled"),
                ], ["start", "--handler", "inspect"])
            // 130 (128 + SIGINT), as a shell reports a program stopped by Ctrl-C; not "finished with an error".
            #expect(status == 130, "\(transcript)")
            #expect(!transcript.contains("finished with an error"), "\(transcript)")
            let error = try daemon.waitFor(controller) { if case .finished(let f) = $0 { .some(f.error) } else { nil } }
            #expect(error?.code == .setupCancelled)
            #expect(error?.message.contains("Ctrl-C") == true)
            #expect(!daemon.log.contains("launched handler"))
            // The request is gone: status is idle again, with no finished broadcast and its error left behind.
            let after = try daemon.tool("broadcastctl", ["status"])
            #expect(
                after.status == 0 && after.stdout.hasPrefix("state: idle") && !after.stdout.contains("error"),
                "\(after.stdout)")
            try daemon.stop()
        }

        @Test func anEmptyRequiredFieldIsAskedAgain() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath("reasked")
            // python-counter's URL is required and has no default: Enter asks again instead of failing at the end.
            let (transcript, status) = try session(
                daemon,
                [
                    ("expect", ": "), ("send", "\\n"),
                    ("expect", "(required; Ctrl-C cancels): "), ("send", "file://" + path + "\\n"),
                    ("expect", "Finish the broadcast with an error"), ("send", "\\n"),
                    ("expect", "Crash with SIGSEGV"), ("send", "\\n"),
                    ("expect", "started with handler python-counter"),
                ], ["start", "--handler", "python-counter", "--duration", "1"])
            #expect(status == 0, "\(transcript)")
            #expect(
                try daemon.waitFor(controller) { if case .finished(let f) = $0 { .some(f.error) } else { nil } } == nil)
            try daemon.stop()
        }

        @Test func bareStartOffersTheHandlersAsANumberedList() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let handlers = try controller.handlers().map(\.name)
            let inspect = try #require(handlers.firstIndex(of: "inspect")) + 1
            let path = daemon.summaryPath("picked")
            let (transcript, status) = try session(
                daemon,
                [
                    ("expect", "Handler [1-\(handlers.count)]: "), ("send", "nonsense\\n"),
                    ("expect", "is none of them"), ("send", "\(inspect)\\n"),
                    ("expect", "started with handler inspect"),
                ], ["start", "--url", path, "--duration", "1"])
            #expect(status == 0, "\(transcript)")
            #expect(transcript.contains("  \(inspect)  inspect — "), "\(transcript)")
            #expect(
                try daemon.waitFor(controller) { if case .finished(let f) = $0 { .some(f.error) } else { nil } } == nil)
            // Off a terminal nobody can pick: a usage error that names --handler, and nothing is requested.
            let piped = try daemon.tool("broadcastctl", ["start"])
            #expect(piped.status == 64 && piped.stderr.contains("--handler"), "\(piped.stderr)")
            try daemon.stop()
        }

        /// The fields `record`'s progress line and `status --watch` may end with: whole, never a figure cut short.
        nonisolated(unsafe) static let wholeField =
            #/
        ^(live|paused|finishing|connecting|broadcast\ \d+\ \((record|inspect)\)|\d+:\d\d\.\d|[\d.]+\ MB|no\ drops|
          dropped\ .+|[\d.]+\ fps|\d+\ kbit\/s|daemon\ [\d.]+\ MiB|segment\ \d+|clock\ offset\ -?[\d.]+\ ms)$
        /#

        /// Each redraw of a progress line in `transcript` (after "\r\e[J", without the terminal's echo of a Ctrl-C).
        func draws(_ transcript: String, until end: String) -> [Substring] {
            transcript.components(separatedBy: "\r\u{1B}[J").dropFirst()
                .map { $0.prefix { $0 != "\r" && $0 != "\n" && $0 != "^" } }
                .filter { !$0.isEmpty && !$0.hasPrefix(end) }
        }

        /// `record` at 80 and at 150 columns: each redraw holds whole fields within the width, and the line is ended
        /// (erased) before the finish is printed, which starts a line of its own (it printed "…222 kbit/broadcast 42
        /// finished" across two rows).
        @Test(arguments: [80, 150]) func recordEndsItsProgressLineBeforeAnythingElse(columns: Int) throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
            let path = daemon.runtime + "/ended.mp4"
            let (transcript, status) = try session(
                daemon,
                [
                    ("resize", "\(columns)x30"), ("expect", "live  broadcast 1 (record)  0:02"),
                    ("expect", "saved \(path)"),
                ], ["record", path, "--duration", "3"])
            #expect(status == 0, "\(transcript)")
            let lines = draws(transcript, until: "broadcast 1 finished")
            #expect(lines.count >= 2, "\(transcript.debugDescription)")
            for line in lines {
                #expect(line.count < columns, "\(line.count) columns: \(line)")
                let cut = line.components(separatedBy: "  ").filter { $0.wholeMatch(of: Self.wholeField) == nil }
                #expect(cut.isEmpty, "fields cut short \(cut) in: \(line)")
            }
            #expect(transcript.contains("\r\u{1B}[Kbroadcast 1 finished\r\n"), "\(transcript.debugDescription)")
            try daemon.stop()
        }

        /// broadcastd killed mid-recording: the progress line is ended, and `record` says that broadcastd stopped
        /// and where the recording is, which plays up to there (it said only "the connection was closed").
        @Test func recordSaysBroadcastdStoppedAndWhereTheRecordingIs() throws {
            let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/orphaned.mp4"
            let (transcript, status) = try session(
                daemon,
                [
                    ("resize", "80x30"), ("expect", "live  broadcast 1 (record)  0:02"),
                    ("kill", String(daemon.process.processIdentifier)),
                    ("expect", "playable up to there"),
                ], ["record", path])
            #expect(status == 69, "\(transcript)")
            let said = try #require(transcript.components(separatedBy: "<<KILLED>>").last)
            #expect(
                said.contains(
                    "\r\u{1B}[Kbroadcastctl: broadcastd stopped before broadcast 1 finished; broadcast 1's "
                        + "recording so far is in \(path) (playable up to there)"), "\(said.debugDescription)")
            usleep(500_000)  // the handler finishes its file when broadcastd's socket closes
            let probe = try Recording(path: path, scratch: daemon.runtime).probe()
            #expect((Double(probe.format.duration ?? "") ?? 0) >= 1.5, "\(probe.format)")
        }

        /// `status --watch` at 80 columns keeps whole fields, and a paused broadcast shows no frame rate (it kept
        /// showing the last one, "29.7 fps").
        @Test func statusWatchDropsWholeFieldsAndAPausedBroadcastHasNoFrameRate() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let id = try daemon.start(handler: "inspect", url: daemon.summaryPath("paused"), on: controller)
            let socket = daemon.socketPath
            // Paused while the watch runs, once it has shown a frame rate.
            DispatchQueue.global().asyncAfter(deadline: .now() + 3) {
                _ = try? ControllerClient(socketPath: socket, client: "test-pause").pause(broadcast: id)
            }
            let (transcript, _) = try session(
                daemon,
                [
                    ("resize", "80x30"), ("expect", " fps"), ("expect", "paused  broadcast \(id) (inspect)  0:0"),
                    ("send", "\\x03"),
                ], ["status", "--watch"])
            let lines = draws(transcript, until: "broadcast \(id) finished")
            let whole = { (line: Substring) in
                line.components(separatedBy: "  ").allSatisfy { $0.wholeMatch(of: Self.wholeField) != nil }
            }
            #expect(
                lines.allSatisfy { $0.count < 80 && whole($0) },
                "\(transcript.debugDescription)")
            let paused = lines.drop { !$0.hasPrefix("paused") }
            #expect(!paused.isEmpty && paused.allSatisfy { !$0.contains("fps") }, "\(transcript.debugDescription)")
            try controller.finish(broadcast: id)
            try daemon.stop()
        }
    }
}
