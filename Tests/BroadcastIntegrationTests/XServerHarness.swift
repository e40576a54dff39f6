import BroadcastInspect
import Foundation
import Testing

/// A private X server for one test: Xvfb (or Xvnc, which can be resized through RandR, for the tests that
/// need that) on a free display number, killed and cleaned up by `stop()` or when released.
final class XServer {
    enum Kind: String {
        case xvfb = "Xvfb"
        case xvnc = "Xvnc"
    }

    let display: String
    let number: Int
    private let process: Process
    private var stopped = false
    /// Display numbers this test process has handed out and not yet given back: tests that run at once never pick
    /// the same (two did, each taking the other's server for its own, and one's end cut the other's screen off).
    private nonisolated(unsafe) static var taken = Set<Int>()
    private static let takenLock = NSLock()

    init(_ kind: Kind = .xvfb, width: Int = 640, height: Int = 480) throws {
        let program = "/usr/bin/" + kind.rawValue
        guard FileManager.default.isExecutableFile(atPath: program) else {
            throw HarnessError(
                "\(program) is missing: the X11 tests need it (./scripts/test.sh installs xvfb and tigervnc-standalone-server)"
            )
        }
        var tried = Set<Int>()
        while true {
            let number = try Self.take(avoiding: tried)
            tried.insert(number)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: program)
            let display = ":\(number)"
            switch kind {
            case .xvfb:
                process.arguments = [display, "-screen", "0", "\(width)x\(height)x24", "-nolisten", "tcp", "-noreset"]
            case .xvnc:
                process.arguments = [
                    display, "-geometry", "\(width)x\(height)", "-depth", "24", "-SecurityTypes", "None",
                    "-rfbport", "-1", "-localhost", "-nolisten", "tcp", "-noreset",
                ]
            }
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Ours once its lock file names it and its socket is there; a server of another process that took the
            // number first makes ours exit: the next number is tried.
            let deadline = Date().addingTimeInterval(10)
            while process.isRunning && Date() < deadline
                && !(Self.lockOwner(number) == process.processIdentifier
                    && FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)"))
            {
                usleep(10_000)
            }
            if process.isRunning && Self.lockOwner(number) == process.processIdentifier {
                self.number = number
                self.display = display
                self.process = process
                usleep(100_000)
                return
            }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            Self.give(back: number)
            guard tried.count < 5 else {
                throw HarnessError("\(kind.rawValue) did not start (displays \(tried.sorted()) tried)")
            }
        }
    }

    /// A display number that neither this process has handed out nor another server holds (lock file or socket).
    private static func take(avoiding tried: Set<Int>) throws -> Int {
        try takenLock.withLock {
            guard
                let number = (90..<200).first(where: { n in
                    !taken.contains(n) && !tried.contains(n)
                        && !FileManager.default.fileExists(atPath: "/tmp/.X\(n)-lock")
                        && !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(n)")
                })
            else { throw HarnessError("no free X display number between :90 and :199") }
            taken.insert(number)
            return number
        }
    }

    private static func give(back number: Int) { _ = takenLock.withLock { taken.remove(number) } }

    /// The pid an X server wrote into the display's lock file.
    private static func lockOwner(_ number: Int) -> Int32? {
        (try? String(contentsOfFile: "/tmp/.X\(number)-lock", encoding: .utf8)).flatMap {
            Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    deinit { stop() }

    /// Kills the server (SIGKILL: children of the test runner may have SIGTERM blocked) and removes what it left.
    func stop() {
        guard !stopped else { return }
        stopped = true
        let pid = process.processIdentifier
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
        }
        if Self.lockOwner(number) == pid {
            try? FileManager.default.removeItem(atPath: "/tmp/.X\(number)-lock")
            try? FileManager.default.removeItem(atPath: "/tmp/.X11-unix/X\(number)")
        }
        Self.give(back: number)
    }

    /// Runs an X client (xrandr, xdotool) against this server; throws when it fails.
    @discardableResult
    func run(_ program: String, _ arguments: [String]) throws -> String {
        let result = try runTool("/usr/bin/" + program, arguments, environment: ["DISPLAY": display], timeout: 20)
        guard result.status == 0 else {
            throw HarnessError("\(program) \(arguments.joined(separator: " ")) failed: \(result.stderr)")
        }
        return result.stdout
    }

    /// The tests' own X client (Tests/fixtures/x11_painter.py) drawing on this server.
    func painter() throws -> Painter { try Painter(display: display) }
}

