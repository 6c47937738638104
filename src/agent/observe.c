/* observe.c -- what the agent records in cfg.metrics (docs/METRICS.md):
 * the round and the job's size, the group's state, workers by state,
 * restarts, worker exits, node joins and leaves, and the rendezvous,
 * failure detection and recovery times; and the workers' progress lines
 * (ELRUN_PROGRESS_FD) turned into step, samples, step rate and the time
 * since the last step, per rank.
 *
 * agent.c and spawn.c call the el__obs_* hooks at state changes; each is a
 * no-op when metrics are off (a->obs NULL), so the agent costs the same as
 * before without --metrics-addr: no pipe, no variable, no thread.  The
 * same hooks feed the job's events (events.c, el__ev_*) first, whether
 * metrics are on or not.
 *
 * The same hooks feed the live dashboard's record (cfg.dashboard,
 * src/dashboard) through el__dash_event(), when it is on.
 *
 * Threads: the hooks run on the agent's thread.  The per-rank progress
 * state is also read by the scrape's collect hook (the metrics thread), so
 * it sits behind obs->mu; everything else goes straight to the registry,
 * which locks itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent_impl.h"
#include "dashboard/dash_int.h"
#include "elrun/metrics.h"
#include "elrun/net.h"
#include "elrun/rdzv.h"

struct rank_progress {
    int rank;     /* global rank, -1 when the slot is unused   */
    int rfd, wfd; /* the pipe: agent's read end, worker's end  */
    char line[256];
    size_t len;
    int overlong; /* dropping the rest of a too-long line      */
    int64_t step, samples;
    int64_t last_ns; /* el_now_ns of the last progress line       */
    int64_t anchor_step, anchor_ns; /* for the step rate                  */
    double rate;                    /* the last measured, -1: none yet    */
};

struct el__agent_obs {
    struct el_metrics *reg;
    struct el_dash *dash; /* NULL: no dashboard */
    struct el_metric *round, *nodes, *world, *node_rank, *local, *state,
        *workers, *restarts, *restarts_left, *rounds, *rdzv_s, *detect_s,
        *recover_s, *exits, *joins, *leaves, *membership, *step, *samples,
        *rate, *since;
    int last_nodes;     /* nodes in the previous round, 0 before     */
    int64_t failure_ns; /* when the pending failure was detected     */
    const char *failure_cause;
    int64_t rdzv_start_ns;
    pthread_mutex_t mu; /* guards p[] against the collect hook       */
    int np;
    struct rank_progress *p;
};

static const char *const group_states[] = {
    [EL__GS_INIT] = "init",         [EL__GS_RENDEZVOUS] = "rendezvous",
    [EL__GS_HEALTHY] = "healthy",   [EL__GS_UNHEALTHY] = "unhealthy",
    [EL__GS_STOPPING] = "stopping", [EL__GS_BACKOFF] = "backoff",
    [EL__GS_STOPPED] = "stopped",   [EL__GS_SUCCEEDED] = "succeeded",
    [EL__GS_FAILED] = "failed",     [EL__GS_UNKNOWN] = "unknown",
};

/* Seconds, from 1 ms to 30 min: rendezvous, detection, recovery. */
static const double time_buckets[] = {
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1,
    2.5,    5,      10,    30,    60,   120,  300, 600,  1800};
#define NB (int)(sizeof time_buckets / sizeof time_buckets[0])

static void collect(void *arg);

