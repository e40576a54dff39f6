// libpipewire for Swift: the headers, plus inline functions for what Swift cannot import from them
// (function-like and compound-literal macros, variadic functions).
#include <errno.h>
#include <stdio.h>
#include <pipewire/pipewire.h>
#include <spa/param/audio/format-utils.h>

static inline struct pw_properties *bd_pw_properties_new(void) {
    return pw_properties_new(NULL, NULL);
}

/// Connects `stream` for capture of interleaved audio: `format` an SPA_AUDIO_FORMAT_*, `channels` 1
/// (mono) or 2 (front left, front right); without `autoconnect` the session manager leaves it unlinked
/// (its caller links ports to it). Its `process` is called on PipeWire's realtime thread, in the cycle whose
/// buffer it takes. Returns pw_stream_connect's result.
static inline int bd_pw_stream_connect_audio_capture(struct pw_stream *stream, uint32_t format, uint32_t rate, uint32_t channels,
                                                     bool autoconnect) {
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
                             (autoconnect ? PW_STREAM_FLAG_AUTOCONNECT : 0) | PW_STREAM_FLAG_MAP_BUFFERS
                             | PW_STREAM_FLAG_RT_PROCESS, params, 1);
}

/// Connects `stream` for playback of interleaved float32 stereo at `rate` to the default sink, its `process`
/// called on PipeWire's realtime thread (the tests' beep player).
static inline int bd_pw_stream_connect_audio_playback(struct pw_stream *stream, uint32_t rate) {
    uint8_t buffer[1024];
    struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(buffer, sizeof(buffer));
    struct spa_audio_info_raw info = { .format = SPA_AUDIO_FORMAT_F32_LE, .rate = rate, .channels = 2 };
    info.position[0] = SPA_AUDIO_CHANNEL_FL;
    info.position[1] = SPA_AUDIO_CHANNEL_FR;
    const struct spa_pod *params[1] = { spa_format_audio_raw_build(&builder, SPA_PARAM_EnumFormat, &info) };
    return pw_stream_connect(stream, PW_DIRECTION_OUTPUT, PW_ID_ANY,
                             PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_MAP_BUFFERS | PW_STREAM_FLAG_RT_PROCESS,
                             params, 1);
}

static inline uint32_t bd_pw_version_stream_events(void) { return PW_VERSION_STREAM_EVENTS; }

#include <pipewire/extensions/metadata.h>

static inline uint32_t bd_pw_version_registry_events(void) { return PW_VERSION_REGISTRY_EVENTS; }
static inline uint32_t bd_pw_version_metadata_events(void) { return PW_VERSION_METADATA_EVENTS; }
static inline const char *bd_pw_type_node(void) { return PW_TYPE_INTERFACE_Node; }
static inline const char *bd_pw_type_metadata(void) { return PW_TYPE_INTERFACE_Metadata; }
static inline const char *bd_pw_type_port(void) { return PW_TYPE_INTERFACE_Port; }
static inline const char *bd_pw_type_client(void) { return PW_TYPE_INTERFACE_Client; }

/// Links output port `out_port` of node `out_node` to input port `in_port` of node `in_node`; the link
/// lasts as long as its proxy (or this client). NULL when it cannot be asked for.
static inline struct pw_proxy *bd_pw_core_link_ports(struct pw_core *core, uint32_t out_node, uint32_t out_port,
                                                     uint32_t in_node, uint32_t in_port) {
    char values[4][12];
    snprintf(values[0], sizeof(values[0]), "%u", out_node);
    snprintf(values[1], sizeof(values[1]), "%u", out_port);
    snprintf(values[2], sizeof(values[2]), "%u", in_node);
    snprintf(values[3], sizeof(values[3]), "%u", in_port);
    const struct spa_dict_item items[] = {
        SPA_DICT_ITEM_INIT(PW_KEY_LINK_OUTPUT_NODE, values[0]), SPA_DICT_ITEM_INIT(PW_KEY_LINK_OUTPUT_PORT, values[1]),
        SPA_DICT_ITEM_INIT(PW_KEY_LINK_INPUT_NODE, values[2]), SPA_DICT_ITEM_INIT(PW_KEY_LINK_INPUT_PORT, values[3]),
        SPA_DICT_ITEM_INIT(PW_KEY_OBJECT_LINGER, "false"),
    };
    const struct spa_dict dict = SPA_DICT_INIT_ARRAY(items);
    return (struct pw_proxy *)pw_core_create_object(core, "link-factory", PW_TYPE_INTERFACE_Link, PW_VERSION_LINK, &dict, 0);
}

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

