import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

/// A timerfd on CLOCK_MONOTONIC armed at absolute deadlines.
public final class DeadlineTimer {
    public let descriptor: Descriptor
    /// What the timer is armed for, so that arming it again for the same deadline costs no syscall.
    private var armed: UInt64?

    public init() throws(SystemError) {
        descriptor = Descriptor(
            adopting: try syscallRetrying("timerfd_create") {
                timerfd_create(CLOCK_MONOTONIC, Int32(TFD_CLOEXEC | TFD_NONBLOCK))
            })
    }

    /// Fires once at `deadline` (monotonic ns); nil disarms.
    public func arm(at deadline: UInt64?) throws(SystemError) {
        guard deadline != armed else { return }
        armed = deadline
        var spec = itimerspec()
        if let deadline {
            let d = max(deadline, 1)
            spec.it_value = timespec(tv_sec: Int(d / 1_000_000_000), tv_nsec: Int(d % 1_000_000_000))
        }
        _ = try syscallRetrying("timerfd_settime") {
            timerfd_settime(descriptor.raw, Int32(TFD_TIMER_ABSTIME), &spec, nil)
        }
    }

    /// Consumes the expiration count so poll stops reporting the timer readable.
    public func acknowledge() {
        armed = nil  // a fired timer is disarmed
        var count: UInt64 = 0
        _ = Glibc.read(descriptor.raw, &count, 8)
    }
}
