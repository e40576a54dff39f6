import BroadcastClient
import BroadcastCore
import BroadcastSystem
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What the setup UI asks, and what it makes of the answers, before anything reaches broadcastd.
@Suite(.serialized) struct SetupPathTests {
    static let record = HandlerManifest(
        name: "record", displayName: "Record", exec: "x",
        url: .init(prompt: "File (Enter for $XDG_VIDEOS_DIR/Broadcasts/<date>_<time>.mp4)", file: true))

    @Test func thePromptNamesTheRealFolderAndARelativeFileIsTakenFromHere() throws {
        setenv("XDG_VIDEOS_DIR", "/home/u/Filme", 1)
        defer { unsetenv("XDG_VIDEOS_DIR") }
        var asked: [String] = []
        var form = SetupForm(manifest: Self.record, url: nil, values: [:])
        try form.fill(interactive: true) { question, _ in
            asked.append(question)
            return "talk.mkv"
        }
        #expect(asked == ["File (Enter for /home/u/Filme/Broadcasts/<date>_<time>.mp4): "], "\(asked)")
        let cwd = try #require(getcwd(nil, 0))
        defer { free(cwd) }
        #expect(form.url == String(cString: cwd) + "/talk.mkv")
        // Given on the command line too; a URL or an absolute path is left as it is.
        for (given, expected) in [
            ("./a.mp4", String(cString: cwd) + "/a.mp4"), ("/v/a.mp4", "/v/a.mp4"),
            ("file:///v/a.mp4", "file:///v/a.mp4"),
        ] {
            var given = SetupForm(manifest: Self.record, url: given, values: [:])
            try given.fill(interactive: false) { _, _ in nil }
            #expect(given.url == expected)
        }
        // A handler whose URL is not a file gets what was typed.
        var stream = SetupForm(
            manifest: HandlerManifest(name: "s", displayName: "S", exec: "x", url: .init(prompt: "URL")),
            url: "host:9000", values: [:])
        try stream.fill(interactive: false) { _, _ in nil }
        #expect(stream.url == "host:9000")
    }
}
