import BroadcastCore
import BroadcastProtocol
import BroadcastProtocolFuzzing
import BroadcastSystem
import Foundation
import Testing

@Suite struct FramingTests {
    /// A stream of several messages of different sizes.
    func sampleStream() -> [Message] {
        [
            .json(.hello, seq: 1, Hello(role: .controller, client: "test")),
            Message(.getStatus, seq: 2),
            SlotRelease(pool: 1, slot: 3).message,
            Message(.audioSample, seq: 0, payload: (0..<300).map { UInt8($0 % 251) }),
            .json(.start, seq: 3, StartRequest(handler: "inspect", maxDuration: 5)),
        ]
    }

    func same(_ a: [Message], _ b: [Message]) -> Bool {
        a.count == b.count
            && zip(a, b).allSatisfy { $0.opcode == $1.opcode && $0.seq == $1.seq && $0.payload == $1.payload }
    }

    @Test func splitAtEveryByteBoundary() throws {
        let messages = sampleStream()
        let bytes = messages.flatMap { $0.encoded() }
        for split in 0...bytes.count {
            var decoder = MessageDecoder()
            var out: [Message] = []
            decoder.append(Array(bytes[..<split]))
            while let m = try decoder.next() { out.append(m) }
            decoder.append(Array(bytes[split...]))
            while let m = try decoder.next() { out.append(m) }
            #expect(same(out, messages), "split at \(split)")
            #expect(decoder.pendingByteCount == 0)
        }
    }

    @Test func oneByteAtATime() throws {
        let messages = sampleStream()
        var decoder = MessageDecoder()
        var out: [Message] = []
        for byte in messages.flatMap({ $0.encoded() }) {
            decoder.append([byte])
            while let m = try decoder.next() { out.append(m) }
        }
        #expect(same(out, messages))
    }

    @Test func jsonPayloadsRoundTrip() throws {
        let start = StartRequest(handler: "inspect", maxDuration: 2.5)
        #expect(try Message.json(.start, start).decode(StartRequest.self) == start)
        var status = BroadcastStatus(state: .paused, source: "synthetic")
        status.broadcast = 3
        status.video = VideoFormat(width: 640, height: 480, pixelFormat: .i420)
        status.audio = AudioFormat(channels: 1, sampleFormat: .s16)
        status.error = BroadcastError(.handlerError, "boom")
        status.streams = ["video": StreamCounters(delivered: 10, dropped: 2)]
        #expect(try Message.json(.status, status).decode(BroadcastStatus.self) == status)
        let text = String(decoding: Message.json(.status, status).payload, as: UTF8.self)
        #expect(
            text.contains(#""pixelFormat":"i420""#) && text.contains(#""sampleFormat":"s16""#),
            "formats travel by name: \(text)")
        let info = HandlerServiceInfo(info: ["bitrate": .number(6000), "server": .string("x"), "ok": .bool(true)])
        #expect(try Message.json(.updateServiceInfo, info).decode(HandlerServiceInfo.self) == info)
    }

    @Test func malformedJSONSaysWhatIsWrong() {
        let missing = #expect(throws: ProtocolError.self) {
            try Message(.start, payload: Array(#"{"maxDuration":1}"#.utf8)).decode(StartRequest.self)
        }
        #expect(missing?.description.contains("missing field 'handler'") == true)
        let garbage = #expect(throws: ProtocolError.self) {
            try Message(.start, payload: Array("{nope".utf8)).decode(StartRequest.self)
        }
        #expect(garbage?.description.contains("START") == true)
    }

