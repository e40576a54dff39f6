import BroadcastCore

/// `camera=track`: the camera as a video track of its own beside the screen's (the record handler, into Matroska),
/// encoded with the screen's encoder settings at the camera's size, on the recording's timeline. The track is added
/// when the file's header goes out (with the first screen frame), as large as the camera's frames are then (a
/// camera not heard from yet: 1280x720); later frames of another size are fitted into it with black bars.
package final class CameraTrack {
    /// The size of a camera's track when the camera has sent no format by the first screen frame.
    static let defaultSize = (width: 1280, height: 720)

    private let settings: VideoEncoderSettings
    private let fullRange: Bool
    /// The camera's frames, as it last said (CAMERA_FORMAT).
    package var format: VideoFormat?
    private var opened: (stream: Int, encoder: Encoder, input: VideoInput)?
    package private(set) var frames = 0
    /// The file time of the last frame.
    private var last: UInt64 = 0

    /// A track encoded as `settings` say (the screen's), its frames of the full 0-255 range when `fullRange`.
    package init(_ settings: VideoEncoderSettings, fullRange: Bool) {
        self.settings = settings
        self.fullRange = fullRange
    }

    /// Adds the track's stream to `output`, once, before its header is written.
    package func open(_ output: EncodedOutput) throws(MediaError) {
        guard opened == nil else { return }
        let implementation = try VideoEncoderImplementation.best(for: settings.codec)
        let camera = format ?? VideoFormat(width: Self.defaultSize.width, height: Self.defaultSize.height)
        var settings = settings
        // Even, for 4:2:0.
        settings.width = max(2, camera.width / 2 * 2)
        settings.height = max(2, camera.height / 2 * 2)
        let pixelFormat = implementation.inputFormat(for: camera.pixelFormat == .i420 ? .i420 : .nv12)
        let encoded = VideoFormat(width: settings.width, height: settings.height, pixelFormat: pixelFormat)
        let encoder = try Encoder.video(
            settings, pixelFormat: pixelFormat, globalHeader: output.wantsGlobalHeader, implementation: implementation)
        var parameters = try encoder.parameters
        parameters.title = "camera"
        opened = (
            try output.addStream(parameters), encoder,
            try VideoInput(encoding: encoded, from: camera, fullRange: fullRange)
        )
    }

    /// A camera frame, `data` laid out as `layout`, at `time` (ns of file time).
    package func add(_ data: UnsafeRawBufferPointer, layout: VideoFormat, time: UInt64, output: EncodedOutput)
        throws(MediaError)
    {
        guard let (stream, encoder, input) = opened else { return }
        if layout != format {
            format = layout
            try input.inputChanged(to: layout)
        }
        try encoder.encodeVideo(try input.frame(data, layout: layout, time: time)) { packet throws(MediaError) in
            try output.writeHoldingBack(packet, stream: stream)
        }
        frames += 1
        last = time
    }

    /// Hands on what the encoder still holds; the track ends at `end` (ns of file time), or as a corner's picture
    /// does (`CameraCorner.lostHold`) after the last frame of a camera that went away.
    package func finish(at end: UInt64, output: EncodedOutput) throws(MediaError) {
        guard let (stream, encoder, _) = opened else { return }
        try encoder.encode(nil) { packet throws(MediaError) in try output.writeHoldingBack(packet, stream: stream) }
        let ends = frames == 0 ? end : min(end, last + CameraCorner.lostHold)
        try output.endStream(stream, at: Encoder.videoPTS(max(ends, last)))
    }
}
