import BroadcastCore
import BroadcastHandlerKit
import BroadcastProtocol
import BroadcastProtocolFuzzing
import BroadcastSystem
import Foundation
import Testing

/// Limits on what a peer's input may be, where it enters: descriptors, JSON depth, URLs and setup values.
@Suite struct PeerInputLimitTests {
    func devNull() -> Descriptor { Descriptor(adopting: open("/dev/null", O_RDONLY | O_CLOEXEC)) }

    @Test func descriptorsNoHeaderDeclaredAreRefusedAndClosed() throws {
        let hello = Message.json(.hello, seq: 1, Hello(role: .controller, client: "t")).encoded()
        // A whole message that declares none, with three.
        var decoder = MessageDecoder()
        let smuggled = [devNull(), devNull(), devNull()]
        let raws = smuggled.map(\.raw)
        decoder.append(descriptors: smuggled)
        decoder.append(hello)
        #expect(try decoder.next()?.opcode == .hello)
        #expect(throws: ProtocolError.undeclaredDescriptors(count: 3)) { try decoder.next() }
        #expect(decoder.pendingDescriptorCount == 0)
        #expect(raws.allSatisfy { fcntl($0, F_GETFD) == -1 }, "the smuggled descriptors were not closed")
        // Part of a message whose header declares one, with two.
        decoder = MessageDecoder()
        var pool = Message.json(.pool, PoolAnnouncement(pool: 1, slots: 3, slotSize: 4096), descriptors: [devNull()])
            .encoded()
        pool.removeLast()
        decoder.append(descriptors: [devNull(), devNull()])
        decoder.append(pool)
        #expect(throws: ProtocolError.undeclaredDescriptors(count: 2)) { try decoder.next() }
        // Descriptors that came with the first bytes of a header wait for the rest of it (at most four).
        decoder = MessageDecoder()
        decoder.append(descriptors: [devNull()])
        decoder.append(Array(pool.prefix(5)))
        #expect(try decoder.next() == nil)
        decoder.append(Array(pool.dropFirst(5)) + [UInt8(ascii: "}")])
        #expect(try decoder.next()?.descriptors.count == 1)
    }

    @Test func jsonDepthIsMeasuredInOnePassAndRefusedPastTheLimit() throws {
        func nested(_ n: Int) -> [UInt8] {
            Array(
                ("{\"result\":{\"x\":" + String(repeating: "[", count: n) + String(repeating: "]", count: n) + "}}")
                    .utf8)
        }
        #expect(JSONDepth.excess(nested(30)) == nil)
        #expect(JSONDepth.excess(nested(31)) == 33)
        #expect(
            JSONDepth.excess(Array(#"{"s":"[[[[\"[[[[","t":["\\"]}"#.utf8), limit: 2) == nil,
            "brackets in strings count")
        #expect(throws: ProtocolError.malformed(.setResult, "JSON nested deeper than 32 levels")) {
            try Message(.setResult, payload: nested(500)).decode(HandlerResult.self)
        }
        #expect(try Message(.setResult, payload: nested(30)).decode(HandlerResult.self).result["x"] != nil)
        // Twenty results of about 1 KB nested 500 deep froze the daemon's loop for 16 s; refused now in
        // well under a millisecond each.
        let started = MonotonicClock.now()
        for _ in 0..<20 { _ = try? Message(.setResult, payload: nested(500)).decode(HandlerResult.self) }
        #expect(MonotonicClock.now() - started < 50_000_000)
        // The fuzz target's seeds, and every input that once broke the JSON decoder.
        let folder =
            String(#filePath).split(separator: "/").dropLast(3).joined(separator: "/") + "/Tests/fixtures/fuzz-json"
        let files = try FileManager.default.contentsOfDirectory(atPath: "/" + folder).sorted()
        #expect(files.count >= JSONFuzzing.seeds.count)
        for file in files {
            JSONFuzzing.exercise(Array(try Data(contentsOf: URL(fileURLWithPath: "/" + folder + "/" + file))))
        }
    }

    @Test func serviceInfoIsBoundedAndItsEncodingSplicedUnchanged() throws {
        let info: [String: JSONValue] = [
            "bitRate": .number(2500), "live": .bool(true), "note": .string("a,\"streams\":"),
        ]
        let spliced = ServiceInfo(
            broadcast: 2, elapsed: 1.5, streams: ["video": StreamCounters(delivered: 3)], handler: nil, daemonMemory: 7
        )
        .message(handlerJSON: Array(compactJSON(info).utf8))
        let whole = Message.json(
            .serviceInfo,
            ServiceInfo(
                broadcast: 2, elapsed: 1.5, streams: ["video": StreamCounters(delivered: 3)],
                handler: info, daemonMemory: 7))
        #expect(String(decoding: spliced.payload, as: UTF8.self) == String(decoding: whole.payload, as: UTF8.self))
        let many = Dictionary(uniqueKeysWithValues: (0..<65).map { ("k\($0)", JSONValue.number(Double($0))) })
        #expect(
            throws: ProtocolError.malformed(.updateServiceInfo, "service info with 65 keys exceeds the limit of 64")
        ) {
            try HandlerServiceInfo.decodeWithinLimits(.json(.updateServiceInfo, HandlerServiceInfo(info: many)))
        }
        let big = HandlerServiceInfo(info: ["k": .string(String(repeating: "x", count: 17_000))])
        #expect(
            throws: ProtocolError.malformed(
                .updateServiceInfo, "service info of 17017 bytes exceeds the limit of 16384")
        ) {
            try HandlerServiceInfo.decodeWithinLimits(.json(.updateServiceInfo, big))
        }
    }

    @Test func urlsAndSetupValuesAreCheckedAtSetup() throws {
        let manifest = HandlerManifest(
            name: "h", displayName: "H", exec: "h", setupFields: [.init(name: "key", prompt: "Key")])
        #expect(
            try manifest.validate(url: "srt://host:9000?streamid=a", setupInfo: ["key": "v"]).url
                == "srt://host:9000?streamid=a")
        #expect(throws: BroadcastError(.invalidRequest, "the URL is refused: it contains a control character (U+000D)"))
        {
            try manifest.validate(url: "srt://host\r\nx", setupInfo: [:])
        }
        #expect(throws: BroadcastError(.invalidRequest, "the URL is refused: it is 8193 bytes long; the limit is 8192"))
        {
            try manifest.validate(url: String(repeating: "u", count: 8193), setupInfo: [:])
        }
        #expect(
            throws: BroadcastError(
                .invalidRequest, "setup field 'key' is refused: it contains a control character (U+0000)")
        ) {
            try manifest.validate(url: nil, setupInfo: ["key": "a\u{0}b"])
        }
        // Escapes that decode to control characters name no file.
        #expect(FileURL.path(from: "file:///tmp/clip%00.mp4") == nil)
        #expect(FileURL.path(from: "file:///tmp/a%0Ab.mp4") == nil)
        #expect(FileURL.path(from: "file:///tmp/my%20clip.mp4") == "/tmp/my clip.mp4")
    }
}
