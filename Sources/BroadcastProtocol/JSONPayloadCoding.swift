import BroadcastCore
import BroadcastSystem
import FoundationEssentials

// Any JSON value, and how a message's JSON payload is written and read (docs/protocol.md's form).

/// Any JSON value: the service info (flat) and the result (nested) a handler reports.
public enum JSONValue: Codable, Equatable, Sendable, CustomStringConvertible {
    case string(String)
    case number(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? c.decode(Double.self) {
            self = .number(n)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let s): try c.encode(s)
        case .number(let n): try c.encode(n)
        case .bool(let b): try c.encode(b)
        case .null: try c.encodeNil()
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    /// An array or an object (which flat service info may not hold).
    public var isNested: Bool {
        switch self {
        case .array, .object: true
        default: false
        }
    }

    /// Scalars as plain text (a string without quotes), arrays and objects as compact JSON.
    public var description: String {
        switch self {
        case .string(let s): s
        case .number(let n): n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        case .bool(let b): String(b)
        case .null: "null"
        case .array, .object: compactJSON(self)
        }
    }
}

/// A dictionary key as a coding path element, for errors that name it.
struct JSONKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ key: String) { stringValue = key }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

// MARK: - JSON coding

extension Message {
    /// Compact, keys sorted, slashes unescaped: the form docs/protocol.md specifies.
    fileprivate static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }()

    /// A message whose payload is `value` as compact JSON with sorted keys.
    public static func json(_ opcode: Opcode, seq: UInt32 = 0, _ value: some Encodable, descriptors: [Descriptor] = [])
        -> Message
    {
        let bytes = (try? encoder.encode(value)).map(Array.init) ?? Array("{}".utf8)
        return Message(opcode, seq: seq, payload: bytes, descriptors: descriptors)
    }

    /// Decodes the JSON payload; an empty payload reads as `{}`.
    public func decode<T: Decodable>(_ type: T.Type) throws(ProtocolError) -> T {
        if JSONDepth.excess(payload) != nil {
            throw .malformed(opcode, "JSON nested deeper than \(JSONDepth.limit) levels")
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(payload.isEmpty ? Array("{}".utf8) : payload))
        } catch {
            throw .malformed(opcode, describe(error, decoding: T.self))
        }
    }

    /// Whether the payload is JSON (within the depth limit): a request whose fields are wrong, not a broken message.
    public var isJSON: Bool {
        let bytes = Data(payload.isEmpty ? Array("{}".utf8) : payload)
        return JSONDepth.excess(payload) == nil && (try? JSONDecoder().decode(JSONValue.self, from: bytes)) != nil
    }

    private func describe<T: Decodable>(_ error: Error, decoding type: T.Type) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "missing field '\(key.stringValue)'"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return "wrong type at '\(path)'"
        case DecodingError.dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            if !path.isEmpty { return "invalid value at '\(path)'" }
            // Foundation says a number that does not fit its field (-1 for a u32) is not valid JSON, naming no field.
            if let field = numberOutOfRange(decoding: type) {
                return "'\(field)' holds a number its field cannot take "
                    + "(ids and other integers are whole numbers from 0 to 4294967295)"
            }
            return "payload is not valid JSON"
        default: return "\(error)"
        }
    }

    /// The top-level field of a JSON object payload without which it decodes (or fails otherwise): the one whose
    /// number does not fit. Tried for payloads of at most 16 KiB with at most 32 fields (a request's size), so that
    /// the search costs little.
    private func numberOutOfRange<T: Decodable>(decoding type: T.Type) -> String? {
        guard payload.count <= 16 << 10, JSONDepth.excess(payload) == nil,
            let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(payload)),
            object.count <= 32
        else { return nil }
        for key in object.keys.sorted() {
            var without = object
            without[key] = nil
            guard let data = try? Self.encoder.encode(without) else { continue }
            do { _ = try JSONDecoder().decode(T.self, from: data) } catch DecodingError.dataCorrupted(let context)
                where context.codingPath.isEmpty
            {
                continue
            } catch {}
            return key
        }
        return nil
    }
}

/// Any Encodable as one line of JSON, exactly as it would travel in a message (for line-by-line output).
public func compactJSON(_ value: some Encodable) -> String {
    (try? Message.encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
}

/// Encodes any Encodable as pretty JSON text with sorted keys (for status output and summaries).
public func prettyJSON(_ value: some Encodable) -> String {
    let e = JSONEncoder()
    e.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
    return (try? e.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
}
