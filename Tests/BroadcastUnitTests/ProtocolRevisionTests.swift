import BroadcastClient
import BroadcastProtocol
import Foundation
import Glibc
import Logging
import Synchronization
import Testing

@testable import BroadcastCore
@testable import BroadcastDaemon
@testable import BroadcastSystem

/// Revision 2.6: WELCOME announces the revision and the features; a message of an unknown opcode is refused with
/// `unsupported` and the connection stays; the status's frame rate is a whole number.
@Suite struct ProtocolRevisionTests {
    /// A PeerServer with one connected peer, driven by hand: `peer` is the client's end.
    final class Server {
        let server: PeerServer
        let session: PeerSession
        let peer: PeerConnection
        var received: [Message] = []

        init() throws {
            let (ours, theirs) = try UnixSocket.pair()
            try ours.setNonBlocking()
            server = PeerServer(
                serverName: "broadcastd test", clock: ManualClock(), wakes: WakeRegistry(),
                logger: Logger(label: "test"))
            session = server.addSession(ours)
            peer = PeerConnection(socket: theirs)
        }

        /// Sends `bytes` (with `descriptors`) and lets the server read them.
        func send(_ bytes: [UInt8], descriptors: [Descriptor] = []) throws {
            _ = try UnixSocket.send(peer.socket, bytes, from: 0, descriptors: descriptors.map(\.raw))
            server.serve(session, Poller.Event(readable: true, writable: false, closed: false)) { input in
                guard case .message(let message) = input else { return }
                received.append(message)
                session.reply(message.seq, .success(.json(.ok, seq: message.seq, Empty())))
            }
        }

        func reply() throws -> Message { try #require(try peer.receive(timeoutMilliseconds: 1000)) }
    }

    static func unknown(
        _ opcode: UInt16, seq: UInt32, payload: [UInt8] = Array("{}".utf8), descriptors: UInt16 = 0
    ) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendLittleEndian(UInt32(payload.count))
        bytes.appendLittleEndian(opcode)
        bytes.appendLittleEndian(descriptors)
        bytes.appendLittleEndian(seq)
        return bytes + payload
    }

