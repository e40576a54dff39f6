import BroadcastEncoding

/// The `replay` handler's settings: how much it keeps (`length`, `maxMemory`) and, for the rest, the `record`
/// handler's (codec, quality, audio tracks, overwrite: share/broadcastd/handlers/replay.json lists them).
struct ReplayOptions {
    static let defaultLength: UInt64 = 30_000_000_000
    static let defaultMaxMemory = 256 << 20

    /// File time kept, ns (rounded up to whole GOPs).
    var length = Self.defaultLength
    /// Bytes of encoded packets kept at most.
    var maxMemory = Self.defaultMaxMemory
    /// `buffer=disk`: GOPs in a ring of files in $XDG_CACHE_HOME (bounded by `maxMemory` as well), not in memory.
    var onDisk = false
    /// Whether a save may replace a file that exists.
    var overwrite = false
    var encoding: EncodingOptions

    /// The longest buffer, in seconds.
    static let maxLength = 3600.0

    init(setupInfo: [String: String]) throws(SetupFieldError) {
        var rest = setupInfo.filter { !$0.value.isEmpty }
        if let text = rest.removeValue(forKey: "length") {
            guard let seconds = Double(text), seconds >= 1, seconds <= Self.maxLength else {
                throw SetupFieldError("length '\(text)': seconds to keep, 1-3600")
            }
            length = UInt64(seconds * 1e9)
        }
        if let text = rest.removeValue(forKey: "maxMemory") {
            guard let bytes = Self.bytes(text), bytes >= 64 << 10, bytes <= 64 << 30 else {
                throw SetupFieldError(
                    "maxMemory '\(text)': bytes of encoded video and audio kept, e.g. 256M or 2G (64K-64G)")
            }
            maxMemory = bytes
        }
        switch rest.removeValue(forKey: "buffer") {
        case nil, "memory": onDisk = false
        case "disk": onDisk = true
        case let other?:
            throw SetupFieldError(
                "buffer '\(other)': memory, or disk (a ring of files in $XDG_CACHE_HOME/broadcastd)")
        }
        // Where saves go is said with each save; the broadcast has no file of its own.
        overwrite = try EncodingOptions.flag(rest.removeValue(forKey: "overwrite"), "overwrite")
        encoding = try EncodingOptions(taking: &rest)
        if encoding.camera == .track {
            throw SetupFieldError(
                "camera track: the replay buffer keeps one video track; use on (picture-in-picture) or off")
        }
        if Self.uploadFields.contains(where: { rest[$0] != nil }) {
            throw SetupFieldError("replay does not upload; upload a saved file with the record handler's tools")
        }
        if let key = rest.keys.sorted().first { throw SetupFieldError("unknown setup field '\(key)'") }
    }

    /// The `record` handler's fields for uploading its file.
    static let uploadFields = ["upload", "uploadHeaders", "uploadMaxRate", "uploadAttempts"]

    /// `256M`, `2G`, `512K` or a number of bytes.
    static func bytes(_ text: String) -> Int? {
        let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        if let last = text.uppercased().last, let unit = units[last] {
            return Double(text.dropLast()).flatMap { $0 > 0 && $0 * Double(unit) < 1e15 ? Int($0 * Double(unit)) : nil }
        }
        return Int(text)
    }
}
