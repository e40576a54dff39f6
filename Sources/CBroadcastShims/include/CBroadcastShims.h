// One-line adapters for what Swift cannot import from Glibc: the CMSG_* macros,
// memfd_create (not visible through Glibc's module map), the pidfd syscalls, and ordered access to a
// counter in shared memory (Swift's atomics live only in memory Swift allocated).
// No state lives here.
#pragma once
#include <stddef.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/timerfd.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <spawn.h>
#include <stdint.h>

extern char **environ;
static inline char **cbroadcast_environ(void) { return environ; }

static inline struct cmsghdr *cbroadcast_cmsg_firsthdr(struct msghdr *m) { return CMSG_FIRSTHDR(m); }
static inline struct cmsghdr *cbroadcast_cmsg_nxthdr(struct msghdr *m, struct cmsghdr *c) { return CMSG_NXTHDR(m, c); }
static inline unsigned char *cbroadcast_cmsg_data(struct cmsghdr *c) { return CMSG_DATA(c); }
static inline size_t cbroadcast_cmsg_space(size_t len) { return CMSG_SPACE(len); }
static inline size_t cbroadcast_cmsg_len(size_t len) { return CMSG_LEN(len); }

static inline int cbroadcast_accept4(int fd, int flags) { return (int)syscall(SYS_accept4, fd, NULL, NULL, flags); }
// SO_PEERCRED's struct ucred, which Glibc declares only with _GNU_SOURCE.
struct cbroadcast_ucred { pid_t pid; uid_t uid; gid_t gid; };
static inline int cbroadcast_peer_credentials(int fd, struct cbroadcast_ucred *out) {
    socklen_t length = sizeof *out;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, out, &length);
}
static inline int cbroadcast_memfd_create(const char *name, unsigned int flags) { return (int)syscall(SYS_memfd_create, name, flags); }
static inline int cbroadcast_pidfd_open(pid_t pid, unsigned int flags) { return (int)syscall(SYS_pidfd_open, pid, flags); }
static inline int cbroadcast_pidfd_send_signal(int pidfd, int sig) { return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0); }

// posix_spawn_file_actions_addclosefrom_np (glibc 2.34), declared only with _GNU_SOURCE: shims.c defines it.
int cbroadcast_spawn_add_closefrom(posix_spawn_file_actions_t *actions, int from);

// No real-time scheduling for the calling thread, the threads it starts afterwards and its children: RLIMIT_RTPRIO 0
// and CAP_SYS_NICE dropped from the thread's sets (root has it). 0, or -1 with errno. shims.c defines it
// (linux/capability.h).
int cbroadcast_refuse_realtime(void);

// A signal that interrupts blocking reads (no SA_RESTART) and is remembered: a signal handler
// can only touch a sig_atomic_t, which Swift cannot declare.
void cbroadcast_install_interrupt(int sig);
int cbroadcast_interrupted(void);

// memfd seals (linux/fcntl.h; Glibc's module map shows them only with _GNU_SOURCE).
#define CBROADCAST_F_ADD_SEALS 1033
#define CBROADCAST_F_GET_SEALS 1034
#define CBROADCAST_F_SEAL_SEAL 0x0001
#define CBROADCAST_F_SEAL_SHRINK 0x0002
#define CBROADCAST_F_SEAL_GROW 0x0004
#define CBROADCAST_F_SEAL_WRITE 0x0008
#define CBROADCAST_F_SEAL_FUTURE_WRITE 0x0010
static inline int cbroadcast_fcntl_int(int fd, int cmd, int arg) { return fcntl(fd, cmd, arg); }

#define CBROADCAST_MFD_CLOEXEC 0x0001U
#define CBROADCAST_MFD_ALLOW_SEALING 0x0002U
// Bytes sent on a socket that its peer has not read yet (SIOCOUTQ; ioctl is variadic).
static inline int cbroadcast_unread_output(int fd, int *out) { return ioctl(fd, SIOCOUTQ, out); }

// A counter in shared memory that guards bytes written beside it (a seqlock's sequence): the writer
// stores the counter and then writes the bytes (a release fence between); a reader copies the bytes and
// then loads the counter (an acquire fence between), so a reader that copied any of the new bytes sees
// the new counter.
static inline void cbroadcast_store_then_write(uint64_t *counter, uint64_t value) {
    __atomic_store_n(counter, value, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}
static inline uint64_t cbroadcast_load_after_read(const uint64_t *counter) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}
