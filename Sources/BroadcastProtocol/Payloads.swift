import BroadcastCore
import BroadcastSystem
import FoundationEssentials

// JSON payloads of the control messages (docs/protocol.md). Keys are camelCase; readers ignore keys
// they do not know, so later versions can add fields.

public enum PeerRole: String, Codable, Sendable {
    case controller, setup, handler
}

public struct Hello: Codable, Equatable, Sendable {
    public var `protocol`: Int
    public var role: PeerRole
    public var client: String?
    public init(role: PeerRole, client: String?, protocol: Int = ProtocolLimits.version) {
        self.protocol = `protocol`
        self.role = role
        self.client = client
    }
}

public struct Welcome: Codable, Equatable, Sendable {
    public var `protocol`: Int
    public var server: String
    public var maxPayload: Int
    public var maxDescriptors: Int
    /// Revision 2.6: the daemon's revision ("2.6") and the features it offers (`ProtocolFeature`); absent from older
    /// daemons, which announce nothing.
    public var revision: String?
    public var features: [String]?
    /// `protocol`: the version spoken on this connection (the peer's, when broadcastd serves it).
    public init(
        server: String, protocol: Int = ProtocolLimits.version, revision: String? = ProtocolLimits.revision,
        features: [String]? = ProtocolFeature.offered.map(\.rawValue)
    ) {
        self.protocol = `protocol`
        self.server = server
        self.maxPayload = ProtocolLimits.maxPayload
        self.maxDescriptors = ProtocolLimits.maxDescriptors
        self.revision = revision
        self.features = features
    }

    /// Whether the daemon offers `feature`: nil when it announces no features (older than revision 2.6: a client can
    /// only try), else whether its WELCOME names it.
    public func offers(_ feature: ProtocolFeature) -> Bool? {
        features.map { $0.contains(feature.rawValue) }
    }
}

/// Revision 2.6: what WELCOME's `features` may name (docs/protocol.json's `features`). A peer checks a feature before
/// it uses what the feature brings, instead of learning from a refusal.
public enum ProtocolFeature: String, CaseIterable, Sendable {
    /// 2.0: several broadcasts at once on one capture, addressed by id.
    case severalBroadcasts = "several-broadcasts"
    /// 2.1: START's `capture`.
    case captureChoice = "capture-choice"
    /// 2.1: CHANGE_CAPTURE.
    case captureChange = "capture-change"
    /// 2.2: SOURCES lists windows; a broadcast captures one window.
    case windows
    /// 2.2: broadcasts paused or blanked while the desktop session is locked; the status says so.
    case sessionLock = "session-lock"
    /// 2.3: SEND_COMMAND, COMMAND, COMMAND_ANSWER, COMMAND_RESULT.
    case commands
    /// 2.4: memory planned per capture (START's `warning`, the status's `memoryPlanned` and `memoryWarning`).
    case memoryPlan = "memory-plan"
    /// 2.7: START's `capture.excludeWindows`; a setup field's `choices` and `type`; SEND_COMMAND without `broadcast`
    /// goes to the live broadcast whose handler takes the command.
    case excludeWindows = "exclude-windows"
    /// 2.8: cameras: SOURCES lists PipeWire's video sources with their formats, START's `capture.camera` chooses
    /// one, the status names it.
    case camera
    /// 2.9: encoded samples: a handler asks for an encoding (ENCODE) instead of frames and shares one encoder, which
    /// broadcastd runs in a process of its own, with the handlers that ask for the same; its packets come in a packet
    /// ring the handler maps (ENCODING, PACKET_RING, ENCODED_STREAMS, ENCODED_PACKET, PICTURE_UNCHANGED,
    /// REQUEST_KEYFRAME; the encoder's SHARE_* and KEYFRAME_REQUESTED).
    case encodedSamples = "encoded-samples"
    /// 2.10: a shared encoder's audio figures (AUDIO_FIGURES; the encoder's SHARE_AUDIO_FIGURES).
    case audioFigures = "audio-figures"

    /// What this daemon offers, in the order of the revisions that added them.
    public static let offered: [ProtocolFeature] = [
        .severalBroadcasts, .captureChoice, .captureChange, .windows, .sessionLock, .commands, .memoryPlan,
        .excludeWindows, .camera, .encodedSamples, .audioFigures,
    ]
}

public struct Empty: Codable, Equatable, Sendable {
    public init() {}
}

public struct BroadcastReference: Codable, Equatable, Sendable {
    public var broadcast: UInt32?
    /// Revision 2.4, START's OK only: the broadcast runs, but something about it deserves the user's eye (the
    /// capture runs over the built-in memory budget, and why).
    public var warning: String?
    public init(broadcast: UInt32?, warning: String? = nil) {
        self.broadcast = broadcast
        self.warning = warning
    }
}

