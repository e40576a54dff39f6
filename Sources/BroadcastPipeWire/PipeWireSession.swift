import BroadcastCapture
import CPipeWire
import Glibc
import Synchronization

/// broadcastd's connection to PipeWire while a broadcast is live: one thread (pw_thread_loop) that
/// watches the graph (nodes, and the `default` metadata that names the default sink and source) and
/// keeps each audio stream connected to the node it should capture. A stream that asks for the default
/// device follows it; only a sink (or an application's playback stream, named) counts for app audio and
/// only a source for the microphone, so the microphone is silent, not app audio, when WirePlumber falls
/// back to a sink's monitor as the default source. A named node is captured whenever it exists.
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
    }
    private var defaultSink: String?
    private var defaultSource: String?

    public init(streams: [PipeWireAudioStream]) {
        self.streams = streams
        registryEvents.initialize(to: pw_registry_events())
        registryEvents.pointee.version = bd_pw_version_registry_events()
        registryEvents.pointee.global = { data, id, _, type, _, props in
            Unmanaged<PipeWireSession>.fromOpaque(data!).takeUnretainedValue().global(id, type.map { String(cString: $0) } ?? "", props)
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

    /// Connects to PipeWire (`$PIPEWIRE_REMOTE`, `$PIPEWIRE_RUNTIME_DIR` or `$XDG_RUNTIME_DIR`); the streams'
    /// time starts at `time`. Throws when PipeWire cannot be reached: the streams then carry silence.
    public func start(at time: UInt64) throws(CaptureError) {
        for stream in streams { stream.reset(at: time) }
        connection = try PipeWireConnection(threadName: "broadcastd-audio") { core in
            self.core = core
            let registry = bd_pw_core_get_registry(core)
            self.registry = registry
            bd_pw_registry_add_listener(registry, registryListener, registryEvents, Unmanaged.passUnretained(self).toOpaque())
        }
    }

    /// Disconnects; the streams stop receiving (and carry silence if taken from).
    public func stop() {
        connection?.close {
            for stream in streams { stream.disconnect() }
            if let metadata { bd_pw_proxy_destroy(UnsafeMutableRawPointer(metadata)) }
            if let registry { bd_pw_proxy_destroy(UnsafeMutableRawPointer(registry)) }
        }
        (connection, core, registry, metadata) = (nil, nil, nil, nil)
        nodes = [:]
        (defaultSink, defaultSource) = (nil, nil)
    }

    // MARK: - On PipeWire's thread

    private func global(_ id: UInt32, _ type: String, _ props: UnsafePointer<spa_dict>?) {
        func property(_ key: String) -> String? { spa_dict_lookup(props, key).map { String(cString: $0) } }
        if type == String(cString: bd_pw_type_node()), let name = property("node.name"), let mediaClass = property("media.class") {
            nodes[id] = Node(serial: property("object.serial") ?? "\(id)", name: name, mediaClass: mediaClass,
                             application: property("application.name"))
            follow()
        } else if type == String(cString: bd_pw_type_metadata()), property("metadata.name") == "default", metadata == nil, let registry,
                  let metadata = bd_pw_registry_bind_metadata(registry, id) {
            self.metadata = metadata
            bd_pw_metadata_add_listener(metadata, metadataListener, metadataEvents, Unmanaged.passUnretained(self).toOpaque())
        }
    }

    private func globalRemoved(_ id: UInt32) {
        guard nodes.removeValue(forKey: id) != nil else { return }
        follow()
    }

    /// `default.audio.sink` and `default.audio.source` (values like `{"name":"alsa_output.pci-..."}`).
    private func metadataProperty(_ key: String?, _ value: String?) {
        let name = value.flatMap(Self.jsonName)
        switch key {
        case "default.audio.sink": defaultSink = name
        case "default.audio.source": defaultSource = name
        case nil: (defaultSink, defaultSource) = (nil, nil) // everything cleared
        default: return
        }
        follow()
    }

    /// Connects each stream to the node it should capture now (nothing: it carries silence).
    private func follow() {
        guard let core else { return }
        for stream in streams {
            let node = stream.capturesSink ? appNode(stream.target) : micNode(stream.target)
            stream.connect(core: core, to: node?.serial, monitor: node?.mediaClass == "Audio/Sink")
        }
    }

    /// A sink (its monitor), or an application's playback stream.
    private func appNode(_ target: AudioTarget) -> Node? {
        switch target {
        case .defaultDevice:
            return nodes.values.first { $0.name == defaultSink && $0.mediaClass == "Audio/Sink" }
        case .node(let name):
            let candidates = nodes.sorted { $0.key < $1.key }.map(\.value)
            return candidates.first { $0.name == name && ($0.mediaClass == "Audio/Sink" || $0.mediaClass == "Stream/Output/Audio") }
                ?? candidates.first { $0.application == name && $0.mediaClass == "Stream/Output/Audio" && !$0.name.hasPrefix("broadcastd-") }
        }
    }

    /// A source: never a sink's monitor, which WirePlumber offers as the default source when there is none.
    private func micNode(_ target: AudioTarget) -> Node? {
        let name: String?
        switch target {
        case .defaultDevice: name = defaultSource
        case .node(let node): name = node
        }
        return nodes.values.first { $0.name == name && $0.mediaClass.hasPrefix("Audio/Source") }
    }

    /// The `name` in a metadata value such as `{"name":"test_mic"}`; nil when there is none.
    static func jsonName(_ json: String) -> String? {
        var value = [CChar](repeating: 0, count: 1024)
        guard bd_spa_json_object_string(json, "name", &value, Int32(value.count)) == 0 else { return nil }
        let name = String(decoding: value.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }
}