    @Test func resultsNestAndRoundTrip() throws {
        let result = HandlerResult(result: [
            "path": .string("/tmp/rec.mkv"), "duration": .number(12.5), "complete": .bool(true), "note": .null,
            "segments": .array([.object(["frames": .number(375), "tags": .array([])]), .number(1)]),
        ])
        #expect(try Message.json(.setResult, result).decode(HandlerResult.self) == result)
        let text = #"{"result":{"a":[1,"x",[true,null],{"b":{}}]}}"#
        #expect(
            try Message(.setResult, payload: Array(text.utf8)).decode(HandlerResult.self).result["a"]
                == .array([.number(1), .string("x"), .array([.bool(true), .null]), .object(["b": .object([:])])]))
        // Nested values print as compact JSON with sorted keys, scalars as plain text.
        #expect(result.result["segments"]!.description == #"[{"frames":375,"tags":[]},1]"#)
        #expect(result.result["path"]!.description == "/tmp/rec.mkv")
        #expect(throws: ProtocolError.self) {
            try Message(.setResult, payload: Array(#"{"result":[1]}"#.utf8)).decode(HandlerResult.self)
        }
    }

    @Test func serviceInfoStaysFlat() throws {
        let flat = #"{"info":{"bitrate":2500,"state":"connected","ok":false,"none":null}}"#
        #expect(
            try Message(.updateServiceInfo, payload: Array(flat.utf8)).decode(HandlerServiceInfo.self).info.count == 4)
        for nested in [#"{"info":{"bitrate":1,"peers":[1,2]}}"#, #"{"info":{"bitrate":1,"peers":{"a":1}}}"#] {
            let error = #expect(throws: ProtocolError.self) {
                try Message(.updateServiceInfo, payload: Array(nested.utf8)).decode(HandlerServiceInfo.self)
            }
            #expect(
                error?.description == "malformed UPDATE_SERVICE_INFO: wrong type at 'info.peers'",
                "\(String(describing: error))")
        }
    }

    @Test func oversizedMessageIsRejectedFromItsHeader() {
        var bytes: [UInt8] = []
        Message.appendHeader(
            to: &bytes, opcode: .hello, seq: 1, payloadSize: ProtocolLimits.maxPayload + 1, descriptorCount: 0)
        var decoder = MessageDecoder()
        decoder.append(bytes)
        #expect(throws: ProtocolError.oversized(opcode: Opcode.hello.rawValue, size: ProtocolLimits.maxPayload + 1)) {
            try decoder.next()
        }
    }

    @Test func tooManyAndMissingDescriptorsAndUnknownOpcodes() {
        var bytes: [UInt8] = []
        Message.appendHeader(to: &bytes, opcode: .pool, seq: 0, payloadSize: 0, descriptorCount: 5)
        var decoder = MessageDecoder()
        decoder.append(bytes)
        #expect(throws: ProtocolError.tooManyDescriptors(opcode: Opcode.pool.rawValue, count: 5)) { try decoder.next() }

        bytes = []
        Message.appendHeader(to: &bytes, opcode: .pool, seq: 0, payloadSize: 0, descriptorCount: 1)
        decoder = MessageDecoder()
        decoder.append(bytes)
        #expect(throws: ProtocolError.missingDescriptors(opcode: Opcode.pool.rawValue, expected: 1, received: 0)) {
            try decoder.next()
        }

        bytes = [0, 0, 0, 0, 0xee, 0xee, 0, 0, 0, 0, 0, 0]
        decoder = MessageDecoder()
        decoder.append(bytes)
        #expect(throws: ProtocolError.unknownOpcode(0xeeee)) { try decoder.next() }
    }

    @Test func peersSkipMessagesOfALaterVersionWithTheirDescriptors() throws {
        // An unknown message with a 3-byte payload and one descriptor, then an OK, arriving in one read.
        var bytes: [UInt8] = [3, 0, 0, 0, 0xee, 0x01, 1, 0, 0, 0, 0, 0, 1, 2, 3]
        bytes += Message.json(.ok, seq: 9, Empty()).encoded()
        let (a, b) = try UnixSocket.pair()
        var decoder = MessageDecoder(skipsUnknownOpcodes: true)
        decoder.append(bytes)
        decoder.append(descriptors: [a])
        let message = try #require(try decoder.next())
        #expect(message.opcode == .ok && message.seq == 9 && message.descriptors.isEmpty)
        #expect(try decoder.next() == nil)
        _ = b
    }

    @Test func garbageNeverCrashesTheDecoder() {
        // Random bytes, and valid streams with random bytes flipped: the decoder either yields
        // messages or throws a ProtocolError; every payload decoder likewise.
        var rng = SystemRandomNumberGenerator()
        let valid = sampleStream().flatMap { $0.encoded() }
        for round in 0..<2000 {
            var bytes =
                round % 2 == 0
                ? (0..<Int.random(in: 0..<200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) } : valid
            if round % 2 == 1 {
                for _ in 0..<3 {
                    bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
            }
            var decoder = MessageDecoder()
            decoder.append(bytes)
            while true {
                guard let message = try? decoder.next() else { break }
                _ = try? VideoSampleHeader(decoding: message.payload)
                _ = try? AudioSampleHeader(decoding: message.payload)
                _ = try? SlotRelease(decoding: message.payload)
                _ = try? message.decode(StartRequest.self)
                _ = try? message.decode(BroadcastStatus.self)
            }
        }
    }

    /// The fuzz target's seeds and every input that once broke the decoder (scripts/fuzz.sh), replayed.
    @Test func fuzzInputsReplayWithoutBreakingTheDecoder() throws {
        let folder = String(#filePath).split(separator: "/").dropLast(3).joined(separator: "/") + "/Tests/fixtures/fuzz"
        let files = try FileManager.default.contentsOfDirectory(atPath: "/" + folder).sorted()
        #expect(files.count >= ProtocolFuzzing.seeds.count)
        for file in files {
            ProtocolFuzzing.exercise(Array(try Data(contentsOf: URL(fileURLWithPath: "/" + folder + "/" + file))))
        }
        // Every seed decodes to all nine messages it holds, whatever the piece size and decoder; but with
        // four descriptors that no header declares, to none.
        #expect(ProtocolFuzzing.seeds.map { ProtocolFuzzing.exercise($0) } == [9, 9, 9, 0])
    }

    @Test func sampleHeadersRoundTripAndRejectNonsense() throws {
        let timing = SampleTiming(
            presentationTime: 123_456_789, duration: 16_666_666, sequence: 42, discontinuity: true)
        let video = VideoSampleHeader(
            timing: timing, orientation: Orientation(degrees: 270, mirrored: true), pool: 1, slot: 5,
            format: VideoFormat(width: 1280, height: 720))
        var bytes: [UInt8] = []
        video.encode(into: &bytes)
        #expect(bytes.count == VideoSampleHeader.size)
        #expect(try VideoSampleHeader(decoding: bytes) == video)
        bytes[28] = 45
        #expect(throws: ProtocolError.self) { try VideoSampleHeader(decoding: bytes) }
        #expect(throws: ProtocolError.self) { try VideoSampleHeader(decoding: Array(bytes.prefix(10))) }

        let audio = AudioSampleHeader(
            timing: timing, type: .audioMic, format: AudioFormat(channels: 1, sampleFormat: .s16), frameCount: 4)
        bytes = []
        audio.encode(into: &bytes)
        #expect(bytes.count == AudioSampleHeader.size)
        bytes += [UInt8](repeating: 1, count: 8)
        #expect(try AudioSampleHeader(decoding: bytes) == audio)
        #expect(throws: ProtocolError.self) { try AudioSampleHeader(decoding: bytes + [0]) }  // PCM length disagrees
        bytes[28] = 1  // video is not an audio type
        #expect(throws: ProtocolError.self) { try AudioSampleHeader(decoding: bytes) }
    }
}

@Suite struct DescriptorPassingTests {
    @Test func memfdTravelsOverARealSocketPairAndMapsToTheSameBytes() throws {
        do {
            let (a, b) = try UnixSocket.pair()
            let memory = try SharedMemory(name: "test", size: 8192, sealed: true)
            memory.base.storeBytes(of: 0xfeed_beef, toByteOffset: 4096, as: UInt32.self)
            let sender = PeerConnection(socket: a)
            let receiver = PeerConnection(socket: b)
            try sender.send(
                .json(.pool, PoolAnnouncement(pool: 1, slots: 2, slotSize: 4096), descriptors: [memory.descriptor]))
            try sender.send(Message(.broadcastPaused))
            let message = try receiver.receive()
            #expect(message.opcode == .pool)
            #expect(message.descriptors.count == 1)
            #expect(message.descriptors[0].raw != memory.descriptor.raw)
            let mapped = try SharedMemory(mapping: message.descriptors[0], size: 8192)
            #expect(mapped.base.load(fromByteOffset: 4096, as: UInt32.self) == 0xfeed_beef)
            // Writes by the owner are seen through the peer's mapping: it is the same memory.
            memory.base.storeBytes(of: 7, toByteOffset: 0, as: UInt8.self)
            #expect(mapped.base.load(fromByteOffset: 0, as: UInt8.self) == 7)
            #expect(try receiver.receive().opcode == .broadcastPaused)
            // Every received descriptor is close-on-exec.
            #expect(fcntl(message.descriptors[0].raw, F_GETFD) & FD_CLOEXEC != 0)
        }
    }

    @Test func mappingRefusesAFileSmallerThanAnnounced() throws {
        let memory = try SharedMemory(name: "small", size: 4096, sealed: true)
        #expect(throws: SystemError.self) { try SharedMemory(mapping: memory.descriptor.duplicate(), size: 1 << 20) }
    }

    @Test func sealedMemoryKeepsItsSizeAndTakesNoWritesButFromItsCreator() throws {
        let sealed = try SharedMemory(name: "sealed", size: 8192, sealed: true)
        sealed.base.storeBytes(of: 7, as: UInt8.self)  // the creator's own mapping stays writable
        let reopened = open("/proc/self/fd/\(sealed.descriptor.raw)", O_RDWR)
        defer { close(reopened) }
        #expect(ftruncate(sealed.descriptor.raw, 0) != 0 && ftruncate(sealed.descriptor.raw, 1 << 20) != 0)
        #expect(mmap(nil, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, reopened, 0) == MAP_FAILED)
        let readOnly = try sealed.readOnlyDescriptor()
        #expect(mmap(nil, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, readOnly.raw, 0) == MAP_FAILED)
        // Unsealed memory (for the X server to write into) can be mapped writable by whoever holds it.
        let open = try SharedMemory(name: "open", size: 8192, sealed: false)
        let mapping = mmap(nil, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, open.descriptor.raw, 0)
        #expect(mapping != MAP_FAILED)
        if let mapping, mapping != MAP_FAILED { munmap(mapping, 8192) }
    }

    /// A timeout of 0 takes a message already on its way, without waiting (it found none before: the deadline had
    /// passed before the socket was read).
    @Test func aTimeoutOfZeroTakesWhatIsAlreadyThere() throws {
        let (a, b) = try UnixSocket.pair()
        let receiver = PeerConnection(socket: b)
        #expect(try receiver.receive(timeoutMilliseconds: 0) == nil)
        try PeerConnection(socket: a).send(Message(.broadcastPaused, seq: 4))
        #expect(try receiver.receive(timeoutMilliseconds: 0)?.seq == 4)
        #expect(try receiver.receive(timeoutMilliseconds: 0) == nil)
    }

    @Test func closedPeerIsReportedAsClosed() throws {
        let (a, b) = try UnixSocket.pair()
        a.close()
        #expect(throws: ProtocolError.closed) { try PeerConnection(socket: b).receive() }
    }
}

#if canImport(Glibc)
    import Glibc
#endif
