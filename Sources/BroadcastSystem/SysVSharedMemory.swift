import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

/// A private System V shared-memory segment, for X servers whose MIT-SHM cannot take a memfd
/// (before version 1.2). It is marked for removal as soon as it is attached here, so it disappears
/// when the last process detaches, even if this one dies.
public final class SysVSharedMemory {
    public let id: Int32
    public let size: Int
    public let base: UnsafeMutableRawPointer

    public init(size: Int) throws(SystemError) {
        let id = try syscallRetrying("shmget \(size) bytes") { shmget(IPC_PRIVATE, size, IPC_CREAT | 0o600) }
        guard let p = shmat(id, nil, 0), p != UnsafeMutableRawPointer(bitPattern: -1) else {
            let error = SystemError("shmat", errno: errno)
            shmctl(id, IPC_RMID, nil)
            throw error
        }
        self.id = id
        self.size = size
        self.base = p
    }

    /// Call once the X server has attached the segment too: it then lives exactly as long as the attachments.
    public func markForRemoval() {
        shmctl(id, IPC_RMID, nil)
    }

    deinit {
        shmdt(base)
        shmctl(id, IPC_RMID, nil)
    }
}
