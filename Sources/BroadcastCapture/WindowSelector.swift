/// Which window `--window` names: an X window id (hexadecimal `0x...` or decimal, as `xwininfo` and
/// `broadcastctl sources` show it), or a name matched against each top-level window's WM_CLASS (instance or
/// class, whole and case-insensitive) first and then its title (whole, then any part, case-insensitive).
public enum WindowSelector: Equatable, Sendable, CustomStringConvertible {
    case id(UInt32)
    case name(String)
    /// The topmost window whose _NET_WM_PID is this process (`--app PID`).
    case pid(Int)

    public init?(_ text: String) {
        let trimmed = text
        guard !trimmed.isEmpty, trimmed.utf8.count <= 256 else { return nil }
        let lower = trimmed.lowercased()
        if lower.hasPrefix("0x") {
            guard let id = UInt32(lower.dropFirst(2), radix: 16), id != 0 else { return nil }
            self = .id(id)
        } else if let id = UInt32(trimmed), id != 0 {
            self = .id(id)
        } else {
            self = .name(trimmed)
        }
    }

    public var description: String {
        switch self {
        case .id(let id): "0x" + String(id, radix: 16)
        case .name(let name): "'\(name)'"
        case .pid(let pid): "of process \(pid)"
        }
    }
}

/// A top-level window, as `broadcastctl sources` lists it.
public struct CaptureWindow: Equatable, Sendable {
    public var id: UInt32
    /// WM_CLASS: the instance name and the class name.
    public var instance: String
    public var className: String
    public var title: String
    /// _NET_WM_PID, when the client set it.
    public var pid: Int?
    /// The client area in root-window pixels.
    public var rect: ScreenRect
    public var mapped: Bool

    public init(
        id: UInt32, instance: String, className: String, title: String, pid: Int?, rect: ScreenRect, mapped: Bool
    ) {
        self.id = id
        self.instance = instance
        self.className = className
        self.title = title
        self.pid = pid
        self.rect = rect
        self.mapped = mapped
    }

    /// Whether its WM_CLASS (instance or class) is among `classes` (lower case), as `--exclude-window` names them.
    public func isOfClass(in classes: Set<String>) -> Bool {
        classes.contains(instance.lowercased()) || classes.contains(className.lowercased())
    }

    /// How `name` matched, by `match`'s number.
    public static let matchKinds = [3: "its class", 2: "its whole title", 1: "part of its title"]

    /// How well `name` matches: 3 for WM_CLASS, 2 for the whole title, 1 for part of it, 0 for none.
    public func match(_ name: String) -> Int {
        let name = name.lowercased()
        if instance.lowercased() == name || className.lowercased() == name { return 3 }
        if title.lowercased() == name { return 2 }
        return title.lowercased().contains(name) ? 1 : 0
    }

    /// For messages: `0x400001 (xterm, "the title")`.
    public var label: String {
        "0x" + String(id, radix: 16) + " (\(className.isEmpty ? instance : className), \"\(title)\")"
    }
}
