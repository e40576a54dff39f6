import BroadcastHandlerKit
import BroadcastUpload
import Logging

/// The record handler's upload when a recording is done: the file goes to the `upload` URL with HTTP PUT
/// (BroadcastUpload, libcurl) while the handler reports progress as service info at least once a second;
/// broadcastd counts its finish timeout from each report (protocol revision 1.2), so an upload may take as
/// long as it keeps going. The local file stays in every case.
struct RecordingUpload {
    var path: String
    var settings: HTTPUpload.Settings
    var logger: Logger

    /// What went up and where (for the result), or the error that says what failed.
    enum Outcome {
        case uploaded(url: String, fields: [String: JSONValue])
        case failed(String)
    }

    func run(report: @escaping ([String: JSONValue]) -> Void) -> Outcome {
        let name = String(path.split(separator: "/").last ?? "recording")
        var settings = settings
        settings.url = HTTPUpload.destination(settings.url, fileName: name)
        let shown = SecretURL.masked(settings.url)
        logger.info("record: uploading \(path) to \(shown)")
        do {
            let outcome = try HTTPUpload(settings, logger: logger).upload(path) { status in
                report(Self.serviceInfo(status))
            }
            logger.info(
                "record: uploaded \(outcome.bytes) bytes to \(shown) in \(outcome.seconds) s, \(outcome.attempts) attempt(s)"
            )
            report([
                "upload": .string("done"), "uploadedBytes": .number(Double(outcome.bytes)),
                "uploadBytes": .number(Double(outcome.bytes)),
            ])
            return .uploaded(
                url: shown,
                fields: [
                    "bytes": .number(Double(outcome.bytes)), "attempts": .number(Double(outcome.attempts)),
                    "seconds": .number((outcome.seconds * 100).rounded() / 100),
                    "httpStatus": .number(Double(outcome.status)),
                ])
        } catch {
            report(["upload": .string("failed"), "uploadError": .string(error.description)])
            return .failed("\(error); the recording stays in \(path)")
        }
    }

    /// Flat, as service info must be: state, bytes, rate (bytes/s), seconds left, attempt.
    static func serviceInfo(_ status: UploadStatus) -> [String: JSONValue] {
        switch status {
        case .sending(let p):
            return [
                "upload": .string("sending"), "uploadedBytes": .number(Double(p.sentBytes)),
                "uploadBytes": .number(Double(p.totalBytes)), "uploadRate": .number(p.bytesPerSecond.rounded()),
                "uploadETA": p.secondsLeft.map { .number(($0 * 10).rounded() / 10) } ?? .null,
                "uploadAttempt": .number(Double(p.attempt)),
            ]
        case .waiting(let attempt, let seconds, let reason):
            return [
                "upload": .string("waiting to retry"), "uploadAttempt": .number(Double(attempt)),
                "uploadRetryIn": .number(seconds.rounded()), "uploadError": .string(reason),
            ]
        }
    }
}
