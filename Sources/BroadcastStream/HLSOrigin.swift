import BroadcastCore
import BroadcastUpload
import Foundation
import Logging

/// An HTTP(S) origin that HLS is published to (http[s]://HOST/PATH/NAME.m3u8), through libcurl (libavformat's http
/// throws the origin's answers away): the hls muxer writes each file (the init file, a segment, the playlist) into
/// memory, and `store` sends it with one PUT when the muxer closes it, before the muxer goes on, so that files reach
/// the origin in the muxer's order and a playlist names only segments that were stored; `remove` deletes an old
/// segment (DELETE, without a body: nginx's WebDAV refuses one with a body). It runs on the destination's sender
/// thread: a slow origin holds up that destination's queue only, which drops GOPs as it fills.
/// - 2xx: stored.
/// - The connection failing or stalling for 5 s, HTTP 408, 429 or 5xx: tried again after 0.5 s, doubling to 5 s,
///   `problem` saying so meanwhile (service info's lastError), for at most `reconnectFor` since a file was last
///   stored; then `refusal`. When the stream finishes, tries end at its deadline.
/// - Any other answer (403, 404, 413…): `refusal` at once, naming the file and the status; nothing more is sent.
/// - A DELETE that fails loses nothing: it is logged (once a minute at most) and is `problem` until a file is stored.
final class HLSOrigin: @unchecked Sendable {
    private let client = HTTPClient()
    private let reconnectFor: Double
    private let logger: Logger
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var problemText: String?
    private var retrying = false
    private var refusalText: String?
    /// When the stream finishes: tries end then (monotonic seconds).
    private var deadline: Double?
    /// Since when no file could be stored.
    private var failingSince: Double?
    private var failedDeletes = 0
    private var lastDeleteWarning: Double?

    init(reconnectFor: Double, logger: Logger) {
        self.reconnectFor = reconnectFor
        self.logger = logger
        client.connectSeconds = 5
        client.stallSeconds = 5
    }

    /// What goes wrong now, for service info, and whether a file is being tried again (the destination is away).
    var problem: (text: String, retrying: Bool)? {
        condition.lock()
        defer { condition.unlock() }
        return problemText.map { ($0, retrying) }
    }

    /// Why the origin is given up on, in the user's words; nil while it is not.
    var refusal: String? {
        condition.lock()
        defer { condition.unlock() }
        return refusalText
    }

    /// Tries end at `deadline` (the stream finishes): a request under way then is cut short.
    func finish(by deadline: DispatchTime) {
        condition.lock()
        self.deadline = Double(deadline.uptimeNanoseconds) / 1e9
        condition.broadcast()
        condition.unlock()
    }

    /// Stores `bytes` at `url` (PUT), trying again while that may help; false when it was not stored (`refusal`).
    func store(_ url: String, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var backoff = 0.5
        while refusal == nil {
            let result = client.perform("PUT", url, body: .bytes(bytes)) { [self] _, _ in !pastDeadline() }
            condition.lock()
            defer { condition.unlock() }
            guard case .failure(let failure) = result else {
                failingSince = nil
                problemText = nil
                retrying = false
                return true
            }
            let now = Self.now()
            let since = failingSince ?? now
            failingSince = since
            let file = Self.name(url)
            let answer = failure.reason + " for " + SecretURL.masked(url)
            if let deadline, now >= deadline {
                refusalText = "the HLS origin did not store \(file) before the stream finished: \(answer)"
            } else if !failure.retry {
                refusalText = "the HLS origin refused to store \(file): \(answer)" + Self.hint(failure.status)
            } else if now - since >= reconnectFor {
                refusalText = "the HLS origin did not store \(file) for \(Int(reconnectFor)) s: \(answer)"
            }
            if let refusalText {
                problemText = refusalText
                retrying = false
                return false
            }
            problemText = "the HLS origin did not store \(file): \(answer); trying again"
            retrying = true
            let more = Int(max(0, reconnectFor - (now - since)))
            logger.warning("stream: \(problemText!) in \(backoff) s (for \(more) s more)")
            // The last try falls on `reconnectFor` (or the deadline), not a backoff after it.
            let left = min(since + reconnectFor, deadline ?? .infinity) - now
            _ = condition.wait(until: Date().addingTimeInterval(min(backoff, max(0, left))))
            backoff = min(backoff * 2, 5)
        }
        return false
    }

    /// Deletes an old segment (DELETE); one that is gone already is fine, a failure only logged and reported.
    func remove(_ url: String) {
        guard refusal == nil else { return }
        let result = client.perform("DELETE", url) { [self] _, _ in !pastDeadline() }
        guard case .failure(let failure) = result, failure.status != 404, failure.status != 410 else { return }
        condition.lock()
        failedDeletes += 1
        problemText =
            "the HLS origin did not delete an old segment: \(failure.reason) for \(SecretURL.masked(url)) "
            + "(\(failedDeletes) left on it so far)"
        let now = Self.now()
        let warn = lastDeleteWarning.map { now - $0 >= 60 } ?? true
        if warn { lastDeleteWarning = now }
        let text = problemText!
        condition.unlock()
        if warn { logger.warning("stream: \(text); the stream goes on (warned about once a minute)") }
    }

    private func pastDeadline() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return deadline.map { Self.now() >= $0 } ?? false
    }

    /// The file as the user knows it: the playlist, the init file or a segment.
    static func name(_ url: String) -> String {
        let path = url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? url
        if path.hasSuffix(".m3u8") { return "the playlist" }
        if path.hasSuffix(".mp4") { return "the init file" }
        return "a segment"
    }

    /// What to check, for the answers that say something about the setup.
    static func hint(_ status: Int?) -> String {
        switch status {
        case 401, 403: " (check the URL, its credentials, and that the origin takes PUT there)"
        case 404, 409:
            " (the folder is not on the origin: make it, or have the origin make it, as nginx's "
                + "create_full_put_path does)"
        case 405, 501: " (the origin does not take PUT there: nginx's WebDAV takes it with dav_methods PUT DELETE)"
        case 413:
            " (larger than the origin takes: raise its limit, nginx's client_max_body_size, or lower " + "videoBitRate "
                + "or segmentDuration)"
        default: ""
        }
    }

    /// Monotonic seconds, as DispatchTime counts them.
    static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}
