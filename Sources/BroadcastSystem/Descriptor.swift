#if canImport(Glibc)
    import Glibc
#endif

/// An owned file descriptor: closed exactly once, when `close()` is called or the owner goes away.
/// `take()` hands the raw number to someone else (for example across an exec) without closing it.
public final class Descriptor: @unchecked Sendable, CustomStringConvertible {
    public private(set) var raw: Int32

    public init(adopting raw: Int32) {
        precondition(raw >= 0, "adopting an invalid descriptor")
        self.raw = raw
    }

    deinit {
        if raw >= 0 { Glibc.close(raw) }
    }

    public func close() {
        guard raw >= 0 else { return }
        Glibc.close(raw)
        raw = -1
    }

    /// Gives up ownership and returns the raw descriptor.
    public func take() -> Int32 {
        let value = raw
        raw = -1
        return value
    }

    public func setNonBlocking(_ on: Bool = true) throws(SystemError) {
        let flags = try syscallRetrying("fcntl(F_GETFL)") { fcntl(raw, F_GETFL) }
        let wanted = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
        _ = try syscallRetrying("fcntl(F_SETFL)") { fcntl(raw, F_SETFL, wanted) }
    }

    /// Keeps this descriptor from leaking into programs this process starts.
    public func setCloseOnExec() {
        _ = fcntl(raw, F_SETFD, FD_CLOEXEC)
    }

    /// A new descriptor for the same open file, close-on-exec.
    /// A descriptor of this process's that is another's to close (libdbus's, say), duplicated into one of ours.
    public static func duplicating(_ raw: Int32) throws(SystemError) -> Descriptor {
        Descriptor(adopting: try syscallRetrying("fcntl(F_DUPFD_CLOEXEC)") { fcntl(raw, F_DUPFD_CLOEXEC, 3) })
    }

    public func duplicate() throws(SystemError) -> Descriptor {
        Descriptor(adopting: try syscallRetrying("fcntl(F_DUPFD_CLOEXEC)") { fcntl(raw, F_DUPFD_CLOEXEC, 3) })
    }

    /// Reads up to `count` bytes; returns an empty array at end of file.
    public func read(upTo count: Int) throws(SystemError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        let fd = raw
        let n = try syscallRetrying("read") { buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, count) } }
        buffer.removeSubrange(n...)
        return buffer
    }

    /// Reads up to `buffer.count` bytes into `buffer`; returns how many, 0 at end of file.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        let fd = raw
        return try syscallRetrying("read") { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// Writes all of `bytes` (blocking descriptors only).
    public func writeAll(_ bytes: some Collection<UInt8>) throws(SystemError) {
        let array = Array(bytes)
        var offset = 0
        while offset < array.count {
            let fd = raw
            let start = offset
            let n = try syscallRetrying("write") {
                array.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + start, array.count - start) }
            }
            offset += n
        }
    }

    public var description: String { "fd \(raw)" }
}
