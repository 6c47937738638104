/* watch.c -- what the agent watches on a tick besides its event sources:
 * preemption notices (a file that appears, a command that succeeds) and
 * workers that stopped beating (hung: stopped, deadlocked, stuck in a
 * collective).  See agent.h's preempt_notice_* and worker_stall_ms, and
 * docs/AGENT.md.
 *
 * One timerfd (EL__TAG_WATCH) ticks while the agent dispatches events
 * (HEALTHY, STOPPING, BACKOFF): every second, or a quarter of the stall
 * timeout when that is shorter (at least 50 ms).  A tick stats the notice
 * file, reaps/starts the notice command (posix_spawn, its own process
 * group, output to /dev/null, one at a time), tells workers of a notice,
 * and stats each live worker's heartbeat file.
 *
 * el__watch_hung is the one way a hung worker is reported and killed: for
 * a stall here, for an expired file timer in filetimer.c.
 *
 * Heartbeats are files, not pipes: ELRUN_HEARTBEAT_FILE=<worker dir>/
 * heartbeat, which the worker rewrites with its step (el_worker_heartbeat,
 * or `echo STEP > "$ELRUN_HEARTBEAT_FILE"` from any language).  A change of
 * its mtime is a beat; a worker that never wrote it is not watched.
 *
 * A worker is told of a notice only if it catches the signal (SigCgt in
 * /proc/PID/status): the default action of SIGUSR1 is to terminate, and a
 * worker that cannot checkpoint on a notice should keep training instead.
 * Workers of a later round, or that install their handler late, are told
 * on a later tick.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_impl.h"
#include "elrun/net.h"

extern char **environ;

#define CMD_MAX_MS 30000 /* a notice command running longer is killed */

struct beat {
    struct timespec mtime; /* of the heartbeat file when last seen        */
    long long seen_ns;     /* el_now_ns() when it last changed; 0 = never */
    int told;              /* this round's worker got the notice signal   */
};

struct el__watch {
    int tfd;
    int tick_ms;
    struct beat *b;              /* cfg.nproc */
    struct timespec round_start; /* CLOCK_REALTIME at el__watch_round     */
    pid_t cmd_pid; /* notice command running, or 0                */
    long long cmd_start_ns, cmd_last_ns;
    int cmd_warned;
    int notice;            /* a notice came                               */
    long long deadline_ns; /* when the agent leaves                       */
    int left;              /* the deadline's SIGTERM was returned         */
    char host[256];
};

#define say el__agent_event

/* Up to cap-1 bytes of path, NUL-terminated; the length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return n;
}

static int notice_sig(const struct el_agent *a)
{
    return a->cfg.preempt_signal > 0 ? a->cfg.preempt_signal : SIGUSR1;
}

static int notice_ms(const struct el_agent *a)
{
    return a->cfg.preempt_notice_ms > 0 ? a->cfg.preempt_notice_ms : 30000;
}

static int has_notice(const struct el_agent *a)
{
    return (a->cfg.preempt_notice_file && *a->cfg.preempt_notice_file) ||
           (a->cfg.preempt_notice_cmd && *a->cfg.preempt_notice_cmd);
}

int el__watch_open(struct el_agent *a)
{
    if (!has_notice(a) && a->cfg.worker_stall_ms <= 0)
        return 0;
    struct el__watch *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->b = calloc((size_t)(a->cfg.nproc > 0 ? a->cfg.nproc : 1), sizeof *w->b);
    w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (!w->b || w->tfd < 0) {
        int e = w->b ? -errno : -ENOMEM;
        if (w->tfd >= 0)
            close(w->tfd);
        free(w->b);
        free(w);
        return e;
    }
    w->tick_ms = 1000;
    if (a->cfg.worker_stall_ms > 0 && a->cfg.worker_stall_ms / 4 < 1000)
        w->tick_ms =
            a->cfg.worker_stall_ms / 4 < 50 ? 50 : a->cfg.worker_stall_ms / 4;
    struct itimerspec its = {
        .it_value = {w->tick_ms / 1000, (long)(w->tick_ms % 1000) * 1000000L},
        .it_interval = {w->tick_ms / 1000,
                        (long)(w->tick_ms % 1000) * 1000000L}};
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EL__TAG_WATCH};
    if (timerfd_settime(w->tfd, 0, &its, NULL) < 0 ||
        epoll_ctl(a->epfd, EPOLL_CTL_ADD, w->tfd, &ev) < 0) {
        int e = -errno;
        close(w->tfd);
        free(w->b);
        free(w);
        return e;
    }
    el_agent_fqdn(w->host, sizeof w->host);
    a->watch = w;
    return 0;
}

void el__watch_close(struct el_agent *a)
{
    struct el__watch *w = a->watch;
    if (!w)
        return;
    if (w->cmd_pid > 0) {
        kill(-w->cmd_pid, SIGKILL);
        waitpid(w->cmd_pid, NULL, 0);
    }
    close(w->tfd);
    free(w->b);
    free(w);
    a->watch = NULL;
}

void el__watch_round(struct el_agent *a)
{
    struct el__watch *w = a->watch;
    if (!w)
        return;
    memset(w->b, 0, (size_t)a->cfg.nproc * sizeof *w->b);
    /* Whole seconds back: a file system with coarse timestamps must not
     * hide a beat written in the round's first moments. */
    clock_gettime(CLOCK_REALTIME, &w->round_start);
    w->round_start.tv_sec -= 1;
}

