import BroadcastCore
import BroadcastProtocol
import BroadcastSystem
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// Connects `handler` to broadcastd over the socket it was launched with and dispatches callbacks
/// until the broadcast finishes. Exits 0 after `broadcastFinished`, 1 when the daemon goes away;
/// a started broadcast still gets its `broadcastFinished(error:)` then, so that the handler can
/// finish its work (close a recording) when broadcastd is killed.
///
/// `refusingRealtime`: a handler that encodes refuses real-time scheduling first (`Scheduling.refuseRealtime`), so
/// that no encoder library raises its threads above broadcastd's capture.
public func runBroadcastHandler(
    _ handler: BroadcastSampleHandler, name: String = "handler", refusingRealtime: Bool = false
) -> Never {
    if refusingRealtime {
        do { try Scheduling.refuseRealtime() } catch { handler.logger.warning("\(name): \(error)") }
    }
    do {
        try HandlerRunner(handler: handler, name: name).run()
        exit(0)
    } catch {
        handler.logger.error("\(name): \(error)")
        exit(1)
    }
}

struct HandlerRunner {
    let handler: BroadcastSampleHandler
    let name: String

    func run() throws(HandlerError) {
        guard let text = Environment.get("BROADCASTD_HANDLER_FD"), let fd = Int32(text), fd >= 0 else {
            throw HandlerError(
                "connect",
                "BROADCASTD_HANDLER_FD is not set: handlers are started by broadcastd (`broadcastctl start --handler NAME`), not by hand"
            )
        }
        Environment.unset("BROADCASTD_HANDLER_FD")
        let socket = Descriptor(adopting: fd)
        socket.setCloseOnExec()
        let connection = PeerConnection(socket: socket)
        handler.connection = connection
        var owesFinish = false
        do {
            let welcome = try connection.hello(role: .handler, client: name)
            handler.daemonRevision = welcome.revision
            handler.daemonFeatures = welcome.features.map(Set.init)
            try dispatch(connection, owesFinish: &owesFinish)
        } catch {
            let reason = Self.finishReason(error)
            if owesFinish { finishAbruptly(connection, reason) }
            throw error == .closed
                ? HandlerError("receive", reason.message) : HandlerError("talk to broadcastd", "\(error)")
        }
    }

    /// Why the broadcast ends, for a handler whose connection failed before BROADCAST_FINISHED.
    static func finishReason(_ error: ProtocolError) -> BroadcastError {
        switch error {
        case .closed:
            BroadcastError(.shutdown, "broadcastd went away (the connection closed) before the broadcast finished")
        case .transport(let cause):
            BroadcastError(.shutdown, "broadcastd went away (\(cause)) before the broadcast finished")
        case .refused(let refusal): refusal
        default: BroadcastError(.protocolError, error.description)
        }
    }

    /// The broadcast started but BROADCAST_FINISHED will never come: the last callback comes anyway.
    /// Requests made from it go nowhere, quietly: nobody is left to hear them.
    private func finishAbruptly(_ connection: PeerConnection, _ reason: BroadcastError) {
        handler.connection = nil
        connection.close()
        handler.broadcastFinished(error: reason, discard: false)
    }

