import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with posix_spawn, watched through a pidfd (readable once it exits).
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    public let pidDescriptor: Descriptor
    public private(set) var exitStatus: ExitStatus?

    public enum ExitStatus: Equatable, Sendable, CustomStringConvertible {
        case exited(Int32)
        case signaled(Int32)

        public var description: String {
            switch self {
            case .exited(let code): return "exited with status \(code)"
            case .signaled(let signal):
                let name = Self.signalNames[signal].map { "SIG\($0)" } ?? "signal \(signal)"
                return "was killed by \(name)"
            }
        }

        public var succeeded: Bool { self == .exited(0) }

        private static let signalNames: [Int32: String] = [
            SIGHUP: "HUP", SIGINT: "INT", SIGQUIT: "QUIT", SIGILL: "ILL", SIGTRAP: "TRAP", SIGABRT: "ABRT",
            SIGBUS: "BUS", SIGFPE: "FPE", SIGKILL: "KILL", SIGSEGV: "SEGV", SIGPIPE: "PIPE", SIGTERM: "TERM",
        ]
    }

    /// Whether the child leads a process group of its own, which `send(signal:)` and `reap()` reach as a whole.
    public let leadsProcessGroup: Bool

    /// Starts `path` with `arguments` and `environment`. `passing` maps descriptors in this process to the
    /// numbers they get in the child (for example a socket to 3); the child gets those and 0, 1 and 2, and
    /// nothing else: every other descriptor is closed in it, even one this process inherited without
    /// close-on-exec. The child starts with default signal dispositions and mask. `ownProcessGroup`: the
    /// child leads a new process group (a terminal's Ctrl-C, sent to the foreground group, does not reach it),
    /// and what it starts is signalled with it and killed when it has exited.
    public init(
        path: String, arguments: [String], environment: [String: String], passing: [(Descriptor, Int32)] = [],
        ownProcessGroup: Bool = false
    ) throws(SystemError) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // A source that already sits on its target number would keep close-on-exec through dup2: move it first.
        var keepAlive: [Descriptor] = []
        for (fd, target) in passing {
            var source = fd.raw
            if source == target {
                let moved = try fd.duplicate()
                keepAlive.append(moved)
                source = moved.raw
            }
            posix_spawn_file_actions_adddup2(&actions, source, target)
        }
        // Then everything above 2 that is not a target is closed (close_range in the child).
        let targets = Set(passing.map(\.1))
        let firstUnused = max(3, (targets.max() ?? 0) + 1)
        for fd in 3..<firstUnused where !targets.contains(fd) { posix_spawn_file_actions_addclose(&actions, fd) }
        guard cbroadcast_spawn_add_closefrom(&actions, firstUnused) == 0 else {
            throw SystemError("posix_spawn_file_actions_addclosefrom_np", errno: Glibc.errno)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        var all = sigset_t()
        sigemptyset(&empty)
        sigfillset(&all)
        sigdelset(&all, SIGKILL)
        sigdelset(&all, SIGSTOP)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if ownProcessGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let rc = withExtendedLifetime(keepAlive) { posix_spawn(&child, path, &actions, &attributes, argv, envp) }
        guard rc == 0 else { throw SystemError("start \(path)", errno: rc) }
        pid = child
        leadsProcessGroup = ownProcessGroup
        let pidfd = cbroadcast_pidfd_open(child, 0)
        guard pidfd >= 0 else {
            let code = Glibc.errno
            kill(child, SIGKILL)
            var status: Int32 = 0
            waitpid(child, &status, 0)
            throw SystemError("pidfd_open \(child)", errno: code)
        }
        pidDescriptor = Descriptor(adopting: pidfd)  // pidfds are always close-on-exec
    }

    /// Reaps the child if it has exited; returns its status, or nil while it still runs. A child that led a
    /// process group takes what is left of the group with it (SIGKILL): nothing it started outlives it.
    @discardableResult
    public func reap() -> ExitStatus? {
        if let exitStatus { return exitStatus }
        if leadsProcessGroup, pidDescriptor.raw >= 0,
            let exited = try? Poller.wait([(pidDescriptor.raw, .readable)], timeoutMilliseconds: 0), exited[0].readable
        {
            // Until it is reaped, its pid (the group's id) cannot be reused: this reaches only its group.
            kill(-pid, SIGKILL)
        }
        var status: Int32 = 0
        let rc = waitpid(pid, &status, WNOHANG)
        guard rc == pid else { return nil }
        let signal = status & 0x7f
        exitStatus = signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
        pidDescriptor.close()  // nothing more to wait for or signal
        return exitStatus
    }

    /// Sends `signal` unless the child has been reaped (the pidfd makes this safe against pid reuse), and to
    /// its whole process group if it leads one (the unreaped child keeps the group's id from being reused).
    public func send(signal: Int32) {
        guard exitStatus == nil else { return }
        _ = cbroadcast_pidfd_send_signal(pidDescriptor.raw, signal)
        if leadsProcessGroup { kill(-pid, signal) }
    }

    /// Blocks until the child exits (used by tools and tests, never by the daemon's loop).
    public func wait() -> ExitStatus {
        while true {
            if let status = reap() { return status }
            _ = try? Poller.wait([(pidDescriptor.raw, .readable)], timeoutMilliseconds: -1)
        }
    }
}
