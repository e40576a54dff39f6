import ArgumentParser
import BroadcastClient
import BroadcastCore
import BroadcastImage
import BroadcastProtocol
import BroadcastSystem

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the state of every broadcast, or of one.",
        usage: "broadcastctl status [<options>]")
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "Show this broadcast only.") var broadcast: UInt32?
    @Flag(help: "Print JSON.") var json = false
    @Flag(
        help:
            "Keep showing the state, elapsed time, fps, bit rate, drops per stream and daemon memory until interrupted: one line redrawn in place on a terminal, a line per update when piped, JSON lines with --json."
    ) var watch = false

    func run() throws {
        try reporting(json: json) {
            let client = try connection.connect()
            guard watch else {
                var status = try client.status()
                if let broadcast {
                    guard let one = status.broadcasts?.first(where: { $0.broadcast == broadcast }) else {
                        throw ProtocolError.refused(BroadcastError(.noBroadcast, "there is no broadcast \(broadcast)"))
                    }
                    status = one
                }
                return print(json ? prettyJSON(status) : StatusText.describe(status))
            }
            try client.subscribe()
            // On a terminal one line is redrawn in place (cut to its width, so it never wraps); piped,
            // every change is a line of its own.
            let redrawn = !json && Terminal.isInteractive(1)
            var lines = StatusLines(only: broadcast)
            // Ctrl-C (or SIGTERM) ends the watch cleanly, leaving the cursor on a fresh line; a resize redraws.
            let signals = try SignalDescriptor(signals: [Signals.interrupt, Signals.terminate, Signals.windowChanged])
            while true {
                if let signal = signals.next() {
                    guard signal == Signals.windowChanged else {
                        if redrawn { print("") }
                        return
                    }
                    if redrawn {
                        print(lines.redrawing(columns: Terminal.columns() ?? 80, keeping: nil), terminator: "")
                    }
                    Terminal.flushOutput()
                    continue
                }
                guard let event = try client.nextEvent(timeoutMilliseconds: 200) else { continue }
                if json {
                    switch event {
                    case .stateChanged(let s): print(compactJSON(s))
                    case .serviceInfo(let i): print(compactJSON(i))
                    case .urlUpdated(let u): print(compactJSON(u))
                    case .finished(let f): print(compactJSON(f))
                    }
                    Terminal.flushOutput()
                    continue
                }
                // Lines worth keeping (a URL, a finish) scroll up; the status lines below them are redrawn.
                var kept: String?
                switch event {
                case .stateChanged(let s): lines.update(s)
                case .serviceInfo(let i): lines.update(i)
                case .urlUpdated(let u): kept = "broadcast \(u.broadcast.map(String.init) ?? "-") url \(u.url)"
                case .finished(let f):
                    kept = StatusText.line(f)
                    lines.finished(f.broadcast)
                }
                if redrawn {
                    print(lines.redrawing(columns: Terminal.columns() ?? 80, keeping: kept), terminator: "")
                } else {
                    print(kept ?? lines.changed)
                }
                Terminal.flushOutput()
            }
        }
    }
}

enum StatusText {
    static func describe(_ s: BroadcastStatus) -> String {
        if let finished = SharedEncoderText.finishedWhenIdle(s.broadcasts ?? []) {
            // Nothing runs: broadcastd is idle, and what finished since the last start is said a line each.
            let lines = finished.map { b in
                "  "
                    + finish(
                        b.broadcast ?? 0, handler: b.handler, discarded: b.discarded == true, error: b.error,
                        result: b.result)
            }
            return (["state: idle", "source: \(s.source)"] + memory(s) + ["finished since the last start:"] + lines)
                .joined(separator: "\n")
        }
        guard let all = s.broadcasts, all.count > 1 else { return describeOne(s) }
        var lines = ["source: \(s.source)"] + memory(s)
        lines += SharedEncoderText.lines(all)
        lines.append("\(all.count) broadcasts:")
        for broadcast in all {
            lines +=
                [""]
                + describeOne(broadcast).split(separator: "\n").map(String.init).filter {
                    !$0.hasPrefix("source:") && !$0.hasPrefix("daemon memory:") && !$0.hasPrefix("warning: running")
                }
        }
        return lines.joined(separator: "\n")
    }

    /// broadcastd's memory, with what the capture's plan allows and, over the built-in budget, by how much and why.
    static func memory(_ s: BroadcastStatus) -> [String] {
        guard let bytes = s.daemonMemory else { return [] }
        return [
            "daemon memory: \(bytes / 1024) KiB"
                + (s.memoryPlanned.map { " (planned: at most \(megabytes($0)))" } ?? "")
        ]
            + (s.memoryWarning.map { ["warning: \($0)"] } ?? [])
    }

    static func describeOne(_ s: BroadcastStatus) -> String {
        var lines = ["state: \(s.state)", "source: \(s.source)"] + memory(s)
        if s.sessionLocked == true {
            lines.append(
                "session locked: "
                    + (s.pausedForLock == true
                        ? "paused until it is unlocked"
                        : s.blankedForLock == true
                            ? "the privacy frame goes out instead of the screen"
                            : "the screen is not captured meanwhile"))
        }
        if let id = s.broadcast {
            lines.append("broadcast: \(id) (handler \(s.handler ?? "?"))")
            if let url = s.url { lines.append("url: \(url)") }
            if let file = s.file { lines.append("file: \(file)") }
            if let elapsed = s.elapsed {
                lines.append(
                    "elapsed: \(StatusLine.clock(elapsed))\(s.maxDuration.map { " of at most \(StatusLine.clock($0))" } ?? "")"
                )
            }
            if let camera = s.camera {
                lines.append("camera: \(camera)" + (s.cameraLost.map { "; lost: \($0)" } ?? ""))
            }
            if let shared = SharedEncoderText.line(s) { lines.append(shared) }
            if s.wantsPaused == true && s.state != .paused { lines.append("pause requested: takes effect once live") }
            if let error = s.error { lines.append("error: \(error.message)") }
            if s.discarded == true { lines.append("discarded: what it produced is deleted") }
            for name in ["video", "audioApp", "audioMic", "videoCamera", "encoded"] {
                if let c = s.streams?[name] {
                    lines.append(
                        "\(name): \(c.delivered) delivered, \(c.dropped) dropped\((c.late ?? 0) > 0 ? " (\(c.late!) of them late: broadcastd was too busy to capture them)" : "")"
                    )
                }
            }
            if let result = s.result { lines += describe(result: result) }
        }
        for (stream, why) in (s.silentAudio ?? [:]).sorted(by: { $0.key < $1.key }) {
            lines.append("\(SilenceWarning.name(stream)): silent: \(why)")
        }
        return lines.joined(separator: "\n")
    }

    /// A heading, then the result in words, indented.
    static func describe(result: [String: JSONValue]) -> [String] {
        ["result:"] + ResultText.lines(result).map { "  " + $0 }
    }

    static func line(_ f: FinishedEvent) -> String {
        finish(f.broadcast, handler: nil, discarded: f.discarded == true, error: f.error, result: f.result)
    }

    /// A finish in a line: how it ended, and the file it wrote with its duration and size.
    static func finish(
        _ id: UInt32, handler: String?, discarded: Bool, error: BroadcastError?,
        result: [String: JSONValue]?
    ) -> String {
        "broadcast \(id)" + (handler.map { " (\($0))" } ?? "") + (discarded ? " discarded" : " finished")
            + (error.map { ": \($0.message)" } ?? "")
            + (ResultText.brief(result).map { "; \(discarded ? "deleted" : "saved") \($0)" } ?? "")
    }

}
