#if canImport(Glibc)
    import Glibc
#endif

/// The one error type of BroadcastSystem: which operation failed and the errno it failed with.
public struct SystemError: Error, CustomStringConvertible, Equatable, Sendable {
    public let operation: String
    public let errno: Int32
    /// The cause in words, when strerror's would not say it (a FIFO where a file was expected).
    public let explanation: String?

    public init(_ operation: String, errno: Int32, explanation: String? = nil) {
        self.operation = operation
        self.errno = errno
        self.explanation = explanation
    }

    public var description: String {
        "\(operation): \(reason)"
    }

    /// The file (or link) was there already (EEXIST).
    public var fileExists: Bool { errno == EEXIST }

    /// The cause, as strerror words it unless explained otherwise.
    public var reason: String { explanation ?? String(cString: strerror(errno)) }

    public var isNoSuchFile: Bool { errno == ENOENT }
    /// No such folder: nothing there, or a file where a folder was expected.
    public var isNoSuchFolder: Bool { errno == ENOENT || errno == ENOTDIR }

    public var wouldBlock: Bool { errno == EAGAIN || errno == EWOULDBLOCK }
    /// The peer went away: an ordinary end of a connection, not a failure.
    public var isDisconnect: Bool { errno == EPIPE || errno == ECONNRESET }
    /// Nothing listens at the address (no socket file, or a stale one).
    public var isNotListening: Bool { errno == ENOENT || errno == ECONNREFUSED }
}

/// Runs a syscall, retrying on EINTR, and throws a `SystemError` naming `operation` on failure.
/// Never use it for `close` (a retried close can close someone else's descriptor).
@inline(__always)
func syscallRetrying<T: BinaryInteger>(_ operation: @autoclosure () -> String, _ body: () -> T) throws(SystemError) -> T
{
    while true {
        let result = body()
        if result >= 0 { return result }
        let code = Glibc.errno
        if code == EINTR { continue }
        throw SystemError(operation(), errno: code)
    }
}
