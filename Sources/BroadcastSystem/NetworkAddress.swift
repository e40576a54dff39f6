#if canImport(Glibc)
    import Glibc
#endif

/// A network address the resolver (getaddrinfo) found for a host and port: its sockaddr's bytes, for a library that
/// opens its own sockets (libsrt) to connect to.
public struct NetworkAddress: Sendable {
    private let bytes: [UInt8]

    /// Every datagram (UDP) address of `host` at `port`, in the order the resolver gives them (that of RFC 6724).
    public static func datagram(host: String, port: Int) throws(SystemError) -> [NetworkAddress] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0 else {
            throw SystemError(
                "resolve \(host)", errno: status == EAI_SYSTEM ? errno : EINVAL,
                explanation: status == EAI_SYSTEM ? nil : String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(found) }
        var addresses: [NetworkAddress] = []
        var next = found
        while let entry = next {
            if let address = entry.pointee.ai_addr {
                let raw = UnsafeRawBufferPointer(start: address, count: Int(entry.pointee.ai_addrlen))
                addresses.append(NetworkAddress(bytes: [UInt8](raw)))
            }
            next = entry.pointee.ai_next
        }
        return addresses
    }

    /// Calls `body` with the address as a sockaddr and its length.
    public func withSocketAddress<Result>(_ body: (UnsafePointer<sockaddr>, Int32) -> Result) -> Result {
        bytes.withUnsafeBytes { raw in body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), Int32(raw.count)) }
    }
}
