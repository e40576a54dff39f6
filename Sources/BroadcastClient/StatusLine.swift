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
        let previous = self.info?.broadcast == info.broadcast ? self.info.flatMap(Self.frames) : nil
        let (then, since) = previous ?? (0, 0)
        if let (frames, time) = Self.frames(info), frames >= then, time > since {
            framesPerSecond = Double(frames - then) / (time - since)
        }
        self.info = info
    }

    /// The frames its handler took and when (s): the video delivered to it by the elapsed time, or (revision 2.9, a
    /// handler taking a shared encoder's packets, which gets no frames) those its file has by its time, as the
    /// handler reports them together (`videoFrames`, `recorded`).
    static func frames(_ info: ServiceInfo) -> (count: UInt64, time: Double)? {
        guard info.streams["encoded"] != nil else { return info.streams["video"].map { ($0.delivered, info.elapsed) } }
        guard case .number(let frames)? = info.handler?["videoFrames"], frames >= 0 else { return nil }
        if case .number(let time)? = info.handler?["recorded"] { return (UInt64(frames), time) }
        return (UInt64(frames), info.elapsed)
    }

    /// The most telling figures first, so that a narrow terminal drops only the least: state, broadcast, elapsed,
    /// size, drops, silent streams, errors, fps, bit rate; then daemon memory and the handler's other figures,
    /// each with its unit. A paused broadcast has no frame rate or bit rate to show.
    public var fields: [String] {
        guard let status else { return ["connecting"] }
        var parts = ["\(status.state)"]
        if let id = status.broadcast { parts.append("broadcast \(id)" + (status.handler.map { " (\($0))" } ?? "")) }
        let silent = (status.silentAudio ?? [:]).keys.sorted().map(SilenceWarning.name)
        let error = status.error.map { "error: \($0.message)" }
        guard let info, info.broadcast == status.broadcast else {
            return parts
                + [silent.isEmpty ? nil : "silent: " + silent.joined(separator: ", "), error].compactMap { $0 }
        }
        parts.append(Self.clock(info.elapsed))
        var extras = info.handler ?? [:]
        extras["recorded"] = nil  // the elapsed time, as the handler counts it
        extras["videoFrames"] = nil  // in the frame rate
        if case .number(let bytes)? = extras.removeValue(forKey: "bytes") ?? extras.removeValue(forKey: "bytesSent") {
            parts.append(ResultText.megabytes(bytes))
        }
        var drops = [("video", "video"), ("audioApp", "app"), ("audioMic", "mic")].compactMap { key, name -> String? in
            guard let counters = info.streams[key], counters.dropped > 0 else { return nil }
            return "\(name) \(counters.dropped)\((counters.late ?? 0) > 0 ? " (\(counters.late!) late)" : "")"
        }
        // A stream's frames dropped on the way out (a slow link) are drops too, so that the two counts agree.
        if case .number(let unsent)? = extras.removeValue(forKey: "droppedFrames"), unsent > 0 {
            drops.append("\(Int(unsent)) unsent")
        }
        parts.append(drops.isEmpty ? "no drops" : "dropped " + drops.joined(separator: ", "))
        if !silent.isEmpty { parts.append("silent: " + silent.joined(separator: ", ")) }
        if let error { parts.append(error) }
        let bitRate = extras.removeValue(forKey: "bitRate")
        if status.state != .paused {
            if let framesPerSecond { parts.append(String(format1: framesPerSecond) + " fps") }
            if case .number(let kbps)? = bitRate { parts.append("\(Int(kbps)) kbit/s") }
        }
        if let bytes = info.daemonMemory {
            parts.append("daemon " + String(format1: Double(bytes) / 1_048_576) + " MiB")
        }
        return parts + extras.sorted(by: { $0.key < $1.key }).map { Self.figure($0.key, $0.value) }
    }

    /// The whole line.
    public var text: String { fields.joined(separator: "  ") }

    /// The line in fewer than `columns` columns (so that it never wraps): the fields that fit, in the order of
    /// `fields`, each whole; a figure is never cut. Only the first (the state) is cut, on a terminal too narrow for it.
    public func fitted(columns: Int) -> String { Self.fit(fields, columns: columns) }

    static func fit(_ fields: [String], columns: Int) -> String {
        let room = max(columns - 1, 1)
        var kept: [String] = []
        var used = 0
        for field in fields {
            let width = (kept.isEmpty ? 0 : 2) + field.count
            if used + width <= room {
                kept.append(field)
                used += width
            }
        }
        return kept.isEmpty ? String((fields.first ?? "").prefix(room)) : kept.joined(separator: "  ")
    }

    /// A handler's figure with the unit its name tells (see `ResultText.value`).
    static func figure(_ key: String, _ value: JSONValue) -> String {
        "\(ResultText.label(key)) \(ResultText.value(key, value))"
    }

    /// m:ss.s, or h:mm:ss once past an hour.
    public static func clock(_ seconds: Double) -> String {
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
