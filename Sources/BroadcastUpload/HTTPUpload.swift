import BroadcastCore
import BroadcastSystem
import Logging

/// The error type of BroadcastUpload: what failed, and why, in words a user can act on.
public struct UploadError: Error, CustomStringConvertible, Equatable, Sendable {
    public var operation: String
    public var reason: String
    public init(_ operation: String, _ reason: String) {
        self.operation = operation
        self.reason = reason
    }
    public var description: String { "\(operation): \(reason)" }
}

/// How an upload is going, for service info: reported at most once a second.
public struct UploadProgress: Equatable, Sendable {
    public var sentBytes: Int64
    public var totalBytes: Int64
    /// Averaged over the attempt so far, bytes per second.
    public var bytesPerSecond: Double
    /// At that rate; nil before a rate is known.
    public var secondsLeft: Double?
    /// 1 for the first try.
    public var attempt: Int
}

/// What an upload reports while it runs: about once a second, while sending and while waiting to retry.
public enum UploadStatus: Equatable, Sendable {
    case sending(UploadProgress)
    /// Attempt `attempt` failed for `reason`; the next begins in `seconds`.
    case waiting(attempt: Int, seconds: Double, reason: String)
}

/// What a finished upload did.
public struct UploadOutcome: Equatable, Sendable {
    public var url: String
    public var bytes: Int64
    public var attempts: Int
    public var seconds: Double
    /// The HTTP status of the successful PUT.
    public var status: Int
}

/// Sends a finished file to an HTTP(S) server with one PUT, through libcurl. A PUT cannot resume: HTTP
/// (RFC 9110, 14.5) has a server refuse a PUT with Content-Range, and nginx's WebDAV module does, so a
/// retry sends the whole file again. Failures worth retrying (the connection refused, reset or stalled for
/// `stallSeconds`; HTTP 408, 429, 5xx) are tried again after 1 s, doubling to at most 30 s, `attempts` times
/// in all; others (HTTP 4xx, a bad URL, a certificate that does not verify) end it at once.
public final class HTTPUpload {
    public struct Settings: Equatable, Sendable {
        public var url: String
        /// `Name: value` lines (an authorization token, say).
        public var headers: [String] = []
        public var attempts = 5
        public var firstBackoff = 1.0
        public var maxBackoff = 30.0
        /// An attempt whose transfer sends nothing for this long is given up (and retried).
        public var stallSeconds = 30
        /// Bytes per second; 0 for no limit.
        public var maxBytesPerSecond: Int64 = 0
        public init(url: String) { self.url = url }
    }

    /// A URL ending in `/` names a folder: the file goes in under its own name.
    public static func destination(_ url: String, fileName: String) -> String {
        guard url.hasSuffix("/") else { return url }
        var name = ""
        for byte in fileName.utf8 {
            let plain =
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || "-_.~".utf8.contains(byte)
            name +=
                plain
                ? String(UnicodeScalar(byte)) : "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
        }
        return url + name
    }

    private let settings: Settings
    private let logger: Logger

    public init(_ settings: Settings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// Uploads `path` to `settings.url`, reporting how it goes about once a second. Throws what failed, the last
    /// attempt's reason, once no retry is left or worth making.
    public func upload(_ path: String, report: @escaping (UploadStatus) -> Void) throws(UploadError) -> UploadOutcome {
        guard let size = FileSystem.size(of: path) else { throw UploadError("upload \(path)", "it cannot be read") }
        let started = MonotonicClock.seconds
        var backoff = settings.firstBackoff
        for attempt in 1...max(1, settings.attempts) {
            switch put(path, size: size, attempt: attempt, progress: { report(.sending($0)) }) {
            case .success(let status):
                return UploadOutcome(
                    url: settings.url, bytes: size, attempts: attempt,
                    seconds: MonotonicClock.seconds - started, status: status)
            case .failure(let failure):
                guard failure.retry, attempt < settings.attempts else {
                    let tries = attempt == 1 ? "" : " (after \(attempt) attempts)"
                    throw UploadError("upload \(path) to \(SecretURL.masked(settings.url))", failure.reason + tries)
                }
                logger.warning("upload: attempt \(attempt) failed: \(failure.reason); trying again in \(backoff) s")
                var left = backoff
                while left > 0 {
                    report(.waiting(attempt: attempt, seconds: left, reason: failure.reason))
                    MonotonicClock.sleep(nanoseconds: UInt64(min(left, 1) * 1e9))
                    left -= 1
                }
                backoff = min(backoff * 2, settings.maxBackoff)
            }
        }
        throw UploadError("upload \(path)", "no attempt was made")  // attempts >= 1: not reached
    }

    /// Progress bookkeeping for libcurl's callback: a report when the attempt begins, then once a second, the
    /// rate averaged over the attempt (libcurl sends in bursts, most of all when it keeps to a maximum rate).
    final class Meter {
        let attempt: Int
        let report: (UploadProgress) -> Void
        let started = MonotonicClock.seconds
        var lastReport: Double?
        init(attempt: Int, report: @escaping (UploadProgress) -> Void) {
            self.attempt = attempt
            self.report = report
        }

        func update(sent: Int64, total: Int64) {
            let now = MonotonicClock.seconds
            if let lastReport, now - lastReport < 1 { return }
            let rate = now > started ? Double(sent) / (now - started) : 0
            report(
                UploadProgress(
                    sentBytes: sent, totalBytes: total, bytesPerSecond: rate,
                    secondsLeft: rate > 0 ? Double(total - sent) / rate : nil, attempt: attempt))
            lastReport = now
        }
    }

    /// One PUT: the HTTP status on success.
    private func put(
        _ path: String, size: Int64, attempt: Int,
        progress: @escaping (UploadProgress) -> Void
    ) -> Result<Int, HTTPClient.Failure> {
        let file: Descriptor
        do {
            file = try FileSystem.openForReading(path)
        } catch {
            return .failure(.init(reason: "cannot read it: \(error.reason)", retry: false))
        }
        let client = HTTPClient()
        client.headers = settings.headers
        client.stallSeconds = settings.stallSeconds
        client.maxBytesPerSecond = settings.maxBytesPerSecond
        let meter = Meter(attempt: attempt, report: progress)
        return client.perform("PUT", settings.url, body: .file(file, size: size)) { sent, total in
            meter.update(sent: sent, total: total)
            return true
        }.mapError { failure in
            guard let status = failure.status else { return failure }
            let meaning = status == 401 || status == 403 ? " (check the URL and the token in uploadHeaders)" : ""
            return .init(
                reason: "the server answered \(failure.reason)\(meaning)", retry: failure.retry,
                status: status)
        }
    }
}
