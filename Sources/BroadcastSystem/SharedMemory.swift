import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

/// A mapping of a shared-memory file (memfd). The daemon creates one per frame pool;
/// handlers map the descriptor they receive. Unmapped when released.
public final class SharedMemory: @unchecked Sendable {
    public let descriptor: Descriptor
    public let size: Int
    public let base: UnsafeMutableRawPointer

    /// Creates an anonymous memfd of `size` bytes and maps it read-write. `sealed` (for memory handed
    /// to peers that are not trusted) then seals it: a peer that gets the descriptor cannot shrink it
    /// (which would make this process die of SIGBUS on its next access), grow it, or write to it by any
    /// route (not even through a descriptor it reopens from /proc: F_SEAL_FUTURE_WRITE); this process's
    /// own mapping stays writable. Memory another process must write into (the X server's MIT-SHM
    /// grabs) is left unsealed.
    public init(name: String, size: Int, sealed: Bool) throws(SystemError) {
        let raw = try syscallRetrying("memfd_create") {
            cbroadcast_memfd_create(name, CBROADCAST_MFD_CLOEXEC | CBROADCAST_MFD_ALLOW_SEALING)
        }
        let fd = Descriptor(adopting: raw)
        _ = try syscallRetrying("ftruncate memfd to \(size) bytes") { ftruncate(fd.raw, off_t(size)) }
        self.descriptor = fd
        self.size = size
        self.base = try Self.map(fd, size: size, writable: true)
        let seals =
            CBROADCAST_F_SEAL_SHRINK | CBROADCAST_F_SEAL_GROW | CBROADCAST_F_SEAL_FUTURE_WRITE | CBROADCAST_F_SEAL_SEAL
        if sealed && cbroadcast_fcntl_int(fd.raw, CBROADCAST_F_ADD_SEALS, seals) != 0 {
            let error = SystemError("seal the memfd (size and writes)", errno: errno)
            munmap(base, size)
            throw error
        }
    }

    /// A new descriptor of the same memory that only reads: what peers get, so that they can neither
    /// write into frames other peers read nor map the memory writable.
    public func readOnlyDescriptor() throws(SystemError) -> Descriptor {
        Descriptor(
            adopting: try syscallRetrying("reopen the memfd read-only") {
                open("/proc/self/fd/\(descriptor.raw)", O_RDONLY | O_CLOEXEC)
            })
    }

    /// A sealed memfd holding a copy of `bytes`, written without mapping it (so that it never counts in this
    /// process's resident memory), as a read-only descriptor.
    public static func sealedCopy(name: String, of bytes: UnsafeRawBufferPointer) throws(SystemError) -> Descriptor {
        let fd = Descriptor(
            adopting: try syscallRetrying("memfd_create") {
                cbroadcast_memfd_create(name, CBROADCAST_MFD_CLOEXEC | CBROADCAST_MFD_ALLOW_SEALING)
            })
        var offset = 0
        while offset < bytes.count {
            let start = offset
            offset += try syscallRetrying("write \(bytes.count) bytes to the memfd") {
                Glibc.pwrite(fd.raw, bytes.baseAddress! + start, bytes.count - start, off_t(start))
            }
        }
        let seals = CBROADCAST_F_SEAL_SHRINK | CBROADCAST_F_SEAL_GROW | CBROADCAST_F_SEAL_WRITE | CBROADCAST_F_SEAL_SEAL
        _ = try syscallRetrying("seal the memfd") { cbroadcast_fcntl_int(fd.raw, CBROADCAST_F_ADD_SEALS, seals) }
        return Descriptor(
            adopting: try syscallRetrying("reopen the memfd read-only") {
                open("/proc/self/fd/\(fd.raw)", O_RDONLY | O_CLOEXEC)
            })
    }

    /// What a shared-memory descriptor received from a peer is, without mapping it.
    public struct Facts: Equatable, Sendable {
        /// Its size in bytes now.
        public var size: Int
        /// It can neither shrink nor grow (F_SEAL_SHRINK and F_SEAL_GROW): its size stays what was checked.
        public var sealedInSize: Bool
        /// It was opened for reading only.
        public var readOnly: Bool
    }

    /// The facts of `fd`: a descriptor that is not a memfd has no seals (not sealed in size).
    public static func facts(of fd: Descriptor) throws(SystemError) -> Facts {
        var info = stat()
        _ = try syscallRetrying("fstat") { fstat(fd.raw, &info) }
        let seals = cbroadcast_fcntl_int(fd.raw, CBROADCAST_F_GET_SEALS, 0)
        let sizeSeals = CBROADCAST_F_SEAL_SHRINK | CBROADCAST_F_SEAL_GROW
        let flags = try syscallRetrying("fcntl(F_GETFL)") { fcntl(fd.raw, F_GETFL) }
        return Facts(
            size: Int(info.st_size), sealedInSize: seals >= 0 && seals & sizeSeals == sizeSeals,
            readOnly: flags & O_ACCMODE == O_RDONLY)
    }

    /// Maps, read-only, a shared-memory descriptor received from a peer.
    public init(mapping fd: Descriptor, size: Int) throws(SystemError) {
        var info = stat()
        _ = try syscallRetrying("fstat") { fstat(fd.raw, &info) }
        guard Int(info.st_size) >= size else {
            throw SystemError("map pool: file has \(info.st_size) bytes, expected at least \(size)", errno: EINVAL)
        }
        self.descriptor = fd
        self.size = size
        self.base = try Self.map(fd, size: size, writable: false)
    }

    private static func map(_ fd: Descriptor, size: Int, writable: Bool) throws(SystemError) -> UnsafeMutableRawPointer
    {
        let protection = writable ? PROT_READ | PROT_WRITE : PROT_READ
        // Not populated: a page costs memory only once it is written (a frame pool is mapped for the most slots it
        // may use, and uses fewer; a handler that only reads commits nothing either).
        guard let p = mmap(nil, size, protection, MAP_SHARED, fd.raw, 0), p != MAP_FAILED else {
            throw SystemError("mmap \(size) bytes", errno: Glibc.errno)
        }
        return p
    }

    deinit {
        munmap(base, size)
    }
}
