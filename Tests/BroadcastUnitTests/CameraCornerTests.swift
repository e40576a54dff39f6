import BroadcastCore
import Testing

@testable import BroadcastEncoding
@testable import BroadcastHandlerKit
@testable import BroadcastRecord
@testable import BroadcastReplay
@testable import BroadcastStream

/// The camera picture-in-picture of the record, replay and stream handlers: where the corner goes, the setup fields
/// that say so, and the camera's picture in the encoder's frames.
@Suite struct CameraCornerTests {
    @Test func theCornerKeepsTheCamerasShapeOnEvenPixelsInsideTheMargin() {
        let hd = (width: 1280, height: 720)
        // 25 % of 1920 is 480 wide, 270 high; the margin is 2 % of the width, 38 (38.4 made even).
        let corners: [(CameraLayout.Position, Letterbox)] = [
            (.bottomRight, Letterbox(x: 1402, y: 772, width: 480, height: 270)),
            (.bottomLeft, Letterbox(x: 38, y: 772, width: 480, height: 270)),
            (.topRight, Letterbox(x: 1402, y: 38, width: 480, height: 270)),
            (.topLeft, Letterbox(x: 38, y: 38, width: 480, height: 270)),
        ]
        for (position, box) in corners {
            #expect(CameraLayout(position: position).box(camera: hd, in: 1920, 1080) == box, "\(position)")
        }
        // 4:3 at 33 % of 640x360: 211.2 wide made 210, 157.5 high made 156, margin 12.
        #expect(
            CameraLayout(sizePercent: 33).box(camera: (640, 480), in: 640, 360)
                == Letterbox(x: 418, y: 192, width: 210, height: 156))
        // A portrait camera at half of a low, wide frame: as high as the frame's inside (360 less two margins of
        // 24), as wide as its shape then says.
        #expect(
            CameraLayout(position: .topRight, sizePercent: 50).box(camera: (480, 640), in: 1280, 360)
                == Letterbox(x: 1022, y: 24, width: 234, height: 312))
        // The smallest frame still gets a corner of two pixels.
        #expect(
            CameraLayout(sizePercent: 5).box(camera: hd, in: 16, 16) == Letterbox(x: 14, y: 14, width: 2, height: 2))
        for (width, height) in [(640, 360), (1366, 768), (1920, 1080), (3840, 2160), (720, 1280), (322, 98)] {
            for camera in [(1280, 720), (640, 480), (480, 640), (1, 1000), (1000, 1)] {
                for position in CameraLayout.Position.allCases {
                    for size in [5.0, 12.5, 25, 37, 50] {
                        let box = CameraLayout(position: position, sizePercent: size).box(
                            camera: camera, in: width, height)
                        #expect(
                            [box.x, box.y, box.width, box.height].allSatisfy { $0 % 2 == 0 } && box.width >= 2
                                && box.height >= 2 && box.x >= 0 && box.y >= 0 && box.x + box.width <= width
                                && box.y + box.height <= height && Double(box.width) <= Double(width) * size / 100,
                            "\(camera) at \(size) % \(position) of \(width)x\(height): \(box)")
                    }
                }
            }
        }
    }

    @Test func theSetupFieldsSayWhetherWhereAndHowLarge() throws {
        var fields = ["camera": "on", "cameraPosition": "top-left", "cameraSize": "30%", "crf": "20"]
        #expect(
            try CameraLayout.taking(&fields, trackRefusal: "-")
                == .corner(CameraLayout(position: .topLeft, sizePercent: 30)))
        #expect(fields == ["crf": "20"], "the camera's fields are taken, the others left")
        var off = ["cameraPosition": "top-right"]
        #expect(try CameraLayout.taking(&off, trackRefusal: "-") == nil && off.isEmpty)
        #expect(try EncodingOptions(taking: &fields).camera == nil)
        var on = ["camera": "true"]
        #expect(try EncodingOptions(taking: &on).camera == .corner(CameraLayout()))
        let refusals: [([String: String], String)] = [
            (["camera": "track"], "camera track: the replay buffer keeps one video track; use on (picture-in-picture)"),
            (["camera": "maybe"], "camera 'maybe': off, on (picture-in-picture) or track"),
            (
                ["camera": "on", "cameraSize": "60"],
                "cameraSize '60': the camera's width in percent of the video's, 5-50"
            ),
            (["camera": "on", "cameraSize": "4.9"], "5-50"),
            (["camera": "on", "cameraPosition": "middle"], "one of bottom-right, bottom-left, top-right, top-left"),
        ]
        for (setup, expected) in refusals {
            let error = #expect(throws: SetupFieldError.self) { try ReplayOptions(setupInfo: setup) }
            #expect(error?.description.contains(expected) == true, "\(String(describing: error))")
        }
        // The record handler takes camera=track into Matroska only.
        let track = try RecordOptions(url: "/tmp/a.mkv", setupInfo: ["camera": "track"], defaultPath: { "" })
        #expect(track.encoding.camera == .track)
        let mp4 = #expect(throws: SetupFieldError.self) {
            try RecordOptions(url: "/tmp/a.mp4", setupInfo: ["camera": "track"], defaultPath: { "" })
        }
        #expect(mp4?.description.contains("goes into .mkv files (Matroska)") == true, "\(String(describing: mp4))")
        // The stream handler takes the same fields; it never has a second video track.
        let stream = try StreamOptions(
            url: "srt://127.0.0.1:9000", setupInfo: ["camera": "on", "cameraPosition": "bottom-left"])
        #expect(stream.camera == CameraLayout(position: .bottomLeft))
        #expect(
            throws: StreamError("camera track: a stream carries one video track; use on (picture-in-picture) or off")
        ) {
            try StreamOptions(url: "srt://127.0.0.1:9000", setupInfo: ["camera": "track"])
        }
    }

    /// A solid camera frame (Y 81, Cb 90, Cr 240: red) lands in the top-left corner of a grey screen, at 25 % of its
    /// width and the camera's shape, the rest of the screen untouched; into NV12 and I420 encoders.
    @Test(arguments: [PixelFormat.nv12, .i420]) func aCameraFrameLandsInItsCornerAndNowhereElse(_ layout: PixelFormat)
        throws
    {
        let screen = VideoFormat(width: 320, height: 180)
        let input = try VideoInput(encoding: VideoFormat(width: 320, height: 180, pixelFormat: layout), from: screen)
        let corner = CameraCorner(CameraLayout(position: .topLeft), canvas: input.format)
        // 80x60 (4:3 at 25 % of 320), 6 in from the edges (2 % of 320 made even).
        let box = Letterbox(x: 6, y: 6, width: 80, height: 60)
        let camera = VideoFormat(width: 160, height: 120)
        try solid(camera, y: 81, cb: 90, cr: 240) { try corner.add($0, layout: camera, time: 1_000_000_000) }
        let frame = try solid(screen, y: 200, cb: 128, cr: 128) {
            try input.frame($0, layout: screen, time: 0, captured: 1_000_000_000, corner: corner)
        }
        let picture = Picture(frame, layout)
        for y in 0..<180 {
            for x in 0..<320 {
                let inside = x >= box.x && x < box.x + box.width && y >= box.y && y < box.y + box.height
                let expected = inside ? (81, 90, 240) : (200, 128, 128)
                guard picture.pixel(x, y) == expected else {
                    Issue.record("(\(x), \(y)): \(picture.pixel(x, y)), not \(expected)")
                    return
                }
            }
        }
    }

    /// The camera goes away: its last picture stays for 2 s of capture time after its last frame, then the screen
    /// shows through (where the corner lay in a letterbox's bar: black again, not the old picture); it comes back
    /// with the camera. Each change makes the frame differ from the one before (`changes`), so that a still
    /// screen's repeat is encoded.
    @Test func aLostCameraStaysTwoSecondsThenTheScreenShowsThrough() throws {
        // A square screen on a 320x180 canvas: bars left and right of x 70-250; the corner (6, 6, 80x60) half in the
        // left bar.
        let square = VideoFormat(width: 100, height: 100)
        let input = try VideoInput(encoding: VideoFormat(width: 320, height: 180), from: square)
        let corner = CameraCorner(CameraLayout(position: .topLeft), canvas: input.format)
        let camera = VideoFormat(width: 160, height: 120)
        let second: UInt64 = 1_000_000_000
        func frame(at time: UInt64) throws -> Picture {
            try solid(square, y: 200, cb: 128, cr: 128) {
                Picture(try input.frame($0, layout: square, time: time, captured: time, corner: corner), .nv12)
            }
        }
        #expect(!corner.changes(at: 0))
        #expect(try frame(at: 0).pixel(10, 10) == (16, 128, 128), "no camera: the bar")
        try solid(camera, y: 81, cb: 90, cr: 240) { try corner.add($0, layout: camera, time: second) }
        #expect(corner.changes(at: second))
        #expect(try frame(at: second).pixel(10, 10) == (81, 90, 240))
        #expect(try frame(at: second).pixel(80, 10) == (81, 90, 240), "the corner over the screen")
        #expect(!corner.changes(at: second + second / 30), "the same picture again")
        corner.cameraChanged(to: nil)
        #expect(!corner.changes(at: 2 * second))
        #expect(try frame(at: 2 * second).pixel(10, 10) == (81, 90, 240))
        #expect(corner.changes(at: 3 * second + 1), "gone 2 s after the last frame")
        let gone = try frame(at: 3 * second + 1)
        #expect(gone.pixel(10, 10) == (16, 128, 128) && gone.pixel(80, 10) == (200, 128, 128))
        #expect(!corner.changes(at: 4 * second))
        corner.cameraChanged(to: camera)
        try solid(camera, y: 81, cb: 90, cr: 240) { try corner.add($0, layout: camera, time: 5 * second) }
        #expect(corner.changes(at: 5 * second))
        #expect(try frame(at: 5 * second).pixel(80, 10) == (81, 90, 240))
    }

    /// A still screen (repeats, encoded only for the first two keyframes by time after a change; later ones are
    /// copies) with a camera at 10 fps: each new camera picture is encoded as a changed picture, and so is the frame
    /// where a lost camera's corner goes.
    @Test func aStillScreenIsEncodedWhenTheCameraMoves() throws {
        var setup = ["camera": "on", "audio": "none"]
        let handler = BroadcastSampleHandler()
        handler.videoFormat = VideoFormat(width: 160, height: 96)
        handler.audioStreams = []
        let buffer = ReplayBuffer(length: 30_000_000_000, maxBytes: 64 << 20)
        let encoder = try RecordingEncoder(try EncodingOptions(taking: &setup), for: handler, output: buffer)
        let interval: UInt64 = 1_000_000_000 / 30
        let camera = VideoFormat(width: 64, height: 48)
        // 2 s with the camera (a new picture every third frame), then 3 s after it went away.
        for index in 0..<150 {
            let time = 7_000_000_000 + UInt64(index) * interval
            if index < 60, index % 3 == 0 {
                try solid(camera, y: UInt8(20 + index), cb: 90, cr: 240) { data in
                    try encoder.addCamera(sample(data, camera, time, .videoCamera))
                }
            }
            if index == 60 { encoder.corner?.cameraChanged(to: nil) }
            try solid(handler.videoFormat, y: 100, cb: 128, cr: 128) { data in
                var screen = sample(data, handler.videoFormat, time, .video)
                screen.isRepeat = index > 0
                try encoder.addVideo(screen)
            }
        }
        // The 20 camera pictures, the corner's going (at 3.9 s, 2 s after the last picture), and the keyframes by
        // time after each (at 2 and 4 s).
        #expect(encoder.corner?.frames == 20)
        #expect(encoder.encodedFrames >= 21 && encoder.encodedFrames <= 26, "\(encoder.encodedFrames) frames encoded")
        #expect(encoder.skippedRepeats == 150 - encoder.encodedFrames)
    }

    /// Each camera picture belongs to the screen frame nearest it: a screen frame takes those captured until halfway
    /// to the next screen frame (`until`; for a repeat, or when the next is not known, half a frame) and shows the
    /// last of them, or the first when all came later.
    @Test func aScreenFrameShowsTheCamerasPictureOfItsTime() {
        let ms: UInt64 = 1_000_000
        let frame = 33 * ms
        #expect(CameraPairing.pick([], until: 100 * ms) == nil)
        #expect(CameraPairing.pick([100 * ms, 133 * ms, 166 * ms], until: 120 * ms) == 0)
        #expect(CameraPairing.pick([100 * ms, 133 * ms, 166 * ms], until: 150 * ms) == 1)
        #expect(CameraPairing.pick([100 * ms, 133 * ms, 166 * ms], until: 50 * ms) == 0)
        #expect(CameraPairing.pick([100 * ms, 133 * ms, 166 * ms], until: 1000 * ms) == 2)
        #expect(CameraPairing.until(100 * ms, changed: true, next: 133 * ms, duration: frame) == 116 * ms + ms / 2)
        // A changed screen whose grab kept the loop busy: the camera's pictures meanwhile are its own.
        #expect(CameraPairing.until(100 * ms, changed: true, next: 300 * ms, duration: frame) == 200 * ms)
        // A repeat before deadlines missed: the next screen frame is nearer to what came after half a frame.
        #expect(CameraPairing.until(100 * ms, changed: false, next: 300 * ms, duration: frame) == 116 * ms + ms / 2)
        #expect(CameraPairing.until(100 * ms, changed: true, next: nil, duration: frame) == 116 * ms + ms / 2)
        #expect(CameraPairing.until(100 * ms, changed: true, next: 110 * ms, duration: frame) == 116 * ms + ms / 2)
    }

    /// With a camera in the corner a screen frame is held (its picture copied, its slot given back) until the next
    /// comes, which hands it on with the camera's pictures until halfway to it; so a camera frame that comes after the
    /// screen's, captured 20 ms after it, is in it. A repeat right after the frame held is not copied again. No frame
    /// is held before the camera's first picture, nor once the camera went away.
    @Test func screenFramesWaitForTheCamerasPicturesOfTheirTime() throws {
        let screen = VideoFormat(width: 320, height: 180)
        let input = try VideoInput(encoding: screen, from: screen)
        let corner = CameraCorner(CameraLayout(position: .topLeft), canvas: input.format)
        let camera = VideoFormat(width: 160, height: 120)
        let ms: UInt64 = 1_000_000
        var encoded: [(time: UInt64, screen: Int, corner: Int)] = []
        func pass(_ luma: UInt8, at time: UInt64, sequence: UInt64, repeated: Bool = false) throws {
            try solid(screen, y: luma, cb: 128, cr: 128) { data in
                var sample = sample(data, screen, time, .video, sequence: sequence)
                sample.isRepeat = repeated
                try corner.pass(sample) { held, until throws(MediaError) in
                    let frame = Picture(
                        try input.frame(
                            held.data, layout: screen, time: 0, captured: held.presentationTime, corner: corner,
                            until: until), .nv12)
                    encoded.append((held.presentationTime, frame.pixel(200, 150).0, frame.pixel(10, 10).0))
                }
            }
        }
        func cameraFrame(_ luma: UInt8, at time: UInt64) throws {
            try solid(camera, y: luma, cb: 128, cr: 128) { try corner.add($0, layout: camera, time: time) }
        }
        try pass(50, at: 0, sequence: 0)
        #expect(encoded.count == 1, "no camera yet: on at once")
        try cameraFrame(30, at: 10 * ms)
        try pass(60, at: 33 * ms, sequence: 1)
        #expect(encoded.count == 1, "held for the camera")
        // The screen turns white at 66 ms, and its grab keeps broadcastd busy until 200 ms; the camera turned white
        // at 86 ms, a picture kept while broadcastd was busy, and its newest at 186 ms.
        try pass(235, at: 66 * ms, sequence: 2)
        try cameraFrame(235, at: 86 * ms)
        try cameraFrame(235, at: 186 * ms)
        // A repeat right after the frame held: not copied (its bytes, which should be the same, are not read).
        try pass(0, at: 200 * ms, sequence: 3, repeated: true)
        try corner.release { held, until throws(MediaError) in
            encoded.append((held.presentationTime, Int(held.data[150 * 320 + 200]), 0))
            #expect(until == 200 * ms + 33_333_333 / 2)
        }
        #expect(encoded.map(\.time) == [0, 33 * ms, 66 * ms, 200 * ms])
        #expect(encoded[1].corner == 30 && encoded[1].screen == 60)
        #expect(encoded[2].corner == 235 && encoded[2].screen == 235, "the camera's white with the screen's")
        #expect(encoded[3].screen == 235, "the repeat is the picture held")
        // The camera goes away: frames go on at once.
        corner.cameraChanged(to: nil)
        try pass(70, at: 233 * ms, sequence: 4)
        #expect(encoded.count == 5 && encoded[4].screen == 70)
    }

    private func sample(
        _ data: UnsafeRawBufferPointer, _ format: VideoFormat, _ time: UInt64, _ type: SampleType,
        sequence: UInt64 = 0
    ) -> SampleBuffer {
        SampleBuffer(
            type: type,
            timing: SampleTiming(
                presentationTime: time, duration: 33_333_333, sequence: sequence, discontinuity: false),
            data: data, videoFormat: format, orientation: nil, audioFormat: nil, frameCount: 1)
    }
}

