import BroadcastProtocol
import BroadcastSystem
import Glibc
import Testing

@testable import BroadcastCore
@testable import BroadcastDaemon

/// Shared encoders (revision 2.9) through broadcastd's core (`CoreHarness`): the encoder is a stand-in handler the
/// test speaks for, as it does for the broadcasts it serves.
@Suite struct SharedEncoderCoreTests {
    static let second: UInt64 = 1_000_000_000
    static let settings = ["codec": "h264", "preset": "veryfast"]

    static func harness(program: String = "/bin/true") throws -> CoreHarness {
        try CoreHarness { $0.encoderProgram = program }
    }

    /// `handler` sends ENCODE: the ENCODING it got (what came before it is dropped, what came after stays).
    static func encode(
        _ handler: CoreHarness.Handler, _ settings: [String: String] = settings, in h: CoreHarness
    ) throws -> EncodingNotice {
        try h.send(.json(.encode, EncodeRequest(settings: settings)), from: handler.peer)
        let messages = try handler.peer.received()
        let index = try #require(messages.lastIndex { $0.opcode == .encoding }, "\(messages.map(\.opcode))")
        handler.peer.inbox = Array(messages[(index + 1)...])
        return try messages[index].decode(EncodingNotice.self)
    }

    /// The stand-in encoder says HELLO and READY, then shares a ring of 4096 bytes and a video and an audio stream.
    static func startEncoder(
        _ id: UInt32, streams: EncodedStreams = streams, in h: CoreHarness
    ) throws -> CoreHarness.Handler {
        let encoder = try h.connectHandler(of: id)
        let memory = try SharedMemory(name: "test-ring", size: 4096, sealed: true)
        let ring = PacketRingAnnouncement(ring: 0, size: 4096)
        try h.send(.json(.shareRing, ring, descriptors: [try memory.readOnlyDescriptor()]), from: encoder.peer)
        try h.send(.json(.shareStreams, streams), from: encoder.peer)
        return encoder
    }

    static var streams: EncodedStreams {
        var video = EncodedStreamDescription(stream: 0, kind: "video", codec: "h264", timeBase: [1, 90000])
        (video.width, video.height) = (64, 32)
        var audio = EncodedStreamDescription(stream: 1, kind: "audio", codec: "opus", timeBase: [1, 48000])
        (audio.sampleRate, audio.channels) = (48000, 2)
        return EncodedStreams(ring: 0, streams: [video, audio])
    }

    /// SHARE_PACKET `sequence`: 8 bytes of `stream` (0 video, 1 audio).
    static func packet(_ sequence: UInt64, stream: UInt32 = 0, keyframe: Bool = false) -> Message {
        EncodedPacketHeader(
            ring: 0, stream: stream, sequence: sequence, offset: 64 + sequence * 8, length: 8,
            flags: keyframe ? .keyframe : [], pts: Int64(sequence), dts: Int64(sequence), duration: 1
        ).message(.sharePacket)
    }

    /// The ENCODED_PACKETs among `messages`.
    static func packets(_ messages: [Message]) throws -> [EncodedPacketHeader] {
        try messages.filter { $0.opcode == .encodedPacket }.map {
            try EncodedPacketHeader(decoding: $0.payload, of: .encodedPacket)
        }
    }

