// libpipewire for Swift: the headers, plus inline functions for what Swift cannot import from them
// (function-like and compound-literal macros, variadic functions).
#include <pipewire/pipewire.h>
#include <spa/param/audio/format-utils.h>

static inline struct pw_properties *bd_pw_properties_new(void) {
    return pw_properties_new(NULL, NULL);
}

/// Connects `stream` for capture of interleaved audio: `format` an SPA_AUDIO_FORMAT_*, `channels` 1
/// (mono) or 2 (front left, front right). Returns pw_stream_connect's result.
static inline int bd_pw_stream_connect_audio_capture(struct pw_stream *stream, uint32_t format, uint32_t rate, uint32_t channels) {
    uint8_t buffer[1024];
    struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(buffer, sizeof(buffer));
    struct spa_audio_info_raw info = { .format = format, .rate = rate, .channels = channels };
    if (channels == 2) {
        info.position[0] = SPA_AUDIO_CHANNEL_FL;
        info.position[1] = SPA_AUDIO_CHANNEL_FR;
    } else {
        info.position[0] = SPA_AUDIO_CHANNEL_MONO;
    }
    const struct spa_pod *params[1] = { spa_format_audio_raw_build(&builder, SPA_PARAM_EnumFormat, &info) };
    return pw_stream_connect(stream, PW_DIRECTION_INPUT, PW_ID_ANY,
                             PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_MAP_BUFFERS, params, 1);
}

static inline uint32_t bd_pw_version_stream_events(void) { return PW_VERSION_STREAM_EVENTS; }

#include <pipewire/extensions/metadata.h>

static inline uint32_t bd_pw_version_registry_events(void) { return PW_VERSION_REGISTRY_EVENTS; }
static inline uint32_t bd_pw_version_metadata_events(void) { return PW_VERSION_METADATA_EVENTS; }
static inline const char *bd_pw_type_node(void) { return PW_TYPE_INTERFACE_Node; }
static inline const char *bd_pw_type_metadata(void) { return PW_TYPE_INTERFACE_Metadata; }

static inline struct pw_registry *bd_pw_core_get_registry(struct pw_core *core) {
    return pw_core_get_registry(core, PW_VERSION_REGISTRY, 0);
}

static inline int bd_pw_registry_add_listener(struct pw_registry *registry, struct spa_hook *hook,
                                              const struct pw_registry_events *events, void *data) {
    return pw_registry_add_listener(registry, hook, events, data);
}

static inline struct pw_metadata *bd_pw_registry_bind_metadata(struct pw_registry *registry, uint32_t id) {
    return (struct pw_metadata *)pw_registry_bind(registry, id, PW_TYPE_INTERFACE_Metadata, PW_VERSION_METADATA, 0);
}

static inline int bd_pw_metadata_add_listener(struct pw_metadata *metadata, struct spa_hook *hook,
                                              const struct pw_metadata_events *events, void *data) {
    return pw_metadata_add_listener(metadata, hook, events, data);
}

static inline void bd_pw_proxy_destroy(void *proxy) { pw_proxy_destroy((struct pw_proxy *)proxy); }
