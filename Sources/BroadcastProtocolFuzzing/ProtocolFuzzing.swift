import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Glibc

/// The protocol decoder as a fuzz target: what libFuzzer runs (`scripts/fuzz.sh`) and what the unit
/// tests replay (the seeds and every input that once crashed, `Tests/fixtures/fuzz`).
public enum ProtocolFuzzing {
    /// Feeds `input` to a `MessageDecoder` as a peer's byte stream and every decoded message to the
    /// payload decoders. The first byte chooses the mode: bits 0–3 the size of the pieces the stream
    /// arrives in (1 to 16 bytes times 2^(bits 4–5)), bit 6 a peer's decoder (skips unknown opcodes),
    /// bit 7 whether four descriptors come with the first piece (which no seed's header declares: the
    /// decoder must refuse them and decode nothing). Anything but a `ProtocolError` is a
    /// defect, and so is a decoded message that does not encode back to the bytes it came from:
    /// both stop the process (a crash for the fuzzer).
    @discardableResult
    public static func exercise(_ input: [UInt8]) -> Int {
        guard let mode = input.first else { return 0 }
        let stream = Array(input.dropFirst())
        let piece = (Int(mode & 0x0f) + 1) << Int((mode >> 4) & 0x3)
        let skips = mode & 0x40 != 0
        var decoder = MessageDecoder(skipsUnknownOpcodes: skips)
        if mode & 0x80 != 0 { decoder.append(descriptors: (0..<4).compactMap { _ in devNull() }) }
        var decoded: [UInt8] = []
        var count = 0
        var offset = 0
        feeding: while offset < stream.count {
            let end = min(stream.count, offset + piece)
            decoder.append(Array(stream[offset..<end]))
            offset = end
            do {
                while let message = try decoder.next() {
                    decodePayload(message)
                    decoded += message.encoded()
                    count += 1
                }
            } catch {
                break feeding
            }
        }
        // Without skipping, what was decoded is the stream's beginning, byte for byte.
        if !skips {
            precondition(
                decoded.count <= offset && decoded[...] == stream[..<decoded.count],
                "decoded messages do not encode back to the bytes they came from")
        }
        return count
    }

    /// Valid streams to start from: one of each kind of message, as the real encoders write them.
    public static var seeds: [[UInt8]] {
        let timing = SampleTiming(presentationTime: 1_000_000, duration: 33_333_333, sequence: 7, discontinuity: false)
        var video: [UInt8] = []
        VideoSampleHeader(
            timing: timing, orientation: Orientation(degrees: 0, mirrored: false), pool: 1, slot: 2,
            format: VideoFormat(width: 64, height: 32)
        ).encode(into: &video)
        var audio: [UInt8] = []
        AudioSampleHeader(
            timing: timing, type: .audioApp, format: AudioFormat(channels: 2, sampleFormat: .float32), frameCount: 2
        ).encode(into: &audio)
        audio += [UInt8](repeating: 0, count: 16)
        let messages: [Message] = [
            .json(.hello, seq: 1, Hello(role: .controller, client: "fuzz")),
            .json(.start, seq: 2, StartRequest(handler: "record", maxDuration: 5)),
            Message(.getStatus, seq: 3),
            .json(
                .completeSetup, seq: 4,
                SetupCompletion(broadcast: 1, url: "srt://example:9000?streamid=x", setupInfo: ["k": "v"])),
            .json(
                .updateServiceInfo, seq: 0, HandlerServiceInfo(info: ["bitRate": .number(2500), "live": .bool(true)])),
            .json(
                .setResult, seq: 0,
                HandlerResult(result: ["path": .string("/tmp/a.mp4"), "segments": .array([.number(1)])])),
            Message(.videoSample, payload: video),
            Message(.audioSample, payload: audio),
            SlotRelease(pool: 1, slot: 2).message,
        ]
        let stream = messages.flatMap { $0.encoded() }
        return [[0x0f] + stream, [0x00] + stream, [0x4f] + stream, [0x8f] + stream]
    }

    static func decodePayload(_ message: Message) {
        _ = try? VideoSampleHeader(decoding: message.payload)
        _ = try? AudioSampleHeader(decoding: message.payload)
        _ = try? CursorSample(decoding: message.payload)
        _ = try? SlotRelease(decoding: message.payload)
        _ = try? message.decode(Hello.self)
        _ = try? message.decode(StartRequest.self)
        _ = try? message.decode(SetupCompletion.self)
        _ = try? message.decode(SetupCancellation.self)
        _ = try? message.decode(HandlerFailure.self)
        _ = try? message.decode(HandlerServiceInfo.self)
        _ = try? message.decode(HandlerResult.self)
        _ = try? message.decode(URLUpdate.self)
        _ = try? message.decode(BroadcastStatus.self)
        _ = try? message.decode(CameraFormatNotice.self)
    }

    private static func devNull() -> Descriptor? {
        let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
        return fd < 0 ? nil : Descriptor(adopting: fd)
    }
}

/// The JSON payload decoder as a fuzz target: `input` is the payload of every JSON message the
/// daemon reads from peers. Decoding must fail with a `ProtocolError` or succeed, in time linear in
/// the input (libFuzzer's timeout catches the rest), and text nested deeper than `JSONDepth.limit`
/// must be refused before any decoder sees it.
public enum JSONFuzzing {
    public static func exercise(_ input: [UInt8]) {
        for opcode in [
            Opcode.hello, .start, .completeSetup, .cancelSetup, .finishWithError, .updateServiceInfo, .setResult,
            .updateURL,
        ] {
            ProtocolFuzzing.decodePayload(Message(opcode, payload: input))
        }
        if JSONDepth.excess(input) != nil {
            do {
                _ = try Message(.setResult, payload: input).decode(HandlerResult.self)
                preconditionFailure("JSON nested deeper than \(JSONDepth.limit) levels was decoded")
            } catch {
                precondition(
                    error == .malformed(.setResult, "JSON nested deeper than \(JSONDepth.limit) levels"), "\(error)")
            }
        }
    }

    /// Payloads to start from: what the real encoders write, and nesting at and past the limit.
    public static var seeds: [[UInt8]] {
        let deep = { (n: Int) in
            Array(
                ("{\"result\":{\"x\":" + String(repeating: "[", count: n) + String(repeating: "]", count: n) + "}}")
                    .utf8)
        }
        return [
            Message.json(.hello, Hello(role: .controller, client: "fuzz")).payload,
            Message.json(
                .completeSetup,
                SetupCompletion(broadcast: 1, url: "srt://example:9000?streamid=x", setupInfo: ["k": "v"])
            ).payload,
            Message.json(
                .updateServiceInfo,
                HandlerServiceInfo(info: ["bitRate": .number(2.5e3), "live": .bool(true), "s": .string("a\\\"[")])
            ).payload,
            Message.json(
                .setResult,
                HandlerResult(result: ["path": .string("/tmp/a.mp4"), "segments": .array([.object(["n": .null])])])
            ).payload,
            deep(JSONDepth.limit - 2), deep(JSONDepth.limit + 1),
        ]
    }
}
