import BroadcastCapture
import BroadcastCore
import CPipeWire
import Glibc

/// The cameras PipeWire has: every node of media.class `Video/Source`, in the registry's order, with the formats
/// each offers (its EnumFormat params). One look, on a connection of its own: the registry, a round trip, then each
/// video source's formats and a second round trip.
public final class PipeWireCameras: @unchecked Sendable {
    /// How long a look may take before it fails (a PipeWire that does not answer).
    public static let timeout: UInt64 = 2_000_000_000

    /// PipeWire's core and thread loop, kept by the connection's setUp: its thread may answer before the connection's
    /// init returns (under load the registry's `done` came first, found no connection yet and was dropped: a stall).
    private var core: OpaquePointer?
    private var loop: OpaquePointer?
    private var registry: OpaquePointer?
    private var nodes: [UInt32: CameraDescription] = [:]
    private var order: [UInt32] = []
    private var looks: [NodeLook] = []
    private var waitingFor: Int32 = -1
    private var phase = Phase.registry
    enum Phase { case registry, formats, done }

    private let coreEvents = UnsafeMutablePointer<pw_core_events>.allocate(capacity: 1)
    private let coreListener = UnsafeMutablePointer<spa_hook>.allocate(capacity: 1)
    private let registryEvents = UnsafeMutablePointer<pw_registry_events>.allocate(capacity: 1)
    private let registryListener = UnsafeMutablePointer<spa_hook>.allocate(capacity: 1)
    private let nodeEvents = UnsafeMutablePointer<pw_node_events>.allocate(capacity: 1)

    /// One video source's node, bound to read its formats: its `param` events come with this as their data.
    final class NodeLook {
        let id: UInt32
        unowned let cameras: PipeWireCameras
        let listener = UnsafeMutablePointer<spa_hook>.allocate(capacity: 1)
        var proxy: OpaquePointer?

        init(id: UInt32, cameras: PipeWireCameras) {
            (self.id, self.cameras) = (id, cameras)
            listener.initialize(to: spa_hook())
        }

        deinit { listener.deallocate() }
    }

    /// The cameras now (on `remote`, a connection the Camera portal opened, which the look then owns; else on
    /// `$PIPEWIRE_REMOTE`, else PipeWire's socket in `$XDG_RUNTIME_DIR`); throws when PipeWire cannot be reached or
    /// does not answer within `timeout`.
    public static func list(remote: Int32? = nil) throws(CaptureError) -> [CameraDescription] {
        try PipeWireCameras().look(remote)
    }

    /// For tests: runs on the caller's thread once PipeWire's thread has started, before the look waits for it (a
    /// delay here lets PipeWire answer first, as on a loaded machine).
    nonisolated(unsafe) static var connected: (() -> Void)?

    private init() {
        coreEvents.initialize(to: pw_core_events())
        coreEvents.pointee.version = bd_pw_version_core_events()
        coreEvents.pointee.done = { data, id, seq in
            Unmanaged<PipeWireCameras>.fromOpaque(data!).takeUnretainedValue().done(id, seq)
        }
        coreListener.initialize(to: spa_hook())
        registryEvents.initialize(to: pw_registry_events())
        registryEvents.pointee.version = bd_pw_version_registry_events()
        registryEvents.pointee.global = { data, id, _, type, _, props in
            Unmanaged<PipeWireCameras>.fromOpaque(data!).takeUnretainedValue().global(
                id, type.map { String(cString: $0) } ?? "", props)
        }
        registryListener.initialize(to: spa_hook())
        nodeEvents.initialize(to: pw_node_events())
        nodeEvents.pointee.version = bd_pw_version_node_events()
        nodeEvents.pointee.param = { data, _, id, _, _, param in
            guard let data, let param, id == SPA_PARAM_EnumFormat.rawValue else { return }
            let look = Unmanaged<NodeLook>.fromOpaque(data).takeUnretainedValue()
            look.cameras.param(look.id, param)
        }
    }

    deinit {
        coreEvents.deallocate()
        coreListener.deallocate()
        registryEvents.deallocate()
        registryListener.deallocate()
        nodeEvents.deallocate()
    }

