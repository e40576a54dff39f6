import BroadcastCore
import BroadcastProtocol
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The golden bytes of docs/protocol.json (which docs/protocol.md shows as its `Golden: NAME` blocks) must be exactly
/// what the code sends.
@Suite struct GoldenBytesTests {
    static let document: String = {
        let root = String(#filePath).split(separator: "/").dropLast(3).joined(separator: "/")
        guard let file = fopen("/" + root + "/docs/protocol.md", "r") else { return "" }
        defer { fclose(file) }
        var text = ""
        var buffer = [CChar](repeating: 0, count: 4096)
        while fgets(&buffer, 4096, file) != nil {
            text += String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return text
    }()

    /// The golden bytes `name` of docs/protocol.json.
    static func golden(_ name: String) -> [UInt8]? { ProtocolDescription.golden(name) }

    /// Every example has a test here: a new one without a test fails.
    @Test func everyGoldenExampleIsChecked() throws {
        let checked = [
            "hello-controller", "start-capture", "start-exclude-window", "start-camera", "sources-camera",
            "change-capture", "error-field-out-of-range",
            "pause-broadcast", "get-snapshot", "finish-discard", "broadcast-finished-discard",
            "finished-discarded", "release-slot", "video-sample", "cursor", "set-result", "send-command",
            "command", "command-answer", "command-result", "welcome", "error-unsupported", "camera-format",
            "camera-sample", "encode", "encoding", "packet-ring", "encoded-streams", "encoded-packet",
            "picture-unchanged", "audio-figures",
        ]
        let described = try ProtocolDescription.load().golden
        #expect(Set(described.map(\.name)) == Set(checked))
        for example in described {
            let bytes = example.bytes
            guard bytes.count >= 12 else {
                Issue.record("\(example.name) is shorter than a header")
                continue
            }
            let opcode = Opcode(rawValue: bytes.loadLittleEndian(UInt16.self, at: 4))
            #expect(opcode?.name == example.message, "\(example.name) is not a \(example.message)")
            #expect(bytes.count == 12 + Int(bytes.loadLittleEndian(UInt32.self, at: 0)), "\(example.name)'s size")
        }
    }

    /// Revision 2.6: what broadcastd answers a controller's HELLO, and a message of an opcode it does not know.
    @Test func welcomeAndUnsupported() throws {
        let welcome = Message.json(.welcome, seq: 1, Welcome(server: "broadcastd 0.1.0")).encoded()
        #expect(Self.golden("welcome") == welcome, "\(String(decoding: welcome.dropFirst(12), as: UTF8.self))")
        let refusal = BroadcastError(
            .unsupported,
            "broadcastd (protocol revision 2.6) has no message 0x0400; "
                + "its WELCOME's revision and features say what it offers")
        let error = Message.json(.error, seq: 8, refusal).encoded()
        #expect(Self.golden("error-unsupported") == error, "\(String(decoding: error.dropFirst(12), as: UTF8.self))")
    }

    @Test func documentIsThere() {
        #expect(!Self.document.isEmpty, "docs/protocol.md could not be read")
    }

    @Test func helloFromAController() throws {
        let bytes = Message.json(.hello, seq: 1, Hello(role: .controller, client: "broadcastctl")).encoded()
        #expect(Self.golden("hello-controller") == bytes)
        #expect(
            String(decoding: bytes.dropFirst(12), as: UTF8.self)
                == #"{"client":"broadcastctl","protocol":2,"role":"controller"}"#)
    }

    @Test func startChoosingItsCapture() throws {
        let request = StartRequest(handler: "record", capture: CaptureChoice(region: "0,0,1280x720", frameRate: 60))
        let bytes = Message.json(.start, seq: 5, request).encoded()
        #expect(Self.golden("start-capture") == bytes)
        #expect(try Message(.start, payload: Array(bytes.dropFirst(12))).decode(StartRequest.self) == request)
    }

    /// Revision 2.7: a broadcast that leaves windows out, beside broadcastd's own list.
    @Test func startThatLeavesWindowsOut() throws {
        let request = StartRequest(
            handler: "record", capture: CaptureChoice(excludeWindows: ["KeePassXC", "Thunderbird"]))
        let bytes = Message.json(.start, seq: 7, request).encoded()
        #expect(Self.golden("start-exclude-window") == bytes)
        #expect(try Message(.start, payload: Array(bytes.dropFirst(12))).decode(StartRequest.self) == request)
    }

    /// Revision 2.8: a broadcast with the default camera.
    @Test func startWithTheCamera() throws {
        let request = StartRequest(handler: "record", capture: CaptureChoice(camera: "default"))
        let bytes = Message.json(.start, seq: 8, request).encoded()
        #expect(Self.golden("start-camera") == bytes)
        #expect(try Message(.start, payload: Array(bytes.dropFirst(12))).decode(StartRequest.self) == request)
    }

    /// Revision 2.8: SOURCES lists the cameras with their formats.
    @Test func sourcesListingACamera() throws {
        let camera = CameraDescription(
            name: "testcam", description: "Test Camera", serial: "42", role: "Camera",
            formats: [CameraFormat(pixelFormat: "YUY2", width: 1280, height: 720, frameRates: [30, 15])])
        let list = SourceList(kind: "pipewire", source: "PipeWire node screen", cameras: [camera])
        let bytes = Message.json(.sources, seq: 9, list).encoded()
        #expect(Self.golden("sources-camera") == bytes)
        #expect(try Message(.sources, payload: Array(bytes.dropFirst(12))).decode(SourceList.self) == list)
    }

    @Test func changeOfTheRunningCapture() throws {
        let bytes = Message.json(.changeCapture, seq: 6, CaptureChoice(region: "0,0,1280x720")).encoded()
        #expect(Self.golden("change-capture") == bytes)
    }

    /// Revision 2.5: a request that is JSON with a number its field cannot take is refused naming the field.
    @Test func refusalOfAFieldOutOfRange() throws {
        let request = Message(.sendCommand, seq: 7, payload: Array(#"{"broadcast":-1,"command":"save"}"#.utf8))
        #expect(request.isJSON)
        let refusal = #expect(throws: ProtocolError.self) { try request.decode(CommandRequest.self) }
        guard case .malformed(_, let why)? = refusal else { return }
        let bytes = Message.json(.error, seq: 7, BroadcastError(.invalidRequest, "SEND_COMMAND is refused: \(why)"))
            .encoded()
        #expect(
            Self.golden("error-field-out-of-range") == bytes, "\(String(decoding: bytes.dropFirst(12), as: UTF8.self))")
    }

    @Test func pauseOfOneBroadcast() {
        #expect(
            Self.golden("pause-broadcast") == Message.json(.pause, seq: 4, BroadcastReference(broadcast: 2)).encoded())
    }

    @Test func releaseSlot() {
        #expect(Self.golden("release-slot") == SlotRelease(pool: 1, slot: 2).message.encoded())
    }

    @Test func videoSample() {
        let timing = SampleTiming(
            presentationTime: 1_000_000_000, duration: 33_333_333, sequence: 7, discontinuity: true)
        var payload: [UInt8] = []
        VideoSampleHeader(
            timing: timing, orientation: Orientation(degrees: 90, mirrored: true), pool: 1, slot: 2,
            format: VideoFormat(width: 1920, height: 1080, pixelFormat: .nv12)
        ).encode(into: &payload)
        #expect(Self.golden("video-sample") == Message(.videoSample, payload: payload).encoded())
    }

    /// Revision 2.8: the camera's format, and its first frame in a slot of its own pool.
    @Test func cameraFormatAndSample() throws {
        let format = VideoFormat(width: 1280, height: 720, pixelFormat: .nv12)
        let notice = CameraFormatNotice(
            camera: "testcam (Test Camera, serial 42)", video: VideoDescription(format, colorRange: "limited"))
        let bytes = Message.json(.cameraFormat, notice).encoded()
        #expect(Self.golden("camera-format") == bytes, "\(String(decoding: bytes.dropFirst(12), as: UTF8.self))")
        #expect(
            try Message(.cameraFormat, payload: Array(bytes.dropFirst(12))).decode(CameraFormatNotice.self) == notice)
        let timing = SampleTiming(
            presentationTime: 1_000_000_000, duration: 33_333_333, sequence: 0, discontinuity: true)
        var payload: [UInt8] = []
        VideoSampleHeader(timing: timing, orientation: .up, pool: 2, slot: 1, format: format).encode(into: &payload)
        #expect(Self.golden("camera-sample") == Message(.cameraSample, payload: payload).encoded())
    }

    /// Revision 2.9: a handler asks for encoded samples and is given a shared encoder, its ring, its streams, a
    /// keyframe and a still picture.
    @Test func encodedSamples() throws {
        func hex(_ bytes: [UInt8]) -> String { bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }
        func expectGolden(_ name: String, _ bytes: [UInt8]) {
            #expect(Self.golden(name) == bytes, "\(name): \(hex(bytes))")
        }
        let request = EncodeRequest(settings: ["codec": "h264", "audio": "none"])
        let encode = Message.json(.encode, request).encoded()
        expectGolden("encode", encode)
        #expect(try Message(.encode, payload: Array(encode.dropFirst(12))).decode(EncodeRequest.self) == request)
        expectGolden("encoding", Message.json(.encoding, EncodingNotice(encoder: 4, sharedWith: [2, 3])).encoded())
        // PACKET_RING carries the ring's descriptor: the header counts it.
        let ring = Message.json(.packetRing, PacketRingAnnouncement(ring: 4, size: 16 << 20)).payload
        var packetRing: [UInt8] = []
        Message.appendHeader(to: &packetRing, opcode: .packetRing, seq: 0, payloadSize: ring.count, descriptorCount: 1)
        expectGolden("packet-ring", packetRing + ring)
        let streams = EncodedStreams(ring: 4, streams: Self.goldenStreams)
        #expect(streams.problem == nil)
        let streamBytes = Message.json(.encodedStreams, streams).encoded()
        expectGolden("encoded-streams", streamBytes)
        #expect(Self.document.contains("\n" + compactJSON(streams) + "\n"), "the ENCODED_STREAMS example's JSON")
        #expect(
            try Message(.encodedStreams, payload: Array(streamBytes.dropFirst(12))).decode(EncodedStreams.self)
                == streams)
        let header = EncodedPacketHeader(
            ring: 4, stream: 0, sequence: 1, offset: 64, length: 48213, flags: .keyframe, pts: 0, dts: 0,
            duration: 3000)
        let packet = header.message(.encodedPacket).encoded()
        expectGolden("encoded-packet", packet)
        #expect(try EncodedPacketHeader(decoding: Array(packet.dropFirst(12)), of: .encodedPacket) == header)
        let still = PictureUnchanged(through: 2_500_000_000).message(.pictureUnchanged).encoded()
        expectGolden("picture-unchanged", still)
        let through = try PictureUnchanged(decoding: Array(still.dropFirst(12)), of: .pictureUnchanged).through
        #expect(through == 2_500_000_000)
        let figures = AudioFigures(ring: 4, stream: 1, missingMs: 20, droppedMs: 0, maxClockOffsetMs: 1.5)
        let told = Message.json(.audioFigures, figures).encoded()
        expectGolden("audio-figures", told)
        #expect(try Message(.audioFigures, payload: Array(told.dropFirst(12))).decode(AudioFigures.self) == figures)
    }

