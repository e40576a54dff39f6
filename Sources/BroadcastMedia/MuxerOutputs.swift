import BroadcastEncoding
import CFFmpeg

#if canImport(Glibc)
    import Glibc
#endif

/// An output its owner writes itself (over a socket of its own: SRT with libsrt), under a muxer instead of a URL that
/// libavformat opens (`Muxer.customOutput`): the muxer's bytes go to `send` at most `packetSize` at a time, and `send`
/// says whether they went (false: the muxer's write fails with EIO).
public final class CustomOutput {
    let io: UnsafeMutablePointer<AVIOContext>
    private let send: (UnsafeRawBufferPointer) -> Bool

    public init(packetSize: Int, send: @escaping (UnsafeRawBufferPointer) -> Bool) throws(MediaError) {
        self.send = send
        guard let buffer = av_malloc(packetSize)?.assumingMemoryBound(to: UInt8.self) else {
            throw MediaError("open an output", "out of memory")
        }
        var made: UnsafeMutablePointer<AVIOContext>?
        made = avio_alloc_context(
            buffer, Int32(packetSize), 1, nil, nil,
            { opaque, data, size in
                let output = Unmanaged<CustomOutput>.fromOpaque(opaque!).takeUnretainedValue()
                return output.send(UnsafeRawBufferPointer(start: data, count: Int(max(0, size)))) ? size : -EIO
            }, nil)
        guard let io = made else {
            var owned: UnsafeMutableRawPointer? = UnsafeMutableRawPointer(buffer)
            av_freep(&owned)
            throw MediaError("open an output", "out of memory")
        }
        io.pointee.max_packet_size = Int32(packetSize)
        self.io = io
        io.pointee.opaque = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        av_freep(&io.pointee.buffer)
        var owned: UnsafeMutablePointer<AVIOContext>? = io
        avio_context_free(&owned)
    }
}

/// The outputs a muxer opens itself (the hls muxer's playlist, init file and segments), watched through its own
/// io_open and io_close2 (`CFFOutputWatch`, `Muxer.watchOutputs`):
/// - each output opened for writing is shown to `opening` first, which may refuse it with an error (-errno);
/// - each closed is told to `closed` with its error (a full disk), or 0 when every write went through, before the
///   muxer goes on (and renames a temporary NAME.tmp over NAME);
/// - with a `Memory` (an HTTP origin), outputs are written into memory instead, at most `limit` bytes each, and handed
///   to `store` when closed (or to `closed` when a write failed), whose error or 0 the muxer gets before it goes on;
///   a DELETE (of an old segment) opens nothing and is handed to `remove`.
public final class OutputWatch {
    public struct Memory {
        public var limit: Int64
        public var store: (String, UnsafeRawBufferPointer) -> Int32
        public var remove: (String) -> Void

        public init(
            limit: Int64, store: @escaping (String, UnsafeRawBufferPointer) -> Int32,
            remove: @escaping (String) -> Void
        ) {
            self.limit = limit
            self.store = store
            self.remove = remove
        }
    }

    let watch: UnsafeMutablePointer<CFFOutputWatch>
    private let opening: (String) -> Int32
    private let closed: (String, Int32) -> Void
    private let memory: Memory?

    public init(
        opening: @escaping (String) -> Int32, closed: @escaping (String, Int32) -> Void, memory: Memory? = nil
    ) {
        self.opening = opening
        self.closed = closed
        self.memory = memory
        watch = .allocate(capacity: 1)
        watch.initialize(to: CFFOutputWatch())
        watch.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        watch.pointee.opening = { owner, url in OutputWatch.owner(owner).opening(String(cString: url!)) }
        watch.pointee.closed = { owner, url, error in OutputWatch.owner(owner).closed(String(cString: url!), error) }
        guard let memory else { return }
        watch.pointee.memory_limit = memory.limit
        watch.pointee.store = { owner, url, data, size in
            OutputWatch.owner(owner).memory!.store(
                String(cString: url!), UnsafeRawBufferPointer(start: data, count: Int(size)))
        }
        watch.pointee.remove = { owner, url in OutputWatch.owner(owner).memory!.remove(String(cString: url!)) }
    }

    deinit {
        watch.deinitialize(count: 1)
        watch.deallocate()
    }

    private static func owner(_ pointer: UnsafeMutableRawPointer?) -> OutputWatch {
        Unmanaged<OutputWatch>.fromOpaque(pointer!).takeUnretainedValue()
    }
}
