import BroadcastCore
import BroadcastSystem

/// Message opcodes; docs/protocol.md lists each with its payload and direction.
public enum Opcode: UInt16, CaseIterable, Sendable, CustomStringConvertible {
    // Any role
    case hello = 0x0001
    case welcome = 0x0002
    case ok = 0x0003
    case error = 0x0004
    // Controller
    case listHandlers = 0x0100
    case handlers = 0x0101
    case start = 0x0102
    case pause = 0x0103
    case resume = 0x0104
    case finish = 0x0105
    case getStatus = 0x0106
    case status = 0x0107
    case subscribe = 0x0108
    case listSources = 0x0109
    case sources = 0x010A
    case getSnapshot = 0x010B
    case snapshot = 0x010C
    /// Revision 2.1: change what the running capture takes, for every broadcast sharing it.
    case changeCapture = 0x010F
    /// Revision 2.3: a command for a broadcast's handler, and its answer.
    case sendCommand = 0x010D
    case commandResult = 0x010E
    case stateChanged = 0x0180
    case serviceInfo = 0x0181
    case urlUpdated = 0x0182
    case finished = 0x0183
    // Setup
    case getSetupRequest = 0x0200
    case setupRequest = 0x0201
    case completeSetup = 0x0202
    case cancelSetup = 0x0203
    // Handler
    case pool = 0x0300
    case broadcastStarted = 0x0301
    case broadcastPaused = 0x0302
    case broadcastResumed = 0x0303
    case broadcastFinished = 0x0304
    case videoFormatChanged = 0x0305
    /// Revision 2.3: a controller's command, forwarded to the handler.
    case command = 0x0306
    /// Revision 2.8: the camera's format, or that it went away.
    case cameraFormat = 0x0307
    /// Revision 2.9 (encoded samples): the packet ring of the encoder the handler shares, with its descriptor.
    case packetRing = 0x0308
    /// Revision 2.9: the streams of that encoder.
    case encodedStreams = 0x0309
    /// Revision 2.9: the answer to ENCODE: which encoder the handler shares, or why none.
    case encoding = 0x030A
    /// Revision 2.9: to broadcastd's encoder, a handler it serves asked for a keyframe.
    case keyframeRequested = 0x030B
    case videoSample = 0x0310
    case audioSample = 0x0311
    case cursor = 0x0312
    /// Revision 2.8: one camera frame, in a slot of the camera's pool (VIDEO_SAMPLE's layout).
    case cameraSample = 0x0313
    /// Revision 2.9: one encoded packet, in the packet ring.
    case encodedPacket = 0x0314
    /// Revision 2.9: the shared encoder's picture did not change through a time.
    case pictureUnchanged = 0x0315
    /// Revision 2.10: how one audio stream of the shared encoder fared.
    case audioFigures = 0x0316
    case ready = 0x0380
    case releaseSlot = 0x0381
    case finishWithError = 0x0382
    case updateURL = 0x0383
    case updateServiceInfo = 0x0384
    case setResult = 0x0385
    /// Revision 2.3: the handler's answer to a COMMAND.
    case commandAnswer = 0x0386
    /// Revision 2.9: the handler asks for encoded samples, of the encoding its settings name.
    case encode = 0x0387
    /// Revision 2.9: the handler asks its shared encoder for a keyframe.
    case requestKeyframe = 0x0388
    /// Revision 2.9, from broadcastd's encoder: its packet ring, with the descriptor handlers map.
    case shareRing = 0x0389
    /// Revision 2.9, from broadcastd's encoder: its streams.
    case shareStreams = 0x038A
    /// Revision 2.9, from broadcastd's encoder: a packet it wrote into its ring.
    case sharePacket = 0x038B
    /// Revision 2.9, from broadcastd's encoder: its picture did not change through a time.
    case sharePictureUnchanged = 0x038C
    /// Revision 2.10, from broadcastd's encoder: how one of its audio streams fared.
    case shareAudioFigures = 0x038D

    public var description: String { "\(name) (0x\(String(rawValue, radix: 16)))" }

