import BroadcastClient
import BroadcastCore
import Testing

/// What broadcastctl's arguments take as people type them: durations with units, and near misses of names.
@Suite struct ArgumentTests {
    @Test(arguments: [
        ("90", 90.0), ("2.5", 2.5), ("90s", 90), ("10m", 600), ("1h30m", 5400), ("1h", 3600), ("1h2m3s", 3723),
        ("1.5h", 5400), ("1m30.5s", 90.5), ("2M", 120), (" 45s ", 45), ("0h5m", 300),
    ])
    func durationsWithUnits(_ text: String, _ seconds: Double) {
        #expect(DurationArgument(text)?.seconds == seconds, "\(text)")
    }

    @Test(arguments: [
        "", "0", "-5", "0s", "10x", "m", "5m1h", "1h1h", "1h 30m", "nan", "inf", "1e99", "10ms", "1:30", "h5",
    ])
    func durationsRefused(_ text: String) {
        #expect(DurationArgument(text) == nil, "'\(text)' was taken as \(DurationArgument(text)!.seconds) s")
    }

    @Test func durationShownAsTyped() {
        #expect(DurationArgument("5400")?.description == "1h30m")
        #expect(DurationArgument("90")?.description == "1m30s")
        #expect(DurationArgument("2.5")?.description == "2.5s")
        #expect(DurationArgument("2h")?.description == "2h")
    }

    @Test func wrapsAtSpacesNeverInsideAWord() {
        let text =
            "Records the broadcast to a video file: H.264 (libx264) $XDG_VIDEOS_DIR/Broadcasts/<date>_<time>.mp4 end"
        let lines = TextWrap.wrap(text, width: 24, indent: "    ", continuation: "        ")
        #expect(
            lines == [
                "    Records the", "        broadcast to a", "        video file:",
                "        H.264 (libx264)", "        $XDG_VIDEOS_DIR/Broadcasts/<date>_<time>.mp4", "        end",
            ])
        #expect(TextWrap.wrap(text, width: nil, indent: "  ") == ["  " + text])
        #expect(TextWrap.wrap("", width: 10) == [""])
    }

    @Test func closestName() {
        let names = ["handlers", "sources", "start", "pause", "resume", "stop", "discard", "status", "snapshot"]
        #expect(NameSuggestion.closest(to: "strat", among: names) == "start")
        #expect(NameSuggestion.closest(to: "staus", among: names) == "status")
        #expect(NameSuggestion.closest(to: "handler", among: names) == "handlers")
        #expect(NameSuggestion.closest(to: "frobnicate", among: names) == nil)
        #expect(
            NameSuggestion.didYouMean("recrod", among: ["inspect", "record", "stream"]) == "; did you mean 'record'?")
        #expect(NameSuggestion.didYouMean("zzz", among: ["inspect", "record", "stream"]) == "")
    }
}
