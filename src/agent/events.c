/* events.c -- what the agent tells the job's event history
 * (cfg.events, docs/EVENTS.md), fed by observe.c's hooks:
 *   round     the round's rank 0: nodes, world, members, who joined and
 *             who left (dead or not), by name and by label, and the cause
 *             (a worker failure on any node, named: el_rdzv_failure)
 *   failure   the node whose worker failed: rank, host, exit code or
 *             signal, the error file's message (one per failed worker)
 *   restart   the node that spent a restart: used, left
 *   recovery  the round's rank 0: from the failure (or the change of
 *             membership) to every worker of the next round running
 *   end       the last round's rank 0: the job's outcome; "leave" from a
 *             node that leaves on its own (a signal, a lost rendezvous)
 * and, with --event-log-handler console, torchrun's own status event JSON
 * at the end (torchelastic.worker.status.SUCCEEDED|FAILED, the fields of
 * torch's SimpleElasticAgent._construct_event, in its order).
 *
 * Runs on the agent's thread.  el_events_emit never blocks: building a
 * few hundred bytes of JSON is all an event costs the agent.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_impl.h"
#include "elrun/events.h"
#include "elrun/net.h"
#include "elrun/rdzv.h"

struct el__agent_ev {
    struct el_rdzv_member_info *prev; /* the last round's members        */
    int nprev;
    int64_t round;
    int node_rank, num_nodes, world;
    const char *cause;  /* why the group was last stopped, NULL: none */
    int64_t failure_ns; /* when; 0 once recovered                     */
    int64_t start_ns;   /* el_agent_run's start (total_run_time)       */
    char host[256];
    char id[192];      /* this agent's member id, "": not known yet  */
    int64_t pub_ns;    /* when the progress record was last queued   */
    int64_t pub_step;  /* its step, -1: none                         */
    int64_t pub_round; /* its round                                  */
    int pub_rated;     /* it had a step rate                         */
    int round_wf;      /* the last round's cause was a worker failure
                          on some node (rank 0's round event)        */
};

/* At most one progress record per node in this time. */
#define PROGRESS_EVERY_NS 2000000000LL

int el__ev_open(struct el_agent *a)
{
    if (!a->cfg.events && !a->cfg.torch_events_console)
        return 0;
    struct el__agent_ev *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->round = -1;
    e->node_rank = -1;
    e->pub_step = -1;
    e->pub_round = -1;
    e->start_ns = el_now_ns();
    el_agent_fqdn(e->host, sizeof e->host);
    a->ev = e;
    return 0;
}

void el__ev_close(struct el_agent *a)
{
    if (!a->ev)
        return;
    free(a->ev->prev);
    free(a->ev);
    a->ev = NULL;
}

static void emit(struct el_agent *a, const char *kind, json_t *fields)
{
    if (!fields)
        return;
    char *text = json_dumps(fields, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(fields);
    if (text)
        el_events_emit(a->cfg.events, kind, a->ev->round, text);
    free(text);
}

static int has(const struct el_rdzv_member_info *m, int n, const char *id)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(m[i].id, id))
            return 1;
    return 0;
}

/* The member whose workers' failure ended the round before 'round', as
 * the rendezvous recorded it (el_rdzv_failure): 1 with its label, else 0.
 * Backends without a job-wide budget record none: this node's own failure
 * (its cause) is all it knows there. */
static int failed_node(struct el_agent *a, int64_t round, char *label,
                       size_t cap)
{
    struct el__agent_ev *e = a->ev;
    struct el_rdzv_member_info who;
    int rc = round > 0 ? el_rdzv_failure(a->r, round - 1, &who) : 0;
    if (rc == 1) {
        snprintf(label, cap, "%s", who.label);
        return 1;
    }
    if (rc == -ENOTSUP && e->cause && !strcmp(e->cause, "worker_failure")) {
        char own[EL_HOST_MAX + 8];
        el_rdzv_label(e->id, own, sizeof own);
        snprintf(label, cap, "%s", e->id[0] ? own : "");
        return 1;
    }
    return 0;
}

