import BroadcastSystem
import Logging
import Synchronization

/// Watches whether the desktop session is locked: logind's `LockedHint` on the user's session (system bus;
/// DBUS_SYSTEM_BUS_ADDRESS moves it, for tests) and the desktop's screensaver, `org.freedesktop.ScreenSaver`'s
/// `ActiveChanged` (session bus). Locked when either says so. A thread of its own talks D-Bus, so a bus that
/// hangs holds up no one; `changed` becomes readable when `locked` may have changed. Either bus may be missing
/// (a headless server, a desktop without a screensaver service): that one is then left out, with a notice.
public final class SessionLockWatcher: Sendable {
    public let changed: Wakeup
    private let state = Mutex(State())

    private struct State {
        var logind = false
        var screensaver = false
        var watching: [String] = []
    }

    static let loginService = "org.freedesktop.login1"
    static let sessionInterface = "org.freedesktop.login1.Session"
    static let screensaverService = "org.freedesktop.ScreenSaver"
    static let properties = "org.freedesktop.DBus.Properties"

    public init(logger: Logger) throws(SystemError) {
        changed = try Wakeup()
        try BackgroundThread.start { [self] in run(logger: logger) }
    }

    /// Whether the session is locked now (either watcher says so).
    public var locked: Bool { state.withLock { $0.logind || $0.screensaver } }

    /// What is watched, for the log and status: "logind session 2", "screensaver".
    public var watching: [String] { state.withLock { $0.watching } }

    private func update(_ change: (inout State) -> Void) {
        let (before, after) = state.withLock { state in
            let before = state.logind || state.screensaver
            change(&state)
            return (before, state.logind || state.screensaver)
        }
        if before != after { changed.signal() }
    }

    private func run(logger: Logger) {
        let logind = connectLogind(logger: logger)
        let screensaver = connectScreensaver(logger: logger)
        changed.signal()
        var buses = [logind, screensaver].compactMap { $0 }
        while !buses.isEmpty {
            for bus in buses {
                let signals: [DBusSignal]
                do { signals = try bus.connection.signals(timeoutMilliseconds: buses.count > 1 ? 100 : 500) } catch {
                    logger.warning("session lock: \(error); no longer watching \(bus.name)")
                    buses.removeAll { $0 === bus }
                    update { bus === logind ? ($0.logind = false) : ($0.screensaver = false) }
                    break
                }
                for signal in signals { handle(signal, from: bus, isLogind: bus === logind, logger: logger) }
            }
        }
    }

    private final class Bus {
        let connection: DBusConnection
        let name: String
        /// logind: the session's object path.
        let path: String
        init(_ connection: DBusConnection, _ name: String, _ path: String) {
            self.connection = connection
            self.name = name
            self.path = path
        }
    }

    private func handle(_ signal: DBusSignal, from bus: Bus, isLogind: Bool, logger: Logger) {
        if isLogind {
            guard signal.path == bus.path, signal.member == "PropertiesChanged",
                signal.arguments.first?.string == Self.sessionInterface
            else { return }
            let changedProperties = signal.arguments.count > 1 ? signal.arguments[1].dictionary ?? [:] : [:]
            let invalidated = signal.arguments.count > 2 ? signal.arguments[2].items ?? [] : []
            var value: Bool?
            if case .boolean(let hint)? = changedProperties["LockedHint"] {
                value = hint
            } else if invalidated.contains(.string("LockedHint")) {
                value = try? lockedHint(bus.connection, bus.path)
            }
            if let value {
                logger.info("session lock: logind says the session is \(value ? "locked" : "unlocked")")
                update { $0.logind = value }
            }
        } else if signal.member == "ActiveChanged", signal.interface == Self.screensaverService,
            case .boolean(let active)? = signal.arguments.first
        {
            logger.info("session lock: the screensaver is \(active ? "active" : "inactive")")
            update { $0.screensaver = active }
        }
    }

    private func lockedHint(_ connection: DBusConnection, _ path: String) throws(PortalError) -> Bool {
        let reply = try connection.call(
            Self.loginService, path, Self.properties, "Get",
            [.string(Self.sessionInterface), .string("LockedHint")], timeoutMilliseconds: 2000)
        guard case .boolean(let value)? = reply.first else {
            throw PortalError("read LockedHint", "logind's answer is not a boolean")
        }
        return value
    }

    /// The user's session in logind ("auto": this process's session, else the user's graphical one).
    private func connectLogind(logger: Logger) -> Bus? {
        do {
            let connection = try DBusConnection(system: true)
            let id = try connection.call(
                Self.loginService, "/org/freedesktop/login1/session/auto", Self.properties, "Get",
                [.string(Self.sessionInterface), .string("Id")], timeoutMilliseconds: 2000
            ).first?.string
            guard let id else { throw PortalError("find the session", "logind's answer has no session id") }
            guard
                let path = try connection.call(
                    Self.loginService, "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "GetSession",
                    [.string(id)], timeoutMilliseconds: 2000
                ).first?.string
            else {
                throw PortalError("find session \(id)", "logind's answer has no object path")
            }
            try connection.addMatch(
                "type='signal',sender='\(Self.loginService)',interface='\(Self.properties)',member='PropertiesChanged',path='\(path)'"
            )
            let locked = try lockedHint(connection, path)
            update {
                $0.logind = locked
                $0.watching.append("logind session \(id)")
            }
            logger.info("session lock: watching logind session \(id) (\(locked ? "locked" : "unlocked") now)")
            return Bus(connection, "logind", path)
        } catch {
            logger.notice("session lock: logind is not watched (\(error))")
            return nil
        }
    }

    private func connectScreensaver(logger: Logger) -> Bus? {
        guard DBusConnection.sessionBusExists else {
            logger.notice(
                "session lock: the screensaver is not watched (no session bus: DBUS_SESSION_BUS_ADDRESS is not set)")
            return nil
        }
        do {
            let connection = try DBusConnection()
            try connection.addMatch("type='signal',interface='\(Self.screensaverService)',member='ActiveChanged'")
            var active = false
            for path in ["/org/freedesktop/ScreenSaver", "/ScreenSaver"] {
                if case .boolean(let value)? = try? connection.call(
                    Self.screensaverService, path, Self.screensaverService, "GetActive",
                    timeoutMilliseconds: 2000
                ).first {
                    active = value
                    break
                }
            }
            update {
                $0.screensaver = active
                $0.watching.append("screensaver")
            }
            logger.info(
                "session lock: watching the screensaver's ActiveChanged (\(active ? "active" : "inactive") now)")
            return Bus(connection, "the screensaver", "")
        } catch {
            logger.notice("session lock: the screensaver is not watched (\(error))")
            return nil
        }
    }
}
