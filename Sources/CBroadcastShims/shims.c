#define _GNU_SOURCE
#include "CBroadcastShims.h"
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <linux/capability.h>

static volatile sig_atomic_t interrupted_flag;

static void on_interrupt(int sig) { (void)sig; interrupted_flag = 1; }

void cbroadcast_install_interrupt(int sig) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(sig, &action, NULL);
}

int cbroadcast_interrupted(void) { return interrupted_flag; }

int cbroadcast_spawn_add_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int cbroadcast_refuse_realtime(void) {
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_RTPRIO, &none) != 0) return -1;
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &header, data) != 0) return -1;
    for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++) {
        __u32 bit = CAP_TO_INDEX(CAP_SYS_NICE) == i ? CAP_TO_MASK(CAP_SYS_NICE) : 0;
        data[i].effective &= ~bit;
        data[i].permitted &= ~bit;
        data[i].inheritable &= ~bit;
    }
    return (int)syscall(SYS_capset, &header, data);
}