    /// Two handlers asking for the same encoding share one encoder, a third asking for another gets its own; each gets
    /// the ring and the streams once, then the packets, and no more samples; status says who shares what.
    @Test func handlersAskingForTheSameEncodingShareOneEncoder() throws {
        let h = try Self.harness()
        let controller = try h.peer(.controller)
        let (first, a) = try h.startBroadcast(from: controller)
        let (second, b) = try h.startBroadcast(from: controller)
        let noticeA = try Self.encode(a, in: h)
        let encoderID = try #require(noticeA.encoder)
        #expect(noticeA.sharedWith == [first] && noticeA.error == nil && h.launcher.launched.count == 3)
        #expect(h.launcher.launched.last?.path == "/bin/true")
        let encoder = try Self.startEncoder(encoderID, in: h)
        #expect(encoder.started?.setupInfo == Self.settings)
        #expect(try Self.encode(b, in: h) == EncodingNotice(encoder: encoderID, sharedWith: [first, second]))
        #expect(h.launcher.launched.count == 3, "no second encoder")
        #expect(h.core.capture?.plan.broadcasts == 1, "the pool's slots are planned for the encoder alone")
        for handler in [a, b] {
            let opening = try handler.peer.received()
            #expect(opening.map(\.opcode) == [.packetRing, .encodedStreams], "\(opening.map(\.opcode))")
            #expect(opening.first?.descriptors.count == 1)
            #expect(try opening.first?.decode(PacketRingAnnouncement.self) == .init(ring: encoderID, size: 4096))
            #expect(try opening.last?.decode(EncodedStreams.self).ring == encoderID)
        }
        try h.send(Self.packet(1, keyframe: true), from: encoder.peer)
        for handler in [a, b] {
            let got = try Self.packets(try handler.peer.received())
            #expect(got.map(\.sequence) == [1] && got.first?.ring == encoderID && got.first?.flags == .keyframe)
        }
        // Revision 2.10: the audio stream's figures, to each, naming the ring.
        let figures = AudioFigures(ring: 0, stream: 1, missingMs: 20, droppedMs: 0, maxClockOffsetMs: 1.5)
        try h.send(.json(.shareAudioFigures, figures), from: encoder.peer)
        for handler in [a, b] {
            let told = try handler.peer.received().filter { $0.opcode == .audioFigures }
            #expect(
                try told.map { try $0.decode(AudioFigures.self) } == [
                    AudioFigures(
                        ring: encoderID, stream: 1, missingMs: 20, droppedMs: 0, maxClockOffsetMs: 1.5)
                ])
        }

        // A second of capture: the encoder gets frames and audio, the handlers it serves none.
        try h.advance(by: Self.second, releasing: [encoder])
        #expect(encoder.framesTaken >= 30)
        for handler in [a, b] {
            #expect(try handler.peer.received().filter { $0.opcode != .encodedPacket }.isEmpty)
        }
        let all = try #require(try h.status(controller).broadcasts)
        let byID = Dictionary(uniqueKeysWithValues: all.compactMap { s in s.broadcast.map { ($0, s) } })
        #expect(byID[first]?.encoder == encoderID && byID[second]?.encoder == encoderID)
        #expect(byID[encoderID]?.serves == [first, second] && byID[encoderID]?.handler == "encoder")