    /// An H.264 stream at 1920x1080 (libx264's parameter sets, Annex B) and an Opus track, as ENCODED_STREAMS says.
    static let goldenStreams: [EncodedStreamDescription] = {
        var video = EncodedStreamDescription(stream: 0, kind: "video", codec: "h264", timeBase: [1, 90000])
        video.extradata = "AAAAAWdkACis2UB4AiflwEQAAAMABAAAAwDwPGDGWAAAAAFo74/L"
        (video.profile, video.level, video.bitRate) = (100, 40, 0)
        (video.width, video.height, video.pixelFormat, video.frameRate) = (1920, 1080, "yuv420p", [30, 1])
        (video.colorRange, video.colorPrimaries, video.colorTransfer) = ("tv", "bt709", "bt709")
        (video.colorSpace, video.chromaLocation, video.rotation, video.mirrored) = ("bt709", "left", 0, false)
        var audio = EncodedStreamDescription(stream: 1, kind: "audio", codec: "opus", timeBase: [1, 48000])
        audio.extradata = "T3B1c0hlYWQBAjgBgLsAAAAAAA=="
        (audio.sampleFormat, audio.sampleRate, audio.channels, audio.channelMask) = ("flt", 48000, 2, 3)
        (audio.frameSize, audio.priming, audio.seekPreroll, audio.title) = (960, 312, 3840, "App audio")
        return [video, audio]
    }()

