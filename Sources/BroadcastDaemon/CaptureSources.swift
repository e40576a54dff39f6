import BroadcastCapture
import BroadcastCore
import BroadcastProtocol

/// How broadcastd comes by its capture source: the one its own options describe (`defaults`), and, for a
/// broadcast that chooses its capture (START's `capture`), another made by `make`.
public struct CaptureSources {
    /// What broadcastd's options capture, said as a choice (its display, output or region, frame rate, cursor).
    public var defaults: CaptureChoice
    public var make: (CaptureChoice) throws(CaptureError) -> CaptureSource
    /// The cameras there are now (PipeWire's video sources), for SOURCES and `--camera`; nil: none can be captured.
    public var cameras: (() throws(CaptureError) -> [CameraDescription])?
    /// The source of a camera's frames (its PipeWire node), in broadcastd's pixel format and colour range.
    public var makeCamera: ((CameraDescription) throws(CaptureError) -> CaptureSource)?

    public init(
        defaults: CaptureChoice, make: @escaping (CaptureChoice) throws(CaptureError) -> CaptureSource,
        cameras: (() throws(CaptureError) -> [CameraDescription])? = nil,
        makeCamera: ((CameraDescription) throws(CaptureError) -> CaptureSource)? = nil
    ) {
        self.defaults = defaults
        self.make = make
        self.cameras = cameras
        self.makeCamera = makeCamera
    }
}

extension DaemonCore {
    /// Makes the source `asked` describes the daemon's while no capture is open; nil when it already is.
    /// The first broadcast of a capture chooses it.
    func choose(_ asked: CaptureChoice) -> BroadcastError? {
        if let problem = asked.problem { return BroadcastError(.invalidRequest, problem) }
        guard let sources else {
            return asked.isEmpty
                ? nil : BroadcastError(.invalidRequest, "this broadcastd captures what its own options say only")
        }
        let wanted = sources.defaults.choosing(asked)
        // The camera is not the screen's: another camera keeps the source.
        var screen = wanted
        screen.camera = captureChoice.camera
        guard screen != captureChoice else {
            captureChoice = wanted
            return nil
        }
        do { source = try sources.make(wanted) } catch { return BroadcastError(.captureFailed, error.description) }
        captureChoice = wanted
        logger.info("capture chosen by START (\(asked)): \(source.description)")
        return nil
    }

    /// The camera `choice` asks for (broadcastd's `--camera` unless the START said another), looked up now; nil for
    /// none. A name that matches no camera is refused with the list of those there are.
    func pickCamera(_ choice: CaptureChoice) -> Result<CameraDescription?, BroadcastError> {
        let request = CameraRequest(choice.camera ?? "none")
        guard request != .none else { return .success(nil) }
        guard let list = sources?.cameras else {
            return .failure(BroadcastError(.captureFailed, "--camera \(request): this broadcastd has no PipeWire"))
        }
        do {
            let asked = clock.now()
            let cameras = try list()
            logger.debug("cameras listed in \((clock.now() - asked) / 1_000_000) ms: \(cameras.map(\.name))")
            return request.pick(from: cameras)
        } catch {
            return .failure(BroadcastError(.captureFailed, "--camera \(request): \(error.description)"))
        }
    }

    /// Back to broadcastd's own source, once no capture is open (nothing to do when it is the one).
    /// After a CHANGE_CAPTURE of broadcastd's own source, that source takes its own target again too.
    func restoreDefaultSource() {
        guard capture == nil else { return }
        let defaults = sources?.defaults ?? CaptureChoice()
        if source !== defaultSource {
            source = defaultSource
        } else if captureChoice.target != defaults.target, let target = Self.screenTarget(of: defaults) {
            try? source.retarget(target)
        }
        captureChoice = defaults
    }