int el__obs_open(struct el_agent *a)
{
    if (!a->cfg.metrics)
        return 0;
    struct el__agent_obs *o = calloc(1, sizeof *o);
    if (!o)
        return -ENOMEM;
    o->reg = a->cfg.metrics;
    o->dash = a->cfg.dashboard;
    o->np = a->cfg.nproc;
    o->p = calloc((size_t)o->np, sizeof *o->p);
    if (!o->p) {
        free(o);
        return -ENOMEM;
    }
    for (int i = 0; i < o->np; i++)
        o->p[i] = (struct rank_progress){
            .rank = -1, .rfd = -1, .wfd = -1, .rate = -1};
    pthread_mutex_init(&o->mu, NULL);
    static const struct el_metric_def defs[] = {
#define O(f) offsetof(struct el__agent_obs, f)
        {O(round), EL_METRIC_GAUGE, "elrun_round",
         "The rendezvous round this node's workers run in (TORCHELASTIC_RESTART_COUNT).",
         NULL},
        {O(nodes), EL_METRIC_GAUGE, "elrun_job_nodes",
         "Nodes in the current round.", NULL},
        {O(world), EL_METRIC_GAUGE, "elrun_job_workers",
         "Workers in the current round, all nodes (WORLD_SIZE).", NULL},
        {O(node_rank), EL_METRIC_GAUGE, "elrun_node_rank",
         "This node's rank in the current round (GROUP_RANK).", NULL},
        {O(local), EL_METRIC_GAUGE, "elrun_node_workers",
         "Workers this agent runs per round (--nproc-per-node).", NULL},
        {O(state), EL_METRIC_GAUGE, "elrun_worker_group_state",
         "1 for the worker group's current state, 0 for the others.", "state"},
        {O(workers), EL_METRIC_GAUGE, "elrun_workers",
         "This node's workers of the current round by state.", "state"},
        {O(restarts), EL_METRIC_COUNTER, "elrun_restarts_total",
         "Restarts after a worker failure (the budget spent).", NULL},
        {O(restarts_left), EL_METRIC_GAUGE, "elrun_restarts_remaining",
         "Restarts left before the job fails (--max-restarts minus used).",
         NULL},
        {O(rounds), EL_METRIC_COUNTER, "elrun_rounds_total",
         "Rounds this agent took part in.", NULL},
        {O(rdzv_s), EL_METRIC_HISTOGRAM, "elrun_rendezvous_duration_seconds",
         "Time in the rendezvous, from joining to the round being complete.",
         NULL},
        {O(detect_s), EL_METRIC_HISTOGRAM, "elrun_failure_detection_seconds",
         "From the agent's wake-up by a worker's exit (SIGCHLD on the signalfd) "
         "to the group's stop begun.",
         NULL},
        {O(recover_s), EL_METRIC_HISTOGRAM, "elrun_recovery_seconds",
         "From a failure's detection to every worker of the next round running.",
         "cause"},
        {O(exits), EL_METRIC_COUNTER, "elrun_worker_exits_total",
         "Worker exits by exit code or signal; failed=1 when the exit failed the group.",
         "code,signal,failed"},
        {O(joins), EL_METRIC_COUNTER, "elrun_node_joins_total",
         "Nodes gained between two consecutive rounds, as this agent saw them.",
         NULL},
        {O(leaves), EL_METRIC_COUNTER, "elrun_node_leaves_total",
         "Nodes lost (left or died) between two consecutive rounds, as this agent saw them.",
         NULL},
        {O(membership), EL_METRIC_COUNTER, "elrun_membership_changes_total",
         "Times this agent's healthy workers were stopped because other nodes "
         "waited for a new round (a node arrived or died).",
         NULL},
        {O(step), EL_METRIC_GAUGE, "elrun_worker_step",
         "The last step a worker reported (ELRUN_PROGRESS_FD).",
         "rank,local_rank"},
        {O(samples), EL_METRIC_GAUGE, "elrun_worker_samples",
         "The sample count a worker last reported.", "rank,local_rank"},
        {O(rate), EL_METRIC_GAUGE, "elrun_worker_steps_per_second",
         "Steps per second over the last second or more of reports.",
         "rank,local_rank"},
        {O(since), EL_METRIC_GAUGE, "elrun_worker_seconds_since_progress",
         "Seconds since the worker's last progress line, at scrape time.",
         "rank,local_rank"},
#undef O
    };
    int rc = el_metrics_register_table(
        o->reg, o, defs, sizeof defs / sizeof defs[0], time_buckets, NB);
    if (rc < 0) {
        pthread_mutex_destroy(&o->mu);
        free(o->p);
        free(o);
        return rc;
    }
    el_metric_set(o->local, NULL, a->cfg.nproc);
    el_metric_set(o->restarts_left, NULL, a->cfg.max_restarts);
    for (int s = 0; s <= EL__GS_UNKNOWN; s++)
        el_metric_set(o->state, (const char *[]){group_states[s]},
                      s == EL__GS_INIT);
    el_metrics_on_collect(o->reg, collect, o);
    a->obs = o;
    return 0;
}

