import BroadcastCore

// Revision 2.3: commands from controllers to handlers (docs/protocol.md §8.6). A controller sends SEND_COMMAND,
// broadcastd checks it against the handler's manifest and forwards it as COMMAND; the handler's COMMAND_ANSWER
// comes back to that controller as COMMAND_RESULT, or as ERROR.

/// SEND_COMMAND: a named command with its arguments, for broadcast `broadcast`'s handler.
public struct CommandRequest: Codable, Equatable, Sendable {
    /// The broadcast whose handler is meant; absent: the only one running (as PAUSE's).
    public var broadcast: UInt32?
    public var command: String
    public var arguments: [String: JSONValue]?
    public init(broadcast: UInt32? = nil, command: String, arguments: [String: JSONValue]? = nil) {
        self.broadcast = broadcast
        self.command = command
        self.arguments = arguments
    }
}

/// COMMAND_RESULT: the handler's answer, to the controller that asked.
public struct CommandResult: Codable, Equatable, Sendable {
    public var broadcast: UInt32
    public var command: String
    public var result: [String: JSONValue]
    public init(broadcast: UInt32, command: String, result: [String: JSONValue]) {
        self.broadcast = broadcast
        self.command = command
        self.result = result
    }
}

/// COMMAND: what the handler is asked to do; `id` comes back in its answer.
public struct HandlerCommand: Codable, Equatable, Sendable {
    public var id: UInt32
    public var command: String
    public var arguments: [String: JSONValue]
    public init(id: UInt32, command: String, arguments: [String: JSONValue]) {
        self.id = id
        self.command = command
        self.arguments = arguments
    }
}

/// COMMAND_ANSWER: a result, or an error (exactly one of them).
public struct HandlerCommandAnswer: Codable, Equatable, Sendable {
    public var id: UInt32
    public var result: [String: JSONValue]?
    public var error: HandlerFailure?
    public init(id: UInt32, result: [String: JSONValue]? = nil, error: HandlerFailure? = nil) {
        self.id = id
        self.result = result
        self.error = error
    }
}

extension HandlerManifest {
    /// `request`'s command checked against what this handler accepts: its arguments known, of their declared
    /// types (a string that reads as one is converted: `"30"` to 30, `"true"` to true, so that command-line tools
    /// can send text), required ones present. Returns the arguments to forward.
    public func checkedCommand(_ request: CommandRequest) -> Result<
        (command: Command, arguments: [String: JSONValue]), BroadcastError
    > {
        guard let commands, !commands.isEmpty else {
            return .failure(BroadcastError(.invalidRequest, "handler '\(name)' takes no commands"))
        }
        guard let command = commands.first(where: { $0.name == request.command }) else {
            return .failure(
                BroadcastError(
                    .invalidRequest,
                    "handler '\(name)' has no command '\(request.command)' "
                        + "(its commands: \(commands.map(\.name).joined(separator: ", ")))"))
        }
        let declared = command.arguments ?? []
        var arguments: [String: JSONValue] = [:]
        for (key, value) in (request.arguments ?? [:]).sorted(by: { $0.key < $1.key }) {
            guard let argument = declared.first(where: { $0.name == key }) else {
                let known = declared.map(\.name)
                return .failure(
                    BroadcastError(
                        .invalidRequest,
                        "command '\(command.name)' of handler '\(name)' has no argument '\(key)'"
                            + (known.isEmpty
                                ? " (it takes none)" : " (its arguments: \(known.joined(separator: ", ")))")))
            }
            guard let converted = Self.convert(value, to: argument.type ?? .string) else {
                return .failure(
                    BroadcastError(
                        .invalidRequest,
                        "argument '\(key)' of command '\(command.name)' is a \((argument.type ?? .string).rawValue), "
                            + "not \(compactJSON(value))"))
            }
            // As URLs and setup values: no control character reaches a handler (a line break in save's file).
            if case .string(let text) = converted,
                let problem = Self.textProblem(text, limit: Self.maxSetupValueBytes)
            {
                return .failure(
                    BroadcastError(
                        .invalidRequest,
                        "argument '\(key)' of command '\(command.name)' is refused: \(problem)"))
            }
            arguments[key] = converted
        }
        if let missing = declared.first(where: { $0.required == true && arguments[$0.name] == nil }) {
            return .failure(
                BroadcastError(
                    .invalidRequest, "command '\(command.name)' needs argument '\(missing.name)' (\(missing.help))"))
        }
        return .success((command, arguments))
    }

    private static func convert(_ value: JSONValue, to type: Command.ArgumentType) -> JSONValue? {
        switch (type, value) {
        case (.string, .string), (.number, .number), (.bool, .bool): value
        case (.number, .string(let text)): Double(text).flatMap { $0.isFinite ? JSONValue.number($0) : nil }
        case (.bool, .string("true")), (.bool, .string("yes")), (.bool, .string("1")): .bool(true)
        case (.bool, .string("false")), (.bool, .string("no")), (.bool, .string("0")): .bool(false)
        case (.string, .number), (.string, .bool): .string(value.description)
        default: nil
        }
    }
}
