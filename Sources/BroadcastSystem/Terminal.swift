import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

/// The controlling terminal, for prompts.
public enum Terminal {
    /// Makes `signal` (SIGINT for Ctrl-C) interrupt blocking reads and remembers that it came.
    public static func catchInterrupt(_ signal: Int32) { cbroadcast_install_interrupt(signal) }
    public static var wasInterrupted: Bool { cbroadcast_interrupted() != 0 }

    /// Flushes buffered standard output (a line-by-line stream piped to another program must not wait in a buffer).
    public static func flushOutput() { fflush(nil) }

    public static func isInteractive(_ fd: Int32 = 0) -> Bool { isatty(fd) == 1 }

    /// The width of the terminal on `fd`, nil when it is not a terminal.
    public static func columns(_ fd: Int32 = 1) -> Int? {
        var size = winsize()
        guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }

    /// Writes `bytes` to standard output after whatever is buffered there (binary output such as a PNG).
    public static func writeOutput(_ bytes: [UInt8]) throws(SystemError) {
        fflush(nil)
        let output = Descriptor(adopting: try syscallRetrying("dup standard output") { dup(1) })
        try output.writeAll(bytes)
    }

    /// Writes `text` to standard error unbuffered (prompts must show before reading).
    public static func prompt(_ text: String) {
        var bytes = Array(text.utf8)
        _ = write(2, &bytes, bytes.count)
    }

    /// Reads one line from standard input; nil at end of input. With `echo: false` the typed
    /// characters are not shown (secrets), and the terminal is restored afterwards.
    public static func readLine(echo: Bool = true) -> String? {
        var saved = termios()
        let changed = !echo && tcgetattr(0, &saved) == 0
        if changed {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(0, TCSAFLUSH, &quiet)
        }
        defer {
            if changed {
                tcsetattr(0, TCSAFLUSH, &saved)
                prompt("\n")
            }
        }
        var bytes: [UInt8] = []
        var c: UInt8 = 0
        while true {
            let n = read(0, &c, 1)
            if n < 0 && errno == EINTR { return nil }
            if n <= 0 { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if c == 10 { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(c)
        }
    }
}
