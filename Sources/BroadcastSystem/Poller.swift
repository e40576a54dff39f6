#if canImport(Glibc)
import Glibc
#endif
import CBroadcastShims

/// poll(2) over a set of descriptors.
public enum Poller {
    public struct Interest: OptionSet, Sendable {
        public let rawValue: Int16
        public init(rawValue: Int16) { self.rawValue = rawValue }
        public static let readable = Interest(rawValue: Int16(POLLIN))
        public static let writable = Interest(rawValue: Int16(POLLOUT))
    }

    public struct Event: Sendable {
        public var readable: Bool
        public var writable: Bool
        /// Hang-up or error: the peer is gone.
        public var closed: Bool
    }

    /// Waits up to `timeoutMilliseconds` (-1: forever). Returns one event per entry, in order.
    public static func wait(_ entries: [(fd: Int32, interest: Interest)], timeoutMilliseconds: Int32) throws(SystemError) -> [Event] {
        var fds = entries.map { pollfd(fd: $0.fd, events: $0.interest.rawValue, revents: 0) }
        do {
            _ = try syscallRetrying("poll") { poll(&fds, nfds_t(fds.count), timeoutMilliseconds) }
        } catch where error.errno == EINTR {
            return fds.map { _ in Event(readable: false, writable: false, closed: false) }
        }
        return fds.map {
            Event(readable: $0.revents & Int16(POLLIN) != 0,
                  writable: $0.revents & Int16(POLLOUT) != 0,
                  closed: $0.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0)
        }
    }
}

/// CLOCK_MONOTONIC, the one clock every sample is stamped with.
public enum MonotonicClock {
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

/// A timerfd on CLOCK_MONOTONIC armed at absolute deadlines.
public final class DeadlineTimer {
    public let descriptor: Descriptor
    /// What the timer is armed for, so that arming it again for the same deadline costs no syscall.
    private var armed: UInt64?

    public init() throws(SystemError) {
        descriptor = Descriptor(adopting: try syscallRetrying("timerfd_create") {
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
        _ = try syscallRetrying("timerfd_settime") { timerfd_settime(descriptor.raw, Int32(TFD_TIMER_ABSTIME), &spec, nil) }
    }

    /// Consumes the expiration count so poll stops reporting the timer readable.
    public func acknowledge() {
        armed = nil // a fired timer is disarmed
        var count: UInt64 = 0
        _ = Glibc.read(descriptor.raw, &count, 8)
    }
}

/// An eventfd another thread signals to wake the poll loop: readable from `signal` until `acknowledge`.
public final class Wakeup: @unchecked Sendable {
    public let descriptor: Descriptor

    public init() throws(SystemError) {
        descriptor = Descriptor(adopting: try syscallRetrying("eventfd") { eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK)) })
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

/// A detached thread of its own for work that blocks (a D-Bus conversation, say), so the loop does not.
public enum BackgroundThread {
    public static func start(_ body: @escaping @Sendable () -> Void) throws(SystemError) {
        final class Box { let body: @Sendable () -> Void; init(_ body: @escaping @Sendable () -> Void) { self.body = body } }
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
        let result = pthread_create(&thread, nil, { context in
            let box = Unmanaged<Box>.fromOpaque(context!).takeRetainedValue()
            box.body()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Box>.fromOpaque(context).release()
            throw SystemError("pthread_create", errno: result)
        }
        pthread_detach(thread)
    }
}
