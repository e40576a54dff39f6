import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Logging

/// The handler SDK's error type.
public struct HandlerError: Error, CustomStringConvertible {
    public var operation: String
    public var reason: String
    public init(_ operation: String, _ reason: String) {
        self.operation = operation
        self.reason = reason
    }
    public var description: String { "\(operation): \(reason)" }
}

/// Subclass this to write a handler, as RPBroadcastSampleHandler is subclassed on iOS, then call
/// `runBroadcastHandler(YourHandler())` from `main`. Callbacks arrive one at a time on one thread;
/// do not block in them: while you are busy, broadcastd queues up to 1 MiB of sample messages for
/// you and drops (and counts) the rest.
open class BroadcastSampleHandler {
    /// Set before `broadcastStarted` is called.
    public internal(set) var broadcastID: UInt32 = 0
    public internal(set) var broadcastURL: String?
    public internal(set) var videoFormat = VideoFormat(width: 0, height: 0)
    /// NV12 and I420 frames use the full 0-255 range (`broadcastd --color-range full`), not BT.709's 16-235.
    public internal(set) var videoFullRange = false
    public internal(set) var audioFormat = AudioFormat()
    /// The capture frame rate: one video sample per `1/framesPerSecond` s (repeats included, unless
    /// the manifest asks for a variable frame rate).
    public internal(set) var framesPerSecond = 30
    /// The audio streams the capture source delivers (none for a source without audio).
    public internal(set) var audioStreams: [SampleType] = [.audioApp, .audioMic]
    public let logger: Logger
    var connection: PeerConnection?

    public init(logger: Logger = Logger(label: "broadcast-handler")) {
        self.logger = logger
    }

    open func broadcastStarted(withSetupInfo setupInfo: [String: String]) {}
    /// The buffer's memory is valid only until this returns.
    open func processSampleBuffer(_ sampleBuffer: SampleBuffer, with sampleBufferType: SampleType) {}
    open func broadcastPaused() {}
    open func broadcastResumed() {}
    /// The last callback: flush and close what you wrote. `error` says why, when the broadcast failed.
    /// It comes exactly once after `broadcastStarted`, also when broadcastd goes away mid-broadcast
    /// (killed: the error's code is `shutdown`); the process then exits 1.
    open func broadcastFinished(error: BroadcastError?) { broadcastFinished() }
    /// The last callback when the handler's manifest says `"discard": true`: with `discard`, the user threw the
    /// broadcast away (`broadcastctl discard`), so delete what it produced and say `discarded: true` in the result.
    /// Otherwise as `broadcastFinished(error:)`, which it calls.
    open func broadcastFinished(error: BroadcastError?, discard: Bool) { broadcastFinished(error: error) }
    open func broadcastFinished() {}
    /// The frame size or format changed; following video samples use `format`.
    open func broadcastVideoFormatChanged(_ format: VideoFormat) {}
    /// The pointer, when broadcastd runs with `--cursor metadata`: its position every frame,
    /// its image (`cursor.sprite`) only when it changed. Draw it, or not.
    open func processCursor(_ cursor: CursorSample) {}

    /// Ends the broadcast with `error`; every controller hears it as the finish reason.
    /// `broadcastFinished` follows.
    public final func finishBroadcastWithError(_ error: Error) {
        let message = "\(error)"
        try? connection?.send(.json(.finishWithError, HandlerFailure(message: message)))
    }

    /// Tells controllers the URL viewers use (ReplayKit's broadcastURL).
    /// At most 8 KiB, without control characters (broadcastd refuses others as a protocol violation: not sent).
    public final func updateBroadcastURL(_ url: String) {
        if let problem = HandlerManifest.urlProblem(url) {
            logger.error("broadcast URL not sent: \(problem)")
            return
        }
        broadcastURL = url
        try? connection?.send(.json(.updateURL, URLUpdate(broadcast: broadcastID, url: url)))
    }

    /// Free-form figures (bit rate, queue depth, ...) that controllers receive with the service info.
    /// Values are strings, numbers, bools or null: controllers show service info as one line, and
    /// broadcastd treats nested values as a protocol violation, so info holding them is not sent; nor is
    /// info of more than 64 keys or 16 KiB once encoded (it goes to every controller every second).
    public final func updateServiceInfo(_ info: [String: JSONValue]) {
        if let key = info.keys.sorted().first(where: { info[$0]!.isNested }) {
            logger.error("service info not sent: '\(key)' is an array or object; service info is flat")
            return
        }
        let message = Message.json(.updateServiceInfo, HandlerServiceInfo(info: info))
        do { _ = try HandlerServiceInfo.decodeWithinLimits(message) } catch {
            logger.error("service info not sent: \(error)")
            return
        }
        try? connection?.send(message)
    }

    /// What the broadcast produced (a recording's path, its duration, its segments): every controller
    /// receives it with the finish and in the finished broadcast's status. A later call replaces it; call
    /// it from `broadcastFinished` at the latest. Values may nest; at most 64 KiB once encoded, as
    /// broadcastd repeats it to every controller (a larger result is not sent).
    public final func setBroadcastResult(_ result: [String: JSONValue]) {
        guard let connection else { return }
        let message = Message.json(.setResult, HandlerResult(result: result))
        guard message.payload.count <= ProtocolLimits.maxResultPayload else {
            logger.error("broadcast result not sent: \(message.payload.count) bytes exceed the limit of \(ProtocolLimits.maxResultPayload)")
            return
        }
        try? connection.send(message)
    }
}