void el__ev_round(struct el_agent *a, const struct el_rdzv_info *info)
{
    struct el__agent_ev *e = a->ev;
    if (!e)
        return;
    e->round = info->round;
    e->node_rank = info->node_rank;
    e->num_nodes = info->num_nodes;
    e->world = info->world_size;
    if (!a->cfg.events)
        return;
    struct el_rdzv_member_info *m = NULL;
    int n = 0;
    int64_t mround;
    if (el_rdzv_members(a->r, &mround, &m, &n) < 0)
        n = 0;
    if (info->node_rank >= 0 && info->node_rank < n) {
        snprintf(e->id, sizeof e->id, "%s", m[info->node_rank].id);
        el_events_set_label(a->cfg.events, m[info->node_rank].label);
    }
    if (info->node_rank == 0) {
        /* Names (as before labels) and labels (two agents of one host
         * differ), both in rank order. */
        json_t *members = json_array(), *joined = json_array(),
               *left = json_array(), *died = json_array(),
               *lmembers = json_array(), *ljoined = json_array(),
               *lleft = json_array(), *ldied = json_array();
        for (int i = 0; i < n; i++) {
            json_array_append_new(members, json_string(m[i].name));
            json_array_append_new(lmembers, json_string(m[i].label));
            if (e->nprev && !has(e->prev, e->nprev, m[i].id)) {
                json_array_append_new(joined, json_string(m[i].name));
                json_array_append_new(ljoined, json_string(m[i].label));
            }
        }
        for (int i = 0; i < e->nprev; i++) {
            if (has(m, n, e->prev[i].id))
                continue;
            json_array_append_new(left, json_string(e->prev[i].name));
            json_array_append_new(lleft, json_string(e->prev[i].label));
            if (el_rdzv_is_dead(a->r, e->prev[i].id)) {
                json_array_append_new(died, json_string(e->prev[i].name));
                json_array_append_new(ldied, json_string(e->prev[i].label));
            }
        }
        /* A failure on any node: the rendezvous says whose (this node may
         * only have seen other nodes wait for a new round). */
        char failed[EL_HOST_MAX + 8] = "";
        int wf = !json_array_size(left) &&
                 failed_node(a, info->round, failed, sizeof failed);
        const char *cause = !e->cause && !e->nprev    ? "start"
                            : json_array_size(died)   ? "node_died"
                            : json_array_size(left)   ? "node_left"
                            : wf                      ? "worker_failure"
                            : json_array_size(joined) ? "node_joined"
                                                      : "restart";
        json_t *o = json_pack(
            "{s:I, s:i, s:i, s:i, s:o, s:o, s:o, s:o, s:s, s:i, s:i, s:i, "
            "s:o, s:o, s:o, s:o}",
            "round", (json_int_t)info->round, "nodes", info->num_nodes, "world",
            info->world_size, "lws", a->cfg.nproc, "members", members, "joined",
            joined, "left", left, "died", died, "cause", cause, "min_nodes",
            a->cfg.rdzv_min_nodes, "max_nodes", a->cfg.rdzv_max_nodes,
            "max_restarts", a->cfg.max_restarts, "member_labels", lmembers,
            "joined_labels", ljoined, "left_labels", lleft, "died_labels",
            ldied);
        e->round_wf = wf;
        if (o && wf && failed[0])
            json_object_set_new(o, "failed_node", json_string(failed));
        emit(a, "round", o);
    }
    free(e->prev);
    e->prev = m;
    e->nprev = n;
}

void el__ev_failure(struct el_agent *a, const char *cause)
{
    struct el__agent_ev *e = a->ev;
    if (!e)
        return;
    e->cause = cause;
    if (!e->failure_ns)
        e->failure_ns = el_now_ns();
}

/* The first line of a message (a traceback's last line is in the box
 * already: the error file's "message" is what torch shows first). */
static json_t *first_line(const char *msg)
{
    if (!msg)
        return json_string("");
    while (*msg == ' ' || *msg == '\n')
        msg++;
    size_t n = strcspn(msg, "\n");
    if (n > 1000)
        n = 1000;
    return json_stringn_nocheck(msg, n);
}

