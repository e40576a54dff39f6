import BroadcastSystem

/// What woke the daemon's loop.
enum Wake {
    case listener
    case signals
    case timer
    /// The capture source has an answer for a pending open (the portal's dialog, a first frame).
    case sourceAnswered
    /// Audio came from the capture source's thread.
    case audioArrived
    /// The session may have been locked or unlocked.
    case sessionLock
    case peer(PeerSession)
    /// A handler process exited (its pidfd became readable).
    case handlerExited(Broadcast)
}

/// The daemon's one poll loop: it owns only its timer. Each turn the owner lists what to watch, each with
/// the wake-up it stands for, and gets back every wake-up with what poll said of its descriptor.
struct Loop {
    let timer: DeadlineTimer

    init() throws(SystemError) {
        timer = try DeadlineTimer()
    }

    /// Waits until something is ready or `deadline` (monotonic ns) passes; at once with `immediately`.
    /// The timer is one of the watches: it fires at `deadline`.
    func wait(_ watches: [(fd: Int32, interest: Poller.Interest, wake: Wake)], until deadline: UInt64?,
              immediately: Bool) throws(DaemonError) -> [(wake: Wake, event: Poller.Event)] {
        do { try timer.arm(at: deadline) } catch { throw DaemonError("arm timer", error) }
        let all = watches + [(timer.descriptor.raw, .readable, .timer)]
        let events: [Poller.Event]
        do { events = try Poller.wait(all.map { ($0.fd, $0.interest) }, timeoutMilliseconds: immediately ? 0 : -1) } catch {
            throw DaemonError("poll", error)
        }
        if events.last?.readable == true { timer.acknowledge() }
        return zip(all, events).map { ($0.wake, $1) }
    }
}
