import BroadcastSystem

/// The layout of a packet ring: shared memory an encoder writes encoded packets into, one after another, wrapping
/// at its end, and that the processes it serves map read-only. A 64-byte header comes first:
///
/// | offset | bytes | what |
/// |---|---|---|
/// | 0 | 8 | the magic `BCPKRING` |
/// | 8 | 8 | the size of the whole ring in bytes, header included (little-endian) |
/// | 16 | 8 | `intactFrom`: the oldest sequence number whose bytes are still in the ring (this machine's byte order) |
/// | 24 | 40 | zero |
///
/// A packet is told to a reader by its sequence number (from 1), its offset from the start of the ring and its
/// length. The writer never waits for readers: before it writes over a packet it raises `intactFrom` past it. A
/// reader copies a packet's bytes and then loads `intactFrom` (`SharedCounter`): if it is still at most the packet's
/// sequence number, the copy is whole; if not, the packet was written over while (or before) it was copied, and the
/// reader lost it. A reader that falls a whole ring behind loses packets of its own and never holds back the writer
/// or the other readers.
public enum PacketRingLayout {
    public static let magic = Array("BCPKRING".utf8)
    public static let headerSize = 64
    static let intactFromOffset = 16
    /// Packets start at multiples of this.
    static let alignment = 8
}

/// What an encoder writes its packets with, into memory it mapped writable (the readers get a read-only descriptor).
public final class PacketRingWriter {
    private let base: UnsafeMutableRawPointer
    public let size: Int
    private let intactFrom: SharedCounter
    /// Where the next packet goes.
    private var head = PacketRingLayout.headerSize
    /// The packets in the ring, oldest first, from index `oldest` on.
    private var packets: [(sequence: UInt64, start: Int, end: Int)] = []
    private var oldest = 0
    public private(set) var nextSequence: UInt64 = 1

    /// A ring of `size` bytes at `base` (page aligned, zeroed: fresh shared memory).
    public init(base: UnsafeMutableRawPointer, size: Int) {
        precondition(size > PacketRingLayout.headerSize * 2, "a packet ring of \(size) bytes has no room")
        self.base = base
        self.size = size
        intactFrom = SharedCounter(base + PacketRingLayout.intactFromOffset)
        PacketRingLayout.magic.withUnsafeBytes { base.copyMemory(from: $0.baseAddress!, byteCount: 8) }
        base.storeBytes(of: UInt64(size).littleEndian, toByteOffset: 8, as: UInt64.self)
        intactFrom.storeBeforeWriting(1)
    }

    /// The most bytes one packet may have: half the ring, so that the packet before it is still whole while it is
    /// written.
    public var largestPacket: Int { (size - PacketRingLayout.headerSize) / 2 }

    /// Writes `bytes` as the next packet: its sequence number and offset. Returns nil when it is larger than
    /// `largestPacket`.
    public func write(_ bytes: UnsafeRawBufferPointer) -> (sequence: UInt64, offset: Int)? {
        guard bytes.count <= largestPacket else { return nil }
        var start = head
        if start + bytes.count > size { start = PacketRingLayout.headerSize }
        // What this write takes: from the head to the end of the packet, through the end of the ring if it wraps.
        let wraps = start < head
        func overlaps(_ packet: (sequence: UInt64, start: Int, end: Int)) -> Bool {
            let taken = packet.end > start && packet.start < start + bytes.count
            return taken || (wraps && packet.end > head)
        }
        var lost: UInt64?
        while oldest < packets.count, overlaps(packets[oldest]) {
            lost = packets[oldest].sequence
            oldest += 1
        }
        if let lost { intactFrom.storeBeforeWriting(lost + 1) }
        if oldest > 64 && oldest * 2 > packets.count {
            packets.removeFirst(oldest)
            oldest = 0
        }
        if let source = bytes.baseAddress { (base + start).copyMemory(from: source, byteCount: bytes.count) }
        let sequence = nextSequence
        nextSequence += 1
        packets.append((sequence, start, start + bytes.count))
        head =
            start + (bytes.count + PacketRingLayout.alignment - 1) / PacketRingLayout.alignment
            * PacketRingLayout.alignment
        return (sequence, start)
    }

    /// The oldest sequence number still whole in the ring.
    public var oldestIntact: UInt64 { intactFrom.loadAfterReading() }
}

/// What a process the ring serves reads packets with, from its read-only mapping.
public struct PacketRingReader {
    private let base: UnsafeRawPointer
    public let size: Int
    private let intactFrom: SharedCounter

    /// The ring mapped at `base`, `size` bytes (as announced); nil when its header is not a packet ring's of that
    /// size.
    public init?(base: UnsafeRawPointer, size: Int) {
        guard size > PacketRingLayout.headerSize,
            PacketRingLayout.magic.elementsEqual(UnsafeRawBufferPointer(start: base, count: 8)),
            UInt64(littleEndian: base.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) == UInt64(size)
        else { return nil }
        self.base = base
        self.size = size
        intactFrom = SharedCounter(UnsafeMutableRawPointer(mutating: base + PacketRingLayout.intactFromOffset))
    }

    public enum Copy: Equatable {
        /// The bytes were copied whole.
        case whole
        /// The writer has written over the packet: it is lost.
        case lost
        /// The offset and length are not within the ring (a peer's mistake).
        case outOfBounds
    }

    /// Copies the packet `sequence` (`count` bytes at `offset`) into `target`, which has room for `count` bytes.
    public func copy(sequence: UInt64, offset: Int, count: Int, into target: UnsafeMutableRawPointer) -> Copy {
        guard offset >= PacketRingLayout.headerSize, count >= 0, offset <= size - count else { return .outOfBounds }
        guard sequence >= intactFrom.loadAfterReading() else { return .lost }
        target.copyMemory(from: base + offset, byteCount: count)
        return sequence >= intactFrom.loadAfterReading() ? .whole : .lost
    }
}
