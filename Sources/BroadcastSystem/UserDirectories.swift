#if canImport(Glibc)
    import Glibc
#endif

/// The user's folders as xdg-user-dirs names them.
public enum UserDirectories {
    /// XDG_VIDEOS_DIR from the environment, else from `$XDG_CONFIG_HOME/user-dirs.dirs`, else `~/Videos`.
    public static func videos() -> String {
        let home = Environment.get("HOME") ?? "/tmp"
        if let videos = Environment.get("XDG_VIDEOS_DIR") { return videos }
        let config = Environment.get("XDG_CONFIG_HOME") ?? home + "/.config"
        return entry(file: config + "/user-dirs.dirs", key: "XDG_VIDEOS_DIR", home: home) ?? home + "/Videos"
    }

    /// `XDG_VIDEOS_DIR="$HOME/Videos"` lines as xdg-user-dirs writes them.
    public static func entry(file: String, key: String, home: String) -> String? {
        guard let bytes = try? FileSystem.readFile(file, limit: 64 << 10) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix(key + "=") {
            var value = Substring(line.dropFirst(key.count + 1))
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = value.dropFirst().dropLast() }
            return String(value.replacing("$HOME", with: home))
        }
        return nil
    }

    /// `text` with `$XDG_VIDEOS_DIR` as it resolves here: for prompts that name the default folder.
    public static func expanded(_ text: String) -> String {
        text.contains("$XDG_VIDEOS_DIR") ? text.replacing("$XDG_VIDEOS_DIR", with: videos()) : text
    }
}
