import BroadcastSystem

/// A handler's process as the daemon sees it: a `ChildProcess` in broadcastd, a stand-in in the tests of the core.
protocol HandlerProcess: AnyObject {
    var pid: Int32 { get }
    /// Readable once the process has exited; nil when there is nothing to watch (a stand-in is told when it exits).
    var exitDescriptor: Descriptor? { get }
    func send(signal: Int32)
    /// How it ended, once it has (it is reaped then); nil while it runs.
    func reap() -> ChildProcess.ExitStatus?
}

extension ChildProcess: HandlerProcess {
    var exitDescriptor: Descriptor? { pidDescriptor }
}

/// Starts a handler's process with `socket` as its descriptor 3 (`BROADCASTD_HANDLER_FD`).
protocol HandlerLauncher {
    func launch(
        path: String, arguments: [String], environment: [String: String],
        socket: Descriptor
    ) throws(SystemError) -> any HandlerProcess
}

/// Handlers as broadcastd runs them: processes leading a process group of their own (a terminal's Ctrl-C does not
/// reach them, and what they start ends with them), with descriptors 0 to 3 only.
struct ProcessLauncher: HandlerLauncher {
    func launch(
        path: String, arguments: [String], environment: [String: String],
        socket: Descriptor
    ) throws(SystemError) -> any HandlerProcess {
        try ChildProcess(
            path: path, arguments: arguments, environment: environment, passing: [(socket, 3)],
            ownProcessGroup: true)
    }
}