/// FINISH (revision 1.2): which broadcast, and whether its handler throws away what it produced.
/// An empty payload (1.0 and 1.1 controllers) or `{}` is a plain finish of the current broadcast.
public struct FinishRequest: Codable, Equatable, Sendable {
    /// The broadcast to finish (version 2); absent: the only one running (section 8.3).
    public var broadcast: UInt32?
    public var discard: Bool?
    public init(broadcast: UInt32? = nil, discard: Bool? = nil) {
        self.broadcast = broadcast
        self.discard = discard
    }
}

public struct HandlerList: Codable, Equatable, Sendable {
    public var handlers: [HandlerManifest]
    public init(handlers: [HandlerManifest]) { self.handlers = handlers }
}

public struct StartRequest: Codable, Equatable, Sendable {
    public var handler: String
    /// Seconds of live time after which the broadcast finishes by itself.
    public var maxDuration: Double?
    /// What to capture, where it differs from broadcastd's options (revision 2.1).
    public var capture: CaptureChoice?
    public init(handler: String, maxDuration: Double? = nil, capture: CaptureChoice? = nil) {
        self.handler = handler
        self.maxDuration = maxDuration
        self.capture = capture
    }
}

/// Frames delivered and dropped on one stream.
public struct StreamCounters: Codable, Equatable, Sendable {
    public var delivered: UInt64 = 0
    public var dropped: UInt64 = 0
    /// Video only: frame intervals in which the screen did not change (delivered as repeats, or skipped
    /// for a variable-frame-rate handler).
    public var repeated: UInt64 = 0
    /// Video only, counted in `dropped`: frames never captured because broadcastd's loop was late for
    /// their deadline (the machine was too busy), as opposed to frames the handler had no room for.
    /// Absent while zero, and from older daemons.
    public var late: UInt64?
    public init(delivered: UInt64 = 0, dropped: UInt64 = 0, repeated: UInt64 = 0, late: UInt64? = nil) {
        self.delivered = delivered
        self.dropped = dropped
        self.repeated = repeated
        self.late = late
    }
}

/// The canonical state, as every controller reads it (STATUS and STATE_CHANGED).
public struct BroadcastStatus: Codable, Equatable, Sendable {
    public var state: BroadcastPhase
    public var broadcast: UInt32?
    public var handler: String?
    public var url: String?
    /// Live time so far in seconds, pauses excluded.
    public var elapsed: Double?
    public var maxDuration: Double?
    public var wantsPaused: Bool?
    /// Why the last broadcast finished, when it finished with an error.
    public var error: BroadcastError?
    public var source: String
    public var video: VideoFormat?
    public var audio: AudioFormat?
    public var streams: [String: StreamCounters]?
    /// The capture source's own figures (frames grabbed, bands converted and copied, resizes).
    public var capture: [String: UInt64]?
    /// broadcastd's resident memory in bytes.
    public var daemonMemory: Int?
    /// Revision 2.4: what the capture's memory plan says broadcastd has resident at most, in bytes (while a
    /// capture is open), and, when that is over the built-in memory budget, by how much and why.
    public var memoryPlanned: Int?
    public var memoryWarning: String?
    /// Audio streams sending silence because nothing comes from their device, by stream, with why.
    public var silentAudio: [String: String]?
    /// Once finished: what the handler last reported with SET_RESULT.
    public var result: [String: JSONValue]?
    /// Version 2's STATUS: every broadcast requested and not finished, and those that finished since the
    /// last START, oldest first, each as a status of its own (the fields above describe the newest).
    public var broadcasts: [BroadcastStatus]?
    /// Frames per second this broadcast's handler gets when it asked for fewer than the capture gives (every k-th
    /// frame), rounded to a whole number as BROADCAST_STARTED's.
    public var frameRate: Int?
    /// Revision 1.2: the broadcast is being, or was, discarded.
    public var discarded: Bool?
    /// Revision 2.1: the file the handler writes, as its result names it (`file`), as soon as it does: live too.
    public var file: String?
    /// Revision 2.2: the desktop session is locked (logind's LockedHint or the screensaver).
    public var sessionLocked: Bool?
    /// Revision 2.2: broadcastd paused this broadcast because the session locked; it resumes on unlock.
    public var pausedForLock: Bool?
    /// Revision 2.2: this live broadcast's handler gets the privacy frame instead of the screen (`--on-lock blank`).
    public var blankedForLock: Bool?
    /// Revision 2.8: the camera this broadcast's capture takes ("testcam (Test Camera, serial 42)"), when one was
    /// asked for.
    public var camera: String?
    /// Revision 2.8: why the camera's frames stopped (it went away); the broadcast goes on without them.
    public var cameraLost: String?
    /// Revision 2.9: the shared encoder (a broadcast of its own) whose packets this broadcast's handler takes.
    public var encoder: UInt32?
    /// Revision 2.9: for a shared encoder, the broadcasts it serves, oldest first.
    public var serves: [UInt32]?