#include <spa/param/video/format-utils.h>
#include <spa/buffer/meta.h>

/// Connects `stream` for capture of raw video in shared memory (MemFd or MemPtr, mapped) in one of `formats`
/// (SPA video formats, at most 16); any size, any rate up to 240 fps, preferring `width`x`height` at `fps`.
/// With `ranked` (a camera) each format is a param of its own, in the order given: PipeWire takes the first of ours
/// the node can give, so the order is our preference. Else (a screen) one param offers them all as a choice.
static inline int bd_pw_stream_connect_video_capture(struct pw_stream *stream, uint32_t width, uint32_t height, uint32_t fps,
                                                     const uint32_t *formats, uint32_t n_formats, bool ranked) {
    uint8_t buffer[4096];
    struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(buffer, sizeof(buffer));
    struct spa_rectangle size = SPA_RECTANGLE(width, height), least = SPA_RECTANGLE(1, 1), most = SPA_RECTANGLE(16384, 16384);
    struct spa_fraction rate = SPA_FRACTION(fps, 1), slowest = SPA_FRACTION(0, 1), fastest = SPA_FRACTION(240, 1);
    const struct spa_pod *params[16];
    uint32_t n_params = 0;
    if (n_formats == 0 || n_formats > 16) return -EINVAL;
    for (uint32_t i = 0; i < (ranked ? n_formats : 1); i++) {
        struct spa_pod_frame frame, choice;
        spa_pod_builder_push_object(&builder, &frame, SPA_TYPE_OBJECT_Format, SPA_PARAM_EnumFormat);
        spa_pod_builder_add(&builder, SPA_FORMAT_mediaType, SPA_POD_Id(SPA_MEDIA_TYPE_video),
            SPA_FORMAT_mediaSubtype, SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw), 0);
        spa_pod_builder_prop(&builder, SPA_FORMAT_VIDEO_format, 0);
        if (ranked) {
            spa_pod_builder_id(&builder, formats[i]);
        } else {
            // An enumeration's first value is its default, which the list then repeats.
            spa_pod_builder_push_choice(&builder, &choice, SPA_CHOICE_Enum, 0);
            spa_pod_builder_id(&builder, formats[0]);
            for (uint32_t j = 0; j < n_formats; j++) spa_pod_builder_id(&builder, formats[j]);
            spa_pod_builder_pop(&builder, &choice);
        }
        spa_pod_builder_add(&builder, SPA_FORMAT_VIDEO_size, SPA_POD_CHOICE_RANGE_Rectangle(&size, &least, &most),
            SPA_FORMAT_VIDEO_framerate, SPA_POD_CHOICE_RANGE_Fraction(&rate, &slowest, &fastest), 0);
        params[n_params++] = spa_pod_builder_pop(&builder, &frame);
    }
    return pw_stream_connect(stream, PW_DIRECTION_INPUT, PW_ID_ANY,
                             PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_MAP_BUFFERS, params, n_params);
}

