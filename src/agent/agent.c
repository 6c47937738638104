/* agent.c -- the per-node agent's event loop: rounds, supervising the
 * workers, stopping them, restarting (see include/elrun/agent.h).  Starting
 * workers is spawn.c's, their teed output pump.c's.
 *
 * One thread, one epoll set: the signalfd (SIGCHLD and the handled
 * signals), the rendezvous notify fd, a timerfd for the stop grace and the
 * restart back-off, and the read ends of teed worker streams.  Workers are
 * reaped with waitpid(WNOHANG) whenever SIGCHLD is read, so an exit is
 * handled as soon as the kernel reports it.
 *
 * The group's state (a->state) changes only in set_state; dispatch() hands
 * each event to its source's handler (on_signalfd, on_rdzv, on_timer,
 * on_stream), which moves the state; a stop's cause decides what follows
 * it (after_stop); spend_restart owns the restart budget.  Blocking: only
 * in epoll_wait, el_rdzv_next and the exit barrier, all three ended by a
 * handled signal.  While el_rdzv_next blocks, a helper thread prints the
 * join lines (rdzv_next_told); it touches nothing but cfg and on_event.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
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
#include "elrun/events.h"
#include "elrun/net.h"
#include "elrun/rdzv.h"

/* agent.c's short name for el__agent_event (agent_impl.h). */
#define event el__agent_event

