#if canImport(Glibc)
    import Glibc
#endif

/// sd_notify(3) without libsystemd: datagrams such as "READY=1" to the socket named by NOTIFY_SOCKET
/// (a path, or an abstract address written with a leading '@').
public final class SystemdNotifier {
    private let socket: Descriptor
    private var address = sockaddr_un()
    private var addressLength: socklen_t
    /// How often to send WATCHDOG=1: half of WATCHDOG_USEC, in nanoseconds; nil when systemd does
    /// not watch this process (no WATCHDOG_USEC, or WATCHDOG_PID names another process).
    public let watchdogInterval: UInt64?
    public let destination: String

    /// Reads NOTIFY_SOCKET and WATCHDOG_USEC/WATCHDOG_PID and removes them from the environment, so
    /// that handlers this process starts do not notify systemd in its name. nil without NOTIFY_SOCKET.
    public init?() throws(SystemError) {
        defer {
            for name in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] { Environment.unset(name) }
        }
        guard let target = Environment.get("NOTIFY_SOCKET"), !target.isEmpty else { return nil }
        let watchdogPID = Environment.get("WATCHDOG_PID").flatMap { pid_t($0) }
        if let usec = Environment.get("WATCHDOG_USEC").flatMap({ UInt64($0) }), usec > 0,
            watchdogPID == nil || watchdogPID == getpid()
        {
            watchdogInterval = usec * 1000 / 2
        } else {
            watchdogInterval = nil
        }
        destination = target
        var bytes = Array(target.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard target.hasPrefix("/") || abstract, bytes.count < capacity else {
            throw SystemError(
                "NOTIFY_SOCKET=\(target): not an absolute path or @abstract address of at most \(capacity - 1) bytes",
                errno: EINVAL)
        }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        // An abstract name is exactly its bytes; a path may carry its terminating NUL.
        addressLength = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
        socket = Descriptor(
            adopting: try syscallRetrying("socket(AF_UNIX, SOCK_DGRAM)") {
                Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            })
    }

    /// Sends one notification, e.g. "READY=1" or "STATUS=idle". Never blocks: a full queue is an error.
    public func send(_ state: String) throws(SystemError) {
        let bytes = Array(state.utf8)
        let fd = socket.raw
        _ = try syscallRetrying("notify \(destination)") {
            withUnsafePointer(to: &address) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                    bytes.withUnsafeBytes {
                        sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT), sa, addressLength)
                    }
                }
            }
        }
    }
}
