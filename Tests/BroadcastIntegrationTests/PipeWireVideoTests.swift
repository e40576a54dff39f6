import BroadcastClient
import BroadcastCore
import Foundation
import Testing

/// A PipeWire video node that writes the buffer metadata a compositor does (the tests' own source).
@Suite(.serialized) struct PipeWireVideoTests {
    /// The crop region is the picture (the red around it never shows), and damage metadata limits the
    /// conversion to the rows that changed: the rest is copied from the previous frame and still right.
    @Test func theCropRegionIsThePictureAndDamageLimitsTheConversion() throws {
        let pipewire = try PipeWireHarness(tones: false)
        try pipewire.testVideoSource("meta-video", ["--size", "320x240", "--crop", "40,30,240x180", "--band", "16", "--damage", "--fps", "30"])
        let daemon = try DaemonHarness(["--source", "pipewire", "--pipewire-node", "meta-video", "--fps", "30", "--app-audio", "none", "--mic", "none"],
                                       environment: ["PIPEWIRE_RUNTIME_DIR": pipewire.runtime])
        defer { _ = try? daemon.stop() }
        let controller = try daemon.subscribedController()
        let path = daemon.summaryPath("meta")
        let id = try daemon.start(handler: "inspect", url: path, setupInfo: ["frameFile": daemon.runtime + "/meta.frame"], on: controller)
        try daemon.awaitState(controller, .live)
        usleep(2_000_000)
        let capture = try #require(try daemon.controller().status().capture)
        try controller.finish()
        #expect(try daemon.awaitFinish(controller, id) == nil)

        let frame = try RGBFrame(dump: try #require(try InspectSummary.load(path).lastFrame))
        #expect(frame.width == 240 && frame.height == 180, "\(frame.width)x\(frame.height): the crop region's size")
        // The band (picture rows 82..<98) alternates green and white; the rest is the base colour.
        let band: (r: Double, g: Double, b: Double) = frame[120, 90].g > 220 && frame[120, 90].r > 220 ? (255, 255, 255) : (0x20, 0xc0, 0x40)
        let psnr = frame.psnr { _, y in y >= 82 && y < 98 ? band : (0x30, 0x60, 0xd0) }
        #expect(psnr >= 30, "PSNR \(psnr) dB against the picture the source draws")
        let converted = capture["pipewireRowsConverted"] ?? 0, copied = capture["pipewireRowsKept"] ?? 0
        let frames = capture["pipewireFrames"] ?? 0
        #expect(frames >= 40, "\(frames) frames from a 30 fps source in 2 s")
        #expect(copied > 4 * converted && converted > 0, "rows converted \(converted), copied from the previous frame \(copied)")
    }
}