void el__agent_event(struct el_agent *a, enum el_agent_event_level lvl,
                     const char *fmt, ...)
{
    char msg[2048];
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
    if (a->cfg.restart_backoff_ms < 0)
        a->cfg.restart_backoff_ms = 0;
    if (a->cfg.restart_backoff_max_ms <= 0)
        a->cfg.restart_backoff_max_ms = 30000;
    if (a->cfg.rdzv_join_timeout_ms <= 0)
        a->cfg.rdzv_join_timeout_ms = 600000;
    if (a->cfg.rdzv_report_ms <= 0)
        a->cfg.rdzv_report_ms = 30000;
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
    if ((errno = -el__obs_open(a)))
        goto fail;
    if ((errno = -el__ev_open(a)))
        goto fail;
    int wrc = el__watch_open(a);
    if (wrc < 0) {
        el_agent_close(a);
        return wrc;
    }
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
    el__obs_close(a);
    el__ev_close(a);
    el__watch_close(a);
    el__ftimer_close(a);
    if (a->sigfd >= 0) {
        /* A handled signal that came after the run is over would kill the
         * process the moment the mask is restored: it is taken here. */
        struct signalfd_siginfo si;
        while (read(a->sigfd, &si, sizeof si) == (ssize_t)sizeof si)
            ;
        close(a->sigfd);
    }
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

/* ---- the group state: every transition goes through here ---- */

static const char *const state_names[] = {
    [EL__GS_INIT] = "INIT",         [EL__GS_RENDEZVOUS] = "RENDEZVOUS",
    [EL__GS_HEALTHY] = "HEALTHY",   [EL__GS_UNHEALTHY] = "UNHEALTHY",
    [EL__GS_STOPPING] = "STOPPING", [EL__GS_BACKOFF] = "BACKOFF",
    [EL__GS_STOPPED] = "STOPPED",   [EL__GS_SUCCEEDED] = "SUCCEEDED",
    [EL__GS_FAILED] = "FAILED",     [EL__GS_UNKNOWN] = "UNKNOWN",
};

static int is_final(enum el__group_state s)
{
    return s == EL__GS_STOPPED || s == EL__GS_SUCCEEDED || s == EL__GS_FAILED;
}

/* The rendezvous notify fd is watched only while the group is HEALTHY: in
 * any other state the agent is about to join a round anyway, and a
 * readable fd left in the set would wake epoll_wait in a loop.  Re-enabled
 * (level-triggered), a notification that came meanwhile is seen at once. */
static void set_state(struct el_agent *a, enum el__group_state s)
{
    if (a->state == s)
        return;
    event(a, EL_AGENT_DEBUG, "worker group: %s -> %s", state_names[a->state],
          state_names[s]);
    if (a->rdzv_fd >= 0 &&
        (a->state == EL__GS_HEALTHY) != (s == EL__GS_HEALTHY)) {
        struct epoll_event ev = {.events = s == EL__GS_HEALTHY ? EPOLLIN : 0,
                                 .data.u64 = EL__TAG_RDZV};
        epoll_ctl(a->epfd, EPOLL_CTL_MOD, a->rdzv_fd, &ev);
    }
    el__obs_state(a, a->state, s);
    a->state = s;
}

/* The run's end: the outcome and the final state that goes with it. */
static void finish(struct el_agent *a, enum el_agent_outcome outcome)
{
    if (outcome == EL_AGENT_SIGNALED && el__watch_preempted(a))
        outcome = EL_AGENT_PREEMPTED;
    a->res->outcome = outcome;
    if (outcome == EL_AGENT_SIGNALED || outcome == EL_AGENT_PREEMPTED)
        a->res->signal = a->pending_signal;
    set_state(a, outcome == EL_AGENT_SUCCEEDED ? EL__GS_SUCCEEDED
                 : outcome == EL_AGENT_FAILED  ? EL__GS_FAILED
                                               : EL__GS_STOPPED);
}

/* ---- small helpers ---- */

static const char *sigabbrev(int sig)
{
    const char *s = sigabbrev_np(sig);
    return s ? s : "?";
}

static int is_handled(const struct el_agent *a, int sig)
{
    for (int i = 0; i < a->nhandled; i++)
        if (a->handled[i] == sig)
            return 1;
    return 0;
}

/* ms > 0: fire once after ms; 0: at once; < 0: disarm. */
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

/* Send sig to every live worker's process group (only ever to stop them).
 * A stopped process (SIGSTOP, ^Z, a debugger) cannot act on a SIGTERM
 * until it runs again and would cost the whole grace, so any signal but
 * SIGKILL is followed by SIGCONT: the pending signal is then delivered. */
static void signal_groups(struct el_agent *a, int sig)
{
    for (int i = 0; i < a->cfg.nproc; i++) {
        if (!a->w[i].alive)
            continue;
        kill(-a->w[i].pid, sig);
        if (sig != SIGKILL && sig != SIGCONT)
            kill(-a->w[i].pid, SIGCONT);
    }
}

/* Reap every exited worker.  An exit other than 0 while the group is
 * HEALTHY is a failure; once the agent began stopping the group it is not
 * (as torch: a worker that dies of the agent's SIGTERM did not fail). */
static void reap(struct el_agent *a)
{
    int healthy = a->state == EL__GS_HEALTHY;
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0)
            return;
        if (el__watch_reaped(a, pid, st))
            continue;
        for (int i = 0; i < a->cfg.nproc; i++) {
            struct el__worker *w = &a->w[i];
            if (w->pid != pid || !w->alive)
                continue;
            w->alive = 0;
            w->status = st;
            a->nalive--;
            int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
            if (!ok && healthy) {
                w->failed = 1;
                w->fail_time = (int64_t)time(NULL);
                w->fail_ns = el_now_ns();
            }
            if (WIFSIGNALED(st))
                event(a, ok || !healthy ? EL_AGENT_DEBUG : EL_AGENT_WARN,
                      "worker local_rank %d (rank %d, pid %d) killed by "
                      "signal %d (%s)",
                      w->local_rank, w->global_rank, (int)pid, WTERMSIG(st),
                      sigabbrev(WTERMSIG(st)));
            else
                event(a, ok || !healthy ? EL_AGENT_DEBUG : EL_AGENT_WARN,
                      "worker local_rank %d (rank %d, pid %d) exited with "
                      "code %d",
                      w->local_rank, w->global_rank, (int)pid, WEXITSTATUS(st));
            el__obs_exit(a, w);
        }
        el__obs_workers(a);
    }
}