    @Test func cursor() throws {
        let sample = CursorSample(
            presentationTime: 1_000_000_000, x: 200, y: -5, visible: true,
            sprite: .init(width: 2, height: 1, hotspotX: 1, hotspotY: 0, pixels: [0xff00_0000, 0x8080_8080]))
        let bytes = sample.message.encoded()
        #expect(Self.golden("cursor") == bytes)
        #expect(try CursorSample(decoding: Array(bytes.dropFirst(12))) == sample)
    }

    @Test func setResult() throws {
        let result = HandlerResult(result: [
            "duration": .number(12.5), "path": .string("/tmp/rec.mkv"),
            "segments": .array([.object(["frames": .number(375), "path": .string("/tmp/rec-0.mkv")])]),
        ])
        let bytes = Message.json(.setResult, result).encoded()
        #expect(Self.golden("set-result") == bytes)
        #expect(try Message(.setResult, payload: Array(bytes.dropFirst(12))).decode(HandlerResult.self) == result)
    }

    @Test func discard() throws {
        let finish = Message.json(.finish, seq: 4, FinishRequest(broadcast: 3, discard: true)).encoded()
        #expect(Self.golden("finish-discard") == finish)
        let end = Message.json(.broadcastFinished, BroadcastEnd(error: nil, discard: true)).encoded()
        #expect(Self.golden("broadcast-finished-discard") == end)
        let finished = FinishedEvent(
            broadcast: 3, error: nil, result: ["discarded": .bool(true), "duration": .number(4.2)], discarded: true)
        #expect(Self.golden("finished-discarded") == Message.json(.finished, finished).encoded())
        // A 1.0 or 1.1 FINISH (empty, or `{}`) is a plain finish.
        #expect(try Message(.finish, payload: []).decode(FinishRequest.self) == FinishRequest())
        #expect(try Message(.finish, payload: Array("{}".utf8)).decode(FinishRequest.self) == FinishRequest())
    }

