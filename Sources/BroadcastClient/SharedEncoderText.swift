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

    /// What one broadcast's status says of shared encoding: the encoder it shares, or whom it serves.
    public static func line(_ s: BroadcastStatus) -> String? {
        if let encoder = s.encoder { return "encoding: shared, by encoder \(encoder)" }
        if let serves = s.serves {
            return "shared encoder of: " + (serves.isEmpty ? "none" : serves.map(String.init).joined(separator: ", "))
        }
        return nil
    }
}
