import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

/// How this process's threads are scheduled.
public enum Scheduling {
    /// Refuses real-time scheduling to the calling thread, the threads started from it afterwards and its children:
    /// the process's real-time priority limit becomes 0 and the thread gives up CAP_SYS_NICE (capabilities are a
    /// thread's own: call it first thing in `main`). SVT-AV1 puts each of its threads at SCHED_FIFO 99
    /// where it may (as root): an encoder at real-time priority takes the cores from everything else, broadcastd's
    /// capture loop included, which then misses frames for every broadcast.
    public static func refuseRealtime() throws(SystemError) {
        guard cbroadcast_refuse_realtime() == 0 else { throw SystemError("refuse real-time scheduling", errno: errno) }
    }
}
