import BroadcastCore
import CFFmpeg
import Logging

/// Sends libav's messages (libx264's and libavformat's among them) to swift-log instead of
/// stderr: warnings and errors only, everything else is libav chatter.
public enum MediaLog {
    nonisolated(unsafe) private static var logger = Logger(label: "libav")

    public static func install(_ logger: Logger) {
        Self.logger = logger
        av_log_set_level(AV_LOG_WARNING)
        av_log_set_callback { _, level, format, arguments in
            guard level <= AV_LOG_WARNING, let format, let arguments else { return }
            var line = [CChar](repeating: 0, count: 1024)
            var prefix: Int32 = 1
            av_log_format_line2(nil, level, format, arguments, &line, Int32(line.count), &prefix)
            // A URL a message quotes (a file the hls muxer could not open) is shown without its secrets.
            let decoded = String(decoding: line.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let text = SecretURL.maskedURLs(in: decoded.trimmingSuffix("\n"))
            guard !text.isEmpty else { return }
            if level <= AV_LOG_ERROR { MediaLog.logger.error("\(text)") } else { MediaLog.logger.warning("\(text)") }
        }
    }
}

extension String {
    func trimmingSuffix(_ suffix: Character) -> String {
        var text = self[...]
        while text.last == suffix { text = text.dropLast() }
        return String(text)
    }
}