/* Drain the signalfd: reap on SIGCHLD (always once more: SIGCHLDs
 * coalesce).  Returns the first handled signal read, or 0. */
static int read_signals(struct el_agent *a)
{
    struct signalfd_siginfo si;
    int got = 0;
    while (read(a->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD)
            reap(a);
        else if (is_handled(a, (int)si.ssi_signo) && !got)
            got = (int)si.ssi_signo;
    }
    reap(a);
    return got;
}

/* After a blocking call returned: a handled signal read now ends the run
 * (SIGNALED, the first signal kept).  Returns 1 if it did. */
static int ended_by_signal(struct el_agent *a)
{
    int sig = read_signals(a);
    if (!sig)
        return 0;
    if (!a->pending_signal)
        a->pending_signal = sig;
    finish(a, EL_AGENT_SIGNALED);
    return 1;
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
        f->ran_ms = (w->fail_ns - a->healthy_ns) / 1000000;
        el__agent_find_import_error(f, w->dir);
    }
    res->root = 0;
    for (int i = 1; i < res->nfailures; i++)
        if (res->failures[i].timestamp < res->failures[res->root].timestamp)
            res->root = i;
}

/* ---- the restart budget ---- */

/* The one place that decides whether a failed group restarts.  A backend
 * with a job-wide budget (c10d, etcd: el_rdzv_report_failure) decides for
 * every node at once and this agent's count is not used; otherwise
 * (-ENOTSUP) the agent spends cfg.max_restarts itself.  Returns 1 to
 * restart (res->restarts counts it), 0 when the job has failed. */
static int spend_restart(struct el_agent *a)
{
    int job = el_rdzv_report_failure(a->r, "worker group failed");
    if (job == 0) {
        a->res->restarts++;
        el__obs_restarts(a);
        event(a, EL_AGENT_WARN,
              "worker group failed; the job restarts on "
              "every node");
        return 1;
    }
    if (job != -ENOTSUP) {
        event(a, EL_AGENT_WARN, "%s", el_rdzv_errmsg(a->r));
        return 0;
    }
    if (a->restarts_left > 0) {
        event(a, EL_AGENT_INFO,
              "[%s] Worker group FAILED. %d/%d attempts "
              "left; will restart worker group",
              a->cfg.role, a->restarts_left, a->cfg.max_restarts);
        a->restarts_left--;
        a->res->restarts++;
        el__obs_restarts(a);
        event(a, EL_AGENT_WARN,
              "worker group failed; restarting (%d of %d "
              "restarts used)",
              a->res->restarts, a->cfg.max_restarts);
        return 1;
    }
    return 0;
}

/* ---- the restart back-off ---- */

int el__agent_backoff_ms(int streak, int base_ms, int max_ms)
{
    if (streak <= 1 || base_ms <= 0)
        return 0;
    int64_t ms = base_ms;
    for (int i = 2; i < streak && ms < max_ms; i++)
        ms *= 2;
    return ms > max_ms ? max_ms : (int)ms;
}

/* A restart was granted: wait the back-off (BACKOFF, ended by the timer
 * or a handled signal) or go straight to the next round. */
static void restart(struct el_agent *a)
{
    /* A group that ran well for as long as the longest wait starts a new
     * streak: its next failure restarts at once again. */
    if (a->ran_ms >= a->cfg.restart_backoff_max_ms)
        a->streak = 0;
    a->streak++;
    int ms = el__agent_backoff_ms(a->streak, a->cfg.restart_backoff_ms,
                                  a->cfg.restart_backoff_max_ms);
    if (ms <= 0) {
        set_state(a, EL__GS_RENDEZVOUS);
        return;
    }
    event(a, EL_AGENT_WARN,
          "waiting %g s before restarting (back-off after "
          "%d failures in a row)",
          ms / 1000.0, a->streak);
    set_state(a, EL__GS_BACKOFF);
    arm_timer(a, ms);
}

/* ---- stopping the group ---- */

static void after_stop(struct el_agent *a);

