/// One installed handler, as its manifest file describes it (see docs/protocol.md, "Handler manifests").
public struct HandlerManifest: Equatable, Codable, Sendable {
    /// What `--handler` names (required; letters, digits, '-' and '_').
    public var name: String
    public var displayName: String
    public var description: String?
    /// The program to start: absolute; relative with a `/`, from the manifest's folder; or a bare name looked
    /// up next to broadcastd and then on PATH.
    public var exec: String
    public var arguments: [String]?
    /// How the setup UI asks for the broadcast URL.
    public var url: URLField?
    public var setupFields: [SetupField]?
    /// Whether the handler wants a sample every frame interval even when the screen did not change
    /// (`constant`, the default: unchanged frames come flagged as repeats) or only frames that changed (`variable`).
    /// In the manifest, `frameRate` may instead be a number of frames per second: constant, at that rate
    /// or the nearest the capture gives by taking every k-th frame (`maxFrameRate`).
    public var frameRate: FrameRateMode?
    public var maxFrameRate: Double?
    /// Whether the handler throws away what it produced when a broadcast is discarded (`broadcastctl discard`);
    /// broadcastd refuses to discard a broadcast whose handler does not say so.
    public var discard: Bool?
    /// Revision 2.3: the commands it accepts from controllers while its broadcast runs (`broadcastctl send`);
    /// broadcastd forwards no other.
    public var commands: [Command]?
    /// Revision 2.8: it takes the camera's frames (CAMERA_FORMAT, CAMERA_SAMPLE) when the broadcast has a camera.
    public var camera: Bool?

    public init(
        name: String, displayName: String, description: String? = nil, exec: String, arguments: [String]? = nil,
        url: URLField? = nil, setupFields: [SetupField]? = nil, frameRate: FrameRateMode? = nil, discard: Bool? = nil,
        commands: [Command]? = nil, camera: Bool? = nil
    ) {
        self.name = name
        self.displayName = displayName
        self.description = description
        self.exec = exec
        self.arguments = arguments
        self.url = url
        self.setupFields = setupFields
        self.frameRate = frameRate
        self.discard = discard
        self.commands = commands
        self.camera = camera
    }

    public enum FrameRateMode: String, Codable, Sendable {
        case constant, variable
    }

    enum CodingKeys: String, CodingKey {
        case name, displayName, description, exec, arguments, url, setupFields, frameRate, discard, commands, camera
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        displayName = try c.decode(String.self, forKey: .displayName)
        description = try c.decodeIfPresent(String.self, forKey: .description)
        exec = try c.decode(String.self, forKey: .exec)
        arguments = try c.decodeIfPresent([String].self, forKey: .arguments)
        url = try c.decodeIfPresent(URLField.self, forKey: .url)
        setupFields = try c.decodeIfPresent([SetupField].self, forKey: .setupFields)
        discard = try c.decodeIfPresent(Bool.self, forKey: .discard)
        commands = try c.decodeIfPresent([Command].self, forKey: .commands)
        camera = try c.decodeIfPresent(Bool.self, forKey: .camera)
        if let rate = try? c.decodeIfPresent(Double.self, forKey: .frameRate) {
            guard rate >= 1 && rate <= 240 else {
                throw DecodingError.dataCorruptedError(
                    forKey: .frameRate, in: c, debugDescription: "a frame rate is 1 to 240")
            }
            maxFrameRate = rate
            frameRate = .constant
        } else {
            frameRate = try c.decodeIfPresent(FrameRateMode.self, forKey: .frameRate)
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(displayName, forKey: .displayName)
        try c.encodeIfPresent(description, forKey: .description)
        try c.encode(exec, forKey: .exec)
        try c.encodeIfPresent(arguments, forKey: .arguments)
        try c.encodeIfPresent(url, forKey: .url)
        try c.encodeIfPresent(setupFields, forKey: .setupFields)
        try c.encodeIfPresent(discard, forKey: .discard)
        try c.encodeIfPresent(commands, forKey: .commands)
        try c.encodeIfPresent(camera, forKey: .camera)
        if let maxFrameRate {
            try c.encode(maxFrameRate, forKey: .frameRate)
        } else {
            try c.encodeIfPresent(frameRate, forKey: .frameRate)
        }
    }

    /// The reserved setup key every handler takes: frames per second it wants (1 to 240), fewer than the capture's.
    public static let frameRateKey = "frameRate"

    public struct URLField: Equatable, Codable, Sendable {
        public var prompt: String
        public var `default`: String?
        public var required: Bool?
        /// Revision 2.1: the URL may be a file's path; setup UIs make a relative one absolute, from where they run.
        public var file: Bool?
        public init(prompt: String, default: String? = nil, required: Bool? = nil, file: Bool? = nil) {
            self.prompt = prompt
            self.default = `default`
            self.required = required
            self.file = file
        }
    }

    public struct SetupField: Equatable, Codable, Sendable {
        public var name: String
        public var prompt: String
        public var `default`: String?
        public var required: Bool?
        public var secret: Bool?
        /// A setting most users leave at its default: a setup UI does not ask for it unless it is
        /// required (it is still set with `--set NAME=VALUE`).
        public var advanced: Bool?
        /// Revision 2.6: the values it takes (in any case), or that it is a `number`; a setup with another value is
        /// refused before the handler starts. An empty value is the default's.
        public var choices: [String]?
        public var type: Command.ArgumentType?
        public init(
            name: String, prompt: String, default: String? = nil, required: Bool? = nil, secret: Bool? = nil,
            advanced: Bool? = nil, choices: [String]? = nil, type: Command.ArgumentType? = nil
        ) {
            self.name = name
            self.prompt = prompt
            self.default = `default`
            self.required = required
            self.secret = secret
            self.advanced = advanced
            self.choices = choices
            self.type = type
        }

