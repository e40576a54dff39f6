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

    @Test func anEncodeAskedForInTheStartCallbackGoesOutAfterReady() throws {
        let (daemonEnd, handlerEnd) = try UnixSocket.pair()
        setenv("BROADCASTD_HANDLER_FD", String(handlerEnd.raw), 1)
        let handler = Asking()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? HandlerRunner(handler: handler, name: "t").run()
            done.signal()
        }
        let daemon = PeerConnection(socket: daemonEnd)
        let hello = try #require(try daemon.receive(timeoutMilliseconds: 5000))
        #expect(hello.opcode == .hello)
        try daemon.send(.json(.welcome, seq: hello.seq, Welcome(server: "fake")))
        let start = BroadcastStart(
            broadcast: 3, url: nil, setupInfo: [:], video: VideoDescription(VideoFormat(width: 64, height: 32)),
            audio: AudioDescription(AudioFormat()))
        try daemon.send(.json(.broadcastStarted, start))
        let first = try #require(try daemon.receive(timeoutMilliseconds: 5000))
        let second = try #require(try daemon.receive(timeoutMilliseconds: 5000))
        #expect([first.opcode, second.opcode] == [.ready, .encode])
        #expect(try second.decode(EncodeRequest.self) == EncodeRequest(settings: ["codec": "h264"]))
        try daemon.send(.json(.encoding, EncodingNotice(encoder: 4, sharedWith: [3])))
        try daemon.send(.json(.broadcastFinished, BroadcastEnd(error: nil)))
        #expect(done.wait(timeout: .now() + 5) == .success, "the handler did not finish")
        #expect(handler.answer == EncodingNotice(encoder: 4, sharedWith: [3]))
        daemon.close()
    }
}