/* Begin stopping every running worker: sig to each process group, then
 * after cfg.stop_grace_ms SIGKILL (on_timer).  cause says what comes once
 * the last worker is reaped (after_stop). */
static void begin_stop(struct el_agent *a, enum el__stop_cause cause, int sig)
{
    a->cause = cause;
    a->stop_sig = sig;
    set_state(a, EL__GS_STOPPING);
    if (a->nalive > 0) {
        event(a, EL_AGENT_INFO, "stopping %d worker(s) with signal %d (%s)",
              a->nalive, sig, sigabbrev(sig));
        signal_groups(a, sig);
        if (sig == SIGKILL)
            a->killed = 1;
        else
            arm_timer(a, a->cfg.stop_grace_ms);
        return;
    }
    after_stop(a);
}

/* The group is down: SIGKILL each process group again so no grandchild
 * outlives its worker, take the last output, and go where the stop's cause
 * leads. */
static void after_stop(struct el_agent *a)
{
    struct el_agent_result *res = a->res;
    arm_timer(a, -1);
    for (int i = 0; i < a->cfg.nproc; i++)
        if (a->w[i].pid > 0)
            kill(-a->w[i].pid, SIGKILL);
    el__agent_drain_all(a);
    for (int i = 0; i < a->cfg.nproc; i++)
        el__agent_close_streams(a, &a->w[i]);

    switch (a->cause) {
    case EL__STOP_SIGNAL:
        finish(a, EL_AGENT_SIGNALED);
        return;
    case EL__STOP_EXEC:
        el_rdzv_exit_barrier(a->r, 0, 0, -1);
        finish(a, EL_AGENT_EXEC_ERROR);
        return;
    case EL__STOP_LOST:
        snprintf(res->errmsg, sizeof res->errmsg, "%s", el_rdzv_errmsg(a->r));
        finish(a, EL_AGENT_RDZV_ERROR);
        return;
    case EL__STOP_MEMBERSHIP:
        if (a->pending_signal)
            finish(a, EL_AGENT_SIGNALED);
        else
            set_state(a, EL__GS_RENDEZVOUS);
        return;
    case EL__STOP_FAILURE:
        collect_failures(a, res);
        el__obs_failures(a, res);
        if (a->pending_signal) {
            /* Told to shut down while the group was stopping. */
            finish(a, EL_AGENT_SIGNALED);
            return;
        }
        if (!spend_restart(a)) {
            el_rdzv_exit_barrier(a->r, 0, 0, -1);
            finish(a, EL_AGENT_FAILED);
            return;
        }
        /* The failure and restart events go into the job's history before
         * this node joins the round they opened: that round, and its
         * event, cannot be complete without it.  A store round trip
         * (bounded: the store may be down). */
        el_events_flush(a->cfg.events, 250);
        restart(a);
        return;
    case EL__STOP_SUCCESS: {
        /* Nothing was left but stray grandchildren. */
        el__agent_free_failures(res);
        event(a, EL_AGENT_INFO,
              "all %d worker(s) succeeded; waiting for the "
              "other nodes",
              a->cfg.nproc);
        int rc =
            el_rdzv_exit_barrier(a->r, 1, a->cfg.exit_barrier_ms, a->sigfd);
        if (rc == -ECANCELED && ended_by_signal(a))
            return;
        if (rc)
            event(a, EL_AGENT_WARN, "exit barrier: %s", el_rdzv_errmsg(a->r));
        finish(a, EL_AGENT_SUCCEEDED);
        return;
    }
    }
}

/* What the reaped exits mean for the group. */
static void check_group(struct el_agent *a)
{
    if (a->state == EL__GS_STOPPING) {
        if (a->nalive == 0)
            after_stop(a);
        return;
    }
    if (a->state != EL__GS_HEALTHY)
        return;
    for (int i = 0; i < a->cfg.nproc; i++) {
        if (a->w[i].failed) {
            a->ran_ms = (el_now_ns() - a->healthy_ns) / 1000000;
            el__obs_failure(a, "worker_failure");
            set_state(a, EL__GS_UNHEALTHY);
            begin_stop(a, EL__STOP_FAILURE, SIGTERM);
            return;
        }
    }
    if (a->nalive == 0)
        begin_stop(a, EL__STOP_SUCCESS, SIGKILL);
}

