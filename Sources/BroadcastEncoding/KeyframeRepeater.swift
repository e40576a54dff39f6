import BroadcastCore

/// A still screen's keyframes by time repeated rather than encoded (`RecordingEncoder`: two keyframes by time after the
/// last change, then nothing). Once the newest two video frames are keyframes of the same picture and the newest is
/// `interval` old, a copy of the older one is the next keyframe, the same bytes at a new time, then of the other, in
/// turn: two H.264 IDR pictures in a row must differ in `idr_pic_id` (7.4.3), which libx264 alternates between 0 and
/// 1. And when a copy of the older is the newest frame as an encoded keyframe comes (libx264 gives it the older's id),
/// a copy of the newer goes 10 ms before it.
package struct KeyframeRepeater {
    /// ns of file time.
    let interval: Int64
    /// The newest two video frames while both are keyframes of the picture on screen, the newest last.
    private var keyframes: [EncodedPacket] = []
    /// Whether the newest of them is the encoder's newest keyframe or a copy of it (not of the one before).
    private var newestIsEncoders = true

    package init(interval: Int64) {
        self.interval = interval
    }

    /// What goes before the encoded video `packet`: a copy to write first, or nil.
    package mutating func before(_ packet: EncodedPacket) -> EncodedPacket? {
        // 10 ms before it: apart in every container's time base (Matroska's is 1 ms).
        let before = packet.pts - TimeBase.nanoseconds.rescale(10_000_000, to: packet.timeBase)
        guard packet.isKeyframe, !newestIsEncoders, keyframes.count == 2, before > keyframes[1].pts else { return nil }
        return copy(at: before)
    }

    /// The encoded video `packet` was written; `newPicture`: of a frame that changed.
    package mutating func wrote(_ packet: EncodedPacket, newPicture: Bool) {
        keyframes = packet.isKeyframe ? (newPicture ? [] : keyframes.suffix(1)) + [packet] : []
        newestIsEncoders = true
    }

    /// The picture stood still through file time `time` (ns): a copy to write now, or nil.
    package mutating func unchanged(through time: Int64) -> EncodedPacket? {
        guard keyframes.count == 2 else { return nil }
        let pts = TimeBase.nanoseconds.rescale(time, to: keyframes[1].timeBase)
        guard pts - keyframes[1].pts >= TimeBase.nanoseconds.rescale(interval, to: keyframes[1].timeBase) else {
            return nil
        }
        return copy(at: pts)
    }

    private mutating func copy(at pts: Int64) -> EncodedPacket {
        var copy = keyframes[0]
        copy.shift(by: copy.pts - pts)
        keyframes = [keyframes[1], copy]
        newestIsEncoders.toggle()
        return copy
    }
}