/// The size of a negotiated raw video format, its SPA video format, and whether it says it is of full range (0-255);
/// -1 when `param` is not one.
static inline int bd_pw_parse_video_format(const struct spa_pod *param, uint32_t *width, uint32_t *height,
                                           uint32_t *format, bool *full_range) {
    uint32_t media_type, media_subtype;
    if (param == NULL || spa_format_parse(param, &media_type, &media_subtype) < 0) return -1;
    if (media_type != SPA_MEDIA_TYPE_video || media_subtype != SPA_MEDIA_SUBTYPE_raw) return -1;
    struct spa_video_info_raw info = { 0 };
    if (spa_format_video_raw_parse(param, &info) < 0) return -1;
    *width = info.size.width;
    *height = info.size.height;
    *format = info.format;
    *full_range = info.color_range == SPA_VIDEO_COLOR_RANGE_0_255;
    return 0;
}

/// The room for a `w`x`h` cursor image (4 bytes a pixel) in a buffer's cursor metadata.
#define BD_CURSOR_META_SIZE(w, h) ((int)(sizeof(struct spa_meta_cursor) + sizeof(struct spa_meta_bitmap) + (w) * (h) * 4))

/// Asks for buffers in shared memory (not DMA-BUF) with a header (timestamp, corrupted flag), and the
/// crop region and damage (up to 16 rectangles) when the producer offers them; with `cursor`, the
/// pointer's metadata too (its image up to 1024x1024; mutter offers 384x384, the PipeWire examples 64x64).
static inline int bd_pw_stream_request_video_buffers(struct pw_stream *stream, bool cursor) {
    uint8_t buffer[1280];
    struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(buffer, sizeof(buffer));
    const struct spa_pod *params[5];
    // Two or three buffers: each frame is converted and given back at once. Each buffer is a whole
    // frame mapped into broadcastd (8.3 MB at 1080p), counted against its memory budget.
    params[0] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamBuffers, SPA_PARAM_Buffers,
        SPA_PARAM_BUFFERS_buffers, SPA_POD_CHOICE_RANGE_Int(2, 2, 3),
        SPA_PARAM_BUFFERS_dataType, SPA_POD_CHOICE_FLAGS_Int((1 << SPA_DATA_MemFd) | (1 << SPA_DATA_MemPtr)));
    params[1] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Header),
        SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_header)));
    params[2] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_VideoCrop),
        SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_region)));
    params[3] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_VideoDamage),
        SPA_PARAM_META_size, SPA_POD_CHOICE_RANGE_Int(sizeof(struct spa_meta_region) * 16,
                                                      sizeof(struct spa_meta_region), sizeof(struct spa_meta_region) * 16));
    params[4] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Cursor),
        SPA_PARAM_META_size, SPA_POD_CHOICE_RANGE_Int(BD_CURSOR_META_SIZE(64, 64), BD_CURSOR_META_SIZE(1, 1),
                                                      BD_CURSOR_META_SIZE(1024, 1024)));
    return pw_stream_update_params(stream, params, cursor ? 5 : 4);
}

/// The buffer's header, when it has one: its flags (SPA_META_HEADER_FLAG_CORRUPTED) and pts.
static inline int bd_pw_buffer_header(struct spa_buffer *buffer, uint32_t *flags, int64_t *pts) {
    struct spa_meta_header *header = spa_buffer_find_meta_data(buffer, SPA_META_Header, sizeof(*header));
    if (header == NULL) return -1;
    *flags = header->flags;
    *pts = header->pts;
    return 0;
}

/// The buffer's crop region, when it has one that is set (a size above zero); -1 otherwise.
static inline int bd_pw_buffer_crop(struct spa_buffer *buffer, struct spa_region *crop) {
    struct spa_meta_region *region = spa_buffer_find_meta_data(buffer, SPA_META_VideoCrop, sizeof(*region));
    if (region == NULL || !spa_meta_region_is_valid(region)) return -1;
    *crop = region->region;
    return 0;
}