/* ---- one handler per event source ---- */

/* A handled signal sent to the agent. */
static void on_agent_signal(struct el_agent *a, int sig)
{
    int prev = a->pending_signal;
    if (!prev)
        a->pending_signal = sig;
    switch (a->state) {
    case EL__GS_HEALTHY:
        event(a, EL_AGENT_WARN,
              "received signal %d (%s); forwarding it to "
              "the workers and shutting down",
              sig, sigabbrev(sig));
        begin_stop(a, EL__STOP_SIGNAL, sig);
        break;
    case EL__GS_STOPPING:
        if (a->killed)
            break;
        if (prev || a->cause != EL__STOP_SIGNAL) {
            /* A second death signal, or one during a stop begun for another
             * reason (a failure, a new round): the workers were told
             * already, so no more grace. */
            event(a, EL_AGENT_WARN,
                  "received signal %d (%s) while stopping "
                  "the workers; killing %d worker(s) now",
                  sig, sigabbrev(sig), a->nalive);
            signal_groups(a, SIGKILL);
            a->killed = 1;
        } else if (sig != a->stop_sig) {
            signal_groups(a, sig);
        }
        break;
    case EL__GS_BACKOFF:
        event(a, EL_AGENT_WARN,
              "received signal %d (%s) while waiting to "
              "restart; shutting down",
              sig, sigabbrev(sig));
        arm_timer(a, -1);
        finish(a, EL_AGENT_SIGNALED);
        break;
    default:
        break;
    }
}

static void on_signalfd(struct el_agent *a)
{
    int sig = read_signals(a);
    if (sig)
        on_agent_signal(a, sig);
    check_group(a);
}

/* The rendezvous says other nodes may be waiting (only while HEALTHY). */
static void on_rdzv(struct el_agent *a)
{
    int waiting = 0;
    el_rdzv_ack_notify(a->r);
    if (a->state != EL__GS_HEALTHY)
        return;
    if (el_rdzv_num_nodes_waiting(a->r, &waiting) < 0) {
        begin_stop(a, EL__STOP_LOST, SIGTERM);
    } else if (waiting > 0) {
        /* A backend with a job-wide budget (c10d, etcd) has charged it
         * when the new round is for a failure on another node; only the
         * per-node budgets of static are never charged here.  Which of the
         * two this round is, the rendezvous does not say (yet). */
        const char *be = el_rdzv_backend(a->r);
        int per_node =
            strcmp(be, "static") == 0 || strcmp(be, "standalone") == 0;
        event(a, EL_AGENT_WARN,
              "other nodes are waiting for a new round; "
              "restarting the workers (%s)",
              per_node ? "not counted as a restart"
                       : "a failure on another node counts against the job's "
                         "--max-restarts, a node joining or leaving does not");
        el__obs_failure(a, "membership");
        begin_stop(a, EL__STOP_MEMBERSHIP, SIGTERM);
    }
}

/* The timerfd: the stop grace or the restart back-off ran out. */
static void on_timer(struct el_agent *a)
{
    uint64_t x;
    if (read(a->tfd, &x, sizeof x) < 0)
        return; /* disarmed meanwhile */
    if (a->state == EL__GS_BACKOFF) {
        set_state(a, EL__GS_RENDEZVOUS);
        return;
    }
    if (a->state == EL__GS_STOPPING && !a->killed && a->nalive > 0) {
        event(a, EL_AGENT_WARN,
              "%d worker(s) still running after %d ms; "
              "sending SIGKILL",
              a->nalive, a->cfg.stop_grace_ms);
        signal_groups(a, SIGKILL);
        a->killed = 1;
    }
}

/* watch.c's tick: a notice's deadline acts as a signal to the agent; a
 * hung worker it killed is reaped as any other exit. */
