import BroadcastSystem
import CDBus
import Glibc

/// A value read from a D-Bus message: the types the portal's replies and signals use.
indirect enum DBusValue: Equatable {
    case string(String)
    case uint32(UInt32)
    case int32(Int32)
    case boolean(Bool)
    /// A descriptor the message brought (libdbus hands over a duplicate: it is the reader's to close).
    case descriptor(Int32)
    case array([DBusValue])
    case structure([DBusValue])
    /// An a{s…}: a dictionary with string keys (variants unwrapped).
    case dictionary([String: DBusValue])
    case other(Character)

    var string: String? { if case .string(let s) = self { s } else { nil } }
    var uint32: UInt32? { if case .uint32(let u) = self { u } else { nil } }
    var int32: Int32? { if case .int32(let i) = self { i } else { nil } }
    var dictionary: [String: DBusValue]? { if case .dictionary(let d) = self { d } else { nil } }
    var items: [DBusValue]? {
        switch self {
        case .array(let a), .structure(let a): a
        default: nil
        }
    }
}

/// An argument broadcastd sends: strings, object paths and a{sv} option dictionaries; numbers and string
/// arrays (a desktop notification's).
enum DBusArgument {
    case string(String)
    case objectPath(String)
    case options([(String, DBusOption)])
    case uint32(UInt32)
    case int32(Int32)
    case strings([String])
}

/// A value in an a{sv} options dictionary.
enum DBusOption {
    case uint32(UInt32)
    case boolean(Bool)
    case string(String)
}

/// A signal as it arrived: where from, which, and its arguments.
struct DBusSignal {
    var path: String
    var interface: String
    var member: String
    var arguments: [DBusValue]
}

/// A private connection to the session bus, used from one thread at a time. It never ends the process
/// when the bus goes away (libdbus's default for shared connections does).
final class DBusConnection: @unchecked Sendable {
    /// Whether there is a session bus to ask: one named in the environment, or systemd's at $XDG_RUNTIME_DIR/bus.
    /// Without either libdbus would "autolaunch" one (dbus-launch, through X11): a bus of its own no desktop is on.
    static var sessionBusExists: Bool {
        if let address = Environment.get("DBUS_SESSION_BUS_ADDRESS"), !address.isEmpty { return true }
        guard let runtime = Environment.get("XDG_RUNTIME_DIR"), !runtime.isEmpty else { return false }
        return FileSystem.exists(runtime + "/bus")
    }

    private let connection: OpaquePointer
    /// The connection's unique name, e.g. ":1.42".
    let uniqueName: String

    /// `system`: the system bus (DBUS_SYSTEM_BUS_ADDRESS, else the standard socket), where logind lives.
    init(system: Bool = false) throws(PortalError) {
        DBusLibrary.initialize()
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let connection = dbus_bus_get_private(system ? DBUS_BUS_SYSTEM : DBUS_BUS_SESSION, &error) else {
            throw PortalError(
                "connect to the D-Bus \(system ? "system" : "session") bus",
                system
                    ? Self.text(error)
                    : "\(Self.text(error)) (is DBUS_SESSION_BUS_ADDRESS set? the portal lives on the session bus of a desktop session)"
            )
        }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        self.connection = connection
        uniqueName = String(cString: dbus_bus_get_unique_name(connection))
    }

    deinit {
        dbus_connection_close(connection)
        dbus_connection_unref(connection)
    }

    private static func methodCall(
        _ destination: String, _ path: String, _ interface: String, _ method: String,
        _ arguments: [DBusArgument]
    ) throws(PortalError) -> OpaquePointer {
        guard let message = dbus_message_new_method_call(destination, path, interface, method) else {
            throw PortalError("call \(interface).\(method)", "out of memory")
        }
        var iterator = DBusMessageIter()
        dbus_message_iter_init_append(message, &iterator)
        for argument in arguments { append(argument, to: &iterator) }
        return message
    }

