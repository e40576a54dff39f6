import BroadcastCapture
import BroadcastSystem
import CPipeWire
import Glibc
import Synchronization

/// broadcastd's connection to PipeWire while a broadcast runs (live or paused): one thread (pw_thread_loop) that
/// watches the graph (nodes, and the `default` metadata that names the default sink and source) and
/// keeps each audio stream connected to the node it should capture. A stream that asks for the default
/// device follows it; only a sink (or an application's playback stream, named) counts for app audio and
/// only a source for the microphone, so the microphone is silent, not app audio, when WirePlumber falls
/// back to a sink's monitor as the default source. A named node is captured whenever it exists. An
/// application's playback streams are linked port by port to the app-audio stream itself, where
/// PipeWire mixes them: every stream of the application, as they come and go, and nothing else.
public final class PipeWireSession: @unchecked Sendable {
    public let streams: [PipeWireAudioStream]
    private var connection: PipeWireConnection?
    /// On PipeWire's thread, while connected.
    private var core: OpaquePointer?
    private var registry: OpaquePointer?
    private var metadata: OpaquePointer?
    private let registryEvents = UnsafeMutablePointer<pw_registry_events>.allocate(capacity: 1)
    private let registryListener = UnsafeMutablePointer<spa_hook>.allocate(capacity: 1)
    private let metadataEvents = UnsafeMutablePointer<pw_metadata_events>.allocate(capacity: 1)
    private let metadataListener = UnsafeMutablePointer<spa_hook>.allocate(capacity: 1)

    /// On PipeWire's thread: the graph as far as it matters here.
    private var nodes: [UInt32: Node] = [:]
    struct Node {
        /// Unique, unlike names (two players of one program share theirs): what streams target.
        var serial: String
        var name: String
        var mediaClass: String
        var application: String?
        /// `application.process.binary` (PulseAudio clients say it), or the executable's name of the client's process.
        var binary: String?
        /// `client.id`: where `binary` comes from when the node does not say it.
        var client: UInt32?
        /// The process that plays the stream (`pid:N` targets it): its client's `pipewire.sec.pid`, which PipeWire
        /// itself sets, else the node's `application.process.id`.
        var pid: String?

        /// Named `name` (`node.name`), or with that serial number.
        func isNamed(_ name: String) -> Bool { self.name == name || serial == name }

        /// A playback stream of the application (or the node) named `name`, by its application name or the
        /// program's, in any case; never broadcastd's own.
        func plays(_ name: String) -> Bool {
            mediaClass == "Stream/Output/Audio" && !self.name.hasPrefix("broadcastd-")
                && (isNamed(name) || [application, binary].contains { $0?.lowercased() == name.lowercased() }
                    || (name.hasPrefix("pid:") && pid != nil && "pid:" + pid! == name))
        }
    }
    /// On PipeWire's thread: the clients' executables (by their `pipewire.sec.pid`, which PipeWire itself sets).
    private var clientBinaries: [UInt32: String] = [:]
    /// On PipeWire's thread: the clients' `pipewire.sec.pid`.
    private var clientPIDs: [UInt32: String] = [:]
    /// On PipeWire's thread: the ports of the nodes, as far as linking needs them.
    private var ports: [UInt32: Port] = [:]
    struct Port {
        var node: UInt32
        var input: Bool
        /// `audio.channel`: FL, FR, MONO, ...
        var channel: String
    }
    /// On PipeWire's thread: the links this session made, by the ports they join.
    private var links: [PortPair: OpaquePointer] = [:]
    struct PortPair: Hashable {
        var output: UInt32
        var input: UInt32
    }
    private var defaultSink: String?
    private var defaultSource: String?

    public init(streams: [PipeWireAudioStream]) {
        self.streams = streams
        registryEvents.initialize(to: pw_registry_events())
        registryEvents.pointee.version = bd_pw_version_registry_events()
        registryEvents.pointee.global = { data, id, _, type, _, props in
            Unmanaged<PipeWireSession>.fromOpaque(data!).takeUnretainedValue().global(
                id, type.map { String(cString: $0) } ?? "", props)
        }
        registryEvents.pointee.global_remove = { data, id in
            Unmanaged<PipeWireSession>.fromOpaque(data!).takeUnretainedValue().globalRemoved(id)
        }
        registryListener.initialize(to: spa_hook())
        metadataEvents.initialize(to: pw_metadata_events())
        metadataEvents.pointee.version = bd_pw_version_metadata_events()
        metadataEvents.pointee.property = { data, subject, key, _, value in
            Unmanaged<PipeWireSession>.fromOpaque(data!).takeUnretainedValue()
                .metadataProperty(key.map { String(cString: $0) }, value.map { String(cString: $0) })
            return 0
        }
        metadataListener.initialize(to: spa_hook())
    }

