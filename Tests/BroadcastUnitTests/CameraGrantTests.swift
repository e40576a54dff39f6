import BroadcastPortal
import Foundation
import Logging
import Synchronization
import Testing

/// The camera's grant from the desktop portal (CameraGrant): asked on a thread of its own, kept once allowed, a
/// refusal said once and asked again; the caller is held no longer than it says while the dialog is open. The portal
/// itself is the integration tests' (CameraPortalTests); here its answers are made up.
@Suite struct CameraGrantTests {
    /// A made-up portal: each ask takes the next answer (a refusal, or remotes numbered `remote`), after `gate`.
    final class Portal: Sendable {
        struct Remotes: CameraRemotes {
            let remote: Int32
            func openRemote() throws(PortalError) -> Int32 { remote }
        }
        let answers: Mutex<[Int32?]>
        let asked = Atomic(0)
        let gate = DispatchSemaphore(value: 0)
        let gated: Bool

        init(_ answers: [Int32?], gated: Bool = false) {
            self.answers = Mutex(answers)
            self.gated = gated
        }

        func ask() throws(PortalError) -> any CameraRemotes {
            asked.add(1, ordering: .relaxed)
            if gated { gate.wait() }
            guard let remote = answers.withLock({ $0.removeFirst() }) else {
                throw PortalError("AccessCamera", CameraPortal.notAllowed, cancelled: true)
            }
            return Remotes(remote: remote)
        }

        func grant() -> CameraGrant {
            CameraGrant(logger: Logger(label: "test")) { () throws(PortalError) in try self.ask() }
        }
    }

    @Test func aRefusalIsSaidOnceAndTheNextRequestAsksAgainWhileAnAllowedCameraIsKept() throws {
        let portal = Portal([nil, 7])
        let grant = portal.grant()
        let refusal = #expect(throws: PortalError.self) { _ = try grant.remote(wait: 5_000_000_000) }
        #expect(refusal?.reason == "the camera was not allowed" && refusal?.cancelled == true)
        #expect(try grant.remote(wait: 5_000_000_000) == 7)
        #expect(try grant.remote(wait: 5_000_000_000) == 7)
        #expect(portal.asked.load(ordering: .relaxed) == 2)
    }

    @Test func whileTheDialogIsOpenTheCallerWaitsOnlyAsLongAsItSaysAndNothingIsAskedTwice() throws {
        let portal = Portal([3], gated: true)
        let grant = portal.grant()
        grant.request()
        let asked = Date()
        #expect(try grant.remote(wait: 100_000_000) == nil)
        let took = Date().timeIntervalSince(asked)
        #expect(took >= 0.1 && took < 2, "\(took) s")
        grant.request()
        #expect(try grant.remote(wait: 0) == nil)
        portal.gate.signal()
        #expect(try grant.remote(wait: 5_000_000_000) == 3)
        #expect(portal.asked.load(ordering: .relaxed) == 1)
    }
}