        /// Why `value` is not one this field takes (not among its choices, not a number), or nil when it is.
        public func problem(with value: String) -> String? {
            guard !value.isEmpty else { return nil }
            if let choices, !choices.contains(where: { $0.lowercased() == value.lowercased() }) {
                let last = choices.last.map { (choices.count > 1 ? " or " : "") + $0 } ?? ""
                let list = choices.dropLast().joined(separator: ", ") + last
                return "setup field '\(name)' takes \(list), not '\(value)'"
            }
            if type == .number, Double(value) == nil { return "setup field '\(name)' is a number, not '\(value)'" }
            return nil
        }
    }

    /// Revision 2.3: a command the handler accepts from controllers, as its manifest lists it.
    public struct Command: Equatable, Codable, Sendable {
        public var name: String
        public var help: String
        public var arguments: [Argument]?
        public init(name: String, help: String, arguments: [Argument]? = nil) {
            self.name = name
            self.help = help
            self.arguments = arguments
        }

        /// One named argument: `type` is `string` (the default), `number` or `bool`.
        public struct Argument: Equatable, Codable, Sendable {
            public var name: String
            public var help: String
            public var type: ArgumentType?
            public var required: Bool?
            public init(name: String, help: String, type: ArgumentType? = nil, required: Bool? = nil) {
                self.name = name
                self.help = help
                self.type = type
                self.required = required
            }
        }

        public enum ArgumentType: String, Codable, Sendable {
            case string, number, bool
        }
    }

    /// Longest broadcast URL, from setup or a handler's UPDATE_URL (docs/protocol.md §5).
    public static let maxURLBytes = 8 << 10
    /// Longest setup value.
    public static let maxSetupValueBytes = 8 << 10

    /// Why `value` cannot be a broadcast URL (too long, or a control character that would forge log
    /// lines or cut a file name short), or nil when it can.
    public static func urlProblem(_ value: String) -> String? {
        textProblem(value, limit: maxURLBytes)
    }

    /// Why `value` is refused: longer than `limit` bytes, or with a control character (a forged log line, a file
    /// name with a line break); nil when it is taken.
    public static func textProblem(_ value: String, limit: Int) -> String? {
        if value.utf8.count > limit { return "it is \(value.utf8.count) bytes long; the limit is \(limit)" }
        if let c = value.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7f }) {
            return "it contains a control character (U+\(String(c.value, radix: 16, uppercase: true).leftPadded(4)))"
        }
        return nil
    }

    /// `validate(url:setupInfo:)`, as a result.
    public func validated(url: String?, setupInfo: [String: String]) -> Result<
        (url: String?, setupInfo: [String: String]), BroadcastError
    > {
        Result { () throws(BroadcastError) in try validate(url: url, setupInfo: setupInfo) }
    }

    /// Checks a completed setup against the manifest: required values present, no unknown keys,
    /// the URL and every value within their limits and free of control characters.
    /// Returns the setup info with defaults filled in.
    public func validate(url: String?, setupInfo: [String: String]) throws(BroadcastError) -> (
        url: String?, setupInfo: [String: String]
    ) {
        if let url, let problem = Self.urlProblem(url) {
            throw BroadcastError(.invalidRequest, "the URL is refused: \(problem)")
        }
        for key in setupInfo.keys.sorted() {
            if let problem = Self.textProblem(setupInfo[key]!, limit: Self.maxSetupValueBytes) {
                throw BroadcastError(.invalidRequest, "setup field '\(key)' is refused: \(problem)")
            }
        }
        var info = setupInfo
        let fields = setupFields ?? []
        // broadcastd reads the frame rate as a number whether the handler declares the field or not (a declared one
        // may take words too, as record's "input"): 1 to 240, or a divisor of the capture's rate would overflow.
        if let rate = info[Self.frameRateKey] {
            let value = Double(rate)
            let declared = fields.contains { $0.name == Self.frameRateKey }
            guard value.map({ $0 >= 1 && $0 <= 240 }) ?? declared else {
                throw BroadcastError(
                    .invalidRequest, "setup field 'frameRate' is frames per second, 1 to 240, not '\(rate)'")
            }
        }
        for key in info.keys.sorted() where key != Self.frameRateKey && !fields.contains(where: { $0.name == key }) {
            let known = fields.map(\.name)
            throw BroadcastError(
                .invalidRequest,
                "handler '\(name)' has no setup field '\(key)'"
                    + (known.isEmpty ? " (it takes none)" : " (its fields: \(known.joined(separator: ", ")))"))
        }
        for field in fields {
            if let value = info[field.name], let problem = field.problem(with: value) {
                throw BroadcastError(.invalidRequest, problem)
            }
            if info[field.name] == nil, let value = field.default { info[field.name] = value }
            if field.required == true && (info[field.name] ?? "").isEmpty {
                throw BroadcastError(
                    .invalidRequest, "handler '\(name)' needs setup field '\(field.name)' (\(field.prompt))")
            }
        }
        let resolvedURL = (url?.isEmpty == false ? url : nil) ?? self.url?.default
        if self.url?.required == true && resolvedURL == nil {
            throw BroadcastError(.invalidRequest, "handler '\(name)' needs a URL (\(self.url!.prompt))")
        }
        return (resolvedURL, info)
    }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
