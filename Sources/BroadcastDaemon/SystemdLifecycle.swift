import BroadcastSystem
import Logging

/// broadcastd as a systemd service (Type=notify): READY once it serves, STATUS= lines when what it does
/// changes, watchdog pings from the loop's own timer (a stuck loop stops pinging and is restarted),
/// STOPPING on shutdown. Without a notification socket it does nothing.
final class SystemdLifecycle {
    private let notifier: SystemdNotifier?
    private let logger: Logger
    /// When the next watchdog ping is due.
    private(set) var nextWatchdogAt: UInt64?
    /// The last STATUS= sent, so that an unchanged status is not sent again.
    private var lastStatus: String?
    /// Whether a notification failed already: said once, not at every watchdog ping.
    private var failed = false

    init(logger: Logger) throws(SystemError) {
        notifier = try SystemdNotifier()
        self.logger = logger
        if let notifier {
            logger.debug(
                "notifying systemd at \(notifier.destination)\(notifier.watchdogInterval.map { "; watchdog ping every \($0 / 1_000_000) ms" } ?? "")"
            )
        }
    }

    var isNotifying: Bool { notifier != nil }

    /// READY=1 and the first watchdog ping.
    func ready(now: UInt64) {
        notify("READY=1")
        if let interval = notifier?.watchdogInterval {
            notify("WATCHDOG=1")
            nextWatchdogAt = now + interval
        }
    }

    func stopping() {
        notify("STOPPING=1")
    }

    /// Pings the watchdog when due.
    func tick(now: UInt64) {
        if let at = nextWatchdogAt, now >= at, let interval = notifier?.watchdogInterval {
            notify("WATCHDOG=1")
            nextWatchdogAt = now + interval
        }
    }

    /// Sends STATUS= (what `systemctl --user status broadcastd` shows) when it changed.
    func status(_ text: @autoclosure () -> String) {
        guard notifier != nil else { return }
        let text = text()
        guard text != lastStatus else { return }
        lastStatus = text
        notify("STATUS=" + text)
    }

    private func notify(_ state: String) {
        guard let notifier else { return }
        do { try notifier.send(state) } catch {
            if !failed { logger.warning("could not notify systemd (\(state)): \(error)") }
            failed = true
        }
    }
}
