/* filetimer.c -- torch's file timer server (TORCHELASTIC_ENABLE_FILE_TIMER=1
 * in the agent's environment), the counterpart of
 * torch.distributed.elastic.timer.FileTimerClient, so that scripts using
 * `timer.expires(after=...)` run unchanged (protocol of torch 1.13's
 * file_based_local_timer.py, which Debian ships; 2.x's is the same).
 *
 * The pipe: a FIFO at $TORCHELASTIC_TIMER_FILE, or <run dir>/watchdog_timer
 * when that is unset (torch: /tmp/watchdog_timer_<uuid4>); the path is given
 * to the workers in TORCHELASTIC_TIMER_FILE.  A file already there is
 * replaced (as torch does); the FIFO is removed when the agent closes.  The
 * agent holds it open read-write, so a client's non-blocking open always
 * finds a reader and the agent never sees a hang-up.  Each client opens it,
 * writes one JSON line (at most PIPE_BUF bytes, so writes of several
 * workers never interleave) and closes it:
 *   {"version": 1, "pid": P, "scope_id": S, "expiration_time": T,
 *    "signal": N}
 * T is time.time() seconds; a negative T releases (pid, S); otherwise the
 * timer (pid, S) is set (or moved).  When one expires, the worker that pid
 * is (or descends from) is reported hung and killed exactly as a stalled
 * one (watch.c's el__watch_hung): N is sent to pid (torch's default is
 * SIGKILL), and the group restarts as for a crash.  N <= 0 means "do not
 * kill" (torch: logged, not reaped).  Every timer of that pid is dropped
 * then, as torch does.
 *
 * No thread and no polling: the FIFO and a CLOCK_REALTIME timerfd armed at
 * the earliest expiration (absolute, the clients' clock) sit in the agent's
 * epoll set (EL__TAG_FTIMER, +1).  A request that is not valid JSON of that
 * shape, or names a process that is no worker of this agent, is ignored:
 * the first of each kind is logged (one line), later ones only counted.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_impl.h"
#include "elrun/err.h"

#define LINE_MAX_BYTES 4096 /* PIPE_BUF: torch's client refuses longer */
#define MAX_TIMERS 4096     /* per agent; more are refused (logged once) */

struct timer {
    pid_t pid;
    char *scope;
    double expires; /* time.time() seconds */
    int sig;
};

struct el__ftimer {
    int fifo, clock;
    char path[4200];
    char line[LINE_MAX_BYTES + 1];
    size_t len;
    int skipping; /* the current line is too long: drop up to '\n' */
    struct timer *t;
    int n, cap;
    long long bad, strangers, full; /* ignored requests, by kind */
};

#define say el__agent_event

int el__ftimer_parse(const char *line, size_t len, struct el__ftimer_req *r,
                     char *err, size_t errlen)
{
    json_error_t je;
    json_t *o = json_loadb(line, len, 0, &je);
    int rc = EL_EFORMAT;
    if (!o) {
        snprintf(err, errlen, "not JSON (%s)", je.text);
        return rc;
    }
    json_t *pid = json_object_get(o, "pid");
    json_t *scope = json_object_get(o, "scope_id");
    json_t *exp = json_object_get(o, "expiration_time");
    json_t *sig = json_object_get(o, "signal");
    if (!json_is_object(o))
        snprintf(err, errlen, "not a JSON object");
    else if (!json_is_integer(pid) || json_integer_value(pid) <= 0 ||
             json_integer_value(pid) > INT32_MAX)
        snprintf(err, errlen, "\"pid\" is not a process id");
    else if (!json_is_string(scope))
        snprintf(err, errlen, "\"scope_id\" is not a string");
    else if (json_string_length(scope) >= sizeof r->scope)
        snprintf(err, errlen, "\"scope_id\" is longer than %zu bytes",
                 sizeof r->scope - 1);
    else if (!json_is_number(exp) || !isfinite(json_number_value(exp)))
        snprintf(err, errlen, "\"expiration_time\" is not a number");
    else if (!json_is_integer(sig) || json_integer_value(sig) > 64 ||
             json_integer_value(sig) < INT32_MIN)
        snprintf(err, errlen, "\"signal\" is not a signal number");
    else {
        r->pid = (pid_t)json_integer_value(pid);
        size_t n = json_string_length(scope);
        memcpy(r->scope, json_string_value(scope), n);
        r->scope[n] = 0;
        r->expires = json_number_value(exp);
        r->sig = (int)json_integer_value(sig);
        rc = 0;
    }
    json_decref(o);
    return rc;
}

