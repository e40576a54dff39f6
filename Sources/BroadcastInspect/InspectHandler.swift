import BroadcastCore
import BroadcastHandlerKit
import BroadcastProtocol
import BroadcastSystem

/// The built-in `inspect` handler: records every callback and per-stream statistics, and writes
/// them as JSON to the broadcast URL (a file:// URL or a path) when the broadcast finishes.
/// It is how a user checks that capture works, and how the tests check the daemon.
public final class InspectHandler: BroadcastSampleHandler {
    public struct Summary: Codable, Equatable, Sendable {
        public struct Callback: Codable, Equatable, Sendable {
            public var callback: String
            /// For runs of processSampleBuffer: how many came in a row.
            public var count: Int?
        }
        public var broadcast: UInt32
        public var url: String?
        public var setupInfo: [String: String]
        public var video: VideoFormat?
        public var audio: AudioFormat?
        public var callbacks: [Callback]
        public var streams: [String: StreamStatistics]
        public var finishError: BroadcastError?
        /// Video frames flagged as repeats of the one before.
        public var repeatedFrames = 0
        /// Formats announced by VIDEO_FORMAT_CHANGED, in order.
        public var formatChanges: [VideoFormat] = []
        /// CURSOR messages, when the daemon sends them.
        public var cursor: CursorSummary?
        /// The last video frame, when the `frameFile` setup field asked for it.
        public var lastFrame: FrameDump?
        /// The frames per second broadcastd said this handler gets.
        public var frameRate: Int?
        /// Revision 2.8: the camera (its frames are the `videoCamera` stream), when the broadcast has one.
        public var camera: CameraSummary?
    }

    public struct CameraSummary: Codable, Equatable, Sendable {
        public var name: String
        /// The formats of its frames, in the order CAMERA_FORMAT announced them.
        public var formats: [VideoFormat] = []
        /// Why its frames stopped, when they did.
        public var lost: String?
        /// The last camera frame's Y plane's first byte (to tell what it showed).
        public var lastLuma: UInt8?
        /// The last camera frame's first pixel, read from its planes as its format lays them out: Y, Cb, Cr (NV12,
        /// I420) or B, G, R (BGRx).
        public var lastPixel: [UInt8]?
    }

    public struct CursorSummary: Codable, Equatable, Sendable {
        public var count = 0
        /// How many carried a sprite.
        public var sprites = 0
        public var x: Int32 = 0
        public var y: Int32 = 0
        public var visible = false
        /// How many said the pointer was not over the captured area.
        public var invisible = 0
        /// The last sprite's.
        public var spriteWidth: Int?
        public var spriteHeight: Int?
        public var hotspotX: Int?
        public var hotspotY: Int?
        /// The last sprite's middle pixel, premultiplied ARGB.
        public var spriteMiddle: UInt32?
    }

    public struct FrameDump: Codable, Equatable, Sendable {
        public var path: String
        public var format: VideoFormat
        /// Where each plane lies in the file (rows are padded to `stride`).
        public var planes: [Plane]
        public var presentationTime: UInt64
    }

    private var summary = Summary(broadcast: 0, url: nil, setupInfo: [:], callbacks: [], streams: [:])
    private var statistics: [SampleType: StreamStatistics] = [:]
    private var path: String?
    private var framePath: String?
    private var lastFrame: [UInt8] = []

    private func note(_ callback: String) {
        if callback == "processSampleBuffer", let last = summary.callbacks.last, last.callback == callback {
            summary.callbacks[summary.callbacks.count - 1].count! += 1
        } else {
            summary.callbacks.append(.init(callback: callback, count: callback == "processSampleBuffer" ? 1 : nil))
        }
    }

