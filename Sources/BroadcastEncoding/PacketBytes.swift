import CFFmpeg

/// The bytes of an encoded packet, owned and immutable, shared by every copy of the packet (reference counted, as
/// libavcodec's packet buffers are: an encoder's packet is kept without a copy, and a muxer is handed a reference).
public struct PacketBytes: RandomAccessCollection, Equatable, ExpressibleByArrayLiteral, Sendable {
    private final class Storage: @unchecked Sendable {
        let buffer: UnsafeMutablePointer<AVBufferRef>
        let start: UnsafePointer<UInt8>?
        let count: Int

        init(buffer: UnsafeMutablePointer<AVBufferRef>, start: UnsafePointer<UInt8>?, count: Int) {
            self.buffer = buffer
            self.start = start
            self.count = count
        }

        deinit {
            var owned: UnsafeMutablePointer<AVBufferRef>? = buffer
            av_buffer_unref(&owned)
        }
    }

    private let storage: Storage?

    /// A copy of `bytes` (with the padding libavcodec's readers expect after them).
    public init(_ bytes: some Collection<UInt8>) {
        guard !bytes.isEmpty, let buffer = av_buffer_allocz(bytes.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) else {
            storage = nil
            return
        }
        _ = UnsafeMutableBufferPointer(start: buffer.pointee.data, count: bytes.count).initialize(from: bytes)
        storage = Storage(buffer: buffer, start: buffer.pointee.data, count: bytes.count)
    }

    public init(arrayLiteral bytes: UInt8...) { self.init(bytes) }

    /// `count` bytes that `fill` writes (it may throw, or return false, and then there are none).
    package init?(count: Int, fill: (UnsafeMutableRawPointer) -> Bool) {
        guard count > 0 else {
            storage = nil
            return
        }
        guard let buffer = av_buffer_allocz(count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) else { return nil }
        guard fill(buffer.pointee.data) else {
            var owned: UnsafeMutablePointer<AVBufferRef>? = buffer
            av_buffer_unref(&owned)
            return nil
        }
        storage = Storage(buffer: buffer, start: buffer.pointee.data, count: count)
    }

    /// A reference to what `packet` holds (made reference counted first if it was not).
    package init(referencing packet: UnsafeMutablePointer<AVPacket>) throws(MediaError) {
        try check(av_packet_make_refcounted(packet), "keep a packet")
        guard packet.pointee.size > 0 else {
            storage = nil
            return
        }
        guard let buffer = av_buffer_ref(packet.pointee.buf) else { throw MediaError("keep a packet", "out of memory") }
        storage = Storage(buffer: buffer, start: packet.pointee.data, count: Int(packet.pointee.size))
    }

    /// Another reference to the bytes, for an AVPacket (nil: there are none).
    package func reference() throws(MediaError) -> (UnsafeMutablePointer<AVBufferRef>, UnsafeMutablePointer<UInt8>)? {
        guard let storage, let start = storage.start else { return nil }
        guard let buffer = av_buffer_ref(storage.buffer) else { throw MediaError("write a packet", "out of memory") }
        return (buffer, UnsafeMutablePointer(mutating: start))
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { storage?.count ?? 0 }
    public subscript(position: Int) -> UInt8 {
        precondition(position >= 0 && position < endIndex, "index out of range")
        return storage!.start![position]
    }

    /// Calls `body` with the bytes, valid during the call.
    public func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(UnsafeRawBufferPointer(start: storage?.start, count: count))
    }

    public static func == (a: PacketBytes, b: PacketBytes) -> Bool {
        a.count == b.count && a.withUnsafeBytes { x in b.withUnsafeBytes { y in x.elementsEqual(y) } }
    }
}
