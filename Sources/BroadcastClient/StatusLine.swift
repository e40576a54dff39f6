import BroadcastCore
import BroadcastProtocol

/// The one line `broadcastctl status --watch` keeps up to date from a subscription's events: state,
/// broadcast, elapsed time, frame rate, the handler's bit rate, drops per stream, daemon memory, then
/// whatever else the handler reports.
public struct StatusLine: Sendable {
    private var status: BroadcastStatus?
    private var info: ServiceInfo?
    private var framesPerSecond: Double?

    public init() {}

    public mutating func update(_ status: BroadcastStatus) {
        if status.broadcast != info?.broadcast { (info, framesPerSecond) = (nil, nil) }
        self.status = status
    }

    public mutating func update(_ info: ServiceInfo) {
        // Over the last interval; the first time, since the start.
        let previous = self.info?.broadcast == info.broadcast ? self.info : nil
        let (then, since) = (previous?.streams["video"]?.delivered ?? 0, previous?.elapsed ?? 0)
        if let now = info.streams["video"]?.delivered, now >= then, info.elapsed > since {
            framesPerSecond = Double(now - then) / (info.elapsed - since)
        }
        self.info = info
    }

    public var text: String {
        guard let status else { return "connecting" }
        var parts = ["\(status.state)"]
        if let id = status.broadcast { parts.append("broadcast \(id)" + (status.handler.map { " (\($0))" } ?? "")) }
        if let error = status.error { parts.append("error: \(error.message)") }
        if let silent = status.silentAudio, !silent.isEmpty {
            parts.append("silent: " + silent.keys.sorted().map { $0 == "audioApp" ? "app audio" : $0 == "audioMic" ? "mic" : $0 }.joined(separator: ", "))
        }
        guard let info, info.broadcast == status.broadcast else { return parts.joined(separator: "  ") }
        parts.append(Self.clock(info.elapsed))
        if let framesPerSecond { parts.append(String(format1: framesPerSecond) + " fps") }
        var extras = info.handler ?? [:]
        if case .number(let kbps)? = extras.removeValue(forKey: "bitRate") { parts.append("\(Int(kbps)) kbit/s") }
        let drops = [("video", "video"), ("audioApp", "app"), ("audioMic", "mic")].compactMap { key, name in
            info.streams[key].map { "\(name) \($0.dropped)\(($0.late ?? 0) > 0 ? " (\($0.late!) late)" : "")" }
        }
        if !drops.isEmpty { parts.append("dropped " + drops.joined(separator: ", ")) }
        if let bytes = info.daemonMemory { parts.append("daemon " + String(format1: Double(bytes) / 1_048_576) + " MB") }
        parts += extras.sorted(by: { $0.key < $1.key }).map { "\($0.key) \($0.value)" }
        return parts.joined(separator: "  ")
    }

    /// m:ss.s, or h:mm:ss once past an hour.
    static func clock(_ seconds: Double) -> String {
        let tenths = Int((seconds * 10).rounded())
        let (h, m, s) = (tenths / 36000, tenths / 600 % 60, tenths % 600)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        if h > 0 { return "\(h):\(two(m)):\(two(s / 10))" }
        return "\(m):\(two(s / 10)).\(s % 10)"
    }
}

extension String {
    /// One decimal, without Foundation.
    init(format1 value: Double) {
        let tenths = Int((value * 10).rounded())
        self = "\(tenths < 0 ? "-" : "")\(abs(tenths) / 10).\(abs(tenths) % 10)"
    }
}
