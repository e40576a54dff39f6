import BroadcastProtocol
import Foundation
import Testing

/// The packet ring a shared encoder writes and its handlers read (`PacketRingLayout`).
struct PacketRingTests {
    /// A ring in memory of this process, as fresh shared memory is: zeroed, page aligned.
    final class Memory {
        let base: UnsafeMutableRawPointer
        let size: Int
        init(_ size: Int) {
            self.size = size
            base = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 4096)
            base.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        }
        deinit { base.deallocate() }
        var reader: PacketRingReader { PacketRingReader(base: base, size: size)! }
    }

    /// A packet's bytes: its sequence number's low byte, then counting up, so that a torn copy shows.
    static func bytes(_ sequence: UInt64, _ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: Int(sequence) &+ $0) }
    }

    static func copy(_ reader: PacketRingReader, _ sequence: UInt64, _ offset: Int, _ count: Int)
        -> (PacketRingReader.Copy, [UInt8])
    {
        var target = [UInt8](repeating: 0, count: count)
        let outcome = target.withUnsafeMutableBytes {
            reader.copy(sequence: sequence, offset: offset, count: count, into: $0.baseAddress!)
        }
        return (outcome, target)
    }

    /// Packets of random sizes through a ring that wraps many times: every copy said to be whole has the bytes
    /// written (a byte-level model says which survive), and the packets written since the writer last went past the
    /// middle of the ring (at least the newest half ring's worth) are always whole.
    @Test func aRingHandsBackWhatWasWrittenUntilItIsWrittenOver() {
        let memory = Memory(16 * 1024)
        let writer = PacketRingWriter(base: memory.base, size: memory.size)
        let reader = memory.reader
        var generator = SystemRandomNumberGenerator()
        var written: [(sequence: UInt64, offset: Int, count: Int)] = []
        var owner = [UInt64](repeating: 0, count: memory.size)
        var wholeSeen = 0
        var lostSeen = 0
        for _ in 0..<800 {
            let count = Int.random(in: 0...2000, using: &generator)
            let data = Self.bytes(writer.nextSequence, count)
            guard let (sequence, offset) = data.withUnsafeBytes({ writer.write($0) }) else {
                Issue.record("a packet of \(count) bytes was refused")
                return
            }
            #expect(offset % 8 == 0 && offset >= PacketRingLayout.headerSize && offset + count <= memory.size)
            for i in offset..<(offset + count) { owner[i] = sequence }
            written.append((sequence, offset, count))
            // The newest packets that fit in half the ring are whole.
            var recent = 0
            for packet in written.reversed() {
                recent += packet.count + 8
                let (outcome, copied) = Self.copy(reader, packet.sequence, packet.offset, packet.count)
                let survives = (packet.offset..<(packet.offset + packet.count)).allSatisfy {
                    owner[$0] == packet.sequence
                }
                if outcome == .whole {
                    #expect(
                        survives && copied == Self.bytes(packet.sequence, packet.count), "packet \(packet.sequence)")
                    wholeSeen += 1
                } else {
                    #expect(outcome == .lost)
                    #expect(recent > writer.largestPacket, "packet \(packet.sequence), \(recent) bytes back, was lost")
                    lostSeen += 1
                }
                if recent > memory.size * 2 { break }
            }
        }
        #expect(wholeSeen > 800 && lostSeen > 800, "whole \(wholeSeen), lost \(lostSeen)")
    }

    /// A reader copying while the writer writes (two threads, as two processes would): a copy is whole only if
    /// every byte is the packet's. Copies made while the writer writes over them are common here (the reader takes
    /// packets about a ring back), and the test fails when the reader does not check `intactFrom` after copying.
    @Test func aCopyMadeWhileThePacketIsWrittenOverIsNeverTakenAsWhole() async {
        let memory = Memory(16 * 1024)
        let writing = WritingThread(PacketRingWriter(base: memory.base, size: memory.size))
        let reader = memory.reader
        let published = Published()
        let patterns = (0..<256).map { Self.bytes(UInt64($0), 4000) }
        let thread = Thread {
            let writer = writing.writer
            for _ in 0..<100_000 {
                let sequence = writer.nextSequence
                let count = 2000 + Int(sequence * 7919 % 2000)
                if let (sequence, offset) = patterns[Int(sequence % 256)].withUnsafeBytes({
                    writer.write(UnsafeRawBufferPointer(rebasing: $0[..<count]))
                }) {
                    published.set(sequence, offset, count)
                }
            }
            published.finish()
        }
        thread.start()
        var whole = 0
        var lost = 0
        var target = [UInt8](repeating: 0, count: 4000)
        while let (sequence, offset, count) = published.get() {
            let outcome = target.withUnsafeMutableBytes {
                reader.copy(sequence: sequence, offset: offset, count: count, into: $0.baseAddress!)
            }
            switch outcome {
            case .whole:
                whole += 1
                if !target[..<count].elementsEqual(patterns[Int(sequence % 256)][..<count]) {
                    Issue.record("packet \(sequence) was taken whole with bytes written over")
                    return
                }
            case .lost: lost += 1
            case .outOfBounds: Issue.record("packet \(sequence) out of bounds")
            }
        }
        #expect(whole > 20 && lost > 20, "\(whole) whole, \(lost) lost")
    }

    /// The writer, handed to the thread that writes (and only used there).
    final class WritingThread: @unchecked Sendable {
        let writer: PacketRingWriter
        init(_ writer: PacketRingWriter) { self.writer = writer }
    }

    /// What the writer published, for the reader thread: it takes in turn the newest packet and the
    /// oldest of the last 5, about a ring back, which the writer is about to write over.
    final class Published: @unchecked Sendable {
        private let lock = NSLock()
        private var recent: [(UInt64, Int, Int)] = []
        private var done = false
        private var oldest = false
        func set(_ sequence: UInt64, _ offset: Int, _ count: Int) {
            lock.lock()
            recent.append((sequence, offset, count))
            if recent.count > 5 { recent.removeFirst() }
            lock.unlock()
        }
        func finish() {
            lock.lock()
            done = true
            lock.unlock()
        }
        func get() -> (UInt64, Int, Int)? {
            lock.lock()
            defer { lock.unlock() }
            oldest.toggle()
            return done ? nil : (oldest ? recent.first : recent.last) ?? (0, PacketRingLayout.headerSize, 0)
        }
    }

    @Test func whatDoesNotFitIsRefused() {
        let memory = Memory(4096)
        let writer = PacketRingWriter(base: memory.base, size: memory.size)
        #expect(writer.largestPacket == (4096 - 64) / 2)
        #expect([UInt8](repeating: 1, count: writer.largestPacket + 1).withUnsafeBytes { writer.write($0) } == nil)
        let reader = memory.reader
        #expect(Self.copy(reader, 1, 32, 8).0 == .outOfBounds, "inside the header")
        #expect(Self.copy(reader, 1, 4090, 8).0 == .outOfBounds, "past the end")
        #expect(Self.copy(reader, 1, Int.max - 4, 8).0 == .outOfBounds, "an offset that overflows")
        #expect(PacketRingReader(base: memory.base, size: 8192) == nil, "a size the header does not say")
        memory.base.storeBytes(of: UInt8(0), as: UInt8.self)
        #expect(PacketRingReader(base: memory.base, size: 4096) == nil, "no magic")
    }

    /// ENCODED_PACKET's 64 bytes (docs/protocol.md will carry them with the revision that sends it).
    @Test func aPacketHeaderHasItsGoldenBytes() throws {
        var header = EncodedPacketHeader(
            ring: 7, stream: 1, sequence: 0x0102_0304_0506_0708, offset: 4096, length: 1500,
            flags: [.keyframe, .lastsUntilNext], pts: -312, dts: -312, duration: 960)
        header.skipStart = 312
        var bytes: [UInt8] = []
        header.encode(into: &bytes)
        let golden =
            "07000000 01000000 0807060504030201 0010000000000000 dc050000 09000000 c8feffffffffffff c8feffffffffffff "
            + "c003000000000000 38010000 00000000"
        #expect(bytes.map { String(format: "%02x", $0) }.joined() == golden.replacingOccurrences(of: " ", with: ""))
        #expect(EncodedPacketHeader(decoding: bytes) == header)
        var unknownFlag = bytes
        unknownFlag[28] = 0x10
        #expect(EncodedPacketHeader(decoding: unknownFlag) == nil)
        #expect(EncodedPacketHeader(decoding: Array(bytes.dropLast())) == nil)
    }
}