void el__obs_close(struct el_agent *a)
{
    struct el__agent_obs *o = a->obs;
    if (!o)
        return;
    el_metrics_off_collect(o->reg, collect, o);
    for (int i = 0; i < o->np; i++) {
        if (o->p[i].rfd >= 0)
            close(o->p[i].rfd);
        if (o->p[i].wfd >= 0)
            close(o->p[i].wfd);
    }
    pthread_mutex_destroy(&o->mu);
    free(o->p);
    free(o);
    a->obs = NULL;
}

/* ---- state changes ---- */

void el__obs_state(struct el_agent *a, int from, int to)
{
    el__ev_state(a, from, to);
    struct el__agent_obs *o = a->obs;
    if (!o)
        return;
    el_metric_set(o->state, (const char *[]){group_states[from]}, 0);
    el_metric_set(o->state, (const char *[]){group_states[to]}, 1);
    struct el__dash_event ev = {.kind = EL__DASH_STATE, .round = -1};
    snprintf(ev.text, sizeof ev.text, "%s", group_states[to]);
    el__dash_event(o->dash, &ev);
    if (to == EL__GS_RENDEZVOUS)
        o->rdzv_start_ns = el_now_ns();
    if (to == EL__GS_HEALTHY)
        el__obs_workers(a);
    if (to == EL__GS_HEALTHY && o->failure_ns) {
        double secs = (double)(el_now_ns() - o->failure_ns) / 1e9;
        el_metric_observe(o->recover_s, (const char *[]){o->failure_cause},
                          secs);
        o->failure_ns = 0;
        el__dash_event(o->dash,
                       &(struct el__dash_event){.kind = EL__DASH_RECOVERY,
                                                .round = -1,
                                                .seconds = secs});
    }
}

void el__obs_round(struct el_agent *a, const struct el_rdzv_info *info)
{
    el__ev_round(a, info);
    struct el__agent_obs *o = a->obs;
    if (!o)
        return;
    if (o->rdzv_start_ns)
        el_metric_observe(o->rdzv_s, NULL,
                          (double)(el_now_ns() - o->rdzv_start_ns) / 1e9);
    el_metric_set(o->round, NULL, (double)info->round);
    el_metric_set(o->nodes, NULL, info->num_nodes);
    el_metric_set(o->world, NULL, info->world_size);
    el_metric_set(o->node_rank, NULL, info->node_rank);
    el_metric_add(o->rounds, NULL, 1);
    if (o->last_nodes && info->num_nodes > o->last_nodes)
        el_metric_add(o->joins, NULL, info->num_nodes - o->last_nodes);
    if (info->num_nodes < o->last_nodes)
        el_metric_add(o->leaves, NULL, o->last_nodes - info->num_nodes);
    o->last_nodes = info->num_nodes;
    el__dash_event(o->dash,
                   &(struct el__dash_event){
                       .kind = EL__DASH_ROUND,
                       .round = info->round,
                       .nodes = info->num_nodes,
                       .world = info->world_size,
                       .node_rank = info->node_rank,
                       .members = info->members[0] ? info->members : NULL});
    /* New ranks: the old per-rank series go. */
    el_metric_clear(o->step);
    el_metric_clear(o->samples);
    el_metric_clear(o->rate);
    el_metric_clear(o->since);
    pthread_mutex_lock(&o->mu);
    for (int i = 0; i < o->np; i++) {
        struct rank_progress *p = &o->p[i];
        int rfd = p->rfd, wfd = p->wfd;
        *p = (struct rank_progress){
            .rank = info->base_rank + i, .rfd = rfd, .wfd = wfd, .rate = -1};
    }
    pthread_mutex_unlock(&o->mu);
}

