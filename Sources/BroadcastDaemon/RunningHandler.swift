import BroadcastCore
import BroadcastSystem

/// The handler process broadcastd launched for the current broadcast.
final class RunningHandler {
    let process: ChildProcess
    let manifest: HandlerManifest
    /// The session of its connection; nil once that connection is closed.
    var sessionID: Int?
    var ready = false
    /// When to escalate: SIGTERM at `terminateAt`, SIGKILL at `killAt`.
    var terminateAt: UInt64?
    var killAt: UInt64?
    /// Set when broadcastd had to stop the handler because it did not finish in time.
    var stopReason: BroadcastError?
    /// Set when broadcastd stopped a handler that had not started yet: its signal death is no failure.
    var stoppedBeforeStart = false
    /// Since BROADCAST_FINISHED: the latest its finish timeout may be counted to while it reports progress.
    var workDeadline: UInt64?
    /// How long a handler that keeps reporting may work after BROADCAST_FINISHED (an upload): an hour.
    static let maxFinishWork: UInt64 = 3600 * 1_000_000_000

    /// Protocol revision 1.2: a finishing handler that reports has its finish timeout counted anew from `now`, up to
    /// `maxFinishWork` after BROADCAST_FINISHED; not once it is being stopped.
    func reported(now: UInt64, finishTimeout: UInt64) {
        guard let workDeadline, terminateAt != nil, killAt == nil else { return }
        terminateAt = min(now + finishTimeout, workDeadline)
    }

    init(process: ChildProcess, manifest: HandlerManifest) {
        self.process = process
        self.manifest = manifest
    }

    func terminate(now: UInt64) {
        process.send(signal: Signals.terminate)
        terminateAt = nil
        killAt = now + 2_000_000_000
    }

    func kill() {
        process.send(signal: Signals.kill)
        killAt = nil
    }
}
