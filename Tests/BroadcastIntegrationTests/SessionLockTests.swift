import BroadcastClient
import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

/// A stand-in logind session and screensaver (Tests/fixtures/session/session_lock.py) on two private buses,
/// which broadcastd takes for the system and the session bus; `lock`, `unlock`, `saver on|off` drive them.
final class SessionLockStandIn {
    let runtime: String
    private var processes: [Process] = []
    private let input = Pipe()
    private let output = Pipe()
    private var buffered = Data()

    var systemBus: String { "unix:path=\(runtime)/system_bus" }
    var sessionBus: String { "unix:path=\(runtime)/session_bus" }
    var environment: [String: String] {
        ["DBUS_SYSTEM_BUS_ADDRESS": systemBus, "DBUS_SESSION_BUS_ADDRESS": sessionBus]
    }

    init() throws {
        runtime =
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "broadcastd-lock-\(UUID().uuidString.prefix(8))"
            ).path
        try FileManager.default.createDirectory(
            atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon") else {
            throw HarnessError("/usr/bin/dbus-daemon is missing: install dbus-daemon (scripts/lib.sh does)")
        }
        for bus in ["system_bus", "session_bus"] {
            let daemon = Process()
            daemon.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
            daemon.arguments = [
                PipeWireHarness.privateBusConfig, "--address=unix:path=\(runtime)/\(bus)", "--nofork", "--nopidfile",
            ]
            daemon.standardOutput = FileHandle.nullDevice
            daemon.standardError = FileHandle.nullDevice
            try daemon.run()
            processes.append(daemon)
            let deadline = Date().addingTimeInterval(10)
            while !FileManager.default.fileExists(atPath: "\(runtime)/\(bus)") {
                guard Date() < deadline else { throw HarnessError("dbus-daemon for \(bus) did not start") }
                usleep(10_000)
            }
        }
        let standIn = Process()
        standIn.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        standIn.arguments = [
            Paths.root + "/Tests/fixtures/session/session_lock.py", "--system", systemBus, "--session", sessionBus,
        ]
        standIn.standardInput = input
        standIn.standardOutput = output
        try standIn.run()
        processes.append(standIn)
        guard try line() == "ready" else {
            throw HarnessError("the stand-in logind did not start (python3-dbus and python3-gi?)")
        }
    }

    deinit {
        try? input.fileHandleForWriting.close()
        for process in processes.reversed() where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: runtime)
    }

    private func line() throws -> String {
        while !buffered.contains(10) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw HarnessError("the stand-in logind exited") }
            buffered.append(chunk)
        }
        let newline = buffered.firstIndex(of: 10)!
        let text = String(decoding: buffered[buffered.startIndex..<newline], as: UTF8.self)
        buffered = Data(buffered[(newline + 1)...])
        return text
    }

    /// `lock`, `unlock`, `saver on`, `saver off`; returns once the signal is sent.
    func send(_ command: String) throws {
        input.fileHandleForWriting.write(Data((command + "\n").utf8))
        let answer = try line()
        guard answer == "ok" else { throw HarnessError("stand-in logind: \(answer)") }
    }
}

