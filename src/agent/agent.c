/* agent.c -- the per-node agent's event loop: rounds, supervising the
 * workers, stopping them, restarting (see include/elrun/agent.h).  Starting
 * workers is spawn.c's, their teed output pump.c's.
 *
 * One thread, one epoll set: the signalfd (SIGCHLD and the handled
 * signals), the rendezvous notify fd, a timerfd for the stop grace, and the
 * read ends of teed worker streams.  Workers are reaped with
 * waitpid(WNOHANG) whenever SIGCHLD is read, so an exit is handled as soon
 * as the kernel reports it.
 */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_impl.h"
#include "elrun/agent.h"
#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/rdzv.h"

static void event(struct el_agent *a, enum el_agent_event_level lvl,
                  const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void event(struct el_agent *a, enum el_agent_event_level lvl,
                  const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    if (!a->cfg.on_event)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    a->cfg.on_event(a->cfg.event_arg, lvl, msg);
}

/* ---- open / close ---- */

int el_agent_open(struct el_agent **out, const struct el_agent_config *cfg)
{
    struct el_agent *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->cfg = *cfg;
    if (!a->cfg.role)
        a->cfg.role = "default";
    if (!a->cfg.run_id)
        a->cfg.run_id = "none";
    if (a->cfg.stop_grace_ms < 0)
        a->cfg.stop_grace_ms = 30000;
    if (a->cfg.exit_barrier_ms <= 0)
        a->cfg.exit_barrier_ms = 300000;
    if (!a->cfg.out_fd && !a->cfg.err_fd) {
        a->cfg.out_fd = 1;
        a->cfg.err_fd = 2;
    }
    static const int defsigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
    const int *sigs = cfg->nsignals ? cfg->signals : defsigs;
    int nsigs = cfg->nsignals ? cfg->nsignals : 4;
    sigemptyset(&a->mask);
    sigaddset(&a->mask, SIGCHLD);
    for (int i = 0; i < nsigs && a->nhandled < 64; i++) {
        sigaddset(&a->mask, sigs[i]);
        a->handled[a->nhandled++] = sigs[i];
    }
    a->sigfd = a->epfd = a->tfd = -1;
    a->self = getpid();
    if (pthread_sigmask(SIG_BLOCK, &a->mask, &a->oldmask) != 0)
        goto fail;
    a->sigfd = signalfd(-1, &a->mask, SFD_CLOEXEC | SFD_NONBLOCK);
    a->epfd = epoll_create1(EPOLL_CLOEXEC);
    a->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (a->sigfd < 0 || a->epfd < 0 || a->tfd < 0)
        goto fail;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EL__TAG_SIG};
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->sigfd, &ev) < 0)
        goto fail;
    ev.data.u64 = EL__TAG_TIMER;
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->tfd, &ev) < 0)
        goto fail;
    *out = a;
    return 0;
fail:;
    int e = -errno;
    el_agent_close(a);
    return e ? e : -ENOMEM;
}

void el_agent_close(struct el_agent *a)
{
    if (!a)
        return;
    if (a->sigfd >= 0)
        close(a->sigfd);
    if (a->epfd >= 0)
        close(a->epfd);
    if (a->tfd >= 0)
        close(a->tfd);
    pthread_sigmask(SIG_SETMASK, &a->oldmask, NULL);
    free(a->w);
    free(a->outbuf);
    free(a);
}

const char *el_agent_run_dir(const struct el_agent *a)
{
    return a->run_dir;
}

/* ---- events ---- */

static int is_handled(const struct el_agent *a, int sig)
{
    for (int i = 0; i < a->nhandled; i++)
        if (a->handled[i] == sig)
            return 1;
    return 0;
}

