import CFFmpeg

#if canImport(Glibc)
    import Glibc
#endif

/// The error of every libav call in this module: the operation that failed and why, in words a
/// user can act on (libav's own message, and what it means for the file when that is known).
public struct MediaError: Error, CustomStringConvertible, Sendable {
    public var operation: String
    public var reason: String
    /// The libav error code, when a libav call failed (negative errno or an AVERROR tag).
    public var code: Int32?

    public init(_ operation: String, _ reason: String, code: Int32? = nil) {
        self.operation = operation
        self.reason = reason
        self.code = code
    }

    /// From a failed libav call's return value.
    public init(_ operation: String, code: Int32) {
        self.init(operation, Self.message(code), code: code)
    }

    public var description: String { "\(operation): \(reason)" }

    static func message(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        av_strerror(code, &buffer, buffer.count)
        let text = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        switch -code {
        case ENOSPC, EDQUOT: return "\(text) (the disk is full: free some space or record elsewhere)"
        case EFBIG: return "\(text) (the file system does not take files this large)"
        case EACCES, EPERM: return "\(text) (no permission to write there)"
        default: return text
        }
    }
}

@inline(__always)
package func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(MediaError) {
    if result < 0 { throw MediaError(operation(), code: result) }
}