/// The buffer's damage rectangles (up to `capacity`, until the first empty one); -1 when it has no damage meta.
static inline int bd_pw_buffer_damage(struct spa_buffer *buffer, struct spa_region *regions, int capacity) {
    struct spa_meta *meta = spa_buffer_find_meta(buffer, SPA_META_VideoDamage);
    if (meta == NULL) return -1;
    int count = 0;
    struct spa_meta_region *region;
    spa_meta_for_each(region, meta) {
        if (!spa_meta_region_is_valid(region) || count == capacity) break;
        regions[count++] = region->region;
    }
    return count;
}

/// The pointer as a buffer's cursor metadata describes it.
struct bd_pw_cursor {
    /// The hotspot's position in the buffer.
    int32_t x, y;
    /// The image's SPA_VIDEO_FORMAT_*, when the buffer brings a new one; 0 otherwise.
    uint32_t format;
    /// The new image: 0x0 (and no pixels) when the pointer has none, i.e. is invisible.
    uint32_t width, height;
    int32_t stride;
    int32_t hotspot_x, hotspot_y;
    const void *pixels;
};

/// Reads the buffer's cursor metadata: -1 when it has none, 0 when the pointer is not over the stream
/// (or hidden: the cursor id is 0), 1 when `cursor` says where it is and, with a format, what it looks like.
/// An image that does not fit in the metadata is no new image.
static inline int bd_pw_buffer_cursor(struct spa_buffer *buffer, struct bd_pw_cursor *cursor) {
    struct spa_meta *meta = spa_buffer_find_meta(buffer, SPA_META_Cursor);
    if (meta == NULL || meta->size < sizeof(struct spa_meta_cursor)) return -1;
    const struct spa_meta_cursor *c = meta->data;
    if (!spa_meta_cursor_is_valid(c)) return 0;
    *cursor = (struct bd_pw_cursor){ .x = c->position.x, .y = c->position.y };
    if (c->bitmap_offset < sizeof(*c) || (uint64_t)c->bitmap_offset + sizeof(struct spa_meta_bitmap) > meta->size) return 1;
    const struct spa_meta_bitmap *b = SPA_PTROFF(c, c->bitmap_offset, const struct spa_meta_bitmap);
    if (!spa_meta_bitmap_is_valid(b)) return 1;
    uint64_t room = meta->size - c->bitmap_offset, width = b->size.width, height = b->size.height;
    if (b->offset == 0 || width == 0 || height == 0) {
        cursor->format = b->format;
        return 1;
    }
    if (b->offset < sizeof(*b) || b->stride < 0 || (uint64_t)b->stride < width * 4 || width > 1024 || height > 1024
        || b->offset + (uint64_t)b->stride * (height - 1) + width * 4 > room) return 1;
    cursor->format = b->format;
    cursor->width = b->size.width;
    cursor->height = b->size.height;
    cursor->stride = b->stride;
    cursor->hotspot_x = c->hotspot.x;
    cursor->hotspot_y = c->hotspot.y;
    cursor->pixels = SPA_PTROFF(b, b->offset, const void);
    return 1;
}

// The producer's side, for the tests' video source (pipewire-test-video-source).

/// Connects `stream` as a driving video source of `width`x`height` at `fps` in SPA video format `format`.
static inline int bd_pw_stream_connect_video_source(struct pw_stream *stream, uint32_t width, uint32_t height, uint32_t fps,
                                                    uint32_t format) {
    uint8_t buffer[1024];
    struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(buffer, sizeof(buffer));
    struct spa_rectangle size = SPA_RECTANGLE(width, height);
    struct spa_fraction rate = SPA_FRACTION(fps, 1);
    const struct spa_pod *params[1];
    params[0] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_Format, SPA_PARAM_EnumFormat,
        SPA_FORMAT_mediaType, SPA_POD_Id(SPA_MEDIA_TYPE_video),
        SPA_FORMAT_mediaSubtype, SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw),
        SPA_FORMAT_VIDEO_format, SPA_POD_Id(format),
        SPA_FORMAT_VIDEO_size, SPA_POD_Rectangle(&size),
        SPA_FORMAT_VIDEO_framerate, SPA_POD_Fraction(&rate));
    return pw_stream_connect(stream, PW_DIRECTION_OUTPUT, PW_ID_ANY,
                             PW_STREAM_FLAG_DRIVER | PW_STREAM_FLAG_MAP_BUFFERS, params, 1);
}