void el__ev_failures(struct el_agent *a, const struct el_agent_result *res)
{
    struct el__agent_ev *e = a->ev;
    if (!e || !a->cfg.events)
        return;
    for (int i = 0; i < res->nfailures; i++) {
        const struct el_agent_failure *f = &res->failures[i];
        int sig = f->exitcode < 0 ? -f->exitcode : 0;
        char sname[32] = "";
        if (sig) {
            const char *s = sigabbrev_np(sig);
            snprintf(sname, sizeof sname, "SIG%s", s ? s : "?");
        }
        json_t *o = json_pack(
            "{s:i, s:i, s:i, s:s, s:i, s:i, s:s, s:o, s:I, s:b}", "rank",
            f->global_rank, "local_rank", f->local_rank, "pid", (int)f->pid,
            "host", e->host, "exitcode", sig ? -1 : f->exitcode, "signal", sig,
            "signal_name", sname, "message", first_line(f->message), "ran_ms",
            (json_int_t)f->ran_ms, "root_cause", i == res->root);
        if (o && f->error_file)
            json_object_set_new(o, "error_file", json_string(f->error_file));
        emit(a, "failure", o);
    }
}

void el__ev_restarts(struct el_agent *a)
{
    struct el__agent_ev *e = a->ev;
    if (!e || !a->cfg.events)
        return;
    int left = a->cfg.max_restarts - a->res->restarts;
    emit(a, "restart",
         json_pack("{s:i, s:i, s:i}", "restarts", a->res->restarts,
                   "max_restarts", a->cfg.max_restarts, "left",
                   left > 0 ? left : 0));
}

static const char *const outcome_names[] = {
    [EL_AGENT_SUCCEEDED] = "succeeded",   [EL_AGENT_FAILED] = "failed",
    [EL_AGENT_SIGNALED] = "signaled",     [EL_AGENT_RDZV_ERROR] = "rdzv_error",
    [EL_AGENT_EXEC_ERROR] = "exec_error", [EL_AGENT_PREEMPTED] = "preempted",
};

/* torchrun's launch_agent records SUCCEEDED when agent.run() returned
 * (even with failed workers: "agent.run() has succeeded NOT that workers
 * have succeeded") and FAILED when it raised (a signal, a rendezvous
 * error), with the traceback as raw_error. */
static void torch_event(struct el_agent *a)
{
    struct el__agent_ev *e = a->ev;
    enum el_agent_outcome oc = a->res->outcome;
    int ok = oc == EL_AGENT_SUCCEEDED || oc == EL_AGENT_FAILED ||
             oc == EL_AGENT_EXEC_ERROR;
    const char *state = ok ? "SUCCEEDED" : "FAILED";
    char raw[1600];
    if (oc == EL_AGENT_SIGNALED || oc == EL_AGENT_PREEMPTED)
        snprintf(raw, sizeof raw,
                 "Traceback (most recent call last):\n"
                 "torch.distributed.elastic.multiprocessing.api."
                 "SignalException: Process %d got signal: %d\n",
                 (int)getpid(), a->res->signal);
    else
        snprintf(raw, sizeof raw,
                 "Traceback (most recent call last):\n"
                 "torch.distributed.elastic.rendezvous.api."
                 "RendezvousError: %s\n",
                 a->res->errmsg);
    json_t *md = json_pack("{s:i, s:s}", "group_world_size",
                           e->num_nodes > 0 ? e->num_nodes : 0, "entry_point",
                           a->cfg.argv && a->cfg.argv[0] ? a->cfg.argv[0] : "");
    char *mds =
        md ? json_dumps(md, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII) : NULL;
    json_decref(md);
    json_t *meta = json_pack(
        "{s:s, s:n, s:i, s:n, s:s, s:s, s:s, s:I, s:s, s:o, s:s, s:i, s:n}",
        "run_id", a->cfg.run_id ? a->cfg.run_id : "none", "global_rank",
        "group_rank", e->node_rank >= 0 ? e->node_rank : 0, "worker_id", "role",
        a->cfg.role ? a->cfg.role : "default", "hostname", e->host, "state",
        state, "total_run_time",
        (json_int_t)((el_now_ns() - e->start_ns) / 1000000000LL),
        "rdzv_backend", a->r ? el_rdzv_backend(a->r) : "static", "raw_error",
        ok ? json_null() : json_string(raw), "metadata", mds ? mds : "{}",
        "agent_restarts", a->res->restarts, "duration_ms");
    free(mds);
    json_t *ev = json_pack("{s:s+, s:s, s:i, s:o}", "name",
                           "torchelastic.worker.status.", state, "source",
                           "AGENT", "timestamp", 0, "metadata", meta);
    char *line =
        ev ? json_dumps(ev, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII) : NULL;
    json_decref(ev);
    if (line) {
        size_t n = strlen(line);
        char *buf = realloc(line, n + 2);
        if (buf) {
            buf[n] = '\n';
            if (write(a->cfg.err_fd >= 0 ? a->cfg.err_fd : 2, buf, n + 1) < 0) {
                /* stderr is gone: nothing to tell */
            }
            line = buf;
        }
        free(line);
    }
}