/* ---- open / close ---- */

int el__ftimer_enabled(void)
{
    const char *e = getenv("TORCHELASTIC_ENABLE_FILE_TIMER");
    return e && strcmp(e, "1") == 0;
}

int el__ftimer_open(struct el_agent *a, char *err, size_t errlen)
{
    if (!el__ftimer_enabled())
        return 0;
    struct el__ftimer *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    f->fifo = f->clock = -1;
    const char *p = getenv("TORCHELASTIC_TIMER_FILE");
    if (p && *p)
        snprintf(f->path, sizeof f->path, "%s", p);
    else
        snprintf(f->path, sizeof f->path, "%s/watchdog_timer", a->run_dir);
    int rc = 0;
    const char *what = "create";
    struct stat st;
    if (lstat(f->path, &st) == 0 && unlink(f->path) < 0)
        rc = -errno, what = "replace";
    else if (mkfifo(f->path, 0600) < 0)
        rc = -errno;
    else if ((f->fifo = open(f->path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0)
        rc = -errno, what = "open";
    else if ((f->clock = timerfd_create(CLOCK_REALTIME,
                                        TFD_NONBLOCK | TFD_CLOEXEC)) < 0)
        rc = -errno, what = "make a clock for";
    if (rc == 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EL__TAG_FTIMER};
        if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, f->fifo, &ev) < 0)
            rc = -errno, what = "watch";
        ev.data.u64 = EL__TAG_FTIMER + 1;
        if (rc == 0 && epoll_ctl(a->epfd, EPOLL_CTL_ADD, f->clock, &ev) < 0)
            rc = -errno, what = "watch";
    }
    if (rc) {
        snprintf(err, errlen,
                 "TORCHELASTIC_ENABLE_FILE_TIMER=1: cannot %s the timer "
                 "pipe %s: %s (set TORCHELASTIC_TIMER_FILE to a path in a "
                 "writable local directory)",
                 what, f->path, strerror(-rc));
        a->ftimer = f;
        el__ftimer_close(a);
        return rc;
    }
    a->ftimer = f;
    say(a, EL_AGENT_INFO, "Starting a FileTimerServer with %s ...", f->path);
    return 0;
}

void el__ftimer_close(struct el_agent *a)
{
    struct el__ftimer *f = a->ftimer;
    if (!f)
        return;
    if (f->fifo >= 0) {
        close(f->fifo);
        unlink(f->path);
    }
    if (f->clock >= 0)
        close(f->clock);
    for (int i = 0; i < f->n; i++)
        free(f->t[i].scope);
    free(f->t);
    free(f);
    a->ftimer = NULL;
}

const char *el__ftimer_path(const struct el_agent *a)
{
    if (a->ftimer)
        return a->ftimer->path;
    const char *p = getenv("TORCHELASTIC_TIMER_FILE");
    return p ? p : "";
}

/* ---- the timers ---- */

static void drop(struct el__ftimer *f, int i)
{
    free(f->t[i].scope);
    f->t[i] = f->t[--f->n];
}

