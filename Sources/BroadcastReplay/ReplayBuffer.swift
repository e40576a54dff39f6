import BroadcastCore
import BroadcastEncoding
import BroadcastMedia
import BroadcastSystem

/// One encoded packet kept in the buffer, its stream and where its content starts in file time, ns (its pts less its
/// stream's priming). Copies share its bytes.
struct BufferedPacket: Sendable {
    var packet: EncodedPacket
    let stream: Int
    let time: Int64
    /// What it costs: its bytes and what keeping them takes.
    var cost: Int { packet.data.count + Self.overhead }
    static let overhead = 256
}

/// The `replay` handler's buffer: the encoded streams, whole GOPs (a keyframe and what follows it, audio included),
/// the oldest dropped first so that it holds the last `length` of file time (rounded up to a GOP) and no more than
/// `maxBytes`. Packets keep the encoders' own timestamps; a save takes references to them, not copies. With a disk
/// ring (`buffer=disk`), each GOP goes into a NUT file of its own as it is encoded, and only the open one stays in
/// memory too; `maxBytes` then bounds the files.
final class ReplayBuffer: EncodedOutput {
    final class GOP {
        /// File time of its keyframe, ns.
        let start: Int64
        /// Its packets, while in memory (all of them without a disk ring; with one, while it is the open GOP).
        var packets: [BufferedPacket] = []
        var bytes = 0
        /// With a disk ring: the file it is written to, and its writer while it is open.
        var file: String?
        var writer: Muxer?
        init(start: Int64) { self.start = start }
    }

    let length: UInt64
    let maxBytes: Int
    /// The folder of the disk ring's files; nil: the buffer is in memory.
    let directory: String?
    private var filesMade = 0
    private(set) var streams: [StreamParameters] = []
    private(set) var gops: [GOP] = []
    private(set) var bytes = 0
    /// Every GOP dropped so far for either bound.
    private(set) var droppedForLength = 0
    private(set) var droppedForMemory = 0
    /// The picture's orientation, as the first frame said.
    private(set) var orientation = Orientation.up
    /// Chapters asked for with `mark` (file time, ns), those still in the buffer.
    private(set) var marks: [(time: Int64, title: String)] = []
    /// `save --and-record`: the file every packet goes to as well from the save on.
    var recording: ReplayFile?
    /// Start of the newest video frame, file time ns.
    private(set) var newest: Int64 = 0
    /// Where each audio stream's newest packet ends, file time ns: the audio encoder works a packet behind the video.
    private var audioEnds: [Int: Int64] = [:]

    init(length: UInt64, maxBytes: Int, directory: String? = nil) {
        self.length = length
        self.maxBytes = maxBytes
        self.directory = directory
    }

    var wantsGlobalHeader: Bool { true }

    func addStream(_ parameters: StreamParameters) throws(MediaError) -> Int {
        streams.append(parameters)
        return streams.count - 1
    }

    func begin(videoStream: Int, orientation: Orientation) throws(MediaError) {
        if gops.isEmpty { self.orientation = orientation }
    }

    /// File time (ns) of `packet`, less its stream's priming.
    func time(of packet: EncodedPacket, stream: Int) -> Int64 {
        packet.timeBase.rescale(packet.pts - streams[stream].priming, to: .nanoseconds)
    }

    func write(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
        let time = time(of: packet, stream: stream)
        let kept = BufferedPacket(packet: packet, stream: stream, time: time)
        if let recording { try recording.append(kept) }
        if streams[stream].isVideo {
            if packet.isKeyframe { try openGOP(at: time) }
            // After the memory bound took every GOP, the next keyframe starts the buffer anew.
            if gops.isEmpty { return }
            newest = max(newest, time)
            trimForLength()
        } else if gops.isEmpty {
            return  // audio before the first keyframe: nothing to play it with
        } else {
            let duration = packet.timeBase.rescale(packet.duration, to: .nanoseconds)
            audioEnds[stream] = time + max(0, duration)
        }
        try keep(kept, cost: kept.cost)
    }

    private func keep(_ kept: BufferedPacket, cost: Int) throws(MediaError) {
        let gop = gops[gops.count - 1]
        if let writer = gop.writer { try writer.write(kept.packet, stream: kept.stream) }
        gop.packets.append(kept)
        gop.bytes += cost
        bytes += cost
        trimForMemory()
    }

