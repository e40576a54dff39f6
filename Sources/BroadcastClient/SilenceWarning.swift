/// The warning `start`, `record` and `stream` give for an audio stream that is silent: one short line each, with
/// broadcastd's cause and what leaves the stream out of this broadcast; nothing for a stream it does not take.
public enum SilenceWarning {
    /// `silent`: the status's silent streams with their causes; `audio`: the broadcast's `audio` setting ("app",
    /// "mic", "app,mic", "none"), nil when its handler has none or it is not known (every stream is said then).
    public static func lines(_ silent: [String: String], audio: String?) -> [String] {
        let taken = audio.map(streams(of:))
        let heard = silent.filter { taken?.contains($0.key) ?? true }
        return heard.sorted { $0.key < $1.key }.map { stream, cause in
            var remedy: String?
            if cause.hasPrefix("PipeWire cannot be reached") {
                remedy = "is PipeWire running? systemctl --user status pipewire"
            } else if let taken {
                let kept = ["audioApp": "app", "audioMic": "mic"]
                    .filter { taken.contains($0.key) && heard[$0.key] == nil }.map(\.value).sorted()
                let setting = kept.isEmpty ? "none" : kept.joined(separator: ",")
                remedy = "--set audio=\(setting) leaves \(heard.count == 1 ? "it" : "them") out"
            }
            return "warning: silent \(name(stream)): \(cause)" + (remedy.map { " (\($0))" } ?? "")
        }
    }

    /// The streams an `audio` setting takes.
    static func streams(of audio: String) -> Set<String> {
        var streams: Set<String> = []
        for part in audio.lowercased().split(separator: ",") {
            switch part.filter({ $0 != " " }) {
            case "app": streams.insert("audioApp")
            case "mic": streams.insert("audioMic")
            default: break
            }
        }
        return streams
    }

    /// "app audio", "mic".
    public static func name(_ stream: String) -> String {
        stream == "audioApp" ? "app audio" : stream == "audioMic" ? "mic" : stream
    }
}
