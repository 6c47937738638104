/* health.c -- what a worker tells its agent about its health, outside the
 * store: a heartbeat (ELRUN_HEARTBEAT_FILE, watched by the agent's
 * --worker-stall-timeout) and the preemption notice it gets from the agent
 * (the signal in ELRUN_PREEMPT_SIGNAL, --preempt-notice-*).  See
 * include/elrun/worker.h and docs/AGENT.md.
 *
 * No context is needed (a worker may beat before el_worker_open, or
 * without it); the heartbeat's fd is opened once and kept.  Not
 * thread-safe: beat from one thread (the training loop).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elrun/worker.h"

static int hb_fd = -1;
static int hb_off; /* 1: no file to beat into */
static volatile sig_atomic_t preempted;

int el_worker_heartbeat(int64_t step)
{
    if (hb_off)
        return -ENOENT;
    if (hb_fd < 0) {
        const char *p = getenv("ELRUN_HEARTBEAT_FILE");
        if (!p || !*p) {
            hb_off = 1;
            return -ENOENT;
        }
        hb_fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (hb_fd < 0)
            return -errno;
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%" PRId64 "\n", step);
    /* Same length or longer every time (steps grow), so no truncate is
     * needed; the write's mtime change is the beat. */
    if (pwrite(hb_fd, buf, (size_t)n, 0) < 0)
        return -errno;
    return 0;
}

static void on_notice(int sig)
{
    (void)sig;
    preempted = 1;
}

int el_worker_watch_preemption(void)
{
    const char *v = getenv("ELRUN_PREEMPT_SIGNAL");
    char *end;
    long sig = v && *v ? strtol(v, &end, 10) : 0;
    if (sig <= 0 || sig >= NSIG || *end)
        return 0;
    struct sigaction sa = {.sa_handler = on_notice};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction((int)sig, &sa, NULL) < 0)
        return -errno;
    return (int)sig;
}

int el_worker_preempted(void)
{
    return preempted;
}
