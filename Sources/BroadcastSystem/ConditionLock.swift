#if canImport(Glibc)
    import Glibc
#endif

/// A mutex and a condition on the monotonic clock, for state that a thread of one's own (`BackgroundThread`) shares:
/// waiters wait inside `withLock`, and whoever changes the state calls `broadcast`. The pthread objects live at
/// addresses of their own (a Swift property's address is not stable).
public final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` holding the lock.
    public func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Inside `withLock`: waits until `broadcast` or, with a `deadline` (monotonic ns), that time; false when the
    /// deadline came.
    @discardableResult
    public func wait(until deadline: UInt64? = nil) -> Bool {
        guard let deadline else {
            pthread_cond_wait(condition, mutex)
            return true
        }
        var time = timespec(
            tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        return pthread_cond_timedwait(condition, mutex, &time) != ETIMEDOUT
    }

    /// Wakes every waiter (call it holding the lock, after changing the state).
    public func broadcast() {
        pthread_cond_broadcast(condition)
    }
}