/// Draws known content on an X server's root window; each command returns once the server has drawn it.
final class Painter {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var buffered = Data()

    init(display: String) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [Paths.root + "/Tests/fixtures/x11_painter.py"]
        process.environment = ProcessInfo.processInfo.environment.merging(["DISPLAY": display]) { $1 }
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    deinit {
        try? input.fileHandleForWriting.close()
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    @discardableResult
    func send(_ command: String) throws -> String {
        input.fileHandleForWriting.write(Data((command + "\n").utf8))
        while !buffered.contains(10) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw HarnessError("the painter exited (is python3-xlib installed?)") }
            buffered.append(chunk)
        }
        let newline = buffered.firstIndex(of: 10)!
        let line = String(decoding: buffered[buffered.startIndex..<newline], as: UTF8.self)
        buffered = Data(buffered[(newline + 1)...])
        guard !line.hasPrefix("error") else { throw HarnessError("painter: \(line)") }
        return line
    }

    func bars() throws { try send("bars") }
    func fill(_ r: Int, _ g: Int, _ b: Int, _ x: Int, _ y: Int, _ w: Int, _ h: Int) throws {
        try send("fill \(r) \(g) \(b) \(x) \(y) \(w) \(h)")
    }
}

/// A captured frame turned back into RGB (BT.709), to compare with what was drawn.
struct RGBFrame {
    let width: Int
    let height: Int
    var pixels: [(r: Double, g: Double, b: Double)]

    subscript(x: Int, y: Int) -> (r: Double, g: Double, b: Double) { pixels[y * width + x] }

    /// Reads a frame the inspect handler saved (`frameFile`) in the format its summary names.
    init(dump: InspectHandler.FrameDump, range: String = "limited") throws {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dump.path)))
        let format = dump.format
        width = format.width
        height = format.height
        let planes = format.planes
        guard bytes.count >= format.frameByteCount else {
            throw HarnessError("frame file has \(bytes.count) bytes, expected \(format.frameByteCount)")
        }
        let full = range == "full"
        var pixels: [(r: Double, g: Double, b: Double)] = []
        pixels.reserveCapacity(width * height)
        for y in 0..<height {
            for x in 0..<width {
                let luma: Double
                let cb: Double
                let cr: Double
                switch format.pixelFormat {
                case .bgrx:
                    let o = y * planes[0].stride + x * 4
                    pixels.append((Double(bytes[o + 2]), Double(bytes[o + 1]), Double(bytes[o])))
                    continue
                case .nv12:
                    luma = Double(bytes[y * planes[0].stride + x])
                    let o = planes[1].offset + y / 2 * planes[1].stride + x / 2 * 2
                    cb = Double(bytes[o])
                    cr = Double(bytes[o + 1])
                case .i420:
                    luma = Double(bytes[y * planes[0].stride + x])
                    cb = Double(bytes[planes[1].offset + y / 2 * planes[1].stride + x / 2])
                    cr = Double(bytes[planes[2].offset + y / 2 * planes[2].stride + x / 2])
                }
                let yy = full ? luma : (luma - 16) * 255 / 219
                let u = full ? cb - 128 : (cb - 128) * 255 / 224
                let v = full ? cr - 128 : (cr - 128) * 255 / 224
                let r = yy + 1.5748 * v
                let b = yy + 1.8556 * u
                let g = (yy - 0.2126 * r - 0.0722 * b) / 0.7152
                pixels.append((min(255, max(0, r)), min(255, max(0, g)), min(255, max(0, b))))
            }
        }
        self.pixels = pixels
    }

    /// Peak signal-to-noise ratio against `expected(x, y)`, over every pixel and channel, in dB.
    func psnr(against expected: (Int, Int) -> (r: Double, g: Double, b: Double)) -> Double {
        var squares = 0.0
        for y in 0..<height {
            for x in 0..<width {
                let a = self[x, y]
                let e = expected(x, y)
                squares += (a.r - e.r) * (a.r - e.r) + (a.g - e.g) * (a.g - e.g) + (a.b - e.b) * (a.b - e.b)
            }
        }
        let mse = squares / Double(width * height * 3)
        return mse == 0 ? .infinity : 10 * log10(255 * 255 / mse)
    }

    /// Whether the pixel at (x, y) is within `tolerance` of `colour` on every channel.
    func matches(_ x: Int, _ y: Int, _ colour: (Double, Double, Double), tolerance: Double = 6) -> Bool {
        let p = self[x, y]
        return abs(p.r - colour.0) <= tolerance && abs(p.g - colour.1) <= tolerance && abs(p.b - colour.2) <= tolerance
    }
}

