// GStreamer for the stream handler's WebRTC (WHIP) destinations: webrtcbin (gst-plugins-bad), appsrc, the SDP and
// RTCP parsers. Only the stream handler links it. g_object_set/get, g_signal_connect and g_signal_emit_by_name are
// variadic or macros, which Swift cannot call, and so are GST_BUFFER_PTS, G_VALUE_HOLDS and the GType macros: the
// shims below are their typed forms, nothing more.
#define GST_USE_UNSTABLE_API 1
#include <gst/gst.h>
#include <gst/app/gstappsrc.h>
#include <gst/rtp/gstrtcpbuffer.h>
#include <gst/sdp/sdp.h>
#include <gst/webrtc/webrtc.h>

static inline void cgst_set_string(gpointer object, const char *name, const char *value) {
    g_object_set(object, name, value, NULL);
}
static inline void cgst_set_int(gpointer object, const char *name, gint value) {
    g_object_set(object, name, value, NULL);
}
static inline void cgst_set_uint(gpointer object, const char *name, guint value) {
    g_object_set(object, name, value, NULL);
}
static inline void cgst_set_uint64(gpointer object, const char *name, guint64 value) {
    g_object_set(object, name, value, NULL);
}
static inline void cgst_set_boolean(gpointer object, const char *name, gboolean value) {
    g_object_set(object, name, value, NULL);
}
/// An enum (or int) property.
static inline gint cgst_get_int(gpointer object, const char *name) {
    gint value = 0;
    g_object_get(object, name, &value, NULL);
    return value;
}
static inline guint64 cgst_get_uint64(gpointer object, const char *name) {
    guint64 value = 0;
    g_object_get(object, name, &value, NULL);
    return value;
}
/// An object property, with a reference the caller drops (g_object_unref / gst_object_unref).
static inline gpointer cgst_get_object(gpointer object, const char *name) {
    gpointer value = NULL;
    g_object_get(object, name, &value, NULL);
    return value;
}
static inline gulong cgst_connect(gpointer instance, const char *signal, GCallback callback, gpointer data) {
    return g_signal_connect(instance, signal, callback, data);
}

/// webrtcbin's action signals.
static inline void cgst_webrtc_create(GstElement *webrtc, gboolean offer, GstPromise *promise) {
    g_signal_emit_by_name(webrtc, offer ? "create-offer" : "create-answer", NULL, promise);
}
static inline void cgst_webrtc_set_description(GstElement *webrtc, gboolean local,
                                               GstWebRTCSessionDescription *description, GstPromise *promise) {
    g_signal_emit_by_name(webrtc, local ? "set-local-description" : "set-remote-description", description, promise);
}
static inline void cgst_webrtc_get_stats(GstElement *webrtc, GstPromise *promise) {
    g_signal_emit_by_name(webrtc, "get-stats", NULL, promise);
}
/// The transceiver of m-line `index`, with a reference the caller drops.
static inline GstWebRTCRTPTransceiver *cgst_webrtc_transceiver(GstElement *webrtc, gint index) {
    GstWebRTCRTPTransceiver *transceiver = NULL;
    g_signal_emit_by_name(webrtc, "get-transceiver", index, &transceiver);
    return transceiver;
}
static inline gboolean cgst_webrtc_add_turn_server(GstElement *webrtc, const char *uri) {
    gboolean added = FALSE;
    g_signal_emit_by_name(webrtc, "add-turn-server", uri, &added);
    return added;
}
/// rtpbin's RTPSession of session `id` (webrtcbin bundles everything into session 0), with a reference.
static inline GObject *cgst_rtpbin_session(GstElement *rtpbin, guint id) {
    GObject *session = NULL;
    g_signal_emit_by_name(rtpbin, "get-internal-session", id, &session);
    return session;
}
/// webrtcbin (1.22) puts a clocksync with sync=TRUE before each stream it sends, to hold every packet back until its
/// timestamp. Ours carry their media time on a timeline the first packet of either stream set to now: holding them to
/// it adds latency (as much as the other stream's first packet was ahead) and a sleep and wake-up per packet. This
/// turns it off as webrtcbin adds it.
static inline gboolean cgst_is_clocksync(GstElement *element) {
    GstElementFactory *factory = gst_element_get_factory(element);
    return factory && g_strcmp0(GST_OBJECT_NAME(factory), "clocksync") == 0;
}
static inline void cgst_clocksync_off(GstBin *bin, GstElement *element, gpointer data) {
    if (cgst_is_clocksync(element)) g_object_set(element, "sync", FALSE, NULL);
}
static inline void cgst_webrtc_send_unsynced(GstElement *webrtc) {
    g_signal_connect(webrtc, "element-added", G_CALLBACK(cgst_clocksync_off), NULL);
}
/// The clocksync elements in `bin` and the bins within it; `waiting`: how many of them wait for each buffer's time.
static inline guint cgst_clocksyncs(GstElement *bin, guint *waiting) {
    guint count = 0;
    *waiting = 0;
    GstIterator *iterator = gst_bin_iterate_recurse(GST_BIN(bin));
    GValue item = G_VALUE_INIT;
    while (gst_iterator_next(iterator, &item) == GST_ITERATOR_OK) {
        GstElement *element = g_value_get_object(&item);
        if (cgst_is_clocksync(element)) {
            gboolean sync = FALSE;
            g_object_get(element, "sync", &sync, NULL);
            count += 1;
            *waiting += sync ? 1 : 0;
        }
        g_value_reset(&item);
    }
    g_value_unset(&item);
    gst_iterator_free(iterator);
    return count;
}
/// The session description in a promise's reply (`offer`), a copy the caller frees; NULL when it has none.
static inline GstWebRTCSessionDescription *cgst_reply_description(const GstStructure *reply, const char *field) {
    GstWebRTCSessionDescription *description = NULL;
    if (!reply || !gst_structure_get(reply, field, GST_TYPE_WEBRTC_SESSION_DESCRIPTION, &description, NULL)) {
        return NULL;
    }
    return description;
}
/// The error in a promise's reply, as webrtcbin puts it there; NULL when it has none.
static inline char *cgst_reply_error(const GstStructure *reply) {
    GError *error = NULL;
    if (!reply || !gst_structure_get(reply, "error", G_TYPE_ERROR, &error, NULL) || !error) return NULL;
    char *message = g_strdup(error->message);
    g_error_free(error);
    return message;
}
/// The structure a field of a structure holds (get-stats' reply holds one per statistic), or NULL.
static inline const GstStructure *cgst_value_structure(const GValue *value) {
    return G_VALUE_HOLDS(value, GST_TYPE_STRUCTURE) ? gst_value_get_structure(value) : NULL;
}
/// The element's running time now (its clock less its base time), or 0 before it runs.
static inline GstClockTime cgst_running_time(GstElement *element) {
    GstClock *clock = gst_element_get_clock(element);
    if (!clock) return 0;
    GstClockTime now = gst_clock_get_time(clock);
    gst_object_unref(clock);
    GstClockTime base = gst_element_get_base_time(element);
    return now > base ? now - base : 0;
}
/// A buffer holding a copy of `size` bytes, stamped `pts`; a delta unit unless it is a keyframe.
static inline GstBuffer *cgst_buffer(const void *data, gsize size, GstClockTime pts, gboolean keyframe) {
    GstBuffer *buffer = gst_buffer_new_memdup(data, size);
    GST_BUFFER_PTS(buffer) = pts;
    if (!keyframe) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT);
    return buffer;
}
