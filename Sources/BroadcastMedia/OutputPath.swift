import BroadcastEncoding
import BroadcastSystem

/// Where recordings go, and the checks made before the first byte is written, so that a wrong
/// path fails at the start with a message that says what to do.
package enum OutputPath {
    /// `$XDG_VIDEOS_DIR/FOLDER/<date>_<time>.mp4` (`UserDirectories.videos`): Broadcasts for recordings, Replays for
    /// saved replays.
    package static func defaultRecording(folder: String = "Broadcasts") -> String {
        UserDirectories.videos() + "/\(folder)/\(WallClock.local("%Y-%m-%d_%H-%M-%S")).mp4"
    }

    /// Checks that `path` can be created: its folder exists (or is created, for the default
    /// location) and is writable, and the file does not exist unless `overwrite`. `remedy` says how to replace an
    /// existing file.
    package static func prepare(
        _ path: String, overwrite: Bool, createDirectory: Bool,
        remedy: String = "--set overwrite=true"
    ) throws(MediaError) {
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        let folder = directory.isEmpty ? "/" : directory
        if createDirectory { try? FileSystem.makeDirectories(folder, mode: 0o755) }
        guard FileSystem.isDirectory(folder) else {
            throw MediaError(
                "cannot write \(path)", "the folder \(folder) does not exist: create it, or choose another file")
        }
        guard FileSystem.isWritable(folder) else {
            throw MediaError(
                "cannot write \(path)", "the folder \(folder) is not writable by this user: choose another file")
        }
        // A symbolic link, dangling or not, is a file that exists: what it points to is never created or written.
        if !overwrite && FileSystem.entryExists(path) { throw existing(path, remedy) }
    }

    /// Creates `path`, empty, for a file about to be written where nothing may be (not overwriting): a file or a
    /// symbolic link that is there is refused, and never followed (O_EXCL|O_NOFOLLOW). A folder can be writable by
    /// its mode and take no files (/proc, a read-only mount): that is found here too, before anything starts.
    package static func claim(_ path: String, remedy: String = "--set overwrite=true") throws(MediaError) {
        do { try FileSystem.createExclusively(path) } catch {
            throw error.fileExists
                ? existing(path, remedy)
                : MediaError("cannot write \(path)", "a file cannot be created there (\(error.reason))")
        }
    }

    private static func existing(_ path: String, _ remedy: String) -> MediaError {
        MediaError("cannot write \(path)", "the file exists and is kept: choose another name, or \(remedy)")
    }
}