    @Test func welcomeAnnouncesTheRevisionAndTheFeatures() throws {
        let server = try Server()
        try server.send(Message.json(.hello, seq: 1, Hello(role: .controller, client: "t")).encoded())
        let welcome = try server.reply().decode(Welcome.self)
        #expect(welcome.revision == "2.10" && welcome.protocol == 2)
        #expect(
            welcome.features == [
                "several-broadcasts", "capture-choice", "capture-change", "windows", "session-lock", "commands",
                "memory-plan", "exclude-windows", "camera", "encoded-samples", "audio-figures",
            ])
        #expect(
            welcome.offers(.commands) == true && welcome.offers(.camera) == true
                && welcome.offers(.encodedSamples) == true && welcome.offers(.audioFigures) == true)
        // A daemon older than 2.6 announces nothing: a client cannot tell, and tries.
        let older = try Message(
            .welcome, payload: Array(#"{"maxDescriptors":4,"maxPayload":1048576,"protocol":2,"server":"b"}"#.utf8)
        )
        .decode(Welcome.self)
        #expect(older.revision == nil && older.offers(.commands) == nil)
    }

    @Test func anUnknownOpcodeIsRefusedAsUnsupportedAndTheConnectionStays() throws {
        let server = try Server()
        try server.send(Message.json(.hello, seq: 1, Hello(role: .controller, client: "t")).encoded())
        #expect(try server.reply().opcode == .welcome)
        // A request of a later revision, then a known one in the same read: answered in order.
        try server.send(
            Self.unknown(0x0400, seq: 5, payload: Array(#"{"camera":1}"#.utf8))
                + Message.json(.getStatus, seq: 6, Empty()).encoded())
        let refusal = try server.reply()
        #expect(refusal.opcode == .error && refusal.seq == 5)
        let error = try refusal.decode(BroadcastError.self)
        #expect(error.code == .unsupported, "\(error)")
        #expect(
            error.message.contains("has no message 0x0400") && error.message.contains("revision 2.10"),
            "\(error.message)")
        let ok = try server.reply()
        #expect(ok.opcode == .ok && ok.seq == 6)
        #expect(server.received.map(\.opcode) == [.getStatus])
        #expect(!server.session.isClosing)
        // A malformed message of a known opcode is still a protocol violation.
        try server.send(Message(.releaseSlot, seq: 7, payload: [1, 2, 3]).encoded())
        #expect(
            server.received.last?.opcode == .releaseSlot,
            "known opcodes go on to the daemon, which judges their payload")
    }

    @Test func anUnknownOpcodeBeforeHelloOrWithDescriptorsBreaksTheProtocol() throws {
        let before = try Server()
        try before.send(Self.unknown(0x0400, seq: 1))
        let violation = try before.reply()
        #expect(try violation.decode(BroadcastError.self).code == .protocolError)
        #expect(before.session.isClosing)

        let withDescriptor = try Server()
        try withDescriptor.send(Message.json(.hello, seq: 1, Hello(role: .controller, client: "t")).encoded())
        _ = try withDescriptor.reply()
        let devNull = Descriptor(adopting: open("/dev/null", O_RDONLY | O_CLOEXEC))
        try withDescriptor.send(Self.unknown(0x0400, seq: 2, descriptors: 1), descriptors: [devNull])
        let refused = try withDescriptor.reply()
        #expect(try refused.decode(BroadcastError.self).code == .protocolError)
        #expect(withDescriptor.session.isClosing)
        devNull.close()
    }

    @Test func theDecoderHandsUnknownFramesOverWholeAndClosesTheirDescriptors() throws {
        var decoder = MessageDecoder()
        let devNull = Descriptor(adopting: open("/dev/null", O_RDONLY | O_CLOEXEC))
        let raw = devNull.raw
        decoder.append(descriptors: [devNull])
        decoder.append(Self.unknown(0x0499, seq: 3, descriptors: 1) + Message.json(.ok, seq: 4, Empty()).encoded())
        guard case .unknown(let opcode, let seq, let count)? = try decoder.nextFrame() else {
            Issue.record("no unknown frame")
            return
        }
        #expect(opcode == 0x0499 && seq == 3 && count == 1)
        #expect(fcntl(raw, F_GETFD) == -1, "the unknown frame's descriptor was not closed")
        guard case .message(let ok)? = try decoder.nextFrame() else {
            Issue.record("the message after it was lost")
            return
        }
        #expect(ok.opcode == .ok && ok.seq == 4)
    }

    /// STATUS's `frameRate` arrived as 15.000000150000002 where BROADCAST_STARTED said 15.
    @Test func theStatusFrameRateIsTheWholeNumberBroadcastStartedSays() throws {
        let manifest = HandlerManifest(name: "h", displayName: "H", exec: "/bin/true")
        let broadcast = try Broadcast(
            id: 1, entry: HandlerRegistry.Entry(manifest: manifest, file: "/dev/null"), maxDuration: nil,
            wakes: WakeRegistry())
        broadcast.setUp(["frameRate": "15"])
        let interval: UInt64 = 33_333_333
        let started = broadcast.chooseFrameRate(captureRate: 1e9 / Double(interval))
        broadcast.beginLive(now: 0, frameInterval: interval)
        let status = broadcast.status(now: 0, base: BroadcastStatus(state: .idle, source: "s"))
        #expect(status.frameRate == Int(started.rounded()) && status.frameRate == 15)
        #expect(compactJSON(status).contains(#""frameRate":15,"#), "\(compactJSON(status))")
    }

    /// A daemon that announces features without `commands` and `capture-change`: the client refuses those requests
    /// itself, and sends nothing (an older daemon would close the connection on an opcode it does not know).
    @Test func theControllerClientChecksTheAnnouncedFeatures() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("features-\(getpid()).sock").path
        unlink(path)
        let listener = try UnixSocket.listen(path: path)
        defer {
            listener.close()
            unlink(path)
        }
        let seen = Mutex<[Opcode]>([])
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            defer { done.signal() }
            var socket: Descriptor?
            for _ in 0..<500 where socket == nil {
                socket = try? UnixSocket.accept(listener)
                if socket == nil { usleep(2000) }
            }
            guard let socket else { return }
            let daemon = PeerConnection(socket: socket)
            guard let hello = try? daemon.receive(timeoutMilliseconds: 2000) else { return }
            seen.withLock { $0.append(hello.opcode) }
            try? daemon.send(
                .json(.welcome, seq: hello.seq, Welcome(server: "broadcastd 9", features: ["several-broadcasts"])))
            while let message = try? daemon.receive(timeoutMilliseconds: 300) {
                seen.withLock { $0.append(message.opcode) }
            }
            daemon.close()
        }
        let client = try ControllerClient(socketPath: path, client: "t")
        #expect(client.welcome.offers(.commands) == false)
        let refused = #expect(throws: ProtocolError.self) { try client.send(command: "save") }
        #expect(
            refused?.refusal?.code == .unsupported && refused?.refusal?.message.contains("'commands'") == true,
            "\(String(describing: refused))")
        #expect(throws: ProtocolError.self) { try client.changeCapture(CaptureChoice(region: "0,0,64x64")) }
        client.close()
        done.wait()
        #expect(seen.withLock { $0 } == [.hello], "the client sent what the daemon does not offer")
    }
}
