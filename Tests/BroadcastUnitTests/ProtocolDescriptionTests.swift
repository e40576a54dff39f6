import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

/// docs/protocol.json is the source of truth: every opcode, binary layout, JSON payload and object, limit, feature and
/// error code of the Swift side is checked against it, by encoding known values.
@Suite struct ProtocolDescriptionTests {
    let description: ProtocolDescription

    init() throws { description = try ProtocolDescription.load() }

    @Test func everyOpcodeAndNameIsDescribedAndNothingElse() {
        let described = Dictionary(
            description.messages.map { ($0.name, $0.opcodeValue) }, uniquingKeysWith: { a, _ in a })
        #expect(described.count == description.messages.count, "a message is described twice")
        for opcode in Opcode.allCases {
            #expect(
                described[opcode.name] == .some(opcode.rawValue),
                "\(opcode.name) is 0x\(String(opcode.rawValue, radix: 16)) in Swift")
        }
        #expect(Set(described.keys) == Set(Opcode.allCases.map(\.name)), "messages described that Swift does not have")
        for message in description.messages {
            #expect(["to-daemon", "from-daemon"].contains(message.direction), "\(message.name)")
            #expect(
                Set(message.roles).isSubset(of: ["controller", "setup", "handler"]) && !message.roles.isEmpty,
                "\(message.name)")
            #expect(["json", "binary", "ignored"].contains(message.payload.kind), "\(message.name)")
            for code in message.errors ?? [] {
                #expect(
                    description.errors.contains { $0.code == code }, "\(message.name) names the unknown error \(code)")
            }
        }
    }

    @Test func theRevisionFeaturesLimitsAndErrorCodesAreSwifts() {
        #expect(
            description.version == ProtocolLimits.version && description.oldestVersion == ProtocolLimits.oldestVersion)
        #expect(description.revision == ProtocolLimits.revision)
        #expect(description.features.map(\.name) == ProtocolFeature.allCases.map(\.rawValue))
        #expect(description.features.filter(\.offered).map(\.name) == ProtocolFeature.offered.map(\.rawValue))
        let swift: [String: Int] = [
            "version": ProtocolLimits.version, "headerSize": ProtocolLimits.headerSize,
            "maxPayload": ProtocolLimits.maxPayload,
            "maxDescriptors": ProtocolLimits.maxDescriptors, "maxResultPayload": ProtocolLimits.maxResultPayload,
            "maxServiceInfoPayload": ProtocolLimits.maxServiceInfoPayload,
            "maxServiceInfoKeys": ProtocolLimits.maxServiceInfoKeys,
            "maxCommandPayload": ProtocolLimits.maxCommandPayload,
            "maxCommandAnswerPayload": ProtocolLimits.maxCommandAnswerPayload,
            "commandTimeout": Int(ProtocolLimits.commandTimeout / 1_000_000_000),
            "EncodeRequest.maxSettings": EncodeRequest.maxSettings,
            "EncodeRequest.maxKeyBytes": EncodeRequest.maxKeyBytes,
            "EncodeRequest.maxValueBytes": EncodeRequest.maxValueBytes,
            "PacketRingAnnouncement.maxSize": PacketRingAnnouncement.maxSize,
            "EncodedStreams.maxStreams": EncodedStreams.maxStreams,
            "EncodedStreamDescription.maxExtradata": EncodedStreamDescription.maxExtradata,
        ]
        for limit in description.limits {
            guard let name = limit.swift else { continue }
            #expect(
                swift[name] != nil && limit.value == swift[name],
                "limit \(limit.name): \(String(describing: limit.value)) vs \(String(describing: swift[name]))")
        }
        #expect(Set(description.limits.compactMap(\.swift)) == Set(swift.keys))
        #expect(description.limits.first { $0.name == "poolSlots" }?.value == FramePoolPlan.maximumSlots)
        #expect(
            description.limits.first { $0.name == "maxSetupValueBytes" }?.value == HandlerManifest.maxSetupValueBytes)
        // Every code that crosses the wire (not-running is the clients' own: nothing listens).
        let codes: [BroadcastError.Code] = [
            .busy, .noBroadcast, .unknownHandler, .invalidRequest, .setupCancelled, .handlerFailed,
            .handlerError, .protocolError, .versionMismatch, .ambiguousBroadcast, .budget, .captureFailed,
            .captureInUse, .shutdown, .commandFailed, .commandTimeout, .unsupported,
        ]
        #expect(Set(description.errors.map(\.code)) == Set(codes.map(\.rawValue)))
    }

    // MARK: Binary layouts

    /// Reads `size` little-endian bytes at `offset` as a number.
    static func value(_ bytes: [UInt8], _ offset: Int, _ size: Int) -> UInt64 {
        (0..<size).reversed().reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[offset + $1]) }
    }

    static let timing = SampleTiming(
        presentationTime: 0x0102_0304_0506_0708, duration: 0x1112_1314_1516_1718,
        sequence: 0x2122_2324_2526_2728, discontinuity: true)
    static let timingValues: [String: UInt64] = [
        "pts": 0x0102_0304_0506_0708, "duration": 0x1112_1314_1516_1718,
        "sequence": 0x2122_2324_2526_2728,
    ]

    /// Each layout encoded with known values, and the value every field must read as (timing: `timingValues`).
    static func encodedLayouts() -> [String: (bytes: [UInt8], values: [String: UInt64])] {
        let format = VideoFormat(width: 1920, height: 1080, pixelFormat: .i420)
        var video: [UInt8] = []
        VideoSampleHeader(
            timing: timing, orientation: Orientation(degrees: 270, mirrored: true), pool: 0x3132_3334,
            slot: 0x4142_4344,
            format: format, repeated: true
        ).encode(into: &video)
        var audio: [UInt8] = []
        AudioSampleHeader(
            timing: timing, type: .audioMic, format: AudioFormat(channels: 1, sampleFormat: .s16), frameCount: 0x5152
        )
        .encode(into: &audio)
        let cursor = CursorSample(
            presentationTime: 0x0102_0304_0506_0708, x: -7, y: 0x0607, visible: true,
            sprite: .init(width: 1, height: 2, hotspotX: 0x0b, hotspotY: 0x0c, pixels: [1, 2])
        ).message.payload
        var packet = EncodedPacketHeader(
            ring: 0x0102_0304, stream: 0x1112_1314, sequence: 0x2122_2324_2526_2728, offset: 0x3132_3334_3536_3738,
            length: 0x4142_4344, flags: [.keyframe, .copy, .lastsUntilNext], pts: -2, dts: 0x5152_5354_5556_5758,
            duration: 0x6162_6364_6566_6768)
        (packet.skipStart, packet.skipEnd) = (0x7172_7374, 0x0a0b_0c0d)
        return [
            "videoSample": (
                video,
                [
                    "flags": 3, "orientation": 270, "mirrored": 1, "reserved": 0, "pool": 0x3132_3334,
                    "slot": 0x4142_4344,
                    "width": 1920, "height": 1080, "fourcc": UInt64(PixelFormat.i420.rawValue),
                    "byteCount": UInt64(format.frameByteCount),
                ]
            ),
            "audioSample": (
                audio,
                [
                    "flags": 1, "type": 3, "format": 2, "channels": 1, "reserved": 0, "sampleRate": 48000,
                    "frameCount": 0x5152,
                ]
            ),
            "releaseSlot": (
                SlotRelease(pool: 0x0102_0304, slot: 0x0506_0708).message.payload,
                ["pool": 0x0102_0304, "slot": 0x0506_0708]
            ),
            "cursor": (
                cursor,
                [
                    "pts": 0x0102_0304_0506_0708, "x": UInt64(UInt32(bitPattern: -7)), "y": 0x0607, "flags": 3,
                    "width": 1,
                    "height": 2, "hotspotX": 0x0b, "hotspotY": 0x0c,
                ]
            ),
            "encodedPacket": (
                packet.message(.encodedPacket).payload,
                [
                    "ring": 0x0102_0304, "stream": 0x1112_1314, "sequence": 0x2122_2324_2526_2728,
                    "offset": 0x3132_3334_3536_3738, "length": 0x4142_4344, "flags": 13,
                    "pts": UInt64(bitPattern: -2), "dts": 0x5152_5354_5556_5758, "duration": 0x6162_6364_6566_6768,
                    "skipStart": 0x7172_7374, "skipEnd": 0x0a0b_0c0d,
                ]
            ),
            "pictureUnchanged": (
                PictureUnchanged(through: -5).message(.pictureUnchanged).payload, ["through": UInt64(bitPattern: -5)]
            ),
        ]
    }

    @Test func everyBinaryLayoutIsWhereTheEncodersPutIt() throws {
        let encoded = Self.encodedLayouts()
        let binary = description.messages.compactMap(\.payload.layout)
        #expect(Set(binary) == Set(encoded.keys), "binary payloads without an encoding checked here")
        for (name, (bytes, values)) in encoded {
            let layout = try #require(description.layouts[name], "no layout \(name)")
            #expect(
                bytes.count >= layout.size && (name == "audioSample" || name == "cursor" || bytes.count == layout.size),
                "\(name)")
            try check(layout, in: bytes, at: 0, values: values, name: name)
        }
        #expect(VideoSampleHeader.size == description.layouts["videoSample"]?.size)
        #expect(AudioSampleHeader.size == description.layouts["audioSample"]?.size)
        #expect(SlotRelease.size == description.layouts["releaseSlot"]?.size)
        #expect(CursorSample.headerSize == description.layouts["cursor"]?.size)
        #expect(EncodedPacketHeader.size == description.layouts["encodedPacket"]?.size)
        #expect(PictureUnchanged.size == description.layouts["pictureUnchanged"]?.size)
    }

    /// Revision 2.9: the packet ring's header, where PacketRingWriter writes it: the magic, the size, and
    /// `intactFrom` raised past the packet written over when the ring wraps.
    @Test func thePacketRingHeaderIsWhereTheWriterPutsIt() throws {
        let layout = try #require(description.layouts["packetRingHeader"])
        #expect(layout.size == PacketRingLayout.headerSize)
        let offsets = Dictionary(uniqueKeysWithValues: layout.fields.map { ($0.name, $0.offset) })
        let size = PacketRingLayout.headerSize + 256
        let base = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 4096)
        defer { base.deallocate() }
        base.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        let writer = PacketRingWriter(base: base, size: size)
        let packet = [UInt8](repeating: 7, count: 100)
        for _ in 0..<3 { _ = packet.withUnsafeBytes { writer.write($0) } }
        let bytes = Array(UnsafeRawBufferPointer(start: base, count: PacketRingLayout.headerSize))
        #expect(offsets["magic"] == 0 && Array(bytes[0..<8]) == Array("BCPKRING".utf8))
        #expect(Self.value(bytes, try #require(offsets["size"]), 8) == UInt64(size))
        // The third packet wrapped onto the first: whole from the second on.
        let intactFrom = try #require(offsets["intactFrom"])
        #expect(base.load(fromByteOffset: intactFrom, as: UInt64.self) == 2 && writer.oldestIntact == 2)
        #expect(bytes[24...].allSatisfy { $0 == 0 } && offsets["reserved"] == 24)
    }

    private func check(
        _ layout: ProtocolDescription.Layout, in bytes: [UInt8], at base: Int, values: [String: UInt64], name: String
    ) throws {
        var covered = 0
        for field in layout.fields {
            #expect(field.offset == covered, "\(name).\(field.name) leaves a gap or overlaps")
            covered = field.offset + field.size
            if let nested = description.layouts[field.type] {
                #expect(nested.size == field.size, "\(name).\(field.name)")
                try check(
                    nested, in: bytes, at: base + field.offset, values: values.merging(Self.timingValues) { a, _ in a },
                    name: field.type)
                continue
            }
            let sizes = ["u8": 1, "u16": 2, "u32": 4, "i32": 4, "u64": 8, "i64": 8]
            #expect(sizes[field.type] == field.size, "\(name).\(field.name) is a \(field.type) of \(field.size) bytes")
            let expected = try #require(values[field.name], "no known value for \(name).\(field.name)")
            #expect(
                Self.value(bytes, base + field.offset, field.size) == expected,
                "\(name).\(field.name) at \(field.offset)")
        }
        #expect(covered == layout.size, "\(name)'s fields cover \(covered) of \(layout.size) bytes")
    }

    // MARK: JSON payloads and objects

    /// What a payload or object encodes to at most (every optional field set) and at least (none set).
    struct Sample: Sendable {
        var full: any Encodable & Sendable
        var minimal: any Encodable & Sendable
        init(_ full: any Encodable & Sendable, _ minimal: (any Encodable & Sendable)? = nil) {
            self.full = full
            self.minimal = minimal ?? full
        }
    }

    static let video = VideoDescription(VideoFormat(width: 64, height: 32), colorRange: "full")
    static let manifest = HandlerManifest(
        name: "n", displayName: "N", description: "d", exec: "/x", arguments: ["a"],
        url: .init(prompt: "p", default: "u", required: true, file: true),
        setupFields: [.init(name: "f", prompt: "p", default: "d", required: true, secret: true, advanced: true)],
        frameRate: .variable, discard: true,
        commands: [
            .init(name: "c", help: "h", arguments: [.init(name: "a", help: "h", type: .number, required: true)])
        ],
        camera: true
    )

    static var fullStatus: BroadcastStatus {
        var s = BroadcastStatus(state: .live, source: "synthetic")
        s.video = VideoFormat(width: 64, height: 32)
        s.audio = AudioFormat()
        s.broadcast = 1
        s.handler = "h"
        s.url = "u"
        s.elapsed = 1.5
        s.maxDuration = 9
        s.wantsPaused = false
        s.error = BroadcastError(.busy, "m")
        s.streams = ["video": StreamCounters(late: 1)]
        s.capture = ["resizes": 1]
        s.daemonMemory = 1
        s.memoryPlanned = 2
        s.memoryWarning = "w"
        s.silentAudio = ["audioMic": "why"]
        s.result = ["file": .string("/f")]
        s.broadcasts = []
        s.frameRate = 15
        s.discarded = true
        s.file = "/f"
        s.sessionLocked = true
        s.pausedForLock = true
        s.blankedForLock = true
        s.camera = "c"
        s.cameraLost = "l"
        s.encoder = 3
        s.serves = [1, 2]
        return s
    }

    static var minimalStatus: BroadcastStatus {
        var s = BroadcastStatus(state: .idle, source: "synthetic")
        // The daemon always says what the capture is (Daemon.status(of:)).
        s.video = VideoFormat(width: 64, height: 32)
        s.audio = AudioFormat()
        return s
    }

    static let capture = CaptureChoice(
        display: ":1", output: "o", region: "0,0,1x1", window: "w", app: "a", frameRate: 5, cursor: "hidden",
        excludeWindows: ["x"], camera: "default")
    static let objects: [String: Sample] = [
        "error": Sample(BroadcastError(.busy, "m")),
        "commandError": Sample(HandlerFailure(code: "c", message: "m"), HandlerFailure(message: "m")),
        "status": Sample(fullStatus, minimalStatus),
        "statusVideo": Sample(VideoFormat(width: 64, height: 32)),
        "statusAudio": Sample(AudioFormat()),
        "streamCounters": Sample(StreamCounters(late: 2), StreamCounters()),
        "videoDescription": Sample(video, VideoDescription(VideoFormat(width: 64, height: 32))),
        "plane": Sample(Plane(offset: 0, stride: 64, height: 32)),
        "audioDescription": Sample(AudioDescription(AudioFormat())),
        "capture": Sample(capture, CaptureChoice()),
        "manifest": Sample(manifest, HandlerManifest(name: "n", displayName: "N", exec: "/x")),
        "urlField": Sample(
            HandlerManifest.URLField(prompt: "p", default: "d", required: true, file: true),
            HandlerManifest.URLField(prompt: "p")),
        "setupField": Sample(
            HandlerManifest.SetupField(
                name: "n", prompt: "p", default: "d", required: true, secret: true, advanced: true, choices: ["a"],
                type: .number),
            HandlerManifest.SetupField(name: "n", prompt: "p")),
        "command": Sample(
            HandlerManifest.Command(name: "c", help: "h", arguments: []),
            HandlerManifest.Command(name: "c", help: "h")),
        "commandArgument": Sample(
            HandlerManifest.Command.Argument(name: "a", help: "h", type: .bool, required: true),
            HandlerManifest.Command.Argument(name: "a", help: "h")),
        "output": Sample(
            OutputDescription(name: "o", x: 0, y: 0, width: 1, height: 1, rotation: 90, reflected: false, primary: true)
        ),
        "window": Sample(
            WindowDescription(
                id: 1, instance: "i", class: "c", title: "t", pid: 2, x: 0, y: 0, width: 1, height: 1, mapped: true),
            WindowDescription(
                id: 1, instance: "i", class: "c", title: "t", pid: nil, x: 0, y: 0, width: 1, height: 1, mapped: true)),
        "camera": Sample(
            CameraDescription(name: "n", description: "d", serial: "1", role: "Camera", formats: [cameraFormat]),
            CameraDescription(name: "n", serial: "1")),
        "cameraFormat": Sample(cameraFormat),
        "encodedStream": Sample(fullStream, stream),
    ]
    static let stream = EncodedStreamDescription(stream: 0, kind: "video", codec: "h264", timeBase: [1, 90000])
    /// Every field set, the video's and the audio's.
    static var fullStream: EncodedStreamDescription {
        var d = GoldenBytesTests.goldenStreams[0]
        let audio = GoldenBytesTests.goldenStreams[1]
        (d.sampleFormat, d.sampleRate, d.channels, d.channelMask) = (audio.sampleFormat, 48000, 2, 3)
        (d.frameSize, d.priming, d.seekPreroll, d.title) = (960, 312, 3840, "t")
        return d
    }
    static let cameraFormat = CameraFormat(pixelFormat: "NV12", width: 2, height: 2, frameRates: [30])

    /// The Swift type each message's JSON payload is encoded from, by the message's name.
    static let payloads: [String: Sample] = [
        "HELLO": Sample(Hello(role: .controller, client: "c"), Hello(role: .handler, client: nil)),
        "WELCOME": Sample(Welcome(server: "s"), Welcome(server: "s", revision: nil, features: nil)),
        "OK": Sample(BroadcastReference(broadcast: 1, warning: "w"), Empty()),
        "HANDLERS": Sample(HandlerList(handlers: [manifest])),
        "START": Sample(StartRequest(handler: "h", maxDuration: 5, capture: capture), StartRequest(handler: "h")),
        "PAUSE": Sample(BroadcastReference(broadcast: 1), Empty()),
        "RESUME": Sample(BroadcastReference(broadcast: 1), Empty()),
        "FINISH": Sample(FinishRequest(broadcast: 1, discard: true), FinishRequest()),
        "SOURCES": Sample(
            SourceList(
                kind: "x11", source: "s", screenWidth: 1, screenHeight: 1, outputs: [], windows: [], cameras: []),
            SourceList(kind: "synthetic", source: "s")),
        "GET_SNAPSHOT": Sample(BroadcastReference(broadcast: 1), Empty()),
        "SNAPSHOT": Sample(
            SnapshotDescription(video: video, colorRange: "full", presentationTime: 1, broadcast: 1),
            SnapshotDescription(video: video, colorRange: "full", presentationTime: 1, broadcast: nil)),
        "SEND_COMMAND": Sample(
            CommandRequest(broadcast: 1, command: "c", arguments: [:]), CommandRequest(command: "c")),
        "COMMAND_RESULT": Sample(CommandResult(broadcast: 1, command: "c", result: [:])),
        "SERVICE_INFO": Sample(
            ServiceInfo(broadcast: 1, elapsed: 1.5, streams: [:], handler: [:], daemonMemory: 1),
            ServiceInfo(broadcast: 1, elapsed: 1.5, streams: [:], handler: nil)),
        "URL_UPDATED": Sample(URLUpdate(broadcast: 1, url: "u"), URLUpdate(broadcast: nil, url: "u")),
        "FINISHED": Sample(
            FinishedEvent(broadcast: 1, error: BroadcastError(.busy, "m"), result: [:], discarded: true),
            FinishedEvent(broadcast: 1, error: nil)),
        "GET_SETUP_REQUEST": Sample(BroadcastReference(broadcast: 1), Empty()),
        "SETUP_REQUEST": Sample(SetupRequest(broadcast: 1, handler: manifest)),
        "COMPLETE_SETUP": Sample(
            SetupCompletion(broadcast: 1, url: "u", setupInfo: [:]),
            SetupCompletion(broadcast: 1, url: nil, setupInfo: [:])),
        "CANCEL_SETUP": Sample(SetupCancellation(broadcast: 1, error: BroadcastError(.setupCancelled, "m"))),
        "POOL": Sample(
            PoolAnnouncement(pool: 1, slots: 10, slotSize: 4096, camera: true),
            PoolAnnouncement(pool: 1, slots: 10, slotSize: 4096)),
        "CAMERA_FORMAT": Sample(
            CameraFormatNotice(camera: "c", video: video, lost: "l"), CameraFormatNotice(camera: "c")),
        "BROADCAST_STARTED": Sample(
            BroadcastStart(
                broadcast: 1, url: "u", setupInfo: [:], video: video, audio: AudioDescription(AudioFormat()),
                frameRate: 30, audioStreams: []),
            BroadcastStart(broadcast: 1, url: nil, setupInfo: [:], video: video, audio: AudioDescription(AudioFormat()))
        ),
        "BROADCAST_PAUSED": Sample(Empty()),
        "BROADCAST_RESUMED": Sample(Empty()),
        "BROADCAST_FINISHED": Sample(
            BroadcastEnd(error: BroadcastError(.shutdown, "m"), discard: true), BroadcastEnd(error: nil)),
        "COMMAND": Sample(HandlerCommand(id: 1, command: "c", arguments: [:])),
        "UPDATE_URL": Sample(URLUpdate(broadcast: 1, url: "u"), URLUpdate(broadcast: nil, url: "u")),
        "UPDATE_SERVICE_INFO": Sample(HandlerServiceInfo(info: [:])),
        "SET_RESULT": Sample(HandlerResult(result: [:])),
        "COMMAND_ANSWER": Sample(
            HandlerCommandAnswer(id: 1, result: [:], error: HandlerFailure(message: "m")), HandlerCommandAnswer(id: 1)),
        "PACKET_RING": Sample(PacketRingAnnouncement(ring: 1, size: 4096)),
        "ENCODED_STREAMS": Sample(EncodedStreams(ring: 1, streams: [stream])),
        "ENCODING": Sample(EncodingNotice(encoder: 1, sharedWith: [1, 2], error: "e"), EncodingNotice()),
        "KEYFRAME_REQUESTED": Sample(Empty()),
        "ENCODE": Sample(EncodeRequest(settings: ["codec": "h264"])),
        "REQUEST_KEYFRAME": Sample(Empty()),
        "SHARE_RING": Sample(PacketRingAnnouncement(ring: 0, size: 4096)),
        "SHARE_STREAMS": Sample(EncodedStreams(ring: 0, streams: [stream])),
        "AUDIO_FIGURES": Sample(AudioFigures(ring: 1, stream: 1, missingMs: 20, droppedMs: 0.5, maxClockOffsetMs: 1)),
        "SHARE_AUDIO_FIGURES": Sample(
            AudioFigures(ring: 0, stream: 1, missingMs: 20, droppedMs: 0.5, maxClockOffsetMs: 1)),
    ]

    static func keys(_ value: any Encodable) -> [String: JSONValue] {
        (try? JSONDecoder().decode([String: JSONValue].self, from: Data(compactJSON(value).utf8))) ?? [:]
    }

    /// The Swift value behind key `key` of `value`, optionals unwrapped.
    static func property(_ key: String, of value: Any) -> Any? {
        guard let child = Mirror(reflecting: value).children.first(where: { $0.label == key })?.value else {
            return nil
        }
        let mirror = Mirror(reflecting: child)
        if mirror.displayStyle == .optional { return mirror.children.first?.value }
        return child
    }

    /// Whether the JSON `value` (and the Swift property behind it) is of the declared `type`.
    static func matches(_ value: JSONValue, _ type: String, swift: Any?) -> Bool {
        switch (type, value) {
        case ("string", .string), ("bool", .bool), ("object", .object), ("array", .array), ("any", _): true
        case ("integer", .number(let n)): n == n.rounded() && (swift == nil || swift is any BinaryInteger)
        case ("number", .number): swift == nil || swift is any BinaryFloatingPoint
        default: objectText(type) != nil && value.isObject
        }
    }

    static func objectText(_ type: String) -> String? { (try? ProtocolDescription.load())?.objects[type].map(\.text) }

    private func check(_ fields: [ProtocolDescription.Field], _ sample: Sample, _ name: String) {
        let full = Self.keys(sample.full)
        let minimal = Self.keys(sample.minimal)
        #expect(
            Set(full.keys) == Set(fields.map(\.name)),
            "\(name): Swift encodes \(full.keys.sorted()), described \(fields.map(\.name))")
        let required = fields.filter { $0.required == true }.map(\.name)
        #expect(
            Set(minimal.keys) == Set(required),
            "\(name): at least \(minimal.keys.sorted()) is sent, described as required \(required)")
        for field in fields {
            #expect(field.required != nil, "\(name).\(field.name) says neither required nor not")
            guard let value = full[field.name] else { continue }
            let swift = Self.property(field.name, of: sample.full)
            #expect(
                Self.matches(value, field.type, swift: swift),
                "\(name).\(field.name) is \(value), described as \(field.type)")
            if let object = field.object {
                #expect(description.objects[object] != nil, "\(name).\(field.name): no object \(object)")
            }
            for element in value.elements {
                if let items = field.items {
                    #expect(
                        Self.matches(element, items, swift: nil), "\(name).\(field.name)[]: \(element) is not \(items)")
                }
            }
            if case .object(let map) = value, let type = field.values {
                for (key, element) in map {
                    #expect(
                        Self.matches(element, type, swift: Self.property(key, of: swift as Any)),
                        "\(name).\(field.name).\(key) is not \(type)")
                }
            }
        }
    }

    @Test func everyJSONPayloadEncodesTheDescribedKeysWithTheirTypes() throws {
        var checked: Set<String> = []
        for message in description.messages where message.payload.kind == "json" {
            if let object = message.payload.object {
                #expect(description.objects[object] != nil, "\(message.name): no object \(object)")
                continue
            }
            let sample = try #require(Self.payloads[message.name], "no Swift payload of \(message.name) is checked")
            check(message.payload.fields ?? [], sample, message.name)
            checked.insert(message.name)
        }
        #expect(checked == Set(Self.payloads.keys), "payloads checked here that the description does not have")
    }

    @Test func everySharedObjectEncodesTheDescribedKeysWithTheirTypes() throws {
        for (name, object) in description.objects {
            let sample = try #require(Self.objects[name], "no Swift type of object \(name) is checked")
            check(object.fields, sample, name)
        }
        #expect(Set(description.objects.keys) == Set(Self.objects.keys))
    }

    /// Runs `python3 ARGUMENTS` in the package's folder; its status and what it printed.
    static func python(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + arguments
        process.currentDirectoryURL = URL(fileURLWithPath: ProtocolDescription.root)
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    /// docs/protocol.md's tables are what scripts/protocol_doc.py writes from the description.
    @Test func theDocumentsTablesAreGeneratedFromTheDescription() throws {
        let check = try Self.python(["scripts/protocol_doc.py", "--check"])
        #expect(check.status == 0, "\(check.output)")
        #expect(check.output.contains("generated blocks match"), "\(check.output)")
    }

    /// The Python package's own tests: its opcodes, layouts and golden bytes against the description, its clients'
    /// feature checks, the conformance check's rules.
    @Test func thePythonPackageAgreesWithTheDescription() throws {
        let run = try Self.python(["-m", "unittest", "discover", "-s", "python/tests", "-t", "python/tests"])
        #expect(run.status == 0 && run.output.contains("\nOK"), "\(run.output)")
    }

    /// Revision 2.9: the bounds the description gives ENCODE's settings, the ring and the streams are Swift's, and a
    /// stream description is refused just past each bound of `encodedStream` and taken at it.
    @Test func theEncodedSamplesBoundsAreSwifts() throws {
        func field(_ message: String, _ name: String) throws -> ProtocolDescription.Field {
            let entry = try #require(description.messages.first { $0.name == message })
            return try #require(entry.payload.fields?.first { $0.name == name })
        }
        let settings = try field("ENCODE", "settings")
        #expect(settings.maxItems == EncodeRequest.maxSettings && settings.maxKeyBytes == EncodeRequest.maxKeyBytes)
        #expect(settings.maxValueBytes == EncodeRequest.maxValueBytes)
        let most = Dictionary(uniqueKeysWithValues: (0..<EncodeRequest.maxSettings).map { ("k\($0)", "v") })
        #expect(EncodeRequest(settings: most).problem == nil)
        #expect(EncodeRequest(settings: most.merging(["one": "more"]) { a, _ in a }).problem != nil)
        let key = String(repeating: "k", count: EncodeRequest.maxKeyBytes)
        let value = String(repeating: "v", count: EncodeRequest.maxValueBytes)
        #expect(EncodeRequest(settings: [key: value]).problem == nil)
        #expect(EncodeRequest(settings: [key + "k": value]).problem != nil)
        #expect(EncodeRequest(settings: [key: value + "v"]).problem != nil)
        #expect(EncodeRequest(settings: ["": "v"]).problem != nil)
        for message in ["PACKET_RING", "SHARE_RING"] {
            #expect(try field(message, "size").max == PacketRingAnnouncement.maxSize)
        }
        for message in ["ENCODED_STREAMS", "SHARE_STREAMS"] {
            #expect(try field(message, "streams").maxItems == EncodedStreams.maxStreams)
        }
        #expect(EncodedStreams(ring: 1, streams: []).problem != nil)
        // Revision 2.10: each audio figure from 0 to its bound.
        for message in ["AUDIO_FIGURES", "SHARE_AUDIO_FIGURES"] {
            for name in ["missingMs", "droppedMs", "maxClockOffsetMs"] {
                let bounds = try field(message, name)
                #expect(bounds.min == 0 && bounds.max == Int(AudioFigures.maxMs), "\(message).\(name)")
            }
        }
        let figures = AudioFigures(ring: 1, stream: 1, missingMs: 0, droppedMs: AudioFigures.maxMs, maxClockOffsetMs: 0)
        #expect(figures.problem == nil)
        for wrong in [-0.1, AudioFigures.maxMs * 1.01, .nan, .infinity] {
            var past = figures
            past.missingMs = wrong
            #expect(past.problem != nil, "missingMs \(wrong)")
        }
        let video = GoldenBytesTests.goldenStreams[0]
        let audio = GoldenBytesTests.goldenStreams[1]
        #expect(video.problem == nil && audio.problem == nil)
        let numbers: [String: (WritableKeyPath<EncodedStreamDescription, Int?>, EncodedStreamDescription)] = [
            "width": (\.width, video), "height": (\.height, video), "sampleRate": (\.sampleRate, audio),
            "channels": (\.channels, audio),
        ]
        let names: [String: WritableKeyPath<EncodedStreamDescription, String?>] = [
            "pixelFormat": \.pixelFormat, "colorRange": \.colorRange, "colorPrimaries": \.colorPrimaries,
            "colorTransfer": \.colorTransfer, "colorSpace": \.colorSpace, "chromaLocation": \.chromaLocation,
            "sampleFormat": \.sampleFormat, "title": \.title,
        ]
        let fields = try #require(description.objects["encodedStream"]).fields
        var checked: Set<String> = []
        for field in fields {
            if let (path, base) = numbers[field.name] {
                let (low, high) = (try #require(field.min), try #require(field.max))
                for (number, taken) in [(low, true), (high, true), (low - 1, false), (high + 1, false)] {
                    var d = base
                    d[keyPath: path] = number
                    #expect((d.problem == nil) == taken, "\(field.name) \(number): \(d.problem ?? "taken")")
                }
                checked.insert(field.name)
            } else if let bytes = field.maxBytes {
                let path = names[field.name]
                for (count, taken) in [(bytes, true), (bytes + 1, false)] {
                    var d = video
                    let text = String(repeating: "x", count: count)
                    if let path { d[keyPath: path] = text } else { d.codec = text }
                    #expect((d.problem == nil) == taken, "\(field.name) of \(count) bytes")
                }
                checked.insert(field.name)
            }
        }
        #expect(checked == Set(numbers.keys).union(names.keys).union(["codec"]), "bounds described: \(checked)")
        // The base64 of the largest global header is taken, four characters more are not.
        var large = video
        large.extradata = String(repeating: "A", count: (EncodedStreamDescription.maxExtradata + 2) / 3 * 4)
        #expect(large.problem == nil)
        large.extradata! += "AAAA"
        #expect(large.problem != nil)
    }

    /// The limits that are payloads are what the decoders enforce.
    @Test func theDescribedLimitsAreEnforced() throws {
        let keys = try #require(description.limits.first { $0.name == "maxServiceInfoKeys" }?.value)
        let info = Dictionary(uniqueKeysWithValues: (0...keys).map { ("k\($0)", JSONValue.bool(true)) })
        #expect(throws: ProtocolError.self) {
            try HandlerServiceInfo.decodeWithinLimits(.json(.updateServiceInfo, HandlerServiceInfo(info: info)))
        }
        var fewer = info
        fewer["k0"] = nil
        #expect(
            try HandlerServiceInfo.decodeWithinLimits(.json(.updateServiceInfo, HandlerServiceInfo(info: fewer))).count
                == keys)
    }
}

extension JSONValue {
    var isObject: Bool { if case .object = self { true } else { false } }
    var elements: [JSONValue] { if case .array(let a) = self { a } else { [] } }
}
