import BroadcastSystem
import Glibc
import Logging
import Synchronization

/// Where new PipeWire connections that show the allowed cameras come from.
public protocol CameraRemotes: Sendable {
    /// A new PipeWire connection, for pw_context_connect_fd: the caller's to close.
    func openRemote() throws(PortalError) -> Int32
}

/// xdg-desktop-portal's Camera (org.freedesktop.portal.Camera) on the session bus: IsCameraPresent, AccessCamera
/// (the camera dialog, or the permission the user gave before) and, once allowed, OpenPipeWireRemote: a PipeWire
/// connection that shows only the cameras. Each connection to PipeWire needs a remote of its own.
public final class CameraPortal: CameraRemotes, @unchecked Sendable {
    /// What the user reads when the camera is refused (the portal's response 1 or 2).
    public static let notAllowed = "the camera was not allowed"

    private let portal: PortalConversation
    private let bus = Mutex(())

    /// Asks for the camera; blocks until it is allowed, refused, withdrawn or `dialogTimeout` has passed.
    public init(cancellation: Cancellation, dialogTimeout: UInt64, logger: Logger) throws(PortalError) {
        portal = try PortalConversation(
            interface: "org.freedesktop.portal.Camera", dialog: "camera dialog",
            refused: Self.notAllowed + " (refused in the desktop portal's camera dialog)",
            ended: Self.endedWithoutAnswer)
        let present: Bool
        do {
            present = try portal.property("IsCameraPresent") != .boolean(false)
        } catch {
            if PortalConversation.isMissing(error) {
                throw PortalError(
                    "find the Camera portal",
                    "no xdg-desktop-portal with Camera on the session bus (\(error.reason)); install xdg-desktop-portal "
                        + "1.8 or later, or capture the screen with --pipewire-node (or X11) to take the camera directly"
                )
            }
            if PortalConversation.isSilent(error) {
                throw PortalError(
                    "ask the Camera portal",
                    "the desktop portal did not answer; `systemctl --user status xdg-desktop-portal` says why")
            }
            throw error
        }
        guard present else {
            throw PortalError("find a camera", "the desktop portal sees no camera (IsCameraPresent is false)")
        }
        _ = try portal.ask("AccessCamera", [], [], cancellation, timeout: dialogTimeout)
        logger.info("portal: the camera is allowed")
    }

    public func openRemote() throws(PortalError) -> Int32 {
        let answer = try bus.withLock { _ throws(PortalError) in try portal.call("OpenPipeWireRemote", [.options([])]) }
        guard case .descriptor(let fd)? = answer.first, fd >= 0 else {
            throw PortalError("open the camera's PipeWire remote", "the portal's answer has no descriptor")
        }
        return fd
    }

    /// Response 2: a permission the user gave before says no, or the portal could not ask.
    static func endedWithoutAnswer(_ code: UInt32) -> String {
        notAllowed + " (the desktop portal answered \(code): a permission refused before, which "
            + "`flatpak permission-reset` or the desktop's privacy settings undo, or no dialog could be shown; "
            + "journalctl --user -u xdg-desktop-portal says more)"
    }
}

/// The camera's grant for the daemon's life: asked of the Camera portal on a thread of its own (the dialog may stay
/// up for minutes; the daemon's loop goes on), once allowed kept, once refused asked again the next time.
public final class CameraGrant: Sendable {
    /// Asks for the camera, blocking until the answer.
    public typealias Ask = @Sendable () throws(PortalError) -> any CameraRemotes
    enum State: Sendable {
        case idle
        case asking
        case allowed(any CameraRemotes)
        case refused(PortalError)
    }
    private let state = Mutex(State.idle)
    private let ask: Ask
    private let logger: Logger

    /// `dialogTimeout`: how long the camera dialog may stay open before the request is withdrawn.
    public convenience init(logger: Logger, dialogTimeout: UInt64 = 300_000_000_000) {
        self.init(logger: logger) { () throws(PortalError) in
            try CameraPortal(cancellation: Cancellation(), dialogTimeout: dialogTimeout, logger: logger)
        }
    }

    public init(logger: Logger, ask: @escaping Ask) {
        self.logger = logger
        self.ask = ask
    }

    /// Asks the portal for the camera unless it is asked or allowed already; returns at once.
    public func request() {
        let idle = state.withLock { state -> Bool in
            switch state {
            case .asking, .allowed: return false
            case .idle, .refused:
                state = .asking
                return true
            }
        }
        guard idle else { return }
        do throws(SystemError) {
            try BackgroundThread.start { [self] in
                let answer: State
                do throws(PortalError) { answer = .allowed(try ask()) } catch {
                    logger.warning("camera: \(error.reason)")
                    answer = .refused(error)
                }
                state.withLock { $0 = answer }
            }
        } catch {
            state.withLock { $0 = .refused(PortalError("ask the Camera portal", error.description)) }
        }
    }

    /// A new PipeWire remote showing the allowed cameras, asking for them first when needed and waiting up to `wait`
    /// nanoseconds for the answer (a permission given before comes at once); nil while the dialog is still open.
    /// After a refusal the next call asks again.
    public func remote(wait: UInt64) throws(PortalError) -> Int32? {
        request()
        let deadline = MonotonicClock.now() + wait
        while true {
            switch state.withLock({ $0 }) {
            case .allowed(let remotes): return try remotes.openRemote()
            case .refused(let error): throw error
            case .idle, .asking:
                guard MonotonicClock.now() < deadline else { return nil }
                usleep(5_000)
            }
        }
    }
}
