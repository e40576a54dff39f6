import Foundation
import Testing

/// broadcastctl's small courtesies: did-you-mean for subcommands and handlers, durations with units,
/// `--handler <TAB>`, no PNG onto a terminal, and usage errors (64) for an environment with no socket.
extension Integration {
    @Suite(.serialized) struct CourtesyTests {
        @Test func unknownSubcommandSuggestsTheClosest() throws {
            let result = try runTool(Paths.binary("broadcastctl"), ["strat", "--handler", "inspect"])
            #expect(result.status == 64, "\(result.stderr)")
            #expect(result.stderr.contains("unknown subcommand 'strat'; did you mean 'start'?"), "\(result.stderr)")
            let far = try runTool(Paths.binary("broadcastctl"), ["frobnicate"])
            #expect(
                far.status == 64 && far.stderr.contains("unknown subcommand 'frobnicate'")
                    && !far.stderr.contains("did you mean"),
                "\(far.stderr)")
        }

        @Test func unknownHandlerSuggestsTheClosestInstalled() throws {
            let daemon = try DaemonHarness()
            let result = try daemon.tool(
                "broadcastctl", ["start", "--handler", "recrod", "--url", daemon.summaryPath("x")])
            #expect(result.status == 1, "\(result.stderr)")
            #expect(
                result.stderr.contains("no handler named 'recrod'") && result.stderr.contains("did you mean 'record'?"),
                "\(result.stderr)")
            try daemon.stop()
        }

        @Test func setupMistakesNameTheOptionsAsTyped() throws {
            let daemon = try DaemonHarness()
            let typo = try daemon.tool(
                "broadcastctl",
                [
                    "start", "--handler", "record", "--url", daemon.runtime + "/x.mp4",
                    "--set", "overwrit=true",
                ])
            // A usage error, said once, before any broadcast is asked for (it came twice, as "setup was cancelled").
            #expect(typo.status == 64, "\(typo.stderr)")
            #expect(
                typo.stderr == "broadcastctl: --set overwrit=true: handler 'record' has no setup field 'overwrit'; "
                    + "did you mean --set overwrite=true?\n", "\(typo.stderr)")
            // Values the handler does not take, likewise (they used up a broadcast number and read as its finish).
            for (value, why) in [
                ("crf=abc", "setup field 'crf' is a number, not 'abc'"),
                ("codec=vp9", "setup field 'codec' takes h264, hevc or av1, not 'vp9'"),
            ] {
                let bad = try daemon.tool("broadcastctl", ["record", daemon.runtime + "/bad.mp4", "--set", value])
                #expect(
                    bad.status == 64 && bad.stderr == "broadcastctl: --set \(value): \(why)\n" && bad.stdout.isEmpty,
                    "\(bad)")
            }
            // broadcast-setup run by hand says it once too, as a usage error.
            let controller = try daemon.controller()
            let waiting = try controller.start(handler: "record", maxDuration: nil)
            #expect(waiting == 1, "the refused ones used no broadcast number")
            let setup = try daemon.tool("broadcast-setup", ["--non-interactive", "--set", "codec=vp9"])
            #expect(
                setup.status == 64
                    && setup.stderr == "broadcast-setup: --set codec=vp9: setup field 'codec' takes h264, hevc or av1, "
                        + "not 'vp9'\n",
                "\(setup)")
            // A file that cannot be created is said before anything starts (it said "started… writing", then
            // "stays playable").
            let proc = try daemon.tool("broadcastctl", ["record", "/proc/x.mp4", "--duration", "1"])
            #expect(proc.status == 1 && !proc.stdout.contains("started") && !proc.stdout.contains("writing"), "\(proc)")
            #expect(
                proc.stderr.contains("cannot write /proc/x.mp4: a file cannot be created there")
                    && !proc.stderr.contains("playable"),
                "\(proc)")
            // The recorder keeps an existing file and says how to replace it, as the option is typed.
            let existing = daemon.runtime + "/existing.mp4"
            _ = FileManager.default.createFile(atPath: existing, contents: Data([1]))
            let kept = try daemon.tool("broadcastctl", ["start", "--handler", "record", "--url", existing, "--wait"])
            #expect(kept.status == 1 && kept.stderr.contains("or --set overwrite=true"), "\(kept.stderr)")
            try daemon.stop()
        }

        @Test func durationTakesUnits() throws {
            let daemon = try DaemonHarness()
            let controller = try daemon.subscribedController()
            let result = try daemon.tool(
                "broadcastctl",
                [
                    "start", "--handler", "inspect", "--url", daemon.summaryPath("units"),
                    "--duration", "1s", "--wait", "--json",
                ])
            #expect(result.status == 0, "\(result.stderr)")
            let status = try controller.status()
            #expect(status.broadcasts?.first?.maxDuration == 1, "\(status)")
            let wrong = try daemon.tool("broadcastctl", ["start", "--handler", "inspect", "--duration", "10x"])
            #expect(wrong.status == 64 && wrong.stderr.contains("'10x' is invalid for '--duration"), "\(wrong.stderr)")
            try daemon.stop()
        }

        /// What the shells' completion functions call for `--handler <TAB>`, as the generated scripts call it.
        @Test func handlerCompletionListsTheInstalledHandlers() throws {
            let daemon = try DaemonHarness()
            let broadcastctl = Paths.binary("broadcastctl")
            let all = try runTool(
                broadcastctl,
                [
                    "---completion", "start", "--", "--handler", "5", "0",
                    "broadcastctl", "start", "--socket", daemon.socketPath, "--handler", "",
                ])
            let names = all.stdout.split(separator: "\n").map(String.init)
            #expect(
                all.status == 0 && names.contains("inspect") && names.contains("record") && names.contains("stream"),
                "\(all)")
            let some = try runTool(
                broadcastctl,
                [
                    "---completion", "start", "--", "--handler", "5", "2",
                    "broadcastctl", "start", "--socket", daemon.socketPath, "--handler", "re",
                ])
            #expect(some.stdout.split(separator: "\n") == ["record", "replay"], "\(some)")
            // No daemon: nothing to offer, and nothing printed on the terminal besides.
            let none = try runTool(
                broadcastctl,
                [
                    "---completion", "start", "--", "--handler", "5", "0",
                    "broadcastctl", "start", "--socket", daemon.runtime + "/nothing.sock", "--handler", "",
                ])
            #expect(
                none.status == 0 && none.stdout.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
                    && none.stderr.isEmpty, "\(none)")
            // bash, as it completes `broadcastctl start --handler r<TAB>` with the generated script.
            let script = daemon.runtime + "/broadcastctl.bash"
            try runTool(broadcastctl, ["--generate-completion-script", "bash"]).stdout.write(
                toFile: script, atomically: true, encoding: .utf8)
            let line = "broadcastctl start --socket \(daemon.socketPath) --handler r"
            let bash = try runTool(
                "/bin/bash",
                [
                    "-c",
                    """
                    shopt -s extglob; PATH="\(Paths.binaries):$PATH"; source "\(script)"
                    COMP_WORDS=(broadcastctl start --socket "\(daemon.socketPath)" --handler r); COMP_CWORD=5
                    COMP_LINE="\(line)"; COMP_POINT=${#COMP_LINE}
                    _broadcastctl broadcastctl r --handler; printf '%s\\n' "${COMPREPLY[@]}"
                    """,
                ])
            #expect(bash.stdout.split(separator: "\n") == ["record", "replay"], "\(bash)")
            // Every shell's script asks broadcastctl for them.
            for shell in ["bash", "zsh", "fish"] {
                let script = try runTool(broadcastctl, ["--generate-completion-script", shell]).stdout
                #expect(
                    script.contains("---completion start -- --handler"),
                    "the \(shell) script does not complete --handler")
            }
            try daemon.stop()
        }

        @Test func handlersFoldToTheTerminalsWidthBetweenWords() throws {
            let daemon = try DaemonHarness()
            let piped = try daemon.tool("broadcastctl", ["handlers"])
            #expect(
                piped.status == 0 && piped.stdout.split(separator: "\n").contains { $0.count > 60 },
                "piped, lines are not folded")
            let script = Paths.root + "/Tests/fixtures/pty_session.py"
            let result = try runTool(
                "/usr/bin/env",
                [
                    "python3", script, "--columns", "60", "--",
                    Paths.binary("broadcastctl"), "handlers", "--socket", daemon.socketPath,
                ])
            let lines = result.stdout.replacing("\r\n", with: "\n").split(separator: "\n").dropLast()  // EXIT
            let long = lines.filter { $0.count > 60 && $0.trimmingCharacters(in: .whitespaces).contains(" ") }
            #expect(!lines.isEmpty && long.isEmpty, "lines wider than 60 columns:\n\(long.joined(separator: "\n"))")
            // The same words in the same order: folded only at spaces.
            let folded = lines.joined(separator: " ").split(separator: " ")
            let words = piped.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" })
            let first = zip(folded, words).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            #expect(
                folded.count == words.count && first == nil,
                "folded: \(first.map { folded[$0] } ?? "") piped: \(first.map { words[$0] } ?? "")")
            try daemon.stop()
        }

        @Test func snapshotToATerminalIsRefused() throws {
            let script = Paths.root + "/Tests/fixtures/pty_session.py"
            let result = try runTool(
                "/usr/bin/env",
                [
                    "python3", script, "--", Paths.binary("broadcastctl"), "snapshot", "-",
                    "--socket", "/nonexistent/broadcastd.sock",
                ])
            #expect(
                result.stdout.contains("standard output is a terminal") && result.stdout.hasSuffix("EXIT 64\n"),
                "\(result.stdout)")
        }

        @Test(arguments: [
            ["broadcastctl", "status"], ["broadcastctl", "start", "--handler", "inspect"], ["broadcast-setup"],
        ])
        func noRuntimeDirectoryIsAUsageError(_ command: [String]) throws {
            let result = try runTool(
                "/usr/bin/env",
                ["-u", "XDG_RUNTIME_DIR", "-u", "BROADCASTD_SOCKET", Paths.binary(command[0])] + command.dropFirst())
            #expect(result.status == 64, "\(command): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("XDG_RUNTIME_DIR is not set"), "\(result.stderr)")
        }

        @Test func setupWithNoDaemonSaysSoWith69() throws {
            let result = try runTool(Paths.binary("broadcast-setup"), ["--socket", "/nonexistent/broadcastd.sock"])
            #expect(result.status == 69, "\(result.status) \(result.stderr)")
        }
    }
}
