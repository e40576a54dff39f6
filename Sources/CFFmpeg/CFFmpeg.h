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

// The outputs a muxer opens itself (the hls muxer's playlist, init file and segments, to files or by PUT), watched
// through its io_open and io_close2, which it hands on to its inner muxer together with `opaque` (the watch):
// - each output opened for writing is shown to `opening` first, which may refuse it with an AVERROR;
// - each closed is told to `closed` with the AVIOContext's error (a full disk), or 0 when every write went
//   through, before the muxer goes on (and renames a temporary NAME.tmp over NAME);
// - with `delete_without_body`, DELETE requests (of old segments, from an HTTP origin) go without a body:
//   libavformat's http sends an empty chunked one, which nginx's WebDAV and other origins refuse (415).
typedef struct CFFOutputWatch {
    int (*io_open)(AVFormatContext *, AVIOContext **, const char *, int, AVDictionary **);
    int (*io_close2)(AVFormatContext *, AVIOContext *);
    int delete_without_body;
    void *owner;
    int (*opening)(void *owner, const char *url);
    void (*closed)(void *owner, const char *url, int error);
    struct { AVIOContext *pb; char url[1024]; } open[8];
} CFFOutputWatch;

static inline int cff_watch_io_open(AVFormatContext *s, AVIOContext **pb, const char *url, int flags,
                                    AVDictionary **options) {
    CFFOutputWatch *watch = (CFFOutputWatch *)s->opaque;
    AVDictionaryEntry *method = options ? av_dict_get(*options, "method", NULL, 0) : NULL;
    int deleting = method && strcmp(method->value, "DELETE") == 0;
    if (deleting && watch->delete_without_body) av_dict_set(options, "chunked_post", "0", 0);
    if (!deleting && (flags & AVIO_FLAG_WRITE) && watch->opening) {
        int refused = watch->opening(watch->owner, url);
        if (refused < 0) return refused;
    }
    int result = watch->io_open(s, pb, url, flags, options);
    if (result >= 0 && !deleting && strlen(url) < sizeof(watch->open[0].url)) {
        for (int i = 0; i < 8; i++) {
            if (watch->open[i].pb) continue;
            watch->open[i].pb = *pb;
            strcpy(watch->open[i].url, url);
            break;
        }
    }
    return result;
}

static inline int cff_watch_io_close2(AVFormatContext *s, AVIOContext *pb) {
    CFFOutputWatch *watch = (CFFOutputWatch *)s->opaque;
    int slot = -1;
    for (int i = 0; i < 8 && pb; i++) if (watch->open[i].pb == pb) slot = i;
    if (pb) avio_flush(pb);
    int error = pb ? pb->error : 0;
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
