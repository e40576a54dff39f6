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
            let count = Environment.get("LISTEN_FDS").flatMap({ Int32($0) })
        else { return false }
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
            let kind =
                type == Int32(SOCK_DGRAM.rawValue)
                ? "datagram"
                : type == Int32(SOCK_SEQPACKET.rawValue)
                    ? "seqpacket" : type == Int32(SOCK_STREAM.rawValue) ? "stream" : "type \(type)"
            let family =
                Int32(address.ss_family) == AF_UNIX
                ? "Unix"
                : Int32(address.ss_family) == AF_INET || Int32(address.ss_family) == AF_INET6
                    ? "IP" : "family \(address.ss_family)"
            throw SystemError(
                "socket activation: the socket passed as fd 3 is a \(family) \(kind) socket; broadcastd needs a Unix stream socket (ListenStream=/path in the .socket unit)",
                errno: EPROTOTYPE)
        }
        guard try option(SO_ACCEPTCONN, "SO_ACCEPTCONN") != 0 else {
            throw SystemError(
                "socket activation: the Unix stream socket passed as fd 3 is not listening (Accept=yes is not supported: use Accept=no)",
                errno: EINVAL)
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
            String(
                decoding: raw.prefix(Int(length) - MemoryLayout<sa_family_t>.size).prefix(while: { $0 != 0 }),
                as: UTF8.self)
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
