import BroadcastConfig
import BroadcastDaemon
import BroadcastPortal
import Logging

extension DesktopNotifications: CaptureIndicator {}

extension BroadcastDaemonCommand {
    /// The desktop notifications that say the screen is captured, unless `notify = false`; none for the
    /// synthetic source, which captures no screen.
    func captureNotifications(_ source: String, _ settings: Configuration) -> DesktopNotifications? {
        guard settings.boolean("notify"), source != "synthetic" else { return nil }
        return DesktopNotifications(logger: Logger(label: "broadcastd.notify"))
    }
}