/// A frame of `format` (NV12) in one colour, for `body`.
private func solid<T>(
    _ format: VideoFormat, y: UInt8, cb: UInt8, cr: UInt8, _ body: (UnsafeRawBufferPointer) throws -> T
) throws -> T {
    var bytes = [UInt8](repeating: y, count: format.frameByteCount)
    let chroma = format.planes[1]
    for index in 0..<chroma.byteCount { bytes[chroma.offset + index] = index % 2 == 0 ? cb : cr }
    return try bytes.withUnsafeBytes(body)
}

/// An encoder's NV12 or I420 frame, read a pixel at a time.
private struct Picture {
    let frame: MediaFrame
    let layout: PixelFormat

    init(_ frame: MediaFrame, _ layout: PixelFormat) {
        self.frame = frame
        self.layout = layout
    }

    func pixel(_ x: Int, _ y: Int) -> (Int, Int, Int) {
        let planes = frame.planes
        let luma = Int(planes[0].data[y * planes[0].stride + x])
        if layout == .nv12 {
            let at = y / 2 * planes[1].stride + x / 2 * 2
            return (luma, Int(planes[1].data[at]), Int(planes[1].data[at + 1]))
        }
        return (
            luma, Int(planes[1].data[y / 2 * planes[1].stride + x / 2]),
            Int(planes[2].data[y / 2 * planes[2].stride + x / 2])
        )
    }
}
