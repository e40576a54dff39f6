import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Logging

/// FINISH with `discard` (docs/protocol.md revision 1.2): which event it is, and what broadcastd removes itself
/// when the handler could not throw its output away (it crashed, was stopped, or had already exited).
enum DiscardedOutput {
    /// The event a FINISH asks for, or why it is refused: a discard of a broadcast whose handler does not say in
    /// its manifest that it can (`"discard": true`).
    static func event(for request: FinishRequest, manifest: HandlerManifest) -> Result<BroadcastEvent, BroadcastError> {
        guard request.discard == true else { return .success(.finish) }
        if manifest.discard != true {
            return .failure(
                BroadcastError(
                    .invalidRequest,
                    "handler '\(manifest.name)' cannot discard what it produced (its manifest "
                        + "does not say \"discard\": true); finish the broadcast with `broadcastctl stop`"))
        }
        return .success(.discard)
    }

    /// The file a handler reported as its own: `file` in its result, an absolute path. Never the broadcast URL: it
    /// may name a file the handler refused to overwrite, which is the user's, not the broadcast's.
    static func paths(result: [String: JSONValue]?) -> [String] {
        if case .string(let file)? = result?["file"], file.hasPrefix("/") { return [file] }
        return []
    }

    /// Removes what `paths` names, unless the handler's result says it discarded its output itself (`discarded: true`).
    static func remove(result: [String: JSONValue]?, logger: Logger) {
        if result?["discarded"] == .bool(true) { return }
        for path in paths(result: result) where FileSystem.exists(path) {
            FileSystem.remove(path)
            if FileSystem.exists(path) {
                logger.warning("discarded: could not remove \(path)")
            } else {
                logger.info("discarded: removed \(path), which the handler did not remove itself")
            }
        }
    }
}