    /// The screen stood still through `time`: the buffer's video reaches it.
    func pictureUnchanged(through time: Int64) throws(MediaError) {
        guard !gops.isEmpty else { return }
        newest = max(newest, time)
        trimForLength()
    }

    /// A still screen's keyframe by time, a copy of one encoded before (`KeyframeRepeater`): it opens a GOP, the same
    /// bytes (in memory it costs nothing more; no encode). So a still screen is held `length` rounded up to a
    /// keyframe interval as a moving one is, what is older goes, and saves have a keyframe every interval as
    /// recordings of a still screen do.
    func writeCopy(_ copy: EncodedPacket, stream: Int) throws(MediaError) {
        guard !gops.isEmpty else { return }
        let kept = BufferedPacket(packet: copy, stream: stream, time: time(of: copy, stream: stream))
        if let recording { try recording.append(kept) }
        try openGOP(at: kept.time)
        newest = max(newest, kept.time)
        // In memory the copy shares the keyframe's bytes; a disk ring writes them again.
        try keep(kept, cost: directory == nil ? BufferedPacket.overhead : kept.cost)
    }

    /// Video frames are kept as they come: a save gives each its duration (`Muxer.writeHoldingBack`).
    func writeHoldingBack(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
        try write(packet, stream: stream)
    }

    func endStream(_ stream: Int, at end: Int64) throws(MediaError) {}

    /// A keyframe: the open GOP is closed (with a disk ring, its file finished and its packets let go) and one begins.
    private func openGOP(at time: Int64) throws(MediaError) {
        let gop = GOP(start: time)
        if let directory {
            try close(gops.last)
            filesMade += 1
            let path = directory + "/gop-\(filesMade).nut"
            let writer = try Muxer(url: path, container: .nut)
            for stream in streams {
                var described = stream
                (described.title, described.frameRate) = (nil, nil)
                try writer.addStream(described)
            }
            try writer.start()
            (gop.file, gop.writer) = (path, writer)
        }
        gops.append(gop)
    }

    private func close(_ gop: GOP?) throws(MediaError) {
        guard let gop, let writer = gop.writer else { return }
        gop.writer = nil
        try writer.finish()
        gop.packets = []
    }

    /// Closes the open GOP's file and removes every file of the disk ring, and its folder (the broadcast is over).
    func removeFiles() {
        guard let directory else { return }
        try? close(gops.last)
        while !gops.isEmpty { drop() }
        FileSystem.removeDirectory(directory)
    }

    /// The oldest GOP goes once the rest still hold `length`: the buffer holds `length` to `length` + a GOP.
    private func trimForLength() {
        while gops.count > 1, newest - gops[1].start >= Int64(length) {
            drop()
            droppedForLength += 1
        }
    }

    /// Never more than `maxBytes`: a GOP larger than that by itself goes too, and what follows it until the next keyframe.
    private func trimForMemory() {
        while bytes > maxBytes, !gops.isEmpty {
            drop()
            droppedForMemory += 1
        }
    }

    private func drop() {
        let gop = gops.removeFirst()
        bytes -= gop.bytes
        if let writer = gop.writer { try? writer.finish() }
        if let file = gop.file { FileSystem.remove(file) }
        let oldest = gops.first?.start ?? Int64.max
        marks.removeAll { $0.time < oldest }
    }

    func mark(_ mark: (time: Int64, title: String)) {
        marks.append(mark)
    }

    /// File time the buffer covers, ns: from its oldest keyframe to its newest frame.
    var duration: Int64 { gops.first.map { newest - $0.start } ?? 0 }

    /// Bytes of files the disk ring holds now (0 without one).
    var filesOnDisk: (count: Int, bytes: Int64) {
        gops.compactMap(\.file).reduce((0, 0)) { ($0.0 + 1, $0.1 + (FileSystem.size(of: $1) ?? 0)) }
    }

