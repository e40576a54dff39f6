import BroadcastSystem
import Glibc
import Logging
import Synchronization

/// The error type of BroadcastPortal: what failed in the conversation with the portal, and why.
public struct PortalError: Error, CustomStringConvertible, Sendable {
    public var operation: String
    public var reason: String
    /// The D-Bus error name, when the bus or the portal answered with one.
    public var name: String?
    /// The user closed the share dialog without choosing, or the request was withdrawn.
    public var cancelled = false

    public init(_ operation: String, _ reason: String, name: String? = nil, cancelled: Bool = false) {
        self.operation = operation
        self.reason = reason
        self.name = name
        self.cancelled = cancelled
    }

    public var description: String { "\(operation): \(reason)" }
}

/// What broadcastd asks the portal for.
public struct ScreenCastRequest: Sendable {
    /// Which kinds of source the share dialog offers (the portal's source types: 1 monitor, 2 window).
    public enum Sources: String, Sendable, CaseIterable {
        case monitor, window, any
        var mask: UInt32 { self == .monitor ? 1 : self == .window ? 2 : 3 }
    }
    /// How the pointer comes (the portal's cursor modes: 1 hidden, 2 embedded, 4 metadata).
    public enum Cursor: String, Sendable {
        case hidden, embedded, metadata
        var mask: UInt32 { self == .hidden ? 1 : self == .embedded ? 2 : 4 }
    }

    public var sources: Sources = .monitor
    public var cursor: Cursor = .embedded
    /// The token of the last session, which lets the portal skip the dialog (single use).
    public var restoreToken: String?
    /// How long the share dialog may stay open before the request is withdrawn.
    public var dialogTimeout: UInt64 = 300_000_000_000

    public init() {}
}

/// What the portal granted: a PipeWire connection that can see the shared stream, and the stream's node.
public struct ScreenCast: Sendable {
    /// A descriptor for pw_context_connect_fd; whoever connects with it owns it.
    public var remote: Int32
    /// The PipeWire node id of the shared stream.
    public var node: UInt32
    /// The stream's size as the portal reports it, when it does.
    public var width: Int?
    public var height: Int?
    /// The token for the next session (nil: the portal does not persist, or chose not to).
    public var restoreToken: String?
    /// True when the portal reused the previous grant without showing the dialog.
    public var persistence: Bool
    /// The cursor mode that was asked for (the requested one when the portal offers it).
    public var cursor: ScreenCastRequest.Cursor
}

/// A ScreenCast session of xdg-desktop-portal (org.freedesktop.portal.ScreenCast) on the session bus:
/// CreateSession, SelectSources, Start (the share dialog, skipped with a valid restore token) and
/// OpenPipeWireRemote. The session lasts as long as this object: `close` (or deinit) ends the share.
/// Every step waits for its Request's Response signal; `cancellation` withdraws the request in flight.
public final class ScreenCastPortal: @unchecked Sendable {
    private let portal: PortalConversation
    private var sessionPath: String?
    public private(set) var cast: ScreenCast?
    private let logger: Logger
    /// When the bus was last read for the session's Closed signal.
    private var checkedAt: UInt64 = 0
    private var ended = false

