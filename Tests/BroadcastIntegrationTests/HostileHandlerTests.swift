import BroadcastClient
import BroadcastCore
import Foundation
import Testing

/// Handlers that try to hurt the daemon (issue: hardening). Each runs against the real daemon.
extension Integration {
@Suite(.serialized) struct HostileHandlerTests {
    @Test func aHandlerCannotResizeOrWriteTheFramePool() throws {
        let daemon = try DaemonHarness(["--source", "synthetic", "--size", "640x360", "--fps", "30"])
        let controller = try daemon.subscribedController()
        let summary = daemon.summaryPath("hostile")
        let id = try daemon.start(handler: "hostile", url: "file://" + summary, maxDuration: 2, on: controller)
        #expect(try daemon.awaitFinish(controller, id) == nil)
        let attacks = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: summary + ".attacks.json"))) as? [String: String]
        let names = ["shrink", "grow", "mapWritable", "reopenAndMapWritable", "reopenAndWrite", "reopenAndShrink"]
        #expect(Set(attacks?.keys.map { $0 } ?? []) == Set(names), "\(String(describing: attacks))")
        for name in names {
            #expect(attacks?[name] != nil && attacks?[name] != "succeeded", "\(name): \(attacks?[name] ?? "not tried")")
        }
        // The daemon captured and delivered all along, and serves the next broadcast.
        let counts = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: summary))) as? [String: Any]
        let video = (counts?["counts"] as? [String: Int])?["video"] ?? 0
        #expect(video >= 55, "\(video) frames in 2 s at 30 fps")
        let next = try daemon.start(handler: "inspect", url: daemon.summaryPath("after"), maxDuration: 0.5, on: controller)
        #expect(try daemon.awaitFinish(controller, next) == nil)
        try daemon.stop()
    }
}
}