static void reap(struct el_agent *a)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0)
            return;
        for (int i = 0; i < a->cfg.nproc; i++) {
            struct el__worker *w = &a->w[i];
            if (w->pid != pid || !w->alive)
                continue;
            w->alive = 0;
            w->status = st;
            a->nalive--;
            int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
            if (!ok && !a->stopping) {
                w->failed = 1;
                w->fail_time = (int64_t)time(NULL);
            }
            if (WIFSIGNALED(st))
                event(a, ok || a->stopping ? EL_AGENT_DEBUG : EL_AGENT_WARN,
                      "worker local_rank %d (rank %d, pid %d) killed by "
                      "signal %d (%s)", w->local_rank, w->global_rank,
                      (int)pid, WTERMSIG(st), sigabbrev_np(WTERMSIG(st))
                      ? sigabbrev_np(WTERMSIG(st)) : "?");
            else
                event(a, ok || a->stopping ? EL_AGENT_DEBUG : EL_AGENT_WARN,
                      "worker local_rank %d (rank %d, pid %d) exited with "
                      "code %d", w->local_rank, w->global_rank, (int)pid,
                      WEXITSTATUS(st));
        }
    }
}

/* Read every pending signal; returns 1 if a handled one arrived. */
static int read_signals(struct el_agent *a)
{
    struct signalfd_siginfo si;
    int got = 0;
    while (read(a->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD) {
            reap(a);
        } else if (is_handled(a, (int)si.ssi_signo)) {
            if (!a->pending_signal)
                a->pending_signal = (int)si.ssi_signo;
            got = 1;
        }
    }
    reap(a);  /* SIGCHLDs coalesce; always reap */
    return got;
}

static void arm_timer(struct el_agent *a, int ms)
{
    struct itimerspec its = {0};
    if (ms > 0) {
        its.it_value.tv_sec = ms / 1000;
        its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
    } else if (ms == 0) {
        its.it_value.tv_nsec = 1;
    }
    timerfd_settime(a->tfd, 0, &its, NULL);
}

static void signal_groups(struct el_agent *a, int sig)
{
    for (int i = 0; i < a->cfg.nproc; i++)
        if (a->w[i].alive)
            kill(-a->w[i].pid, sig);
}

/* Dispatch one epoll event that is not the signalfd or the timer. */
static void on_stream_event(struct el_agent *a, uint64_t tag)
{
    uint64_t idx = tag - EL__TAG_STREAM;
    int i = (int)(idx / 2), s = (int)(idx % 2);
    if (i < a->cfg.nproc)
        el__agent_pump(a, &a->w[i], s);
}

/* Stop every running worker: sig to each process group, the grace, then
 * SIGKILL.  Returns once every worker is reaped; then SIGKILLs each group
 * again so no grandchild outlives its worker. */
