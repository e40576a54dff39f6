import CBroadcastShims

/// A 64-bit counter in memory shared with another process, guarding bytes written beside it as a seqlock's
/// sequence does: `storeBeforeWriting` is stored before the bytes it guards are written, `loadAfterReading` loaded
/// after they were read, so that a reader which copied any byte written after a store sees that store's value (or a
/// later one). The counter is kept in the platform's byte order: both processes run on this machine.
public struct SharedCounter {
    private let pointer: UnsafeMutablePointer<UInt64>

    /// The counter at `pointer`, 8-byte aligned.
    public init(_ pointer: UnsafeMutableRawPointer) {
        precondition(Int(bitPattern: pointer) % 8 == 0, "a shared counter must be 8-byte aligned")
        self.pointer = pointer.assumingMemoryBound(to: UInt64.self)
    }

    /// Stores `value`; what is written after this call is ordered after it.
    public func storeBeforeWriting(_ value: UInt64) { cbroadcast_store_then_write(pointer, value) }

    /// Loads the value; what was read before this call is ordered before it.
    public func loadAfterReading() -> UInt64 { cbroadcast_load_after_read(pointer) }
}
