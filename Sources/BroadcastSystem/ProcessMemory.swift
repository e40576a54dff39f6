#if canImport(Glibc)
    import Glibc
#endif

/// This process's memory, as the kernel counts it.
public enum ProcessMemory {
    /// Resident set size in bytes (/proc/self/statm), nil if it cannot be read.
    public static func residentBytes() -> Int? {
        guard let bytes = try? FileSystem.readFile("/proc/self/statm", limit: 4096) else { return nil }
        let fields = String(decoding: bytes, as: UTF8.self).split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// What is resident of the mappings that hold any of `regions` (/proc/self/smaps), bytes.
    public static func residentBytes(in regions: [(start: UInt, count: Int)]) -> Int {
        guard !regions.isEmpty, let bytes = try? FileSystem.readFile("/proc/self/smaps", limit: 16 << 20) else {
            return 0
        }
        var kilobytes = 0
        var counted = false
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            if let dash = line.firstIndex(of: "-"), let space = line.firstIndex(of: " "), dash < space,
                let start = UInt(line[..<dash], radix: 16),
                let end = UInt(line[line.index(after: dash)..<space], radix: 16)
            {
                counted = regions.contains { $0.start < end && $0.start + UInt($0.count) > start }
            } else if counted, line.hasPrefix("Rss:") {
                kilobytes += line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            }
        }
        return kilobytes << 10
    }

    /// Unmaps the pages of this process's code (every executable mapping of a file: its own binary and the
    /// libraries') that are resident now, so that only the code run from here on is resident again. Code is
    /// never written, so nothing is lost: a page used again is mapped again from the page cache. Start-up runs
    /// much code once (argument parsing, the configuration file, libraries' constructors), and the kernel maps
    /// the pages around every page touched (fault-around): an idle daemon would keep megabytes of code it
    /// never runs again. Returns the bytes of mappings released.
    @discardableResult
    public static func releaseIdleCode() -> Int {
        guard let bytes = try? FileSystem.readFile("/proc/self/maps", limit: 1 << 20) else { return 0 }
        var released = 0
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            // "start-end perms offset dev inode path": private, executable, not writable, and backed by a file.
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count == 6, fields[1] == "r-xp", fields[5].drop(while: { $0 == " " }).hasPrefix("/"),
                let dash = fields[0].firstIndex(of: "-"),
                let start = UInt(fields[0][..<dash], radix: 16),
                let end = UInt(fields[0][fields[0].index(after: dash)...], radix: 16),
                let address = UnsafeMutableRawPointer(bitPattern: start)
            else { continue }
            if madvise(address, Int(end - start), MADV_DONTNEED) == 0 { released += Int(end - start) }
        }
        return released
    }
}
