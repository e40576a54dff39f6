import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

/// CLOCK_MONOTONIC, the one clock every sample is stamped with.
public enum MonotonicClock {
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// `now()` in seconds.
    public static var seconds: Double { Double(now()) / 1e9 }

    /// Sleeps this thread for `nanoseconds` (a signal may end it early).
    public static func sleep(nanoseconds: UInt64) {
        var request = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        var left = timespec()
        while nanosleep(&request, &left) != 0 && errno == EINTR { request = left }
    }
}

/// The wall clock, for what people read (file names), never for timing.
public enum WallClock {
    /// Local time now, formatted by strftime(3) (`"%Y-%m-%d_%H-%M-%S"`).
    public static func local(_ format: String) -> String {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        var text = [CChar](repeating: 0, count: 256)
        let length = strftime(&text, text.count, format, &parts)
        return String(decoding: text.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
