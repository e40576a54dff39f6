import BroadcastCore

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

    public var presentationTime: UInt64 { timing.presentationTime }
    public var duration: UInt64 { timing.duration }
    public var sequence: UInt64 { timing.sequence }
    public var discontinuity: Bool { timing.discontinuity }

    /// The bytes of plane `index` of a video frame (rows are `planes[index].stride` bytes apart).
    public func plane(_ index: Int) -> UnsafeRawBufferPointer {
        guard let format = videoFormat, index < format.planes.count else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        let plane = format.planes[index]
        return UnsafeRawBufferPointer(rebasing: data[plane.offset..<(plane.offset + plane.byteCount)])
    }
}
