import FoundationEssentials
import Glibc

/// docs/protocol.json, the protocol as data, decoded as the tests read it.
struct ProtocolDescription: Decodable, Sendable {
    struct Field: Decodable, Sendable {
        var name: String
        var type: String
        var required: Bool?
        var format: String?
        var object: String?
        var values: String?
        var items: String?
        var since: String?
        var text: String
        /// Bounds (revision 2.9's fields carry them): a string's bytes, an array's or map's entries, a map's keys and
        /// values, an integer's range.
        var maxBytes: Int?
        var maxItems: Int?
        var maxKeyBytes: Int?
        var maxValueBytes: Int?
        var min: Int?
        var max: Int?
    }

    struct Payload: Decodable, Sendable {
        var kind: String
        var fields: [Field]?
        var object: String?
        var layout: String?
    }

    struct MessageEntry: Decodable, Sendable {
        var name: String
        var opcode: String
        var direction: String
        var roles: [String]
        var since: String?
        var descriptors: Int?
        var errors: [String]?
        var payload: Payload
        var opcodeValue: UInt16? { UInt16(opcode.dropFirst(2), radix: 16) }
    }

    struct ObjectEntry: Decodable, Sendable {
        var text: String
        var fields: [Field]
    }

    struct LayoutField: Decodable, Sendable {
        var name: String
        var offset: Int
        var size: Int
        var type: String
    }

    struct Layout: Decodable, Sendable {
        var size: Int
        var fields: [LayoutField]
    }

    struct Feature: Decodable, Sendable {
        var name: String
        var offered: Bool
    }

    struct Limit: Decodable, Sendable {
        var name: String
        var swift: String?
        var value: Int?
        var unit: String?
    }

    struct ErrorEntry: Decodable, Sendable {
        var code: String
        var `where`: [String]
    }

    struct Golden: Decodable, Sendable {
        var name: String
        var message: String
        var hex: String
        var bytes: [UInt8] {
            stride(from: 0, to: hex.count, by: 2).map { i in
                let start = hex.index(hex.startIndex, offsetBy: i)
                return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16) ?? 0
            }
        }
    }

    var version: Int
    var oldestVersion: Int
    var revision: String
    var features: [Feature]
    var limits: [Limit]
    var errors: [ErrorEntry]
    var objects: [String: ObjectEntry]
    var layouts: [String: Layout]
    var messages: [MessageEntry]
    var golden: [Golden]

    /// The fields a message's JSON payload has: its own, or those of the object it is.
    func fields(of message: MessageEntry) -> [Field]? {
        message.payload.fields ?? message.payload.object.flatMap { objects[$0]?.fields }
    }

    static let root = "/" + String(#filePath).split(separator: "/").dropLast(3).joined(separator: "/")

    static func read(_ relativePath: String) -> [UInt8] {
        guard let file = fopen(root + "/" + relativePath, "r") else { return [] }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&buffer, 1, buffer.count, file)
            if n <= 0 { break }
            bytes += buffer.prefix(n)
        }
        return bytes
    }

    /// The description, or why it cannot be read (the tests fail with it).
    static let loaded: Result<ProtocolDescription, DescriptionError> = {
        let bytes = read("docs/protocol.json")
        guard !bytes.isEmpty else { return .failure(DescriptionError("docs/protocol.json could not be read")) }
        do { return .success(try JSONDecoder().decode(ProtocolDescription.self, from: Data(bytes))) } catch {
            return .failure(DescriptionError("docs/protocol.json does not decode: \(error)"))
        }
    }()

    static func load() throws -> ProtocolDescription { try loaded.get() }

    /// The golden bytes named `name`.
    static func golden(_ name: String) -> [UInt8]? {
        (try? load())?.golden.first { $0.name == name }?.bytes
    }
}

struct DescriptionError: Error, CustomStringConvertible, Sendable {
    var description: String
    init(_ description: String) { self.description = description }
}
