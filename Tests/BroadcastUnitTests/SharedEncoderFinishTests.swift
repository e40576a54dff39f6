import BroadcastProtocol
import BroadcastSystem
import Testing

@testable import BroadcastCore
@testable import BroadcastDaemon

/// A handler sharing an encoder that finishes (`SharedEncoder.Drain`): the encoder gives a picture's sound after it,
/// and the handler's file ended short of its picture's end (20 to 70 ms; a microphone gone silent, 250 ms).
@Suite struct SharedEncoderFinishTests {
    typealias Core = SharedEncoderCoreTests
    static let second = Core.second

    /// Video at 30 frames per second (1/90000), and two audio streams (1/48000).
    static var streams: EncodedStreams {
        var streams = Core.streams
        streams.streams[0].frameRate = [30, 1]
        var mic = streams.streams[1]
        mic.stream = 2
        streams.streams.append(mic)
        return streams
    }

    /// SHARE_PACKET `sequence` of `stream` at `pts`, 20 ms long when it is sound.
    static func packet(_ sequence: UInt64, stream: UInt32, pts: Int64, keyframe: Bool = false) -> Message {
        EncodedPacketHeader(
            ring: 0, stream: stream, sequence: sequence, offset: 64 + sequence * 8, length: 8,
            flags: keyframe ? .keyframe : [], pts: pts, dts: pts, duration: stream == 0 ? 3000 : 960
        ).message(.sharePacket)
    }

    /// A broadcast whose handler shares an encoder, sent a keyframe at 0 and a frame at 33 ms (its picture ends at
    /// 67 ms) and each audio stream's sound to 40 ms, then finished.
    static func finishing(
        _ h: CoreHarness, _ controller: CoreHarness.Peer
    ) throws -> (id: UInt32, handler: CoreHarness.Handler, encoderID: UInt32, encoder: CoreHarness.Handler) {
        let (id, handler) = try h.startBroadcast(from: controller)
        let encoderID = try #require(try Core.encode(handler, in: h).encoder)
        let encoder = try Core.startEncoder(encoderID, streams: streams, in: h)
        try h.send(packet(1, stream: 0, pts: 0, keyframe: true), from: encoder.peer)
        try h.send(packet(2, stream: 0, pts: 3000), from: encoder.peer)
        for (sequence, stream, pts) in [(3, 1, 0), (4, 2, 0), (5, 1, 960), (6, 2, 960)] as [(UInt64, UInt32, Int64)] {
            try h.send(packet(sequence, stream: stream, pts: pts), from: encoder.peer)
        }
        _ = try handler.peer.received()
        #expect(try h.request(.finish, FinishRequest(broadcast: id), from: controller).opcode == .ok)
        return (id, handler, encoderID, encoder)
    }

    /// BROADCAST_FINISHED waits until each audio stream's sound reaches the end of the handler's picture: meanwhile it
    /// is sent that sound and no more pictures, and its encoder goes on; then it leaves, and the encoder, its last,
    /// finishes.
    @Test func aFinishWaitsForTheEncodersSoundOfItsPicture() throws {
        let h = try Core.harness()
        let controller = try h.peer(.controller)
        let (id, handler, encoderID, encoder) = try Self.finishing(h, controller)
        func phase(_ id: UInt32) -> BroadcastPhase? { h.core.broadcast(id)?.phase }
        #expect(phase(id) == .finishing && phase(encoderID) == .live)
        #expect(try handler.peer.received().isEmpty, "no BROADCAST_FINISHED before the sound")
        try h.send(Self.packet(7, stream: 0, pts: 6000), from: encoder.peer)  // a picture after its end: not sent
        try h.send(Self.packet(8, stream: 1, pts: 1920), from: encoder.peer)  // app sound to 60 ms
        try h.send(Self.packet(9, stream: 1, pts: 2880), from: encoder.peer)  // ... to 80 ms
        try h.send(PictureUnchanged(through: 50_000_000).message(.sharePictureUnchanged), from: encoder.peer)
        #expect(try Core.packets(try handler.peer.received()).map(\.sequence) == [8, 9])
        #expect(phase(encoderID) == .live, "the encoder goes on while the microphone's sound is on its way")
        try h.send(Self.packet(10, stream: 2, pts: 1920), from: encoder.peer)
        try h.send(Self.packet(11, stream: 2, pts: 2880), from: encoder.peer)  // the microphone's, to 80 ms
        try h.send(Self.packet(12, stream: 1, pts: 3840), from: encoder.peer)  // after its picture: not sent
        let last = try handler.peer.received()
        #expect(last.map(\.opcode) == [.encodedPacket, .encodedPacket, .broadcastFinished], "\(last.map(\.opcode))")
        #expect(try Core.packets(last).map(\.sequence) == [10, 11])
        #expect(phase(encoderID) == .finishing, "its last consumer left")
        try h.advance(by: Self.second / 2, releasing: [encoder])
        #expect(try h.drain(encoder.peer).last?.opcode == .broadcastFinished)
    }

    /// Sound that does not come (a stream whose encoder stopped placing it) is waited for half a second at most.
    @Test func aFinishWaitsForTheSoundHalfASecondAtMost() throws {
        let h = try Core.harness()
        let controller = try h.peer(.controller)
        let (id, handler, encoderID, encoder) = try Self.finishing(h, controller)
        try h.advance(by: Self.second * 4 / 10, releasing: [encoder])
        #expect(try handler.peer.received().isEmpty && h.core.broadcast(id)?.phase == .finishing)
        try h.advance(by: Self.second * 2 / 10, releasing: [encoder])
        #expect(try handler.peer.received().last?.opcode == .broadcastFinished)
        #expect(h.core.broadcast(encoderID)?.phase == .finishing)
    }

    /// One finished before its encoder's first picture (it was starting) is sent that picture and its sound first:
    /// its file was empty, with no duration in its result.
    @Test func aFinishBeforeTheFirstPictureWaitsForIt() throws {
        let h = try Core.harness()
        let controller = try h.peer(.controller)
        let (id, handler) = try h.startBroadcast(from: controller)
        let encoderID = try #require(try Core.encode(handler, in: h).encoder)
        #expect(try h.request(.finish, FinishRequest(broadcast: id), from: controller).opcode == .ok)
        let encoder = try Core.startEncoder(encoderID, streams: Self.streams, in: h)
        try h.send(Self.packet(1, stream: 1, pts: 0), from: encoder.peer)
        try h.send(Self.packet(2, stream: 0, pts: 0, keyframe: true), from: encoder.peer)
        try h.send(Self.packet(3, stream: 0, pts: 3000), from: encoder.peer)  // its second picture: not sent
        #expect(try Core.packets(try handler.peer.received()).map(\.sequence) == [1, 2])
        try h.send(Self.packet(4, stream: 1, pts: 960), from: encoder.peer)  // the sound to 40 ms, past 33 ms
        let last = try handler.peer.received()
        #expect(last.map(\.opcode) == [.encodedPacket, .broadcastFinished], "\(last.map(\.opcode))")
    }
}
