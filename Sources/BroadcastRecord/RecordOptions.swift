import BroadcastCore
import BroadcastEncoding
import BroadcastHandlerKit
import BroadcastMedia
import BroadcastUpload
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The `record` handler's settings, from its broadcast URL and setup fields
/// (share/broadcastd/handlers/record.json lists them with their defaults).
@dynamicMemberLookup
package struct RecordOptions: Equatable {
    package typealias Invalid = SetupFieldError

    package var path: String
    package var container: Muxer.Container
    package var overwrite = false
    /// How the recording is encoded (its fields read as the options' own: `options.video`).
    package var encoding = EncodingOptions()
    /// Where the file goes when the recording is done (HTTP PUT); nil: nowhere.
    package var upload: HTTPUpload.Settings?

    package subscript<Value>(dynamicMember field: WritableKeyPath<EncodingOptions, Value>) -> Value {
        get { encoding[keyPath: field] }
        set { encoding[keyPath: field] = newValue }
    }

    /// `defaultPath` is where a broadcast without a URL goes.
    package init(url: String?, setupInfo: [String: String], defaultPath: () -> String) throws(Invalid) {
        let path: String
        if let url, !url.isEmpty {
            guard let file = FileURL.path(from: url) else {
                throw Invalid("'\(url)' is not a file: give a file:// URL or an absolute path ending in .mp4 or .mkv")
            }
            path = file
        } else {
            path = defaultPath()
        }
        let ext =
            path.split(separator: "/").last.flatMap { $0.contains(".") ? $0.split(separator: ".").last : nil }.map(
                String.init) ?? ""
        guard let container = Muxer.Container(fileExtension: ext) else {
            throw Invalid(
                "'\(path)': record writes .mp4 (fragmented MP4, playable even if recording stops abruptly) or .mkv (Matroska); name the file with one of these"
            )
        }
        self.path = path
        self.container = container

        var fields = setupInfo.filter { !$0.value.isEmpty }
        func take(_ key: String) -> String? { fields.removeValue(forKey: key) }
        overwrite = try EncodingOptions.flag(take("overwrite"), "overwrite")
        encoding = try EncodingOptions(taking: &fields)
        if encoding.camera == .track, container != .matroska {
            throw Invalid(
                "camera track: the camera's own video track goes into .mkv files (Matroska); name the file .mkv, "
                    + "or use camera=on (picture-in-picture)")
        }
        upload = try Self.upload(
            take("upload"), headers: take("uploadHeaders"),
            maxRate: EncodingOptions.integer("uploadMaxRate", take("uploadMaxRate"), 8...10_000_000, "kbit/s"),
            attempts: EncodingOptions.integer("uploadAttempts", take("uploadAttempts"), 1...20, "tries in all"))
        if let key = fields.keys.sorted().first { throw Invalid("unknown setup field '\(key)'") }
    }

    private static func upload(_ url: String?, headers: String?, maxRate: Int?, attempts: Int?) throws(Invalid)
        -> HTTPUpload.Settings?
    {
        guard let url else {
            if headers != nil || maxRate != nil || attempts != nil {
                throw Invalid("uploadHeaders, uploadMaxRate and uploadAttempts need upload")
            }
            return nil
        }
        let scheme = url.prefix { $0 != ":" }.lowercased()
        guard scheme == "http" || scheme == "https", url.dropFirst(scheme.count).hasPrefix("://"),
            url.count > scheme.count + 3
        else {
            throw Invalid(
                "upload '\(SecretURL.masked(url))': an http:// or https:// URL "
                    + "(ending in / to keep the file's name)")
        }
        var settings = HTTPUpload.Settings(url: url)
        if let headers {
            // One `Name: value`, or a JSON object of them ({"Authorization": "Bearer ...", "X-Team": "a"}).
            if headers.hasPrefix("{") {
                guard let fields = try? JSONDecoder().decode([String: String].self, from: Data(headers.utf8)) else {
                    throw Invalid("uploadHeaders: 'Name: value', or a JSON object of string values")
                }
                settings.headers = fields.keys.sorted().map { "\($0): \(fields[$0]!)" }
            } else {
                guard let colon = headers.firstIndex(of: ":"), colon != headers.startIndex else {
                    throw Invalid("uploadHeaders: 'Name: value', or a JSON object of string values")
                }
                settings.headers = [headers]
            }
        }
        if let maxRate { settings.maxBytesPerSecond = Int64(maxRate) * 1000 / 8 }
        if let attempts { settings.attempts = attempts }
        return settings
    }
}
