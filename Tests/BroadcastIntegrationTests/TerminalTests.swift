import BroadcastCore
import Foundation
import Testing

/// broadcast-setup as a person meets it: prompts on a real terminal (a pty), secrets without echo, Ctrl-C.
extension Integration {
@Suite(.serialized) struct TerminalTests {
    /// Runs `broadcastctl ARGS` on a pty with the scripted exchange; returns the transcript and exit status.
    func session(_ daemon: DaemonHarness, _ steps: [(String, String)], _ arguments: [String]) throws -> (transcript: String, status: Int32) {
        let script = Paths.root + "/Tests/fixtures/pty_session.py"
        let stepArguments = steps.flatMap { ["--" + $0.0, $0.1] }
        let result = try runTool("/usr/bin/env", ["python3", script] + stepArguments + ["--", Paths.binary("broadcastctl")] + arguments + ["--socket", daemon.socketPath],
                                 timeout: 60)
        #expect(result.status == 0, "pty driver failed: \(result.stdout)\(result.stderr)")
        let status = result.stdout.split(separator: "\n").last.flatMap { $0.hasPrefix("EXIT ") ? Int32($0.dropFirst(5)) : nil } ?? -1
        return (result.stdout, status)
    }

    @Test func promptsForEveryFieldShowsDefaultsAndHidesSecrets() throws {
        let daemon = try DaemonHarness()
        let controller = try daemon.subscribedController()
        let path = daemon.summaryPath("interactive")
        let (transcript, status) = try session(daemon, [
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
        let summary = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as! [String: Any]
        #expect((summary["setupInfo"] as? [String: String])?["token"] == "hunter2")
        #expect(!daemon.log.contains("hunter2"), "a secret reached the daemon's log")
        try daemon.stop()
    }

    @Test func statusWatchShowsALineForEveryBroadcast() throws {
        let daemon = try DaemonHarness()
        let controller = try daemon.subscribedController()
        let first = try daemon.start(handler: "inspect", url: daemon.summaryPath("watch1"), maxDuration: 3, on: controller)
        let second = try daemon.start(handler: "inspect", url: daemon.summaryPath("watch2"), maxDuration: 2, on: controller)
        let (transcript, _) = try session(daemon, [
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
        let id = try daemon.start(handler: "inspect", url: daemon.summaryPath("watch"), maxDuration: 2.5, on: controller)
        let (transcript, _) = try session(daemon, [
            ("expect", "live  broadcast \(id) (inspect)  0:01"), ("expect", "live  broadcast \(id) (inspect)  0:02"),
            ("expect", "broadcast \(id) finished"), ("send", "\\x03"),
        ], ["status", "--watch"])
        // Every update redraws the line ("\r", erase to the end of the screen), and only the finish ends it.
        let updates = transcript.components(separatedBy: "\r\u{1B}[J").dropFirst()
        #expect(updates.count >= 3, "\(transcript)")
        let beforeFinish = updates.prefix(while: { !$0.hasPrefix("broadcast \(id) finished") })
        #expect(beforeFinish.allSatisfy { !$0.contains("\n") }, "an update before the finish ended its line: \(transcript)")
        #expect(beforeFinish.contains { ($0.contains("  no drops  ") || $0.contains("  dropped video ")) && $0.contains(" fps  daemon ") },
                "\(transcript)")
        // The pty has no size set, so the line is cut to 80 columns less one and never wraps.
        #expect(beforeFinish.allSatisfy { $0.count <= 79 }, "\(transcript)")
        #expect(try daemon.awaitFinish(controller, id) == nil)
        try daemon.stop()
    }

    @Test func recordShowsItsProgressOnATerminalThenTheFile() throws {
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180"])
        let path = daemon.runtime + "/progress.mp4"
        let (transcript, status) = try session(daemon, [
            ("resize", "120x30"), ("expect", "writing \(path)"), ("expect", "live  broadcast 1 (record)  0:01"),
            ("expect", "saved \(path) (0:03."),
        ], ["record", path, "--duration", "3"])
        #expect(status == 0, "\(transcript)")
        // Like ffmpeg's: one line redrawn in place (on standard error), with the figures that matter first.
        let progress = transcript.components(separatedBy: "\r\u{1B}[J").dropFirst()
        #expect(progress.count >= 2, "\(transcript)")
        #expect(progress.contains { ($0.contains(" MB  no drops  ") || $0.contains(" MB  dropped ")) && $0.contains(" fps  ") && $0.contains(" kbit/s") },
                "\(transcript)")
        #expect(progress.dropLast().allSatisfy { !$0.contains("\n") }, "an update ended its line: \(transcript)")
        #expect(FileManager.default.fileExists(atPath: path))
        try daemon.stop()
    }

    @Test func statusWatchRedrawsCleanlyAfterTheTerminalNarrows() throws {
        let daemon = try DaemonHarness()
        let controller = try daemon.subscribedController()
        let id = try daemon.start(handler: "inspect", url: daemon.summaryPath("narrow"), maxDuration: 4, on: controller)
        let (transcript, _) = try session(daemon, [
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
        let lines = after.components(separatedBy: "\r\u{1B}[J").dropFirst().prefix(while: { !$0.contains("finished") })
        #expect(!lines.isEmpty && lines.allSatisfy { $0.count <= 29 }, "\(after.debugDescription)")
        #expect(try daemon.awaitFinish(controller, id) == nil)
        try daemon.stop()
    }

    @Test func controlCAtSetupIsACancellationAndLeavesTheDaemonIdle() throws {
        let daemon = try DaemonHarness()
        let controller = try daemon.subscribedController()
        let (transcript, status) = try session(daemon, [
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
        #expect(after.status == 0 && after.stdout.hasPrefix("state: idle") && !after.stdout.contains("error"), "\(after.stdout)")
        try daemon.stop()
    }

    @Test func anEmptyRequiredFieldIsAskedAgain() throws {
        let daemon = try DaemonHarness()
        let controller = try daemon.subscribedController()
        let path = daemon.summaryPath("reasked")
        // python-counter's URL is required and has no default: Enter asks again instead of failing at the end.
        let (transcript, status) = try session(daemon, [
            ("expect", ": "), ("send", "\\n"),
            ("expect", "(required; Ctrl-C cancels): "), ("send", "file://" + path + "\\n"),
            ("expect", "Finish the broadcast with an error"), ("send", "\\n"),
            ("expect", "Crash with SIGSEGV"), ("send", "\\n"),
            ("expect", "started with handler python-counter"),
        ], ["start", "--handler", "python-counter", "--duration", "1"])
        #expect(status == 0, "\(transcript)")
        #expect(try daemon.waitFor(controller) { if case .finished(let f) = $0 { .some(f.error) } else { nil } } == nil)
        try daemon.stop()
    }

    @Test func bareStartOffersTheHandlersAsANumberedList() throws {
        let daemon = try DaemonHarness()
        let controller = try daemon.subscribedController()
        let handlers = try controller.handlers().map(\.name)
        let inspect = try #require(handlers.firstIndex(of: "inspect")) + 1
        let path = daemon.summaryPath("picked")
        let (transcript, status) = try session(daemon, [
            ("expect", "Handler [1-\(handlers.count)]: "), ("send", "nonsense\\n"),
            ("expect", "is none of them"), ("send", "\(inspect)\\n"),
            ("expect", "started with handler inspect"),
        ], ["start", "--url", path, "--duration", "1"])
        #expect(status == 0, "\(transcript)")
        #expect(transcript.contains("  \(inspect)  inspect — "), "\(transcript)")
        #expect(try daemon.waitFor(controller) { if case .finished(let f) = $0 { .some(f.error) } else { nil } } == nil)
        // Off a terminal nobody can pick: a usage error that names --handler, and nothing is requested.
        let piped = try daemon.tool("broadcastctl", ["start"])
        #expect(piped.status == 64 && piped.stderr.contains("--handler"), "\(piped.stderr)")
        try daemon.stop()
    }
}
}
