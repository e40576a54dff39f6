import BroadcastSystem

/// The daemon's one poll loop: it owns only its timer (a timerfd armed for the registry's earliest time). It waits on
/// what the parts registered, and hands back the descriptors' wake-ups, then the times that came.
struct Loop {
    let timer: DeadlineTimer

    init() throws(SystemError) {
        timer = try DeadlineTimer()
    }

    /// Waits until a registered descriptor is ready or the earliest timer comes (at once with `immediately`).
    /// Returns every descriptor poll said something of, signals first, with what it said; then, by `now`, every
    /// timer that has come, in time order (taken off the registry: their owners set them again).
    func wait(
        _ wakes: WakeRegistry, immediately: Bool,
        now: () -> UInt64
    ) throws(DaemonError) -> (ready: [(wake: Wake, event: Poller.Event)], due: [Wake]) {
        do { try timer.arm(at: wakes.nextDeadline) } catch { throw DaemonError("arm timer", error) }
        let watched = wakes.descriptors.sorted { $0.key == .signals && $1.key != .signals }
        let events: [Poller.Event]
        do {
            let entries = watched.map { ($0.value.fd, $0.value.interest) } + [(timer.descriptor.raw, .readable)]
            events = try Poller.wait(entries, timeoutMilliseconds: immediately ? 0 : -1)
        } catch {
            throw DaemonError("poll", error)
        }
        if events.last?.readable == true { timer.acknowledge() }
        let ready = zip(watched, events).filter { $1.readable || $1.writable || $1.closed }.map { ($0.key, $1) }
        var due: [Wake] = []
        let time = now()
        while let wake = wakes.nextDue(now: time) { due.append(wake) }
        return (ready, due)
    }
}
