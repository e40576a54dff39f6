import BroadcastProtocol

/// Revision 2.9: which broadcasts share which encoder, as `status` says it: "encoder 3: record (1), replay (2)".
public enum SharedEncoderText {
    /// A line for each shared encoder among `all` (a STATUS's broadcasts), naming the broadcasts it serves by their
    /// handlers.
    public static func lines(_ all: [BroadcastStatus]) -> [String] {
        let handlers = Dictionary(all.compactMap { s in s.broadcast.map { ($0, s.handler ?? "?") } }) { first, _ in
            first
        }
        return all.compactMap { s in
            guard let id = s.broadcast, let serves = s.serves else { return nil }
            let served = serves.map { "\(handlers[$0] ?? "broadcast") (\($0))" }
            return "encoder \(id): " + (served.isEmpty ? "serves none" : served.joined(separator: ", "))
        }
    }

    /// The broadcasts that finished, when nothing else runs (broadcastd is idle): a shared encoder that serves
    /// none any more is finishing after its last handler, not running for the user. nil: something runs.
    public static func finishedWhenIdle(_ all: [BroadcastStatus]) -> [BroadcastStatus]? {
        let finished = all.filter { $0.state == .finished }
        let windingDown = all.filter { $0.state != .finished && $0.serves?.isEmpty == true }
        guard !finished.isEmpty, finished.count + windingDown.count == all.count else { return nil }
        return finished
    }

    /// The broadcasts `stop --all` finishes: those that run, but for shared encoders, which broadcastd finishes
    /// after the last broadcast they serve (and refuses to finish when asked).
    public static func toStop(_ all: [BroadcastStatus]) -> [UInt32] {
        all.filter { ![.idle, .finished].contains($0.state) && $0.serves == nil }.compactMap(\.broadcast)
    }

    /// What one broadcast's status says of shared encoding: the encoder it shares, or whom it serves.
    public static func line(_ s: BroadcastStatus) -> String? {
        if let encoder = s.encoder { return "encoding: shared, by encoder \(encoder)" }
        if let serves = s.serves {
            return "shared encoder of: " + (serves.isEmpty ? "none" : serves.map(String.init).joined(separator: ", "))
        }
        return nil
    }
}