/* Arm the clock at the earliest expiration, or disarm it. */
static void arm(struct el__ftimer *f)
{
    struct itimerspec its = {0};
    if (f->n > 0) {
        double min = f->t[0].expires;
        for (int i = 1; i < f->n; i++)
            if (f->t[i].expires < min)
                min = f->t[i].expires;
        if (min < 1e-9)
            min = 1e-9; /* 0 would disarm; the past fires at once */
        if (min > 4e9)
            min = 4e9;
        its.it_value.tv_sec = (time_t)min;
        its.it_value.tv_nsec = (long)((min - (double)(time_t)min) * 1e9);
    }
    timerfd_settime(f->clock, TFD_TIMER_ABSTIME, &its, NULL);
}

void el__ftimer_round(struct el_agent *a)
{
    struct el__ftimer *f = a->ftimer;
    char buf[8192];
    if (!f)
        return;
    /* What the last round's workers wrote is theirs: gone with them. */
    while (read(f->fifo, buf, sizeof buf) > 0)
        ;
    f->len = 0;
    f->skipping = 0;
    while (f->n > 0)
        drop(f, f->n - 1);
    arm(f);
}

/* The worker that pid is, or descends from (its /proc ancestry); -1. */
static int worker_of(const struct el_agent *a, pid_t pid)
{
    for (int depth = 0; pid > 1 && depth < 64; depth++) {
        for (int i = 0; i < a->cfg.nproc; i++)
            if (a->w[i].alive && a->w[i].pid == pid)
                return i;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -1;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        buf[n > 0 ? n : 0] = 0;
        const char *rp = strrchr(buf, ')');
        int ppid;
        if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1)
            return -1;
        pid = ppid;
    }
    return -1;
}

static void request(struct el_agent *a, const char *line, size_t len)
{
    struct el__ftimer *f = a->ftimer;
    struct el__ftimer_req r;
    char why[256];
    if (el__ftimer_parse(line, len, &r, why, sizeof why) != 0) {
        if (f->bad++ == 0)
            say(a, EL_AGENT_WARN,
                "file timer: ignoring a malformed request on %s: %s: "
                "\"%.200s\" (later ones are ignored without a line)",
                f->path, why, line);
        return;
    }
    int i;
    for (i = 0; i < f->n; i++)
        if (f->t[i].pid == r.pid && strcmp(f->t[i].scope, r.scope) == 0)
            break;
    if (r.expires < 0) { /* release */
        if (i < f->n)
            drop(f, i);
        return;
    }
    if (a->state != EL__GS_HEALTHY || worker_of(a, r.pid) < 0) {
        if (a->state == EL__GS_HEALTHY && f->strangers++ == 0)
            say(a, EL_AGENT_WARN,
                "file timer: ignoring a timer of pid %d, which is not a "
                "worker of this agent (nor a child of one)",
                (int)r.pid);
        return;
    }
    if (i == f->n) {
        if (f->n == MAX_TIMERS) {
            if (f->full++ == 0)
                say(a, EL_AGENT_WARN,
                    "file timer: %d timers are set; ignoring more (does "
                    "the script release them?)",
                    MAX_TIMERS);
            return;
        }
        if (f->n == f->cap) {
            int cap = f->cap ? 2 * f->cap : 16;
            struct timer *t = realloc(f->t, (size_t)cap * sizeof *t);
            if (!t)
                return;
            f->t = t;
            f->cap = cap;
        }
        /* It goes into log lines: no control characters. */
        for (char *c = r.scope; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
        f->t[i].scope = strdup(r.scope);
        if (!f->t[i].scope)
            return;
        f->t[i].pid = r.pid;
        f->n++;
    }
    f->t[i].expires = r.expires;
    f->t[i].sig = r.sig;
}

static void read_requests(struct el_agent *a)
{
    struct el__ftimer *f = a->ftimer;
    char buf[8192];
    ssize_t n;
    while ((n = read(f->fifo, buf, sizeof buf)) > 0) {
        for (ssize_t k = 0; k < n; k++) {
            char c = buf[k];
            if (c == '\n') {
                if (!f->skipping && f->len > 0) {
                    f->line[f->len] = 0;
                    request(a, f->line, f->len);
                } else if (f->skipping && f->bad++ == 0) {
                    say(a, EL_AGENT_WARN,
                        "file timer: ignoring a request of more than %d "
                        "bytes on %s (later ones are ignored without a "
                        "line)",
                        LINE_MAX_BYTES, f->path);
                }
                f->len = 0;
                f->skipping = 0;
            } else if (f->len < LINE_MAX_BYTES) {
                f->line[f->len++] = c;
            } else {
                f->skipping = 1;
            }
        }
    }
}

/* Python's repr of a list of str, near enough: ['a', 'b']. */
static void scope_list(const struct el__ftimer *f, pid_t pid, char *buf,
                       size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    len += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < f->n && len + 8 < cap; i++)
        if (f->t[i].pid == pid)
            len += (size_t)snprintf(buf + len, cap - len, "%s'%s'",
                                    len > 1 ? ", " : "", f->t[i].scope);
    if (len + 2 < cap)
        snprintf(buf + len, cap - len, "]");
}

