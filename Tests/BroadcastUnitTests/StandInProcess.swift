import BroadcastSystem

@testable import BroadcastDaemon

/// A handler process that is not one, for the daemon's unit tests: it keeps the signals it is sent, and has exited
/// once the test says how.
final class StandInProcess: HandlerProcess {
    let pid: Int32
    private(set) var signals: [Int32] = []
    /// How it ended (nil: it runs).
    var exitStatus: ChildProcess.ExitStatus?

    init(pid: Int32) {
        self.pid = pid
    }

    var exitDescriptor: Descriptor? { nil }

    func send(signal: Int32) {
        if exitStatus == nil { signals.append(signal) }
    }

    func reap() -> ChildProcess.ExitStatus? { exitStatus }
}
