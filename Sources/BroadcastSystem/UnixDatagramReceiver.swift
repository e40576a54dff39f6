#if canImport(Glibc)
    import Glibc
#endif

/// A bound Unix datagram socket that receives what is sent to its path: what systemd's side of
/// NOTIFY_SOCKET looks like, for tests.
public final class UnixDatagramReceiver {
    public let socket: Descriptor
    public let path: String

    public init(path: String) throws(SystemError) {
        self.path = path
        unlink(path)
        socket = Descriptor(
            adopting: try syscallRetrying("socket(AF_UNIX, SOCK_DGRAM)") {
                Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            })
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw SystemError("bind \(path): path too long", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let fd = socket.raw
        _ = try syscallRetrying("bind \(path)") {
            withUnsafePointer(to: &address) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
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
        let n = try syscallRetrying("recv \(path)") {
            buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        }
        return String(decoding: buffer[..<n], as: UTF8.self)
    }
}
