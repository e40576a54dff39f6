import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

/// The memory budget holds for what the daemon really has resident, in every configuration it accepts.
extension Integration {
@Suite(.serialized) struct MemoryBudgetTests {
    /// A 3840x2160 X screen at 30 fps with PipeWire app audio and microphone, as users run it: at the default
    /// budget the daemon either fits it or refuses to start, naming the budget that would; with that budget,
    /// its peak resident memory (VmHWM) through a broadcast stays inside it.
    @Test func fourKWithAudioStaysInsideTheBudgetItAccepts() throws {
        let screen = try XServer(.xvfb, width: 3840, height: 2160)
        let pipewire = try PipeWireHarness()
        let arguments = ["--source", "x11", "--display", screen.display, "--fps", "30"]
        let environment = ["PIPEWIRE_REMOTE": pipewire.socketPath]
        var budget = 50
        let daemon: DaemonHarness
        do {
            daemon = try DaemonHarness(arguments + ["--memory-budget", "50"], environment: environment)
        } catch {
            let text = "\(error)"
            let advice = try #require(text.range(of: #"use --memory-budget \d+"#, options: .regularExpression), "\(text)")
            budget = Int(text[advice].split(separator: " ").last!)!
            #expect(text.contains("3840x2160 nv12 needs 3 frame slots of 11.9 MB plus"), "\(text)")
            daemon = try DaemonHarness(arguments + ["--memory-budget", "\(budget)"], environment: environment)
        }
        let controller = try daemon.subscribedController()
        let id = try daemon.start(handler: "inspect", url: daemon.summaryPath("4k"), maxDuration: 5, on: controller)
        #expect(try daemon.awaitFinish(controller, id) == nil)
        let summary = try InspectSummary.load(daemon.summaryPath("4k"))
        let counts = summary.streams.mapValues(\.count)
        #expect(counts["video", default: 0] > 30 && counts["audioApp", default: 0] > 50 && counts["audioMic", default: 0] > 50, "\(counts)")
        let peak = PeerLimitTests.statusKiB(daemon.pid, "VmHWM")
        #expect(peak << 10 <= budget << 20, "VmHWM \(peak) KiB with a budget of \(budget) MB")
        try daemon.stop()
    }
}
}
