/// A length of time as people type it: `90` or `90s` (seconds), `10m`, `1h30m`, `1h2m3.5s`, `1.5h`.
/// Units come largest first, each at most once; the total is positive and under a million hours.
public struct DurationArgument: Equatable, Sendable, CustomStringConvertible {
    public let seconds: Double

    public init?(_ text: String) {
        var rest = Substring(text.trimmingWhitespace())
        guard !rest.isEmpty else { return nil }
        if let plain = Double(rest) {
            guard plain.isFinite, plain > 0, plain < 3.6e9 else { return nil }
            seconds = plain
            return
        }
        var total = 0.0
        var units: [(Character, Double)] = [("h", 3600), ("m", 60), ("s", 1)]
        while !rest.isEmpty {
            let number = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            rest = rest.dropFirst(number.count)
            guard !number.isEmpty, let value = Double(number), let unit = rest.first,
                let index = units.firstIndex(where: { $0.0 == Character(unit.lowercased()) })
            else { return nil }
            total += value * units[index].1
            units.removeFirst(index + 1)
            rest = rest.dropFirst()
        }
        guard total.isFinite, total > 0, total < 3.6e9 else { return nil }
        seconds = total
    }

    /// The typed form, largest units first: `1h30m`, `90s` is `1m30s`.
    public var description: String {
        let whole = seconds.rounded(.down)
        let fraction = seconds - whole
        let hours = Int(whole) / 3600
        let minutes = Int(whole) % 3600 / 60
        let rest = Double(Int(whole) % 60) + fraction
        var text = (hours > 0 ? "\(hours)h" : "") + (minutes > 0 ? "\(minutes)m" : "")
        if rest > 0 || text.isEmpty {
            text += rest == rest.rounded() ? "\(Int(rest))s" : "\(rest)s"
        }
        return text
    }
}

extension String {
    fileprivate func trimmingWhitespace() -> Substring {
        let start = firstIndex { !$0.isWhitespace } ?? endIndex
        let end = lastIndex { !$0.isWhitespace }.map(index(after:)) ?? start
        return self[start..<end]
    }
}
