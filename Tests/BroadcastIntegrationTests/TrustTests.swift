import BroadcastClient
import BroadcastCore
import Foundation
import Testing

/// What broadcastd and its programs take on trust, and no longer do: whatever sits in a handler directory,
/// whoever answers on the socket.
extension Integration {
@Suite(.serialized) struct TrustTests {
    @Test func aFIFOOrADeviceInAHandlerDirectoryIsSkippedWithoutBlockingTheDaemon() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("fifo-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        #expect(mkfifo(scratch + "/aaa-fifo.json", 0o600) == 0)
        try FileManager.default.createSymbolicLink(atPath: scratch + "/zero.json", withDestinationPath: "/dev/zero")
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "320x180", "--handlers-dir", scratch])
        defer { _ = try? daemon.stop() }

        let asked = Date()
        let status = try daemon.tool("broadcastctl", ["status"], timeout: 10)
        #expect(status.status == 0 && status.stdout.contains("idle"), "\(status.stdout)\(status.stderr)\n\(daemon.log)")
        #expect(Date().timeIntervalSince(asked) < 2, "status took \(Date().timeIntervalSince(asked)) s")

        let started = Date()
        let run = try daemon.tool("broadcastctl", ["start", "--handler", "inspect", "--url", daemon.summaryPath("fifo"),
                                                   "--duration", "0.5", "--wait"], timeout: 15)
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)\n\(daemon.log)")
        #expect(Date().timeIntervalSince(started) < 5, "a 0.5 s broadcast took \(Date().timeIntervalSince(started)) s")
        #expect(try InspectSummary.load(daemon.summaryPath("fifo")).streams["video"]?.count ?? 0 > 0)
        #expect(daemon.log.contains("aaa-fifo.json: not a regular file (a FIFO); a manifest is a regular file"), "\(daemon.log)")
        #expect(daemon.log.contains("zero.json: not a regular file (a character device)"), "\(daemon.log)")
        try daemon.stop()
    }
}
}
