#if canImport(Glibc)
import Glibc
#endif
import CBroadcastShims

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
    public init(path: String, arguments: [String], environment: [String: String], passing: [(Descriptor, Int32)] = [],
                ownProcessGroup: Bool = false) throws(SystemError) {
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
        var empty = sigset_t(), all = sigset_t()
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
        pidDescriptor = Descriptor(adopting: pidfd) // pidfds are always close-on-exec
    }

    /// Reaps the child if it has exited; returns its status, or nil while it still runs. A child that led a
    /// process group takes what is left of the group with it (SIGKILL): nothing it started outlives it.
    @discardableResult
    public func reap() -> ExitStatus? {
        if let exitStatus { return exitStatus }
        if leadsProcessGroup, pidDescriptor.raw >= 0,
           let exited = try? Poller.wait([(pidDescriptor.raw, .readable)], timeoutMilliseconds: 0), exited[0].readable {
            // Until it is reaped, its pid (the group's id) cannot be reused: this reaches only its group.
            kill(-pid, SIGKILL)
        }
        var status: Int32 = 0
        let rc = waitpid(pid, &status, WNOHANG)
        guard rc == pid else { return nil }
        let signal = status & 0x7f
        exitStatus = signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
        pidDescriptor.close() // nothing more to wait for or signal
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

/// Delivers SIGTERM/SIGINT/SIGHUP through a descriptor instead of asynchronous handlers.
public final class SignalDescriptor {
    public let descriptor: Descriptor

    public init(signals: [Int32]) throws(SystemError) {
        var set = sigset_t()
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        _ = try syscallRetrying("pthread_sigmask") { pthread_sigmask(SIG_BLOCK, &set, nil) == 0 ? 0 : -1 }
        descriptor = Descriptor(adopting: try syscallRetrying("signalfd") { signalfd(-1, &set, Int32(SFD_CLOEXEC | SFD_NONBLOCK)) })
    }

    /// The next pending signal number, if any.
    public func next() -> Int32? {
        var info = signalfd_siginfo()
        let n = Glibc.read(descriptor.raw, &info, MemoryLayout<signalfd_siginfo>.size)
        return n == MemoryLayout<signalfd_siginfo>.size ? Int32(info.ssi_signo) : nil
    }
}

public enum Signals {
    public static let interrupt = SIGINT
    public static let terminate = SIGTERM
    public static let kill = SIGKILL
    public static let hangUp = SIGHUP
    /// The terminal was resized.
    public static let windowChanged = SIGWINCH

    /// Ignores `signal` process-wide (SIGPIPE: writes to closed peers then fail with EPIPE instead of killing us).
    public static func ignore(_ signal: Int32) { Glibc.signal(signal, SIG_IGN) }
    public static func restoreDefault(_ signal: Int32) { Glibc.signal(signal, SIG_DFL) }
    public static func ignoreBrokenPipe() { ignore(SIGPIPE) }
}

public enum Environment {
    public static func get(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// An XDG base directory (`XDG_CONFIG_HOME`, `XDG_STATE_HOME`, ...) in `environment`: the variable when it
    /// is an absolute path (the specification ignores others), else `fallback` (e.g. ".config") under
    /// HOME; nil without either.
    public static func baseDirectory(_ variable: String, fallback: String, in environment: [String: String]) -> String? {
        if let value = environment[variable], value.hasPrefix("/") { return value }
        guard let home = environment["HOME"], !home.isEmpty else { return nil }
        return home + "/" + fallback
    }

    /// Removes `name`, so that programs this process starts do not inherit it.
    public static func unset(_ name: String) { unsetenv(name) }
    /// This process's id.
    public static var processID: Int32 { getpid() }
    /// Whether a process `pid` runs (one of another user's counts too).
    public static func isRunning(_ pid: Int32) -> Bool { pid > 0 && (kill(pid, 0) == 0 || errno == EPERM) }

    public static var all: [String: String] {
        var result: [String: String] = [:]
        var p = cbroadcast_environ()!
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") { result[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
            p += 1
        }
        return result
    }
}

public enum FileSystem {
    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// `path` from the current directory when it is relative ("~/" from HOME); unchanged when absolute or a URL.
    public static func absolutePath(_ path: String) -> String {
        if path.hasPrefix("/") || path.contains("://") { return path }
        if path == "~" || path.hasPrefix("~/"), let home = getenv("HOME") { return String(cString: home) + path.dropFirst() }
        guard let cwd = getcwd(nil, 0) else { return path }
        defer { free(cwd) }
        let directory = String(cString: cwd)
        let relative = path.hasPrefix("./") ? String(path.dropFirst(2)) : path
        return (directory == "/" ? "" : directory) + "/" + relative
    }
    public static func remove(_ path: String) { unlink(path) }
    /// A second name for the file at `path` (a hard link); whether it was made.
    public static func link(_ path: String, as name: String) -> Bool { Glibc.link(path, name) == 0 }
    /// Removes the empty directory `path`.
    public static func removeDirectory(_ path: String) { rmdir(path) }
    public static func isExecutable(_ path: String) -> Bool { access(path, X_OK) == 0 }

    /// Creates `path` and missing parents with `mode`.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o700) throws(SystemError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            prefix += "/" + part
            if mkdir(prefix, mode) != 0 && Glibc.errno != EEXIST {
                throw SystemError("mkdir \(prefix)", errno: Glibc.errno)
            }
        }
    }

    /// The names in a directory (without . and ..), or nil when it cannot be read.
    public static func list(_ path: String) -> [String]? {
        try? listing(path)
    }

    /// The names in folder `path`, or why it cannot be read.
    public static func listing(_ path: String) throws(SystemError) -> [String] {
        guard let dir = opendir(path) else { throw SystemError("open folder \(path)", errno: errno) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    public static func readFile(_ path: String, limit: Int = 1 << 20) throws(SystemError) -> [UInt8] {
        let fd = Descriptor(adopting: try syscallRetrying("open \(path)") { open(path, O_RDONLY | O_CLOEXEC) })
        var result: [UInt8] = []
        while result.count <= limit {
            let chunk = try fd.read(upTo: 65536)
            if chunk.isEmpty { return result }
            result += chunk
        }
        throw SystemError("read \(path): larger than \(limit) bytes", errno: EFBIG)
    }

    /// Reads the regular file at `path`, of at most `limit` bytes, without ever waiting: it is opened
    /// non-blocking and looked at (fstat) before anything is read, so a FIFO (which a plain open waits on
    /// for a writer), a device or a directory is refused at once, as is a larger file.
    public static func readRegularFile(_ path: String, limit: Int) throws(SystemError) -> [UInt8] {
        let fd = Descriptor(adopting: try syscallRetrying("open \(path)") {
            open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        })
        var info = stat()
        _ = try syscallRetrying("fstat \(path)") { fstat(fd.raw, &info) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw SystemError("read \(path)", errno: EINVAL,
                              explanation: "not a regular file (\(fileKind(info.st_mode)))")
        }
        guard info.st_size <= limit else {
            throw SystemError("read \(path)", errno: EFBIG,
                              explanation: "\(info.st_size) bytes, more than the \(limit) allowed")
        }
        var result: [UInt8] = []
        while result.count <= limit { // it may grow while it is read
            let chunk = try fd.read(upTo: min(65536, limit + 1 - result.count))
            if chunk.isEmpty { return result }
            result += chunk
        }
        throw SystemError("read \(path)", errno: EFBIG, explanation: "more than the \(limit) bytes allowed")
    }

    private static func fileKind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: return "a FIFO"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFDIR: return "a directory"
        case S_IFSOCK: return "a socket"
        default: return "mode \(String(mode, radix: 8))"
        }
    }

    /// Writes `bytes` to `path` atomically (a temporary file renamed over it).
    public static func writeFile(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o644) throws(SystemError) {
        let temporary = path + ".tmp-\(getpid())"
        let fd = Descriptor(adopting: try syscallRetrying("create \(temporary)") { open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode) })
        try fd.writeAll(bytes)
        _ = try syscallRetrying("fsync \(temporary)") { fsync(fd.raw) }
        fd.close()
        _ = try syscallRetrying("rename \(temporary) to \(path)") { rename(temporary, path) }
    }

    /// A program by bare name: next to the running executable first (an installed or built suite of
    /// programs finds its own), then on PATH.
    public static func findProgram(_ name: String) -> String? {
        var candidates: [String] = []
        if let exe = currentExecutable(), let slash = exe.lastIndex(of: "/") {
            candidates.append(String(exe[..<slash]) + "/" + name)
        }
        candidates += (Environment.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":").map { $0 + "/" + name }
        return candidates.first(where: isExecutable)
    }

    /// The absolute path of the running executable.
    public static func currentExecutable() -> String? { executable(of: "self") }

    /// The absolute path of process `pid`'s executable; nil when it cannot be read (gone, or another user's).
    public static func executable(ofProcess pid: Int32) -> String? { executable(of: "\(pid)") }

    private static func executable(of process: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/\(process)/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