    /// The part of the screen `choice` names when it is an output, a region or the whole screen (nil for a
    /// window or an app, or a region that does not parse).
    static func screenTarget(of choice: CaptureChoice) -> CaptureTarget? {
        if choice.window != nil || choice.app != nil { return nil }
        if let output = choice.output { return .output(output) }
        if let region = choice.region { return ScreenRect(region: region).map { .region($0) } }
        return .screen
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
            differs.append(
                [
                    asked.display.map { "--display \($0)" }, asked.output.map { "--output \($0)" },
                    asked.region.map { "--region \($0)" }, asked.window.map { "--window \($0)" },
                    asked.app.map { "--app \($0)" },
                ].compactMap { $0 }.joined(separator: " "))
        }
        if wanted.cursor != running.cursor, let cursor = asked.cursor { differs.append("--cursor \(cursor)") }
        if let fps = asked.frameRate, Double(fps) > rate + 0.5 { differs.append("--fps \(fps)") }
        if let camera = asked.camera, camera != "none" {
            switch pickCamera(asked) {
            case .success(let wanted) where wanted?.serial == capture?.camera?.serial: break
            case .success: differs.append("--camera \(camera)")
            case .failure(let error): return .failure(error)
            }
        }
        let excluded = running.excludeWindows ?? []
        if let more = asked.excludeWindows, CaptureChoice.union(excluded, more).count > excluded.count {
            differs.append(more.map { "--exclude-window \($0)" }.joined(separator: " "))
        }
        guard differs.isEmpty else {
            let list = active.map { "\($0.id) (\($0.manifest.name))" }.joined(separator: ", ")
            return .failure(
                BroadcastError(
                    .captureInUse,
                    "broadcast(s) \(list) share the capture running: \(source.description); "
                        + "this one asks for \(differs.joined(separator: " ")). Start it once they finish, or without capture options "
                        + "to join theirs (a lower --fps joins it, taking every n-th frame)"))
        }
        return .success(asked.frameRate.map(Double.init).flatMap { $0 < rate - 0.5 ? $0 : nil })
    }

    /// CHANGE_CAPTURE: the running capture takes another part of the screen (an output, a region, or the whole
    /// screen when neither is given) from its next frame on, for every broadcast sharing it; a new size reaches
    /// every handler as a format change. What cannot change while capturing (display, rate, cursor, a window or
    /// an app, chosen when capture starts) is refused, and nothing changes.
    func changeCapture(_ asked: CaptureChoice) -> Result<Void, BroadcastError> {
        if let problem = asked.problem { return .failure(BroadcastError(.invalidRequest, problem)) }
        guard capture != nil else {
            return .failure(
                BroadcastError(
                    .noBroadcast,
                    "no capture runs; give the capture options to `broadcastctl start`, "
                        + "`record` or `stream` instead"))
        }
        let fixed = [
            ("--display", asked.display), ("--window", asked.window), ("--app", asked.app),
            ("--fps", asked.frameRate.map(String.init)), ("--cursor", asked.cursor),
            ("--exclude-window", asked.excludeWindows?.first),
        ].filter { $0.1 != nil }.map(\.0)
        guard fixed.isEmpty else {
            return .failure(
                BroadcastError(
                    .invalidRequest,
                    "\(fixed.joined(separator: ", ")) cannot change while capturing "
                        + "(chosen when capture starts); an output or a region can, or the whole screen"))
        }
        guard let target = Self.screenTarget(of: asked) else {
            let region = asked.region ?? ""
            return .failure(
                BroadcastError(.invalidRequest, "--region \(region): \(ScreenRegion.problem(region) ?? "")"))
        }
        do { try source.retarget(target) } catch { return .failure(BroadcastError(.captureFailed, error.description)) }
        captureChoice.target = (asked.output, asked.region, nil, nil)
        logger.info("capture changed to \(target) for every broadcast: \(source.description)")
        for broadcast in broadcasts where broadcast.isActive {
            peers.publish(.json(.stateChanged, status(of: broadcast)))
        }
        return .success(())
    }
}
