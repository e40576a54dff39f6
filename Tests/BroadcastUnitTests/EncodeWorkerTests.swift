import BroadcastSystem
import Glibc
import Testing

@testable import BroadcastEncoding

/// Video encoded on a thread of its own (`EncodeWorker`): an encode longer than a frame interval (x265's and
/// SVT-AV1's keyframes) held up the handler's intake, and broadcastd dropped about a frame a keyframe.
@Suite struct EncodeWorkerTests {
    static func frame(_ pts: Int64) throws -> MediaFrame {
        let frame = try MediaFrame.video(width: 16, height: 16, pixelFormat: .nv12)
        frame.frame.pointee.pts = pts
        return frame
    }

    static func packet(of frame: MediaFrame) -> EncodedPacket {
        EncodedPacket(
            kind: .video, data: [1], pts: frame.frame.pointee.pts, dts: frame.frame.pointee.pts, duration: 1,
            timeBase: .video, isKeyframe: false)
    }

    static func now() -> UInt64 { MonotonicClock.now() }

    /// Four frames of 150 ms encodes: each handing-in returns after `patience`, not after its encode; the packets
    /// come in order, those not ready by then with a later call or the drain.
    @Test func aSlowEncodeDoesNotHoldUpTheFramesAfterIt() throws {
        let worker = EncodeWorker(frameBytes: 3 << 20) { frame throws(MediaError) in
            usleep(150_000)
            return [Self.packet(of: frame)]
        }
        defer { worker.stop() }
        let start = Self.now()
        var packets: [Int64] = []
        for pts in 0..<4 { packets += try worker.encode(try Self.frame(Int64(pts))).map(\.pts) }
        let handing = Self.now() - start
        #expect(handing < 400_000_000, "handing 4 frames in took \(handing / 1_000_000) ms (600 encoding them)")
        packets += try worker.drain().map(\.pts)
        #expect(packets == [0, 1, 2, 3])
        #expect(Self.now() - start >= 600_000_000)
    }

    /// A fast encode's packets come with its own call, as before there was a thread.
    @Test func aFastEncodesPacketsComeWithItsCall() throws {
        let worker = EncodeWorker(frameBytes: 3 << 20) { frame throws(MediaError) in [Self.packet(of: frame)] }
        defer { worker.stop() }
        for pts in 0..<10 { #expect(try worker.encode(try Self.frame(Int64(pts))).map(\.pts) == [Int64(pts)]) }
    }

    /// An encoder's failure is thrown by the next call; the thread ends with `stop`.
    @Test func aFailureIsThrownByTheNextCall() throws {
        let worker = EncodeWorker(frameBytes: 3 << 20) { frame throws(MediaError) in
            if frame.frame.pointee.pts == 1 { throw MediaError("encode video", "broken") }
            return [Self.packet(of: frame)]
        }
        defer { worker.stop() }
        _ = try worker.encode(try Self.frame(0))
        _ = try? worker.encode(try Self.frame(1))
        #expect(throws: MediaError.self) { _ = try worker.drain() }
    }
}
