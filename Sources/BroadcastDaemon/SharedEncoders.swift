import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Logging

/// What a shared encoder's process tells the handlers it serves (revision 2.9's SHARE_*), decoded and bounded where
/// it enters.
enum SharedEncoderNews {
    /// SHARE_RING: its packet ring, `size` bytes, read-only and sealed in size (broadcastd never maps it).
    case ring(size: Int, descriptor: Descriptor)
    case streams(EncodedStreams)
    case packet(EncodedPacketHeader)
    case pictureUnchanged(PictureUnchanged)
    /// SHARE_AUDIO_FIGURES (revision 2.10).
    case audioFigures(AudioFigures)

    init(_ message: Message) throws(ProtocolError) {
        let opcode = message.opcode
        switch opcode {
        case .shareRing:
            let announced = try message.decode(PacketRingAnnouncement.self)
            guard message.descriptors.count == 1 else { throw .malformed(opcode, "a ring comes with one descriptor") }
            let facts: SharedMemory.Facts
            do { facts = try SharedMemory.facts(of: message.descriptors[0]) } catch {
                throw .malformed(opcode, "its descriptor cannot be examined: \(error)")
            }
            let size = announced.size
            guard size > PacketRingLayout.headerSize * 2, size <= PacketRingAnnouncement.maxSize else {
                throw .malformed(
                    opcode,
                    "a ring of \(size) bytes; \(PacketRingLayout.headerSize * 2 + 1) to "
                        + "\(PacketRingAnnouncement.maxSize) are taken")
            }
            guard facts.size >= size, facts.sealedInSize, facts.readOnly else {
                let flaws = [facts.sealedInSize ? nil : "not sealed", facts.readOnly ? nil : "writable"].compactMap {
                    $0
                }
                throw .malformed(
                    opcode,
                    "the ring's descriptor must be read-only, sealed in size and at least \(size) bytes (it has "
                        + ([String(facts.size)] + flaws).joined(separator: ", ") + ")")
            }
            self = .ring(size: size, descriptor: message.descriptors[0])
        case .shareStreams:
            let streams = try message.decode(EncodedStreams.self)
            if let problem = streams.problem { throw .malformed(opcode, problem) }
            self = .streams(streams)
        case .sharePacket:
            self = .packet(try EncodedPacketHeader(decoding: message.payload, of: opcode))
        case .shareAudioFigures:
            let figures = try message.decode(AudioFigures.self)
            if let problem = figures.problem { throw .malformed(opcode, problem) }
            self = .audioFigures(figures)
        default:
            self = .pictureUnchanged(try PictureUnchanged(decoding: message.payload, of: opcode))
        }
    }
}

/// One shared encoder: a broadcast of its own (`id`) whose process encodes the capture once with `settings` and
/// writes packets into its ring, and the broadcasts whose handlers it serves. Each consumer gets the ring and the
/// streams once, then every packet; one whose queue is full loses packets of its own only (its video until the
/// next keyframe, which is asked for on its behalf).
final class SharedEncoder {
    /// One broadcast it serves.
    struct Consumer {
        let broadcast: UInt32
        /// It was sent PACKET_RING and ENCODED_STREAMS.
        var announced = false
        /// It lost a video packet (or has just joined): its video waits for the next keyframe.
        var awaitingKeyframe = true
        /// Packets it was sent; packets it lost because its queue was full, and packets dropped for it until a
        /// keyframe (a late joiner's before its first keyframe included).
        var counters = StreamCounters()
        /// It was sent its first keyframe.
        var started = false
        /// Where the picture it was sent ends, and the sound of each audio stream it was sent (encoder time, ns).
        var pictureEnd: Int64?
        var soundEnd: [UInt32: Int64] = [:]
        var drain = Drain.none

        mutating func sawPicture(until end: Int64) {
            pictureEnd = max(pictureEnd ?? end, end)
        }

        /// It waits for sound, and every audio stream it was sent reaches the end of its picture.
        var hasItsSound: Bool {
            guard case .waiting(let until?) = drain else { return false }
            return soundEnd.values.allSatisfy { $0 >= until }
        }
    }

    /// A consumer's wait, once its broadcast finished, for the sound of the picture it was sent: the encoder gives a
    /// picture's sound tens of milliseconds after it (a PipeWire quantum, an Opus packet), a microphone gone silent
    /// a quarter of a second after (broadcastd's silence), and a file that ended at its last picture lacked that.
    enum Drain: Equatable {
        case none
        /// It is sent only sound, before `until`, until each audio stream it was sent reaches `until`; nil: it has
        /// had no picture yet, and is sent its first (the encoder was starting: its file would be empty), then that.
        case waiting(until: Int64?)
        /// It is sent nothing more.
        case over