    public var name: String {
        switch self {
        case .hello: "HELLO"
        case .welcome: "WELCOME"
        case .ok: "OK"
        case .error: "ERROR"
        case .listHandlers: "LIST_HANDLERS"
        case .handlers: "HANDLERS"
        case .start: "START"
        case .pause: "PAUSE"
        case .resume: "RESUME"
        case .finish: "FINISH"
        case .getStatus: "GET_STATUS"
        case .status: "STATUS"
        case .subscribe: "SUBSCRIBE"
        case .listSources: "LIST_SOURCES"
        case .sources: "SOURCES"
        case .getSnapshot: "GET_SNAPSHOT"
        case .snapshot: "SNAPSHOT"
        case .changeCapture: "CHANGE_CAPTURE"
        case .sendCommand: "SEND_COMMAND"
        case .commandResult: "COMMAND_RESULT"
        case .stateChanged: "STATE_CHANGED"
        case .serviceInfo: "SERVICE_INFO"
        case .urlUpdated: "URL_UPDATED"
        case .finished: "FINISHED"
        case .getSetupRequest: "GET_SETUP_REQUEST"
        case .setupRequest: "SETUP_REQUEST"
        case .completeSetup: "COMPLETE_SETUP"
        case .cancelSetup: "CANCEL_SETUP"
        case .pool: "POOL"
        case .broadcastStarted: "BROADCAST_STARTED"
        case .broadcastPaused: "BROADCAST_PAUSED"
        case .broadcastResumed: "BROADCAST_RESUMED"
        case .broadcastFinished: "BROADCAST_FINISHED"
        case .videoFormatChanged: "VIDEO_FORMAT_CHANGED"
        case .cameraFormat: "CAMERA_FORMAT"
        case .cameraSample: "CAMERA_SAMPLE"
        case .packetRing: "PACKET_RING"
        case .encodedStreams: "ENCODED_STREAMS"
        case .encoding: "ENCODING"
        case .keyframeRequested: "KEYFRAME_REQUESTED"
        case .encodedPacket: "ENCODED_PACKET"
        case .pictureUnchanged: "PICTURE_UNCHANGED"
        case .audioFigures: "AUDIO_FIGURES"
        case .encode: "ENCODE"
        case .requestKeyframe: "REQUEST_KEYFRAME"
        case .shareRing: "SHARE_RING"
        case .shareStreams: "SHARE_STREAMS"
        case .sharePacket: "SHARE_PACKET"
        case .sharePictureUnchanged: "SHARE_PICTURE_UNCHANGED"
        case .shareAudioFigures: "SHARE_AUDIO_FIGURES"
        case .command: "COMMAND"
        case .videoSample: "VIDEO_SAMPLE"
        case .audioSample: "AUDIO_SAMPLE"
        case .cursor: "CURSOR"
        case .ready: "READY"
        case .releaseSlot: "RELEASE_SLOT"
        case .finishWithError: "FINISH_WITH_ERROR"
        case .updateURL: "UPDATE_URL"
        case .updateServiceInfo: "UPDATE_SERVICE_INFO"
        case .setResult: "SET_RESULT"
        case .commandAnswer: "COMMAND_ANSWER"
        }
    }
}

/// Protocol-wide constants (docs/protocol.md, "Limits").
public enum ProtocolLimits {
    /// The version this side speaks: 2 (several broadcasts at once, addressed by id).
    public static let version = 2
    /// The revision of version 2 this side implements, which WELCOME announces (since revision 2.6).
    public static let revision = "2.10"
    /// The oldest version broadcastd still serves: version-1 peers keep working where they can (docs/protocol.md §7).
    public static let oldestVersion = 1
    public static let headerSize = 12
    /// Largest payload of one message.
    public static let maxPayload = 1 << 20
    /// Most descriptors one message carries.
    public static let maxDescriptors = 4
    /// Largest SET_RESULT payload: the result travels again in every FINISHED and in the status of a
    /// finished broadcast, so it is kept far below `maxPayload`.
    public static let maxResultPayload = 64 << 10
    /// Largest UPDATE_SERVICE_INFO payload, and most keys in it: it travels to every subscriber every second.
    public static let maxServiceInfoPayload = 16 << 10
    public static let maxServiceInfoKeys = 64
    /// Revision 2.3: largest SEND_COMMAND payload (and so COMMAND), and largest COMMAND_ANSWER payload.
    public static let maxCommandPayload = 16 << 10
    public static let maxCommandAnswerPayload = 64 << 10
    /// Revision 2.3: how long a handler has to answer a COMMAND before the controller is told it did not.
    public static let commandTimeout: UInt64 = 10_000_000_000
}

