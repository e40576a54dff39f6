import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension Integration {
    /// Commands from controllers to handlers (protocol revision 2.3), through real processes: broadcastctl, broadcastd and
    /// the Python example handler, whose manifest lists `count`, `fail` and `hang`.
    @Suite(.serialized) struct CommandTests {
        static let arguments = ["--source", "synthetic", "--size", "320x180", "--fps", "30"]

        @Test func aCommandGoesToTheHandlerAndItsAnswerComesBack() throws {
            let daemon = try DaemonHarness(Self.arguments)
            defer { _ = try? daemon.stop() }
            let listed = try daemon.tool("broadcastctl", ["handlers"])
            #expect(
                listed.stdout.contains("command count: The samples received so far, per stream"), "\(listed.stdout)")
            #expect(listed.stdout.contains("stream=…  Only this stream"), "\(listed.stdout)")
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "python-counter", url: "file://" + daemon.summaryPath("counter"), on: controller)
            try daemon.awaitState(controller, .live)
            usleep(500_000)
            let answer = try controller.send(command: "count", broadcast: id)
            guard case .object(let counts)? = answer.result["counts"], case .number(let video)? = counts["video"] else {
                Issue.record("no counts in \(answer)")
                return
            }
            #expect(answer.broadcast == id && answer.command == "count" && video > 0, "\(answer)")
            let text = try daemon.tool("broadcastctl", ["send", "count", "stream=video"])
            // In words: an object as lines of its own.
            #expect(
                text.status == 0 && text.stdout.hasPrefix("counts:\n") && text.stdout.contains("\n  video: "),
                "\(text)")
            let json = try daemon.tool("broadcastctl", ["send", "--json", "--broadcast", "\(id)", "count"])
            #expect(json.status == 0 && json.stdout.contains("\"command\":\"count\""), "\(json)")
            // The handler's error, an unknown command and a wrong argument: clear errors, and the broadcast goes on.
            let failed = try daemon.tool("broadcastctl", ["send", "fail"])
            #expect(
                failed.status == 1
                    && failed.stderr.contains(
                        "handler 'python-counter' could not do 'fail': RuntimeError: failing on request"),
                "\(failed)")
            let unknown = try daemon.tool("broadcastctl", ["send", "--broadcast", "\(id)", "save"])
            #expect(
                unknown.status == 1
                    && unknown.stderr.contains("has no command 'save' (its commands: count, fail, hang)"), "\(unknown)")
            let argument = try daemon.tool("broadcastctl", ["send", "count", "last=3"])
            #expect(
                argument.status == 1 && argument.stderr.contains("has no argument 'last' (its arguments: stream)"),
                "\(argument)")
            let badStream = try daemon.tool("broadcastctl", ["send", "count", "stream=smell"])
            #expect(badStream.status == 1 && badStream.stderr.contains("no stream 'smell'"), "\(badStream)")
            #expect(try controller.status().state == .live)
            try controller.finish(broadcast: id)
            #expect(try daemon.awaitFinish(controller, id) == nil)
            let late = try daemon.tool("broadcastctl", ["send", "--broadcast", "\(id)", "count"])
            #expect(
                late.status == 1
                    && late.stderr.contains("broadcast \(id) is finished: its handler takes commands while"), "\(late)")
            let summary = try String(contentsOfFile: daemon.summaryPath("counter"), encoding: .utf8)
            #expect(
                summary.contains("\"command count\"") && summary.contains("\"command fail\""), "the handler saw them")
        }

        @Test func anOversizedCommandAndOneToAHandlerWithoutCommandsAreRefused() throws {
            let daemon = try DaemonHarness(Self.arguments)
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "inspect", url: "file://" + daemon.summaryPath("summary"), on: controller)
            try daemon.awaitState(controller, .live)
            let refused = try daemon.tool("broadcastctl", ["send", "--broadcast", String(id), "save"])
            #expect(refused.status == 1 && refused.stderr.contains("handler 'inspect' takes no commands"), "\(refused)")
            // Unaddressed, a command goes to the live broadcast that takes it, and there is none.
            let none = try daemon.tool("broadcastctl", ["send", "save"])
            #expect(
                none.status == 1 && none.stderr.contains("no replay broadcast is running to take 'save'"), "\(none)")
            let big = String(repeating: "x", count: 20_000)
            #expect(
                throws: ProtocolError.refused(
                    BroadcastError(.invalidRequest, "a command of 20056 bytes exceeds the limit of 16384"))
            ) {
                try controller.send(command: "save", arguments: ["what": .string(big)], broadcast: id)
            }
            #expect(try controller.status().state == .live, "the connection and the broadcast go on")
            try controller.finish(broadcast: id)
            #expect(try daemon.awaitFinish(controller, id) == nil)
        }
    }
}