    /// What a save of the last `seconds` (nil: all) writes: from the newest keyframe at least that far back (the oldest
    /// one when the buffer is shorter), video from it on, audio whose content starts after it and the packet before.
    /// References to the packets in memory, second names (hard links) for the disk ring's files: nothing is copied.
    func snapshot(last seconds: Double?, id: Int) throws(MediaError) -> Snapshot? {
        guard !gops.isEmpty else { return nil }
        // An audio stream more than a second behind the video has stopped: the save does not end where it does.
        let audioEnd = audioEnds.values.filter { $0 > newest - 1_000_000_000 }.min()
        var first = 0
        if let seconds {
            // At least `seconds` before where the save ends (see `ReplayFile.save`).
            let wanted = min(newest, audioEnd ?? newest) - Int64(seconds * 1e9)
            first = gops.lastIndex { $0.start <= wanted } ?? 0
        }
        let origin = gops[first].start
        var sources: [Snapshot.Source] = []
        for (index, gop) in gops.enumerated().dropFirst(max(0, first - 1)) {
            let opening = index >= first
            if let file = gop.file, gop.writer == nil {
                let name = file.replacing(".nut", with: "-save\(id).nut")
                guard FileSystem.link(file, as: name) else {
                    throw MediaError("save", "cannot link \(file) for the save")
                }
                sources.append(Snapshot.Source(gopOnOrAfterOrigin: opening, file: name, packets: []))
            } else {
                sources.append(Snapshot.Source(gopOnOrAfterOrigin: opening, file: nil, packets: gop.packets))
            }
        }
        let chapters = marks.filter { $0.time >= origin }.map { (time: $0.time - origin, title: $0.title) }
        return Snapshot(
            streams: streams, orientation: orientation, origin: origin, end: newest, audioEnd: audioEnd,
            sources: sources, marks: chapters)
    }

    /// A save's part of the buffer.
    struct Snapshot: Sendable {
        struct Source {
            /// The keyframe's GOP or a later one: its video is saved (of the GOP before, only audio is).
            let gopOnOrAfterOrigin: Bool
            /// A disk ring's file (a name of its own for the save, removed once read), or the packets themselves.
            let file: String?
            let packets: [BufferedPacket]
        }
        let streams: [StreamParameters]
        let orientation: Orientation
        /// File time of its first keyframe, ns: time 0 of the saved file.
        let origin: Int64
        /// Start of its newest video frame, ns.
        let end: Int64
        /// Where the audio encoded so far ends (that of the stream furthest behind), ns; nil without audio.
        let audioEnd: Int64?
        let sources: [Source]
        /// Chapters, their times from the file's start.
        let marks: [(time: Int64, title: String)]
    }
}

/// The packets a save writes, in the order they were encoded, read from memory or from the disk ring's files (one
/// GOP's at a time): video from the keyframe on; of each audio stream, the packet its content at the keyframe is in
/// and those after it; none that starts at `until` or later.
final class SnapshotPackets {
    let snapshot: ReplayBuffer.Snapshot
    let until: Int64
    private var source = -1
    private var position = 0
    private var reader: PacketReader?
    private var openingAudio: [Int: BufferedPacket] = [:]
    private var ready: [BufferedPacket] = []

    init(_ snapshot: ReplayBuffer.Snapshot, until: Int64 = .max) {
        self.snapshot = snapshot
        self.until = until
    }

    deinit { for source in snapshot.sources { if let file = source.file { FileSystem.remove(file) } } }

    func next() throws(MediaError) -> BufferedPacket? {
        while ready.isEmpty {
            guard let (packet, onOrAfter) = try nextStored() else { return nil }
            if packet.time >= until { continue }
            if snapshot.streams[packet.stream].isVideo {
                if onOrAfter { ready.append(packet) }
            } else if packet.time <= snapshot.origin {
                openingAudio[packet.stream] = packet
            } else {
                if let opening = openingAudio.removeValue(forKey: packet.stream) { ready.append(opening) }
                ready.append(packet)
            }
        }
        return ready.removeFirst()
    }

    private func nextStored() throws(MediaError) -> (BufferedPacket, Bool)? {
        while source < snapshot.sources.count {
            if source >= 0 {
                let current = snapshot.sources[source]
                if let reader {
                    if let (stored, stream) = try reader.next() {
                        let parameters = snapshot.streams[stream]
                        let packet = stored.rescaled(to: parameters.timeBase)
                        let time = packet.timeBase.rescale(packet.pts - parameters.priming, to: .nanoseconds)
                        return (BufferedPacket(packet: packet, stream: stream, time: time), current.gopOnOrAfterOrigin)
                    }
                    self.reader = nil
                    if let file = current.file { FileSystem.remove(file) }
                } else if current.file == nil, position < current.packets.count {
                    position += 1
                    return (current.packets[position - 1], current.gopOnOrAfterOrigin)
                }
            }
            source += 1
            position = 0
            if source < snapshot.sources.count, let file = snapshot.sources[source].file {
                reader = try PacketReader(path: file)
            }
        }
        return nil
    }
}
