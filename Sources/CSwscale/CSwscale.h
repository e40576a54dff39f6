// libswscale (with libavutil, which it needs) alone, for the daemon's camera: converting a webcam's YUY2 into the
// capture's layout. Not CFFmpeg, which would link libavcodec and libavformat, and the encoders they load, into
// broadcastd (11 MB more resident).
#include <libswscale/swscale.h>
#include <libavutil/pixfmt.h>