    private func look(_ remote: Int32?) throws(CaptureError) -> [CameraDescription] {
        let me = Unmanaged.passUnretained(self).toOpaque()
        let connection = try PipeWireConnection(threadName: "broadcastd-cameras", remote: remote) { core, loop in
            (self.core, self.loop) = (core, loop)
            bd_pw_core_add_listener(core, coreListener, coreEvents, me)
            let registry = bd_pw_core_get_registry(core)
            self.registry = registry
            bd_pw_registry_add_listener(registry, registryListener, registryEvents, me)
            waitingFor = bd_pw_core_sync(core)
        }
        Self.connected?()
        var deadline = timespec()
        pw_thread_loop_lock(connection.loop)
        pw_thread_loop_get_time(connection.loop, &deadline, Int64(Self.timeout))
        while phase != .done && pw_thread_loop_timed_wait_full(connection.loop, &deadline) == 0 {}
        let answered = phase == .done
        let stage = phase == .registry ? "the registry" : "the formats of \(looks.count) node(s)"
        pw_thread_loop_unlock(connection.loop)
        connection.close {
            for look in looks { look.proxy.map { bd_pw_proxy_destroy(UnsafeMutableRawPointer($0)) } }
            if let registry { bd_pw_proxy_destroy(UnsafeMutableRawPointer(registry)) }
        }
        guard answered else {
            throw CaptureError(
                source: "pipewire", operation: "list the cameras",
                reason: "PipeWire did not answer within 2 s (asked for \(stage))")
        }
        return order.compactMap { nodes[$0] }
    }

    // MARK: - On PipeWire's thread

    private func global(_ id: UInt32, _ type: String, _ props: UnsafePointer<spa_dict>?) {
        func property(_ key: String) -> String? { spa_dict_lookup(props, key).map { String(cString: $0) } }
        guard phase == .registry, type == String(cString: bd_pw_type_node()),
            property("media.class") == "Video/Source", let name = property("node.name")
        else { return }
        nodes[id] = CameraDescription(
            name: name, description: property("node.description") ?? property("node.nick"),
            serial: property("object.serial") ?? "\(id)", role: property("media.role"))
        order.append(id)
    }

    private func done(_ id: UInt32, _ seq: Int32) {
        guard id == PW_ID_CORE, seq == waitingFor, let core, let loop else { return }
        switch phase {
        case .registry:
            phase = .formats
            for id in order {
                guard let registry, let proxy = bd_pw_registry_bind_node(registry, id) else { continue }
                let look = NodeLook(id: id, cameras: self)
                look.proxy = proxy
                looks.append(look)
                bd_pw_node_add_listener(proxy, look.listener, nodeEvents, Unmanaged.passUnretained(look).toOpaque())
                bd_pw_node_enum_formats(proxy)
            }
            waitingFor = bd_pw_core_sync(core)
        case .formats:
            phase = .done
            pw_thread_loop_signal(loop, false)
        case .done:
            return
        }
    }

    fileprivate func param(_ node: UInt32, _ param: UnsafePointer<spa_pod>) {
        var format = bd_camera_format()
        guard bd_pw_parse_camera_format(param, &format) == 0 else { return }
        let names = withUnsafeBytes(of: format.names) { bytes in
            (0..<Int(format.n_names)).map { index in
                String(decoding: bytes[(index * 16)..<(index * 16 + 16)].prefix { $0 != 0 }, as: UTF8.self)
            }
        }
        let rates = withUnsafeBytes(of: format.rates) { Array($0.bindMemory(to: spa_fraction.self)) }
            .prefix(Int(format.n_rates)).compactMap { $0.denom == 0 ? nil : Double($0.num) / Double($0.denom) }
        // A param offering several pixel formats (a choice) is listed once for each.
        for name in names {
            let entry = CameraFormat(
                pixelFormat: name, width: Int(format.width), height: Int(format.height), frameRates: Array(rates))
            if nodes[node]?.formats.contains(entry) == false, (nodes[node]?.formats.count ?? 0) < 64 {
                nodes[node]?.formats.append(entry)
            }
        }
    }
}
