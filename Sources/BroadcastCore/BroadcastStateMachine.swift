/// Where the one broadcast is. `finished` keeps the last result until the next start.
public enum BroadcastPhase: String, Codable, Sendable, CaseIterable {
    case idle, awaitingSetup, starting, live, paused, finishing, finished
}

/// A broadcast as the state machine knows it.
public struct BroadcastDescription: Equatable, Codable, Sendable {
    public var id: UInt32
    public var handler: String
    public var url: String?
    /// Longest live (unpaused) time before the broadcast finishes by itself, in nanoseconds.
    public var maxDuration: UInt64?

    public init(id: UInt32, handler: String, url: String? = nil, maxDuration: UInt64? = nil) {
        self.id = id
        self.handler = handler
        self.url = url
        self.maxDuration = maxDuration
    }
}

/// What happens to a broadcast.
public enum BroadcastEvent: Equatable, Sendable {
    case start(BroadcastDescription)
    case setupCompleted(url: String?)
    case setupCancelled(BroadcastError)
    /// The handler returned from broadcastStarted and is ready for samples.
    case handlerReady
    case pause
    case resume
    /// The user asked to finish, or the maximum duration was reached.
    case finish
    /// The user asked to finish and throw away what the broadcast produced; once finished, to throw it away.
    case discard
    /// Something asks to end the broadcast with an error while the handler can still finish cleanly
    /// (the handler's own finishBroadcastWithError, a start timeout, a capture failure).
    case fail(BroadcastError)
    /// The handler process is gone; the error says how, nil after a clean exit.
    case handlerExited(BroadcastError?)
}

/// What the owner of the state machine must do after an event.
public enum BroadcastEffect: Equatable, Sendable {
    /// A setup UI must now complete or cancel the request.
    case awaitSetup
    case launchHandler
    case notifyHandlerPaused
    case notifyHandlerResumed
    /// Tell the handler the broadcast is over (or stop it if it never connected).
    case notifyHandlerFinished
    case finished(BroadcastError?)
    /// A finished broadcast is discarded: remove what its handler is known to have produced.
    case discardFinished
}

/// The one broadcast state. It keeps what the user asked for (`wantsPaused`) apart from what is
/// happening (`phase`) and reconciles them when an operation completes, so no intent is lost:
/// a pause asked while starting takes effect once live; toggles alternate callbacks exactly.
public struct BroadcastStateMachine: Sendable {
    public private(set) var phase: BroadcastPhase = .idle
    public private(set) var current: BroadcastDescription?
    public private(set) var wantsPaused = false
    /// The finish reason once known; in `finished`, the result of the last broadcast.
    public private(set) var error: BroadcastError?
    /// The current (or last) broadcast is being, or was, discarded.
    public private(set) var discarded = false

    public init() {}

    /// Applies `event`. A refused request throws and changes nothing.
    public mutating func handle(_ event: BroadcastEvent) throws(BroadcastError) -> [BroadcastEffect] {
        switch (event, phase) {
        case (.start(let description), .idle), (.start(let description), .finished):
            current = description
            wantsPaused = false
            error = nil
            discarded = false
            phase = .awaitingSetup
            return [.awaitSetup]
        case (.start, _):
            throw BroadcastError(
                .busy, "broadcast \(describeCurrent) is \(phase); finish it first with `broadcastctl stop`")

        case (.setupCompleted(let url), .awaitingSetup):
            current?.url = url
            phase = .starting
            return [.launchHandler]
        case (.setupCancelled(let reason), .awaitingSetup):
            return finish(with: reason)
        case (.setupCompleted, _), (.setupCancelled, _):
            throw BroadcastError(.invalidRequest, "no broadcast is waiting for setup (it is \(phase))")

        case (.handlerReady, .starting):
            phase = wantsPaused ? .paused : .live
            return wantsPaused ? [.notifyHandlerPaused] : []
        case (.handlerReady, _):
            throw BroadcastError(.protocolError, "the handler said it was ready while the broadcast was \(phase)")

        case (.pause, .live):
            wantsPaused = true
            phase = .paused
            return [.notifyHandlerPaused]
        case (.resume, .paused):
            wantsPaused = false
            phase = .live
            return [.notifyHandlerResumed]
        case (.pause, .paused), (.resume, .live):
            return []
        case (.pause, .awaitingSetup), (.pause, .starting):
            wantsPaused = true
            return []
        case (.resume, .awaitingSetup), (.resume, .starting):
            wantsPaused = false
            return []
        case (.pause, _), (.resume, _):
            throw BroadcastError(
                phase == .finishing ? .busy : .noBroadcast,
                phase == .finishing ? "broadcast \(describeCurrent) is already finishing" : "no broadcast is live")

        case (.finish, .awaitingSetup):
            return finish(
                with: BroadcastError(
                    .setupCancelled, "broadcast \(describeCurrent) was stopped before its setup completed"))
        case (.finish, .starting), (.finish, .live), (.finish, .paused):
            phase = .finishing
            return [.notifyHandlerFinished]
        case (.finish, .finishing):
            return []
        case (.finish, _):
            throw BroadcastError(.noBroadcast, "no broadcast is live")

        case (.discard, .awaitingSetup), (.discard, .starting), (.discard, .live), (.discard, .paused):
            discarded = true
            return try handle(.finish)
        case (.discard, .finishing):
            throw BroadcastError(
                .busy, "broadcast \(describeCurrent) is already finishing; discard it once it has finished")
        case (.discard, .finished):
            if discarded { return [] }
            discarded = true
            return [.discardFinished]
        case (.discard, .idle):
            throw BroadcastError(.noBroadcast, "no broadcast to discard")

        case (.fail(let reason), .awaitingSetup):
            return finish(with: reason)
        case (.fail(let reason), .starting), (.fail(let reason), .live), (.fail(let reason), .paused):
            error = reason
            phase = .finishing
            return [.notifyHandlerFinished]
        case (.fail(let reason), .finishing):
            if error == nil { error = reason }
            return []
        case (.fail, _):
            return []

        case (.handlerExited(let reason), .finishing):
            return finish(with: error ?? reason)
        case (.handlerExited(let reason), .starting), (.handlerExited(let reason), .live),
            (.handlerExited(let reason), .paused):
            return finish(
                with: reason
                    ?? BroadcastError(
                        .handlerFailed,
                        "handler '\(current?.handler ?? "?")' exited before the broadcast finished"))
        case (.handlerExited, _):
            return []
        }
    }

    private mutating func finish(with reason: BroadcastError?) -> [BroadcastEffect] {
        error = reason
        phase = .finished
        wantsPaused = false
        return [.finished(reason)]
    }

    private var describeCurrent: String {
        guard let current else { return "?" }
        return "\(current.id) (handler \(current.handler)\(current.url.map { ", url \(SecretURL.masked($0))" } ?? ""))"
    }
}

extension BroadcastStateMachine {
    /// The handler announced the URL viewers use (ReplayKit's broadcastURL update).
    public mutating func setURL(_ url: String) {
        current?.url = url
    }
}