void el__obs_workers(struct el_agent *a)
{
    struct el__agent_obs *o = a->obs;
    if (!o)
        return;
    int n[4] = {0};
    for (int i = 0; i < a->cfg.nproc; i++) {
        const struct el__worker *w = &a->w[i];
        if (w->pid <= 0)
            continue;
        n[w->alive                                              ? 0
          : w->failed                                           ? 2
          : WIFEXITED(w->status) && WEXITSTATUS(w->status) == 0 ? 1
                                                                : 3]++;
    }
    static const char *const names[] = {"running", "succeeded", "failed",
                                        "stopped"};
    for (int s = 0; s < 4; s++)
        el_metric_set(o->workers, (const char *[]){names[s]}, n[s]);
}

void el__obs_exit(struct el_agent *a, const struct el__worker *w)
{
    struct el__agent_obs *o = a->obs;
    if (!o)
        return;
    char code[16] = "", sig[16] = "";
    if (WIFSIGNALED(w->status)) {
        const char *s = sigabbrev_np(WTERMSIG(w->status));
        snprintf(sig, sizeof sig, "SIG%s", s ? s : "?");
    } else {
        snprintf(code, sizeof code, "%d", WEXITSTATUS(w->status));
    }
    el_metric_add(o->exits, (const char *[]){code, sig, w->failed ? "1" : "0"},
                  1);
    el__dash_event(
        o->dash, &(struct el__dash_event){
                     .kind = w->failed ? EL__DASH_FAILURE : EL__DASH_EXIT,
                     .round = -1,
                     .rank = w->global_rank,
                     .code = WIFEXITED(w->status) ? WEXITSTATUS(w->status) : 0,
                     .sig = WIFSIGNALED(w->status) ? WTERMSIG(w->status) : 0});
}

void el__obs_failure(struct el_agent *a, const char *cause)
{
    el__ev_failure(a, cause);
    struct el__agent_obs *o = a->obs;
    if (!o)
        return;
    int64_t now = el_now_ns();
    if (strcmp(cause, "worker_failure") == 0 && a->woke_ns)
        el_metric_observe(o->detect_s, NULL, (double)(now - a->woke_ns) / 1e9);
    else {
        el_metric_add(o->membership, NULL, 1);
        el__dash_event(o->dash, &(struct el__dash_event){
                                    .kind = EL__DASH_MEMBERSHIP, .round = -1});
    }
    if (!o->failure_ns) {
        o->failure_ns = now;
        o->failure_cause = cause;
    }
}

void el__obs_failures(struct el_agent *a, const struct el_agent_result *res)
{
    el__ev_failures(a, res);
}

void el__obs_restarts(struct el_agent *a)
{
    el__ev_restarts(a);
    struct el__agent_obs *o = a->obs;
    if (!o)
        return;
    el_metric_set(o->restarts, NULL, a->res->restarts);
    int left = a->cfg.max_restarts - a->res->restarts;
    el_metric_set(o->restarts_left, NULL, left > 0 ? left : 0);
    el__dash_event(o->dash,
                   &(struct el__dash_event){.kind = EL__DASH_RESTART,
                                            .round = -1,
                                            .restarts = a->res->restarts});
}

/* ---- progress lines ---- */

int el__obs_progress_pipe(struct el_agent *a, int i)
{
    struct el__agent_obs *o = a->obs;
    if (!o || i >= o->np)
        return -1;
    struct rank_progress *p = &o->p[i];
    if (p->rfd >= 0) {
        epoll_ctl(a->epfd, EPOLL_CTL_DEL, p->rfd, NULL);
        close(p->rfd);
    }
    if (p->wfd >= 0)
        close(p->wfd);
    p->rfd = p->wfd = -1;
    int fds[2];
    /* The worker's end: not close-on-exec in the worker (spawn.c clears
     * the flag in the child), non-blocking so that a full pipe drops a
     * line rather than stalling training. */
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0)
        return -1;
    struct epoll_event ev = {.events = EPOLLIN,
                             .data.u64 = EL__TAG_PROGRESS + (uint64_t)i};
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, fds[0], &ev) < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    p->rfd = fds[0];
    p->wfd = fds[1];
    return p->wfd;
}

void el__obs_progress_forked(struct el_agent *a, int i)
{
    struct el__agent_obs *o = a->obs;
    if (!o || i >= o->np || o->p[i].wfd < 0)
        return;
    close(o->p[i].wfd);
    o->p[i].wfd = -1;
}

