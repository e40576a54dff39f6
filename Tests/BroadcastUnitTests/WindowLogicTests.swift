import BroadcastCapture
import Testing

@testable import BroadcastX11

/// Window capture and exclusion: selectors, matching, rectangle arithmetic, the visible parts of excluded windows.
@Suite struct WindowLogicTests {
    @Test func selectorsAreIdsInHexOrDecimalElseNames() {
        #expect(WindowSelector("0x1e00007") == .id(0x1e00007))
        #expect(WindowSelector("0X1E00007") == .id(0x1e00007))
        #expect(WindowSelector("31457287") == .id(31_457_287))
        #expect(WindowSelector("firefox") == .name("firefox"))
        #expect(WindowSelector("Mozilla Firefox — Private") == .name("Mozilla Firefox — Private"))
        for bad in ["", "0x", "0x0", "0xzz", String(repeating: "a", count: 300)] {
            #expect(WindowSelector(bad) == nil, "\(bad)")
        }
        #expect(WindowSelector.id(0x1e00007).description == "0x1e00007")
    }

    @Test func classBeatsWholeTitleBeatsPartOfIt() {
        let window = CaptureWindow(
            id: 1, instance: "keepassxc", className: "KeePassXC", title: "Passwords - KeePassXC", pid: 7,
            rect: ScreenRect(x: 0, y: 0, width: 10, height: 10), mapped: true)
        #expect(window.match("KEEPASSXC") == 3)
        #expect(window.match("passwords - keepassxc") == 2)
        #expect(window.match("words") == 1)
        #expect(window.match("firefox") == 0)
        #expect(window.label == "0x1 (KeePassXC, \"Passwords - KeePassXC\")")
    }

    @Test func subtractingLeavesAtMostFourPiecesCoveringTheRest() {
        let a = ScreenRect(x: 0, y: 0, width: 100, height: 100)
        #expect(a.subtracting(ScreenRect(x: 200, y: 0, width: 10, height: 10)) == [a])
        #expect(a.subtracting(ScreenRect(x: -5, y: -5, width: 200, height: 200)).isEmpty)
        let pieces = a.subtracting(ScreenRect(x: 40, y: 30, width: 20, height: 10))
        #expect(pieces.count == 4)
        #expect(pieces.reduce(0) { $0 + $1.width * $1.height } == 100 * 100 - 20 * 10)
        for (i, p) in pieces.enumerated() { for q in pieces[(i + 1)...] { #expect(p.intersection(q) == nil) } }
        #expect(
            a.subtracting(ScreenRect(x: 50, y: -10, width: 100, height: 200)) == [
                ScreenRect(x: 0, y: 0, width: 50, height: 100)
            ])
    }

    func entry(_ id: UInt32, _ className: String, _ rect: ScreenRect, mapped: Bool = true) -> XWindows.Entry {
        XWindows.Entry(
            toplevel: id, client: id,
            window: CaptureWindow(
                id: id, instance: className.lowercased(), className: className,
                title: "", pid: nil, rect: rect, mapped: mapped), frame: rect)
    }

    @Test func onlyTheVisiblePartsOfExcludedWindowsAreBlackedOut() {
        let secret = ScreenRect(x: 0, y: 0, width: 100, height: 100)
        let cover = ScreenRect(x: 50, y: 0, width: 100, height: 100)
        let excluded: (XWindows.Entry) -> Bool = { $0.window.className == "Secret" }
        // Bottom to top: the cover above hides the secret's right half.
        #expect(
            WindowExclusion.visibleParts([entry(1, "Secret", secret), entry(2, "Other", cover)], excluded: excluded)
                == [ScreenRect(x: 0, y: 0, width: 50, height: 100)])
        // Raised above the cover: all of it.
        #expect(
            WindowExclusion.visibleParts([entry(2, "Other", cover), entry(1, "Secret", secret)], excluded: excluded)
                == [secret])
        // Hidden (minimised): nothing; a hidden window above covers nothing.
        #expect(WindowExclusion.visibleParts([entry(1, "Secret", secret, mapped: false)], excluded: excluded).isEmpty)
        #expect(
            WindowExclusion.visibleParts(
                [entry(1, "Secret", secret), entry(2, "Other", cover, mapped: false)], excluded: excluded) == [secret])
    }
}
