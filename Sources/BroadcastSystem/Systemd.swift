#if canImport(Glibc)
import Glibc
#endif

/// The three small systemd protocols broadcastd speaks, implemented directly (libsystemd would be
/// a dependency for some fifty lines): socket activation (LISTEN_FDS), readiness and watchdog
/// notification (NOTIFY_SOCKET) and journal detection (JOURNAL_STREAM). See sd_listen_fds(3),
/// sd_notify(3) and systemd.exec(5).
public enum Systemd {
    /// The first descriptor systemd passes (SD_LISTEN_FDS_START).
    public static let listenFDsStart: Int32 = 3

    /// Whether systemd passed this process sockets (LISTEN_PID is ours, LISTEN_FDS at least 1).
    public static var isSocketActivated: Bool {
        guard let pid = Environment.get("LISTEN_PID").flatMap({ pid_t($0) }), pid == getpid(),
              let count = Environment.get("LISTEN_FDS").flatMap({ Int32($0) }) else { return false }
        return count >= 1
    }

    /// The listening socket systemd passed, when this process was socket-activated (LISTEN_PID is
    /// ours and LISTEN_FDS is at least 1); nil otherwise. It must be a listening AF_UNIX stream
    /// socket: anything else (a unit with ListenDatagram=, say) is refused rather than half-served.
    /// The descriptor comes back non-blocking and close-on-exec, and the LISTEN_* variables are
    /// removed either way, so that handlers do not think they were activated.
    public static func takeActivatedListener() throws(SystemError) -> Descriptor? {
        defer {
            for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { Environment.unset(name) }
        }
        guard isSocketActivated, let count = Environment.get("LISTEN_FDS").flatMap({ Int32($0) }) else { return nil }
        let fd = Descriptor(adopting: listenFDsStart)
        fd.setCloseOnExec()
        func option(_ name: Int32, _ label: String) throws(SystemError) -> Int32 {
            var value: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = try syscallRetrying("socket activation: getsockopt(\(label)) on fd 3 (is it a socket?)") {
                getsockopt(fd.raw, SOL_SOCKET, name, &value, &length)
            }
            return value
        }
        let type = try option(SO_TYPE, "SO_TYPE")
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd.raw, $0, &length) }
        }
        guard named == 0 else { throw SystemError("socket activation: getsockname on fd 3", errno: Glibc.errno) }
        guard Int32(address.ss_family) == AF_UNIX, type == Int32(SOCK_STREAM.rawValue) else {
            let kind = type == Int32(SOCK_DGRAM.rawValue) ? "datagram" : type == Int32(SOCK_SEQPACKET.rawValue) ? "seqpacket" : type == Int32(SOCK_STREAM.rawValue) ? "stream" : "type \(type)"
            let family = Int32(address.ss_family) == AF_UNIX ? "Unix" : Int32(address.ss_family) == AF_INET || Int32(address.ss_family) == AF_INET6 ? "IP" : "family \(address.ss_family)"
            throw SystemError("socket activation: the socket passed as fd 3 is a \(family) \(kind) socket; broadcastd needs a Unix stream socket (ListenStream=/path in the .socket unit)", errno: EPROTOTYPE)
        }
        guard try option(SO_ACCEPTCONN, "SO_ACCEPTCONN") != 0 else {
            throw SystemError("socket activation: the Unix stream socket passed as fd 3 is not listening (Accept=yes is not supported: use Accept=no)", errno: EINVAL)
        }
        if count > 1 {
            // Only the first is used; the rest are closed so that they do not leak into handlers.
            for extra in (listenFDsStart + 1)..<(listenFDsStart + count) { Glibc.close(extra) }
        }
        try fd.setNonBlocking()
        return fd
    }

    /// The filesystem path a listening Unix socket is bound to; nil for an abstract or unnamed socket.
    public static func boundPath(_ socket: Descriptor) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket.raw, $0, &length) }
        }
        guard rc == 0, Int32(address.sun_family) == AF_UNIX else { return nil }
        let path = withUnsafeBytes(of: address.sun_path) { raw in
            String(decoding: raw.prefix(Int(length) - MemoryLayout<sa_family_t>.size).prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        return path.hasPrefix("/") ? path : nil
    }

    /// Whether standard error is the journal's stream (JOURNAL_STREAM, "DEVICE:INODE", names it):
    /// then log lines should carry `<N>` syslog priority prefixes. Merely inheriting the variable
    /// (stderr redirected to a file by hand) does not count.
    public static func standardErrorIsJournal() -> Bool {
        guard let value = Environment.get("JOURNAL_STREAM") else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(STDERR_FILENO, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }
}

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
        if let usec = Environment.get("WATCHDOG_USEC").flatMap({ UInt64($0) }), usec > 0, watchdogPID == nil || watchdogPID == getpid() {
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
            throw SystemError("NOTIFY_SOCKET=\(target): not an absolute path or @abstract address of at most \(capacity - 1) bytes", errno: EINVAL)
        }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        // An abstract name is exactly its bytes; a path may carry its terminating NUL.
        addressLength = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
        socket = Descriptor(adopting: try syscallRetrying("socket(AF_UNIX, SOCK_DGRAM)") {
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
                    bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT), sa, addressLength) }
                }
            }
        }
    }
}

/// A bound Unix datagram socket that receives what is sent to its path: what systemd's side of
/// NOTIFY_SOCKET looks like, for tests.
public final class UnixDatagramReceiver {
    public let socket: Descriptor
    public let path: String

    public init(path: String) throws(SystemError) {
        self.path = path
        unlink(path)
        socket = Descriptor(adopting: try syscallRetrying("socket(AF_UNIX, SOCK_DGRAM)") {
            Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        })
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw SystemError("bind \(path): path too long", errno: ENAMETOOLONG) }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let fd = socket.raw
        _ = try syscallRetrying("bind \(path)") {
            withUnsafePointer(to: &address) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
        }
    }

    deinit { unlink(path) }

    /// The next datagram as text, or nil when none arrives within `timeoutMilliseconds`.
    public func receive(timeoutMilliseconds: Int32) throws(SystemError) -> String? {
        let events = try Poller.wait([(socket.raw, .readable)], timeoutMilliseconds: timeoutMilliseconds)
        guard events[0].readable else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let fd = socket.raw
        let n = try syscallRetrying("recv \(path)") { buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) } }
        return String(decoding: buffer[..<n], as: UTF8.self)
    }
}

/// Standard error, written whole lines at a time (one write per line, so that lines from the daemon
/// and its handlers, which share the stream, do not interleave mid-line).
public enum StandardError {
    public static func write(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
            if n < 0 && Glibc.errno == EINTR { continue }
            guard n > 0 else { return }
            bytes = bytes.dropFirst(n)
        }
    }
}