static void stop_workers(struct el_agent *a, int sig)
{
    struct epoll_event evs[16];
    a->stopping = 1;
    if (a->nalive > 0) {
        event(a, EL_AGENT_INFO, "stopping %d worker(s) with signal %d (%s)",
              a->nalive, sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
        signal_groups(a, sig);
        if (sig == SIGKILL)
            a->killed = 1;
        else
            arm_timer(a, a->cfg.stop_grace_ms);
    }
    while (a->nalive > 0) {
        int n = epoll_wait(a->epfd, evs, 16, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        for (int e = 0; e < n; e++) {
            uint64_t tag = evs[e].data.u64;
            if (tag == EL__TAG_SIG) {
                int prev = a->pending_signal;
                if (read_signals(a) && prev && !a->killed) {
                    /* A second death signal: no more grace. */
                    signal_groups(a, SIGKILL);
                    a->killed = 1;
                }
                if (!prev && a->pending_signal && sig != a->pending_signal &&
                    !a->killed)
                    signal_groups(a, a->pending_signal);
            } else if (tag == EL__TAG_TIMER) {
                uint64_t x;
                if (read(a->tfd, &x, sizeof x) < 0) {
                    /* spurious */
                }
                if (!a->killed && a->nalive > 0) {
                    event(a, EL_AGENT_WARN, "%d worker(s) still running "
                          "after %d ms; sending SIGKILL", a->nalive,
                          a->cfg.stop_grace_ms);
                    signal_groups(a, SIGKILL);
                    a->killed = 1;
                }
            } else if (tag >= EL__TAG_STREAM) {
                on_stream_event(a, tag);
            }
        }
    }
    arm_timer(a, -1);
    for (int i = 0; i < a->cfg.nproc; i++)
        if (a->w[i].pid > 0)
            kill(-a->w[i].pid, SIGKILL);
    el__agent_drain_all(a);
    for (int i = 0; i < a->cfg.nproc; i++)
        el__agent_close_streams(a, &a->w[i]);
}

/* ---- failures ---- */

static void collect_failures(struct el_agent *a, struct el_agent_result *res)
{
    el__agent_free_failures(res);
    int n = 0;
    for (int i = 0; i < a->cfg.nproc; i++)
        n += a->w[i].failed;
    res->failures = calloc((size_t)(n ? n : 1), sizeof *res->failures);
    if (!res->failures)
        return;
    for (int i = 0; i < a->cfg.nproc; i++) {
        struct el__worker *w = &a->w[i];
        if (!w->failed)
            continue;
        struct el_agent_failure *f = &res->failures[res->nfailures++];
        f->local_rank = w->local_rank;
        f->global_rank = w->global_rank;
        f->pid = w->pid;
        f->exitcode = WIFSIGNALED(w->status) ? -WTERMSIG(w->status)
                                             : WEXITSTATUS(w->status);
        f->timestamp = w->fail_time;
        char path[4200];
        snprintf(path, sizeof path, "%s/error.json", w->dir);
        el__agent_read_error_file(f, path);
    }
    res->root = 0;
    for (int i = 1; i < res->nfailures; i++)
        if (res->failures[i].timestamp < res->failures[res->root].timestamp)
            res->root = i;
}

/* ---- the run ---- */

/* Block in the rendezvous; a signal cancels it.  Returns 0, 1 (signaled) or
 * an error. */
static int rendezvous(struct el_agent *a, struct el_rdzv *r,
                      struct el_rdzv_info *info)
{
    for (;;) {
        int rc = el_rdzv_next(r, a->cfg.nproc, a->sigfd, info);
        if (rc != -ECANCELED)
            return rc;
        if (read_signals(a))
            return 1;
    }
}

int el_agent_run(struct el_agent *a, struct el_rdzv *r,
                 struct el_agent_result *res)
{
    int rc, restarts_left = a->cfg.max_restarts;
    memset(res, 0, sizeof *res);
    a->w = calloc((size_t)a->cfg.nproc, sizeof *a->w);
    if (!a->w)
        return -ENOMEM;
    if ((rc = el__agent_make_run_dir(a))) {
        snprintf(res->errmsg, sizeof res->errmsg, "cannot create the log "
                 "directory under %s: %s", a->cfg.log_dir ? a->cfg.log_dir
                 : "$TMPDIR", strerror(-rc));
        res->outcome = EL_AGENT_EXEC_ERROR;
        return 0;
    }
    int nfd = el_rdzv_notify_fd(r);
    if (nfd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EL__TAG_RDZV};
        epoll_ctl(a->epfd, EPOLL_CTL_ADD, nfd, &ev);
    }

    for (;;) {
        struct el_rdzv_info info;
        if (a->pending_signal) {
            /* A handled signal arrived while the workers were stopping. */
            res->outcome = EL_AGENT_SIGNALED;
            res->signal = a->pending_signal;
            break;
        }
        rc = rendezvous(a, r, &info);
        if (rc == 1) {
            res->outcome = EL_AGENT_SIGNALED;
            res->signal = a->pending_signal;
            break;
        }
        if (rc) {
            res->outcome = EL_AGENT_RDZV_ERROR;
            snprintf(res->errmsg, sizeof res->errmsg, "rendezvous failed: %s",
                     el_rdzv_errmsg(r));
            break;
        }
        res->rounds++;
        event(a, EL_AGENT_INFO, "round %" PRId64 ": node %d of %d, ranks "
              "%d-%d of %d, store %s:%d; starting %d worker(s)", info.round,
              info.node_rank, info.num_nodes, info.base_rank,
              info.base_rank + a->cfg.nproc - 1, info.world_size,
              info.store_host, info.store_port, a->cfg.nproc);
        rc = el__agent_start_workers(a, &info, res);
        if (rc == 1) {
            stop_workers(a, SIGKILL);
            el_rdzv_exit_barrier(r, 0, 0, -1);
            res->outcome = EL_AGENT_EXEC_ERROR;
            break;
        }
        if (rc < 0) {
            res->outcome = EL_AGENT_EXEC_ERROR;
            break;
        }
        /* Supervise until something ends the round. */
        int failed = 0, membership = 0, lost = 0;
        struct epoll_event evs[16];
        while (a->nalive > 0 && !failed && !membership && !lost &&
               !a->pending_signal) {
            int n = epoll_wait(a->epfd, evs, 16, -1);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -errno;
            for (int e = 0; e < n; e++) {
                uint64_t tag = evs[e].data.u64;
                if (tag == EL__TAG_SIG) {
                    read_signals(a);
                } else if (tag == EL__TAG_RDZV) {
                    int waiting = 0;
                    el_rdzv_ack_notify(r);
                    if (el_rdzv_num_nodes_waiting(r, &waiting) < 0)
                        lost = 1;
                    else if (waiting > 0)
                        membership = 1;
                } else if (tag == EL__TAG_TIMER) {
                    uint64_t x;
                    if (read(a->tfd, &x, sizeof x) < 0) {
                        /* spurious */
                    }
                } else if (tag >= EL__TAG_STREAM) {
                    on_stream_event(a, tag);
                }
            }
            for (int i = 0; i < a->cfg.nproc; i++)
                failed |= a->w[i].failed;
        }
        if (a->pending_signal) {
            event(a, EL_AGENT_WARN, "received signal %d (%s); forwarding it "
                  "to the workers and shutting down", a->pending_signal,
                  sigabbrev_np(a->pending_signal)
                  ? sigabbrev_np(a->pending_signal) : "?");
            stop_workers(a, a->pending_signal);
            res->outcome = EL_AGENT_SIGNALED;
            res->signal = a->pending_signal;
            break;
        }
        if (lost) {
            stop_workers(a, SIGTERM);
            res->outcome = EL_AGENT_RDZV_ERROR;
            snprintf(res->errmsg, sizeof res->errmsg, "%s",
                     el_rdzv_errmsg(r));
            break;
        }
        if (membership) {
            event(a, EL_AGENT_WARN, "other nodes are waiting for a new "
                  "round; restarting the workers (not counted as a "
                  "restart)");
            stop_workers(a, SIGTERM);
            continue;
        }
        if (failed) {
            stop_workers(a, SIGTERM);
            collect_failures(a, res);
            if (a->pending_signal) {
                /* Told to shut down while the group was stopping. */
                res->outcome = EL_AGENT_SIGNALED;
                res->signal = a->pending_signal;
                break;
            }
            /* A backend with a job-wide restart budget decides for every
             * node at once; otherwise this agent counts its own. */
            int budget = el_rdzv_report_failure(r, "worker group failed");
            if (budget == 0) {
                res->restarts++;
                event(a, EL_AGENT_WARN, "worker group failed; the job "
                      "restarts on every node");
                continue;
            }
            if (budget != -ENOTSUP) {
                event(a, EL_AGENT_WARN, "%s", el_rdzv_errmsg(r));
                el_rdzv_exit_barrier(r, 0, 0, -1);
                res->outcome = EL_AGENT_FAILED;
                break;
            }
            if (restarts_left > 0) {
                restarts_left--;
                res->restarts++;
                event(a, EL_AGENT_WARN, "worker group failed; restarting "
                      "(%d of %d restarts used)", res->restarts,
                      a->cfg.max_restarts);
                continue;
            }
            el_rdzv_exit_barrier(r, 0, 0, -1);
            res->outcome = EL_AGENT_FAILED;
            break;
        }
        /* Every worker exited 0. */
        stop_workers(a, SIGKILL);  /* nothing left but stray grandchildren */
        el__agent_free_failures(res);
        event(a, EL_AGENT_INFO, "all %d worker(s) succeeded; waiting for the "
              "other nodes", a->cfg.nproc);
        rc = el_rdzv_exit_barrier(r, 1, a->cfg.exit_barrier_ms, a->sigfd);
        if (rc == -ECANCELED && read_signals(a)) {
            res->outcome = EL_AGENT_SIGNALED;
            res->signal = a->pending_signal;
            break;
        }
        if (rc)
            event(a, EL_AGENT_WARN, "exit barrier: %s", el_rdzv_errmsg(r));
        res->outcome = EL_AGENT_SUCCEEDED;
        break;
    }
    if (res->outcome == EL_AGENT_SUCCEEDED && a->auto_dir) {
        char base[4096];
        snprintf(base, sizeof base, "%s", a->run_dir);
        char *slash = strrchr(base, '/');
        if (slash)
            *slash = 0;
        el__rm_rf(base);
    }
    return 0;
}
