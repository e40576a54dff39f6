import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

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

        public init(readable: Bool = false, writable: Bool = false, closed: Bool = false) {
            self.readable = readable
            self.writable = writable
            self.closed = closed
        }

        /// Nothing happened (a wake-up that is not a descriptor's).
        public static let none = Event()
    }

    /// Waits up to `timeoutMilliseconds` (-1: forever). Returns one event per entry, in order.
    public static func wait(_ entries: [(fd: Int32, interest: Interest)], timeoutMilliseconds: Int32)
        throws(SystemError) -> [Event]
    {
        var fds = entries.map { pollfd(fd: $0.fd, events: $0.interest.rawValue, revents: 0) }
        do {
            _ = try syscallRetrying("poll") { poll(&fds, nfds_t(fds.count), timeoutMilliseconds) }
        } catch  where error.errno == EINTR {
            return fds.map { _ in Event(readable: false, writable: false, closed: false) }
        }
        return fds.map {
            Event(
                readable: $0.revents & Int16(POLLIN) != 0,
                writable: $0.revents & Int16(POLLOUT) != 0,
                closed: $0.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0)
        }
    }
}
