import BroadcastEncoding
import BroadcastMedia
import BroadcastSystem
import BroadcastWebRTC
import Foundation
import Logging

/// An encoded packet on its way to the network, and the stream it belongs to.
struct QueuedPacket {
    let packet: EncodedPacket
    let stream: Int
}

/// The network side of one destination of the `stream` handler, on a thread of its own so that a slow or
/// broken link never holds up the handler's callbacks nor the other destinations: it connects
/// (libavformat's srt, rtmp and rtmps protocols, or its hls muxer to files or HTTP PUT; WebRTC to a WHIP
/// endpoint through `WHIPOutput`), sends what its own bounded `SendQueue` holds, and on an error reconnects
/// with backoff (0.5 s doubling to 5 s) until `reconnectFor` has passed, then gives up with the reason (at
/// once when a WHIP endpoint refuses for good: a wrong token, no such endpoint).
final class Sender: PacketSink, @unchecked Sendable {
    struct Figures: Equatable {
        var bytesSent: Int64 = 0
        var connected = false
        var reconnects = 0
        var queueBytes = 0
        var queueMs = 0
        var droppedVideoFrames = 0
        var droppedAudioPackets = 0
        var gopDrops = 0
        var lastError: String?
        var failure: String?
        /// libsrt's figures, while an SRT connection is open.
        var srt: SRTStatistics?
        /// The WebRTC receiver's figures, while a WHIP session is up (refreshed about once a second).
        var webrtc: WebRTCStatistics?
    }

    let destination: StreamDestination
    private let options: StreamOptions
    private let streams: [StreamParameters]
    private let logger: Logger
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var queue: SendQueue<QueuedPacket>
    private var figures = Figures()
    private var finishing = false
    private var keyframeWanted = false
    private var receiverKeyframes = ReceiverKeyframes()
    /// The open SRT connection (its statistics are read from other threads).
    private var srt: SRTConnection?
    private var thread: Thread?
    private let done = DispatchSemaphore(value: 0)
    /// What an HLS destination writes, watched.
    private let hls: HLSOutput?
    /// WHIP: the ICE servers the endpoint named in its answers (used from the next connection on).
    private var learnedICEServers: [ICEServer] = []
    /// WHIP: the endpoint refused trickled candidates (guarded by `condition`).
    private var trickleRefused = false
    /// The time, for how long sending has failed (monotonic ns).
    private let clock: @Sendable () -> UInt64

    /// `streams` in order: stream i of every connection carries the packets `write` is given for stream i.
    init(
        destination: StreamDestination, options: StreamOptions, streams: [StreamParameters], bytesPerSecond: Int,
        logger: Logger,
        clock: @escaping @Sendable () -> UInt64 = MonotonicClock.now
    ) {
        self.clock = clock
        self.destination = destination
        self.options = options
        self.streams = streams
        self.logger = logger
        let seconds = options.maxQueueSeconds
        queue = SendQueue(
            maxBytes: max(1 << 20, Int(Double(bytesPerSecond) * seconds * 2)), maxDuration: Int64(seconds * 1e9))
        // An HTTP origin's files wait in memory for their PUT, one at a time: each at most 4 times what the bit rate
        // gives a segment.
        let fileLimit = max(16 << 20, Int64(Double(bytesPerSecond) * options.segmentDuration * 4))
        hls =
            destination.isHLS
            ? HLSOutput(destination, reconnectFor: options.reconnectFor, fileLimit: fileLimit, logger: logger) : nil
    }

    /// What must hold before the destination is sent to: an HLS playlist in a folder is this stream's alone.
    func prepare() throws(MediaError) { try hls?.lockPlaylist() }

    /// Lets go of what `prepare` took, when the sender never ran.
    func release() { hls?.unlockPlaylist() }

    func start() {
        let thread = Thread { [self] in
            run()
            done.signal()
        }
        thread.name = "stream sender"
        self.thread = thread
        thread.start()
    }