static void on_watch(struct el_agent *a)
{
    int sig = el__watch_tick(a);
    if (sig)
        on_agent_signal(a, sig);
    check_group(a);
}

/* filetimer.c's FIFO or clock: a worker whose timer expired was marked
 * failed and signalled there; its stop follows here. */
static void on_ftimer(struct el_agent *a, uint64_t tag)
{
    el__ftimer_event(a, tag);
    check_group(a);
}

static void on_stream(struct el_agent *a, uint64_t tag)
{
    uint64_t idx = tag - EL__TAG_STREAM;
    int i = (int)(idx / 2), s = (int)(idx % 2);
    if (i < a->cfg.nproc)
        el__agent_pump(a, &a->w[i], s);
}

/* The one dispatcher: wait for the next events and hand each to its
 * source's handler.  A batch is cut short when a handler moved the group
 * out of the waiting states (every source is level-triggered: what is left
 * comes again).  Returns 0 or -errno. */
static int dispatch(struct el_agent *a)
{
    struct epoll_event evs[16];
    int n = epoll_wait(a->epfd, evs, 16, -1);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    a->woke_ns = el_now_ns();
    for (int e = 0;
         e < n && (a->state == EL__GS_HEALTHY || a->state == EL__GS_STOPPING ||
                   a->state == EL__GS_BACKOFF);
         e++) {
        uint64_t tag = evs[e].data.u64;
        if (tag == EL__TAG_SIG)
            on_signalfd(a);
        else if (tag == EL__TAG_RDZV)
            on_rdzv(a);
        else if (tag == EL__TAG_TIMER)
            on_timer(a);
        else if (tag == EL__TAG_WATCH)
            on_watch(a);
        else if (tag == EL__TAG_FTIMER || tag == EL__TAG_FTIMER + 1)
            on_ftimer(a, tag);
        else if (tag >= EL__TAG_PROGRESS)
            el__obs_progress(a, (int)(tag - EL__TAG_PROGRESS));
        else if (tag >= EL__TAG_STREAM)
            on_stream(a, tag);
    }
    return 0;
}

/* ---- rounds ---- */

/* The rendezvous blocks the agent's thread for up to the join timeout and
 * tells nothing while it waits, so a helper thread says that the agent is
 * waiting, where, for how many nodes and how long still (see
 * el_agent_config.rdzv_report_ms).  It only formats and calls on_event. */
struct join_waiter {
    struct el_agent *a;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int64_t start_ns;
};

static void join_line(struct el_agent *a, enum el_agent_event_level lvl,
                      const char *what, int64_t waited_ms)
{
    const struct el_agent_config *c = &a->cfg;
    char nodes[64], who[600] = "", joined[512];
    int64_t left = c->rdzv_join_timeout_ms - waited_ms;
    if (c->rdzv_min_nodes == c->rdzv_max_nodes)
        snprintf(nodes, sizeof nodes, "%d node%s", c->rdzv_max_nodes,
                 c->rdzv_max_nodes == 1 ? "" : "s");
    else
        snprintf(nodes, sizeof nodes, "%d..%d nodes", c->rdzv_min_nodes,
                 c->rdzv_max_nodes);
    /* Who joined so far, when the rendezvous says (el_rdzv_joiners may be
     * called beside the blocked el_rdzv_next). */
    int n = a->r ? el_rdzv_joiners(a->r, joined, sizeof joined) : -1;
    if (n > 0 && !*joined) /* too many to name */
        snprintf(who, sizeof who, "%d of %s", n, nodes);
    else if (n >= 0)
        snprintf(who, sizeof who, "%d of %s (%s)", n, nodes,
                 n ? joined : "none yet");
    else
        snprintf(who, sizeof who, "need %s", nodes);
    event(a, lvl,
          "%s the rendezvous at %s: %s, %" PRId64 " s of the "
          "%d s join timeout left",
          what, c->rdzv_endpoint, who, (left > 0 ? left + 999 : 0) / 1000,
          c->rdzv_join_timeout_ms / 1000);
}

