import BroadcastCore
import Foundation

/// The error type of BroadcastWebRTC: what failed and why, in words a user can act on.
public struct WebRTCError: Error, CustomStringConvertible, Equatable, Sendable {
    public var operation: String
    public var reason: String
    /// Trying again cannot mend it (the endpoint refused the token, there is no such endpoint): the destination is
    /// given up at once instead of reconnected.
    public var final: Bool

    public init(_ operation: String, _ reason: String, final: Bool = false) {
        self.operation = operation
        self.reason = reason
        self.final = final
    }

    public var description: String { "\(operation): \(reason)" }
}

/// WHIP (RFC 9725): the endpoint's URL, what its answers mean, the ICE servers it names.
public enum WHIP {
    /// The HTTP(S) URL a `whips://HOST[:PORT]/PATH` (HTTPS) or `whip://HOST[:PORT]/PATH` (plain HTTP) names, without
    /// the user info, which is the bearer token when there is one (`whips://TOKEN@HOST/PATH`, for `also`).
    public static func endpoint(_ url: String) throws(WebRTCError) -> (http: String, token: String?) {
        let shown = SecretURL.masked(url)
        guard let separator = url.range(of: "://") else {
            throw WebRTCError("WHIP URL \(shown)", "it is whips://HOST/PATH")
        }
        let scheme = url[..<separator.lowerBound].lowercased()
        guard scheme == "whip" || scheme == "whips" else {
            throw WebRTCError(
                "WHIP URL \(shown)", "it is whips://HOST[:PORT]/PATH (HTTPS) or whip://HOST[:PORT]/PATH (HTTP)")
        }
        var rest = String(url[separator.upperBound...])
        let authorityEnd = rest.firstIndex { "/?#".contains($0) } ?? rest.endIndex
        var token: String?
        if let at = rest[..<authorityEnd].lastIndex(of: "@") {
            token = String(rest[..<at]).removingPercentEncoding ?? String(rest[..<at])
            rest.removeSubrange(...at)
        }
        let host = rest.prefix { !"/?#".contains($0) }
        guard !host.isEmpty, !host.hasPrefix(":") else { throw WebRTCError("WHIP URL \(shown)", "it names no host") }
        guard URL(string: "http://" + rest) != nil else {
            throw WebRTCError("WHIP URL \(shown)", "it is not a valid URL")
        }
        return ((scheme == "whips" ? "https://" : "http://") + rest, token.flatMap { $0.isEmpty ? nil : $0 })
    }

    /// The session's URL: the answer's `Location`, resolved against the URL the offer was finally POSTed to (after
    /// redirects); nil when there is none or it is not an HTTP(S) URL.
    public static func resolve(_ location: String, against base: String) -> String? {
        guard !location.isEmpty, let resolved = URL(string: location, relativeTo: URL(string: base))?.absoluteString,
            resolved.hasPrefix("http://") || resolved.hasPrefix("https://")
        else { return nil }
        return resolved
    }

    /// The ICE servers in `Link` header values (RFC 8288 links with rel="ice-server", RFC 9725 section 4.6): STUN and
    /// TURN URIs (RFC 7064, 7065) with their `username` and `credential`. Others are left out.
    public static func iceServers(fromLinks values: [String]) -> [ICEServer] {
        values.flatMap(links).compactMap { link -> ICEServer? in
            guard (link.parameters["rel"] ?? "").split(separator: " ").contains("ice-server") else { return nil }
            return try? ICEServer(
                link.target, username: link.parameters["username"], credential: link.parameters["credential"])
        }
    }

