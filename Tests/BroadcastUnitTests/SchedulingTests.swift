import BroadcastSystem
import Glibc
import Testing

/// Handlers that encode refuse real-time scheduling: SVT-AV1 put every one of its threads at SCHED_FIFO 99 as root,
/// and broadcastd's capture loop, starved, missed 2.7 % of its frames at 1080p30 (`bench/many.sh`, codec=av1).
@Suite struct SchedulingTests {
    /// Whether this thread may make itself SCHED_FIFO; it is left as it was.
    static func mayBecomeRealtime() -> Bool {
        var previous = sched_param()
        let policy = sched_getscheduler(0)
        sched_getparam(0, &previous)
        var realtime = sched_param(sched_priority: 99)
        guard sched_setscheduler(0, SCHED_FIFO, &realtime) == 0 else { return false }
        sched_setscheduler(0, policy, &previous)
        return true
    }

    @Test func afterRefusingRealtimeNoThreadBecomesRealtime() throws {
        // This thread of the test pool may be SCHED_FIFO already: as root, SVT-AV1 raises the thread that opens it.
        var normal = sched_param()
        #expect(sched_setscheduler(0, SCHED_OTHER, &normal) == 0)
        // As root, as the tests run: real-time priority is there to take until it is refused.
        try #require(geteuid() == 0 && Self.mayBecomeRealtime(), "this test needs to run as root")
        try Scheduling.refuseRealtime()
        var realtime = sched_param(sched_priority: 99)
        #expect(sched_setscheduler(0, SCHED_FIFO, &realtime) == -1 && errno == EPERM)
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(__RLIMIT_RTPRIO.rawValue), &limit)
        #expect(limit.rlim_cur == 0 && limit.rlim_max == 0)
    }
}