void el__ev_state(struct el_agent *a, int from, int to)
{
    struct el__agent_ev *e = a->ev;
    if (!e)
        return;
    if (to == EL__GS_HEALTHY && e->failure_ns) {
        double s = (double)(el_now_ns() - e->failure_ns) / 1e9;
        if (a->cfg.events && e->node_rank == 0)
            emit(a, "recovery",
                 json_pack("{s:f, s:s}", "seconds", s, "cause",
                           e->round_wf ? "worker_failure"
                           : e->cause  ? e->cause
                                       : "membership"));
        e->failure_ns = 0;
    }
    if (to != EL__GS_SUCCEEDED && to != EL__GS_FAILED && to != EL__GS_STOPPED)
        return;
    enum el_agent_outcome oc = a->res->outcome;
    if (a->cfg.events) {
        int job = oc == EL_AGENT_SUCCEEDED || oc == EL_AGENT_FAILED;
        const char *why = oc == EL_AGENT_FAILED ? "no restart left"
                          : a->res->errmsg[0]   ? a->res->errmsg
                                                : "";
        if (!job || e->node_rank <= 0) {
            json_t *o =
                json_pack("{s:s, s:s, s:I, s:i}", "outcome", outcome_names[oc],
                          "why", why, "rounds", (json_int_t)a->res->rounds,
                          "restarts", a->res->restarts);
            if (o && a->res->signal)
                json_object_set_new(o, "signal", json_integer(a->res->signal));
            emit(a, job ? "end" : "leave", o);
        }
        /* A node that leaves a job going on takes its progress record
         * with it; the job's end keeps the last step of every node. */
        if (!job && e->pub_step >= 0)
            el_events_progress(a->cfg.events, e->id, NULL);
    }
    if (a->cfg.torch_events_console)
        torch_event(a);
}

/* "progress" is not an event: one record per node, replaced (docs/
 * EVENTS.md).  Runs on the agent's thread, queues at most one record per
 * PROGRESS_EVERY_NS (and one more when the first rate is measured), none
 * when the step has not changed. */
void el__ev_progress(struct el_agent *a, int64_t step, double rate, int nranks)
{
    struct el__agent_ev *e = a->ev;
    if (!e || !a->cfg.events || !e->id[0] || step < 0)
        return;
    int64_t now = el_now_ns();
    if (step == e->pub_step && e->round == e->pub_round)
        return;
    /* The first rate measured goes at once: a reader sees it a second
     * after the workers' start, not after the period. */
    if (e->pub_ns && now - e->pub_ns < PROGRESS_EVERY_NS &&
        e->round == e->pub_round && (e->pub_rated || rate < 0))
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t wall = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    json_t *o =
        json_pack("{s:s, s:I, s:i, s:I, s:f, s:I, s:i}", "node", e->host,
                  "round", (json_int_t)e->round, "node_rank", e->node_rank,
                  "step", (json_int_t)step, "rate", rate >= 0 ? rate : -1.0,
                  "last_ms", (json_int_t)wall, "ranks", nranks);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (text && el_events_progress(a->cfg.events, e->id, text) == 0) {
        e->pub_ns = now;
        e->pub_step = step;
        e->pub_round = e->round;
        e->pub_rated = rate >= 0;
    }
    free(text);
}
