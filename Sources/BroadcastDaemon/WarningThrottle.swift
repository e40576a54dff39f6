/// A warning that a peer can cause over and over (a refused connection, a failing accept): said at
/// most once per interval, with how many like it were held back meanwhile, so no peer floods the log.
struct WarningThrottle {
    let interval: UInt64
    private var quietUntil: UInt64 = 0
    private var held = 0

    init(interval: UInt64 = 10_000_000_000) {
        self.interval = interval
    }

    /// The text to log now, or nil while it is held back.
    mutating func pass(_ text: @autoclosure () -> String, now: UInt64) -> String? {
        guard now >= quietUntil else {
            held += 1
            return nil
        }
        quietUntil = now + interval
        defer { held = 0 }
        return held == 0
            ? text() : "\(text()) (\(held) more like it held back in the last \(interval / 1_000_000_000) s)"
    }
}
