import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

/// An eventfd another thread signals to wake the poll loop: readable from `signal` until `acknowledge`.
public final class Wakeup: @unchecked Sendable {
    public let descriptor: Descriptor

    public init() throws(SystemError) {
        descriptor = Descriptor(
            adopting: try syscallRetrying("eventfd") { eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK)) })
    }

    /// Safe from any thread.
    public func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(descriptor.raw, &one, 8)
    }

    public func acknowledge() {
        var count: UInt64 = 0
        _ = Glibc.read(descriptor.raw, &count, 8)
    }
}
