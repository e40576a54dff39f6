import BroadcastSystem
import Logging
import Synchronization

/// Tells the person at the screen that it is being captured: a desktop notification
/// (org.freedesktop.Notifications.Notify on the session bus) when capture starts, which stays until
/// capture stops and is then replaced by one that says so. Where there is no session bus or no
/// notification service, nothing is shown and the reason is logged at debug level.
///
/// The daemon's loop never waits for the bus: each event is queued and a background thread delivers
/// the queue in order (the thread holds `bus` while it talks; the loop only takes `queue`, briefly).
public final class DesktopNotifications: @unchecked Sendable {
    public enum Event: Equatable, Sendable {
        /// Capture began; `what` says what is captured (the source's description), `camera` the camera beside it.
        case started(String, camera: String?)
        /// The camera went away (`why`); the screen is still captured.
        case cameraLost(String)
        case stopped
    }

    private struct Bus {
        var connection: DBusConnection?
        /// The notification shown while capturing, which the next one replaces.
        var shown: UInt32 = 0
        /// It says the camera is captured.
        var camera = false
    }

    private let logger: Logger
    private let queue = Mutex<(events: [Event], delivering: Int)>(([], 0))
    private let bus = Mutex<Bus>(Bus())
    private let appName: String
    /// A notification service that does not answer within this long is given up on for this event.
    static let callTimeoutMilliseconds: Int32 = 2_000

    public init(appName: String = "broadcastd", logger: Logger) {
        self.appName = appName
        self.logger = logger
    }

    public func captureStarted(_ what: String, camera: String? = nil) { post(.started(what, camera: camera)) }
    public func cameraLost(_ why: String) { post(.cameraLost(why)) }
    public func captureStopped() { post(.stopped) }

    /// Queues `event` for the background thread; never blocks on the bus.
    public func post(_ event: Event) {
        queue.withLock {
            $0.events.append(event)
            $0.delivering += 1
        }
        do {
            try BackgroundThread.start { [self] in deliverQueued() }
        } catch {
            queue.withLock { $0.delivering -= 1 }
            logger.debug("no capture notification: \(error)")
        }
    }

    /// Waits up to `milliseconds` for the queued notifications to be delivered (broadcastd, before it exits).
    public func waitUntilDelivered(milliseconds: Int) {
        for _ in 0..<max(1, milliseconds / 10) where queue.withLock({ $0.delivering > 0 }) {
            MonotonicClock.sleep(nanoseconds: 10_000_000)
        }
    }

    private func deliverQueued() {
        bus.withLock { state in
            while let event = queue.withLock({ $0.events.isEmpty ? nil : $0.events.removeFirst() }) {
                deliver(event, &state)
            }
        }
        queue.withLock { $0.delivering -= 1 }
    }

    private func deliver(_ event: Event, _ state: inout Bus) {
        let (summary, body, expire): (String, String, Int32)
        switch event {
        case .started(let what, let camera):
            state.camera = camera != nil
            summary = camera == nil ? "Your screen is being captured" : "Your screen and camera are being captured"
            let also = camera.map { " and the camera \($0)" } ?? ""
            (body, expire) = ("broadcastd captures \(what)\(also). `broadcastctl stop --all` ends it.", 0)
        case .cameraLost(let why):
            // The notice that capture is on is replaced by one without the camera.
            guard state.shown != 0, state.camera else { return }
            state.camera = false
            summary = "Your screen is being captured"
            (body, expire) = ("The camera is no longer captured: \(why). `broadcastctl stop --all` ends it.", 0)
        case .stopped:
            guard state.shown != 0 else { return }  // nothing was shown (no service), so nothing to take back
            let (what, it) = state.camera ? ("Screen and camera", "the screen or the camera") : ("Screen", "the screen")
            (summary, body, expire) = ("\(what) capture stopped", "broadcastd no longer captures \(it).", -1)
        }
        do {
            guard DBusConnection.sessionBusExists else {
                return logger.debug(
                    "no capture notification (\(summary)): no session bus (DBUS_SESSION_BUS_ADDRESS is not set)")
            }
            if state.connection == nil { state.connection = try DBusConnection() }
            let service = "org.freedesktop.Notifications"
            let reply = try state.connection!.call(
                service, "/org/freedesktop/Notifications", service, "Notify",
                [
                    .string(appName), .uint32(state.shown), .string("media-record"), .string(summary), .string(body),
                    .strings([]), .options([("category", .string("device"))]), .int32(expire),
                ],
                timeoutMilliseconds: Self.callTimeoutMilliseconds)
            state.shown = event == .stopped ? 0 : reply.first?.uint32 ?? 0
            logger.debug("capture notification: \(summary)")
        } catch {
            // No session bus, or no notification service on it: capture goes on without the notice.
            if let name = error.name, ["Disconnected", "NoReply"].contains(name.split(separator: ".").last) {
                state.connection = nil
            }
            logger.debug("no capture notification (\(summary)): \(error)")
        }
    }
}
