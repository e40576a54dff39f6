// libavformat, libavcodec (driving libx264, libopus and the native AAC encoder), libswscale and
// libavutil, for the handlers that encode. The shims below stand for macros Swift cannot import.
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/channel_layout.h>
#include <libavutil/display.h>
#include <libavutil/error.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>

static inline int cff_error_eof(void) { return AVERROR_EOF; }
static inline int cff_error_eagain(void) { return AVERROR(EAGAIN); }
static inline int64_t cff_nopts(void) { return AV_NOPTS_VALUE; }
