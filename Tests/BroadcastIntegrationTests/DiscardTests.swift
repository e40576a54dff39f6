import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension Integration {
    /// `broadcastctl discard` (protocol revision 1.2): the recording is deleted, FINISHED and the status say so;
    /// a handler that cannot discard is refused and goes on; after a crash broadcastd removes the file the handler reported.
    @Suite(.serialized) struct DiscardTests {
        static let arguments = ["--source", "synthetic", "--size", "320x180", "--fps", "30"]

        @Test func aDiscardedRecordingLeavesNoFileAndStatusSaysSo() throws {
            let daemon = try DaemonHarness(Self.arguments)
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/take.mp4"
            let controller = try daemon.subscribedController()
            let id = try daemon.start(handler: "record", url: "file://" + path, on: controller)
            try daemon.awaitState(controller, .live)
            usleep(2_500_000)
            #expect(FileManager.default.fileExists(atPath: path), "recording")
            // A number no broadcast has (with encode=shared, id + 1 is its encoder).
            let refused = try daemon.tool("broadcastctl", ["discard", "--broadcast", "\(id + 9)"])
            #expect(refused.status == 1 && refused.stderr.contains("there is no broadcast \(id + 9)"), "\(refused)")
            let discarded = try daemon.tool("broadcastctl", ["discard", "--broadcast", "\(id)"])
            #expect(discarded.status == 0, "\(discarded)")
            let finished = try daemon.waitFor(controller, timeout: 30) {
                if case .finished(let f) = $0, f.broadcast == id { f } else { nil }
            }
            #expect(finished.error == nil && finished.discarded == true, "\(finished)")
            #expect(
                finished.result?["discarded"] == .bool(true) && finished.result?["bytes"] == nil,
                "\(String(describing: finished.result))")
            #expect(!FileManager.default.fileExists(atPath: path), "the recording is deleted")
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: daemon.runtime).filter { $0.hasPrefix("take") }
                    .isEmpty)
            let status = try controller.status()
            #expect(status.state == .finished && status.discarded == true)
            let text = try daemon.tool("broadcastctl", ["status"])
            #expect(
                text.stdout.hasPrefix("state: idle\n") && text.stdout.contains("(record) discarded; deleted \(path)"),
                "\(text.stdout)")
        }

        @Test func aHandlerThatCannotDiscardIsRefusedAndTheBroadcastGoesOn() throws {
            let daemon = try DaemonHarness(Self.arguments)
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let id = try daemon.start(
                handler: "inspect", url: "file://" + daemon.summaryPath("summary"), on: controller)
            try daemon.awaitState(controller, .live)
            let refused = try daemon.tool("broadcastctl", ["discard"])
            #expect(
                refused.status == 1 && refused.stderr.contains("handler 'inspect' cannot discard what it produced"),
                "\(refused)")
            #expect(try controller.status().state == .live, "not finished")
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, id) == nil)
            #expect(try controller.status().discarded == nil)
        }

        /// The Python SDK hands `discard` to its handler: the counter writes no summary and reports `discarded`.
        @Test func thePythonSDKPassesTheDiscardOn() throws {
            let daemon = try DaemonHarness(Self.arguments)
            defer { _ = try? daemon.stop() }
            let path = daemon.summaryPath("counter")
            let controller = try daemon.subscribedController()
            let id = try daemon.start(handler: "python-counter", url: "file://" + path, on: controller)
            try daemon.awaitState(controller, .live)
            usleep(500_000)
            try controller.discard(broadcast: id)
            let finished = try daemon.waitFor(controller, timeout: 30) {
                if case .finished(let f) = $0, f.broadcast == id { f } else { nil }
            }
            #expect(
                finished.error == nil && finished.discarded == true && finished.result == ["discarded": .bool(true)],
                "\(finished)")
            #expect(!FileManager.default.fileExists(atPath: path))
        }

        @Test func afterTheHandlerCrashedBroadcastdRemovesTheFileItReportedAndNothingElse() throws {
            let daemon = try DaemonHarness(Self.arguments)
            defer { _ = try? daemon.stop() }
            let path = daemon.runtime + "/crashed.mp4"
            let controller = try daemon.subscribedController()
            let id = try daemon.start(handler: "record", url: path, on: controller)
            try daemon.awaitState(controller, .live)
            usleep(2_500_000)
            for pid in daemon.children() { kill(pid, SIGKILL) }
            #expect(
                try daemon.awaitFinish(controller, id) != nil, "a killed handler finishes the broadcast with an error")
            #expect(FileManager.default.fileExists(atPath: path))
            try controller.discard()
            try daemon.waitFor(controller) {
                if case .stateChanged(let s) = $0, s.discarded == true { true } else { nil }
            }
            #expect(!FileManager.default.fileExists(atPath: path), "broadcastd removed the file the handler reported")

            // A file that was there before is the user's: the handler refuses it and does not report it, so it stays.
            let kept = daemon.runtime + "/kept.mp4"
            #expect(FileManager.default.createFile(atPath: kept, contents: Data("mine".utf8)))
            let second = try daemon.start(handler: "record", url: kept, on: controller)
            #expect(try daemon.awaitFinish(controller, second)?.message.contains("the file exists and is kept") == true)
            try controller.discard()
            try daemon.waitFor(controller) {
                if case .stateChanged(let s) = $0, s.discarded == true { true } else { nil }
            }
            #expect(try String(contentsOfFile: kept, encoding: .utf8) == "mine")
        }
    }
}