    /// Runs the whole flow; blocks until the share is granted, refused, withdrawn or timed out.
    public init(_ request: ScreenCastRequest, cancellation: Cancellation, logger: Logger) throws(PortalError) {
        self.logger = logger
        portal = try PortalConversation(
            interface: "org.freedesktop.portal.ScreenCast", dialog: "screen-share dialog",
            refused: "the user cancelled the screen-share dialog", ended: Self.endedWithoutAnswer)
        do {
            cast = try start(request, cancellation)
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// Ends the session: the portal stops the stream and takes back the PipeWire access. Sent without
    /// waiting for an answer, so a portal backend that hangs holds up neither a withdrawn START nor the loop.
    public func close() {
        guard let sessionPath else { return }
        self.sessionPath = nil
        try? portal.bus.send(PortalConversation.service, sessionPath, "org.freedesktop.portal.Session", "Close")
    }

    /// Whether the desktop has ended the share (the session's Closed signal: the user pressed "stop
    /// sharing", say). Reads the bus at most every 250 ms, without waiting.
    public func endedByTheDesktop() -> Bool {
        let now = MonotonicClock.now()
        guard !ended, let sessionPath, now - checkedAt >= 250_000_000 else { return ended }
        checkedAt = now
        guard let signals = try? portal.bus.signals(timeoutMilliseconds: 0) else {
            ended = true  // the bus went away, and the portal session with it
            return true
        }
        ended = signals.contains {
            $0.path == sessionPath && $0.interface == "org.freedesktop.portal.Session" && $0.member == "Closed"
        }
        return ended
    }

    private func start(_ request: ScreenCastRequest, _ cancellation: Cancellation) throws(PortalError) -> ScreenCast {
        let version: UInt32
        let sourceTypes: UInt32
        let cursorModes: UInt32
        do {
            version = try portal.property("version")?.uint32 ?? 1
            sourceTypes = try portal.property("AvailableSourceTypes")?.uint32 ?? 1
            cursorModes = try portal.property("AvailableCursorModes")?.uint32 ?? 0
        } catch {
            if PortalConversation.isMissing(error) {
                throw PortalError(
                    "find the ScreenCast portal",
                    "no xdg-desktop-portal with ScreenCast on the session bus (\(error.reason)); install xdg-desktop-portal and the backend for your desktop (-gnome, -kde or -wlr), or capture a node directly with --pipewire-node"
                )
            }
            if PortalConversation.isSilent(error) {
                // D-Bus started the portal (or found it running) and it never answered: a portal without a working
                // backend for this desktop hangs like this.
                throw PortalError(
                    "ask the ScreenCast portal",
                    "the desktop portal did not answer; is xdg-desktop-portal running with a "
                        + "backend for this desktop (-gnome, -kde or -wlr)? `systemctl --user status xdg-desktop-portal` says; "
                        + "or capture a node directly with --pipewire-node")
            }
            throw error
        }
        guard sourceTypes & request.sources.mask != 0 else {
            throw PortalError(
                "choose what to share",
                "the portal cannot share a \(request.sources.rawValue) (it offers source types \(sourceTypes)); set portal-source to one it offers"
            )
        }
        var cursor = request.cursor
        if cursorModes & cursor.mask == 0 {
            let fallback: ScreenCastRequest.Cursor = cursorModes & 2 != 0 ? .embedded : .hidden
            logger.warning(
                "the portal does not offer cursor mode \(cursor.rawValue) (it offers \(cursorModes)); using \(fallback.rawValue)"
            )
            cursor = fallback
        }
        try portal.bus.addMatch("type='signal',interface='org.freedesktop.portal.Session',member='Closed'")

        let created = try portal.ask(
            "CreateSession", [], [("session_handle_token", .string(portal.nextToken()))], cancellation,
            timeout: 10_000_000_000)
        guard let session = created["session_handle"]?.string else {
            throw PortalError("create a ScreenCast session", "the portal's answer has no session_handle")
        }
        sessionPath = session

        var options: [(String, DBusOption)] = [("types", .uint32(request.sources.mask)), ("multiple", .boolean(false))]
        if cursorModes != 0 { options.append(("cursor_mode", .uint32(cursor.mask))) }
        // Persistence came with version 4; an older portal refuses options it does not know.
        if version >= 4 {
            options.append(("persist_mode", .uint32(2)))
            if let token = request.restoreToken { options.append(("restore_token", .string(token))) }
        }
        _ = try portal.ask("SelectSources", [.objectPath(session)], options, cancellation, timeout: 10_000_000_000)

        let started = try portal.ask(
            "Start", [.objectPath(session), .string("")], [], cancellation, timeout: request.dialogTimeout)
        guard let stream = started["streams"]?.items?.first?.items, stream.count == 2, let node = stream[0].uint32
        else {
            throw PortalError("start the ScreenCast session", "the portal's answer has no stream")
        }
        let properties = stream[1].dictionary ?? [:]
        let size = properties["size"]?.items?.compactMap { $0.int32 }

        let remote = try portal.call("OpenPipeWireRemote", [.objectPath(session), .options([])])
        guard case .descriptor(let fd)? = remote.first, fd >= 0 else {
            throw PortalError("open the PipeWire remote", "the portal's answer has no descriptor")
        }
        let token = started["restore_token"]?.string
        logger.info(
            "portal: sharing PipeWire node \(node)\(size.map { " (\($0.map(String.init).joined(separator: "x")))" } ?? ""), portal version \(version), \(version >= 4 ? (token != nil ? "grant kept for next time" : "grant not kept") : "no persistence")"
        )
        return ScreenCast(
            remote: fd, node: node, width: size.flatMap { $0.count == 2 ? Int($0[0]) : nil },
            height: size.flatMap { $0.count == 2 ? Int($0[1]) : nil },
            restoreToken: token, persistence: version >= 4, cursor: cursor)
    }

    /// Response 2 ("the interaction was ended in some other way"): the portal gives no reason, its log does.
    static func endedWithoutAnswer(_ code: UInt32) -> String {
        "the desktop portal ended the request without an answer (response \(code)). Its log says why: "
            + "journalctl --user -u xdg-desktop-portal -u 'xdg-desktop-portal-*' (or the portal's standard error). "
            + "Common causes: no portal backend for this desktop, or one without ScreenCast (install "
            + "xdg-desktop-portal-gnome, -kde or -wlr to match it; -gtk has no ScreenCast), a backend that cannot "
            + "reach the compositor (XDG_CURRENT_DESKTOP or WAYLAND_DISPLAY not in the user's systemd environment), "
            + "or an invalid request"
    }
}

/// Set from another thread to withdraw a portal request in flight.
public final class Cancellation: Sendable {
    private let state = Mutex<String?>(nil)
    public init() {}
    public func cancel(_ reason: String) { state.withLock { if $0 == nil { $0 = reason } } }
    public var isCancelled: Bool { state.withLock { $0 != nil } }
    var reason: String { state.withLock { $0 ?? "withdrawn" } }
}

/// The restore token of the last ScreenCast session, kept in a file of its own (mode 0600) so the share
/// dialog does not come back every broadcast. A token is good for one session: each new one replaces it.
public struct RestoreTokenStore: Sendable {
    public let path: String

    public init(path: String) { self.path = path }

    /// The default place: $XDG_STATE_HOME/broadcastd/portal-restore-token (~/.local/state/...).
    public static func defaultPath(environment: [String: String]) -> String? {
        Environment.baseDirectory("XDG_STATE_HOME", fallback: ".local/state", in: environment).map {
            $0 + "/broadcastd/portal-restore-token"
        }
    }

    /// The kept token. One that is not a token at all (the portal takes only UUIDs, and refuses the whole
    /// request for anything else: "Restore token is not a valid UUID string") is removed, with a warning:
    /// the share dialog comes back once and the next session's token takes its place.
    public func load(logger: Logger) -> String? {
        guard FileSystem.exists(path) else { return nil }
        let token: String?
        do {
            let bytes = try FileSystem.readRegularFile(path, limit: 4096)
            token = String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isWhitespace).first.map(String.init)
        } catch {
            logger.warning("ignoring the portal's restore token: \(error); the share dialog will be shown")
            return nil
        }
        guard let token, Self.isValid(token) else {
            FileSystem.remove(path)
            let why = "it does not hold a portal restore token (a UUID); the share dialog will be shown"
            logger.warning("removed \(path): \(why)")
            return nil
        }
        return token
    }

    /// What xdg-desktop-portal accepts as a restore token: a UUID as text (8-4-4-4-12 hexadecimal digits).
    static func isValid(_ token: String) -> Bool {
        let bytes = Array(token.utf8)
        guard bytes.count == 36 else { return false }
        return bytes.enumerated().allSatisfy { index, byte in
            [8, 13, 18, 23].contains(index) ? byte == UInt8(ascii: "-") : Character(Unicode.Scalar(byte)).isHexDigit
        }
    }

    /// Stores `token`, or forgets the old one when there is none (a used token is no good).
    public func save(_ token: String?) throws(SystemError) {
        guard let token else { return FileSystem.remove(path) }
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try FileSystem.makeDirectories(String(path[..<slash]), mode: 0o700)
        }
        try FileSystem.writeFile(path, Array((token + "\n").utf8), mode: 0o600)
    }
}
