import BroadcastConfig
import BroadcastDaemon
import BroadcastPortal
import Logging

extension DesktopNotifications: CaptureIndicator {}

extension BroadcastDaemonCommand {
    /// The desktop notifications that say the screen is captured, unless `notify = false` (the daemon does not
    /// announce the synthetic source, which captures no screen).
    func captureNotifications(_ settings: Configuration) -> DesktopNotifications? {
        guard settings.boolean("notify") else { return nil }
        return DesktopNotifications(logger: Logger(label: "broadcastd.notify"))
    }
}
