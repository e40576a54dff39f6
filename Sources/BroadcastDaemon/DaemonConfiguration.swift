import BroadcastCore
import BroadcastSystem

/// The memory broadcastd may have resident, pool included: a goal when it is the built-in one (a capture that
/// cannot fit it runs at its minimum and says how far over it is), a promise when the user set it (what does not
/// fit is refused, with what would).
public struct MemoryBudget: Equatable, Sendable {
    public var bytes: Int
    public var enforced: Bool
    public init(bytes: Int, enforced: Bool) {
        self.bytes = bytes
        self.enforced = enforced
    }
    public static let builtIn = MemoryBudget(bytes: 50 << 20, enforced: false)
}

public struct DaemonConfiguration {
    public var socketPath: String
    public var memoryBudget: MemoryBudget
    /// Searched before the default handler directories.
    public var extraHandlerDirectories: [String] = []
    /// How long a launched handler has to connect and return from broadcastStarted.
    public var startTimeout: UInt64 = 10_000_000_000
    /// How long a live handler may go without reading what it is sent, or while holding slots without
    /// releasing any, before the broadcast finishes with an error that it hung.
    public var hangTimeout: UInt64 = 10_000_000_000
    /// How long a handler has to exit after BROADCAST_FINISHED before it is stopped.
    public var finishTimeout: UInt64 = 5_000_000_000
    public var serviceInfoInterval: UInt64 = 1_000_000_000
    /// Most broadcasts requested and not finished at once (they share one capture).
    public var maxBroadcasts = 8
    public var serverName = "broadcastd 0.1.0"
    /// What a locked session does to live broadcasts.
    public var onLock: LockAction = .pause
    /// Revision 2.9: the shared encoder's program, found as a handler manifest's `exec` is (a bare name: beside
    /// broadcastd, then on PATH).
    public var encoderProgram = "broadcast-encoder"

    public init(socketPath: String, memoryBudget: MemoryBudget = .builtIn) {
        self.socketPath = socketPath
        self.memoryBudget = memoryBudget
    }
}
