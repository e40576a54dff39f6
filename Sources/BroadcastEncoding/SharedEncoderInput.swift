import BroadcastCore
import BroadcastProtocol
import BroadcastTimeline

/// One handler's side of an encoder shared by several: it takes what the encoder tells (`SharedEncoderEvent`), copies
/// the packets out of the packet ring and writes them to its own `EncodedOutput` (a file, a replay buffer, a stream)
/// on a time line of its own. Its file starts at a keyframe, at time 0; a pause leaves no gap (the handler resumes at
/// a keyframe, which it asks for, and the frames the encoder had before it paused too end the stretch before it:
/// `tail`); a packet it lost (it fell a whole ring behind) costs it the rest of that GOP,
/// and the time goes on. Audio waits for the first keyframe of each stretch.
package final class SharedEncoderInput {
    let output: EncodedOutput
    let ring: PacketRingReader
    /// Which of the encoder's streams it keeps (the audio tracks it asked for).
    let keeps: (EncodedStreamDescription) -> Bool
    /// Asks the encoder for a keyframe (a join, a resume, a loss).
    let requestKeyframe: () -> Void
    /// The monotonic clock (ns): when the end of a stretch came.
    let now: () -> UInt64
    private var streams: [(description: EncodedStreamDescription, output: Int?)] = []
    private var videoStream: Int?
    private var state = State.waitingForKeyframe(resuming: true)
    private var begun = false
    /// Encoder time minus file time (ns).
    private var shift: Int64 = 0
    /// The shift before the last resume's (nil before the first stretch).
    private var shiftBefore: Int64?
    /// The file time at which the next stretch begins: where the last ended.
    private var resumeAt: Int64 = 0
    /// Where the picture written so far ends (file time): the last frame's time and a frame interval.
    private var pictureEnd: Int64 = 0
    /// Where the last picture written starts, and where the sound written ends (file time, ns; nil: none).
    private var lastPicture: Int64 = 0
    private var soundEnd: Int64?
    /// The video's frame interval (ns).
    private var frameInterval: Int64 = 1_000_000
    /// Packets lost: written over in the ring before they were copied, or the rest of their GOP after such a loss.
    package private(set) var lostPackets = 0
    package private(set) var keyframesAsked = 0
    package private(set) var packetsWritten = 0
    package private(set) var videoFramesWritten = 0
    /// Video packets written that the encoder encoded (not copies of an earlier keyframe).
    package private(set) var encodedFrames = 0
    /// Frames that repeated the picture before, not encoded (PICTURE_UNCHANGED while it writes).
    package private(set) var repeatedFrames = 0
    /// The stretches written, as an encoder of its own counts them (`SegmentClock`): each from the keyframe it
    /// starts or resumes at to its pause, in file time, with its frames (encoded and repeated).
    package var segments: [SegmentClock.Segment] { closedSegments + (openSegment.map { [$0] } ?? []) }
    private var closedSegments: [SegmentClock.Segment] = []
    /// Sound that came while it waited for the keyframe it starts or resumes at (the encoder gives the sound of a
    /// stretch's start before its first frame): written after that keyframe, from its time on; at most 64 packets.
    private var held: [(header: EncodedPacketHeader, data: PacketBytes)] = []
    private var openSegment: SegmentClock.Segment?
    /// The frames (nil `data`: a still picture through `time`) that came while it was paused and until the keyframe it
    /// resumes at; at most `tailLimit`, or none (`tailBroken`). When the encoder paused with it (it was alone on it),
    /// those frames were the encoder's before its pause, still on their way when the pause came: the end of the
    /// stretch before it (`endStretch`).
    private var tail: [(header: EncodedPacketHeader?, time: Int64, data: PacketBytes?)] = []
    private var tailBroken = false
    /// When the last of them came (`now`).
    private var tailCame: UInt64 = 0
    /// More frames than are on their way at a pause: the encoder went on for another handler.
    static let tailLimit = 8
    /// The audio tracks it writes, by the names an encoder of its own gives them (`AudioTrack.name(titled:)`), each
    /// with what the encoder's figures (revision 2.10) said of it while this handler wrote (nil when none came: an
    /// older broadcastd).
    package var audioTracks: [(name: String, figures: AudioFigures?)] {
        streams.indices.filter { streams[$0].description.kind == "audio" && streams[$0].output != nil }.map {
            (AudioTrack.name(titled: streams[$0].description.title), figures[$0]?.mine)
        }
    }
    /// Per audio stream: the encoder's figures last told, and their part that came while this handler wrote (its
    /// `ring` and `stream` as told).
    private var figures: [Int: (told: AudioFigures, mine: AudioFigures)] = [:]

    /// Where the file's time is: the end of the picture written so far (ns).
    package var fileTime: Int64 { begun && state != .paused ? pictureEnd : resumeAt }

    enum State: Equatable {
        /// Until a keyframe: after a pause (the file's time is shifted to it) or after a loss (it is not).
        case waitingForKeyframe(resuming: Bool)
        case running
        case paused
    }

    package init(
        output: EncodedOutput, ring: PacketRingReader,
        keeps: @escaping (EncodedStreamDescription) -> Bool = { _ in true },
        now: @escaping () -> UInt64, requestKeyframe: @escaping () -> Void
    ) {
        self.output = output
        self.ring = ring
        self.keeps = keeps
        self.now = now
        self.requestKeyframe = requestKeyframe
    }

    package func take(_ event: SharedEncoderEvent) throws(MediaError) {
        switch event {
        case .streams(let descriptions):
            guard streams.isEmpty else {
                throw MediaError("take a shared stream", "the encoder told its streams twice")
            }
            for description in descriptions {
                let kept = keeps(description) || description.kind == "video"
                streams.append((description, kept ? try output.addStream(StreamParameters(description)) : nil))
            }
            guard let video = descriptions.firstIndex(where: { $0.kind == "video" }) else {
                throw MediaError("take a shared stream", "the encoder has no video stream")
            }
            videoStream = video
            frameInterval = descriptions[video].frameInterval ?? frameInterval
            ask()
        case .pictureUnchanged(let time):
            if state == .running { return try unchanged(through: time) }
            if awaitsResume { try addToTail(nil, time: time) }
        case .packet(let header):
            try take(header)
        case .audioFigures(let told):
            take(told)
        }
    }

    /// The encoder's figures of an audio stream: what grew since those before, and the largest clock offset, count
    /// for this handler when it was writing (not paused, not waiting for the keyframe it starts or resumes at).
    private func take(_ told: AudioFigures) {
        let stream = Int(told.stream)
        guard stream < streams.count, streams[stream].description.kind == "audio" else { return }
        let writing = begun && (state == .running || state == .waitingForKeyframe(resuming: false))
        var mine =
            figures[stream]?.mine
            ?? AudioFigures(
                ring: told.ring, stream: told.stream, missingMs: 0, droppedMs: 0, maxClockOffsetMs: 0)
        if writing, let before = figures[stream]?.told {
            mine.missingMs += max(0, told.missingMs - before.missingMs)
            mine.droppedMs += max(0, told.droppedMs - before.droppedMs)
            mine.maxClockOffsetMs = max(mine.maxClockOffsetMs, told.maxClockOffsetMs)
        }
        figures[stream] = (told, mine)
    }

    private func take(_ header: EncodedPacketHeader) throws(MediaError) {
        guard Int(header.stream) < streams.count, let videoStream else {
            throw MediaError("take a shared packet", "a packet of stream \(header.stream), which was not told")
        }
        let (description, target) = streams[Int(header.stream)]
        let time = self.time(of: header)
        guard target != nil else { return }
        let isVideo = Int(header.stream) == videoStream
        // The sound of the stretch before a pause, whose packets the encoder gives after its last frame's: kept.
        let beforePause = !isVideo && begun && time - shift < resumeAt
        var holding = false
        switch state {
        case .paused:
            // The sound after the stretch waits for the keyframe it resumes at (it may be the sound of its tail).
            if !beforePause && isVideo { return try addToTail(header, time: time) }
            holding = !beforePause
        case .waitingForKeyframe(let resuming):
            if isVideo && !header.flags.contains(.keyframe) {
                if awaitsResume { return try addToTail(header, time: time) }
                if !resuming { lostPackets += 1 }
                return
            }
            // After a loss, the sound goes on; at a start or a resume, it waits for the keyframe's time.
            holding = !isVideo && (resuming || !begun) && !beforePause
        case .running:
            if !isVideo && time - shift < resumeAt {
                // Before the stretch: the end of the sound before the pause, given after the keyframe, goes where it
                // was; what the encoder gave while this handler was paused does not.
                guard let before = shiftBefore, time - before < resumeAt, let data = try copy(header) else { return }
                return try write(header, data, shift: before)
            }
        }
        guard let data = try copy(header) else {
            lostPackets += 1
            if isVideo {
                if state == .running { state = .waitingForKeyframe(resuming: false) }
                ask()
            }
            return
        }
        if holding {
            held.append((header, data))
            if held.count > 64 { held.removeFirst() }
            return
        }
        if case .waitingForKeyframe(let resuming) = state, isVideo {
            if resuming || !begun {
                if begun { try endStretch(before: time) }
                shiftBefore = begun ? shift : nil
                shift = time - resumeAt
                openSegment = SegmentClock.Segment(start: UInt64(resumeAt), end: UInt64(resumeAt), frames: 0)
            }
            if !begun, let target {
                try output.begin(videoStream: target, orientation: description.orientation)
                begun = true
            }
            state = .running
            try write(header, data)
            // The sound held for this keyframe, from its time on.
            let sound = held
            held = []
            for (header, data) in sound where self.time(of: header) - shift >= resumeAt { try write(header, data) }
            return
        }
        try write(header, data)
    }

    /// Waiting for the keyframe it resumes at.
    private var awaitsResume: Bool { begun && (state == .paused || state == .waitingForKeyframe(resuming: true)) }

    /// The picture stood still through encoder time `time`: the last frame lasts.
    private func unchanged(through time: Int64) throws(MediaError) {
        pictureEnd = max(pictureEnd, time - shift + frameInterval)
        lastPicture = max(lastPicture, time - shift)
        repeatedFrames += 1
        countFrame()
        try output.pictureUnchanged(through: time - shift)
    }

    /// A frame (nil `header`: a still picture) that came after the pause, for `endStretch`; one lost, or one too
    /// many, and none are kept.
    private func addToTail(_ header: EncodedPacketHeader?, time: Int64) throws(MediaError) {
        guard !tailBroken else { return }
        var data: PacketBytes?
        if let header {
            data = try copy(header)
            if data == nil {
                (tail, tailBroken) = ([], true)
                return
            }
        }
        tailCame = now()
        tail.append((header, time, data))
        if tail.count > Self.tailLimit { (tail, tailBroken) = ([], true) }
    }

    /// At the keyframe (encoder time `keyframe`) it resumes at: the frames that came after the pause are the end of
    /// the stretch before it when the encoder paused too, that is when they go on from where the stretch ended, the
    /// keyframe goes on from them (the encoder's time stood still), and nothing came for three frame intervals before
    /// it (the encoder was paused). Then the stretch ends where the encoder's did, and the file's time goes on from
    /// there as the encoder's does, its sound and all; otherwise they were of the pause, and are not written.
    private func endStretch(before keyframe: Int64) throws(MediaError) {
        let frames = tail
        let broken = tailBroken
        (tail, tailBroken) = ([], false)
        guard !broken, let first = frames.first, let last = frames.last,
            abs(first.time - shift - resumeAt) <= frameInterval / 2,
            abs(keyframe - last.time - frameInterval) <= frameInterval / 2,
            now() >= tailCame + 3 * UInt64(frameInterval)
        else { return }
        openSegment = closedSegments.popLast()
        for frame in frames {
            if let header = frame.header, let data = frame.data {
                try write(header, data)
            } else {
                try unchanged(through: frame.time)
            }
        }
        resumeAt = pictureEnd
        closeSegment()
        // Its sound, held meanwhile, goes where it was.
        let sound = held
        held = []
        for (header, data) in sound {
            if time(of: header) - shift < resumeAt { try write(header, data) } else { held.append((header, data)) }
        }
    }

    /// Writes a packet taken, on the file's time line (`shift`: encoder time minus file time).
    private func write(_ header: EncodedPacketHeader, _ data: PacketBytes, shift: Int64? = nil) throws(MediaError) {
        let shift = shift ?? self.shift
        let (description, output) = streams[Int(header.stream)]
        guard let target = output else { return }
        let isVideo = Int(header.stream) == videoStream
        let timeBase = TimeBase(description.timeBase[0], description.timeBase[1])
        let time = self.time(of: header)
        let shiftTicks = TimeBase.nanoseconds.rescale(shift, to: timeBase)
        var packet = EncodedPacket(
            kind: isVideo ? .video : .audio, data: data, pts: header.pts - shiftTicks, dts: header.dts - shiftTicks,
            duration: header.duration, timeBase: timeBase, isKeyframe: header.flags.contains(.keyframe))
        packet.isDisposable = header.flags.contains(.disposable)
        packet.skipSamples = (header.skipStart, header.skipEnd)
        packetsWritten += 1
        if isVideo {
            pictureEnd = max(pictureEnd, time - shift + frameInterval)
            lastPicture = max(lastPicture, time - shift)
            videoFramesWritten += 1
            if !header.flags.contains(.copy) {
                encodedFrames += 1
                countFrame()
            }
        }
        if header.flags.contains(.copy) {
            try self.output.writeCopy(packet, stream: target)
        } else if header.flags.contains(.lastsUntilNext) {
            try self.output.writeHoldingBack(packet, stream: target)
        } else {
            try self.output.write(packet, stream: target)
        }
        if !isVideo {
            let end = time - shift + timeBase.rescale(header.duration, to: .nanoseconds)
            soundEnd = max(soundEnd ?? end, end)
        }
    }

    /// The packet's bytes, or nil when the encoder wrote over them before they were copied.
    private func copy(_ header: EncodedPacketHeader) throws(MediaError) -> PacketBytes? {
        var outcome = PacketRingReader.Copy.whole
        let bytes = PacketBytes(count: Int(header.length)) { target in
            outcome = ring.copy(
                sequence: header.sequence, offset: Int(clamping: header.offset), count: Int(header.length),
                into: target)
            return outcome == .whole
        }
        switch outcome {
        case .whole: return bytes ?? []
        case .lost: return nil
        case .outOfBounds:
            throw MediaError(
                "take a shared packet",
                "\(header.length) bytes at \(header.offset) are outside the \(ring.size)-byte ring")
        }
    }

    /// A packet's time (encoder time, ns).
    private func time(of header: EncodedPacketHeader) -> Int64 {
        let timeBase = streams[Int(header.stream)].description.timeBase
        return TimeBase(timeBase[0], timeBase[1]).rescale(header.pts, to: .nanoseconds)
    }

    /// A frame of the open segment, which ends where the picture does.
    private func countFrame() {
        openSegment?.frames += 1
        openSegment?.end = UInt64(max(0, pictureEnd))
    }

    /// The open segment ends where the picture does.
    private func closeSegment() {
        guard var segment = openSegment else { return }
        segment.end = UInt64(max(0, resumeAt))
        closedSegments.append(segment)
        openSegment = nil
    }

    /// Asks the encoder for a keyframe (counted): for a join, a resume, a loss, or (the stream) a destination that
    /// dropped GOPs.
    package func ask() {
        keyframesAsked += 1
        requestKeyframe()
    }

    /// Its broadcast paused: nothing is written until it resumes.
    package func pause() {
        if begun && state != .paused { resumeAt = pictureEnd }
        closeSegment()
        held = []
        (tail, tailBroken) = ([], false)
        state = .paused
    }

    /// Its broadcast resumed: the file goes on at the next keyframe, which it asks for.
    package func resume() {
        guard state == .paused else { return }
        state = .waitingForKeyframe(resuming: true)
        ask()
    }

    /// Ends the video stream where the file's time is; returns the file's duration (ns). The encoder still holds the
    /// sound of its last frame or two (it encodes sound up to the frames it has, in whole packets), which will not
    /// come now: the file ends where its sound does, its last picture shown that much shorter, so that its video does
    /// not go on alone for up to 40 ms (an encoder of its own ends both at the last frame's end).
    package func finish() throws(MediaError) -> Int64 {
        if begun && state != .paused {
            resumeAt = pictureEnd
            if let soundEnd, soundEnd < pictureEnd { resumeAt = max(soundEnd, lastPicture + 1_000_000) }
        }
        closeSegment()
        if begun, let videoStream, let target = streams[videoStream].output {
            try output.endStream(target, at: TimeBase.nanoseconds.rescale(resumeAt, to: .video))
        }
        return resumeAt
    }
}
