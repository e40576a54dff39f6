// libsrt (the GnuTLS flavour Debian's libavformat links, so that one libsrt is in the process), for the
// stream handler's SRT connections: it opens the socket itself, so that it can read the connection's
// statistics (round-trip time, loss, retransmissions, bandwidth), which libavformat does not expose.
#include <srt.h>
