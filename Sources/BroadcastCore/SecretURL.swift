/// URLs as they may be shown (revision 2.5): status, events, results, logs and errors never carry what gives access
/// to a stream. Masked with `***`: the user info (`rtmp://user:PASS@host` → `rtmp://***@host`), an RTMP URL's last
/// path element when it has an application before it (the stream key: `rtmp://host/live/KEY` →
/// `rtmp://host/live/***`), and the values of query parameters whose names say they are secret (`passphrase`, `streamid`, `key`, `token`, and
/// any name containing pass, secret, token, key, auth or sig). What has no scheme (a file path) is shown as it is.
public enum SecretURL {
    public static let mask = "***"
    static let secretNames = ["streamid", "pass", "secret", "token", "key", "auth", "sig"]

    public static func masked(_ url: String) -> String {
        guard let separator = url.firstRange(of: "://") else { return url }
        let scheme = url[..<separator.lowerBound].lowercased()
        let rest = url[separator.upperBound...]
        let queryStart = rest.firstIndex { $0 == "?" || $0 == "#" } ?? rest.endIndex
        let pathStart = rest[..<queryStart].firstIndex(of: "/") ?? queryStart
        var authority = String(rest[..<pathStart])
        if let at = authority.lastIndex(of: "@") { authority = mask + authority[at...] }
        var path = rest[pathStart..<queryStart].split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // "", the application, …, the key.
        if scheme.hasPrefix("rtmp"), path.count >= 3, !path[path.count - 1].isEmpty { path[path.count - 1] = mask }
        return url[..<separator.upperBound] + authority + path.joined(separator: "/") + maskedQuery(rest[queryStart...])
    }

    /// `text` with every URL in it masked (each ends before a space, a quote, or punctuation that ends it): a
    /// library's message that quotes one (libavformat's "Failed to open file 'http://user:PASS@…'").
    public static func maskedURLs(in text: String) -> String {
        guard text.contains("://") else { return text }
        return text.replacing(#/[A-Za-z][A-Za-z0-9+.\-]*://[^\s'"<>]*[^\s'"<>:;,.)]/#) { masked(String($0.output)) }
    }

    /// `?a=1&token=…#fragment` with the secret parameters' values masked (the fragment is left as it is).
    private static func maskedQuery(_ text: Substring) -> String {
        guard text.first == "?" else { return String(text) }
        let end = text.firstIndex(of: "#") ?? text.endIndex
        let query = text[text.index(after: text.startIndex)..<end]
        let items = query.split(separator: "&", omittingEmptySubsequences: false).map { item in
            guard let equals = item.firstIndex(of: "=") else { return String(item) }
            let name = item[..<equals].lowercased()
            return secretNames.contains { name.contains($0) } ? item[...equals] + mask : String(item)
        }
        return "?" + items.joined(separator: "&") + text[end...]
    }
}
