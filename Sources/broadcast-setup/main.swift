import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

struct BroadcastSetupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broadcast-setup",
        abstract: "Completes a broadcast request with a URL and setup info, or cancels it (the setup UI).",
        usage: "broadcast-setup [<options>]",
        discussion: """
            broadcastctl start runs this for you. On a terminal it asks for the handler's \
            setup fields (secrets without echo, defaults in brackets, Enter takes the \
            default; a required field is asked again until it has an answer); without a \
            terminal, or with --non-interactive, it uses --url, --set and the defaults. \
            Ctrl-C cancels the request.

            Exit status: 0 completed; 1 refused, or input ended; 64 bad usage (also: a \
            --url or --set the handler needs and lacks, or does not take; or \
            XDG_RUNTIME_DIR unset); 69 broadcastd is not running; 130 cancelled (Ctrl-C).

            Examples:
              broadcast-setup                   (asks for the waiting request's fields)
              broadcast-setup --non-interactive --url file:///tmp/talk.mkv --set audio=app
            """)

    @Option(help: "The broadcast to set up (default: the one waiting).")
    var request: UInt32?
    @Option(help: "The broadcast URL.")
    var url: String?
    @Option(name: .customLong("set"), help: ArgumentHelp("A setup field; repeatable.", valueName: "KEY=VALUE"))
    var assignments: [String] = []
    @Flag(help: "Never prompt.")
    var nonInteractive = false
    @Option(help: "Socket path (default: $BROADCASTD_SOCKET or $XDG_RUNTIME_DIR/broadcastd/broadcastd.sock).")
    var socket: String?

    func run() throws {
        Terminal.catchInterrupt(2)
        let socketPath: String
        do {
            socketPath = try SocketLocation.resolve(explicit: socket)
        } catch {
            printError("broadcast-setup: \(error.refusal?.message ?? "\(error)")")
            throw ExitCode(64)
        }
        do {
            let client = try SetupClient(socketPath: socketPath)
            let pending = try client.fetchRequest(broadcast: request)
            do {
                var form = SetupForm(
                    manifest: pending.handler, url: url, values: try SetupForm.parseAssignments(assignments))
                let interactive = !nonInteractive && Terminal.isInteractive()
                if interactive {
                    Terminal.prompt("Setting up broadcast \(pending.broadcast) with \(pending.handler.displayName)\n")
                }
                try form.fill(interactive: interactive) { question, secret in
                    Terminal.prompt(question)
                    return Terminal.readLine(echo: !secret)
                }
                if let problem = form.problem() {
                    // A mistake in what was given: said once, here, as a usage error (broadcastctl says nothing more).
                    try? client.cancel(broadcast: pending.broadcast, error: problem)
                    printError("broadcast-setup: \(problem.message)")
                    throw ExitCode(64)
                }
                try client.complete(broadcast: pending.broadcast, url: form.url, setupInfo: form.values)
            } catch let exit as ExitCode {
                throw exit
            } catch {
                if Terminal.wasInterrupted {
                    // A cancellation, not a failure: the request goes, and the shell hears of SIGINT (128 + 2).
                    try? client.cancel(
                        broadcast: pending.broadcast,
                        error: BroadcastError(.setupCancelled, "cancelled by the user (Ctrl-C)"))
                    printError("\nsetup cancelled")
                    throw ExitCode(130)
                }
                let reason =
                    (error as? BroadcastError) ?? (error as? ProtocolError)?.refusal
                    ?? BroadcastError(.setupCancelled, "\(error)")
                try? client.cancel(broadcast: pending.broadcast, error: reason)
                throw reason
            }
        } catch let exit as ExitCode {
            throw exit
        } catch {
            printError("broadcast-setup: \(error)")
            throw ExitCode((error as? ProtocolError)?.refusal?.code == .notRunning ? 69 : 1)
        }
    }
}

func printError(_ text: String) {
    Terminal.prompt(text + "\n")
}

BroadcastSetupCommand.main()