        // Other settings, another encoder.
        let (_, c) = try h.startBroadcast(from: controller)
        let other = try Self.encode(c, ["codec": "hevc"], in: h)
        #expect(other.encoder != nil && other.encoder != encoderID && h.launcher.launched.count == 5)
    }

    /// A handler whose queue is full loses packets of its own: its video until the next keyframe, asked of the
    /// encoder once on its behalf; its audio goes on as soon as it has room; the other loses nothing.
    @Test func aHandlerThatFallsBehindLosesItsVideoUntilTheNextKeyframe() throws {
        let h = try Self.harness()
        let controller = try h.peer(.controller)
        let (fastID, fast) = try h.startBroadcast(from: controller)
        let (slowID, slow) = try h.startBroadcast(from: controller)
        // `slow` reads nothing for 3 s: its socket and its queue fill with audio samples.
        try h.advance(by: 3 * Self.second, releasing: [fast])
        let encoderID = try #require(try Self.encode(fast, in: h).encoder)
        let encoder = try Self.startEncoder(encoderID, in: h)
        try h.send(.json(.encode, EncodeRequest(settings: Self.settings)), from: slow.peer)
        _ = try fast.peer.received()
        _ = try encoder.peer.received()
        var sequence: UInt64 = 0
        func share(_ stream: UInt32 = 0, keyframe: Bool = false) throws {
            sequence += 1
            try h.send(Self.packet(sequence, stream: stream, keyframe: keyframe), from: encoder.peer)
        }
        // Audio packets fill what room its queue has left.
        let packetSize = ProtocolLimits.headerSize + EncodedPacketHeader.size
        while PeerSession.sampleQueueLimit - slow.peer.session.queuedBytes >= packetSize { try share(1) }
        let filled = sequence
        try share(keyframe: true)
        try share()
        try share(1)
        #expect(try encoder.peer.received().map(\.opcode) == [.keyframeRequested], "asked once for it")
        // It reads everything: the next video packets are not its until a keyframe; audio is.
        let backlog = try h.drain(slow.peer)
        #expect(try Self.packets(backlog).map(\.sequence) == (0..<filled).map { $0 + 1 }, "its queue was full")
        try share()
        try share(1)
        try share(keyframe: true)
        try share()
        #expect(try Self.packets(try slow.peer.received()).map(\.sequence) == [filled + 5, filled + 6, filled + 7])
        #expect(try Self.packets(try fast.peer.received()).map(\.sequence) == Array(1...sequence))
        // Their status counts the packets each was sent and lost.
        let all = try #require(try h.status(controller).broadcasts)
        let encoded = Dictionary(
            uniqueKeysWithValues: all.compactMap { s in s.broadcast.map { ($0, s.streams?["encoded"]) } })
        #expect(encoded[slowID] == StreamCounters(delivered: filled + 3, dropped: 4), "\(encoded)")
        #expect(encoded[fastID] == StreamCounters(delivered: sequence, dropped: 0))
        // A keyframe asked for came: a new request goes to the encoder again.
        try h.send(.json(.requestKeyframe, Empty()), from: fast.peer)
        try h.send(.json(.requestKeyframe, Empty()), from: fast.peer)
        #expect(try encoder.peer.received().map(\.opcode) == [.keyframeRequested])
    }

    /// The encoder pauses when every handler it serves is paused and resumes with one; it finishes after the last
    /// leaves; when it stops by itself, the broadcasts it served finish saying so.
    @Test func theEncoderFollowsTheBroadcastsItServes() throws {
        let h = try Self.harness()
        let controller = try h.subscribedController()
        let (first, a) = try h.startBroadcast(from: controller)
        let (second, b) = try h.startBroadcast(from: controller)
        let encoderID = try #require(try Self.encode(a, in: h).encoder)
        let encoder = try Self.startEncoder(encoderID, in: h)
        _ = try Self.encode(b, in: h)
        func phase(_ id: UInt32) -> BroadcastPhase? { h.core.broadcast(id)?.phase }
        #expect(try h.request(.pause, FinishRequest(broadcast: first), from: controller).opcode == .ok)
        #expect(phase(encoderID) == .live)
        #expect(try h.request(.pause, FinishRequest(broadcast: second), from: controller).opcode == .ok)
        #expect(phase(encoderID) == .paused)
        #expect(try h.request(.resume, FinishRequest(broadcast: first), from: controller).opcode == .ok)
        #expect(phase(encoderID) == .live)
        // Controllers cannot pause or finish it themselves, and without an id they mean a user's broadcast.
        let refused = try h.request(.finish, FinishRequest(broadcast: encoderID), from: controller)
        #expect(refused.opcode == .error)
        #expect(
            try refused.decode(BroadcastError.self).message.contains("is a shared encoder"),
            "\(String(decoding: refused.payload, as: UTF8.self))")
        #expect(try h.request(.finish, FinishRequest(broadcast: second), from: controller).opcode == .ok)
        #expect(phase(encoderID) == .live)
        h.exit(b, .exited(0), broadcast: second)
        #expect(try h.request(.finish, FinishRequest(), from: controller).opcode == .ok, "the only user broadcast")
        // It had no picture: it waits for its first (`SharedEncoder.firstPictureLimit`), which never comes.
        try h.advance(by: SharedEncoder.firstPictureLimit + Self.second / 2, releasing: [encoder])
        #expect(phase(encoderID) == .finishing && phase(first) == .finishing)
        #expect(try h.drain(encoder.peer).last?.opcode == .broadcastFinished)
        // Finishing, it serves none, and its status says so (it said nothing, and `broadcastctl status` counted it as
        // a broadcast that runs).
        let finishing = try #require(try h.status(controller).broadcasts?.first { $0.broadcast == encoderID })
        #expect(finishing.serves == [], "\(String(describing: finishing.serves))")

        // A new encoder whose process dies takes the broadcasts it serves with it.
        let (third, c) = try h.startBroadcast(from: controller)
        let next = try #require(try Self.encode(c, in: h).encoder)
        #expect(next != encoderID)
        let dying = try Self.startEncoder(next, in: h)
        _ = try controller.received()
        h.exit(dying, .exited(3), broadcast: next)
        #expect(phase(third) == .finishing)
        let status = try #require(try h.status(controller).broadcasts?.first { $0.broadcast == third })
        #expect(
            status.error?.message.hasPrefix("the shared encoder stopped: handler 'encoder' exited") == true,
            "\(String(describing: status.error))")
    }

    /// A broadcast served by a shared encoder is live from the first keyframe its handler gets, where its file starts:
    /// its elapsed time and its maximum duration count from there. Counted from its READY, before the encoder had
    /// started, `broadcastctl record --duration 3` saved 2.9 s (TerminalTests under `encode=shared`).
    @Test func aServedBroadcastIsLiveFromItsFirstKeyframe() throws {
        let h = try Self.harness()
        let controller = try h.peer(.controller)
        let (id, handler) = try h.startBroadcast(from: controller, maxDuration: 1)
        let encoderID = try #require(try Self.encode(handler, in: h).encoder)
        let encoder = try Self.startEncoder(encoderID, in: h)
        try h.advance(by: Self.second / 2, releasing: [encoder])
        let waiting = try h.status(controller).broadcasts?.first { $0.broadcast == id }
        #expect(waiting?.state == .live && waiting?.elapsed == 0, "\(String(describing: waiting))")
        try h.send(Self.packet(1, keyframe: true), from: encoder.peer)
        try h.advance(by: Self.second * 9 / 10, releasing: [encoder])
        let live = try h.status(controller).broadcasts?.first { $0.broadcast == id }
        #expect(live?.state == .live && live?.elapsed == 0.9, "\(String(describing: live))")
        try h.advance(by: Self.second / 5, releasing: [encoder])
        #expect(h.core.broadcast(id)?.phase == .finishing, "1 s after its first keyframe")
    }

    /// An encoder joining a running capture gets the sound of its first frame's time, though that was taken before it
    /// went live: a late loop stamps the frame with its deadline, and the audio taken meanwhile reaches past it. It
    /// got only the chunks taken after, and its handlers' files began with up to a PipeWire quantum of silence
    /// (AudioJoinTests under `encode=shared`: 5 to 25 ms in 5 of 9 runs, none in 4 runs after).
    @Test func anEncoderJoiningACaptureGetsTheSoundOfItsFirstFrame() throws {
        let h = try Self.harness()
        let (_, handler) = try h.startBroadcast(from: try h.peer(.controller))
        try h.advance(by: Self.second / 5, releasing: [handler])
        let encoderID = try #require(try Self.encode(handler, in: h).encoder)
        let encoder = try h.connectHandler(of: encoderID, ready: false)
        // The loop is 25 ms late for a frame; it takes the audio first (10 ms chunks), then the encoder says READY.
        let deadline = try #require(h.core.capture?.live?.nextFrameAt)
        h.clock.advance(by: deadline + 25_000_000 - h.clock.now())
        h.core.handle(.audio, now: h.clock.now())
        try h.send(.json(.ready, seq: 2, Empty()), from: encoder.peer)
        #expect(h.core.broadcast(encoderID)?.phase == .live)
        h.core.handle(.frame, now: h.clock.now())
        try h.advance(by: Self.second / 10, releasing: [encoder])
        let messages = try encoder.peer.received()
        let frame = try #require(encoder.taken.first ?? (try h.videoSamples(encoder)).first)
        #expect(frame.timing.presentationTime == deadline)
        let audio = try messages.filter { $0.opcode == .audioSample }.map {
            try AudioSampleHeader(decoding: $0.payload)
        }
        for stream in [SampleType.audioApp, .audioMic] {
            let chunks = audio.filter { $0.type == stream }.map(\.timing)
            let first = try #require(chunks.first)
            #expect(
                first.presentationTime <= deadline && first.presentationTime + first.duration > deadline,
                "\(stream): the first chunk is at \(Int64(first.presentationTime) - Int64(deadline)) ns from the frame")
            #expect(
                zip(chunks, chunks.dropFirst()).allSatisfy { $1.presentationTime == $0.presentationTime + $0.duration },
                "\(stream): the chunks follow on")
        }
    }

    /// `frameRate=input` (the capture's rate: what record and replay say when they keep it) is an encoder's rate
    /// like any other; it was refused as not a number, and every `encode=shared` handler encoded by itself.
    @Test func anEncoderAtTheCapturesRateIsStarted() throws {
        let h = try Self.harness()
        let (_, handler) = try h.startBroadcast(from: try h.peer(.controller))
        let answer = try Self.encode(handler, ["frameRate": "input"], in: h)
        #expect(answer.encoder != nil && answer.error == nil, "\(answer)")
    }

    /// What breaks the protocol closes the connection: SHARE_* from a handler that is not an encoder, a second ENCODE,
    /// a ring that is writable, a packet outside the ring. An encoder that cannot be found leaves the handler its
    /// samples.
    @Test func sharedEncodingIsBoundedWhereItEnters() throws {
        let missing = try Self.harness(program: "/nonexistent/broadcast-encoder")
        let controller = try missing.peer(.controller)
        let (_, alone) = try missing.startBroadcast(from: controller)
        let notice = try Self.encode(alone, in: missing)
        #expect(notice.encoder == nil && notice.error?.contains("'/nonexistent/broadcast-encoder'") == true)
        try missing.advance(by: Self.second / 2, releasing: [alone])
        #expect(alone.framesTaken == 16, "it keeps its samples: \(alone.framesTaken)")

        let h = try Self.harness()
        let control = try h.peer(.controller)
        func violation(_ message: Message, from handler: CoreHarness.Handler, _ text: String) throws {
            try h.send(message, from: handler.peer)
            let error = try #require(try handler.peer.received().last { $0.opcode == .error })
            let why = try error.decode(BroadcastError.self).message
            #expect(why.contains(text) && handler.peer.session.isClosing, "\(why)")
        }
        let (_, a) = try h.startBroadcast(from: control)
        try violation(Self.packet(1), from: a, "only broadcastd's shared encoder sends it")
        let (_, b) = try h.startBroadcast(from: control, ready: false)
        try violation(.json(.encode, EncodeRequest(settings: [:])), from: b, "ENCODE comes once, after READY")
        let (_, c) = try h.startBroadcast(from: control)
        let encoderID = try #require(try Self.encode(c, in: h).encoder)
        let encoder = try h.connectHandler(of: encoderID)
        try violation(.json(.encode, EncodeRequest(settings: [:])), from: c, "ENCODE comes once, after READY")
        try violation(.json(.encode, EncodeRequest(settings: [:])), from: encoder, "a shared encoder asks for no")
        let (_, d) = try h.startBroadcast(from: control)
        let big = EncodeRequest(settings: Dictionary(uniqueKeysWithValues: (0..<33).map { ("k\($0)", "v") }))
        try violation(.json(.encode, big), from: d, "more than 32 settings")
        // A frame rate an encoder cannot run at is refused as a manifest's field would be (broadcastd divided by it).
        for rate in ["0", "nan"] {
            let (_, handler) = try h.startBroadcast(from: control)
            let refused = try Self.encode(handler, ["frameRate": rate], in: h)
            #expect(refused.error == "setting 'frameRate' is frames per second, 1 to 240, not '\(rate)'")
        }
        let (_, e) = try h.startBroadcast(from: control)
        let second = try #require(try Self.encode(e, ["codec": "av1"], in: h).encoder)
        let writable = try h.connectHandler(of: second)
        let memory = try SharedMemory(name: "test-ring", size: 4096, sealed: true)
        try violation(
            .json(.shareRing, PacketRingAnnouncement(ring: 0, size: 4096), descriptors: [memory.descriptor]),
            from: writable, "must be read-only")
        let (_, f) = try h.startBroadcast(from: control)
        let third = try #require(try Self.encode(f, ["codec": "vp9"], in: h).encoder)
        let outside = try Self.startEncoder(third, in: h)
        let header = EncodedPacketHeader(
            ring: 0, stream: 0, sequence: 1, offset: 4090, length: 8, flags: .keyframe, pts: 0, dts: 0, duration: 1)
        try violation(header.message(.sharePacket), from: outside, "not within the ring")
    }

    /// Revision 2.10: an encoder's figures are of an audio stream it described, each 0 to 10^12 ms; others close its
    /// connection.
    @Test func sharedAudioFiguresAreBoundedWhereTheyEnter() throws {
        let h = try Self.harness()
        let control = try h.peer(.controller)
        let wrong: [(stream: UInt32, missingMs: Double, text: String)] = [
            (0, 0, "not an audio stream"), (2, 0, "not an audio stream"), (1, -1, "figures of 0 to"),
        ]
        for (index, (stream, missing, text)) in wrong.enumerated() {
            let (_, handler) = try h.startBroadcast(from: control)
            let id = try #require(try Self.encode(handler, ["crf": "\(30 + index)"], in: h).encoder)
            let encoder = try Self.startEncoder(id, in: h)
            let figures = AudioFigures(ring: 0, stream: stream, missingMs: missing, droppedMs: 0, maxClockOffsetMs: 0)
            try h.send(.json(.shareAudioFigures, figures), from: encoder.peer)
            let error = try #require(try encoder.peer.received().last { $0.opcode == .error })
            let why = try error.decode(BroadcastError.self).message
            #expect(why.contains(text) && encoder.peer.session.isClosing, "\(why)")
        }
    }
}