/// The source's buffers: MemFd, `size` bytes (rows of `stride`), with a header, a crop region, 16 damage
/// rectangles and, with `cursor`, the pointer (an image up to 64x64). Two by default, up to 32: what
/// xdg-desktop-portal-wlr offers (its SHM path), so that the consumer's own wish decides the count.
static inline int bd_pw_stream_offer_video_buffers(struct pw_stream *stream, int32_t stride, int32_t size, bool cursor) {
    uint8_t buffer[1280];
    struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(buffer, sizeof(buffer));
    const struct spa_pod *params[5];
    params[0] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamBuffers, SPA_PARAM_Buffers,
        SPA_PARAM_BUFFERS_buffers, SPA_POD_CHOICE_RANGE_Int(2, 2, 32),
        SPA_PARAM_BUFFERS_blocks, SPA_POD_Int(1),
        SPA_PARAM_BUFFERS_size, SPA_POD_Int(size),
        SPA_PARAM_BUFFERS_stride, SPA_POD_Int(stride),
        SPA_PARAM_BUFFERS_dataType, SPA_POD_CHOICE_FLAGS_Int(1 << SPA_DATA_MemFd));
    params[1] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Header), SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_header)));
    params[2] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_VideoCrop), SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_region)));
    params[3] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_VideoDamage),
        SPA_PARAM_META_size, SPA_POD_CHOICE_RANGE_Int(sizeof(struct spa_meta_region) * 16,
                                                      sizeof(struct spa_meta_region), sizeof(struct spa_meta_region) * 16));
    params[4] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Cursor), SPA_PARAM_META_size, SPA_POD_Int(BD_CURSOR_META_SIZE(64, 64)));
    return pw_stream_update_params(stream, params, cursor ? 5 : 4);
}

/// Sets the buffer's crop region (a zero size: none) and its damage (`count` rectangles, then an empty one).
static inline void bd_pw_buffer_set_video_meta(struct spa_buffer *buffer, struct spa_region crop,
                                               const struct spa_region *damage, int count) {
    struct spa_meta_region *region = spa_buffer_find_meta_data(buffer, SPA_META_VideoCrop, sizeof(*region));
    if (region != NULL) region->region = crop;
    struct spa_meta *meta = spa_buffer_find_meta(buffer, SPA_META_VideoDamage);
    if (meta == NULL) return;
    int i = 0;
    spa_meta_for_each(region, meta) {
        region->region = i < count ? damage[i] : SPA_REGION(0, 0, 0, 0);
        if (i++ == count) break;
    }
}

/// Sets the buffer's cursor metadata: the pointer hidden (`visible` false), or its hotspot at `x`,`y`
/// with, when `pixels` is given, a new `width`x`height` RGBA image (premultiplied, as mutter sends it).
static inline void bd_pw_buffer_set_cursor(struct spa_buffer *buffer, bool visible, int32_t x, int32_t y,
                                           const uint32_t *pixels, uint32_t width, uint32_t height, int32_t hotspot_x, int32_t hotspot_y) {
    struct spa_meta *meta = spa_buffer_find_meta(buffer, SPA_META_Cursor);
    if (meta == NULL || (int)meta->size < BD_CURSOR_META_SIZE(width, height)) return;
    struct spa_meta_cursor *c = meta->data;
    c->id = visible ? 1 : 0;
    c->position = SPA_POINT(x, y);
    c->bitmap_offset = 0;
    if (!visible || pixels == NULL) return;
    c->hotspot = SPA_POINT(hotspot_x, hotspot_y);
    c->bitmap_offset = sizeof(*c);
    struct spa_meta_bitmap *b = SPA_PTROFF(c, c->bitmap_offset, struct spa_meta_bitmap);
    b->format = SPA_VIDEO_FORMAT_RGBA;
    b->size = SPA_RECTANGLE(width, height);
    b->stride = width * 4;
    b->offset = sizeof(*b);
    memcpy(SPA_PTROFF(b, b->offset, void), pixels, width * height * 4);
}