        var isWaiting: Bool {
            if case .waiting = self { true } else { false }
        }
    }

    let id: UInt32
    let settings: [String: String]
    /// The capture it encodes (broadcastd's capture session while the encoder was started).
    let capture: ObjectIdentifier
    private(set) var consumers: [Consumer] = []
    /// Its ring, once it said it.
    private(set) var ring: (size: Int, descriptor: Descriptor)?
    private(set) var streams: EncodedStreams?
    /// The highest sequence number of its packets so far: each packet's is higher.
    private var lastSequence: UInt64 = 0
    /// A keyframe was asked of it and has not come yet: more requests wait for that one.
    private var keyframeAsked = false
    /// Consumers that were sent packets this turn.
    private var unflushed: Set<UInt32> = []
    /// It was paused because every consumer is.
    var paused = false

    init(id: UInt32, settings: [String: String], capture: ObjectIdentifier) {
        self.id = id
        self.settings = settings
        self.capture = capture
    }

    var consumerIDs: [UInt32] { consumers.map(\.broadcast) }

    func add(_ consumer: UInt32) {
        if !consumers.contains(where: { $0.broadcast == consumer }) { consumers.append(Consumer(broadcast: consumer)) }
    }

    /// True when `consumer` was one of its.
    func remove(_ consumer: UInt32) -> Bool {
        guard let index = consumers.firstIndex(where: { $0.broadcast == consumer }) else { return false }
        consumers.remove(at: index)
        unflushed.remove(consumer)
        return true
    }

    /// The packets `consumer` was sent and lost (its status's `encoded` stream).
    func counters(of consumer: UInt32) -> StreamCounters? {
        consumers.first { $0.broadcast == consumer }?.counters
    }

    /// The consumers sent their first keyframe since this was last asked (each once).
    func takeStarted() -> [UInt32] {
        defer { started = [] }
        return started
    }
    private var started: [UInt32] = []

    // MARK: - A consumer's finish

    /// `consumer`'s broadcast finished: from now on it is sent only the sound of the picture it was sent (its first
    /// picture first, if it had none), until each audio stream it was sent reaches that picture's end
    /// (`takeDrained`). Returns how long it may wait at most (ns), or nil when there is nothing to wait for.
    func drain(_ consumer: UInt32) -> UInt64? {
        guard let index = consumers.firstIndex(where: { $0.broadcast == consumer }) else { return nil }
        consumers[index].drain = .waiting(until: consumers[index].pictureEnd)
        guard !consumers[index].hasItsSound else {
            consumers[index].drain = .over
            return nil
        }
        return consumers[index].pictureEnd == nil ? Self.firstPictureLimit : Self.soundLimit
    }

    /// The longest a finishing consumer waits for the sound of its picture: a microphone gone silent is filled by
    /// broadcastd a quarter of a second behind.
    static let soundLimit: UInt64 = 500_000_000
    /// The longest one that had no picture yet waits for its first and its sound: an encoder starting takes a
    /// process's start and its first frame's encode.
    static let firstPictureLimit: UInt64 = 3_000_000_000

    /// Whether `consumer` waits for the sound of its picture.
    func isDraining(_ consumer: UInt32) -> Bool {
        consumers.contains { $0.broadcast == consumer && $0.drain.isWaiting }
    }

    /// `consumer`'s wait is over (it ran out): it is sent nothing more.
    func endDrain(_ consumer: UInt32) {
        if let index = consumers.firstIndex(where: { $0.broadcast == consumer }) { consumers[index].drain = .over }
    }

    /// The consumers whose wait came to its end since this was last asked (each once).
    func takeDrained() -> [UInt32] {
        defer { drained = [] }
        return drained
    }
    private var drained: [UInt32] = []

    /// Ends consumer `index`'s wait when every audio stream it was sent reaches the end of its picture.
    private func endDrainIfReached(_ index: Int) {
        guard consumers[index].hasItsSound else { return }
        consumers[index].drain = .over
        drained.append(consumers[index].broadcast)
    }

    // MARK: - What its process says

