import CCurl
import Foundation

/// What the endpoint answered to an offer.
public struct WHIPAnswer: Equatable, Sendable {
    public var sdp: String
    /// The session's URL (RFC 9725's "WHIP session"), to DELETE at the end; nil when the endpoint gave none.
    public var location: String?
    /// The ICE servers its `Link` headers named.
    public var iceServers: [ICEServer]
    /// The session's entity tag (`ETag`), which trickled candidates name (`If-Match`).
    public var etag: String?
}

/// What the endpoint did with trickled candidates.
public enum TrickleOutcome: Equatable, Sendable {
    case taken
    /// The endpoint takes no trickled candidates (RFC 9725 section 4.3.1): 405 (no PATCH at all), 422 (ICE restarts
    /// only), 501.
    case refused(status: Int)
    case failed(String)

    /// What the HTTP status of a trickle PATCH says.
    init(status: Int) {
        switch status {
        case 200..<300: self = .taken
        case 405, 422, 501: self = .refused(status: status)
        default: self = .failed("HTTP \(status)")
        }
    }
}

/// WHIP's HTTP side through libcurl: the offer POSTed (redirects followed, a POST kept a POST), the session DELETEd.
/// What comes back is bounded: 64 KiB of body, 64 headers of 8 KiB, 10 s for a POST (3 s for a DELETE), 5 redirects.
public final class WHIPClient: Sendable {
    static let maxBody = 64 << 10
    static let maxHeaders = 64

    /// The endpoint (http:// or https://); how errors name it (no secret); the bearer token.
    public let url: String
    public let displayURL: String
    private let token: String?

    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    public init(url: String, displayURL: String, token: String?) {
        self.url = url
        self.displayURL = displayURL
        self.token = token
    }

    /// POSTs `offer` (application/sdp) and returns the answer, or why the endpoint cannot be published to
    /// (`final` when trying again would not help: see `WHIP.refusal`).
    public func post(offer: String, connectedBefore: Bool) throws(WebRTCError) -> WHIPAnswer {
        let response = try perform(
            method: "POST", url: url, body: (type: "application/sdp", text: offer), extra: ["Accept: application/sdp"],
            timeout: 10)
        guard response.status == 201 || response.status == 200 else {
            throw WHIP.refusal(
                status: response.status, body: WHIP.excerpt(response.body), url: displayURL,
                hasToken: token != nil, connectedBefore: connectedBefore)
        }
        let type = response.header("content-type")?.lowercased() ?? ""
        let sdp = String(decoding: response.body, as: UTF8.self)
        guard type.hasPrefix("application/sdp") || sdp.hasPrefix("v=0") else {
            throw WebRTCError(
                "publish to \(displayURL)",
                "the WHIP endpoint answered \(type.isEmpty ? "no content type" : type), not an SDP answer")
        }
        let location = response.header("location").flatMap { WHIP.resolve($0, against: response.finalURL) }
        return WHIPAnswer(
            sdp: sdp, location: location, iceServers: WHIP.iceServers(fromLinks: response.headers("link")),
            etag: response.header("etag"))
    }

    /// Sends candidates gathered after the offer to the session at `location` (PATCH, a trickle ICE fragment:
    /// `WHIP.trickleFragment`), naming the session's entity tag when it gave one.
    public func trickle(_ fragment: String, to location: String, etag: String?) -> TrickleOutcome {
        do {
            let response = try perform(
                method: "PATCH", url: location, body: (type: "application/trickle-ice-sdpfrag", text: fragment),
                extra: etag.map { ["If-Match: \($0)"] } ?? [], timeout: 3)
            return TrickleOutcome(status: response.status)
        } catch {
            return .failed(error.reason)
        }
    }

    /// Ends the session at `location` (DELETE); nil when it went, else why not (in words, for a log).
    public func delete(_ location: String) -> String? {
        do {
            let response = try perform(method: "DELETE", url: location, body: nil, extra: [], timeout: 3)
            return (200..<300).contains(response.status) || response.status == 404 ? nil : "HTTP \(response.status)"
        } catch {
            return error.reason
        }
    }

    struct Response {
        var status: Int
        var finalURL: String
        var fields: [(name: String, value: String)]
        var body: [UInt8]

        func header(_ name: String) -> String? { fields.last { $0.name == name }?.value }
        func headers(_ name: String) -> [String] { fields.filter { $0.name == name }.map(\.value) }
    }

    /// What libcurl's callbacks gather: the last response's header fields (each redirect starts them anew) and body.
    final class Gathered {
        var fields: [(name: String, value: String)] = []
        var body: [UInt8] = []
        var tooLarge = false

        func header(_ line: String) {
            if line.hasPrefix("HTTP/") {
                fields = []
                return
            }
            guard let colon = line.firstIndex(of: ":"), fields.count < WHIPClient.maxHeaders else { return }
            fields.append(
                (
                    line[..<colon].trimmingCharacters(in: .whitespaces).lowercased(),
                    line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
                ))
        }
    }

