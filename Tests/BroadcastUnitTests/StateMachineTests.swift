import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

@testable import BroadcastDaemon

@Suite struct StateMachineTests {
    let description = BroadcastDescription(id: 7, handler: "inspect", maxDuration: nil)

    /// A machine brought to `live`.
    func live() throws -> BroadcastStateMachine {
        var m = BroadcastStateMachine()
        #expect(try m.handle(.start(description)) == [.awaitSetup])
        #expect(try m.handle(.setupCompleted(url: "file:///tmp/x")) == [.launchHandler])
        #expect(m.phase == .starting)
        #expect(try m.handle(.handlerReady) == [])
        #expect(m.phase == .live)
        return m
    }

    @Test func fullLifecycle() throws {
        var m = try live()
        #expect(m.current?.url == "file:///tmp/x")
        #expect(try m.handle(.pause) == [.notifyHandlerPaused])
        #expect(m.phase == .paused)
        #expect(try m.handle(.resume) == [.notifyHandlerResumed])
        #expect(try m.handle(.finish) == [.notifyHandlerFinished])
        #expect(m.phase == .finishing)
        #expect(try m.handle(.handlerExited(nil)) == [.finished(nil)])
        #expect(m.phase == .finished)
        #expect(m.error == nil)
    }

    @Test func pauseWhileStartingTakesEffectOnceLive() throws {
        var m = BroadcastStateMachine()
        _ = try m.handle(.start(description))
        #expect(try m.handle(.pause) == [])
        _ = try m.handle(.setupCompleted(url: nil))
        #expect(try m.handle(.pause) == [])
        #expect(m.phase == .starting)
        #expect(m.wantsPaused)
        #expect(try m.handle(.handlerReady) == [.notifyHandlerPaused])
        #expect(m.phase == .paused)
    }

    @Test func pauseThenResumeWhileStartingCancelOut() throws {
        var m = BroadcastStateMachine()
        _ = try m.handle(.start(description))
        _ = try m.handle(.setupCompleted(url: nil))
        _ = try m.handle(.pause)
        _ = try m.handle(.resume)
        #expect(try m.handle(.handlerReady) == [])
        #expect(m.phase == .live)
    }

    @Test func fiftyTogglesAlternateCallbacksAndEndInTheLastAskedState() throws {
        var m = try live()
        var callbacks: [BroadcastEffect] = []
        for i in 0..<50 {
            callbacks += try m.handle(i % 2 == 0 ? .pause : .resume)
            // Repeated requests are idempotent: no duplicated callback.
            callbacks += try m.handle(i % 2 == 0 ? .pause : .resume)
        }
        #expect(callbacks.count == 50)
        for (i, effect) in callbacks.enumerated() {
            #expect(effect == (i % 2 == 0 ? .notifyHandlerPaused : .notifyHandlerResumed))
        }
        #expect(m.phase == .live)  // the 50th request was a resume
        _ = try m.handle(.pause)
        #expect(m.phase == .paused)
    }

    @Test func secondStartIsRefusedAndChangesNothing() throws {
        var m = try live()
        let before = m
        let other = BroadcastDescription(id: 8, handler: "record")
        let error = #expect(throws: BroadcastError.self) { try m.handle(.start(other)) }
        #expect(error?.code == .busy)
        #expect(error?.message.contains("broadcast 7") == true)
        #expect(error?.message.contains("inspect") == true)
        #expect(m.phase == before.phase)
        #expect(m.current == before.current)
    }

    @Test func setupCancelFinishesWithTheReasonAndLaunchesNothing() throws {
        var m = BroadcastStateMachine()
        _ = try m.handle(.start(description))
        let reason = BroadcastError(.setupCancelled, "no account")
        #expect(try m.handle(.setupCancelled(reason)) == [.finished(reason)])
        #expect(m.phase == .finished)
        #expect(m.error == reason)
        // The next broadcast may start.
        #expect(try m.handle(.start(BroadcastDescription(id: 8, handler: "inspect"))) == [.awaitSetup])
        #expect(m.error == nil)
    }

    @Test func stopDuringSetupFinishes() throws {
        var m = BroadcastStateMachine()
        _ = try m.handle(.start(description))
        let effects = try m.handle(.finish)
        #expect(m.phase == .finished)
        #expect(effects.count == 1)
        #expect(m.error?.code == .setupCancelled)
    }