/// The error type of BroadcastProtocol: a peer broke the protocol, or the transport failed.
public enum ProtocolError: Error, CustomStringConvertible, Equatable {
    case oversized(opcode: UInt16, size: Int)
    case tooManyDescriptors(opcode: UInt16, count: Int)
    case missingDescriptors(opcode: UInt16, expected: Int, received: Int)
    /// Descriptors arrived that no header declared (a header said fewer than came with it).
    case undeclaredDescriptors(count: Int)
    case unknownOpcode(UInt16)
    case malformed(Opcode, String)
    case unexpected(Opcode, String)
    case closed
    case transport(SystemError)
    case refused(BroadcastError)

    /// The daemon's answer when it refused a request.
    public var refusal: BroadcastError? {
        if case .refused(let error) = self { error } else { nil }
    }

    public var description: String {
        switch self {
        case .oversized(let op, let size):
            "message 0x\(String(op, radix: 16)) of \(size) bytes exceeds the limit of \(ProtocolLimits.maxPayload)"
        case .tooManyDescriptors(let op, let n):
            "message 0x\(String(op, radix: 16)) claims \(n) descriptors, at most \(ProtocolLimits.maxDescriptors) allowed"
        case .missingDescriptors(let op, let e, let r):
            "message 0x\(String(op, radix: 16)) needs \(e) descriptors but \(r) arrived"
        case .undeclaredDescriptors(let n): "\(n) descriptor(s) arrived that no message header declared"
        case .unknownOpcode(let op): "unknown opcode 0x\(String(op, radix: 16))"
        case .malformed(let op, let why): "malformed \(op.name): \(why)"
        case .unexpected(let op, let why): "unexpected \(op.name): \(why)"
        case .closed: "the connection was closed"
        case .transport(let e): e.description
        case .refused(let e): e.message
        }
    }
}

/// One message: opcode, sequence number, payload bytes and the descriptors that came with it.
public struct Message: @unchecked Sendable {
    public var opcode: Opcode
    public var seq: UInt32
    public var payload: [UInt8]
    public var descriptors: [Descriptor]

    public init(_ opcode: Opcode, seq: UInt32 = 0, payload: [UInt8] = [], descriptors: [Descriptor] = []) {
        self.opcode = opcode
        self.seq = seq
        self.payload = payload
        self.descriptors = descriptors
    }

    /// Header and payload as they go on the wire; the descriptors travel beside them (SCM_RIGHTS).
    public func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(ProtocolLimits.headerSize + payload.count)
        Self.appendHeader(
            to: &bytes, opcode: opcode, seq: seq, payloadSize: payload.count, descriptorCount: descriptors.count)
        bytes += payload
        return bytes
    }

    public static func appendHeader(
        to bytes: inout [UInt8], opcode: Opcode, seq: UInt32, payloadSize: Int, descriptorCount: Int
    ) {
        bytes.appendLittleEndian(UInt32(payloadSize))
        bytes.appendLittleEndian(opcode.rawValue)
        bytes.appendLittleEndian(UInt16(descriptorCount))
        bytes.appendLittleEndian(seq)
    }
}

/// Reassembles messages from a byte stream split anywhere, with descriptors queued as they arrive.
public struct MessageDecoder {
    private var buffer: [UInt8] = []
    private var start = 0
    private var descriptors: [Descriptor] = []
    private let skipsUnknownOpcodes: Bool

