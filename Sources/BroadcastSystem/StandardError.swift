#if canImport(Glibc)
    import Glibc
#endif

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