    private func perform(
        method: String, url: String, body: (type: String, text: String)?, extra: [String], timeout: Int
    ) throws(WebRTCError) -> Response {
        let operation = "publish to \(displayURL)"
        guard Self.initialized, let curl = curl_easy_init() else {
            throw WebRTCError(operation, "libcurl could not be initialised")
        }
        defer { curl_easy_cleanup(curl) }
        var headers: UnsafeMutablePointer<curl_slist>?
        var lines = (body.map { ["Content-Type: \($0.type)"] } ?? []) + extra
        if let token { lines.append("Authorization: Bearer \(token)") }
        for line in lines { headers = curl_slist_append(headers, line) }
        defer { curl_slist_free_all(headers) }
        let gathered = Unmanaged.passRetained(Gathered())
        defer { gathered.release() }
        var errorText = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let https = self.url.hasPrefix("https://")
        let code: CURLcode = errorText.withUnsafeMutableBufferPointer { buffer in
            _ = ccurl_setopt_string(curl, CURLOPT_URL, url)
            _ = ccurl_setopt_string(curl, CURLOPT_PROTOCOLS_STR, https ? "https" : "http,https")
            _ = ccurl_setopt_string(curl, CURLOPT_REDIR_PROTOCOLS_STR, https ? "https" : "http,https")
            _ = ccurl_setopt_long(curl, CURLOPT_FOLLOWLOCATION, 1)
            _ = ccurl_setopt_long(curl, CURLOPT_MAXREDIRS, 5)
            // A 301/302/303 redirects the POST as a POST (RFC 9725 redirects with 307, which curl keeps anyway); the
            // token goes along, to where the endpoint itself sent us (over HTTPS only, for whips://).
            _ = ccurl_setopt_long(
                curl, CURLOPT_POSTREDIR, Int(CURL_REDIR_POST_301 | CURL_REDIR_POST_302 | CURL_REDIR_POST_303))
            _ = ccurl_setopt_long(curl, CURLOPT_UNRESTRICTED_AUTH, 1)
            if let body { _ = ccurl_setopt_string(curl, CURLOPT_COPYPOSTFIELDS, body.text) }
            if method != "POST" { _ = ccurl_setopt_string(curl, CURLOPT_CUSTOMREQUEST, method) }
            _ = ccurl_setopt_pointer(curl, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(headers))
            _ = ccurl_setopt_long(curl, CURLOPT_NOSIGNAL, 1)
            _ = ccurl_setopt_long(curl, CURLOPT_CONNECTTIMEOUT, min(5, timeout))
            _ = ccurl_setopt_long(curl, CURLOPT_TIMEOUT, timeout)
            _ = ccurl_setopt_pointer(curl, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(buffer.baseAddress!))
            _ = ccurl_setopt_pointer(curl, CURLOPT_HEADERDATA, gathered.toOpaque())
            _ = ccurl_setopt_write(curl, CURLOPT_HEADERFUNCTION) { data, size, count, context in
                let length = size * count
                guard let data, length <= 8192 else { return length }
                let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
                Unmanaged<Gathered>.fromOpaque(context!).takeUnretainedValue().header(line)
                return length
            }
            _ = ccurl_setopt_pointer(curl, CURLOPT_WRITEDATA, gathered.toOpaque())
            _ = ccurl_setopt_write(curl, CURLOPT_WRITEFUNCTION) { data, size, count, context in
                let length = size * count
                let gathered = Unmanaged<Gathered>.fromOpaque(context!).takeUnretainedValue()
                guard let data, gathered.body.count + length <= WHIPClient.maxBody else {
                    gathered.tooLarge = true
                    return 0  // ends the transfer
                }
                gathered.body += UnsafeRawBufferPointer(start: data, count: length)
                return length
            }
            return curl_easy_perform(curl)
        }
        let result = gathered.takeUnretainedValue()
        if result.tooLarge {
            throw WebRTCError(operation, "the WHIP endpoint's answer is larger than \(Self.maxBody >> 10) KiB")
        }
        guard code == CURLE_OK else {
            let detail = String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let reason = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
            let final = [
                CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT, CURLE_PEER_FAILED_VERIFICATION,
                CURLE_SSL_CACERT_BADFILE,
                CURLE_TOO_MANY_REDIRECTS,
            ].contains(code)
            throw WebRTCError(operation, "cannot reach the WHIP endpoint: \(reason)", final: final)
        }
        var status = 0
        _ = ccurl_response_code(curl, &status)
        var effective: UnsafeMutablePointer<CChar>?
        _ = ccurl_info_string(curl, CURLINFO_EFFECTIVE_URL, &effective)
        return Response(
            status: status, finalURL: effective.map { String(cString: $0) } ?? url, fields: result.fields,
            body: result.body)
    }
}