    /// The links of one `Link` value: `<target>; name="value"; name=value, <target>…`.
    static func links(_ value: String) -> [(target: String, parameters: [String: String])] {
        var result: [(String, [String: String])] = []
        var rest = Substring(value)
        while let open = rest.firstIndex(of: "<"), let close = rest[open...].firstIndex(of: ">") {
            let target = String(rest[rest.index(after: open)..<close])
            rest = rest[rest.index(after: close)...]
            var parameters: [String: String] = [:]
            // Parameters up to the next link: `;` separated, values maybe quoted (and holding `,` or `;`).
            while let first = rest.first(where: { !$0.isWhitespace }), first == ";" {
                rest = rest.drop { $0.isWhitespace || $0 == ";" }
                let name = rest.prefix { $0 != "=" && $0 != ";" && $0 != "," }.trimmingCharacters(in: .whitespaces)
                rest = rest.dropFirst(name.count).drop(while: \.isWhitespace)
                var parameter = ""
                if rest.first == "=" {
                    rest = rest.dropFirst().drop(while: \.isWhitespace)
                    if rest.first == "\"" {
                        rest = rest.dropFirst()
                        var escaped = false
                        while let character = rest.first {
                            rest = rest.dropFirst()
                            if escaped {
                                parameter.append(character)
                                escaped = false
                            } else if character == "\\" {
                                escaped = true
                            } else if character == "\"" {
                                break
                            } else {
                                parameter.append(character)
                            }
                        }
                    } else {
                        parameter = String(rest.prefix { $0 != ";" && $0 != "," }).trimmingCharacters(in: .whitespaces)
                        rest = rest.dropFirst(rest.prefix { $0 != ";" && $0 != "," }.count)
                    }
                }
                if !name.isEmpty { parameters[name.lowercased()] = parameter }
            }
            result.append((target, parameters))
        }
        return result
    }

    /// What an HTTP status other than 201 from the endpoint means, in the user's words; `final` when trying again
    /// cannot help. `body` is the endpoint's own words (cut short). `connectedBefore`: a 409 after this stream was live
    /// once is the endpoint still holding the session that was lost, which it lets go of in time.
    public static func refusal(status: Int, body: String, url: String, hasToken: Bool, connectedBefore: Bool)
        -> WebRTCError
    {
        let operation = "publish to \(url)"
        let said = body.isEmpty ? "" : " (it said: \(body))"
        switch status {
        case 401, 403:
            let reason =
                hasToken
                ? "the WHIP endpoint refused the token (HTTP \(status)): check the key setup field"
                : "the WHIP endpoint wants a token (HTTP \(status)): give it in the key setup field"
            return WebRTCError(operation, reason + said, final: true)
        case 404:
            return WebRTCError(
                operation, "there is no WHIP endpoint at this URL (HTTP 404): check the URL" + said, final: true)
        case 409:
            return WebRTCError(
                operation, "the WHIP endpoint is taken by another stream (HTTP 409 Conflict)" + said,
                final: !connectedBefore)
        case 400, 406, 415, 422:
            return WebRTCError(
                operation,
                "the WHIP endpoint refused the offer (HTTP \(status)); it may not take H.264 (constrained "
                    + "baseline) or Opus" + said, final: true)
        case 405:
            return WebRTCError(
                operation, "this URL takes no WHIP offers (HTTP 405): check that it is the WHIP endpoint" + said,
                final: true)
        case 300..<400:
            return WebRTCError(
                operation, "the WHIP endpoint redirected (HTTP \(status)) without a Location to go to" + said)
        default:
            return WebRTCError(operation, "the WHIP endpoint answered HTTP \(status)" + said)
        }
    }

    /// The candidates of `sdp` (our offer as webrtcbin has it now) that are not in `sent`, as a trickle ICE fragment
    /// (application/trickle-ice-sdpfrag, RFC 8840 as RFC 9725 section 4.3.1 uses it): the BUNDLE group, the first
    /// media section's m= line, mid and ICE credentials (everything is bundled on it), the new candidates, then
    /// `a=end-of-candidates` when gathering is `complete`. Nil when there is nothing to tell.
    public static func trickleFragment(_ sdp: String, sent: Set<String>, complete: Bool)
        -> (fragment: String, candidates: [String])?
    {
        var session: [String] = []
        var media: [String] = []
        var candidates: [String] = []
        var sections = 0
        for line in sdp.split(whereSeparator: \.isNewline).map(String.init) {
            if line.hasPrefix("m=") { sections += 1 }
            let credentials = line.hasPrefix("a=ice-ufrag:") || line.hasPrefix("a=ice-pwd:")
            if sections == 0 {
                if line.hasPrefix("a=group:BUNDLE") || credentials { session.append(line) }
            } else if sections == 1 {
                if line.hasPrefix("a=candidate:") {
                    if !sent.contains(line) { candidates.append(line) }
                } else if line.hasPrefix("m=") || line.hasPrefix("a=mid:") || credentials {
                    media.append(line)
                }
            }
        }
        guard sections > 0, !candidates.isEmpty || complete else { return nil }
        let lines = session + media + candidates + (complete ? ["a=end-of-candidates"] : [])
        return (lines.joined(separator: "\r\n") + "\r\n", candidates)
    }

