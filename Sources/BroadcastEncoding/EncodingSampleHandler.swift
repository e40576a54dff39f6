import BroadcastCore
import BroadcastHandlerKit
import BroadcastProtocol

/// A handler whose samples become encoded packets through a `HandlerEncoding` (record, replay, and stream with
/// `encode=shared`): the callbacks of revision 2.9 (broadcastd's answer to ENCODE, the shared encoder's streams,
/// packets and still pictures) and those the encoder follows (a new input format, the camera, a resume) go to its
/// `encoding` here, once for all of them. A subclass sets `encoding`, names itself (`role`), and hears of a failure
/// (`encodingFailed`) and of each shared packet taken (`encodedPacketTaken`).
open class EncodingSampleHandler: BroadcastSampleHandler {
    /// Its encoder, or (`encode=shared`) the one broadcastd shares with other handlers.
    package var encoding: HandlerEncoding?
    /// Why it stopped: nothing more is taken once it is set.
    package var failure: String?

    /// What its log lines start with ("record").
    open var role: String { "handler" }

    /// Taking a sample or an event failed with `message`: the broadcast fails.
    open func encodingFailed(_ message: String) {}

    /// A packet of the shared encoder was taken (for progress reports).
    open func encodedPacketTaken() {}

    open override func broadcastVideoFormatChanged(_ format: VideoFormat) {
        guard failure == nil, let encoding else { return }
        do { try encoding.inputChanged(to: format) } catch { encodingFailed("\(error)") }
    }

    open override func cameraChanged(format: VideoFormat?, camera: String, lost: String?) {
        encoding?.cameraChanged(to: format)
    }

    open override func broadcastResumed() { encoding?.resume() }

    public override func encodingAnswered(_ notice: EncodingNotice) {
        guard failure == nil, let encoding else { return }
        do {
            if let why = try encoding.answered(notice) {
                logger.info("\(role): no shared encoder (\(why)); encoding here")
            }
            logger.info("\(role): encoding with \(encoding.name)")
        } catch {
            encodingFailed("\(error)")
        }
    }

    public override func processEncodedStreams(_ streams: [EncodedStreamDescription]) { take(.streams(streams)) }

    public override func processEncodedPacket(_ header: EncodedPacketHeader) {
        take(.packet(header))
        if failure == nil { encodedPacketTaken() }
    }

    public override func processPictureUnchanged(through time: Int64) { take(.pictureUnchanged(through: time)) }

    public override func processAudioFigures(_ figures: AudioFigures) { take(.audioFigures(figures)) }

    private func take(_ event: SharedEncoderEvent) {
        guard failure == nil, let encoding else { return }
        do { try encoding.take(event) } catch { encodingFailed("\(error)") }
    }
}