extension Painter {
    /// A top-level window of the painter's, WM_CLASS `name`/`Name`, title "`name` window", filled with `colour`; its id.
    @discardableResult
    func window(_ name: String, _ x: Int, _ y: Int, _ w: Int, _ h: Int, _ colour: (Int, Int, Int)) throws -> String {
        try send("window \(name) \(x) \(y) \(w) \(h) \(colour.0) \(colour.1) \(colour.2)")
    }

    /// A rectangle drawn in window `name`, in its coordinates (kept and drawn again whenever the server exposes it).
    func fill(in name: String, _ r: Int, _ g: Int, _ b: Int, _ x: Int, _ y: Int, _ w: Int, _ h: Int) throws {
        try send("wfill \(name) \(r) \(g) \(b) \(x) \(y) \(w) \(h)")
    }

    func move(_ name: String, _ x: Int, _ y: Int) throws { try send("move \(name) \(x) \(y)") }
    func resize(_ name: String, _ w: Int, _ h: Int) throws { try send("resize \(name) \(w) \(h)") }
    /// raise, unmap, map or close window `name`.
    func window(_ action: String, _ name: String) throws { try send("\(action) \(name)") }
}

extension XServer {
    /// twm managing this server's windows (frames with a title bar, as a desktop has), placing each where its
    /// program asks; killed when the returned process is.
    func windowManager() throws -> Process {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/twm") else {
            throw HarnessError(
                "/usr/bin/twm is missing: the window-manager tests need it (scripts/lib.sh installs twm)")
        }
        let rc = FileManager.default.temporaryDirectory.appendingPathComponent("twmrc-\(UUID().uuidString.prefix(8))")
            .path
        // The core font "fixed" for everything: without fonts it can open, twm gives up and manages nothing.
        let fonts = ["TitleFont", "ResizeFont", "MenuFont", "IconFont", "IconManagerFont"].map { "\($0) \"fixed\"\n" }
            .joined()
        try ("UsePPosition \"on\"\nRandomPlacement\nNoGrabServer\n" + fonts).write(
            toFile: rc, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/twm")
        process.arguments = ["-display", display, "-f", rc]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        usleep(300_000)
        guard process.isRunning else { throw HarnessError("twm exited at once on \(display)") }
        return process
    }
}

/// A desktop as it mostly is: twm, xclock ticking once a second (top right), an xterm at its prompt (bottom left) on
/// the window manager's root; nothing else moves, so most frames repeat the one before. Its programs are killed (by
/// PID) by `stop()` or when it goes.
final class QuietDesktop {
    private var processes: [Process] = []

    init(on x: XServer) throws {
        processes.append(try x.windowManager())
        for (program, arguments) in [
            ("xclock", ["-update", "1", "-geometry", "150x150-20+20"]),
            ("xterm", ["-geometry", "50x10+20-20"]),
        ] {
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/" + program) else {
                stop()
                throw HarnessError(
                    "/usr/bin/\(program) is missing: the quiet desktop needs it "
                        + "(scripts/lib.sh installs x11-apps and xterm)")
            }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/" + program)
            process.arguments = ["-display", x.display] + arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            processes.append(process)
        }
        // Mapped, placed and drawn once.
        usleep(800_000)
        guard processes.allSatisfy(\.isRunning) else {
            stop()
            throw HarnessError("the quiet desktop's programs did not stay up on \(x.display)")
        }
    }

    deinit { stop() }

    func stop() {
        for process in processes where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        processes = []
    }
}