static inline uint32_t bd_spa_meta_header_flag_corrupted(void) { return SPA_META_HEADER_FLAG_CORRUPTED; }

/// Sets the buffer's header: its presentation time (CLOCK_MONOTONIC ns, as compositors stamp their frames) and sequence.
static inline void bd_pw_buffer_set_header(struct spa_buffer *buffer, int64_t pts, uint64_t seq) {
    struct spa_meta_header *header = spa_buffer_find_meta_data(buffer, SPA_META_Header, sizeof(*header));
    if (header == NULL) return;
    header->flags = 0;
    header->offset = 0;
    header->pts = pts;
    header->dts_offset = 0;
    header->seq = seq;
}

#include <spa/utils/json.h>

/// The string value of `key` in the SPA-JSON object `json` (how PipeWire's metadata values are written,
/// e.g. `{"name":"alsa_output.pci-0000_00_1f.3"}`), parsed by PipeWire's own reader; -1 when absent.
static inline int bd_spa_json_object_string(const char *json, const char *key, char *value, int size) {
    struct spa_json it[2];
    char found[256];
    const char *skipped;
    spa_json_init(&it[0], json, strlen(json));
    if (spa_json_enter_object(&it[0], &it[1]) <= 0) return -1;
    while (spa_json_get_string(&it[1], found, sizeof(found)) > 0) {
        if (strcmp(found, key) == 0) return spa_json_get_string(&it[1], value, size) > 0 ? 0 : -1;
        if (spa_json_next(&it[1], &skipped) <= 0) break;
    }
    return -1;
}

/// A timer on `loop` (pw_loop_add_timer and pw_loop_update_timer are macros) firing every `interval` ns.
static inline struct spa_source *bd_pw_loop_add_periodic_timer(struct pw_loop *loop, spa_source_timer_func_t func, void *data, uint64_t interval) {
    struct spa_source *timer = pw_loop_add_timer(loop, func, data);
    struct timespec first = { 0, 1 }, every = { (time_t)(interval / SPA_NSEC_PER_SEC), (long)(interval % SPA_NSEC_PER_SEC) };
    if (timer != NULL) pw_loop_update_timer(loop, timer, &first, &every, false);
    return timer;
}

// Listing cameras: the video sources' nodes and the formats they offer (their EnumFormat params).
#include <spa/debug/types.h>
#include <spa/param/video/type-info.h>

static inline uint32_t bd_pw_version_core_events(void) { return PW_VERSION_CORE_EVENTS; }
static inline uint32_t bd_pw_version_node_events(void) { return PW_VERSION_NODE_EVENTS; }

static inline int bd_pw_core_add_listener(struct pw_core *core, struct spa_hook *hook,
                                          const struct pw_core_events *events, void *data) {
    return pw_core_add_listener(core, hook, events, data);
}

/// A round trip: the core's `done` event with the returned seq comes once the server has handled what was sent.
static inline int bd_pw_core_sync(struct pw_core *core) { return pw_core_sync(core, PW_ID_CORE, 0); }

static inline struct pw_node *bd_pw_registry_bind_node(struct pw_registry *registry, uint32_t id) {
    return (struct pw_node *)pw_registry_bind(registry, id, PW_TYPE_INTERFACE_Node, PW_VERSION_NODE, 0);
}

static inline int bd_pw_node_add_listener(struct pw_node *node, struct spa_hook *hook,
                                          const struct pw_node_events *events, void *data) {
    return pw_node_add_listener(node, hook, events, data);
}