    /// Queues a packet.
    func write(_ packet: EncodedPacket, stream: Int) throws(MediaError) {
        let isVideo = stream == 0
        let isKeyframe = packet.isKeyframe
        let time = packet.time
        let bytes = packet.data.count
        let box = QueuedPacket(packet: packet, stream: stream)
        condition.lock()
        // A destination given up on takes nothing more.
        guard figures.failure == nil else { return condition.unlock() }
        queue.push(.init(isVideo: isVideo, isKeyframe: isKeyframe, bytes: bytes, time: time, payload: box))
        // Only a connected destination asks for keyframes: one that is away must not cost the others
        // theirs (it asks when it is back).
        if isVideo && queue.waitingForKeyframe && figures.connected { keyframeWanted = true }
        condition.signal()
        condition.unlock()
    }

    /// Whether the video encoder should make its next frame a keyframe (after a drop or a reconnection); clears the request.
    func takeKeyframeRequest() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let wanted = keyframeWanted
        keyframeWanted = false
        return receiverKeyframes.take(now: clock()) || wanted
    }

    var snapshot: Figures {
        condition.lock()
        defer { condition.unlock() }
        var f = figures
        f.queueBytes = queue.bytes
        f.queueMs = Int(queue.duration / 1_000_000)
        f.droppedVideoFrames = queue.droppedVideoFrames
        f.droppedAudioPackets = queue.droppedAudioPackets
        f.gopDrops = queue.drops
        f.srt = srt?.statistics
        // An HTTP origin that answers with an error: said while it lasts, and away while a file is tried again.
        if let problem = hls?.problem, f.failure == nil {
            f.lastError = problem.text
            f.connected = f.connected && !problem.retrying
        }
        return f
    }

    /// The queue's fill, 0...1: the larger of its bytes and its time against their limits.
    var fill: Double {
        condition.lock()
        defer { condition.unlock() }
        return max(Double(queue.bytes) / Double(queue.maxBytes), Double(queue.duration) / Double(queue.maxDuration))
    }

    /// Asks the thread to send what is queued, close the connection and end (`finish` waits for it).
    func requestFinish() {
        condition.lock()
        finishing = true
        condition.broadcast()
        condition.unlock()
    }

    /// Sends what is queued (until `deadline`), closes the connection and ends the thread.
    func finish(deadline: DispatchTime) {
        requestFinish()
        hls?.finish(by: deadline)
        if thread != nil, done.wait(timeout: deadline) == .timedOut {
            logger.warning(
                "stream: the queue to \(destination.displayURL) was not sent in time; \(snapshot.queueMs) ms of it are lost"
            )
            condition.lock()
            while queue.pop() != nil {}
            condition.unlock()
            _ = done.wait(timeout: .now() + 10)
        }
        thread = nil
    }

    private func run() {
        var muxer: StreamOutput?
        var statisticsRead = clock()
        // Since when sending has not worked (connecting, or writing once connected: a connection that opens and
        // then fails at once, an HLS folder on a full disk), and the wait before the next try.
        var failingSince: UInt64?
        var backoff = 0.5
        var everConnected = false
        defer { hls?.unlockPlaylist() }
        while true {
            if muxer == nil {
                if isFinishing() && everConnected { break }
                do {
                    let connection = try connect(connectedBefore: everConnected)
                    muxer = connection.muxer
                    logger.info("stream: connected to \(destination.displayURL)\(everConnected ? " again" : "")")
                    condition.lock()
                    if everConnected { figures.reconnects += 1 }
                    figures.connected = true
                    srt = connection.srt
                    // WebRTC is live: what waited while connecting is too old to show; it starts on a new keyframe.
                    if destination.isWebRTC { queue.restartAtNextKeyframe() } else { queue.restartAtKeyframe() }
                    if queue.waitingForKeyframe { keyframeWanted = true }
                    condition.unlock()
                    everConnected = true
                } catch let thrown {
                    let error: any Error = hls?.takeFailure() ?? thrown
                    if let refusal = hls?.refusal { return giveUp(refusal) }
                    let refused = (thrown as? WebRTCError).flatMap { $0.final ? $0.reason : nil }
                    let since = failingSince ?? clock()
                    failingSince = since
                    let waited = Double(clock() - since) / 1e9
                    if refused == nil {
                        let left = Int(max(0, options.reconnectFor - waited))
                        logger.warning("stream: \(error) (retrying for \(left) s more)")
                    }
                    condition.lock()
                    figures.connected = false
                    figures.lastError = "\(error)"
                    if let refused {
                        figures.failure = "cannot stream to \(destination.displayURL): \(refused)"
                        condition.unlock()
                        return
                    }
                    if waited >= options.reconnectFor || finishing {
                        figures.failure =
                            everConnected
                            ? "the connection to \(destination.displayURL) was lost and could not be made again for \(Int(options.reconnectFor)) s: \(error)"
                            : "cannot stream to \(destination.displayURL): \(error); check that the server runs and listens there, and that the URL and stream key are right (the handler's log has the server's own message, if it sent one)"
                        condition.unlock()
                        return
                    }
                    // Packets keep coming meanwhile; the queue drops whole GOPs when they are too many.
                    _ = condition.wait(until: Date().addingTimeInterval(backoff))
                    condition.unlock()
                    backoff = min(backoff * 2, 5)
                    continue
                }
            }
            condition.lock()
            while queue.isEmpty && !finishing { _ = condition.wait(until: Date().addingTimeInterval(0.5)) }
            let entry = queue.pop()
            condition.unlock()
            guard let entry else { break }  // finishing, and everything is sent
            do {
                try muxer!.write(entry.payload.packet, stream: entry.payload.stream)
                if let failure = hls?.takeFailure() { throw failure }
                // Sending works again once a write went through (for HLS, once a file was written whole).
                let progressed = hls?.takeCompleted() ?? true
                if progressed {
                    failingSince = nil
                    backoff = 0.5
                }
                let webrtc = (muxer as? WHIPOutput).flatMap { output in
                    clock() - statisticsRead >= 1_000_000_000 ? output.statistics() : nil
                }
                if webrtc != nil { statisticsRead = clock() }
                condition.lock()
                figures.bytesSent += Int64(entry.bytes)
                if progressed { figures.lastError = nil }
                if let webrtc { figures.webrtc = webrtc }
                condition.unlock()
            } catch let thrown {
                let error = hls?.takeFailure() ?? thrown
                if let refusal = hls?.refusal { return giveUp(refusal) }
                let reason = srt?.lastError.map { "\(error) (SRT: \($0))" } ?? "\(error)"
                muxer?.abandon()
                muxer = nil
                let since = failingSince ?? clock()
                failingSince = since
                condition.lock()
                srt = nil
                figures.webrtc = nil
                figures.connected = false
                figures.lastError = reason
                if Double(clock() - since) / 1e9 >= options.reconnectFor {
                    let seconds = Int(options.reconnectFor)
                    figures.failure = "sending to \(destination.displayURL) has failed for \(seconds) s: \(reason)"
                    condition.unlock()
                    logger.error("stream: \(reason); given up")
                    return
                }
                condition.unlock()
                logger.warning("stream: \(reason); reconnecting")
            }
        }
        if let muxer {
            do {
                try muxer.finish()
                if let failure = hls?.takeFailure() { throw failure }
            } catch {
                // The end of the stream (an HLS playlist's last version, its ENDLIST) is lost: the broadcast's error.
                logger.error("stream: \(error)")
                condition.lock()
                figures.failure =
                    figures.failure ?? hls?.refusal
                    ?? "finishing the stream to \(destination.displayURL) failed: \(error)"
                condition.unlock()
            }
        }
        muxer = nil
        condition.lock()
        srt = nil
        figures.webrtc = nil
        figures.connected = false
        condition.unlock()
    }

    /// The receiver asked for a keyframe (WebRTC: PLI or FIR): the next frame is one, at most one each
    /// `ReceiverKeyframes.spacing`.
    private func keyframeRequestedByReceiver() {
        condition.lock()
        if figures.connected { receiverKeyframes.ask() }
        condition.unlock()
    }

    /// Ends sending for good: an HTTP origin refused what it was sent.
    private func giveUp(_ reason: String) {
        logger.error("stream: \(reason); given up")
        condition.lock()
        figures.connected = false
        figures.lastError = reason
        figures.failure = reason
        condition.unlock()
    }

    private func isFinishing() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return finishing
    }

    /// A new connection: the muxer (or WHIP session), and for SRT the libsrt connection under it (which must outlive
    /// it). `connectedBefore`: this destination was live once (a WHIP endpoint's 409 is then the lost session it still
    /// holds).
    private func connect(connectedBefore: Bool) throws -> (muxer: StreamOutput, srt: SRTConnection?) {
        guard let container = destination.container else {
            let output = try WHIPOutput(
                destination, streams: streams, iceServers: options.iceServers,
                learned: &learnedICEServers, trickles: !condition.withLock { trickleRefused },
                trickleRefused: { [weak self] in self?.condition.withLock { self?.trickleRefused = true } },
                connectedBefore: connectedBefore,
                keyframeRequested: { [weak self] in
                    self?.keyframeRequestedByReceiver()
                }, logger: logger)
            return (output, nil)
        }
        let muxer = try Muxer(url: destination.url, container: container)
        muxer.displayURL = destination.displayURL
        muxer.maxInterleaveDelta = 200_000
        var srt: SRTConnection?
        switch destination.scheme {
        // libsrt's own connection, for its statistics; a dead peer is noticed within 5 s.
        case .srt:
            let connection = try SRTConnection(url: destination.url, displayURL: destination.displayURL, sendTimeout: 5)
            muxer.customOutput = connection.output
            // Each packet as it comes: video is not held back until the audio of its time is encoded
            // (audio is placed on its timeline later than frames arrive; MPEG-TS needs no interleaving).
            muxer.interleaved = false
            srt = connection
        // A dead peer is noticed within 5 s instead of the system's TCP timeouts.
        case .rtmp, .rtmps: muxer.ioOptions = ["rw_timeout": "5000000"]
        case .hls, .http, .https:
            muxer.formatOptions = hlsOptions()
            muxer.watchOutputs(hls!.watch)
        case .whip, .whips: break  // WHIPOutput, above
        }
        for stream in streams { try muxer.addStream(stream) }
        try muxer.start()
        return (muxer, srt)
    }

    /// libavformat's hls muxer: fMP4 (CMAF) segments cut on keyframes, a sliding playlist whose old
    /// segments are deleted; files are written under a temporary name and renamed (a player never
    /// reads half a playlist); over HTTP, PUT and DELETE. Segment numbers start from the time, so
    /// that a muxer opened again after an error does not write over what players are reading.
    private func hlsOptions() -> [String: String] {
        var flags = "delete_segments+independent_segments"
        if destination.scheme == .hls {
            flags += "+temp_file"
            let directory = (destination.url as NSString).deletingLastPathComponent
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        let name = ((destination.url.split(separator: "?").first.map(String.init) ?? "") as NSString).lastPathComponent
        let stem = (name as NSString).deletingPathExtension
        var options = [
            "hls_segment_type": "fmp4", "hls_time": String(options.segmentDuration),
            "hls_list_size": String(options.playlistLength),
            "hls_flags": flags, "hls_start_number_source": "epoch", "hls_fmp4_init_filename": stem + "-init.mp4",
        ]
        // Not for files: with a method set, the muxer "deletes" a file by opening it for writing. An origin's PUT
        // and DELETE are HLSOutput's.
        if destination.scheme != .hls { options["method"] = "PUT" }
        return options
    }
}
