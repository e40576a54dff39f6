import BroadcastSystem
import CCurl

/// Requests to HTTP(S) servers through one libcurl handle, whose connections are kept for the next request: a PUT
/// of a file or of bytes in memory, a DELETE without a body. What the server answers is read and dropped; its status
/// decides. Used from one thread at a time.
public final class HTTPClient {
    /// What a request sends.
    public enum Body {
        case none
        /// An open file, read from where it stands, `size` bytes.
        case file(Descriptor, size: Int64)
        /// Bytes in memory, valid for the request's time.
        case bytes(UnsafeRawBufferPointer)
    }

    /// Why a request failed.
    public struct Failure: Error, Equatable, Sendable {
        /// libcurl's message (the connection refused, a stall…), or the status as "HTTP 403 Forbidden".
        public var reason: String
        /// Whether trying again may mend it: the connection failing or stalling; HTTP 408, 429 and 5xx.
        public var retry: Bool
        /// The HTTP status, when the server answered.
        public var status: Int?
        public init(reason: String, retry: Bool, status: Int? = nil) {
            self.reason = reason
            self.retry = retry
            self.status = status
        }
    }

    /// `Name: value` lines sent with every request.
    public var headers: [String] = []
    public var connectSeconds = 10
    /// A transfer that moves nothing for this long is given up (and may be retried).
    public var stallSeconds = 30
    /// Bytes per second; 0 for no limit.
    public var maxBytesPerSecond: Int64 = 0

    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
    private let curl: UnsafeMutableRawPointer?

    public init() {
        curl = Self.initialized ? curl_easy_init() : nil
    }

    deinit { curl_easy_cleanup(curl) }

    /// "HTTP 403 Forbidden": the status with its name (RFC 9110, and 429 of RFC 6585, 507 of RFC 4918).
    public static func describe(status: Int) -> String {
        let names = [
            301: "Moved Permanently", 302: "Found", 307: "Temporary Redirect", 308: "Permanent Redirect",
            400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict", 410: "Gone",
            411: "Length Required", 413: "Content Too Large", 414: "URI Too Long",
            415: "Unsupported Media Type",
            429: "Too Many Requests", 500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
            503: "Service Unavailable", 504: "Gateway Timeout", 507: "Insufficient Storage",
        ]
        return "HTTP \(status)" + (names[status].map { " " + $0 } ?? "")
    }

    /// Whether a request answered `status` is worth making again: the server is busy or away for a while.
    public static func retries(status: Int) -> Bool { status == 408 || status == 429 || status >= 500 }