static void *join_waiter_main(void *arg)
{
    struct join_waiter *jw = arg;
    int64_t next_ms = 1000;
    pthread_mutex_lock(&jw->mu);
    while (!jw->done) {
        struct timespec ts;
        int64_t at = jw->start_ns + next_ms * 1000000;
        ts.tv_sec = (time_t)(at / 1000000000);
        ts.tv_nsec = (long)(at % 1000000000);
        if (pthread_cond_timedwait(&jw->cv, &jw->mu, &ts) == ETIMEDOUT &&
            !jw->done) {
            join_line(jw->a, EL_AGENT_WARN, "still waiting for", next_ms);
            next_ms += jw->a->cfg.rdzv_report_ms;
        }
    }
    pthread_mutex_unlock(&jw->mu);
    return NULL;
}

/* el_rdzv_next with the waiter running beside it (without it when the
 * thread cannot be made: the join still works). */
static int rdzv_next_told(struct el_agent *a, struct el_rdzv_info *info)
{
    struct join_waiter jw = {.a = a};
    pthread_condattr_t ca;
    pthread_t th;
    int have = 0;
    if (!a->cfg.rdzv_endpoint)
        return el_rdzv_next(a->r, a->cfg.nproc, a->sigfd, info);
    join_line(a, EL_AGENT_INFO, "joining", 0);
    if (pthread_condattr_init(&ca) == 0) {
        if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
            pthread_mutex_init(&jw.mu, NULL) == 0) {
            if (pthread_cond_init(&jw.cv, &ca) == 0) {
                jw.start_ns = el_now_ns();
                have = pthread_create(&th, NULL, join_waiter_main, &jw) == 0;
                if (!have)
                    pthread_cond_destroy(&jw.cv);
            }
            if (!have)
                pthread_mutex_destroy(&jw.mu);
        }
        pthread_condattr_destroy(&ca);
    }
    int rc = el_rdzv_next(a->r, a->cfg.nproc, a->sigfd, info);
    if (have) {
        pthread_mutex_lock(&jw.mu);
        jw.done = 1;
        pthread_cond_signal(&jw.cv);
        pthread_mutex_unlock(&jw.mu);
        pthread_join(th, NULL);
        pthread_cond_destroy(&jw.cv);
        pthread_mutex_destroy(&jw.mu);
    }
    return rc;
}

/* "[0, 1, 2]": n values from first, step 1 (step 0: all the same). */
static void int_list(char *buf, size_t cap, int first, int step, int n)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n && len + 16 < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%d", i ? ", " : "",
                                first + step * i);
    if (n > 0 && len + 16 >= cap)
        snprintf(buf + len, cap - len, ", ...");
}

/* torchrun's INFO record of a completed round (its agent's wording). */
static void log_rendezvous_result(struct el_agent *a,
                                  const struct el_rdzv_info *info)
{
    char local[256], global[256], worlds[256];
    int n = a->cfg.nproc;
    int_list(local, sizeof local, 0, 1, n);
    int_list(global, sizeof global, info->base_rank, 1, n);
    int_list(worlds, sizeof worlds, info->world_size, 0, n);
    event(a, EL_AGENT_INFO,
          "[%s] Rendezvous complete for workers. Result:\n"
          "  restart_count=%" PRId64 "\n  master_addr=%s\n  master_port=%d\n"
          "  group_rank=%d\n  group_world_size=%d\n  local_ranks=[%s]\n"
          "  role_ranks=[%s]\n  global_ranks=[%s]\n  role_world_sizes=[%s]\n"
          "  global_world_sizes=[%s]",
          a->cfg.role, info->round, info->store_host, info->store_port,
          info->node_rank, info->num_nodes, local, global, global, worlds,
          worlds);
}

/* RENDEZVOUS: block in the rendezvous (a handled signal cancels it), then
 * start the round's workers: HEALTHY, or a final state. */