    deinit {
        stop()
        registryEvents.deallocate()
        registryListener.deallocate()
        metadataEvents.deallocate()
        metadataListener.deallocate()
    }

    /// Connects to PipeWire (`$PIPEWIRE_REMOTE`, `$PIPEWIRE_RUNTIME_DIR` or `$XDG_RUNTIME_DIR`); the streams
    /// are live from `time` on, or keep a pre-roll until they go live (nil). Throws when PipeWire cannot be
    /// reached: the streams then carry silence.
    public func start(at time: UInt64?) throws(CaptureError) {
        for stream in streams {
            stream.reset()
            if let time { stream.goLive(at: time) }
        }
        connection = try PipeWireConnection(threadName: "broadcastd-audio") { core, _ in
            self.core = core
            let registry = bd_pw_core_get_registry(core)
            self.registry = registry
            bd_pw_registry_add_listener(
                registry, registryListener, registryEvents, Unmanaged.passUnretained(self).toOpaque())
        }
    }

    /// Disconnects; the streams stop receiving (and carry silence if taken from).
    public func stop() {
        connection?.close {
            for link in links.values { bd_pw_proxy_destroy(UnsafeMutableRawPointer(link)) }
            for stream in streams { stream.disconnect() }
            if let metadata { bd_pw_proxy_destroy(UnsafeMutableRawPointer(metadata)) }
            if let registry { bd_pw_proxy_destroy(UnsafeMutableRawPointer(registry)) }
        }
        (connection, core, registry, metadata) = (nil, nil, nil, nil)
        (nodes, ports, links, clientBinaries, clientPIDs) = ([:], [:], [:], [:], [:])
        (defaultSink, defaultSource) = (nil, nil)
    }

    // MARK: - On PipeWire's thread

    private func global(_ id: UInt32, _ type: String, _ props: UnsafePointer<spa_dict>?) {
        func property(_ key: String) -> String? { spa_dict_lookup(props, key).map { String(cString: $0) } }
        if type == String(cString: bd_pw_type_node()), let name = property("node.name"),
            let mediaClass = property("media.class")
        {
            let client = property("client.id").flatMap(UInt32.init)
            nodes[id] = Node(
                serial: property("object.serial") ?? "\(id)", name: name, mediaClass: mediaClass,
                application: property("application.name"),
                binary: property("application.process.binary") ?? client.flatMap { clientBinaries[$0] }, client: client,
                pid: client.flatMap { clientPIDs[$0] } ?? property("application.process.id"))
            follow()
        } else if type == String(cString: bd_pw_type_client()),
            let pid = property("pipewire.sec.pid").flatMap(Int32.init),
            let path = FileSystem.executable(ofProcess: pid)
        {
            clientBinaries[id] = String(path.split(separator: "/").last ?? "")
            clientPIDs[id] = "\(pid)"
            // A client's nodes may have come first.
            for (node, value) in nodes where value.client == id && value.binary == nil {
                nodes[node]?.binary = clientBinaries[id]
            }
            for (node, value) in nodes where value.client == id { nodes[node]?.pid = clientPIDs[id] }
            follow()
        } else if type == String(cString: bd_pw_type_port()), let node = property("node.id").flatMap(UInt32.init),
            let direction = property("port.direction")
        {
            ports[id] = Port(node: node, input: direction == "in", channel: property("audio.channel") ?? "MONO")
            follow()
        } else if type == String(cString: bd_pw_type_metadata()), property("metadata.name") == "default",
            metadata == nil, let registry,
            let metadata = bd_pw_registry_bind_metadata(registry, id)
        {
            self.metadata = metadata
            bd_pw_metadata_add_listener(
                metadata, metadataListener, metadataEvents, Unmanaged.passUnretained(self).toOpaque())
        }
    }