    /// Takes what its process said; what breaks the protocol (a second ring, a packet outside the ring or of a stream
    /// it did not describe) throws.
    func take(_ news: SharedEncoderNews, links: (UInt32) -> HandlerLink?) throws(ProtocolError) {
        switch news {
        case .ring(let size, let descriptor):
            guard ring == nil else { throw .unexpected(.shareRing, "the ring was already shared") }
            ring = (size, descriptor)
            announce(links: links)
        case .streams(var streams):
            guard self.streams == nil else { throw .unexpected(.shareStreams, "the streams were already shared") }
            streams.ring = id
            self.streams = streams
            frameInterval = streams.streams.first { $0.kind == "video" }?.frameInterval ?? 0
            announce(links: links)
        case .packet(var header):
            try check(header)
            header.ring = id
            relay(header, links: links)
        case .pictureUnchanged(let unchanged):
            guard ring != nil, streams != nil else {
                throw .unexpected(.sharePictureUnchanged, "SHARE_RING and SHARE_STREAMS come first")
            }
            tellAnnounced(unchanged.message(.pictureUnchanged), links: links, pictureThrough: unchanged.through)
        case .audioFigures(var figures):
            guard ring != nil, let streams else {
                throw .unexpected(.shareAudioFigures, "SHARE_RING and SHARE_STREAMS come first")
            }
            guard Int(figures.stream) < streams.streams.count, !isVideo(figures.stream) else {
                throw .malformed(.shareAudioFigures, "stream \(figures.stream) is not an audio stream described")
            }
            figures.ring = id
            tellAnnounced(.json(.audioFigures, figures), links: links)
        }
    }

    /// Queues `message` for every consumer that has the ring and streams and is still sent it (`pictureThrough`: the
    /// picture stood still through that time, for those still sent pictures); one whose queue is full goes without.
    private func tellAnnounced(_ message: Message, links: (UInt32) -> HandlerLink?, pictureThrough: Int64? = nil) {
        for index in consumers.indices where consumers[index].announced && consumers[index].drain != .over {
            if pictureThrough != nil && consumers[index].drain != .none { continue }
            guard links(consumers[index].broadcast)?.queue(message, droppable: true) == true else { continue }
            unflushed.insert(consumers[index].broadcast)
            if let pictureThrough { consumers[index].sawPicture(until: pictureThrough + frameInterval) }
        }
    }

    /// The video's frame interval (ns; 0 when not told), from its streams.
    private var frameInterval: Int64 = 0

    /// A packet must lie within the ring, name a stream described, and come after the last.
    private func check(_ header: EncodedPacketHeader) throws(ProtocolError) {
        guard let ring, let streams else { throw .unexpected(.sharePacket, "SHARE_RING and SHARE_STREAMS come first") }
        let end = header.offset.addingReportingOverflow(UInt64(header.length))
        guard Int(header.stream) < streams.streams.count, header.offset >= UInt64(PacketRingLayout.headerSize),
            !end.overflow, end.partialValue <= UInt64(ring.size), header.sequence > lastSequence
        else {
            throw .malformed(
                .sharePacket,
                "packet \(header.sequence) (stream \(header.stream), \(header.length) bytes at \(header.offset)) is "
                    + "not within the ring of \(ring.size) bytes, of a stream described, after packet \(lastSequence)")
        }
        lastSequence = header.sequence
    }

    /// Whether packets of `stream` are video.
    private func isVideo(_ stream: UInt32) -> Bool {
        streams?.streams[Int(stream)].kind == "video"
    }

    /// Sends `header` to every consumer that has the ring and streams; one that is waiting for a keyframe gets no
    /// video until it, and one whose queue is full loses it and waits for the next keyframe, asked for it.
    private func relay(_ header: EncodedPacketHeader, links: (UInt32) -> HandlerLink?) {
        let video = isVideo(header.stream)
        let keyframe = video && header.flags.contains(.keyframe)
        if keyframe { keyframeAsked = false }
        let message = header.message(.encodedPacket)
        let description = streams?.streams[Int(header.stream)]
        let time = description?.nanoseconds(header.pts) ?? 0
        let end = video ? time + frameInterval : time + (description?.nanoseconds(header.duration) ?? 0)
        var wantKeyframe = false
        for index in consumers.indices where consumers[index].announced && consumers[index].drain != .over {
            if case .waiting(let until?) = consumers[index].drain, video || time >= until { continue }
            if video && consumers[index].awaitingKeyframe {
                guard keyframe else {
                    consumers[index].counters.dropped += 1
                    continue
                }
                consumers[index].awaitingKeyframe = false
            }
            guard let link = links(consumers[index].broadcast) else { continue }
            if link.queue(message, droppable: true) {
                unflushed.insert(consumers[index].broadcast)
                consumers[index].counters.delivered += 1
                if video {
                    consumers[index].sawPicture(until: end)
                    if consumers[index].drain == .waiting(until: nil) {  // its first picture: now its sound
                        consumers[index].drain = .waiting(until: end)
                        endDrainIfReached(index)
                    }
                } else {
                    consumers[index].soundEnd[header.stream] = max(consumers[index].soundEnd[header.stream] ?? end, end)
                    endDrainIfReached(index)
                }
                if keyframe && !consumers[index].started {
                    consumers[index].started = true
                    started.append(consumers[index].broadcast)
                }
            } else {
                consumers[index].counters.dropped += 1
                if video {
                    consumers[index].awaitingKeyframe = true
                    wantKeyframe = true
                }
            }
        }
        if wantKeyframe { askKeyframe(links: links) }
    }