    public init(state: BroadcastPhase, source: String) {
        self.state = state
        self.source = source
    }
}

public struct ServiceInfo: Codable, Equatable, Sendable {
    public var broadcast: UInt32
    public var elapsed: Double
    public var streams: [String: StreamCounters]
    /// What the handler reported with UPDATE_SERVICE_INFO.
    public var handler: [String: JSONValue]?
    /// broadcastd's resident memory in bytes.
    public var daemonMemory: Int?
    public init(
        broadcast: UInt32, elapsed: Double, streams: [String: StreamCounters], handler: [String: JSONValue]?,
        daemonMemory: Int? = nil
    ) {
        self.broadcast = broadcast
        self.elapsed = elapsed
        self.streams = streams
        self.handler = handler
        self.daemonMemory = daemonMemory
    }
}

public struct URLUpdate: Codable, Equatable, Sendable {
    public var broadcast: UInt32?
    public var url: String
    public init(broadcast: UInt32?, url: String) {
        self.broadcast = broadcast
        self.url = url
    }
}

public struct FinishedEvent: Codable, Equatable, Sendable {
    public var broadcast: UInt32
    public var error: BroadcastError?
    /// What the handler last reported with SET_RESULT during this broadcast.
    public var result: [String: JSONValue]?
    /// Revision 1.2: the broadcast was discarded (FINISH with `discard`): what it produced is gone.
    public var discarded: Bool?
    public init(broadcast: UInt32, error: BroadcastError?, result: [String: JSONValue]? = nil, discarded: Bool? = nil) {
        self.broadcast = broadcast
        self.error = error
        self.result = result
        self.discarded = discarded
    }
}

public struct SetupRequest: Codable, Equatable, Sendable {
    public var broadcast: UInt32
    public var handler: HandlerManifest
    public init(broadcast: UInt32, handler: HandlerManifest) {
        self.broadcast = broadcast
        self.handler = handler
    }
}

public struct SetupCompletion: Codable, Equatable, Sendable {
    public var broadcast: UInt32
    public var url: String?
    public var setupInfo: [String: String]
    public init(broadcast: UInt32, url: String?, setupInfo: [String: String]) {
        self.broadcast = broadcast
        self.url = url
        self.setupInfo = setupInfo
    }
}

public struct SetupCancellation: Codable, Equatable, Sendable {
    public var broadcast: UInt32
    public var error: BroadcastError
    public init(broadcast: UInt32, error: BroadcastError) {
        self.broadcast = broadcast
        self.error = error
    }
}

public struct PoolAnnouncement: Codable, Equatable, Sendable {
    public var pool: UInt32
    public var slots: Int
    public var slotSize: Int
    /// Revision 2.8: this is the camera's pool, beside the screen's (which it does not replace).
    public var camera: Bool?
    public init(pool: UInt32, slots: Int, slotSize: Int, camera: Bool? = nil) {
        self.pool = pool
        self.slots = slots
        self.slotSize = slotSize
        self.camera = camera
    }
}

/// CAMERA_FORMAT (revision 2.8): the camera's frames are `video` from the next CAMERA_SAMPLE on, or (`lost`) the
/// camera went away and no more come until a CAMERA_FORMAT with `video` again.
public struct CameraFormatNotice: Codable, Equatable, Sendable {
    /// Which camera, as SOURCES names it: "testcam (Test Camera, serial 42)".
    public var camera: String
    public var video: VideoDescription?
    /// Why no frames come any more.
    public var lost: String?

    public init(camera: String, video: VideoDescription? = nil, lost: String? = nil) {
        self.camera = camera
        self.video = video
        self.lost = lost
    }
}

/// A video format as BROADCAST_STARTED and VIDEO_FORMAT_CHANGED describe it, with its plane layout.
public struct VideoDescription: Codable, Equatable, Sendable {
    public var width: Int
    public var height: Int
    public var format: String
    public var fourcc: UInt32
    public var planes: [Plane]
    public var frameSize: Int
    /// "limited" (16-235) or "full" (0-255): the BT.709 quantisation of NV12 and I420 frames; absent
    /// from older daemons, which sent limited range.
    public var colorRange: String?