    private func globalRemoved(_ id: UInt32) {
        clientBinaries[id] = nil
        clientPIDs[id] = nil
        guard nodes.removeValue(forKey: id) != nil || ports.removeValue(forKey: id) != nil else { return }
        follow()
    }

    /// `default.audio.sink` and `default.audio.source` (values like `{"name":"alsa_output.pci-..."}`).
    private func metadataProperty(_ key: String?, _ value: String?) {
        let name = value.flatMap(Self.jsonName)
        switch key {
        case "default.audio.sink": defaultSink = name
        case "default.audio.source": defaultSource = name
        case nil: (defaultSink, defaultSource) = (nil, nil)  // everything cleared
        default: return
        }
        follow()
    }

    /// Connects each stream to what it should capture now (nothing: it carries silence), then links the
    /// applications' ports to the streams that capture them.
    private func follow() {
        guard let core else { return }
        for stream in streams {
            let source: PipeWireAudioStream.Source? =
                stream.capturesSink
                ? appSource(stream.target)
                : micNode(stream.target).map { .node(serial: $0.serial, monitor: false) }
            stream.connect(core: core, to: source)
        }
        linkApplications(core)
    }

    /// A sink (its monitor), or an application's playback streams.
    private func appSource(_ target: AudioTarget) -> PipeWireAudioStream.Source? {
        switch target {
        case .defaultDevice:
            return nodes.values.first { $0.name == defaultSink && $0.mediaClass == "Audio/Sink" }.map {
                .node(serial: $0.serial, monitor: true)
            }
        case .node(let name):
            if let sink = nodes.values.first(where: { $0.isNamed(name) && $0.mediaClass == "Audio/Sink" }) {
                return .node(serial: sink.serial, monitor: true)
            }
            return nodes.values.contains { $0.plays(name) } ? .linked(name) : nil
        }
    }

    /// Links every output port of the applications' playback streams to the input port of the same
    /// channel of the stream that captures them (see `stereoChannels`), and takes away links no longer wanted.
    private func linkApplications(_ core: OpaquePointer) {
        var wanted: Set<PortPair> = []
        for stream in streams {
            guard case .linked(let name) = stream.connectedTo, let capture = stream.nodeID else { continue }
            let inputs = ports.filter { $0.value.node == capture && $0.value.input }
            let players = Set(nodes.filter { $0.value.plays(name) }.keys)
            for (id, port) in ports where !port.input && players.contains(port.node) {
                for channel in Self.stereoChannels(port.channel) {
                    if let input = inputs.first(where: { $0.value.channel == channel }) {
                        wanted.insert(PortPair(output: id, input: input.key))
                    }
                }
            }
        }
        for (pair, link) in links where !wanted.contains(pair) {
            bd_pw_proxy_destroy(UnsafeMutableRawPointer(link))
            links[pair] = nil
        }
        for pair in wanted where links[pair] == nil {
            guard let output = ports[pair.output], let input = ports[pair.input] else { continue }
            links[pair] = bd_pw_core_link_ports(core, output.node, pair.output, input.node, pair.input)
        }
    }

    /// The stereo channels (FL, FR) an application's channel goes to: itself, its side for surround
    /// channels, both for mono, centre and what is unknown, neither for the LFE.
    static func stereoChannels(_ channel: String) -> [String] {
        switch channel {
        case "FL", "RL", "SL", "FLC", "RLC", "TFL", "TRL": ["FL"]
        case "FR", "RR", "SR", "FRC", "RRC", "TFR", "TRR": ["FR"]
        case "LFE", "LFE2": []
        default: ["FL", "FR"]
        }
    }

    /// A source: never a sink's monitor, which WirePlumber offers as the default source when there is none.
    private func micNode(_ target: AudioTarget) -> Node? {
        let sources = nodes.values.filter { $0.mediaClass.hasPrefix("Audio/Source") }
        switch target {
        case .defaultDevice: return sources.first { $0.name == defaultSource }
        case .node(let name): return sources.first { $0.isNamed(name) }
        }
    }

    /// The `name` in a metadata value such as `{"name":"test_mic"}`; nil when there is none.
    static func jsonName(_ json: String) -> String? {
        var value = [CChar](repeating: 0, count: 1024)
        guard bd_spa_json_object_string(json, "name", &value, Int32(value.count)) == 0 else { return nil }
        let name = String(decoding: value.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }
}
