import CBroadcastShims

#if canImport(Glibc)
    import Glibc
#endif

/// A detached thread of its own for work that blocks (a D-Bus conversation, say), so the loop does not.
public enum BackgroundThread {
    public static func start(_ body: @escaping @Sendable () -> Void) throws(SystemError) {
        final class Box {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
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