    /// Calls a method and waits up to `timeoutMilliseconds` for its reply's arguments.
    func call(
        _ destination: String, _ path: String, _ interface: String, _ method: String,
        _ arguments: [DBusArgument] = [],
        timeoutMilliseconds: Int32 = 10_000
    ) throws(PortalError) -> [DBusValue] {
        let message = try Self.methodCall(destination, path, interface, method, arguments)
        defer { dbus_message_unref(message) }
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let reply = dbus_connection_send_with_reply_and_block(connection, message, timeoutMilliseconds, &error)
        else {
            throw PortalError(
                "call \(interface).\(method)", Self.text(error), name: error.name.map { String(cString: $0) })
        }
        defer { dbus_message_unref(reply) }
        return Self.arguments(of: reply)
    }

    /// Calls a method without waiting for, or wanting, a reply: the message is on its way to the bus when
    /// this returns, and a peer that does not answer (a portal backend that hangs) holds nobody up.
    func send(_ destination: String, _ path: String, _ interface: String, _ method: String) throws(PortalError) {
        let message = try Self.methodCall(destination, path, interface, method, [])
        defer { dbus_message_unref(message) }
        dbus_message_set_no_reply(message, 1)
        guard dbus_connection_send(connection, message, nil) != 0 else {
            throw PortalError("call \(interface).\(method)", "out of memory")
        }
        dbus_connection_flush(connection)
    }

    /// Asks the bus to route signals matching `rule` to this connection.
    func addMatch(_ rule: String) throws(PortalError) {
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        dbus_bus_add_match(connection, rule, &error)
        if dbus_error_is_set(&error) != 0 { throw PortalError("subscribe to \(rule)", Self.text(error)) }
    }

    /// The signals that have arrived, waiting up to `timeoutMilliseconds` for the first; other messages are dropped.
    func signals(timeoutMilliseconds: Int32) throws(PortalError) -> [DBusSignal] {
        var result: [DBusSignal] = []
        func drain() {
            while let message = dbus_connection_pop_message(connection) {
                defer { dbus_message_unref(message) }
                guard dbus_message_get_type(message) == DBUS_MESSAGE_TYPE_SIGNAL else { continue }
                result.append(
                    DBusSignal(
                        path: dbus_message_get_path(message).map { String(cString: $0) } ?? "",
                        interface: dbus_message_get_interface(message).map { String(cString: $0) } ?? "",
                        member: dbus_message_get_member(message).map { String(cString: $0) } ?? "",
                        arguments: Self.arguments(of: message)))
            }
        }
        drain()
        if result.isEmpty && timeoutMilliseconds >= 0 {
            guard dbus_connection_read_write(connection, Int32(timeoutMilliseconds)) != 0 else {
                throw PortalError("read from the session bus", "the bus closed the connection")
            }
            drain()
        }
        return result
    }

    // MARK: - Messages

    private static func append(_ argument: DBusArgument, to iterator: inout DBusMessageIter) {
        switch argument {
        case .string(let s): appendBasic(s, type: "s", to: &iterator)
        case .objectPath(let s): appendBasic(s, type: "o", to: &iterator)
        case .uint32(var u): dbus_message_iter_append_basic(&iterator, type("u"), &u)
        case .int32(var i): dbus_message_iter_append_basic(&iterator, type("i"), &i)
        case .strings(let items):
            var array = DBusMessageIter()
            dbus_message_iter_open_container(&iterator, type("a"), "s", &array)
            for item in items { appendBasic(item, type: "s", to: &array) }
            dbus_message_iter_close_container(&iterator, &array)
        case .options(let options):
            var array = DBusMessageIter()
            dbus_message_iter_open_container(&iterator, type("a"), "{sv}", &array)
            for (key, value) in options {
                var entry = DBusMessageIter()
                var variant = DBusMessageIter()
                dbus_message_iter_open_container(&array, type("e"), nil, &entry)
                appendBasic(key, type: "s", to: &entry)
                switch value {
                case .uint32(var u):
                    dbus_message_iter_open_container(&entry, type("v"), "u", &variant)
                    dbus_message_iter_append_basic(&variant, type("u"), &u)
                case .boolean(let b):
                    var v = dbus_bool_t(b ? 1 : 0)
                    dbus_message_iter_open_container(&entry, type("v"), "b", &variant)
                    dbus_message_iter_append_basic(&variant, type("b"), &v)
                case .string(let s):
                    dbus_message_iter_open_container(&entry, type("v"), "s", &variant)
                    appendBasic(s, type: "s", to: &variant)
                }
                dbus_message_iter_close_container(&entry, &variant)
                dbus_message_iter_close_container(&array, &entry)
            }
            dbus_message_iter_close_container(&iterator, &array)
        }
    }

