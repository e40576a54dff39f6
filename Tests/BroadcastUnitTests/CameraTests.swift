import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import Testing

@testable import BroadcastDaemon

/// Cameras: `--camera` matched against PipeWire's video sources, and a START's camera in the daemon's core.
@Suite struct CameraTests {
    static let screen = CameraDescription(name: "screen-cast", serial: "30", role: nil)
    static let webcam = CameraDescription(
        name: "v4l2_input.pci-0000_00_14.0-usb-0_1_1.0", description: "Integrated Webcam", serial: "57", role: "Camera",
        formats: [CameraFormat(pixelFormat: "YUY2", width: 1280, height: 720, frameRates: [30, 15])])
    static let other = CameraDescription(name: "testcam", description: "Test Camera", serial: "61", role: "Camera")

    @Test func aCameraIsMatchedByNodeNameDescriptionInAnyCaseOrSerial() throws {
        let cameras = [Self.screen, Self.webcam, Self.other]
        #expect(try CameraRequest("testcam").pick(from: cameras).get() == Self.other)
        #expect(try CameraRequest("integrated webcam").pick(from: cameras).get() == Self.webcam)
        #expect(try CameraRequest("61").pick(from: cameras).get() == Self.other)
        #expect(try CameraRequest("none").pick(from: cameras).get() == nil)
    }

    /// `default`: the first whose media.role is Camera, not merely the first video source (a screen cast's node).
    @Test func theDefaultIsTheFirstCameraByRoleElseTheFirstVideoSource() throws {
        #expect(try CameraRequest("default").pick(from: [Self.screen, Self.webcam, Self.other]).get() == Self.webcam)
        #expect(try CameraRequest("default").pick(from: [Self.screen]).get() == Self.screen)
    }

    @Test func aNameThatMatchesNothingIsRefusedWithTheListOfCameras() {
        guard case .failure(let error) = CameraRequest("nope").pick(from: [Self.screen, Self.webcam]) else {
            Issue.record("matched")
            return
        }
        #expect(error.code == .captureFailed)
        #expect(
            error.message
                == "--camera nope: no camera of that name, description or serial; PipeWire has screen-cast (serial 30), "
                + "v4l2_input.pci-0000_00_14.0-usb-0_1_1.0 (Integrated Webcam, serial 57)")
        guard case .failure(let none) = CameraRequest("default").pick(from: []) else {
            Issue.record("a default without cameras")
            return
        }
        #expect(none.message == "--camera default: PipeWire has no camera (no node of media.class Video/Source)")
    }

    @Test func aFormatReadsAsPixelFormatSizeAndRates() {
        #expect(Self.webcam.formats[0].description == "YUY2 1280x720 30/15 fps")
        #expect(CameraFormat(pixelFormat: "NV12", width: 640, height: 480, frameRates: [7.5]).description
            == "NV12 640x480 7.5 fps")
    }

    @Test func aStartsCameraReplacesBroadcastdsAndIsCheckedLikeTheOtherStrings() {
        let own = CaptureChoice(frameRate: 30, camera: "none")
        #expect(own.choosing(CaptureChoice(camera: "testcam")).camera == "testcam")
        #expect(own.choosing(CaptureChoice(frameRate: 15)).camera == "none")
        #expect(CaptureChoice(camera: "").problem != nil)
        #expect(CaptureChoice(camera: "bad\u{1}").problem != nil)
        #expect(CaptureChoice(camera: "testcam").description == "--camera testcam")
    }

    // MARK: - In the core

    /// A core whose PipeWire has `cameras`, counting how often it was asked; the screen's source never changes.
    final class Cameras {
        var list: [CameraDescription]
        var looks = 0
        init(_ list: [CameraDescription]) { self.list = list }
        var sources: CaptureSources {
            CaptureSources(
                defaults: CaptureChoice(frameRate: 30, camera: "none"),
                make: { choice throws(CaptureError) in
                    throw CaptureError(source: "test", operation: "make", reason: "asked for a new screen: \(choice)")
                },
                cameras: { () throws(CaptureError) in
                    self.looks += 1
                    return self.list
                })
        }
    }

    @Test func aStartWithAnUnknownCameraIsRefusedWithTheListAndNothingStarts() throws {
        let cameras = Cameras([Self.screen, Self.webcam])
        let harness = try CoreHarness(sources: cameras.sources)
        let controller = try harness.peer(.controller)
        let reply = try harness.request(
            .start, StartRequest(handler: "stand-in", capture: CaptureChoice(camera: "nope")), from: controller)
        #expect(reply.opcode == .error)
        let error = try reply.decode(BroadcastError.self)
        #expect(error.code == .captureFailed && error.message.contains("PipeWire has screen-cast (serial 30)"))
        #expect(harness.core.capture == nil && cameras.looks == 1)
    }

    /// The first broadcast's camera is the capture's, named in the status; one joining with another camera is
    /// refused as capture-in-use, one with the same (or none) joins.
    @Test func theFirstBroadcastChoosesTheCameraAndOthersJoinOnlyWithIt() throws {
        let cameras = Cameras([Self.screen, Self.webcam, Self.other])
        let harness = try CoreHarness(sources: cameras.sources)
        let controller = try harness.peer(.controller)
        let first = try harness.request(
            .start, StartRequest(handler: "stand-in", capture: CaptureChoice(camera: "default")), from: controller)
        let id = try #require(try first.decode(BroadcastReference.self).broadcast)
        #expect(harness.core.capture?.camera == Self.webcam)
        let status = try harness.request(.getStatus, BroadcastReference(broadcast: id), from: controller)
        #expect(try status.decode(BroadcastStatus.self).camera == Self.webcam.title)

        let other = try harness.request(
            .start, StartRequest(handler: "stand-in", capture: CaptureChoice(camera: "Test Camera")), from: controller)
        let refusal = try other.decode(BroadcastError.self)
        #expect(refusal.code == .captureInUse && refusal.message.contains("--camera Test Camera"), "\(refusal)")
        let same = try harness.request(
            .start, StartRequest(handler: "stand-in", capture: CaptureChoice(camera: "57")), from: controller)
        #expect(same.opcode == .ok)
        let without = try harness.request(
            .start, StartRequest(handler: "stand-in", capture: CaptureChoice(camera: "none")), from: controller)
        #expect(without.opcode == .ok)
    }

    @Test func sourcesListsTheCameras() throws {
        let cameras = Cameras([Self.webcam])
        let harness = try CoreHarness(sources: cameras.sources)
        let controller = try harness.peer(.controller)
        let list = try harness.request(.listSources, from: controller).decode(SourceList.self)
        #expect(list.cameras == [Self.webcam])
    }
}