/// Asks for every EnumFormat param of `node`; they come as `param` events.
static inline int bd_pw_node_enum_formats(struct pw_node *node) {
    return pw_node_enum_params(node, 0, SPA_PARAM_EnumFormat, 0, UINT32_MAX, NULL);
}

/// One video format a node offers: the pixel formats' short names ("YUY2", "NV12"; "MJPG", "H264" for
/// compressed video: one name; a raw param may offer several, a choice), its size (the preferred one of a range) and
/// its frame rates (each of an enumeration, the lowest and highest of a range, or the one fixed).
struct bd_camera_format {
    char names[8][16];
    uint32_t n_names;
    uint32_t width, height;
    uint32_t n_rates;
    struct spa_fraction rates[16];
};

/// The values of property `key` of `object`: a pointer to the first, their count and the choice they are of.
static inline const void *bd_spa_prop_values(const struct spa_pod *object, uint32_t key, uint32_t type,
                                             uint32_t *count, uint32_t *choice) {
    const struct spa_pod_prop *prop = spa_pod_find_prop(object, NULL, key);
    if (prop == NULL) return NULL;
    const struct spa_pod *values = spa_pod_get_values(&prop->value, count, choice);
    if (values == NULL || SPA_POD_TYPE(values) != type || *count == 0) return NULL;
    return SPA_POD_BODY_CONST(values);
}

/// Reads an EnumFormat param of a video node into `out`; -1 when it is not video or has no size.
static inline int bd_pw_parse_camera_format(const struct spa_pod *param, struct bd_camera_format *out) {
    uint32_t media_type, media_subtype, count, choice;
    memset(out, 0, sizeof(*out));
    if (param == NULL || !spa_pod_is_object(param)) return -1;
    if (spa_format_parse(param, &media_type, &media_subtype) < 0) return -1;
    if (media_type != SPA_MEDIA_TYPE_video) return -1;
    const char *name = NULL;
    if (media_subtype == SPA_MEDIA_SUBTYPE_raw) {
        const uint32_t *format = bd_spa_prop_values(param, SPA_FORMAT_VIDEO_format, SPA_TYPE_Id, &count, &choice);
        // A choice's first value is its default, which its alternatives repeat.
        uint32_t first = format == NULL || choice == SPA_CHOICE_None || count == 1 ? 0 : 1;
        for (uint32_t i = first; format != NULL && i < count && out->n_names < 8; i++) {
            const char *named = spa_debug_type_find_short_name(spa_type_video_format, format[i]);
            snprintf(out->names[out->n_names++], sizeof(out->names[0]), "%s", named != NULL ? named : "unknown");
        }
    } else if (media_subtype == SPA_MEDIA_SUBTYPE_mjpg) {
        name = "MJPG";
    } else if (media_subtype == SPA_MEDIA_SUBTYPE_h264) {
        name = "H264";
    }
    if (out->n_names == 0)
        snprintf(out->names[out->n_names++], sizeof(out->names[0]), "%s", name != NULL ? name : "unknown");
    const struct spa_rectangle *size =
        bd_spa_prop_values(param, SPA_FORMAT_VIDEO_size, SPA_TYPE_Rectangle, &count, &choice);
    if (size == NULL) return -1;
    out->width = size[0].width;
    out->height = size[0].height;
    const struct spa_fraction *rates =
        bd_spa_prop_values(param, SPA_FORMAT_VIDEO_framerate, SPA_TYPE_Fraction, &count, &choice);
    if (rates == NULL) return 0;
    // An enumeration's and a range's first value is the preferred one, which the others repeat.
    uint32_t first = (choice == SPA_CHOICE_None || count == 1) ? 0 : 1;
    for (uint32_t i = first; i < count && out->n_rates < 16; i++) out->rates[out->n_rates++] = rates[i];
    return 0;
}
