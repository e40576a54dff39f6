import BroadcastSystem

/// What wakes the daemon: a descriptor that became ready, or a time that came. Each names the part it is for.
enum Wake: Hashable {
    // Descriptors.
    case listener
    case signals
    /// A peer's socket (its session's id).
    case peer(Int)
    /// A handler's process exited (its broadcast's id).
    case handlerExited(UInt32)
    /// The capture source has an answer for a pending open (the portal's dialog, a first frame).
    case sourceAnswered
    /// Audio came from the capture source's thread.
    case audioArrived
    /// The session may have been locked or unlocked.
    case sessionLock

    // Times.
    /// systemd's watchdog is due a ping.
    case watchdog
    /// The listener rested after accept() found no descriptor, and may accept again.
    case acceptResumes
    /// The next video frame is due.
    case frame
    /// Audio is due, or a broadcast's wait for its audio runs out.
    case audio
    /// Once a second: SERVICE_INFO, the status line, the hang check.
    case serviceInfo
    /// A pending open is asked again.
    case openRetry
    /// A peer's deadline: to say HELLO, to finish a message, or its command's answer (its session's id).
    case peerDeadline(Int)
    /// A handler's deadline: READY, SIGTERM, SIGKILL (its broadcast's id).
    case handlerDeadline(UInt32)
    /// A broadcast's maximum duration runs out (its id).
    case maxDuration(UInt32)
    /// A finishing broadcast's wait for its shared encoder's sound runs out (its id).
    case audioDrain(UInt32)
}

/// The descriptors and times the daemon waits for, each with the wake-up it stands for. A part registers its
/// descriptor once and changes its interest as it goes, and keeps its timers set; the loop polls what is registered
/// and hands back the wake-ups, and nobody lists every deadline by hand.
final class WakeRegistry {
    /// Every descriptor watched, with what it is watched for.
    private(set) var descriptors: [Wake: (fd: Int32, interest: Poller.Interest)] = [:]
    /// When each timer comes.
    private(set) var timers: [Wake: UInt64] = [:]
    /// The timers in time order (with entries of timers since moved or cancelled, skipped when they come up).
    private var queue = TimerHeap()

    /// Watches `fd` for `interest` (replacing what `wake` watched before).
    func register(_ wake: Wake, _ fd: Int32, _ interest: Poller.Interest) {
        descriptors[wake] = (fd, interest)
    }

    /// Watches what `wake` names for `interest` from now on.
    func reregister(_ wake: Wake, _ interest: Poller.Interest) {
        descriptors[wake]?.interest = interest
    }

    func deregister(_ wake: Wake) {
        descriptors[wake] = nil
    }

    /// `wake` comes at `deadline` (monotonic ns); nil cancels it.
    func schedule(_ wake: Wake, at deadline: UInt64?) {
        guard timers[wake] != deadline else { return }
        timers[wake] = deadline
        if let deadline { queue.push(deadline, wake) }
        // Timers moved again and again (a peer's, as its messages come in pieces) leave entries behind: when they
        // outnumber the timers, the queue is made anew from the timers.
        if queue.count > 2 * timers.count + 64 {
            queue = TimerHeap()
            for (wake, at) in timers.sorted(by: { $0.value < $1.value }) { queue.push(at, wake) }
        }
    }

    /// Entries in the timer queue, moved and cancelled ones included.
    var queued: Int { queue.count }

    /// When the earliest timer comes.
    var nextDeadline: UInt64? {
        while let (at, wake) = queue.first, timers[wake] != at { queue.pop() }
        return queue.first?.at
    }

    /// The earliest timer that has come by `now`, taken off (its owner sets it again if it wants to); nil when none.
    func nextDue(now: UInt64) -> Wake? {
        guard let at = nextDeadline, at <= now, let (_, wake) = queue.pop() else { return nil }
        timers[wake] = nil
        return wake
    }
}

/// A binary min-heap of times, each with its wake-up; equal times come out in the order they went in.
private struct TimerHeap {
    private var entries: [(at: UInt64, order: UInt64, wake: Wake)] = []
    private var pushed: UInt64 = 0

    var first: (at: UInt64, wake: Wake)? { entries.first.map { ($0.at, $0.wake) } }
    var count: Int { entries.count }

    mutating func push(_ at: UInt64, _ wake: Wake) {
        pushed += 1
        entries.append((at, pushed, wake))
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard before(child, parent) else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    mutating func pop() -> (at: UInt64, wake: Wake)? {
        guard !entries.isEmpty else { return nil }
        entries.swapAt(0, entries.count - 1)
        let top = entries.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < entries.count && before(left, smallest) { smallest = left }
            if right < entries.count && before(right, smallest) { smallest = right }
            guard smallest != parent else { break }
            entries.swapAt(parent, smallest)
            parent = smallest
        }
        return (top.at, top.wake)
    }

    private func before(_ a: Int, _ b: Int) -> Bool {
        (entries[a].at, entries[a].order) < (entries[b].at, entries[b].order)
    }
}
