import BroadcastCapture
import CPipeWire
import Glibc

/// A connection to PipeWire with a thread of its own (`pw_thread_loop`): over `remote` (a socket the
/// portal opened, which the connection then owns) or to `$PIPEWIRE_REMOTE`, else `pipewire-0` in
/// `$PIPEWIRE_RUNTIME_DIR` or `$XDG_RUNTIME_DIR`. `setUp` runs with the loop locked
/// before the thread starts, to create what lives on it and keep what its callbacks need (the core, the
/// loop: the thread may call them before this init returns); `close` stops the thread first, so what it
/// created can then be destroyed from any thread.
final class PipeWireConnection {
    let loop: OpaquePointer
    private let context: OpaquePointer
    let core: OpaquePointer

    init(
        threadName: String, remote: Int32? = nil,
        setUp: (_ core: OpaquePointer, _ loop: OpaquePointer) throws(CaptureError) -> Void
    )
        throws(CaptureError)
    {
        PipeWireLibrary.initialize()
        func failure(_ reason: String) -> CaptureError {
            CaptureError(source: "pipewire", operation: "connect to PipeWire", reason: reason)
        }
        guard let loop = pw_thread_loop_new(threadName, nil) else {
            if let remote { Glibc.close(remote) }
            throw failure("pw_thread_loop_new failed")
        }
        // As pw-cat does: the realtime configuration, whose thread that moves the buffers in every cycle of the graph
        // runs at realtime priority when the system lets it (under load it ran late, and audio was lost); PipeWire 1.x
        // has it in its default configuration, and may no longer have the file.
        let realtime = bd_pw_properties_new()
        pw_properties_set(realtime, PW_KEY_CONFIG_NAME, "client-rt.conf")
        let events = pw_thread_loop_get_loop(loop)
        guard let context = pw_context_new(events, realtime, 0) ?? pw_context_new(events, nil, 0) else {
            if let remote { Glibc.close(remote) }
            pw_thread_loop_destroy(loop)
            throw failure("pw_context_new failed")
        }
        pw_thread_loop_lock(loop)
        guard
            let core = remote.map({ pw_context_connect_fd(context, $0, nil, 0) }) ?? pw_context_connect(context, nil, 0)
        else {
            let reason = String(cString: strerror(errno))
            pw_thread_loop_unlock(loop)
            pw_context_destroy(context)
            pw_thread_loop_destroy(loop)
            throw failure("\(reason) (is PipeWire running?)")
        }
        (self.loop, self.context, self.core) = (loop, context, core)
        do {
            try setUp(core, loop)
        } catch {
            pw_thread_loop_unlock(loop)
            close()
            throw error
        }
        pw_thread_loop_unlock(loop)
        guard pw_thread_loop_start(loop) >= 0 else {
            close()
            throw failure("cannot start PipeWire's thread")
        }
    }

    /// Stops the thread; `destroy` then lets go of what lives on the loop before the core and context go.
    func close(destroy: () -> Void = {}) {
        pw_thread_loop_stop(loop)
        destroy()
        pw_core_disconnect(core)
        pw_context_destroy(context)
        pw_thread_loop_destroy(loop)
    }
}

/// pw_init, once per process.
enum PipeWireLibrary {
    private static let initialized: Bool = {
        pw_init(nil, nil)
        return true
    }()

    static func initialize() { _ = initialized }
}