    /// `next()` throws on an opcode this side does not know, or skips it (with its descriptors) so that peers keep
    /// working when a later daemon adds messages (docs/protocol.md §3); broadcastd reads `nextFrame()` and answers it.
    public init(skipsUnknownOpcodes: Bool = false) {
        self.skipsUnknownOpcodes = skipsUnknownOpcodes
    }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if start > 0 && start == buffer.count {
            // A buffer that once held a large message does not keep its size for good.
            buffer.removeAll(keepingCapacity: buffer.capacity <= Self.retainedCapacity)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Most of an emptied buffer's capacity that is kept for the next message.
    static let retainedCapacity = 64 << 10

    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    public mutating func append(descriptors new: [Descriptor]) {
        descriptors += new
    }

    /// Bytes received but not yet part of a whole message.
    public var pendingByteCount: Int { buffer.count - start }

    /// Descriptors received and not yet handed out with a message.
    public var pendingDescriptorCount: Int { descriptors.count }

    /// Closes the descriptors received and not yet handed out (when the peer is dropped).
    public mutating func closeDescriptors() {
        for descriptor in descriptors { descriptor.close() }
        descriptors = []
    }

    /// The next whole message, nil if more bytes are needed; throws when the peer broke the framing.
    /// A descriptor travels with the first byte of the message that declares it, so once the whole
    /// messages are taken, no more may wait than the unfinished one declares: any beyond that were
    /// smuggled past a header (they are closed, and the peer broke the protocol).
    public mutating func next() throws(ProtocolError) -> Message? {
        while let frame = try nextFrame() {
            switch frame {
            case .message(let message): return message
            case .unknown(let opcode, _, _): if !skipsUnknownOpcodes { throw .unknownOpcode(opcode) }
            }
        }
        return nil
    }

    /// A whole frame: a message, or one of an opcode this side does not know, read whole and dropped (its descriptors
    /// closed), so that broadcastd can answer it (ERROR `unsupported`, revision 2.6) in the order of the requests.
    public enum Frame {
        case message(Message)
        case unknown(opcode: UInt16, seq: UInt32, descriptorCount: Int)
    }

    /// The next whole frame, nil if more bytes are needed; throws when the peer broke the framing.
    public mutating func nextFrame() throws(ProtocolError) -> Frame? {
        guard let (opcode, message) = try nextRawFrame() else {
            try checkUndeclaredDescriptors()
            return nil
        }
        guard let opcode else {
            for descriptor in message.descriptors { descriptor.close() }
            return .unknown(opcode: message.rawOpcode, seq: message.seq, descriptorCount: message.descriptors.count)
        }
        return .message(Message(opcode, seq: message.seq, payload: message.payload, descriptors: message.descriptors))
    }

    private mutating func checkUndeclaredDescriptors() throws(ProtocolError) {
        guard !descriptors.isEmpty else { return }
        let pending = buffer.count - start
        let declared =
            pending >= ProtocolLimits.headerSize
            ? Int(buffer.loadLittleEndian(UInt16.self, at: start + 6))
            : pending > 0 ? ProtocolLimits.maxDescriptors : 0
        guard descriptors.count > declared else { return }
        let count = descriptors.count
        closeDescriptors()
        throw .undeclaredDescriptors(count: count)
    }

    /// The next whole frame; its opcode is nil when unknown.
    private mutating func nextRawFrame() throws(ProtocolError)
        -> (Opcode?, (rawOpcode: UInt16, seq: UInt32, payload: [UInt8], descriptors: [Descriptor]))?
    {
        guard buffer.count - start >= ProtocolLimits.headerSize else { return nil }
        let size = Int(buffer.loadLittleEndian(UInt32.self, at: start))
        let rawOpcode = buffer.loadLittleEndian(UInt16.self, at: start + 4)
        let fdCount = Int(buffer.loadLittleEndian(UInt16.self, at: start + 6))
        let seq = buffer.loadLittleEndian(UInt32.self, at: start + 8)
        guard size <= ProtocolLimits.maxPayload else { throw .oversized(opcode: rawOpcode, size: size) }
        guard fdCount <= ProtocolLimits.maxDescriptors else {
            throw .tooManyDescriptors(opcode: rawOpcode, count: fdCount)
        }
        let opcode = Opcode(rawValue: rawOpcode)
        guard buffer.count - start >= ProtocolLimits.headerSize + size else { return nil }
        guard descriptors.count >= fdCount else {
            throw .missingDescriptors(opcode: rawOpcode, expected: fdCount, received: descriptors.count)
        }
        let bodyStart = start + ProtocolLimits.headerSize
        let payload = Array(buffer[bodyStart..<(bodyStart + size)])
        start = bodyStart + size
        if start > 65536 && start * 2 > buffer.count {
            buffer.removeSubrange(0..<start)
            start = 0
        }
        let fds = Array(descriptors.prefix(fdCount))
        descriptors.removeFirst(fdCount)
        return (opcode, (rawOpcode, seq, payload, fds))
    }
}

extension Array where Element == UInt8 {
    @inline(__always)
    public mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    @inline(__always)
    public func loadLittleEndian<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
    }
}
