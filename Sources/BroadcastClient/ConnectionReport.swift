import BroadcastCore
import BroadcastProtocol

/// What `broadcastctl stream` says of each destination as it happens, from the stream handler's service info
/// (`connected`, `lastError`, `failed`; `alsoN.` before a further destination's, with its `url`): connected,
/// cannot connect and why, connection lost, given up. A line each time that changes, never one per update.
public struct ConnectionReport: Sendable {
    private struct Seen: Equatable, Sendable {
        var connected: Bool
        var error: String?
        var failed: String?
    }
    private var seen: [String: Seen] = [:]
    private var everConnected: Set<String> = []

    public init() {}

    /// The lines to print for `info`, the handler's newest service info.
    public mutating func update(_ info: [String: JSONValue]) -> [String] {
        let prefixes = info.keys.filter { $0.hasSuffix("connected") }.map { String($0.dropLast("connected".count)) }
        return prefixes.sorted { ($0.count, $0) < ($1.count, $1) }.flatMap { prefix -> [String] in
            guard case .bool(let connected)? = info[prefix + "connected"] else { return [] }
            let text = { (key: String) -> String? in if case .string(let s)? = info[prefix + key] { s } else { nil } }
            let now = Seen(connected: connected, error: text("lastError"), failed: text("failed"))
            let before = seen[prefix]
            seen[prefix] = now
            let to = text("url").map { " to \($0)" } ?? ""
            if let failed = now.failed { return before?.failed == nil ? ["stream: gave up: \(failed)"] : [] }
            if connected {
                if before?.connected == true { return [] }
                defer { everConnected.insert(prefix) }
                return ["stream: connected\(to)" + (everConnected.contains(prefix) ? " again" : "")]
            }
            guard let error = now.error, error != before?.error || before?.connected == true else { return [] }
            return before?.connected == true
                ? ["stream: connection\(to) lost: \(error); reconnecting"]
                : ["stream: cannot connect\(to): \(error); trying again"]
        }
    }
}