int el__watch_preempted(const struct el_agent *a)
{
    return a->watch && a->watch->notice;
}

void el__watch_env(const struct el_agent *a, const struct el__worker *wk,
                   char *hb, size_t hbcap, char *sig, size_t sigcap)
{
    hb[0] = sig[0] = 0;
    if (a->cfg.worker_stall_ms > 0)
        snprintf(hb, hbcap, "%s/heartbeat", wk->dir);
    if (has_notice(a))
        snprintf(sig, sigcap, "%d", notice_sig(a));
}

int el__watch_reaped(struct el_agent *a, pid_t pid, int status)
{
    struct el__watch *w = a->watch;
    if (!w || pid != w->cmd_pid || pid <= 0)
        return 0;
    w->cmd_pid = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !w->notice) {
        w->notice = 1;
        w->deadline_ns = el_now_ns() + (long long)notice_ms(a) * 1000000LL;
        say(a, EL_AGENT_WARN,
            "preemption notice (--preempt-notice-cmd "
            "exited 0): this node leaves the job in %g s",
            notice_ms(a) / 1000.0);
    }
    return 1;
}

/* ---- the notice ---- */

/* The seconds written in the notice file, or -1. */
static double file_seconds(const char *path)
{
    char buf[64];
    if (read_small(path, buf, sizeof buf) <= 0)
        return -1;
    char *end;
    double s = strtod(buf, &end);
    while (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t')
        end++;
    return end != buf && *end == 0 && s >= 0 && s < 1e6 ? s : -1;
}

static void check_file(struct el_agent *a)
{
    struct el__watch *w = a->watch;
    struct stat st;
    const char *path = a->cfg.preempt_notice_file;
    if (w->notice || !path || !*path || stat(path, &st) < 0)
        return;
    double s = file_seconds(path);
    long long ms = s >= 0 ? (long long)(s * 1000) : notice_ms(a);
    w->notice = 1;
    w->deadline_ns = el_now_ns() + ms * 1000000LL;
    say(a, EL_AGENT_WARN,
        "preemption notice (%s appeared): this node "
        "leaves the job in %g s",
        path, (double)ms / 1000.0);
}

static void run_cmd(struct el_agent *a)
{
    struct el__watch *w = a->watch;
    const char *cmd = a->cfg.preempt_notice_cmd;
    long long now = el_now_ns();
    if (w->notice || !cmd || !*cmd)
        return;
    if (w->cmd_pid > 0) {
        if (now - w->cmd_start_ns > CMD_MAX_MS * 1000000LL) {
            if (!w->cmd_warned)
                say(a, EL_AGENT_WARN,
                    "--preempt-notice-cmd ran for more "
                    "than %d s; killed (it is run every second and must "
                    "answer at once)",
                    CMD_MAX_MS / 1000);
            w->cmd_warned = 1;
            kill(-w->cmd_pid, SIGKILL);
        }
        return;
    }
    if (now - w->cmd_last_ns < 1000000000LL)
        return;
    posix_spawnattr_t at;
    posix_spawn_file_actions_t fa;
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at,
                             POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, "/bin/sh", &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    w->cmd_last_ns = now;
    if (rc != 0) {
        if (!w->cmd_warned)
            say(a, EL_AGENT_WARN, "cannot run --preempt-notice-cmd: %s",
                strerror(rc));
        w->cmd_warned = 1;
        return;
    }
    w->cmd_pid = pid;
    w->cmd_start_ns = now;
}

/* 1 when process pid catches sig (a handler is installed). */
static int catches(pid_t pid, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    unsigned long long mask = 0;
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "SigCgt: %llx", &mask) == 1) {
            found = 1;
            break;
        }
    fclose(f);
    return found && sig >= 1 && sig <= 64 && (mask >> (sig - 1)) & 1;
}