    public override func broadcastStarted(withSetupInfo setupInfo: [String: String]) {
        note("broadcastStarted")
        summary.broadcast = broadcastID
        summary.url = broadcastURL
        summary.setupInfo = setupInfo
        summary.video = videoFormat
        summary.audio = audioFormat
        summary.frameRate = framesPerSecond
        path = FileURL.path(from: broadcastURL)
        framePath = setupInfo["frameFile"].flatMap { $0.isEmpty ? nil : FileURL.path(from: $0) }
        if let path {
            setBroadcastResult(["file": .string(path)])  // where the summary will be, said at once
        } else {
            finishBroadcastWithError(
                InspectError(
                    message:
                        "inspect writes its summary to a file: give a file:// URL or an absolute path, not '\(broadcastURL ?? "")'"
                ))
        }
    }

    public override func processSampleBuffer(_ sampleBuffer: SampleBuffer, with sampleBufferType: SampleType) {
        let now = MonotonicClock.now()
        note("processSampleBuffer")
        statistics[sampleBufferType, default: StreamStatistics()].record(
            timing: sampleBuffer.timing, data: sampleBuffer.data, receivedAt: now)
        if sampleBufferType == .videoCamera {
            summary.camera?.lastLuma = sampleBuffer.data.first
            summary.camera?.lastPixel = sampleBuffer.videoFormat.flatMap { Self.firstPixel(sampleBuffer.data, $0) }
        }
        guard sampleBufferType == .video, let format = sampleBuffer.videoFormat else { return }
        if sampleBuffer.isRepeat { summary.repeatedFrames += 1 }
        if let framePath {
            lastFrame = Array(sampleBuffer.data)
            summary.lastFrame = FrameDump(
                path: framePath, format: format, planes: format.planes, presentationTime: sampleBuffer.presentationTime)
        }
    }

    /// The first pixel of a frame laid out as `format` says: Y, Cb, Cr or B, G, R; nil when the frame is too short.
    static func firstPixel(_ data: UnsafeRawBufferPointer, _ format: VideoFormat) -> [UInt8]? {
        let planes = format.planes
        let at: [Int] =
            switch format.pixelFormat {
            case .nv12: [0, planes[1].offset, planes[1].offset + 1]
            case .i420: [0, planes[1].offset, planes[2].offset]
            case .bgrx: [0, 1, 2]
            }
        return at.allSatisfy { $0 < data.count } ? at.map { data[$0] } : nil
    }

    public override func broadcastVideoFormatChanged(_ format: VideoFormat) {
        note("broadcastVideoFormatChanged")
        summary.formatChanges.append(format)
    }

    public override func cameraChanged(format: VideoFormat?, camera: String, lost: String?) {
        note("cameraChanged")
        var c = summary.camera ?? CameraSummary(name: camera)
        if let format { c.formats.append(format) }
        c.lost = lost
        summary.camera = c
    }

    public override func processCursor(_ cursor: CursorSample) {
        var c = summary.cursor ?? CursorSummary()
        c.count += 1
        c.x = cursor.x
        c.y = cursor.y
        c.visible = cursor.visible
        if !cursor.visible { c.invisible += 1 }
        if let sprite = cursor.sprite {
            c.sprites += 1
            c.spriteWidth = Int(sprite.width)
            c.spriteHeight = Int(sprite.height)
            c.hotspotX = Int(sprite.hotspotX)
            c.hotspotY = Int(sprite.hotspotY)
            c.spriteMiddle =
                sprite.pixels.isEmpty
                ? nil : sprite.pixels[Int(sprite.height) / 2 * Int(sprite.width) + Int(sprite.width) / 2]
        }
        summary.cursor = c
    }

    public override func broadcastPaused() { note("broadcastPaused") }
    public override func broadcastResumed() { note("broadcastResumed") }

    public override func broadcastFinished(error: BroadcastError?) {
        note("broadcastFinished")
        summary.finishError = error
        for (type, var stats) in statistics {
            stats.finish()
            summary.streams[type.description] = stats
        }
        guard let path else { return }
        do {
            if let dump = summary.lastFrame { try FileSystem.writeFile(dump.path, lastFrame) }
            try FileSystem.writeFile(path, Array(prettyJSON(summary).utf8) + [10])
            logger.info("inspect: summary written to \(path)")
        } catch {
            logger.error("inspect: cannot write the summary: \(error)")
        }
    }

    struct InspectError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
