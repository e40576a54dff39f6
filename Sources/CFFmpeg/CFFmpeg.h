// libavformat, libavcodec (driving libx264, libopus and the native AAC encoder), libswscale and
// libavutil, for the handlers that encode. The shims below stand for macros Swift cannot import.
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/channel_layout.h>
#include <libavutil/display.h>
#include <libavutil/error.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
#include <string.h>

static inline int cff_error_eof(void) { return AVERROR_EOF; }
static inline int cff_error_eagain(void) { return AVERROR(EAGAIN); }
static inline int64_t cff_nopts(void) { return AV_NOPTS_VALUE; }
// FFmpeg 5.1 still reads the deprecated channel fields beside ch_layout; set as avcodec_parameters_from_context does.
static inline void cff_set_old_channel_fields(AVCodecParameters *p) {
#if FF_API_OLD_CHANNEL_LAYOUT
    p->channels = p->ch_layout.nb_channels;
    p->channel_layout = p->ch_layout.order == AV_CHANNEL_ORDER_NATIVE ? p->ch_layout.u.mask : 0;
#endif
}

// The outputs a muxer opens itself (the hls muxer's playlist, init file and segments, to files or to an HTTP origin),
// watched through its io_open and io_close2, which it hands on to its inner muxer together with `opaque` (the watch):
// - each output opened for writing is shown to `opening` first, which may refuse it with an AVERROR;
// - each closed is told to `closed` with the AVIOContext's error (a full disk), or 0 when every write went
//   through, before the muxer goes on (and renames a temporary NAME.tmp over NAME);
// - with `store` (an HTTP origin), outputs are written into memory instead of through libavformat's protocols (whose
//   http throws the server's answers away), at most `memory_limit` bytes each, and handed to `store` when closed
//   (or to `closed` when a write failed), whose AVERROR or 0 the muxer gets before it goes on (to the playlist);
//   a DELETE (of an old segment) opens nothing and is handed to `remove`.
typedef struct CFFMemoryOutput {
    uint8_t *data;
    int64_t size, capacity, limit;
} CFFMemoryOutput;

typedef struct CFFOutputWatch {
    int (*io_open)(AVFormatContext *, AVIOContext **, const char *, int, AVDictionary **);
    int (*io_close2)(AVFormatContext *, AVIOContext *);
    void *owner;
    int (*opening)(void *owner, const char *url);
    void (*closed)(void *owner, const char *url, int error);
    int64_t memory_limit;
    int (*store)(void *owner, const char *url, const uint8_t *data, int64_t size);
    void (*remove)(void *owner, const char *url);
    struct { AVIOContext *pb; CFFMemoryOutput *memory; char url[1024]; } open[8];
} CFFOutputWatch;

static inline int cff_memory_write(void *opaque, uint8_t *bytes, int size) {
    CFFMemoryOutput *memory = (CFFMemoryOutput *)opaque;
    if (size <= 0) return 0;
    if (memory->size + size > memory->limit) return AVERROR(EFBIG);
    if (memory->size + size > memory->capacity) {
        int64_t capacity = memory->capacity * 2 > memory->size + size ? memory->capacity * 2 : memory->size + size;
        if (capacity > memory->limit) capacity = memory->limit;
        uint8_t *data = (uint8_t *)av_realloc(memory->data, (size_t)capacity);
        if (!data) return AVERROR(ENOMEM);
        memory->data = data;
        memory->capacity = capacity;
    }
    memcpy(memory->data + memory->size, bytes, (size_t)size);
    memory->size += size;
    return size;
}

// An AVIOContext writing into `memory` (which it owns; freed by cff_memory_close).
static inline AVIOContext *cff_memory_open(int64_t limit) {
    CFFMemoryOutput *memory = (CFFMemoryOutput *)av_mallocz(sizeof(CFFMemoryOutput));
    unsigned char *buffer = (unsigned char *)av_malloc(32768);
    AVIOContext *pb = memory && buffer
        ? avio_alloc_context(buffer, 32768, 1, memory, NULL, cff_memory_write, NULL) : NULL;
    if (!pb) {
        av_free(buffer);
        av_free(memory);
        return NULL;
    }
    memory->limit = limit;
    return pb;
}

static inline void cff_memory_close(AVIOContext *pb) {
    CFFMemoryOutput *memory = (CFFMemoryOutput *)pb->opaque;
    av_free(memory->data);
    av_free(memory);
    av_freep(&pb->buffer);
    avio_context_free(&pb);
}

static inline int cff_watch_io_open(AVFormatContext *s, AVIOContext **pb, const char *url, int flags,
                                    AVDictionary **options) {
    CFFOutputWatch *watch = (CFFOutputWatch *)s->opaque;
    AVDictionaryEntry *method = options ? av_dict_get(*options, "method", NULL, 0) : NULL;
    int deleting = method && strcmp(method->value, "DELETE") == 0;
    if (deleting && watch->store) {
        // Nothing to write: the muxer closes no output for it.
        if (watch->remove) watch->remove(watch->owner, url);
        *pb = NULL;
        return 0;
    }
    if (!deleting && (flags & AVIO_FLAG_WRITE) && watch->opening) {
        int refused = watch->opening(watch->owner, url);
        if (refused < 0) return refused;
    }
    int slot = -1;
    for (int i = 0; i < 8 && slot < 0; i++) if (!watch->open[i].pb) slot = i;
    int memory = !deleting && (flags & AVIO_FLAG_WRITE) && watch->store;
    if (memory && (slot < 0 || strlen(url) >= sizeof(watch->open[0].url))) return AVERROR(ENOMEM);
    int result = 0;
    if (memory) {
        *pb = cff_memory_open(watch->memory_limit);
        if (!*pb) return AVERROR(ENOMEM);
    } else {
        result = watch->io_open(s, pb, url, flags, options);
    }
    if (result >= 0 && !deleting && slot >= 0 && strlen(url) < sizeof(watch->open[0].url)) {
        watch->open[slot].pb = *pb;
        watch->open[slot].memory = memory ? (CFFMemoryOutput *)(*pb)->opaque : NULL;
        strcpy(watch->open[slot].url, url);
    }
    return result;
}

static inline int cff_watch_io_close2(AVFormatContext *s, AVIOContext *pb) {
    CFFOutputWatch *watch = (CFFOutputWatch *)s->opaque;
    int slot = -1;
    for (int i = 0; i < 8 && pb; i++) if (watch->open[i].pb == pb) slot = i;
    if (pb) avio_flush(pb);
    int error = pb ? pb->error : 0;
    if (slot >= 0 && watch->open[slot].memory) {
        CFFMemoryOutput *memory = watch->open[slot].memory;
        if (error < 0 && watch->closed) watch->closed(watch->owner, watch->open[slot].url, error);
        if (error >= 0) error = watch->store(watch->owner, watch->open[slot].url, memory->data, memory->size);
        watch->open[slot].pb = NULL;
        cff_memory_close(pb);
        return error < 0 ? error : 0;
    }
    if (slot >= 0 && watch->closed) watch->closed(watch->owner, watch->open[slot].url, error < 0 ? error : 0);
    if (slot >= 0) watch->open[slot].pb = NULL;
    if (watch->io_close2) return watch->io_close2(s, pb);
    avio_close(pb);
    return error;
}

static inline void cff_watch_outputs(AVFormatContext *context, CFFOutputWatch *watch) {
    if (context->io_open == cff_watch_io_open) return;
    watch->io_open = context->io_open;
    watch->io_close2 = context->io_close2;
    context->opaque = watch;
    context->io_open = cff_watch_io_open;
    context->io_close2 = cff_watch_io_close2;
}
