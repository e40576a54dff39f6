import BroadcastCore

/// Gives a video frame's pool slot back to broadcastd (RELEASE_SLOT), once.
public final class FrameRelease {
    private var send: (() throws -> Void)?
    /// What sending the release failed with, for the runner to report once the callback returns.
    private(set) var failure: (any Error)?

    init(_ send: @escaping () throws -> Void) { self.send = send }

    /// Whether the slot was given back.
    public var isDone: Bool { send == nil }

    func callAsFunction() {
        guard let send else { return }
        self.send = nil
        do { try send() } catch { failure = error }
    }
}

/// One sample as a handler sees it: a view into memory that is valid only during the
/// `processSampleBuffer` call. Copy what you need to keep (ReplayKit's rule).
public struct SampleBuffer {
    public let type: SampleType
    public let timing: SampleTiming
    /// The sample's bytes: a whole frame laid out as `videoFormat.planes`, or interleaved PCM.
    public let data: UnsafeRawBufferPointer
    /// Video only.
    public let videoFormat: VideoFormat?
    public let orientation: Orientation?
    /// Audio only.
    public let audioFormat: AudioFormat?
    public let frameCount: Int
    /// Video only: the picture is the same as the previous frame's (the screen did not change).
    public var isRepeat = false
    /// Video only: gives the frame's slot back.
    var frameRelease: FrameRelease?

    /// Video: gives the frame's memory back to broadcastd now, before `processSampleBuffer` returns (which gives it
    /// back otherwise). Call it as soon as you have copied what you keep (an encoder's input copy, say): with the
    /// slot back at once, broadcastd needs only two slots for your broadcast, one being filled and one with you.
    /// `data` must not be read after it. Nothing for audio, whose bytes come with the message.
    public func releaseFrame() {
        frameRelease?()
    }

    /// This sample with its bytes at `data` instead (a copy kept after `processSampleBuffer` returned), its slot
    /// given back already.
    package func holding(_ data: UnsafeRawBufferPointer) -> SampleBuffer {
        var sample = SampleBuffer(
            type: type, timing: timing, data: data, videoFormat: videoFormat, orientation: orientation,
            audioFormat: audioFormat, frameCount: frameCount)
        sample.isRepeat = isRepeat
        return sample
    }

    public var presentationTime: UInt64 { timing.presentationTime }
    public var duration: UInt64 { timing.duration }
    public var sequence: UInt64 { timing.sequence }
    public var discontinuity: Bool { timing.discontinuity }

    /// The bytes of plane `index` of a video frame (rows are `planes[index].stride` bytes apart).
    public func plane(_ index: Int) -> UnsafeRawBufferPointer {
        guard let format = videoFormat, index < format.planes.count else {
            return UnsafeRawBufferPointer(start: nil, count: 0)
        }
        let plane = format.planes[index]
        return UnsafeRawBufferPointer(rebasing: data[plane.offset..<(plane.offset + plane.byteCount)])
    }
}
