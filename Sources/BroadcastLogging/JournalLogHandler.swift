import BroadcastSystem
import Logging

/// Log lines for journald: `<N>message`, N the syslog priority of the swift-log level, one write
/// per line. journald reads the prefix off the service's stderr stream (SyslogLevelPrefix=, on by
/// default) and files the line at that priority, so `journalctl -p warning` works; the journal
/// stamps time and unit itself, so neither is written.
public struct JournalLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    private let label: String

    public init(label: String) { self.label = label }

    /// swift-log's standard error handler, or this one when stderr is the journal's stream.
    public static func bootstrap(level: Logger.Level) {
        let journal = Systemd.standardErrorIsJournal()
        LoggingSystem.bootstrap { label in
            if journal {
                var handler = JournalLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// syslog priorities (sd-daemon(3)): 7 debug, 6 info, 4 warning, 3 error, 2 critical. notice is
    /// filed as info: broadcastd uses it for ordinary facts (no display, so the synthetic source).
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info, .notice: return 6
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    /// (swift-log's `log(event:)`: the older `log(level:message:…)` requirement is deprecated.)
    public func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let fields =
            all.isEmpty
            ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let prefix = "<\(Self.priority(event.level))>" + (label == "broadcastd" ? "" : "\(label): ")
        // A message of several lines stays one journal entry per line, each with its priority.
        let text = "\(event.message)".split(separator: "\n", omittingEmptySubsequences: false).map { prefix + $0 }
            .joined(separator: "\n")
        StandardError.write(text + fields + "\n")
    }
}
