import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Foundation
import Testing

@testable import BroadcastHandlerKit

/// Revision 2.9: ENCODE goes after READY (docs/protocol.md 10.7), also when the handler asks for it from its start
/// callback, as `record` does: the SDK holds it until READY is out.
@Suite(.serialized) struct HandlerEncodeOrderTests {
    final class Asking: BroadcastSampleHandler, @unchecked Sendable {
        var answer: EncodingNotice?
        override func broadcastStarted(withSetupInfo setupInfo: [String: String]) {
            requestEncoding(["codec": "h264"])
        }
        override func encodingAnswered(_ notice: EncodingNotice) { answer = notice }
    }

    /// Runs an `Asking` handler against a daemon played by hand: HELLO, BROADCAST_STARTED, then the two messages the
    /// handler sends, `answer` to them, and the finish; what the handler was answered.
    static func run(answering answer: Message) throws -> (sent: [Message], answer: EncodingNotice?) {
        let (daemonEnd, handlerEnd) = try UnixSocket.pair()
        setenv("BROADCASTD_HANDLER_FD", String(handlerEnd.raw), 1)
        let handler = Asking()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? HandlerRunner(handler: handler, name: "t").run()
            done.signal()
        }
        let daemon = PeerConnection(socket: daemonEnd)
        defer { daemon.close() }
        let hello = try #require(try daemon.receive(timeoutMilliseconds: 5000))
        #expect(hello.opcode == .hello)
        try daemon.send(.json(.welcome, seq: hello.seq, Welcome(server: "fake")))
        let start = BroadcastStart(
            broadcast: 3, url: nil, setupInfo: [:], video: VideoDescription(VideoFormat(width: 64, height: 32)),
            audio: AudioDescription(AudioFormat()))
        try daemon.send(.json(.broadcastStarted, start))
        let sent = [
            try #require(try daemon.receive(timeoutMilliseconds: 5000)),
            try #require(try daemon.receive(timeoutMilliseconds: 5000)),
        ]
        try daemon.send(answer)
        try daemon.send(.json(.broadcastFinished, BroadcastEnd(error: nil)))
        #expect(done.wait(timeout: .now() + 5) == .success, "the handler did not finish")
        return (sent, handler.answer)
    }

    @Test func anEncodeAskedForInTheStartCallbackGoesOutAfterReady() throws {
        let (sent, answer) = try Self.run(answering: .json(.encoding, EncodingNotice(encoder: 4, sharedWith: [3])))
        #expect(sent.map(\.opcode) == [.ready, .encode])
        #expect(try sent[1].decode(EncodeRequest.self) == EncodeRequest(settings: ["codec": "h264"]))
        #expect(answer == EncodingNotice(encoder: 4, sharedWith: [3]))
    }

    /// A daemon older than 2.9 does not know ENCODE: its `unsupported` answers the request, so that a handler
    /// waiting for its encoder encodes by itself instead of waiting for good.
    @Test func anUnsupportedEncodeIsAnsweredAsNoSharedEncoder() throws {
        let refusal = BroadcastError(.unsupported, "broadcastd (protocol revision 2.8) has no message 0x0387")
        let (_, answer) = try Self.run(answering: .json(.error, refusal))
        #expect(answer?.encoder == nil && answer?.error == refusal.message, "\(String(describing: answer))")
    }
}