    /// Sends one request; the HTTP status on 2xx. `progress` is told the bytes sent and to send as it goes, and
    /// stops the request when it answers false.
    public func perform(
        _ method: String, _ url: String, body: Body = .none,
        progress: ((_ sent: Int64, _ total: Int64) -> Bool)? = nil
    ) -> Result<Int, Failure> {
        guard let curl else { return .failure(Failure(reason: "libcurl could not be initialised", retry: false)) }
        curl_easy_reset(curl)
        var list: UnsafeMutablePointer<curl_slist>?
        for header in headers { list = curl_slist_append(list, header) }
        defer { curl_slist_free_all(list) }
        var cursor = MemoryCursor()
        let watcher = progress.map { Unmanaged.passRetained(ProgressWatcher($0)) }
        defer { watcher?.release() }
        var errorText = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let code: CURLcode = errorText.withUnsafeMutableBufferPointer { buffer in
            withUnsafeMutablePointer(to: &cursor) { cursor in
                _ = ccurl_setopt_string(curl, CURLOPT_URL, url)
                _ = ccurl_setopt_string(curl, CURLOPT_PROTOCOLS_STR, "http,https")
                switch body {
                case .none:
                    if method != "GET" { _ = ccurl_setopt_string(curl, CURLOPT_CUSTOMREQUEST, method) }
                case .file(let file, let size):
                    upload(curl, method: method, size: size)
                    _ = ccurl_setopt_pointer(curl, CURLOPT_READDATA, Unmanaged.passUnretained(file).toOpaque())
                    _ = ccurl_setopt_write(curl, CURLOPT_READFUNCTION) { target, size, count, context in
                        let file = Unmanaged<Descriptor>.fromOpaque(context!).takeUnretainedValue()
                        let buffer = UnsafeMutableRawBufferPointer(start: target, count: size * count)
                        return (try? file.read(into: buffer)) ?? Int(CURL_READFUNC_ABORT)
                    }
                case .bytes(let bytes):
                    upload(curl, method: method, size: Int64(bytes.count))
                    cursor.pointee = MemoryCursor(bytes: bytes)
                    _ = ccurl_setopt_pointer(curl, CURLOPT_READDATA, UnsafeMutableRawPointer(cursor))
                    _ = ccurl_setopt_write(curl, CURLOPT_READFUNCTION) { target, size, count, context in
                        let cursor = context!.assumingMemoryBound(to: MemoryCursor.self)
                        return cursor.pointee.read(into: target!, count: size * count)
                    }
                }
                // The answer's body (an error page) is dropped: libcurl's default writes it to stdout.
                _ = ccurl_setopt_write(curl, CURLOPT_WRITEFUNCTION) { _, size, count, _ in size * count }
                _ = ccurl_setopt_pointer(curl, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list))
                _ = ccurl_setopt_long(curl, CURLOPT_NOSIGNAL, 1)
                _ = ccurl_setopt_long(curl, CURLOPT_CONNECTTIMEOUT, connectSeconds)
                _ = ccurl_setopt_long(curl, CURLOPT_LOW_SPEED_LIMIT, 1)
                _ = ccurl_setopt_long(curl, CURLOPT_LOW_SPEED_TIME, stallSeconds)
                if maxBytesPerSecond > 0 {
                    _ = ccurl_setopt_offset(curl, CURLOPT_MAX_SEND_SPEED_LARGE, curl_off_t(maxBytesPerSecond))
                }
                _ = ccurl_setopt_pointer(curl, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(buffer.baseAddress!))
                if let watcher {
                    _ = ccurl_setopt_long(curl, CURLOPT_NOPROGRESS, 0)
                    _ = ccurl_setopt_pointer(curl, CURLOPT_XFERINFODATA, watcher.toOpaque())
                    _ = ccurl_setopt_xferinfo(curl) { context, _, _, total, sent in
                        let watcher = Unmanaged<ProgressWatcher>.fromOpaque(context!).takeUnretainedValue()
                        return watcher.report(Int64(sent), Int64(total)) ? 0 : 1
                    }
                }
                return curl_easy_perform(curl)
            }
        }
        guard code == CURLE_OK else {
            let detail = String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let reason = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
            return .failure(Failure(reason: reason, retry: !Self.permanent.contains(code)))
        }
        var status = 0
        _ = ccurl_response_code(curl, &status)
        if (200..<300).contains(status) { return .success(status) }
        return .failure(
            Failure(
                reason: Self.describe(status: status), retry: Self.retries(status: status),
                status: status))
    }

    private func upload(_ curl: UnsafeMutableRawPointer, method: String, size: Int64) {
        _ = ccurl_setopt_long(curl, CURLOPT_UPLOAD, 1)
        _ = ccurl_setopt_offset(curl, CURLOPT_INFILESIZE_LARGE, curl_off_t(size))
        if method != "PUT" { _ = ccurl_setopt_string(curl, CURLOPT_CUSTOMREQUEST, method) }
    }

    /// curl errors a retry cannot mend (a request stopped by `progress` is one).
    static let permanent: Set<CURLcode> = [
        CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT,
        CURLE_PEER_FAILED_VERIFICATION,
        CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE,
        CURLE_LOGIN_DENIED, CURLE_READ_ERROR, CURLE_ABORTED_BY_CALLBACK,
    ]

    /// Bytes in memory as libcurl reads a body.
    private struct MemoryCursor {
        var bytes = UnsafeRawBufferPointer(start: nil, count: 0)
        var offset = 0

        mutating func read(into target: UnsafeMutablePointer<CChar>, count: Int) -> Int {
            let length = min(count, bytes.count - offset)
            guard length > 0, let base = bytes.baseAddress else { return 0 }
            UnsafeMutableRawPointer(target).copyMemory(from: base + offset, byteCount: length)
            offset += length
            return length
        }
    }

    private final class ProgressWatcher {
        let report: (Int64, Int64) -> Bool
        init(_ report: @escaping (Int64, Int64) -> Bool) { self.report = report }
    }
}
