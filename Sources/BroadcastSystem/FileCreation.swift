#if canImport(Glibc)
import Glibc
#endif

extension FileSystem {
    /// Creates the empty file `path` with `mode` where nothing is: an existing file, or a symbolic link (dangling
    /// or not, never followed), is an error (EEXIST) and is left as it is (O_CREAT|O_EXCL|O_NOFOLLOW).
    public static func createExclusively(_ path: String, mode: mode_t = 0o644) throws(SystemError) {
        Descriptor(adopting: try syscallRetrying("create \(path)") {
            open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        }).close()
    }

    /// Whether anything is at `path`: a symbolic link too, dangling or not (it is not followed).
    public static func entryExists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }
}
