import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

/// A detached thread of its own for work that blocks (a D-Bus conversation, say), so the loop does not.
///
/// The thread starts with every signal blocked: a signal sent to the process (SIGTERM from systemd or a terminal)
/// goes to the thread that waits for it on a signalfd, never to a background thread whose default action would end
/// the process, even when the thread was started before the signals were taken over.
public enum BackgroundThread {
    public static func start(_ body: @escaping @Sendable () -> Void) throws(SystemError) {
        final class Box {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
        // A new thread inherits its creator's mask: block everything around the creation, then restore.
        var all = sigset_t()
        var previous = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_SETMASK, &all, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        let result = pthread_create(
            &thread, nil,
            { context in
                let box = Unmanaged<Box>.fromOpaque(context!).takeRetainedValue()
                box.body()
                return nil
            }, context)
        guard result == 0 else {
            Unmanaged<Box>.fromOpaque(context).release()
            throw SystemError("pthread_create", errno: result)
        }
        pthread_detach(thread)
    }
}