/* Timer pick (-1: none with a signal) of pid, a process of worker wk,
 * expired: torchrun's records, and the worker reported hung and killed. */
static void reap(struct el_agent *a, struct el__worker *wk, pid_t pid, int pick,
                 double now)
{
    struct el__ftimer *f = a->ftimer;
    char scopes[1024], why[1400];
    scope_list(f, pid, scopes, sizeof scopes);
    say(a, EL_AGENT_INFO, "Reaping worker_pid=[%d]. Expired timers: %s",
        (int)pid, scopes);
    if (pick < 0) {
        say(a, EL_AGENT_INFO,
            "No signal specified with worker=[%d]. Do not reap it.", (int)pid);
        return;
    }
    snprintf(why, sizeof why,
             "its file timer '%.1000s' (TORCHELASTIC_TIMER_FILE) expired "
             "%.1f s ago%s",
             f->t[pick].scope, now - f->t[pick].expires,
             pid == wk->pid ? "" : " in a child process");
    el__watch_hung(a, wk, pid, f->t[pick].sig, why);
    say(a, EL_AGENT_INFO, "Successfully reaped worker=[%d] with signal=%d",
        (int)pid, f->t[pick].sig);
}

static void reap_expired(struct el_agent *a)
{
    struct el__ftimer *f = a->ftimer;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    for (int i = 0; i < f->n; i++) {
        if (f->t[i].expires > now)
            continue;
        pid_t pid = f->t[i].pid;
        /* The earliest expired timer of pid with a signal (torch's rule). */
        int pick = -1;
        for (int j = 0; j < f->n; j++)
            if (f->t[j].pid == pid && f->t[j].expires <= now &&
                f->t[j].sig > 0 &&
                (pick < 0 || f->t[j].expires < f->t[pick].expires))
                pick = j;
        /* Not HEALTHY, or the worker gone or failed: its stop is under
         * way, the timers are only dropped. */
        int wi = a->state == EL__GS_HEALTHY ? worker_of(a, pid) : -1;
        if (wi >= 0 && !a->w[wi].failed)
            reap(a, &a->w[wi], pid, pick, now);
        for (int j = f->n - 1; j >= 0; j--)
            if (f->t[j].pid == pid)
                drop(f, j);
        i = -1; /* the table changed: look again from the start */
    }
}

void el__ftimer_event(struct el_agent *a, uint64_t tag)
{
    struct el__ftimer *f = a->ftimer;
    uint64_t x;
    if (!f)
        return;
    if (tag != EL__TAG_FTIMER && read(f->clock, &x, sizeof x) < 0 &&
        errno != EAGAIN)
        return;
    /* Requests first (a release may be waiting), then the clock. */
    read_requests(a);
    reap_expired(a);
    arm(f);
}