    public init(_ format: VideoFormat, colorRange: String? = nil) {
        width = format.width
        height = format.height
        self.format = format.pixelFormat.description
        fourcc = format.pixelFormat.rawValue
        planes = format.planes
        frameSize = format.frameByteCount
        self.colorRange = colorRange
    }

    public var videoFormat: VideoFormat? {
        PixelFormat(rawValue: fourcc).map { VideoFormat(width: width, height: height, pixelFormat: $0) }
    }
}

public struct AudioDescription: Codable, Equatable, Sendable {
    public var sampleRate: Int
    public var channels: Int
    public var format: String
    public init(_ format: AudioFormat) {
        sampleRate = format.sampleRate
        channels = format.channels
        self.format = format.sampleFormat.description
    }
}

public struct BroadcastStart: Codable, Equatable, Sendable {
    public var broadcast: UInt32
    public var url: String?
    public var setupInfo: [String: String]
    public var video: VideoDescription
    public var audio: AudioDescription
    /// Video samples per second (repeats included, unless the handler asked for a variable rate).
    public var frameRate: Int?
    /// The audio streams the source delivers: `audioApp`, `audioMic`, both or none.
    public var audioStreams: [String]?
    public init(
        broadcast: UInt32, url: String?, setupInfo: [String: String], video: VideoDescription, audio: AudioDescription,
        frameRate: Int? = nil, audioStreams: [String]? = nil
    ) {
        self.broadcast = broadcast
        self.url = url
        self.setupInfo = setupInfo
        self.video = video
        self.audio = audio
        self.frameRate = frameRate
        self.audioStreams = audioStreams
    }
}

public struct BroadcastEnd: Codable, Equatable, Sendable {
    public var error: BroadcastError?
    /// Revision 1.2: throw away what the broadcast produced (sent only to handlers whose manifest says `discard`).
    public var discard: Bool?
    public init(error: BroadcastError?, discard: Bool? = nil) {
        self.error = error
        self.discard = discard
    }
}

/// FINISH_WITH_ERROR: why the handler ends the broadcast. `code` is optional.
public struct HandlerFailure: Codable, Equatable, Sendable {
    public var code: String?
    public var message: String
    public init(code: String? = nil, message: String) {
        self.code = code
        self.message = message
    }
}

/// UPDATE_SERVICE_INFO. The info is flat (strings, numbers, bools, null) so that controllers can show it
/// as one line; decoding refuses nested values, which makes them a protocol violation.
public struct HandlerServiceInfo: Codable, Equatable, Sendable {
    public var info: [String: JSONValue]
    public init(info: [String: JSONValue]) { self.info = info }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        info = try container.decode([String: JSONValue].self, forKey: .info)
        if let key = info.keys.sorted().first(where: { info[$0]!.isNested }) {
            throw DecodingError.typeMismatch(
                JSONValue.self,
                .init(
                    codingPath: container.codingPath + [CodingKeys.info, JSONKey(key)],
                    debugDescription: "service info values are strings, numbers, bools or null"))
        }
    }
}

extension HandlerServiceInfo {
    /// UPDATE_SERVICE_INFO's info, refused (a protocol violation) beyond the limits of its size and keys.
    public static func decodeWithinLimits(_ message: Message) throws(ProtocolError) -> [String: JSONValue] {
        let size = message.payload.count
        let maxSize = ProtocolLimits.maxServiceInfoPayload
        guard size <= maxSize else {
            throw .malformed(message.opcode, "service info of \(size) bytes exceeds the limit of \(maxSize)")
        }
        let info = try message.decode(HandlerServiceInfo.self).info
        guard info.count <= ProtocolLimits.maxServiceInfoKeys else {
            throw .malformed(
                message.opcode,
                "service info with \(info.count) keys exceeds the limit of \(ProtocolLimits.maxServiceInfoKeys)")
        }
        return info
    }
}

extension ServiceInfo {
    /// SERVICE_INFO with the handler's part as encoded when it last changed (`handler` itself is nil):
    /// keys are sorted, so "handler" goes in just before "streams".
    public func message(handlerJSON: [UInt8]?) -> Message {
        var message = Message.json(.serviceInfo, self)
        if let handlerJSON, let at = message.payload.firstRange(of: Array(#","streams":"#.utf8))?.lowerBound {
            message.payload.insert(contentsOf: Array(#","handler":"#.utf8) + handlerJSON, at: at)
        }
        return message
    }
}

/// SET_RESULT: what the handler produced (a recording's path, duration, segments), for every controller.
public struct HandlerResult: Codable, Equatable, Sendable {
    public var result: [String: JSONValue]
    public init(result: [String: JSONValue]) { self.result = result }
}
