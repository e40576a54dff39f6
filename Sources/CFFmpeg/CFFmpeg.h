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

// libavformat's hls muxer deletes old segments from an HTTP origin with DELETE, which its http protocol sends
// with an (empty) chunked body; nginx's WebDAV refuses a DELETE with a body (415) and so may other origins.
// cff_delete_without_body makes `context`'s DELETE requests go without one (chunked_post=0), keeping the
// io_open libavformat set in `opaque` (unused otherwise; the hls muxer hands both on to its inner muxer).
static inline int cff_io_open_delete_without_body(AVFormatContext *s, AVIOContext **pb, const char *url, int flags,
                                                  AVDictionary **options) {
    AVDictionaryEntry *method = options ? av_dict_get(*options, "method", NULL, 0) : NULL;
    if (method && strcmp(method->value, "DELETE") == 0) av_dict_set(options, "chunked_post", "0", 0);
    int (*original)(AVFormatContext *, AVIOContext **, const char *, int, AVDictionary **) =
        (int (*)(AVFormatContext *, AVIOContext **, const char *, int, AVDictionary **))s->opaque;
    return original(s, pb, url, flags, options);
}
static inline void cff_delete_without_body(AVFormatContext *context) {
    if (context->io_open == cff_io_open_delete_without_body) return;
    context->opaque = (void *)context->io_open;
    context->io_open = cff_io_open_delete_without_body;
}
