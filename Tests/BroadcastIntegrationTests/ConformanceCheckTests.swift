import Foundation
import Testing

extension Integration {
    /// The Python package as a third party installs it (`pip install` of python/ into a virtual environment) and its
    /// conformance check, `broadcastd-check-handler`, run against the real broadcastd: the example handler follows the
    /// protocol, and a handler that releases a slot twice is told so in the document's words.
    @Suite(.serialized) struct ConformanceCheckTests {
        static func check(_ arguments: [String]) throws -> ToolResult {
            let bin = try Paths.pythonEnvironment.get()
            let path = bin + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
            return try runTool(
                bin + "/broadcastd-check-handler", arguments + ["--broadcastd", Paths.binary("broadcastd")],
                environment: ["PATH": path], timeout: 90)
        }

        @Test func theExampleHandlerFollowsTheProtocol() throws {
            let result = try Self.check([
                "python-counter", "--handlers-dir", Paths.root + "/examples/python",
                "--command", "count", "--command", "count stream=video", "--command", "fail",
            ])
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
            let steps =
                "went through: live, paused, resumed, command count, command count, "
                + "command fail (answered with an error)"
            #expect(result.stdout.contains(steps), "\(result.stdout)")
            #expect(result.stdout.contains("no problem: python-counter follows docs/protocol.md"), "\(result.stdout)")
            // Every VIDEO_SAMPLE was released, once.
            let counts = result.stdout.split(separator: "\n").first { $0.contains("VIDEO_SAMPLEs") } ?? ""
            let numbers = counts.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
            #expect(numbers.count >= 4 && numbers[2] > 0 && numbers[2] == numbers[3], "\(counts)")
        }

        @Test func aHandlerThatReleasesASlotTwiceIsToldSoInTheDocumentsWords() throws {
            let result = try Self.check(["double-release", "--handlers-dir", Paths.root + "/Tests/fixtures/handlers"])
            #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
            #expect(
                result.stdout.contains("PROBLEM: RELEASE_SLOT of slot ")
                    && result.stdout.contains("which it did not hold (already released)"), "\(result.stdout)")
            #expect(
                result.stdout.contains("section 8.5: releasing a slot the handler does not hold"), "\(result.stdout)")
            #expect(result.stdout.contains("broadcastd finished the broadcast with handler-failed"), "\(result.stdout)")
        }

        @Test func aHandlerThatCannotBeFoundIsACheckThatCouldNotRun() throws {
            let result = try Self.check(["no-such-handler", "--handlers-dir", Paths.root + "/Tests/fixtures/handlers"])
            #expect(result.status == 2, "\(result)")
            #expect(result.stderr.contains("no manifest of a handler named 'no-such-handler'"), "\(result)")
        }
    }
}