    /// Revision 2.3: a command from a controller to a handler and its answer, each way.
    @Test func commands() throws {
        let request = CommandRequest(broadcast: 1, command: "save", arguments: ["last": .number(30)])
        #expect(Self.golden("send-command") == Message.json(.sendCommand, seq: 5, request).encoded())
        let command = HandlerCommand(id: 1, command: "save", arguments: ["last": .number(30)])
        #expect(Self.golden("command") == Message.json(.command, command).encoded())
        let answer = HandlerCommandAnswer(id: 1, result: ["path": .string("/tmp/a.mp4")])
        let answerBytes = Message.json(.commandAnswer, answer).encoded()
        #expect(Self.golden("command-answer") == answerBytes)
        #expect(
            try Message(.commandAnswer, payload: Array(answerBytes.dropFirst(12))).decode(HandlerCommandAnswer.self)
                == answer)
        let result = CommandResult(broadcast: 1, command: "save", result: ["path": .string("/tmp/a.mp4")])
        #expect(Self.golden("command-result") == Message.json(.commandResult, seq: 5, result).encoded())
    }

    @Test func snapshot() throws {
        #expect(Self.golden("get-snapshot") == Message.json(.getSnapshot, seq: 3, Empty()).encoded())
        // The SNAPSHOT example is what broadcastd writes for a 640x360 NV12 frame.
        let description = SnapshotDescription(
            video: VideoDescription(VideoFormat(width: 640, height: 360, pixelFormat: .nv12)),
            colorRange: "limited", presentationTime: 15_640_205_671_545, broadcast: nil)
        #expect(
            Self.document.contains("\n" + compactJSON(description) + "\n"),
            "the SNAPSHOT example is not \(compactJSON(description))")
    }

    @Test func aRepeatedVideoSampleSetsFlagBit1() throws {
        let timing = SampleTiming(presentationTime: 5, duration: 1, sequence: 3, discontinuity: false)
        var payload: [UInt8] = []
        VideoSampleHeader(
            timing: timing, orientation: .up, pool: 1, slot: 0, format: VideoFormat(width: 64, height: 64),
            repeated: true
        ).encode(into: &payload)
        #expect(payload[24] == 2)
        #expect(try VideoSampleHeader(decoding: payload).repeated)
    }

    @Test func everyOpcodeIsDocumented() {
        for opcode in Opcode.allCases {
            let hex = String(opcode.rawValue, radix: 16)
            let padded = "0x" + String(repeating: "0", count: 4 - hex.count) + hex
            #expect(
                Self.document.contains(opcode.name) && Self.document.lowercased().contains(padded),
                "\(opcode.name) (\(padded)) missing from docs/protocol.md")
        }
    }
}