    /// `owesFinish` is true from `broadcastStarted` until `broadcastFinished` is called.
    private func dispatch(_ connection: PeerConnection, owesFinish: inout Bool) throws(ProtocolError) {
        var pool: MappedPool?
        /// Revision 2.8: the camera's pool, beside the screen's.
        var cameraPool: MappedPool?
        while true {
            let message = try connection.receive()
            switch message.opcode {
            case .pool:
                let announcement = try message.decode(PoolAnnouncement.self)
                guard let fd = message.descriptors.first else { throw .malformed(.pool, "no descriptor attached") }
                let mapped: MappedPool
                do {
                    mapped = MappedPool(
                        id: announcement.pool,
                        memory: try SharedMemory(mapping: fd, size: announcement.slots * announcement.slotSize),
                        slotSize: announcement.slotSize)
                } catch {
                    throw .transport(error)
                }
                if announcement.camera == true { cameraPool = mapped } else { pool = mapped }
            case .broadcastStarted:
                let start = try message.decode(BroadcastStart.self)
                guard let video = start.video.videoFormat else {
                    throw .malformed(.broadcastStarted, "unknown pixel format \(start.video.format)")
                }
                handler.broadcastID = start.broadcast
                handler.broadcastURL = start.url
                handler.videoFormat = video
                handler.videoFullRange = start.video.colorRange == "full"
                guard let sampleFormat = AudioSampleFormat(name: start.audio.format) else {
                    throw .malformed(.broadcastStarted, "unknown audio format \(start.audio.format)")
                }
                handler.audioFormat = AudioFormat(channels: start.audio.channels, sampleFormat: sampleFormat)
                if let rate = start.frameRate, rate > 0 { handler.framesPerSecond = rate }
                if let streams = start.audioStreams {
                    handler.audioStreams = SampleType.allCases.filter {
                        streams.contains($0.description) && $0 != .video && $0 != .videoCamera
                    }
                }
                owesFinish = true
                handler.broadcastStarted(withSetupInfo: start.setupInfo)
                try connection.send(.json(.ready, Empty()))
                handler.readySent = true
                if let encode = handler.pendingEncode {
                    handler.pendingEncode = nil
                    try connection.send(encode)
                }
            case .videoSample, .cameraSample:
                let camera = message.opcode == .cameraSample
                let header = try VideoSampleHeader(decoding: message.payload)
                guard let pool = camera ? cameraPool : pool, pool.id == header.pool,
                    Int(header.slot) * pool.slotSize + Int(header.byteCount) <= pool.memory.size
                else {
                    throw .malformed(
                        message.opcode, "slot \(header.slot) of pool \(header.pool) is outside the mapped pool")
                }
                var format = camera ? handler.cameraFormat : handler.videoFormat
                if let pixelFormat = PixelFormat(rawValue: header.fourcc) {
                    format = VideoFormat(width: Int(header.width), height: Int(header.height), pixelFormat: pixelFormat)
                }
                guard let format, format.frameByteCount <= Int(header.byteCount) else {
                    throw .malformed(message.opcode, "a frame of \(header.byteCount) bytes in an unknown format")
                }
                let type: SampleType = camera ? .videoCamera : .video
                let data = UnsafeRawBufferPointer(
                    start: pool.memory.base + Int(header.slot) * pool.slotSize, count: Int(header.byteCount))
                var sample = SampleBuffer(
                    type: type, timing: header.timing, data: data, videoFormat: format,
                    orientation: header.orientation, audioFormat: nil, frameCount: 1)
                sample.isRepeat = header.repeated
                let release = FrameRelease {
                    try connection.send(SlotRelease(pool: header.pool, slot: header.slot).message)
                }
                sample.frameRelease = release
                handler.processSampleBuffer(sample, with: type)
                release()
                if let failure = release.failure { throw failure as? ProtocolError ?? .closed }
            case .cameraFormat:
                let notice = try message.decode(CameraFormatNotice.self)
                if let video = notice.video {
                    guard let format = video.videoFormat else {
                        throw .malformed(.cameraFormat, "unknown pixel format \(video.format)")
                    }
                    handler.cameraFormat = format
                    handler.cameraChanged(format: format, camera: notice.camera, lost: nil)
                } else {
                    handler.cameraFormat = nil
                    handler.cameraChanged(format: nil, camera: notice.camera, lost: notice.lost ?? "the camera is gone")
                }
            case .audioSample:
                let header = try AudioSampleHeader(decoding: message.payload)
                message.payload.withUnsafeBytes { raw in
                    let data = UnsafeRawBufferPointer(rebasing: raw[AudioSampleHeader.size...])
                    handler.processSampleBuffer(
                        SampleBuffer(
                            type: header.type, timing: header.timing, data: data, videoFormat: nil,
                            orientation: nil, audioFormat: header.format, frameCount: Int(header.frameCount)),
                        with: header.type)
                }
            case .cursor:
                handler.processCursor(try CursorSample(decoding: message.payload))
            case .encoding:
                handler.awaitingEncoding = false
                handler.encodingAnswered(try message.decode(EncodingNotice.self))
            case .packetRing:
                try mapPacketRing(message)
            case .encodedStreams:
                let streams = try message.decode(EncodedStreams.self)
                if let problem = streams.problem { throw .malformed(.encodedStreams, problem) }
                guard handler.packetRing != nil else { throw .unexpected(.encodedStreams, "before PACKET_RING") }
                handler.processEncodedStreams(streams.streams)
            case .encodedPacket:
                handler.processEncodedPacket(try EncodedPacketHeader(decoding: message.payload, of: .encodedPacket))
            case .pictureUnchanged:
                handler.processPictureUnchanged(
                    through: try PictureUnchanged(decoding: message.payload, of: .pictureUnchanged).through)
            case .audioFigures:
                let figures = try message.decode(AudioFigures.self)
                if let problem = figures.problem { throw .malformed(.audioFigures, problem) }
                handler.processAudioFigures(figures)
            case .keyframeRequested:
                handler.keyframeRequested()
            case .command:
                let command = try message.decode(HandlerCommand.self)
                handler.handleCommand(
                    command.command, arguments: command.arguments,
                    reply: CommandReply(id: command.id, connection: connection, logger: handler.logger))
            case .broadcastPaused:
                handler.broadcastPaused()
            case .broadcastResumed:
                handler.broadcastResumed()
            case .videoFormatChanged:
                let description = try message.decode(VideoDescription.self)
                guard let format = description.videoFormat else {
                    throw .malformed(.videoFormatChanged, "unknown pixel format \(description.format)")
                }
                handler.videoFormat = format
                handler.videoFullRange = description.colorRange == "full"
                handler.broadcastVideoFormatChanged(format)
            case .broadcastFinished:
                let end = try message.decode(BroadcastEnd.self)
                owesFinish = false
                handler.broadcastFinished(error: end.error, discard: end.discard == true)
                connection.close()
                return
            case .error:
                let error = try message.decode(BroadcastError.self)
                // Revision 2.6: a message of a later revision this daemon does not know; the connection stays.
                guard error.code == .unsupported else { throw .refused(error) }
                handler.logger.warning("\(name): \(error.message)")
                if handler.awaitingEncoding {  // revision 2.9's ENCODE, to an older daemon: no shared encoder
                    handler.awaitingEncoding = false
                    handler.encodingAnswered(EncodingNotice(error: error.message))
                }
            default:
                throw .unexpected(message.opcode, "not sent to handlers")
            }
        }
    }
}

extension HandlerRunner {
    /// PACKET_RING (revision 2.9): maps the shared encoder's ring, read-only.
    func mapPacketRing(_ message: Message) throws(ProtocolError) {
        let announcement = try message.decode(PacketRingAnnouncement.self)
        guard let fd = message.descriptors.first else { throw .malformed(.packetRing, "no descriptor attached") }
        guard announcement.size > PacketRingLayout.headerSize, announcement.size <= PacketRingAnnouncement.maxSize
        else {
            throw .malformed(.packetRing, "a ring of \(announcement.size) bytes")
        }
        let memory: SharedMemory
        do { memory = try SharedMemory(mapping: fd, size: announcement.size) } catch { throw .transport(error) }
        guard let reader = PacketRingReader(base: memory.base, size: announcement.size) else {
            throw .malformed(.packetRing, "the memory is not a packet ring of \(announcement.size) bytes")
        }
        handler.packetRingMemory = memory
        handler.packetRing = reader
    }
}

/// A pool of frame slots the handler mapped (POOL): the screen's, or (revision 2.8) the camera's.
struct MappedPool {
    var id: UInt32
    var memory: SharedMemory
    var slotSize: Int
}
