import BroadcastClient
import BroadcastCore
import Foundation
import Testing

extension Integration {
    /// broadcastd --source pipewire on a Wayland-like session: the screen comes through xdg-desktop-portal's
    /// ScreenCast conversation, here with the stand-in portal of Tests/fixtures/portal on a private session
    /// bus, which shares a GStreamer video node of a private PipeWire.
    @Suite(.serialized) struct PortalTests {
        static let color: UInt32 = 0x3060d0

        /// A PipeWire stack with the video node `shared-screen`, the stand-in portal, and broadcastd asking it.
        /// With `cursorModes` the node is the tests' own source writing cursor metadata, and broadcastd asks for it.
        func stack(
            version: Int = 5, cancel: Bool = false, dialogSeconds: Double = 0, closeAfter: Double? = nil,
            portal: Bool = true, cursorModes: Int? = nil, response: Int = 0,
            restoreToken: String? = nil, busReplyTimeout: Int? = nil
        ) throws -> (PipeWireHarness, DaemonHarness) {
            let pipewire = try PipeWireHarness(tones: false, busReplyTimeout: busReplyTimeout)
            // 320x180: a debug build converts larger frames too slowly for 30 fps.
            if cursorModes != nil {
                try pipewire.testVideoSource(
                    "shared-screen",
                    ["--size", "320x180", "--fps", "60", "--color", String(Self.color, radix: 16), "--cursor"])
            } else {
                try pipewire.videoSource("shared-screen", width: 320, height: 180, color: Self.color)
            }
            if portal {
                try pipewire.portal(
                    node: "shared-screen", version: version, cancel: cancel, dialogSeconds: dialogSeconds,
                    closeAfter: closeAfter,
                    cursorModes: cursorModes ?? 7, response: response)
            }
            if let restoreToken {
                let folder = pipewire.runtime + "/state/broadcastd"
                try FileManager.default.createDirectory(
                    atPath: folder, withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
                try restoreToken.write(toFile: folder + "/portal-restore-token", atomically: true, encoding: .utf8)
            }
            let daemon = try DaemonHarness(
                ["--source", "pipewire", "--fps", "30", "--app-audio", "none", "--mic", "none"]
                    + (cursorModes != nil ? ["--cursor", "metadata"] : []),
                environment: [
                    "PIPEWIRE_RUNTIME_DIR": pipewire.runtime,
                    "DBUS_SESSION_BUS_ADDRESS": pipewire.environment["DBUS_SESSION_BUS_ADDRESS"]!,
                    "XDG_STATE_HOME": pipewire.runtime + "/state",
                ])
            return (pipewire, daemon)
        }

        /// One broadcast of about 1.5 s to inspect; returns its frames' count, the last frame and the summary.
        func broadcast(_ daemon: DaemonHarness, _ name: String) throws -> (
            frames: Int, frame: RGBFrame, summary: InspectSummary
        ) {
            let controller = try daemon.subscribedController()
            let path = daemon.summaryPath(name)
            let id = try daemon.start(
                handler: "inspect", url: path, setupInfo: ["frameFile": daemon.runtime + "/\(name).frame"],
                on: controller)
            try daemon.awaitState(controller, .live)
            usleep(1_500_000)
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, id) == nil)
            let summary = try InspectSummary.load(path)
            return (
                Int(summary.streams["video"]?.count ?? 0), try RGBFrame(dump: try #require(summary.lastFrame)), summary
            )
        }

        /// Whether the portal is asked `call` (`times` times in all) within 10 s.
        func waitFor(_ call: String, times: Int = 1, in pipewire: PipeWireHarness) -> Bool {
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                if pipewire.portalCalls().filter({ $0["call"] as? String == call }).count >= times { return true }
                usleep(20_000)
            }
            return false
        }

