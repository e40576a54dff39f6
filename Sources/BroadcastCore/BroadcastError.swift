/// The error of the broadcast domain: why a request was refused or a broadcast finished.
/// It crosses the wire as `{"code": ..., "message": ...}`; `message` is written for the user.
public struct BroadcastError: Error, Equatable, Codable, Sendable, CustomStringConvertible {
    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    public struct Code: RawRepresentable, Hashable, Codable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let busy = Code(rawValue: "busy")
        public static let noBroadcast = Code(rawValue: "no-broadcast")
        public static let unknownHandler = Code(rawValue: "unknown-handler")
        public static let invalidRequest = Code(rawValue: "invalid-request")
        public static let setupCancelled = Code(rawValue: "setup-cancelled")
        public static let handlerFailed = Code(rawValue: "handler-failed")
        public static let handlerError = Code(rawValue: "handler-error")
        public static let protocolError = Code(rawValue: "protocol-error")
        public static let versionMismatch = Code(rawValue: "version-mismatch")
        /// Several broadcasts run and the request did not say which it is about.
        public static let ambiguousBroadcast = Code(rawValue: "ambiguous-broadcast")
        public static let budget = Code(rawValue: "memory-budget")
        public static let captureFailed = Code(rawValue: "capture-failed")
        /// START asked for a capture other than the one running for other broadcasts (they share it).
        public static let captureInUse = Code(rawValue: "capture-in-use")
        public static let notRunning = Code(rawValue: "not-running")
        public static let shutdown = Code(rawValue: "shutdown")
        /// Revision 2.3: the handler answered a command with an error, or exited before answering.
        public static let commandFailed = Code(rawValue: "command-failed")
        /// Revision 2.3: the handler did not answer a command in time (the broadcast goes on).
        public static let commandTimeout = Code(rawValue: "command-timeout")
        /// Revision 2.6: a message whose opcode this daemon does not know (a newer peer's); the connection stays.
        public static let unsupported = Code(rawValue: "unsupported")
    }
}
