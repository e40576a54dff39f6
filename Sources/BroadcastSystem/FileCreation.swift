#if canImport(Glibc)
import Glibc
#endif

extension FileSystem {
    /// Creates the empty file `path` with `mode` where nothing is: an existing file, or a symbolic link (dangling
    /// or not, never followed), is an error (EEXIST) and is left as it is (O_CREAT|O_EXCL|O_NOFOLLOW).
    public static func createExclusively(_ path: String, mode: mode_t = 0o644, contents: [UInt8] = [])
        throws(SystemError) {
        let fd = Descriptor(adopting: try syscallRetrying("create \(path)") {
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
