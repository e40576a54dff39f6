import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

/// Delivers SIGTERM/SIGINT/SIGHUP through a descriptor instead of asynchronous handlers.
public final class SignalDescriptor {
    public let descriptor: Descriptor

    public init(signals: [Int32]) throws(SystemError) {
        var set = sigset_t()
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        _ = try syscallRetrying("pthread_sigmask") { pthread_sigmask(SIG_BLOCK, &set, nil) == 0 ? 0 : -1 }
        descriptor = Descriptor(
            adopting: try syscallRetrying("signalfd") { signalfd(-1, &set, Int32(SFD_CLOEXEC | SFD_NONBLOCK)) })
    }

    /// The next pending signal number, if any.
    public func next() -> Int32? {
        var info = signalfd_siginfo()
        let n = Glibc.read(descriptor.raw, &info, MemoryLayout<signalfd_siginfo>.size)
        return n == MemoryLayout<signalfd_siginfo>.size ? Int32(info.ssi_signo) : nil
    }
}

public enum Signals {
    public static let interrupt = SIGINT
    public static let terminate = SIGTERM
    public static let kill = SIGKILL
    public static let hangUp = SIGHUP
    /// The terminal was resized.
    public static let windowChanged = SIGWINCH

    /// Ignores `signal` process-wide (SIGPIPE: writes to closed peers then fail with EPIPE instead of killing us).
    public static func ignore(_ signal: Int32) { Glibc.signal(signal, SIG_IGN) }
    public static func restoreDefault(_ signal: Int32) { Glibc.signal(signal, SIG_DFL) }
    public static func ignoreBrokenPipe() { ignore(SIGPIPE) }
}