static void next_round(struct el_agent *a)
{
    struct el_agent_result *res = a->res;
    struct el_rdzv_info info;
    int rc;
    set_state(a, EL__GS_RENDEZVOUS);
    for (;;) {
        rc = rdzv_next_told(a, &info);
        if (rc != -ECANCELED)
            break;
        if (ended_by_signal(a))
            return;
    }
    if (rc) {
        /* Told to stop while a step that cannot be cancelled (a store's
         * handshake) ended in an error: the signal is what the user sees. */
        if (ended_by_signal(a))
            return;
        snprintf(res->errmsg, sizeof res->errmsg, "rendezvous failed: %s",
                 el_rdzv_errmsg(a->r));
        finish(a, EL_AGENT_RDZV_ERROR);
        return;
    }
    res->rounds++;
    log_rendezvous_result(a, &info);
    event(a, EL_AGENT_INFO,
          "round %" PRId64 ": node %d of %d, ranks "
          "%d-%d of %d, store %s:%d; starting %d worker(s)",
          info.round, info.node_rank, info.num_nodes, info.base_rank,
          info.base_rank + a->cfg.nproc - 1, info.world_size, info.store_host,
          info.store_port, a->cfg.nproc);
    el__obs_round(a, &info);
    el__ftimer_round(a);
    rc = el__agent_start_workers(a, &info, res);
    if (rc == 1) {
        begin_stop(a, EL__STOP_EXEC, SIGKILL);
        return;
    }
    if (rc < 0) {
        finish(a, EL_AGENT_EXEC_ERROR);
        return;
    }
    a->healthy_ns = el_now_ns();
    el__watch_round(a);
    set_state(a, EL__GS_HEALTHY);
}

int el_agent_run(struct el_agent *a, struct el_rdzv *r,
                 struct el_agent_result *res)
{
    int rc;
    memset(res, 0, sizeof *res);
    a->r = r;
    a->res = res;
    a->state = EL__GS_INIT;
    a->restarts_left = a->cfg.max_restarts;
    a->rdzv_fd = -1;
    a->w = calloc((size_t)a->cfg.nproc, sizeof *a->w);
    if (!a->w)
        return -ENOMEM;
    if ((rc = el__agent_make_run_dir(a))) {
        snprintf(res->errmsg, sizeof res->errmsg,
                 "cannot create the log "
                 "directory under %s: %s",
                 a->cfg.log_dir ? a->cfg.log_dir : "$TMPDIR", strerror(-rc));
        finish(a, EL_AGENT_EXEC_ERROR);
        return 0;
    }
    if ((rc = el__ftimer_open(a, res->errmsg, sizeof res->errmsg))) {
        finish(a, EL_AGENT_EXEC_ERROR);
        return 0;
    }
    /* torchrun's line; shown by default when it holds the workers' logs. */
    int logs = 0;
    for (int i = 0; a->cfg.redirect && i < a->cfg.nproc; i++)
        logs |= a->cfg.redirect[i];
    event(a, logs ? EL_AGENT_WARN : EL_AGENT_INFO, "log directory set to: %s",
          a->run_dir);
    int nfd = el_rdzv_notify_fd(r);
    if (nfd >= 0) {
        /* Watched while HEALTHY only (set_state). */
        struct epoll_event ev = {.events = 0, .data.u64 = EL__TAG_RDZV};
        if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, nfd, &ev) == 0)
            a->rdzv_fd = nfd;
    }

    while (!is_final(a->state)) {
        switch (a->state) {
        case EL__GS_INIT:
        case EL__GS_RENDEZVOUS:
            next_round(a);
            break;
        case EL__GS_HEALTHY:
        case EL__GS_STOPPING:
        case EL__GS_BACKOFF:
            if ((rc = dispatch(a)) < 0)
                return rc;
            break;
        default:
            return -EINVAL; /* a state nothing leaves: a bug */
        }
    }
    if (a->rdzv_fd >= 0)
        epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->rdzv_fd, NULL);
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
