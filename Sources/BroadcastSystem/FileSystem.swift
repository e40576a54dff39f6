import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

public enum FileSystem {
    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// `path` from the current directory when it is relative ("~/" from HOME); unchanged when absolute or a URL.
    public static func absolutePath(_ path: String) -> String {
        if path.hasPrefix("/") || path.contains("://") { return path }
        if path == "~" || path.hasPrefix("~/"), let home = getenv("HOME") {
            return String(cString: home) + path.dropFirst()
        }
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

    /// Whether `path` is a directory (following symbolic links).
    public static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// Whether this user may write into `path` (access(2) W_OK).
    public static func isWritable(_ path: String) -> Bool { access(path, W_OK) == 0 }

    /// The size of the file at `path`, or nil when it cannot be read.
    public static func size(of path: String) -> Int64? {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : nil
    }

    /// Removes the file `path`; whether it is gone (it was not there, or it was removed).
    @discardableResult
    public static func removeFile(_ path: String) -> Bool {
        unlink(path) == 0 || Glibc.errno == ENOENT
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
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
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
    /// `path` opened for reading, close-on-exec.
    public static func openForReading(_ path: String) throws(SystemError) -> Descriptor {
        Descriptor(adopting: try syscallRetrying("open \(path)") { open(path, O_RDONLY | O_CLOEXEC) })
    }

    public static func readRegularFile(_ path: String, limit: Int) throws(SystemError) -> [UInt8] {
        let fd = Descriptor(
            adopting: try syscallRetrying("open \(path)") {
                open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
            })
        var info = stat()
        _ = try syscallRetrying("fstat \(path)") { fstat(fd.raw, &info) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw SystemError(
                "read \(path)", errno: EINVAL,
                explanation: "not a regular file (\(fileKind(info.st_mode)))")
        }
        guard info.st_size <= limit else {
            throw SystemError(
                "read \(path)", errno: EFBIG,
                explanation: "\(info.st_size) bytes, more than the \(limit) allowed")
        }
        var result: [UInt8] = []
        while result.count <= limit {  // it may grow while it is read
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
        let fd = Descriptor(
            adopting: try syscallRetrying("create \(temporary)") {
                open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
            })
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
        candidates += (Environment.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":").map {
            $0 + "/" + name
        }
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

extension FileSystem {
    /// Creates the empty file `path` with `mode` where nothing is: an existing file, or a symbolic link (dangling
    /// or not, never followed), is an error (EEXIST) and is left as it is (O_CREAT|O_EXCL|O_NOFOLLOW).
    public static func createExclusively(_ path: String, mode: mode_t = 0o644, contents: [UInt8] = [])
        throws(SystemError)
    {
        let fd = Descriptor(
            adopting: try syscallRetrying("create \(path)") {
                open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
            })
        defer { fd.close() }
        var written = 0
        while written < contents.count {
            let count = contents[written...].withUnsafeBytes { write(fd.raw, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw SystemError("write \(path)", errno: count < 0 ? errno : EIO) }
            written += count
        }
    }

    /// Whether anything is at `path`: a symbolic link too, dangling or not (it is not followed).
    public static func entryExists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }
}
