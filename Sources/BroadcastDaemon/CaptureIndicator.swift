import BroadcastCapture

/// Whoever should know when the screen (and the camera) starts and stops being captured: the person at it, through a
/// desktop notification (broadcastd gives the daemon BroadcastPortal's `DesktopNotifications`, unless
/// `notify = false`). Called on the daemon's loop, so it must not block: a D-Bus conversation goes to a
/// thread of its own.
public protocol CaptureIndicator: AnyObject {
    /// The shared capture began (the first broadcast went live); `what` is the source's description, `camera` the
    /// camera's (`NAME (DESCRIPTION, serial N)`) when one is captured beside the screen.
    func captureStarted(_ what: String, camera: String?)
    /// The camera went away mid-capture (`why`); the screen's capture goes on.
    func cameraLost(_ why: String)
    /// The capture ended (no broadcast is live any more). Said once per start; an extra call does nothing.
    func captureStopped()
}
