import CGStreamer

/// GStreamer, started once in the process that sends WebRTC (the stream handler; never broadcastd).
enum GStreamer {
    /// The elements a WHIP destination needs, and the Debian package that has each.
    static let elements = [
        ("webrtcbin", "gstreamer1.0-plugins-bad"), ("nicesrc", "gstreamer1.0-nice"),
        ("dtlssrtpenc", "gstreamer1.0-plugins-bad"), ("rtph264pay", "gstreamer1.0-plugins-good"),
        ("rtpopuspay", "gstreamer1.0-plugins-good"), ("appsrc", "gstreamer1.0-plugins-base"),
    ]

    private static let started: Result<Void, WebRTCError> = {
        var error: UnsafeMutablePointer<GError>?
        guard gst_init_check(nil, nil, &error) != 0 else {
            return .failure(WebRTCError("start GStreamer", message(error)))
        }
        let missing = elements.filter { name, _ in
            guard let factory = gst_element_factory_find(name) else { return true }
            gst_object_unref(UnsafeMutableRawPointer(factory))
            return false
        }
        guard missing.isEmpty else {
            let names = missing.map(\.0).joined(separator: ", ")
            let packages = Set(missing.map(\.1)).sorted().joined(separator: " ")
            return .failure(WebRTCError("start GStreamer", "it has no \(names): install \(packages)", final: true))
        }
        return .success(())
    }()

    static func start() throws(WebRTCError) {
        if case .failure(let error) = started { throw error }
    }

    /// A GError's message, and frees it.
    static func message(_ error: UnsafeMutablePointer<GError>?) -> String {
        guard let error else { return "unknown error" }
        defer { g_error_free(error) }
        return error.pointee.message.map { String(cString: $0) } ?? "unknown error"
    }

    /// A string GLib allocated, and frees it.
    static func take(_ text: UnsafeMutablePointer<gchar>?) -> String? {
        guard let text else { return nil }
        defer { g_free(text) }
        return String(cString: text)
    }
}