        /// The first broadcast goes through the share dialog and asks for a grant that lasts (persist_mode 2);
        /// the token the portal returns is kept (mode 0600) and brings the next broadcast up without the
        /// dialog, which returns a new token that replaces it. The frames are the shared node's.
        @Test func theSharedScreenIsCapturedAndTheGrantIsKeptForTheNextBroadcast() throws {
            let (pipewire, daemon) = try stack()
            defer { _ = try? daemon.stop() }
            #expect(
                pipewire.portalCalls().isEmpty,
                "broadcastd asked the portal before any broadcast: \(pipewire.portalCalls())")

            let first = try broadcast(daemon, "first")
            #expect(first.frames >= 40, "\(first.frames) frames in 1.5 s at 30 fps")
            #expect(first.frame.width == 320 && first.frame.height == 180)
            let psnr = first.frame.psnr { _, _ in (0x30, 0x60, 0xd0) }
            #expect(psnr >= 35, "PSNR \(psnr) dB against the shared node's colour")

            // The session's Close is sent without waiting for the portal: it may come a moment after FINISHED.
            #expect(waitFor("Session.Close", in: pipewire), "\(pipewire.portalCalls())")
            var calls = pipewire.portalCalls()
            #expect(
                calls.map { $0["call"] as? String ?? "" } == [
                    "CreateSession", "SelectSources", "Start", "Start.answer", "OpenPipeWireRemote", "Session.Close",
                ],
                "\(calls)")
            let select = try #require(calls.first { $0["call"] as? String == "SelectSources" })
            #expect(
                select["types"] as? Int == 1 && select["cursor_mode"] as? Int == 2
                    && select["persist_mode"] as? Int == 2)
            #expect(select["restore_token"] is NSNull)
            #expect(calls.first { $0["call"] as? String == "Start" }?["dialog"] as? Bool == true)
            let firstToken = try #require(
                calls.first { $0["call"] as? String == "Start.answer" }?["restore_token"] as? String)
            let tokenFile = pipewire.runtime + "/state/broadcastd/portal-restore-token"
            #expect(try String(contentsOfFile: tokenFile, encoding: .utf8) == firstToken + "\n")
            let mode = try FileManager.default.attributesOfItem(atPath: tokenFile)[.posixPermissions] as? Int
            #expect(mode == 0o600, "token file mode \(String(mode ?? 0, radix: 8))")

            let second = try broadcast(daemon, "second")
            #expect(second.frames >= 40, "\(second.frames) frames in 1.5 s at 30 fps")
            #expect(waitFor("Session.Close", times: 2, in: pipewire), "\(pipewire.portalCalls())")
            calls = Array(pipewire.portalCalls().dropFirst(6))
            let restore = try #require(calls.first { $0["call"] as? String == "SelectSources" })
            #expect(
                restore["restore_token"] as? String == firstToken && restore["restored"] as? Bool == true, "\(restore)")
            #expect(
                calls.first { $0["call"] as? String == "Start" }?["dialog"] as? Bool == false,
                "the dialog came back: \(calls)")
            let secondToken = try #require(
                calls.first { $0["call"] as? String == "Start.answer" }?["restore_token"] as? String)
            #expect(secondToken != firstToken)
            #expect(try String(contentsOfFile: tokenFile, encoding: .utf8) == secondToken + "\n")
            #expect(calls.last?["call"] as? String == "Session.Close")
        }

        /// While the dialog is up, broadcastd answers at once and says what it waits for; a cancelled dialog
        /// refuses the START with the reason, and the next request asks again.
        @Test func aCancelledDialogRefusesTheBroadcastWhileBroadcastdKeepsAnswering() throws {
            let (pipewire, daemon) = try stack(cancel: true, dialogSeconds: 2)
            defer { _ = try? daemon.stop() }
            let (start, output) = try daemon.startInBackground()
            defer { if start.isRunning { start.terminate() } }
            #expect(
                waitFor("Start", in: pipewire), "the portal was not asked: \(pipewire.portalCalls())\n\(daemon.log)")
            let controller = try daemon.controller()
            let asked = Date()
            let status = try controller.status()
            #expect(
                Date().timeIntervalSince(asked) < 0.5,
                "status took \(Date().timeIntervalSince(asked)) s while the dialog was up")
            #expect(status.state == .idle && status.source.contains("share dialog open"), "\(status.source)")
            // A second request meanwhile is refused, not queued behind the dialog.
            let busy = #expect(throws: (any Error).self) {
                _ = try controller.start(handler: "inspect", maxDuration: 1)
            }
            #expect(
                "\(String(describing: busy))".contains("the screen is being chosen in the screen-share dialog"),
                "\(String(describing: busy))")

            start.waitUntilExit()
            let said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            #expect(
                start.terminationStatus != 0 && said.contains("the user cancelled the screen-share dialog"),
                "exit \(start.terminationStatus): \(said)")
            #expect(try controller.status().state == .idle)
            #expect(
                waitFor("Session.Close", in: pipewire), "the cancelled session was left open: \(pipewire.portalCalls())"
            )
            #expect(
                !FileManager.default.fileExists(atPath: pipewire.runtime + "/state/broadcastd/portal-restore-token"))
        }

        /// FINISH while the dialog is up withdraws the request (the portal's Request.Close closes the dialog).
        @Test func finishingWhileTheDialogIsUpWithdrawsTheRequest() throws {
            let (pipewire, daemon) = try stack(dialogSeconds: 60)
            defer { _ = try? daemon.stop() }
            let (start, output) = try daemon.startInBackground()
            defer { if start.isRunning { start.terminate() } }
            #expect(
                waitFor("Start", in: pipewire), "the portal was not asked: \(pipewire.portalCalls())\n\(daemon.log)")
            try daemon.controller().finish()
            start.waitUntilExit()
            let said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            #expect(
                start.terminationStatus != 0 && said.contains("finished before the screen was chosen"),
                "exit \(start.terminationStatus): \(said)")
            #expect(waitFor("Request.Close", in: pipewire), "\(pipewire.portalCalls())")
            #expect(waitFor("Session.Close", in: pipewire), "\(pipewire.portalCalls())")
        }

        /// The desktop ends the share mid-broadcast ("stop sharing"): the broadcast finishes with that reason,
        /// and broadcastd serves the next request.
        @Test func theDesktopEndingTheShareFinishesTheBroadcastWithTheReason() throws {
            let (pipewire, daemon) = try stack(closeAfter: 1.5)
            defer { _ = try? daemon.stop() }
            let controller = try daemon.subscribedController()
            let id = try daemon.start(handler: "inspect", url: daemon.summaryPath("ended"), on: controller)
            try daemon.awaitState(controller, .live)
            let error = try daemon.awaitFinish(controller, id, timeout: 10)
            #expect(
                error?.code == .captureFailed && error?.message.contains("the desktop ended the screen share") == true,
                "\(String(describing: error))")
            let summary = try InspectSummary.load(daemon.summaryPath("ended"))
            #expect(
                (summary.streams["video"]?.count ?? 0) >= 20,
                "frames before the end: \(summary.streams["video"]?.count ?? 0)")
            #expect(pipewire.portalCalls().contains { $0["call"] as? String == "Session.Closed" })
        }

        /// A portal older than version 4 knows no persistence: nothing is asked to persist, no token is kept,
        /// and the share works.
        @Test func aPortalWithoutPersistenceStillWorks() throws {
            let (pipewire, daemon) = try stack(version: 3)
            defer { _ = try? daemon.stop() }
            let shared = try broadcast(daemon, "old")
            #expect(shared.frames >= 40 && shared.frame.width == 320)
            let select = try #require(pipewire.portalCalls().first { $0["call"] as? String == "SelectSources" })
            #expect(select["persist_mode"] as? Int == 0 && select["restore_token"] is NSNull, "\(select)")
            #expect(
                !FileManager.default.fileExists(atPath: pipewire.runtime + "/state/broadcastd/portal-restore-token"))
        }

        /// `--cursor metadata` asks the portal for cursor mode 4, and the pointer comes from the shared stream's
        /// metadata; a portal that offers only hidden and embedded (mask 3) is asked for embedded, with a
        /// warning, and no CURSOR messages come.
        @Test(arguments: [7, 3]) func cursorMetadataIsAskedOfThePortalWhenItOffersIt(modes: Int) throws {
            let (pipewire, daemon) = try stack(cursorModes: modes)
            defer { _ = try? daemon.stop() }
            let shared = try broadcast(daemon, "cursor")
            #expect(shared.frames >= 40 && shared.frame.width == 320)
            let select = try #require(pipewire.portalCalls().first { $0["call"] as? String == "SelectSources" })
            if modes & 4 != 0 {
                #expect(select["cursor_mode"] as? Int == 4, "\(select)")
                let cursor = try #require(shared.summary.cursor, "no CURSOR messages:\n\(daemon.log)")
                #expect(cursor.count >= 40 && cursor.sprites >= 1 && cursor.y == 50, "\(cursor)")
            } else {
                #expect(select["cursor_mode"] as? Int == 2, "\(select)")
                #expect(shared.summary.cursor == nil)
                #expect(
                    daemon.log.contains("the portal does not offer cursor mode metadata (it offers 3); using embedded"),
                    "\(daemon.log)")
            }
        }

        /// No portal on the bus, then no bus at all: the broadcast is refused with what is missing; the daemon goes on.
        @Test func withoutAPortalTheBroadcastIsRefusedWithWhatIsMissing() throws {
            let (pipewire, daemon) = try stack(portal: false)
            defer { _ = try? daemon.stop() }
            func refusal() -> String {
                let refused = #expect(throws: (any Error).self) {
                    _ = try daemon.controller().start(handler: "inspect", maxDuration: 1)
                }
                return "\(String(describing: refused))"
            }
            let noPortal = refusal()
            #expect(
                noPortal.contains("no xdg-desktop-portal with ScreenCast") && noPortal.contains("--pipewire-node"),
                "\(noPortal)")
            pipewire.stop()  // the session bus goes too
            let noBus = refusal()
            #expect(
                noBus.contains("connect to the D-Bus session bus") && noBus.contains("DBUS_SESSION_BUS_ADDRESS"),
                "\(noBus)")
            #expect(try daemon.controller().status().state == .idle)
        }

        /// A portal that never answers (one whose backend hangs: D-Bus gives up on the call) refuses the broadcast
        /// in the user's words, not D-Bus's; the daemon goes on, and the next START, with the portal back, works.
        @Test func aPortalThatDoesNotAnswerIsRefusedInTheUsersWords() throws {
            let (pipewire, daemon) = try stack(busReplyTimeout: 1500)
            defer { _ = try? daemon.stop() }
            let portal = try #require(pipewire.portalProcess)
            kill(portal.processIdentifier, SIGSTOP)
            defer { kill(portal.processIdentifier, SIGCONT) }
            let refused = #expect(throws: (any Error).self) {
                _ = try daemon.controller().start(handler: "inspect", maxDuration: 1)
            }
            let said = "\(String(describing: refused))"
            #expect(
                said.contains(
                    "the desktop portal did not answer; is xdg-desktop-portal running with a backend for this desktop"),
                "\(said)")
            #expect(!said.contains("Did not receive a reply"), "\(said)")
            kill(portal.processIdentifier, SIGCONT)
            #expect(try broadcast(daemon, "after").frames > 10)
        }

        /// A token file that holds no token (the portal takes only UUIDs and refused the whole request, every
        /// broadcast): it is removed with one warning, the dialog is shown, and the new grant's token replaces it.
        /// Idle, a snapshot is refused without asking the portal: the screen is shared only while a broadcast runs.
        @Test func aRestoreTokenFileWithoutATokenIsDroppedAndTheDialogAsksAgain() throws {
            let (pipewire, daemon) = try stack(restoreToken: "not-a-token\n")
            defer { _ = try? daemon.stop() }
            let snapshot = #expect(throws: (any Error).self) { _ = try daemon.controller().snapshot() }
            let refusal = String(describing: snapshot)
            #expect(refusal.contains("only while a broadcast runs"), "\(refusal)")
            #expect(pipewire.portalCalls().isEmpty, "\(pipewire.portalCalls())")

            let shared = try broadcast(daemon, "token")
            #expect(shared.frames >= 40 && shared.frame.width == 320)
            let calls = pipewire.portalCalls()
            let select = try #require(calls.first { $0["call"] as? String == "SelectSources" })
            #expect(select["restore_token"] is NSNull, "\(calls)")
            #expect(calls.first { $0["call"] as? String == "Start" }?["dialog"] as? Bool == true)
            let token = try #require(
                calls.first { $0["call"] as? String == "Start.answer" }?["restore_token"] as? String)
            let tokenFile = pipewire.runtime + "/state/broadcastd/portal-restore-token"
            #expect(try String(contentsOfFile: tokenFile, encoding: .utf8) == token + "\n")
            #expect(
                daemon.log.components(separatedBy: "does not hold a portal restore token").count == 2, "\(daemon.log)")
            // The next broadcast uses the new token: no dialog, no warning.
            _ = try broadcast(daemon, "again")
            let next = pipewire.portalCalls().dropFirst(calls.count)
            #expect(next.first { $0["call"] as? String == "Start" }?["dialog"] as? Bool == false, "\(next)")
            #expect(
                daemon.log.components(separatedBy: "does not hold a portal restore token").count == 2, "\(daemon.log)")
        }

        /// FINISH while the portal's backend hangs (stopped here) refuses the START at once: the request's and
        /// the session's Close are sent together, neither waited for, and reach the portal when it runs again.
        @Test func withdrawingAStartFromAPortalThatHangsTakesNoTime() throws {
            let (pipewire, daemon) = try stack(dialogSeconds: 60)
            defer { _ = try? daemon.stop() }
            let (start, output) = try daemon.startInBackground()
            defer { if start.isRunning { start.terminate() } }
            #expect(
                waitFor("Start", in: pipewire), "the portal was not asked: \(pipewire.portalCalls())\n\(daemon.log)")
            let portal = try #require(pipewire.portalProcess)
            kill(portal.processIdentifier, SIGSTOP)
            defer { kill(portal.processIdentifier, SIGCONT) }
            let asked = Date()
            try daemon.controller().finish()
            let deadline = Date().addingTimeInterval(10)
            while start.isRunning && Date() < deadline { usleep(10_000) }
            let took = Date().timeIntervalSince(asked)
            #expect(took < 1, "the START was withdrawn \(took) s after FINISH")
            let said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            #expect(!start.isRunning && said.contains("finished before the screen was chosen"), "\(said)")
            #expect(try daemon.controller().status().state == .idle)
            kill(portal.processIdentifier, SIGCONT)
            #expect(waitFor("Request.Close", in: pipewire), "\(pipewire.portalCalls())")
            #expect(waitFor("Session.Close", in: pipewire), "\(pipewire.portalCalls())")
        }

        /// Response 2 (the backend failed) refuses the START with where to look and what commonly causes it.
        @Test func aPortalThatEndsTheRequestSaysWhereToLook() throws {
            let (pipewire, daemon) = try stack(response: 2)
            defer { _ = try? daemon.stop() }
            let refused = #expect(throws: (any Error).self) {
                _ = try daemon.controller().start(handler: "inspect", maxDuration: 1)
            }
            let message = "\(String(describing: refused))"
            #expect(
                message.contains("the desktop portal ended the request without an answer (response 2)")
                    && message.contains("journalctl --user -u xdg-desktop-portal")
                    && message.contains("xdg-desktop-portal-gnome"), "\(message)")
            #expect(try daemon.controller().status().state == .idle)
            #expect(waitFor("Session.Close", in: pipewire), "\(pipewire.portalCalls())")
        }
    }
}