    @Test func handlerErrorIsTheFinishReason() throws {
        var m = try live()
        let reason = BroadcastError(.handlerError, "disk full")
        #expect(try m.handle(.fail(reason)) == [.notifyHandlerFinished])
        #expect(m.phase == .finishing)
        // A later failure does not replace the first reason; a second finish is a no-op.
        #expect(try m.handle(.fail(BroadcastError(.handlerFailed, "later"))) == [])
        #expect(try m.handle(.finish) == [])
        #expect(
            try m.handle(.handlerExited(BroadcastError(.handlerFailed, "exited with status 1"))) == [.finished(reason)])
    }

    @Test func handlerCrashWhileLiveFinishesWithItsExitStatus() throws {
        var m = try live()
        let crash = BroadcastError(.handlerFailed, "handler 'inspect' was killed by SIGSEGV")
        #expect(try m.handle(.handlerExited(crash)) == [.finished(crash)])
        #expect(m.phase == .finished)
    }

    @Test func handlerExitingCleanlyBeforeFinishIsStillAnError() throws {
        var m = try live()
        let effects = try m.handle(.handlerExited(nil))
        guard case .finished(let error?) = effects.first else {
            Issue.record("expected a finish with an error, got \(effects)")
            return
        }
        #expect(error.code == .handlerFailed)
    }

    @Test func crashDuringFinishReportsTheCrash() throws {
        var m = try live()
        _ = try m.handle(.finish)
        let crash = BroadcastError(.handlerFailed, "exited with status 2")
        #expect(try m.handle(.handlerExited(crash)) == [.finished(crash)])
    }

    @Test func requestsWithoutABroadcastAreRefused() throws {
        var m = BroadcastStateMachine()
        for event in [BroadcastEvent.pause, .resume, .finish] {
            let error = #expect(throws: BroadcastError.self) { try m.handle(event) }
            #expect(error?.code == .noBroadcast)
        }
        #expect(throws: BroadcastError.self) { try m.handle(.setupCompleted(url: nil)) }
        #expect(throws: BroadcastError.self) { try m.handle(.handlerReady) }
        #expect(m.phase == .idle)
    }

    @Test func pauseWhileFinishingIsRefused() throws {
        var m = try live()
        _ = try m.handle(.finish)
        let error = #expect(throws: BroadcastError.self) { try m.handle(.pause) }
        #expect(error?.code == .busy)
    }

    @Test func everyErrorPathResetsToAStartableState() throws {
        let failures: [(inout BroadcastStateMachine) throws -> Void] = [
            { _ = try $0.handle(.setupCancelled(BroadcastError(.setupCancelled, "x"))) },
            { _ = try $0.handle(.fail(BroadcastError(.handlerFailed, "x"))) },
            {
                _ = try $0.handle(.setupCompleted(url: nil))
                _ = try $0.handle(.handlerExited(BroadcastError(.handlerFailed, "x")))
            },
            {
                _ = try $0.handle(.setupCompleted(url: nil))
                _ = try $0.handle(.fail(BroadcastError(.handlerFailed, "x")))
                _ = try $0.handle(.handlerExited(nil))
            },
        ]
        for fail in failures {
            var m = BroadcastStateMachine()
            _ = try m.handle(.start(description))
            try fail(&m)
            #expect(m.phase == .finished)
            #expect(m.error != nil)
            #expect(!m.wantsPaused)
            #expect(try m.handle(.start(description)) == [.awaitSetup])
        }
    }

    @Test func aDiscardFinishesAndIsRememberedUntilTheNextStart() throws {
        var m = try live()
        #expect(try m.handle(.discard) == [.notifyHandlerFinished])
        #expect(m.phase == .finishing && m.discarded)
        #expect(throws: BroadcastError.self) { try m.handle(.discard) }
        #expect(try m.handle(.handlerExited(nil)) == [.finished(nil)])
        #expect(m.discarded)
        #expect(try m.handle(.discard) == [], "discarding twice does nothing")
        #expect(try m.handle(.start(description)) == [.awaitSetup])
        #expect(!m.discarded)
    }

    @Test func aFinishedBroadcastCanBeDiscardedOnce() throws {
        var m = try live()
        #expect(
            try m.handle(.handlerExited(BroadcastError(.handlerFailed, "killed"))) == [
                .finished(BroadcastError(.handlerFailed, "killed"))
            ])
        #expect(try m.handle(.discard) == [.discardFinished])
        #expect(m.discarded && m.phase == .finished)
        #expect(try m.handle(.discard) == [])
        var idle = BroadcastStateMachine()
        #expect(throws: BroadcastError.self) { try idle.handle(.discard) }
    }
}

@Suite struct DiscardRequestTests {
    let record = HandlerManifest(name: "record", displayName: "Record", exec: "r", discard: true)
    let stream = HandlerManifest(name: "stream", displayName: "Stream", exec: "s")

    @Test func onlyAHandlerThatCanDiscardIsAskedTo() throws {
        #expect(try DiscardedOutput.event(for: FinishRequest(), manifest: stream).get() == .finish)
        #expect(
            try DiscardedOutput.event(for: FinishRequest(broadcast: 3, discard: true), manifest: record).get()
                == .discard)
        #expect {
            try DiscardedOutput.event(for: FinishRequest(discard: true), manifest: stream).get()
        } throws: { "\($0)".contains("handler 'stream' cannot discard") }
    }

    @Test func onlyTheFileTheHandlerReportedIsEverRemoved() {
        #expect(DiscardedOutput.paths(result: ["file": .string("/tmp/a.mp4"), "bytes": .number(3)]) == ["/tmp/a.mp4"])
        #expect(DiscardedOutput.paths(result: ["file": .string("relative.mp4")]) == [])
        #expect(DiscardedOutput.paths(result: nil) == [])
    }

    @Test func theShippedManifestsSayWhichCanDiscard() throws {
        let root = String(#filePath).split(separator: "/").dropLast(3).joined(separator: "/")
        func manifest(_ name: String) throws -> HandlerManifest {
            try JSONDecoder().decode(
                HandlerManifest.self,
                from: Data(contentsOf: URL(fileURLWithPath: "/\(root)/share/broadcastd/handlers/\(name).json")))
        }
        #expect(try manifest("record").discard == true)
        #expect(try manifest("stream").discard == nil, "a live stream cannot take back what it sent")
    }
}
