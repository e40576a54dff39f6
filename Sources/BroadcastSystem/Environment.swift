import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

public enum Environment {
    public static func get(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// An XDG base directory (`XDG_CONFIG_HOME`, `XDG_STATE_HOME`, ...) in `environment`: the variable when it
    /// is an absolute path (the specification ignores others), else `fallback` (e.g. ".config") under
    /// HOME; nil without either.
    public static func baseDirectory(_ variable: String, fallback: String, in environment: [String: String]) -> String?
    {
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
