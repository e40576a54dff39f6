import BroadcastCore
import BroadcastSystem

/// Where broadcastd listens: `--socket`, else `$BROADCASTD_SOCKET`, else `$XDG_RUNTIME_DIR/broadcastd/broadcastd.sock`.
/// broadcastd, broadcastctl, broadcast-setup and handlers all resolve it the same way.
public enum SocketLocation {
    public static func resolve(explicit: String? = nil) throws(ProtocolError) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let path = Environment.get("BROADCASTD_SOCKET"), !path.isEmpty { return path }
        guard let runtime = Environment.get("XDG_RUNTIME_DIR"), !runtime.isEmpty else {
            throw .refused(
                BroadcastError(
                    .invalidRequest,
                    "XDG_RUNTIME_DIR is not set, so the socket cannot be found; set it, or pass --socket PATH or BROADCASTD_SOCKET"
                ))
        }
        return runtime + "/broadcastd/broadcastd.sock"
    }
}
