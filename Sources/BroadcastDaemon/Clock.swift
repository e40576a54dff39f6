import BroadcastSystem

/// Where the daemon's parts read the time (CLOCK_MONOTONIC nanoseconds): the system's in the daemon, one
/// the test moves by hand in unit tests, so that delivery, drops, the audio drain and the hang check are
/// tested without waiting.
public protocol DaemonClock: AnyObject {
    func now() -> UInt64
}

/// CLOCK_MONOTONIC.
public final class SystemClock: DaemonClock {
    public init() {}
    public func now() -> UInt64 { MonotonicClock.now() }
}

/// A clock that moves only when told to.
public final class ManualClock: DaemonClock {
    public private(set) var time: UInt64
    public init(_ time: UInt64 = 1_000_000_000) { self.time = time }
    public func now() -> UInt64 { time }
    public func advance(by nanoseconds: UInt64) { time += nanoseconds }
}