/* "step N samples M" or "step N", optionally followed by " loss F" (the
 * dashboard shows it); anything else is ignored. */
static void take_line(struct el_agent *a, struct el__agent_obs *o,
                      struct rank_progress *p, int i)
{
    long long step, samples = -1;
    int n = sscanf(p->line, "step %lld samples %lld", &step, &samples);
    if (n < 1 || step < 0)
        return;
    double loss = NAN;
    const char *l = strstr(p->line, " loss ");
    if (l) {
        char *end;
        double v = strtod(l + 6, &end);
        if (end != l + 6 && (*end == 0 || *end == ' ') && isfinite(v))
            loss = v;
    }
    int64_t now = el_now_ns();
    char rank[16], lr[16];
    snprintf(rank, sizeof rank, "%d", p->rank);
    snprintf(lr, sizeof lr, "%d", i);
    const char *const v[] = {rank, lr};
    pthread_mutex_lock(&o->mu);
    p->step = step;
    if (n == 2 && samples >= 0)
        p->samples = samples;
    if (!p->anchor_ns) {
        p->anchor_ns = now;
        p->anchor_step = step;
    }
    double rate = -1;
    if (now - p->anchor_ns >= 1000000000LL) {
        rate = (double)(step - p->anchor_step) * 1e9 /
               (double)(now - p->anchor_ns);
        p->anchor_ns = now;
        p->anchor_step = step;
    }
    p->last_ns = now;
    if (rate >= 0)
        p->rate = rate;
    /* The node's summary for the job's state (events.c): the slowest of
     * its ranks that reported. */
    int64_t nstep = -1;
    double nrate = -1;
    int nranks = 0;
    for (int k = 0; k < o->np; k++) {
        const struct rank_progress *q = &o->p[k];
        if (q->rank < 0 || !q->last_ns)
            continue;
        nranks++;
        if (nstep < 0 || q->step < nstep)
            nstep = q->step;
        if (q->rate >= 0 && (nrate < 0 || q->rate < nrate))
            nrate = q->rate;
    }
    pthread_mutex_unlock(&o->mu);
    el__ev_progress(a, nstep, nrate, nranks);
    el_metric_set(o->step, v, (double)step);
    if (n == 2 && samples >= 0)
        el_metric_set(o->samples, v, (double)samples);
    if (rate >= 0)
        el_metric_set(o->rate, v, rate);
    el_metric_set(o->since, v, 0);
    el__dash_progress(o->dash, p->rank, i, step, n == 2 ? samples : -1, rate,
                      loss);
}

void el__obs_progress(struct el_agent *a, int i)
{
    struct el__agent_obs *o = a->obs;
    if (!o || i >= o->np || o->p[i].rfd < 0)
        return;
    struct rank_progress *p = &o->p[i];
    char buf[4096];
    ssize_t n = read(p->rfd, buf, sizeof buf);
    if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            epoll_ctl(a->epfd, EPOLL_CTL_DEL, p->rfd, NULL);
            close(p->rfd);
            p->rfd = -1;
        }
        return;
    }
    for (ssize_t k = 0; k < n; k++) {
        char c = buf[k];
        if (c == '\n') {
            if (!p->overlong) {
                p->line[p->len] = 0;
                take_line(a, o, p, i);
            }
            p->len = 0;
            p->overlong = 0;
        } else if (p->len + 1 < sizeof p->line) {
            p->line[p->len++] = c;
        } else {
            p->overlong = 1;
        }
    }
}

/* At scrape time, on the metrics thread. */
static void collect(void *arg)
{
    struct el__agent_obs *o = arg;
    int64_t now = el_now_ns();
    pthread_mutex_lock(&o->mu);
    for (int i = 0; i < o->np; i++) {
        struct rank_progress *p = &o->p[i];
        if (p->rank < 0 || !p->last_ns)
            continue;
        char rank[16], lr[16];
        snprintf(rank, sizeof rank, "%d", p->rank);
        snprintf(lr, sizeof lr, "%d", i);
        el_metric_set(o->since, (const char *[]){rank, lr},
                      (double)(now - p->last_ns) / 1e9);
    }
    pthread_mutex_unlock(&o->mu);
}