    /// KEYFRAME_REQUESTED to its process, unless one was asked for and has not come yet.
    func askKeyframe(links: (UInt32) -> HandlerLink?) {
        guard !keyframeAsked, let link = links(id) else { return }
        keyframeAsked = link.send(.json(.keyframeRequested, Empty()))
    }

    /// Sends every consumer that has not had them yet the ring and the streams (once both are known).
    func announce(links: (UInt32) -> HandlerLink?) {
        guard let ring, let streams else { return }
        for index in consumers.indices where !consumers[index].announced {
            guard let link = links(consumers[index].broadcast), link.connection != nil else { continue }
            link.send(
                .json(.packetRing, PacketRingAnnouncement(ring: id, size: ring.size), descriptors: [ring.descriptor]))
            link.send(.json(.encodedStreams, streams))
            consumers[index].announced = true
        }
    }

    /// Sends what was queued for its consumers this turn.
    func flush(links: (UInt32) -> HandlerLink?) {
        for consumer in unflushed { links(consumer)?.flush() }
        unflushed = []
    }
}

/// broadcastd's shared encoders (#35, revision 2.9): a handler that asks for an encoding (ENCODE) shares one encoder
/// with every handler of the same capture that asks for the same settings. Each encoder is a broadcast of its own
/// whose handler is the program `broadcast-encoder`; it lives while it serves anyone.
final class SharedEncoders {
    /// The built-in manifest of a shared encoder's broadcast (`exec`: the program, found as a handler's bare name
    /// is: beside broadcastd, then on PATH).
    static func manifest(exec: String) -> HandlerManifest {
        HandlerManifest(
            name: "encoder", displayName: "Shared encoder", exec: exec, frameRate: .constant, camera: true)
    }

    private(set) var encoders: [SharedEncoder] = []

    func encoder(_ id: UInt32) -> SharedEncoder? {
        encoders.first { $0.id == id }
    }

    /// The running encoder of `settings` on `capture`.
    func encoder(settings: [String: String], capture: ObjectIdentifier) -> SharedEncoder? {
        encoders.first { $0.settings == settings && $0.capture == capture }
    }

    func add(_ encoder: SharedEncoder) {
        encoders.append(encoder)
    }

    /// What the core is to do as a broadcast's phase changed.
    enum Step {
        case pause(encoder: UInt32)
        case resume(encoder: UInt32)
        case finish(encoder: UInt32)
        /// The encoder stopped: its consumers fail, with this.
        case fail(consumer: UInt32, BroadcastError)
    }

    /// `broadcast` (an encoder, a consumer, or neither) is now in `phase`: an encoder that stopped takes its
    /// consumers down with it; a consumer that is finishing leaves its encoder, which finishes with its last
    /// consumer; an encoder pauses when every consumer is paused, and resumes when one is live again.
    func phaseChanged(
        _ broadcast: UInt32, to phase: BroadcastPhase, error: BroadcastError?, phaseOf: (UInt32) -> BroadcastPhase?
    ) -> [Step] {
        if let index = encoders.firstIndex(where: { $0.id == broadcast }) {
            guard phase == .finishing || phase == .finished else { return [] }
            let encoder = encoders.remove(at: index)
            let why = BroadcastError(
                .handlerFailed, "the shared encoder stopped: \(error?.message ?? "it finished before them")")
            return encoder.consumerIDs.map { .fail(consumer: $0, why) }
        }
        guard let encoder = encoders.first(where: { $0.consumerIDs.contains(broadcast) }) else { return [] }
        if phase == .finishing || phase == .finished {
            // One waiting for the sound of its picture stays until it has it.
            if phase == .finishing && encoder.isDraining(broadcast) { return [] }
            _ = encoder.remove(broadcast)
            if encoder.consumers.isEmpty { return [.finish(encoder: encoder.id)] }
        }
        let allPaused = encoder.consumerIDs.allSatisfy { phaseOf($0) == .paused }
        guard allPaused != encoder.paused else { return [] }
        encoder.paused = allPaused
        return [allPaused ? .pause(encoder: encoder.id) : .resume(encoder: encoder.id)]
    }

    /// Sends what was queued for every encoder's consumers this turn.
    func flush(links: (UInt32) -> HandlerLink?) {
        for encoder in encoders { encoder.flush(links: links) }
    }
}
