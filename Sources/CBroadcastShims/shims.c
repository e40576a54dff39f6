#define _GNU_SOURCE
#include "CBroadcastShims.h"
#include <signal.h>
#include <string.h>

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