    /// The candidate lines of the first media section of `sdp` (where a bundled offer has them all).
    public static func candidates(_ sdp: String) -> Set<String> {
        Set(trickleFragment(sdp, sent: [], complete: false)?.candidates ?? [])
    }

    /// An endpoint's words in an error: printable, one line, at most `limit` characters.
    public static func excerpt(_ body: [UInt8], limit: Int = 200) -> String {
        let text = String(decoding: body.prefix(limit * 4), as: UTF8.self)
        let line = String(text.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : Character($0) })
            .trimmingCharacters(in: .whitespaces)
        return line.count > limit ? String(line.prefix(limit)) + "…" : line
    }
}

/// A STUN or TURN server for ICE.
public struct ICEServer: Equatable, Sendable {
    public enum Kind: String, Sendable { case stun, turn, turns }
    public var kind: Kind
    public var host: String
    public var port: Int
    /// TURN: udp or tcp, when given.
    public var transport: String?
    public var username: String?
    public var credential: String?

    /// From `stun:HOST[:PORT]`, `turn(s):HOST[:PORT][?transport=udp|tcp]` (RFC 7064, 7065; `scheme://` is taken too)
    /// with the TURN credentials given apart, or from `turn(s)://USER:PASSWORD@HOST[:PORT]` as webrtcbin takes them.
    public init(_ text: String, username: String? = nil, credential: String? = nil) throws(WebRTCError) {
        let operation = "ICE server \(SecretURL.masked(text))"
        guard let colon = text.firstIndex(of: ":"), let kind = Kind(rawValue: text[..<colon].lowercased()) else {
            throw WebRTCError(operation, "it is stun:HOST[:PORT], turn:HOST[:PORT] or turns:HOST[:PORT]")
        }
        var rest = text[text.index(after: colon)...]
        if rest.hasPrefix("//") { rest = rest.dropFirst(2) }
        var transport: String?
        if let question = rest.firstIndex(of: "?") {
            for item in rest[rest.index(after: question)...].split(separator: "&")
            where item.lowercased().hasPrefix("transport=") {
                transport = item.dropFirst("transport=".count).lowercased()
            }
            rest = rest[..<question]
        }
        var user = username
        var password = credential
        if let at = rest.lastIndex(of: "@") {
            let info = rest[..<at]
            let parts = info.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            user = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            password = parts.count > 1 ? String(parts[1]).removingPercentEncoding ?? String(parts[1]) : nil
            rest = rest[rest.index(after: at)...]
        }
        var host = String(rest)
        var port = kind == .turns ? 5349 : 3478
        if let portColon = rest.lastIndex(of: ":"), !rest[portColon...].contains("]") {
            guard let number = Int(rest[rest.index(after: portColon)...]), (1...65535).contains(number) else {
                throw WebRTCError(operation, "its port is not a number from 1 to 65535")
            }
            port = number
            host = String(rest[..<portColon])
        }
        guard !host.isEmpty, !host.contains("/") else { throw WebRTCError(operation, "it names no host") }
        if transport != nil && transport != "udp" && transport != "tcp" {
            throw WebRTCError(operation, "transport is udp or tcp")
        }
        if kind != .stun && (user ?? "").isEmpty {
            throw WebRTCError(operation, "a TURN server needs a username and a password")
        }
        self.kind = kind
        self.host = host
        self.port = port
        self.transport = kind == .stun ? nil : transport
        self.username = kind == .stun ? nil : user
        self.credential = kind == .stun ? nil : password
    }

    /// As webrtcbin's `stun-server` and `add-turn-server` take it: `stun://HOST:PORT`,
    /// `turn(s)://USER:PASSWORD@HOST:PORT[?transport=…]`, the credentials percent-encoded.
    public var webrtcbinURI: String {
        func encoded(_ text: String) -> String {
            text.addingPercentEncoding(
                withAllowedCharacters: CharacterSet(
                    charactersIn:
                        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")) ?? text
        }
        let credentials = kind == .stun ? "" : encoded(username ?? "") + ":" + encoded(credential ?? "") + "@"
        return "\(kind.rawValue)://\(credentials)\(host):\(port)" + (transport.map { "?transport=\($0)" } ?? "")
    }

    /// How logs show it: no credentials.
    public var displayName: String { "\(kind.rawValue):\(host):\(port)" + (transport.map { "?transport=\($0)" } ?? "") }
}