    private static func appendBasic(_ text: String, type code: Character, to iterator: inout DBusMessageIter) {
        text.withCString { pointer in
            var p: UnsafePointer<CChar>? = pointer
            _ = dbus_message_iter_append_basic(&iterator, type(code), &p)
        }
    }

    private static func arguments(of message: OpaquePointer) -> [DBusValue] {
        var iterator = DBusMessageIter()
        guard dbus_message_iter_init(message, &iterator) != 0 else { return [] }
        return values(&iterator)
    }

    /// The values from the iterator's position to the end of its container.
    private static func values(_ iterator: inout DBusMessageIter) -> [DBusValue] {
        var result: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&iterator) != 0 {
            result.append(value(&iterator))
            dbus_message_iter_next(&iterator)
        }
        return result
    }

    private static func value(_ iterator: inout DBusMessageIter) -> DBusValue {
        let code = dbus_message_iter_get_arg_type(&iterator)
        switch UnicodeScalar(UInt8(truncatingIfNeeded: code)) {
        case "s", "o", "g":
            var p: UnsafePointer<CChar>?
            dbus_message_iter_get_basic(&iterator, &p)
            return .string(p.map { String(cString: $0) } ?? "")
        case "u":
            var u: UInt32 = 0
            dbus_message_iter_get_basic(&iterator, &u)
            return .uint32(u)
        case "i":
            var i: Int32 = 0
            dbus_message_iter_get_basic(&iterator, &i)
            return .int32(i)
        case "b":
            var b: dbus_bool_t = 0
            dbus_message_iter_get_basic(&iterator, &b)
            return .boolean(b != 0)
        case "h":
            var fd: Int32 = -1
            dbus_message_iter_get_basic(&iterator, &fd)
            return .descriptor(fd)
        case "v":
            var inner = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &inner)
            return value(&inner)
        case "r":
            var inner = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &inner)
            return .structure(values(&inner))
        case "a":
            var inner = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &inner)
            if dbus_message_iter_get_element_type(&iterator) == type("e") {
                var dictionary: [String: DBusValue] = [:]
                for entry in values(&inner) {
                    if case .structure(let pair) = entry, pair.count == 2, let key = pair[0].string {
                        dictionary[key] = pair[1]
                    }
                }
                return .dictionary(dictionary)
            }
            return .array(values(&inner))
        case "e":
            var inner = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &inner)
            return .structure(values(&inner))
        case let scalar:
            return .other(Character(scalar))
        }
    }

    private static func type(_ code: Character) -> Int32 { Int32(code.asciiValue!) }

    private static func text(_ error: DBusError) -> String {
        error.message.map { String(cString: $0) } ?? error.name.map { String(cString: $0) } ?? "unknown D-Bus error"
    }
}

/// dbus_threads_init_default, once per process: the connection is made on one thread and closed on another.
enum DBusLibrary {
    private static let initialized: Bool = {
        dbus_threads_init_default()
        return true
    }()

    static func initialize() { _ = initialized }
}
