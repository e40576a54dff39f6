/// The error type of BroadcastDaemon: what the daemon was doing and why it failed.
public struct DaemonError: Error, CustomStringConvertible {
    public var operation: String
    public var reason: String

    public init(_ operation: String, _ reason: String) {
        self.operation = operation
        self.reason = reason
    }

    public init(_ operation: String, _ error: some Error) {
        self.init(operation, "\(error)")
    }

    public var description: String { "\(operation): \(reason)" }
}
