import BroadcastCore
import BroadcastProtocol
import BroadcastSystem

/// Whether the desktop session is locked, from a watcher on another thread (`SessionLockWatcher`: logind's
/// LockedHint, the screensaver's ActiveChanged).
public protocol SessionLockSignal: AnyObject {
    /// Readable when `locked` may have changed; the daemon acknowledges it.
    var changed: Wakeup { get }
    var locked: Bool { get }
}

/// What a locked session does to live broadcasts (`broadcastd --on-lock`).
public enum LockAction: String, Sendable, CaseIterable {
    /// Every live broadcast pauses (a recording's segments show it) and resumes on unlock.
    case pause
    /// Broadcasts stay live, with the privacy frame (black, "SCREEN LOCKED") instead of the screen.
    case blank
    /// Broadcasts carry on, but never show the screen while it is locked.
    case ignore
}

/// Whether the desktop session is locked, as the daemon last read it, with what only a locked session has.
enum SessionLockState: Equatable {
    case unlocked
    /// Locked; `pausedForLock`: the broadcasts broadcastd paused for it, which resume when it is unlocked.
    case locked(pausedForLock: Set<UInt32>)

    var isLocked: Bool { self != .unlocked }

    func pausedForLock(_ broadcast: UInt32) -> Bool {
        if case .locked(let paused) = self { return paused.contains(broadcast) }
        return false
    }
}

/// Privacy on lock: while the session is locked no broadcast shows the screen. Broadcasts broadcastd paused
/// for the lock resume when it is unlocked; those the user paused stay paused.
extension DaemonCore {
    /// Reads the watcher after its descriptor became readable.
    func sessionLockChanged() {
        guard let sessionLock else { return }
        sessionLock.changed.acknowledge()
        let locked = sessionLock.locked
        guard locked != lockState.isLocked else { return }
        let before = lockState
        lockState = locked ? .locked(pausedForLock: []) : .unlocked
        let what =
            switch configuration.onLock {
            case .pause:
                locked ? ": live broadcasts pause until it is unlocked" : ": broadcasts paused for the lock resume"
            case .blank:
                locked
                    ? ": broadcasts show the privacy frame until it is unlocked" : ": broadcasts show the screen again"
            case .ignore: " (on-lock ignore)"
            }
        logger.notice("the session is \(locked ? "locked" : "unlocked")\(what)")
        if locked {
            enforceSessionLock()
        } else {
            for broadcast in broadcasts
            where before.pausedForLock(broadcast.id) && broadcast.isActive && broadcast.machine.wantsPaused {
                if case .failure(let refusal) = transition(broadcast, .resume) {
                    logger.debug("resume after unlock refused: \(refusal)")
                }
            }
        }
        updateStatus()
        for broadcast in broadcasts where broadcast.isActive {
            peers.publish(.json(.stateChanged, status(of: broadcast)))
        }
    }

    /// While locked, pauses every broadcast that is live or about to be (one started, or resumed, meanwhile).
    func enforceSessionLock() {
        capture?.live?.showPrivacyFrame(lockState.isLocked && configuration.onLock == .blank)
        guard case .locked(var paused) = lockState, configuration.onLock == .pause else { return }
        for broadcast in broadcasts
        where (broadcast.phase == .live || broadcast.phase == .starting) && !broadcast.machine.wantsPaused
            && !broadcast.isSharedEncoder
        {
            guard case .success = transition(broadcast, .pause) else { continue }
            paused.insert(broadcast.id)
            lockState = .locked(pausedForLock: paused)
            logger.info("broadcast \(broadcast.id) paused: the session is locked")
        }
    }

    /// A RESUME while the session is locked is refused (the screen would show the lock screen, or worse).
    func refuseResumeWhileLocked() -> BroadcastError? {
        guard lockState.isLocked, configuration.onLock == .pause else { return nil }
        return BroadcastError(
            .busy,
            "the session is locked: broadcasts stay paused until it is unlocked, then those paused for the lock resume")
    }

    /// The status fields of privacy on lock.
    func addPrivacy(to status: inout BroadcastStatus, of broadcast: Broadcast?) {
        guard lockState.isLocked else { return }
        status.sessionLocked = true
        if let broadcast, lockState.pausedForLock(broadcast.id) { status.pausedForLock = true }
        if let broadcast, configuration.onLock == .blank, broadcast.phase == .live { status.blankedForLock = true }
    }
}
