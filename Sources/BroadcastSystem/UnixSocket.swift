import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

/// Unix stream sockets with descriptor passing (SCM_RIGHTS). Every socket is close-on-exec.
public enum UnixSocket {
    /// Largest number of descriptors one `receive` accepts; more are closed and reported as truncation.
    public static let maxDescriptorsPerMessage = 8

    private static func withAddress<R>(
        _ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) throws(SystemError) -> R
    ) throws(SystemError) -> R {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else {
            throw SystemError(
                "socket path too long (\(bytes.count) bytes, at most \(capacity - 1)): \(path)", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return try withUnsafePointer(to: &address) { (p: UnsafePointer<sockaddr_un>) throws(SystemError) -> R in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                (sa: UnsafePointer<sockaddr>) throws(SystemError) -> R in
                try body(sa, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }

    private static func newSocket(nonBlocking: Bool) throws(SystemError) -> Descriptor {
        let type =
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
            | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        return Descriptor(adopting: try syscallRetrying("socket") { socket(AF_UNIX, type, 0) })
    }

    /// Binds and listens on `path`, mode 0600. The socket appears at `path` only once it is listening
    /// (bound under a temporary name, then renamed), so "the socket exists" means "the daemon is ready".
    /// A stale socket left by a dead daemon is replaced; a live one is an error.
    public static func listen(path: String, backlog: Int32 = 32) throws(SystemError) -> Descriptor {
        if FileSystem.exists(path) {
            if (try? connect(path: path)) != nil {
                throw SystemError("listen on \(path): another broadcastd is already listening there", errno: EADDRINUSE)
            }
            unlink(path)
        }
        let temporary = path + ".\(getpid())"
        unlink(temporary)
        let fd = try newSocket(nonBlocking: true)
        try withAddress(temporary) { (sa, len) throws(SystemError) in
            _ = try syscallRetrying("bind \(temporary)") { bind(fd.raw, sa, len) }
        }
        do {
            _ = try syscallRetrying("chmod \(temporary)") { chmod(temporary, 0o600) }
            _ = try syscallRetrying("listen \(temporary)") { Glibc.listen(fd.raw, backlog) }
            _ = try syscallRetrying("rename \(temporary) to \(path)") { rename(temporary, path) }
        } catch {
            unlink(temporary)
            throw error
        }
        return fd
    }

    /// Connects a blocking socket to `path`.
    public static func connect(path: String) throws(SystemError) -> Descriptor {
        let fd = try newSocket(nonBlocking: false)
        try withAddress(path) { (sa, len) throws(SystemError) in
            _ = try syscallRetrying("connect \(path)") { Glibc.connect(fd.raw, sa, len) }
        }
        return fd
    }

    /// Bytes sent on `socket` that the peer has not read yet (descriptors sent with them are still on their way).
    public static func unreadBytes(_ socket: Descriptor) throws(SystemError) -> Int {
        var count: Int32 = 0
        _ = try syscallRetrying("ioctl(SIOCOUTQ)") { cbroadcast_unread_output(socket.raw, &count) }
        return Int(count)
    }

    /// Accepts one connection, non-blocking and close-on-exec; nil when none is pending.
    public static func accept(_ listener: Descriptor) throws(SystemError) -> Descriptor? {
        while true {
            let raw = cbroadcast_accept4(listener.raw, Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue))
            if raw >= 0 { return Descriptor(adopting: raw) }
            let code = Glibc.errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK || code == ECONNABORTED { return nil }
            throw SystemError("accept", errno: code)
        }
    }

    /// The process at the other end of a connected socket, as the kernel saw it connect (SO_PEERCRED).
    public static func peer(_ socket: Descriptor) throws(SystemError) -> (pid: pid_t, uid: uid_t) {
        var credentials = cbroadcast_ucred()
        _ = try syscallRetrying("read the peer's credentials") { cbroadcast_peer_credentials(socket.raw, &credentials) }
        return (credentials.pid, credentials.uid)
    }

    /// This process's user.
    public static var ownUser: uid_t { getuid() }

    /// A connected pair of blocking stream sockets.
    public static func pair() throws(SystemError) -> (Descriptor, Descriptor) {
        var fds: [Int32] = [-1, -1]
        _ = try syscallRetrying("socketpair") {
            socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
        }
        return (Descriptor(adopting: fds[0]), Descriptor(adopting: fds[1]))
    }

    /// Sends bytes with `descriptors` attached to the first byte. Returns how many bytes went out
    /// (0 when a non-blocking socket is full). Never raises SIGPIPE.
    public static func send(_ socket: Descriptor, _ bytes: UnsafeRawBufferPointer, descriptors: [Int32] = [])
        throws(SystemError) -> Int
    {
        var iov = iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count)
        let payload = descriptors.count * MemoryLayout<Int32>.size
        var control = [UInt8](repeating: 0, count: descriptors.isEmpty ? 0 : cbroadcast_cmsg_space(payload))
        let result: Int = withUnsafeMutablePointer(to: &iov) { iovp in
            control.withUnsafeMutableBytes { cbuf in
                var message = msghdr()
                message.msg_iov = iovp
                message.msg_iovlen = 1
                if !descriptors.isEmpty {
                    message.msg_control = cbuf.baseAddress
                    message.msg_controllen = cbuf.count
                    let header = cbroadcast_cmsg_firsthdr(&message)!
                    header.pointee.cmsg_level = SOL_SOCKET
                    header.pointee.cmsg_type = Int32(SCM_RIGHTS)
                    header.pointee.cmsg_len = cbroadcast_cmsg_len(payload)
                    let data = UnsafeMutableRawPointer(cbroadcast_cmsg_data(header)!)
                    for (i, fd) in descriptors.enumerated() {
                        data.storeBytes(of: fd, toByteOffset: i * 4, as: Int32.self)
                    }
                }
                var n: Int
                repeat { n = sendmsg(socket.raw, &message, Int32(MSG_NOSIGNAL)) } while n < 0 && Glibc.errno == EINTR
                return n
            }
        }
        if result >= 0 { return result }
        let code = Glibc.errno
        if code == EAGAIN || code == EWOULDBLOCK { return 0 }
        throw SystemError("sendmsg", errno: code)
    }

    public struct Received {
        /// Bytes read; 0 means the peer closed the connection.
        public var count: Int
        public var descriptors: [Descriptor]
        /// True when the kernel dropped descriptors because more arrived than we accept.
        public var descriptorsTruncated: Bool
    }

    /// Receives into `buffer`; nil when a non-blocking socket has nothing to read.
    public static func receive(_ socket: Descriptor, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError)
        -> Received?
    {
        var iov = iovec(iov_base: buffer.baseAddress, iov_len: buffer.count)
        var control = [UInt8](repeating: 0, count: cbroadcast_cmsg_space(maxDescriptorsPerMessage * 4))
        var raws: [Int32] = []
        var truncated = false
        let n: Int = withUnsafeMutablePointer(to: &iov) { iovp in
            control.withUnsafeMutableBytes { cbuf in
                var message = msghdr()
                message.msg_iov = iovp
                message.msg_iovlen = 1
                message.msg_control = cbuf.baseAddress
                message.msg_controllen = cbuf.count
                var n: Int
                repeat {
                    n = recvmsg(socket.raw, &message, Int32(MSG_CMSG_CLOEXEC))
                } while n < 0 && Glibc.errno == EINTR
                guard n >= 0 else { return n }
                var header = cbroadcast_cmsg_firsthdr(&message)
                while let h = header {
                    if h.pointee.cmsg_level == SOL_SOCKET && h.pointee.cmsg_type == Int32(SCM_RIGHTS) {
                        let dataLength = Int(h.pointee.cmsg_len) - cbroadcast_cmsg_len(0)
                        let data = UnsafeRawPointer(cbroadcast_cmsg_data(h)!)
                        for i in 0..<(dataLength / 4) {
                            raws.append(data.loadUnaligned(fromByteOffset: i * 4, as: Int32.self))
                        }
                    }
                    header = cbroadcast_cmsg_nxthdr(&message, h)
                }
                truncated = message.msg_flags & Int32(MSG_CTRUNC) != 0
                return n
            }
        }
        if n < 0 {
            let code = Glibc.errno
            if code == EAGAIN || code == EWOULDBLOCK { return nil }
            throw SystemError("recvmsg", errno: code)
        }
        return Received(count: n, descriptors: raws.map { Descriptor(adopting: $0) }, descriptorsTruncated: truncated)
    }
}

extension UnixSocket {
    /// Sends `bytes[offset...]`; descriptors go with the first byte sent.
    public static func send(_ socket: Descriptor, _ bytes: [UInt8], from offset: Int, descriptors: [Int32] = [])
        throws(SystemError) -> Int
    {
        var result: Result<Int, SystemError> = .success(0)
        bytes.withUnsafeBytes { p in
            result = Result { () throws(SystemError) -> Int in
                try send(socket, UnsafeRawBufferPointer(rebasing: p[offset...]), descriptors: descriptors)
            }
        }
        return try result.get()
    }

    /// Receives into the start of `buffer`.
    public static func receive(_ socket: Descriptor, into buffer: inout [UInt8]) throws(SystemError) -> Received? {
        var result: Result<Received?, SystemError> = .success(nil)
        buffer.withUnsafeMutableBytes { p in
            result = Result { () throws(SystemError) -> Received? in try receive(socket, into: p) }
        }
        return try result.get()
    }
}
