import BroadcastSystem
import Glibc

/// One interface of xdg-desktop-portal (org.freedesktop.portal.Desktop) on a session-bus connection of its own, and
/// what its ScreenCast and Camera conversations share: a method that answers through a Request (its Response signal,
/// matched by the handle_token sent), withdrawn when cancelled or when no answer comes in time; plain calls; and
/// the interface's properties.
final class PortalConversation {
    static let service = "org.freedesktop.portal.Desktop"
    static let objectPath = "/org/freedesktop/portal/desktop"
    /// How long the portal (started by D-Bus activation when it is not running) may take to say what it offers: more
    /// than xdg-desktop-portal's own 25 s wait for a backend that starts slowly (xdg-desktop-portal-wlr 0.7 can,
    /// its upstream issue 281), so that such a start succeeds late rather than fails.
    static let propertyTimeoutMilliseconds: Int32 = 30_000

    let bus: DBusConnection
    let interface: String
    /// What the user answers, for the errors: "the screen-share dialog", "the camera dialog".
    private let dialog: String
    /// Why a request was refused: the user's response 1 (cancelled), and the text for another code (2: "ended").
    private let refused: String
    private let ended: (UInt32) -> String
    private var tokens = 0

    init(
        interface: String, dialog: String, refused: String, ended: @escaping (UInt32) -> String
    ) throws(PortalError) {
        bus = try DBusConnection()
        (self.interface, self.dialog, self.refused, self.ended) = (interface, dialog, refused, ended)
        try bus.addMatch("type='signal',interface='org.freedesktop.portal.Request',member='Response'")
    }

    /// Calls a method that answers through a Request, and waits for the Response's results. Response 1 throws
    /// `refused` (marked cancelled), another code `ended(code)`.
    func ask(
        _ method: String, _ arguments: [DBusArgument], _ options: [(String, DBusOption)],
        _ cancellation: Cancellation, timeout: UInt64
    ) throws(PortalError) -> [String: DBusValue] {
        let handleToken = nextToken()
        let sender = String(bus.uniqueName.dropFirst().map { $0 == "." ? "_" : $0 })
        let expected = "\(Self.objectPath)/request/\(sender)/\(handleToken)"
        let reply = try call(method, arguments + [.options([("handle_token", .string(handleToken))] + options)])
        // Portals before 0.9 made up their own path; the one returned is the one that answers.
        let request = reply.first?.string ?? expected
        let deadline = MonotonicClock.now() + timeout
        while true {
            for signal in try bus.signals(timeoutMilliseconds: 100) where signal.path == request {
                guard signal.arguments.count == 2, let code = signal.arguments[0].uint32 else { continue }
                switch code {
                case 0: return signal.arguments[1].dictionary ?? [:]
                case 1: throw PortalError(method, refused, cancelled: true)
                default: throw PortalError(method, ended(code))
                }
            }
            let withdrawn = cancellation.isCancelled
            if withdrawn || MonotonicClock.now() > deadline {
                // Not waited for: whatever follows (a session's Close) goes at once, whether or not the portal answers.
                try? bus.send(Self.service, request, "org.freedesktop.portal.Request", "Close")
                throw withdrawn
                    ? PortalError(method, cancellation.reason, cancelled: true)
                    : PortalError(method, "no answer from the \(dialog) within \(timeout / 1_000_000_000) s")
            }
        }
    }

    /// Calls a method of the interface that answers at once.
    func call(_ method: String, _ arguments: [DBusArgument]) throws(PortalError) -> [DBusValue] {
        try bus.call(Self.service, Self.objectPath, interface, method, arguments)
    }

    /// The interface's property `name` (nil: not of the type asked for).
    func property(_ name: String) throws(PortalError) -> DBusValue? {
        try bus.call(
            Self.service, Self.objectPath, "org.freedesktop.DBus.Properties", "Get",
            [.string(interface), .string(name)],
            timeoutMilliseconds: Self.propertyTimeoutMilliseconds
        ).first
    }

    /// Whether `error` says there is no portal with this interface (none on the bus, or one without it).
    static func isMissing(_ error: PortalError) -> Bool {
        [
            "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.UnknownInterface",
            "org.freedesktop.DBus.Error.InvalidArgs", "org.freedesktop.DBus.Error.UnknownMethod",
        ].contains(error.name)
    }

    /// Whether `error` says the portal was found (or started) and never answered: one without a working backend.
    static func isSilent(_ error: PortalError) -> Bool {
        ["org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.TimedOut"].contains(error.name)
    }

    func nextToken() -> String {
        tokens += 1
        return "broadcastd_\(getpid())_\(tokens)"
    }
}
