import BroadcastCapture
import BroadcastCore
import BroadcastProtocol

/// How broadcastd comes by its capture source: the one its own options describe (`defaults`), and, for a
/// broadcast that chooses its capture (START's `capture`), another made by `make`.
public struct CaptureSources {
    /// What broadcastd's options capture, said as a choice (its display, output or region, frame rate, cursor).
    public var defaults: CaptureChoice
    public var make: (CaptureChoice) throws(CaptureError) -> CaptureSource

    public init(defaults: CaptureChoice, make: @escaping (CaptureChoice) throws(CaptureError) -> CaptureSource) {
        self.defaults = defaults
        self.make = make
    }
}

extension Daemon {
    /// Makes the source `asked` describes the daemon's while no capture is open; nil when it already is.
    /// The first broadcast of a capture chooses it.
    func choose(_ asked: CaptureChoice) -> BroadcastError? {
        if let problem = asked.problem { return BroadcastError(.invalidRequest, problem) }
        guard let sources else {
            return asked.isEmpty ? nil : BroadcastError(.invalidRequest, "this broadcastd captures what its own options say only")
        }
        let wanted = sources.defaults.choosing(asked)
        guard wanted != captureChoice else { return nil }
        do { source = try sources.make(wanted) } catch { return BroadcastError(.captureFailed, error.description) }
        captureChoice = wanted
        logger.info("capture chosen by START (\(asked)): \(source.description)")
        return nil
    }

    /// Back to broadcastd's own source, once no capture is open (nothing to do when it is the one).
    func restoreDefaultSource() {
        guard capture == nil, source !== defaultSource else { return }
        source = defaultSource
        captureChoice = sources?.defaults ?? CaptureChoice()
    }

    /// Whether a broadcast asking for `asked` can join the capture running for the others: when it asks for the
    /// same, or only a lower frame rate (its handler then gets every n-th frame), which is returned.
    func join(_ asked: CaptureChoice, running active: [Broadcast]) -> Result<Double?, BroadcastError> {
        if let problem = asked.problem { return .failure(BroadcastError(.invalidRequest, problem)) }
        let rate = 1e9 / Double(source.frameInterval)
        var differs: [String] = []
        let running = captureChoice.choosing(CaptureChoice(frameRate: Int(rate.rounded())))
        let wanted = running.choosing(asked)
        if wanted.display != running.display || wanted.target != running.target {
            differs.append([asked.display.map { "--display \($0)" }, asked.output.map { "--output \($0)" },
                            asked.region.map { "--region \($0)" }, asked.window.map { "--window \($0)" },
                            asked.app.map { "--app \($0)" }].compactMap { $0 }.joined(separator: " "))
        }
        if wanted.cursor != running.cursor, let cursor = asked.cursor { differs.append("--cursor \(cursor)") }
        if let fps = asked.frameRate, Double(fps) > rate + 0.5 { differs.append("--fps \(fps)") }
        guard differs.isEmpty else {
            let list = active.map { "\($0.id) (\($0.manifest.name))" }.joined(separator: ", ")
            return .failure(BroadcastError(.captureInUse, "broadcast(s) \(list) share the capture running: \(source.description); " +
                "this one asks for \(differs.joined(separator: " ")). Start it once they finish, or without capture options " +
                "to join theirs (a lower --fps joins it, taking every n-th frame)"))
        }
        return .success(asked.frameRate.map(Double.init).flatMap { $0 < rate - 0.5 ? $0 : nil })
    }
}