extension Integration {
    @Suite(.serialized) struct SessionLockTests {
        @Test func aLockedSessionPausesTheRecordingAndUnlockingResumesIt() throws {
            let lock = try SessionLockStandIn()
            let daemon = try DaemonHarness(
                ["--source", "synthetic", "--size", "320x180"], environment: lock.environment)
            let deadline = Date().addingTimeInterval(10)
            while !(daemon.logs("watching logind session c1") && daemon.logs("watching the screensaver")),
                Date() < deadline
            { usleep(20_000) }
            #expect(
                daemon.logs("watching logind session c1 (unlocked now)")
                    && daemon.logs("watching the screensaver's ActiveChanged (inactive now)"))
            let path = daemon.runtime + "/locked.mp4"
            let (error, result) = try daemon.record(to: path, seconds: 0.6) { controller in
                usleep(600_000)
                try lock.send("lock")
                try daemon.awaitState(controller, .paused, timeout: 5)
                let status = try controller.status()
                #expect(status.sessionLocked == true && status.pausedForLock == true, "\(status)")
                let shown = try daemon.tool("broadcastctl", ["status"])
                #expect(shown.stdout.contains("session locked: paused until it is unlocked"), "\(shown.stdout)")
                let resume = try daemon.tool("broadcastctl", ["resume"])
                #expect(resume.status == 1 && resume.stderr.contains("the session is locked"), "\(resume)")
                usleep(600_000)
                try lock.send("unlock")
                try daemon.awaitState(controller, .live, timeout: 5)
                #expect(try controller.status().sessionLocked == nil)
                usleep(600_000)
                try lock.send("saver on")
                try daemon.awaitState(controller, .paused, timeout: 5)
                usleep(600_000)
                try lock.send("saver off")
                try daemon.awaitState(controller, .live, timeout: 5)
            }
            #expect(error == nil, "\(error?.message ?? "")")
            guard case .array(let segments)? = result["segments"] else { throw HarnessError("no segments: \(result)") }
            #expect(segments.count == 3, "two locks, three segments: \(result)")
            // The file holds the live time only: about 1.8 s of the 3 s or more the broadcast took.
            let probe = try runTool(
                "/usr/bin/ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path])
            let duration = Double(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            #expect(duration > 1.4 && duration < 2.6, "ffprobe: \(duration) s")
            #expect(daemon.logs("broadcast 1 paused: the session is locked"))
            try daemon.stop()
        }

        @Test func onLockBlankSendsThePrivacyFrameWhileLockedAndTheScreenAfter() throws {
            let lock = try SessionLockStandIn()
            let daemon = try DaemonHarness(
                ["--source", "synthetic", "--size", "320x180", "--on-lock", "blank"], environment: lock.environment)
            let deadline = Date().addingTimeInterval(10)
            while !daemon.logs("watching logind session c1"), Date() < deadline { usleep(20_000) }
            let path = daemon.runtime + "/blank.mp4"
            let (error, result) = try daemon.record(to: path, seconds: 0.6) { controller in
                usleep(600_000)
                try lock.send("lock")
                usleep(800_000)
                let status = try controller.status()
                #expect(
                    status.state == .live && status.sessionLocked == true && status.blankedForLock == true, "\(status)")
                try lock.send("unlock")
            }
            #expect(error == nil, "\(error?.message ?? "")")
            guard case .array(let segments)? = result["segments"] else { throw HarnessError("no segments: \(result)") }
            #expect(segments.count == 1, "blanking does not pause: \(result)")
            let frames = try Recording(path: path, scratch: daemon.runtime).lumaFrames(width: 320, height: 180)
            // The privacy frame: black (limited-range luma 16) but for white letters across the middle.
            func isPrivacy(_ luma: [UInt8]) -> Bool {
                let dark = luma.count(where: { $0 < 40 })
                let bright = luma[(90 * 320)..<(91 * 320)].count(where: { $0 > 200 })
                return dark > luma.count * 85 / 100 && bright > 10
            }
            let kinds = frames.map(isPrivacy)
            #expect(kinds.contains(true), "no privacy frame among \(frames.count)")
            #expect(
                kinds.first == false && kinds.last == false, "the screen before the lock and after the unlock: \(kinds)"
            )
            // One stretch of privacy frames: the lock's.
            let changes = zip(kinds, kinds.dropFirst()).count(where: { $0 != $1 })
            #expect(changes == 2, "\(kinds)")
            try daemon.stop()
        }

        @Test func onLockIgnoreLeavesBroadcastsLive() throws {
            let lock = try SessionLockStandIn()
            let daemon = try DaemonHarness(
                ["--source", "synthetic", "--size", "320x180", "--on-lock", "ignore"], environment: lock.environment)
            let controller = try daemon.subscribedController()
            let id = try daemon.start(handler: "inspect", url: daemon.summaryPath("ignored"), on: controller)
            try daemon.awaitState(controller, .live)
            try lock.send("lock")
            usleep(500_000)
            #expect(try controller.status().state == .live)
            #expect(!daemon.logs("watching logind"), "no watcher with on-lock ignore")
            try controller.finish()
            #expect(try daemon.awaitFinish(controller, id) == nil)
            try daemon.stop()
        }
    }
}