static void tell_workers(struct el_agent *a)
{
    struct el__watch *w = a->watch;
    int sig = notice_sig(a);
    if (a->state != EL__GS_HEALTHY)
        return;
    for (int i = 0; i < a->cfg.nproc; i++) {
        struct el__worker *wk = &a->w[i];
        if (!wk->alive || w->b[i].told || !catches(wk->pid, sig))
            continue;
        w->b[i].told = 1;
        kill(wk->pid, sig);
        say(a, EL_AGENT_INFO,
            "preemption notice: sent signal %d (%s) to "
            "worker local_rank %d (rank %d, pid %d)",
            sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", wk->local_rank,
            wk->global_rank, (int)wk->pid);
    }
}

/* ---- hung workers ---- */

/* 1 when pid is stopped (state T or t: SIGSTOP, ^Z, a tracer). */
static int is_stopped(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return 0;
    const char *rp = strrchr(buf, ')');
    return rp && (rp[2] == 'T' || rp[2] == 't');
}

static int ts_after(const struct timespec *x, const struct timespec *y)
{
    return x->tv_sec != y->tv_sec ? x->tv_sec > y->tv_sec
                                  : x->tv_nsec > y->tv_nsec;
}

static void check_beats(struct el_agent *a)
{
    struct el__watch *w = a->watch;
    if (a->cfg.worker_stall_ms <= 0 || a->state != EL__GS_HEALTHY)
        return;
    long long now = el_now_ns();
    for (int i = 0; i < a->cfg.nproc; i++) {
        struct el__worker *wk = &a->w[i];
        struct beat *b = &w->b[i];
        char path[4200];
        struct stat st;
        if (!wk->alive || wk->failed)
            continue;
        snprintf(path, sizeof path, "%s/heartbeat", wk->dir);
        if (stat(path, &st) == 0 && !ts_after(&w->round_start, &st.st_mtim) &&
            (b->seen_ns == 0 || ts_after(&st.st_mtim, &b->mtime) ||
             ts_after(&b->mtime, &st.st_mtim))) {
            b->mtime = st.st_mtim;
            b->seen_ns = now;
            continue;
        }
        /* Peers of a hung worker wait for it in their collectives and stop
         * beating too: a stopped process is hung after the timeout, any
         * other after twice as long, so the one at fault is found (and
         * named) first; a deadlock of all is still found. */
        long long limit = (long long)a->cfg.worker_stall_ms * 1000000LL;
        if (b->seen_ns == 0 || now - b->seen_ns < limit)
            continue;
        if (now - b->seen_ns < 2 * limit && !is_stopped(wk->pid))
            continue;
        char step[32], why[200];
        read_small(path, step, sizeof step);
        step[strcspn(step, "\n")] = 0;
        if (!step[0])
            snprintf(step, sizeof step, "unknown");
        snprintf(why, sizeof why,
                 "no heartbeat for %.1f s (last step %s; "
                 "--worker-stall-timeout %g s)",
                 (double)(now - b->seen_ns) / 1e9, step,
                 a->cfg.worker_stall_ms / 1000.0);
        el__watch_hung(a, wk, -wk->pid, SIGKILL, why);
    }
}

void el__watch_hung(struct el_agent *a, struct el__worker *wk, pid_t target,
                    int sig, const char *why)
{
    char host[256], how[64] = "";
    if (a->watch)
        snprintf(host, sizeof host, "%s", a->watch->host);
    else
        el_agent_fqdn(host, sizeof host);
    if (sig != SIGKILL)
        snprintf(how, sizeof how, " with signal %d (%s)", sig,
                 sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    say(a, EL_AGENT_ERROR,
        "worker rank %d (local_rank %d, pid %d) on %s is hung: %s; "
        "killing it%s",
        wk->global_rank, wk->local_rank, (int)wk->pid, host, why, how);
    wk->failed = 1;
    wk->fail_time = (int64_t)time(NULL);
    wk->fail_ns = el_now_ns();
    kill(target, sig);
    if (sig != SIGKILL)
        kill(target, SIGCONT); /* a stopped process acts on it at once */
}

int el__watch_tick(struct el_agent *a)
{
    struct el__watch *w = a->watch;
    uint64_t x;
    if (!w || read(w->tfd, &x, sizeof x) < 0)
        return 0;
    check_file(a);
    run_cmd(a);
    if (w->notice) {
        tell_workers(a);
        if (!w->left && el_now_ns() >= w->deadline_ns) {
            w->left = 1;
            say(a, EL_AGENT_WARN,
                "preemption deadline: this node leaves "
                "the job now (as for SIGTERM)");
            return SIGTERM;
        }
    }
    check_beats(a);
    return 0;
}
