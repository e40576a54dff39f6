import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastImage
import BroadcastProtocol
import BroadcastSystem

/// Exit statuses (documented in --help and the README).
enum Exit {
    /// The request was refused, or the broadcast finished with an error.
    static let failed: Int32 = 1
    /// Bad usage, or an environment that names no socket (XDG_RUNTIME_DIR unset).
    static let usage: Int32 = 64
    /// broadcastd is not running, or the socket is another user's (`not-running` either way).
    static let notRunning: Int32 = 69
}

struct ConnectionOptions: ParsableArguments {
    @Option(help: "Socket path (default: $BROADCASTD_SOCKET or $XDG_RUNTIME_DIR/broadcastd/broadcastd.sock).")
    var socket: String?

    /// No socket to be found (no --socket, BROADCASTD_SOCKET or XDG_RUNTIME_DIR) is a usage error (exit 64).
    func socketPath() throws -> String {
        do {
            return try SocketLocation.resolve(explicit: socket)
        } catch {
            throw UsageError(message: error.refusal?.message ?? "\(error)")
        }
    }
    func connect() throws -> ControllerClient { try ControllerClient(socketPath: socketPath()) }
}

/// A mistake in how broadcastctl was run that only shows once it runs: exit status 64, like swift-argument-parser's.
struct UsageError: Error {
    var message: String
}

/// Runs `body`, turning broadcastd's refusals into a message on stderr and the documented exit status;
/// with `json`, the refusal also goes to stdout as `{"error": {"code", "message"}}`.
func reporting(json: Bool, _ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as ExitCode {
        throw error
    } catch let error as UsageError {
        if json { print(compactJSON(["error": BroadcastError(.invalidRequest, error.message)])) }
        printError("broadcastctl: \(error.message)")
        throw ExitCode(Exit.usage)
    } catch ProtocolError.refused(let error) {
        if json { print(compactJSON(["error": error])) }
        printError("broadcastctl: \(error.message)")
        throw ExitCode(error.code == .notRunning ? Exit.notRunning : Exit.failed)
    } catch {
        if json {
            print(compactJSON(["error": BroadcastError(BroadcastError.Code(rawValue: "broadcastctl"), "\(error)")]))
        }
        printError("broadcastctl: \(error)")
        throw ExitCode(Exit.failed)
    }
}

func printError(_ text: String) { Terminal.prompt(text + "\n") }

struct Broadcastctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broadcastctl",
        abstract: "Controls broadcastd: start, pause, resume and stop broadcasts; show status and handlers.",
        discussion: """
            Examples:
              broadcastctl handlers
              broadcastctl sources
              broadcastctl start --handler inspect --url file:///tmp/summary.json \\
                  --duration 5 --wait
              broadcastctl start --handler inspect     (asks for the URL and setup fields)
              broadcastctl pause; broadcastctl resume; broadcastctl stop
              broadcastctl stop --broadcast 2; broadcastctl stop --all  (several at once)
              broadcastctl discard                     (stop, and delete what was recorded)
              broadcastctl status --watch
              broadcastctl snapshot screen.png

            Every command takes --json for scripts.

            Exit status: 0 success; 1 refused, or the broadcast finished with an error; \
            64 bad usage (also: XDG_RUNTIME_DIR unset, so no socket to find); 69 broadcastd \
            is not running, or stopped while a broadcast was waited for, or another user's \
            program listens on the socket (it is sent nothing); 130 setup cancelled with Ctrl-C.
            """,
        subcommands: [
            Handlers.self, Sources.self, Start.self, Record.self, Stream.self, Capture.self, Pause.self, Resume.self,
            Stop.self, Discard.self, Status.self, Snapshot.self, Send.self, Save.self, Mark.self,
        ])
}

if let message = SubcommandSuggestion.error(for: Array(CommandLine.arguments.dropFirst()), command: Broadcastctl.self) {
    Broadcastctl.exit(withError: ValidationError(message))
}
Broadcastctl.main()
