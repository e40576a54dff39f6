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
    /// Revision 2.8: the camera's frame format, while its frames come (nil before the first and once it is lost).
    public internal(set) var cameraFormat: VideoFormat?
    /// Revision 2.6: the daemon's protocol revision ("2.6") and the features it offers, as its WELCOME announced them
    /// (set before `broadcastStarted`); nil from a daemon older than 2.6, which announces nothing.
    public internal(set) var daemonRevision: String?
    public internal(set) var daemonFeatures: Set<String>?
    /// Revision 2.9: the shared encoder's packet ring, once PACKET_RING mapped it (`processEncodedPacket`'s bytes).
    public internal(set) var packetRing: PacketRingReader?
    /// Its mapping, kept while the ring is read.
    var packetRingMemory: SharedMemory?
    /// READY went out; until then an ENCODE waits here (revision 2.9: it goes after READY).
    var readySent = false
    var pendingEncode: Message?
    /// ENCODE went out and ENCODING has not come: an `unsupported` ERROR (a daemon older than 2.9) answers it.
    var awaitingEncoding = false
    public let logger: Logger
    var connection: PeerConnection?

    /// Whether the daemon offers `feature` (`"commands"`, `"encoded-samples"`…, docs/protocol.md §7): nil when it
    /// announced no features (older than revision 2.6).
    public func daemonOffers(_ feature: String) -> Bool? {
        daemonFeatures.map { $0.contains(feature) }
    }

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
    /// Revision 2.8, for a handler whose manifest says `"camera": true` (or whose setup says `camera=on`) when the
    /// broadcast has a camera: its frames come as `videoCamera` samples in `format` from now on, or (`lost`, format
    /// nil) the camera went away and none come any more; the broadcast goes on. `camera` names it.
    open func cameraChanged(format: VideoFormat?, camera: String, lost: String?) {}
    /// Revision 2.9, after `requestEncoding`: `notice.encoder` is the encoder this handler shares, whose streams and
    /// packets follow (samples stop coming); with `notice.error` there is none, samples keep coming, and the handler
    /// encodes them itself.
    open func encodingAnswered(_ notice: EncodingNotice) {}
    /// Revision 2.9: the shared encoder's streams, once, before its first packet (`packetRing` is mapped by then).
    open func processEncodedStreams(_ streams: [EncodedStreamDescription]) {}
    /// Revision 2.9: one packet of the shared encoder; copy its bytes out of `packetRing` (`PacketRingReader.copy`),
    /// which says when the encoder wrote over them first (the handler fell a ring behind).
    open func processEncodedPacket(_ header: EncodedPacketHeader) {}
    /// Revision 2.9: the shared encoder's picture stood still through `time` (the encoder's time, ns).
    open func processPictureUnchanged(through time: Int64) {}
    /// Revision 2.10: how one audio stream of the shared encoder fared through its last packet (`AudioFigures`:
    /// totals of sound missing and dropped, and the largest clock offset since its last figures).
    open func processAudioFigures(_ figures: AudioFigures) {}
    /// Revision 2.9, for broadcastd's encoder: a handler it serves asked for a keyframe.
    open func keyframeRequested() {}
    /// The pointer, when broadcastd runs with `--cursor metadata`: its position every frame,
    /// its image (`cursor.sprite`) only when it changed. Draw it, or not.
    open func processCursor(_ cursor: CursorSample) {}
    /// Revision 2.3: a command from a controller (`broadcastctl send NAME KEY=VALUE…`), one that the manifest's
    /// `commands` lists, its arguments checked against it by broadcastd. Return the result for that controller, or
    /// throw: the error's text goes back to it. Called on the callback thread, between samples: answer quickly
    /// (broadcastd gives up after 10 s), or override `handleCommand(_:arguments:reply:)` to answer later.
    open func handleCommand(_ command: String, arguments: [String: JSONValue]) throws -> [String: JSONValue] {
        throw HandlerError(command, "this handler takes no commands")
    }
    /// The same, answered when `reply` is called (exactly once, from any thread): for work done on a thread of
    /// your own so that samples keep coming meanwhile. By default, `handleCommand(_:arguments:)` answers at once.
    open func handleCommand(_ command: String, arguments: [String: JSONValue], reply: CommandReply) {
        do { reply.send(try handleCommand(command, arguments: arguments)) } catch { reply.fail(error) }
    }

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
    /// broadcastd repeats it to every controller: from a larger result the largest values are left out until it
    /// fits, and `omitted` names them.
    public final func setBroadcastResult(_ result: [String: JSONValue]) {
        guard let connection else { return }
        try? connection.send(Self.resultMessage(result, logger: logger))
    }

    static func resultMessage(_ result: [String: JSONValue], logger: Logger) -> Message {
        var kept = result
        var omitted: [String] = []
        var message = Message.json(.setResult, HandlerResult(result: kept))
        func size(_ entry: (key: String, value: JSONValue)) -> Int { compactJSON(entry.value).utf8.count }
        while message.payload.count > ProtocolLimits.maxResultPayload,
            let largest = kept.filter({ $0.key != "omitted" }).max(by: { size($0) < size($1) })?.key
        {
            kept[largest] = nil
            omitted.append(largest)
            kept["omitted"] = .array(omitted.sorted().map(JSONValue.string))
            message = Message.json(.setResult, HandlerResult(result: kept))
        }
        if !omitted.isEmpty {
            let limit = ProtocolLimits.maxResultPayload
            logger.error(
                "broadcast result: \(omitted.joined(separator: ", ")) left out, beyond the limit of \(limit) bytes")
        }
        return message
    }
}

/// Revision 2.3: the way back for one command's answer; `send` or `fail` it once, from any thread.
public struct CommandReply: Sendable {
    let id: UInt32
    let connection: PeerConnection?
    let logger: Logger

    /// Answers with `result`, at most 64 KiB once encoded (a larger one is answered as an error instead).
    public func send(_ result: [String: JSONValue]) {
        let message = Message.json(.commandAnswer, HandlerCommandAnswer(id: id, result: result))
        guard message.payload.count <= ProtocolLimits.maxCommandAnswerPayload else {
            logger.error(
                "command answer not sent: \(message.payload.count) bytes exceed the limit of \(ProtocolLimits.maxCommandAnswerPayload)"
            )
            return fail(HandlerError("answer", "the result was too large to send (\(message.payload.count) bytes)"))
        }
        try? connection?.send(message)
    }

    /// Answers with the result, or the error.
    public func answer<Failure: Error>(_ result: Result<[String: JSONValue], Failure>) {
        switch result {
        case .success(let value): send(value)
        case .failure(let error): fail(error)
        }
    }

    /// Answers with an error: its text is what the controller shows.
    public func fail(_ error: Error) {
        var text = "\(error)"
        if text.utf8.count > 8192 { text = String(decoding: Array(text.utf8.prefix(8192)), as: UTF8.self) }
        try? connection?.send(.json(.commandAnswer, HandlerCommandAnswer(id: id, error: HandlerFailure(message: text))))
    }
}
