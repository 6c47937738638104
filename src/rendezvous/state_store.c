/* state_store.c -- the elastic rendezvous ("c10d" with --nnodes=MIN:MAX,
 * MAX > 1) with its state in the elrun store at the endpoint: the state
 * primitives of elastic.h; the rules themselves are elastic.c's.
 *
 * Every key lives under /elrun/<run_id>/ (docs/RENDEZVOUS.md describes
 * them):
 *
 *   round            the current round number R (decimal)
 *   r<R>/joined      ADD counter: a joiner's sequence number
 *   r<R>/node/<seq>  "v1 <id> <lws> <prev_rank> <name>" per joiner
 *   r<R>/deadline    wall-clock ms when round R completes (set once MIN
 *                    nodes joined: now + last_call_timeout; 0 = at once)
 *   r<R>/members     the sealed member list; written once (compare-and-set)
 *   r<R>/failed      ADD counter: the first failure of a round charges the
 *                    job's restart budget, later ones of the same round don't
 *   restarts         rounds charged so far (the budget is the whole job's)
 *   failure          "<R> <id>": the last charged failure, its round and the
 *                    node that reported it (written before round R+1 opens)
 *   events           an append-only log the agents watch: "round R",
 *                    "dead <id>" (appended by the server when an agent's
 *                    connection closes or goes silent), "closed <why>"
 *   closed           present once the job ended ("ok" or "failed: ...")
 *
 * Joining round R: ADD r<R>/joined gives a sequence number; the node that
 * makes the count reach MIN sets the deadline, the one that reaches MAX
 * seals at once.  Sealing orders the joiners: the previous round's members
 * first in their old order (stable ranks), then newcomers by arrival, and
 * keeps the first MAX; the others are hot spares for the next round.  A node
 * that finds round R sealed with fewer than MAX members opens round R+1
 * (scale-up); one that finds it full waits as a spare.
 *
 * Liveness: a background thread keeps its own connection, on which it
 * registers "dead <id>" to be appended to the events log when the
 * connection closes, and asks the server to close it after
 * keep_alive_interval * keep_alive_max_attempt of silence.  Its watch of the
 * events log (re-issued every keep_alive_interval) is the heartbeat, and a
 * change of the log makes el_rdzv_notify_fd() readable.  So a killed agent
 * is seen at once, a silent host after the keep-alive window, and nobody
 * polls.  When that connection is lost, the caller's thread (never the
 * keep-alive thread, which only raises an atomic flag) finds out why: the
 * store is gone, or this node was declared dead (its id is in the log) and
 * the rules give it a new id, for which a new keep-alive thread starts.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/store.h"
#include "rendezvous/elastic.h"
#include "rendezvous/rdzv_impl.h"

#define ID_MAX EL__RDZV_ID_MAX

struct store_rdzv {
    struct el__rdzv_elastic e; /* first: the rules' state, then base   */
    char run_id[256];
    struct el__rdzv_link link;   /* the store endpoint, prefix, client    */
    struct el_store_server *srv; /* when this agent hosts the store       */
    char *events;                /* the events log as last read (refresh) */
    /* The keep-alive thread: it owns its connection and its id copy; it
     * tells the caller's thread only through 'lost' and evfd. */
    pthread_t th;
    int th_running;
    char live_id[ID_MAX];           /* the id it keeps alive                 */
    struct el__rdzv_link live_link; /* its copy: where, no client, no log  */
    int stop_pipe[2];
    int evfd;
    atomic_int lost; /* its connection ended (not stopped)    */
};

#define R(e) ((struct store_rdzv *)(e))
#define FAIL(r, rc, ...) el__rdzv_fail(&(r)->e.base, (rc), __VA_ARGS__)
#define note(r, ...) el__rdzv_note(&(r)->e.self, __VA_ARGS__)

#define key(r, ...) el__rdzv_key(&(r)->link, __VA_ARGS__)
#define store_fail(r, rc, what) \
    el__rdzv_store_fail(&(r)->e.base, &(r)->link, (rc), (what))

/* ---- store access ---- */

/* Read a decimal key; *v = dflt if it is missing. */
static int get_int(struct store_rdzv *r, const char *k, int64_t dflt,
                   int64_t *v)
{
    void *val = NULL;
    size_t len;
    int rc = el_store_try_get(r->link.cl, k, &val, &len);
    if (rc == EL_ENOTFOUND) {
        *v = dflt;
        return 0;
    }
    if (rc)
        return store_fail(r, rc, "reading a key");
    *v = strtoll(val, NULL, 10);
    free(val);
    return 0;
}

static int append_event(struct store_rdzv *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int append_event(struct store_rdzv *r, const char *fmt, ...)
{
    char line[512], k[400];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    key(r, k, sizeof k, "events");
    int rc = el_store_append(r->link.cl, k, line, (size_t)n);
    return rc ? store_fail(r, rc, "appending an event") : 0;
}

/* Is 'id' listed as dead in the events log? */
static int listed_dead(const char *events, const char *id)
{
    size_t n = strlen(id);
    for (const char *p = events; p && *p;) {
        if (strncmp(p, "dead ", 5) == 0 && strncmp(p + 5, id, n) == 0 &&
            (p[5 + n] == '\n' || p[5 + n] == '\0'))
            return 1;
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return 0;
}

static int st_refresh(struct el__rdzv_elastic *e)
{
    struct store_rdzv *r = R(e);
    char k[400];
    void *val = NULL;
    size_t len;
    key(r, k, sizeof k, "events");
    int rc = el_store_try_get(r->link.cl, k, &val, &len);
    if (rc == EL_ENOTFOUND) {
        val = strdup("");
        rc = val ? 0 : -ENOMEM;
    }
    if (rc)
        return store_fail(r, rc, "reading the events");
    free(r->events);
    r->events = val;
    return 0;
}

static int st_is_dead(struct el__rdzv_elastic *e, const char *id)
{
    return listed_dead(R(e)->events, id);
}

static int alive_in_log(void *events, const char *id)
{
    return !listed_dead(events, id);
}

/* ---- the keep-alive thread ---- */

static void signal_agent(struct store_rdzv *r)
{
    uint64_t one = 1;
    if (write(r->evfd, &one, sizeof one) < 0) {
        /* an eventfd counter does not overflow here */
    }
}

static void *live_main(void *arg)
{
    struct store_rdzv *r = arg;
    struct el_store *w = NULL;
    struct el_rdzv scratch = {0}; /* its own message: nobody reads it */
    char k[400], line[ID_MAX + 8];
    void *seen = NULL;
    size_t seen_len = 0;
    int seen_present = 0, rc;
    /* This connection's silence beyond the keep-alive window is a death. */
    int window = r->e.window_ms;
    rc = el__rdzv_connect(&scratch, &r->live_link, &w, window, r->stop_pipe[0],
                          el_now_ms() + r->live_link.io_timeout_ms);
    if (rc == 0) {
        el_store_set_cancel_fd(w, r->stop_pipe[0]);
        el__rdzv_key(&r->live_link, k, sizeof k, "events");
        snprintf(line, sizeof line, "dead %s\n", r->live_id);
        rc = el_store_on_close_append(w, k, line, strlen(line));
        if (rc == 0)
            rc = el_store_set_idle_timeout(w, window);
    }
    while (rc == 0) {
        int present = 0;
        void *val = NULL;
        size_t len = 0;
        rc = el_store_watch(w, k, seen_present, seen, seen_len, &present, &val,
                            &len, r->e.keepalive_ms);
        if (rc == -ETIMEDOUT) {
            rc = 0; /* that request was the heartbeat */
            continue;
        }
        if (rc)
            break;
        free(seen);
        seen = val;
        seen_len = present ? len : 0;
        seen_present = present;
        signal_agent(r);
    }
    free(seen);
    if (rc != -ECANCELED) {
        atomic_store(&r->lost, 1);
        signal_agent(r);
    }
    el_store_close(w);
    return NULL;
}

static int start_live(struct store_rdzv *r)
{
    snprintf(r->live_id, sizeof r->live_id, "%s", r->e.self.id);
    r->live_link = r->link;
    r->live_link.cl = NULL;
    r->live_link.on_event = NULL;
    atomic_store(&r->lost, 0);
    return el__rdzv_thread_start(&r->e.base, &r->th, &r->th_running, live_main,
                                 r, "keep-alive thread");
}

static void stop_live(struct store_rdzv *r)
{
    el__rdzv_thread_stop(r->th, &r->th_running, r->stop_pipe);
}

/* The keep-alive connection ended.  Is the store still there (a fresh
 * connection, within 2 s)?  Then this node was declared dead (the rules
 * see its id in the log and give it a new one) or the link broke for a
 * moment (keep-alive again, same id); else the store is lost. */
static int live_lost(struct store_rdzv *r)
{
    int rc;
    stop_live(r);
    el_store_close(r->link.cl);
    r->link.cl = NULL;
    rc = el__rdzv_connect(&r->e.base, &r->link, &r->link.cl,
                          r->link.io_timeout_ms, -1, el_now_ms() + 2000);
    if (rc == 0)
        rc = st_refresh(&r->e);
    /* Something else answers there, or the store refused this node's job
     * secret (el__rdzv_connect said which): that, not a lost store, is what
     * the user must hear.  The keep-alive thread's own connection is often
     * the first to be refused. */
    if (rc == EL_ENOTSTORE || rc == -EACCES)
        return rc;
    if (rc)
        return FAIL(r, EL_EPEERLOST,
                    "lost the rendezvous store at %s:%d "
                    "(its host is gone, or this node was cut off for longer "
                    "than the keep-alive window)",
                    r->link.host, r->link.port);
    if (listed_dead(r->events, r->e.self.id))
        return 0; /* the rules' reborn() starts the keep-alive again */
    return start_live(r);
}

/* ---- the state primitives ---- */

static int st_enter(struct el__rdzv_elastic *e, int cancel_fd,
                    long long deadline)
{
    struct store_rdzv *r = R(e);
    int rc;
    e->cancel_fd = cancel_fd;
    if (r->th_running && atomic_load(&r->lost) && (rc = live_lost(r)))
        return rc;
    /* A store that never answers: give up after read_timeout. */
    long long io = el_now_ms() + r->link.io_timeout_ms;
    if ((rc = el__rdzv_ensure(&e->base, &r->link, cancel_fd,
                              deadline < io ? deadline : io)))
        return rc;
    el_store_set_cancel_fd(r->link.cl, -1);
    return 0;
}

static void st_leave(struct el__rdzv_elastic *e)
{
    struct store_rdzv *r = R(e);
    if (r->link.cl)
        el_store_set_cancel_fd(r->link.cl, -1);
    e->cancel_fd = -1;
}

static int st_reborn(struct el__rdzv_elastic *e)
{
    struct store_rdzv *r = R(e);
    stop_live(r);
    return start_live(r);
}

static int raise_to(struct store_rdzv *r, int64_t target, const char *expect,
                    int64_t *now);

/* 1 if the job is closed (reason in errmsg), 0 if not, < 0 on error. */
static int check_closed(struct store_rdzv *r)
{
    char k[400];
    void *val = NULL;
    size_t len;
    key(r, k, sizeof k, "closed");
    int rc = el_store_try_get(r->link.cl, k, &val, &len);
    if (rc == EL_ENOTFOUND)
        return 0;
    if (rc)
        return store_fail(r, rc, "reading the job state");
    FAIL(r, EL_ECLOSED, "the job is closed (%s)", (char *)val);
    free(val);
    return 1;
}

static int st_read_job(struct el__rdzv_elastic *e, int64_t *round, int64_t *rev)
{
    struct store_rdzv *r = R(e);
    char k[400];
    int64_t cur;
    int rc, closed = check_closed(r);
    if (closed < 0)
        return closed;
    key(r, k, sizeof k, "round");
    if ((rc = get_int(r, k, -1, &cur)))
        return rc;
    if (cur < 0 && !closed && (rc = raise_to(r, 0, NULL, &cur)))
        return rc;
    *round = cur < 0 ? 0 : cur;
    *rev = *round;
    return closed;
}

/* Delete the workers' keys of attempt 'round' (best effort).  The workers
 * of every job on this store share /worker/attempt_<round>/ (torch's
 * prefix; the run id is not in it), so a job that ran before on the same
 * store left its keys there: a new worker that read a dead rank's address
 * from them dialled it until its timeout (t0950's hung-worker case, #14). */
static void forget_workers(struct store_rdzv *r, int64_t round)
{
    char wk[64];
    int64_t cnt;
    snprintf(wk, sizeof wk, "/worker/attempt_%" PRId64 "/", round);
    el_store_delete_prefix(r->link.cl, wk, &cnt);
    snprintf(wk, sizeof wk, "//worker/attempt_%" PRId64 "/", round);
    el_store_delete_prefix(r->link.cl, wk, &cnt);
}

/* Raise the shared round to at least 'target' (compare-and-set loop).
 * *now gets the round in force afterwards.  Appends "round N" when this
 * call raised it.  'expect' (may be NULL) is written first (if absent), so
 * every joiner of the round sees it.  The call that raised it clears the
 * round's workers' keys at once (forget_workers): the round has no member
 * list yet, so no worker of this job has written there. */
static int raise_to(struct store_rdzv *r, int64_t target, const char *expect,
                    int64_t *now)
{
    char k[400], e[32], d[32];
    int64_t cur;
    int rc;
    if (expect) {
        key(r, k, sizeof k, "r%" PRId64 "/expect", target);
        rc = el_store_compare_set(r->link.cl, k, "", 0, expect, strlen(expect),
                                  NULL, NULL);
        if (rc && rc != EL_EMISMATCH)
            return store_fail(r, rc, "announcing the next round");
    }
    key(r, k, sizeof k, "round");
    if ((rc = get_int(r, k, -1, &cur)))
        return rc;
    while (cur < target) {
        void *got = NULL;
        size_t glen;
        if (cur < 0)
            e[0] = '\0';
        else
            snprintf(e, sizeof e, "%" PRId64, cur);
        snprintf(d, sizeof d, "%" PRId64, target);
        rc = el_store_compare_set(r->link.cl, k, e, strlen(e), d, strlen(d),
                                  &got, &glen);
        if (rc == 0) {
            free(got);
            cur = target;
            forget_workers(r, target);
            if ((rc = append_event(r, "round %" PRId64, target)))
                return rc;
            break;
        }
        if (rc != EL_EMISMATCH)
            return store_fail(r, rc, "raising the round");
        /* Lost the race (or the key was missing and 'e' non-empty). */
        if (cur < 0 && got && glen == strlen(e)) {
            free(got);
            if ((rc = get_int(r, k, -1, &cur)))
                return rc;
            continue;
        }
        cur = got ? strtoll(got, NULL, 10) : cur;
        free(got);
    }
    *now = cur;
    return 0;
}

static int st_raise_round(struct el__rdzv_elastic *e, int64_t target,
                          const struct el__rdzv_member *m, int n,
                          const char *extra, int64_t *now)
{
    struct store_rdzv *r = R(e);
    char *list = NULL;
    int rc;
    if (m) {
        if ((rc = st_refresh(e)))
            return rc;
        list = el__rdzv_expect_list(m, n, extra, alive_in_log, r->events);
        if (!list)
            return FAIL(r, -ENOMEM, "out of memory");
    }
    rc = raise_to(r, target, list, now);
    free(list);
    return rc;
}

static int st_read_round(struct el__rdzv_elastic *e, int64_t round,
                         struct el__rdzv_round *st)
{
    struct store_rdzv *r = R(e);
    char k[400];
    void *val = NULL;
    size_t len;
    st->members = NULL;
    st->sealing = 0;
    key(r, k, sizeof k, "r%" PRId64 "/members", round);
    int rc = el_store_try_get(r->link.cl, k, &val, &len);
    if (rc && rc != EL_ENOTFOUND)
        return store_fail(r, rc, "reading the members");
    if (rc == 0) {
        st->members = val;
        return 0;
    }
    key(r, k, sizeof k, "r%" PRId64 "/deadline", round);
    return get_int(r, k, -1, &st->deadline);
}

static int st_join(struct el__rdzv_elastic *e, int64_t round, int lws,
                   int64_t *arrival, int64_t *expect_n)
{
    struct store_rdzv *r = R(e);
    char k[400], v[ID_MAX + EL_HOST_MAX + 64];
    int rc;
    key(r, k, sizeof k, "r%" PRId64 "/joined", round);
    if ((rc = el_store_add(r->link.cl, k, 1, arrival)))
        return store_fail(r, rc, "joining");
    key(r, k, sizeof k, "r%" PRId64 "/node/%" PRId64, round, *arrival);
    snprintf(v, sizeof v, "v1 %s %d %d %s", e->self.id, lws, e->self.rank,
             e->self.name);
    if ((rc = el_store_set(r->link.cl, k, v, strlen(v))))
        return store_fail(r, rc, "publishing this node");
    /* Count this node in if the round expects it. */
    void *ev = NULL;
    size_t el;
    *expect_n = 0;
    key(r, k, sizeof k, "r%" PRId64 "/expect", round);
    rc = el_store_try_get(r->link.cl, k, &ev, &el);
    if (rc == EL_ENOTFOUND)
        return 0;
    if (rc)
        return store_fail(r, rc, "reading the expected nodes");
    *expect_n = strtoll(ev, NULL, 10);
    int mine = el__rdzv_expected(ev, e->self.id);
    free(ev);
    key(r, k, sizeof k, "r%" PRId64 "/expected_in", round);
    if (mine && (rc = el_store_add(r->link.cl, k, 1, NULL)))
        return store_fail(r, rc, "joining as expected");
    return 0;
}

static int st_count(struct el__rdzv_elastic *e, int64_t round, int expected,
                    struct el__rdzv_round *st)
{
    struct store_rdzv *r = R(e);
    char k[400];
    int rc;
    key(r, k, sizeof k, "r%" PRId64 "/joined", round);
    if ((rc = el_store_add(r->link.cl, k, 0, &st->joiners)))
        return store_fail(r, rc, "counting the joiners");
    st->jrev = st->joiners;
    st->expected_in = 0;
    if (!expected)
        return 0;
    key(r, k, sizeof k, "r%" PRId64 "/expected_in", round);
    return get_int(r, k, 0, &st->expected_in);
}

static int st_set_deadline(struct el__rdzv_elastic *e, int64_t round,
                           long long wall_ms)
{
    struct store_rdzv *r = R(e);
    char k[400], d[32];
    key(r, k, sizeof k, "r%" PRId64 "/deadline", round);
    snprintf(d, sizeof d, "%lld", wall_ms);
    int rc =
        el_store_compare_set(r->link.cl, k, "", 0, d, strlen(d), NULL, NULL);
    return rc && rc != EL_EMISMATCH
               ? store_fail(r, rc, "setting the round's deadline")
               : 0;
}

static void st_clear_deadline(struct el__rdzv_elastic *e, int64_t round)
{
    struct store_rdzv *r = R(e);
    char k[400];
    key(r, k, sizeof k, "r%" PRId64 "/deadline", round);
    el_store_delete(r->link.cl, k, NULL);
}

/* Every joiner's record in one request; a joiner writes it right after its
 * ADD, so give them a moment.  If one died in between, read them one by
 * one and skip the missing one. */
static int st_joiners(struct el__rdzv_elastic *e, int64_t round,
                      struct el__rdzv_member **out, int *nout)
{
    struct store_rdzv *r = R(e);
    char k[400];
    int64_t count;
    int rc;
    *out = NULL;
    *nout = 0;
    key(r, k, sizeof k, "r%" PRId64 "/joined", round);
    if ((rc = el_store_add(r->link.cl, k, 0, &count)))
        return store_fail(r, rc, "counting the joiners");
    if (count <= 0)
        return 0;
    struct el__rdzv_member *m = calloc((size_t)count, sizeof *m);
    void **vals = calloc((size_t)count, sizeof *vals);
    size_t *lens = calloc((size_t)count, sizeof *lens);
    char *kbuf = malloc((size_t)count * 400);
    const char **keys = calloc((size_t)count, sizeof *keys);
    int batch = m && vals && lens && kbuf && keys ? 0 : -ENOMEM;
    for (int64_t s = 0; s < count && !batch; s++) {
        keys[s] = kbuf + s * 400;
        key(r, kbuf + s * 400, 400, "r%" PRId64 "/node/%" PRId64, round, s + 1);
    }
    if (!batch)
        batch = el_store_multi_get(
            r->link.cl, keys, (size_t)count, vals, lens,
            r->link.io_timeout_ms < 1000 ? r->link.io_timeout_ms : 1000);
    free(keys);
    free(kbuf);
    free(lens);
    if (batch == -ENOMEM || !m) {
        free(vals);
        free(m);
        return FAIL(r, -ENOMEM, "out of memory");
    }
    if (batch && batch != -ETIMEDOUT) {
        free(vals);
        free(m);
        return store_fail(r, batch, "reading the joiners");
    }
    int n = 0;
    for (int64_t s = 1; s <= count; s++) {
        void *val = NULL;
        size_t len;
        if (batch == 0) {
            val = vals[s - 1];
        } else {
            key(r, k, sizeof k, "r%" PRId64 "/node/%" PRId64, round, s);
            rc = el_store_get(r->link.cl, k, &val, &len, 200);
            if (rc == -ETIMEDOUT)
                continue;
            if (rc) {
                free(vals);
                free(m);
                return store_fail(r, rc, "reading a joiner");
            }
        }
        struct el__rdzv_member *x = &m[n];
        if (sscanf(val, "v1 %191s %d %d %255s", x->id, &x->lws, &x->prev_rank,
                   x->name) == 4) {
            x->seq = s;
            n++;
        }
        free(val);
    }
    free(vals);
    *out = m;
    *nout = n;
    return 0;
}

static int st_publish(struct el__rdzv_elastic *e, int64_t round,
                      const char *list, size_t len, int *created)
{
    struct store_rdzv *r = R(e);
    char k[400];
    key(r, k, sizeof k, "r%" PRId64 "/members", round);
    int rc = el_store_compare_set(r->link.cl, k, "", 0, list, len, NULL, NULL);
    if (rc && rc != EL_EMISMATCH)
        return store_fail(r, rc, "sealing the round");
    *created = rc == 0;
    /* Nodes still waiting for a deadline wake up and find the list. */
    key(r, k, sizeof k, "r%" PRId64 "/deadline", round);
    int drc = el_store_compare_set(r->link.cl, k, "", 0, "0", 1, NULL, NULL);
    if (drc && drc != EL_EMISMATCH)
        return store_fail(r, drc, "marking the round sealed");
    return 0;
}

/* No worker or agent of an earlier round needs its keys any more. */
static void st_forget(struct el__rdzv_elastic *e, int64_t round)
{
    struct store_rdzv *r = R(e);
    int64_t cnt;
    char k[400];
    forget_workers(r, round);
    key(r, k, sizeof k, "r%" PRId64 "/", round);
    el_store_delete_prefix(r->link.cl, k, &cnt);
}

static int st_wait(struct el__rdzv_elastic *e, enum el__rdzv_wait what,
                   int64_t round, const struct el__rdzv_round *st, int64_t rev,
                   int ms)
{
    struct store_rdzv *r = R(e);
    char k[400], cur[32];
    int present, rc;
    void *nv = NULL;
    size_t len;
    el_store_set_cancel_fd(r->link.cl, e->cancel_fd);
    switch (what) {
    case EL__RDZV_WAIT_ROUND:
        snprintf(cur, sizeof cur, "%" PRId64, round);
        key(r, k, sizeof k, "round");
        rc = el_store_watch(r->link.cl, k, 1, cur, strlen(cur), &present, &nv,
                            &len, ms);
        free(nv);
        break;
    case EL__RDZV_WAIT_JOINERS:
        snprintf(cur, sizeof cur, "%" PRId64, st->joiners);
        key(r, k, sizeof k, "r%" PRId64 "/joined", round);
        rc = el_store_watch(r->link.cl, k, 1, cur, strlen(cur), &present, NULL,
                            NULL, ms);
        break;
    default:
        /* No deadline yet: wait for it (a seal sets it too); else for the
         * member list. */
        key(r, k, sizeof k, "r%" PRId64 "/%s", round,
            st->deadline < 0 ? "deadline" : "members");
        rc = ms > 0 ? el_store_get(r->link.cl, k, NULL, NULL, ms) : -ETIMEDOUT;
        break;
    }
    if (r->link.cl)
        el_store_set_cancel_fd(r->link.cl, -1);
    if (rc && rc != -ETIMEDOUT)
        return store_fail(r, rc, "waiting for the round");
    return rc;
}

static int st_charge(struct el__rdzv_elastic *e, int64_t round, int *first)
{
    struct store_rdzv *r = R(e);
    char k[400];
    int64_t n;
    key(r, k, sizeof k, "r%" PRId64 "/failed", round);
    int rc = el_store_add(r->link.cl, k, 1, &n);
    if (rc)
        return store_fail(r, rc, "reporting a failure");
    *first = n == 1;
    return 0;
}

static int st_add_restart(struct el__rdzv_elastic *e, int64_t *used)
{
    struct store_rdzv *r = R(e);
    char k[400];
    key(r, k, sizeof k, "restarts");
    int rc = el_store_add(r->link.cl, k, 1, used);
    return rc ? store_fail(r, rc, "charging the restart budget") : 0;
}

static int st_put_failure(struct el__rdzv_elastic *e, int64_t round)
{
    struct store_rdzv *r = R(e);
    char k[400], v[EL__RDZV_ID_MAX + 32];
    key(r, k, sizeof k, "failure");
    int n = snprintf(v, sizeof v, "%" PRId64 " %s", round, e->self.id);
    int rc = el_store_set(r->link.cl, k, v, (size_t)n);
    return rc ? store_fail(r, rc, "recording a failure") : 0;
}

static int st_get_failure(struct el__rdzv_elastic *e, int64_t *round, char *id,
                          size_t cap)
{
    struct store_rdzv *r = R(e);
    char k[400];
    void *val = NULL;
    size_t len = 0;
    key(r, k, sizeof k, "failure");
    int rc = el_store_try_get(r->link.cl, k, &val, &len);
    if (rc == EL_ENOTFOUND)
        return 0;
    if (rc)
        return store_fail(r, rc, "reading the last failure");
    rc = el__rdzv_parse_failure(val, len, round, id, cap);
    free(val);
    return rc;
}

static int st_close_job(struct el__rdzv_elastic *e, const char *why)
{
    struct store_rdzv *r = R(e);
    char k[400];
    key(r, k, sizeof k, "closed");
    int rc = el_store_compare_set(r->link.cl, k, "", 0, why, strlen(why), NULL,
                                  NULL);
    if (rc && rc != EL_EMISMATCH)
        return store_fail(r, rc, "closing");
    return append_event(r, "closed %s", why);
}

static int st_exit_verdict(struct el__rdzv_elastic *e, int64_t round, int ok)
{
    struct store_rdzv *r = R(e);
    char k[400];
    key(r, k, sizeof k, "r%" PRId64 "/exit/done", round);
    int rc = el_store_set(r->link.cl, k, ok ? "ok" : "failed", ok ? 2 : 6);
    return rc ? store_fail(r, rc,
                           ok ? "completing the exit barrier"
                              : "reporting the failure")
              : 0;
}

static int st_exit_arrive(struct el__rdzv_elastic *e, int64_t round, int64_t *n)
{
    struct store_rdzv *r = R(e);
    char k[400 + ID_MAX];
    int rc;
    key(r, k, sizeof k, "r%" PRId64 "/exit/in/%s", round, e->self.id);
    if ((rc = el_store_set(r->link.cl, k, "1", 1)))
        return store_fail(r, rc, "entering the exit barrier");
    key(r, k, sizeof k, "r%" PRId64 "/exit/count", round);
    rc = el_store_add(r->link.cl, k, 1, n);
    return rc ? store_fail(r, rc, "entering the exit barrier") : 0;
}

static int st_exit_count(struct el__rdzv_elastic *e, int64_t round, int64_t *n)
{
    struct store_rdzv *r = R(e);
    char k[400];
    key(r, k, sizeof k, "r%" PRId64 "/exit/count", round);
    int rc = el_store_add(r->link.cl, k, 0, n);
    return rc ? store_fail(r, rc, "counting the nodes done") : 0;
}

static int st_exit_arrived(struct el__rdzv_elastic *e, int64_t round,
                           const char *id)
{
    struct store_rdzv *r = R(e);
    char k[400 + ID_MAX];
    void *v = NULL;
    size_t len;
    key(r, k, sizeof k, "r%" PRId64 "/exit/in/%s", round, id);
    int rc = el_store_try_get(r->link.cl, k, &v, &len);
    free(v);
    if (rc == EL_ENOTFOUND)
        return 0;
    return rc ? store_fail(r, rc, "counting the nodes done") : 1;
}

static int st_exit_wait(struct el__rdzv_elastic *e, int64_t round, int ms)
{
    struct store_rdzv *r = R(e);
    char k[400];
    key(r, k, sizeof k, "r%" PRId64 "/exit/done", round);
    el_store_set_cancel_fd(r->link.cl, e->cancel_fd);
    int rc = el_store_get(r->link.cl, k, NULL, NULL, ms);
    if (r->link.cl)
        el_store_set_cancel_fd(r->link.cl, -1);
    if (rc && rc != -ETIMEDOUT)
        return store_fail(r, rc, "waiting in the exit barrier");
    return rc;
}

static void st_took_round(struct el__rdzv_elastic *e, int64_t round,
                          const struct el__rdzv_member *m, int n, int me,
                          struct el_rdzv_info *info)
{
    struct store_rdzv *r = R(e);
    snprintf(info->store_host, sizeof info->store_host, "%s", r->link.host);
    info->store_port = r->link.port;
    info->use_agent_store = 1;
}

static const struct el__rdzv_state_ops store_state = {
    .enter = st_enter,
    .leave = st_leave,
    .read_job = st_read_job,
    .raise_round = st_raise_round,
    .read_round = st_read_round,
    .join = st_join,
    .count = st_count,
    .set_deadline = st_set_deadline,
    .clear_deadline = st_clear_deadline,
    .joiners = st_joiners,
    .publish = st_publish,
    .forget = st_forget,
    .wait = st_wait,
    .refresh = st_refresh,
    .is_dead = st_is_dead,
    .charge = st_charge,
    .add_restart = st_add_restart,
    .put_failure = st_put_failure,
    .get_failure = st_get_failure,
    .close_job = st_close_job,
    .exit_verdict = st_exit_verdict,
    .exit_arrive = st_exit_arrive,
    .exit_count = st_exit_count,
    .exit_arrived = st_exit_arrived,
    .exit_wait = st_exit_wait,
    .took_round = st_took_round,
    .reborn = st_reborn,
};

/* ---- the rest of the el_rdzv interface ---- */

static int store_notify_fd(struct el_rdzv *base)
{
    return R(base)->evfd;
}

static void store_ack_notify(struct el_rdzv *base)
{
    uint64_t v;
    if (read(R(base)->evfd, &v, sizeof v) < 0) {
        /* nothing pending */
    }
}

static void store_close(struct el_rdzv *base)
{
    struct store_rdzv *r = R(base);
    stop_live(r);
    el_store_close(r->link.cl);
    el_store_server_close(r->srv);
    close(r->stop_pipe[0]);
    close(r->stop_pipe[1]);
    close(r->evfd);
    free(r->events);
    el__rdzv_node_free(&r->e.self);
    free(r);
}

static const struct el_rdzv_ops store_ops = {
    .name = "c10d",
    .next = el__rdzv_elastic_next,
    .num_nodes_waiting = el__rdzv_elastic_num_nodes_waiting,
    .notify_fd = store_notify_fd,
    .ack_notify = store_ack_notify,
    .exit_barrier = el__rdzv_elastic_exit_barrier,
    .set_closed = el__rdzv_elastic_set_closed,
    .report_failure = el__rdzv_elastic_report_failure,
    .joiners = el__rdzv_elastic_joiners,
    .close = store_close,
    .members = el__rdzv_elastic_members,
    .is_dead = el__rdzv_elastic_is_dead,
    .failure = el__rdzv_elastic_failure,
};

/* Host the store at the endpoint?  is_host = 1 must, -1 must not, 0 tries:
 * binding works only where the endpoint's address is local and free. */
static int maybe_host(struct store_rdzv *r, int is_host, char *err,
                      size_t errlen)
{
    if (is_host < 0)
        return 0;
    struct el_store_server_opts so = {
        .host = r->link.host,
        .port = r->link.port,
        .secret = r->link.secret_len ? r->link.secret : NULL,
        .secret_len = r->link.secret_len,
        .on_event = r->link.on_event,
        .event_arg = r->link.event_arg};
    if (strcmp(r->link.host, "localhost") == 0)
        so.host = "127.0.0.1";
    int rc = el_store_server_start(&r->srv, &so);
    if (rc == 0) {
        note(r, "hosting the rendezvous store on %s:%d", r->link.host,
             r->link.port);
        return 0;
    }
    r->srv = NULL;
    if (is_host == 0 &&
        (rc == -EADDRINUSE || rc == -EADDRNOTAVAIL || rc == EL_EUSAGE))
        return 0; /* someone else hosts it, or the address is not ours */
    snprintf(err, errlen, "cannot host the rendezvous store on %s:%d: %s",
             r->link.host, r->link.port, el_strerror(rc));
    return rc;
}

/* The job's id, the store's address and the key prefix into r. */
static void init_link(struct store_rdzv *r, const struct el_rdzv_config *cfg,
                      int io_timeout_ms)
{
    r->link.io_timeout_ms = io_timeout_ms;
    snprintf(r->run_id, sizeof r->run_id, "%s",
             cfg->run_id ? cfg->run_id : "none");
    snprintf(r->link.prefix, sizeof r->link.prefix, "/elrun/%s/", r->run_id);
    snprintf(r->link.host, sizeof r->link.host, "%s", cfg->host);
    r->link.port = cfg->port;
    r->link.hint = "check --rdzv-endpoint and that the host agent (or "
                   "'elrun store') runs there";
}

int el__rdzv_store_open(struct el_rdzv **out, const struct el_rdzv_config *cfg,
                        char *err, size_t errlen)
{
    if (cfg->min_nodes < 1 || cfg->max_nodes < cfg->min_nodes) {
        snprintf(err, errlen,
                 "--nnodes must be MIN:MAX with 1 <= MIN <= MAX "
                 "(got %d:%d)",
                 cfg->min_nodes, cfg->max_nodes);
        return EL_EUSAGE;
    }
    if (!cfg->host || !*cfg->host || cfg->port <= 0) {
        snprintf(err, errlen,
                 "the c10d rendezvous needs --rdzv-endpoint="
                 "HOST:PORT (every node gives the same one)");
        return EL_EUSAGE;
    }
    struct store_rdzv *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->e.base.ops = &store_ops;
    r->e.ops = &store_state;
    el__rdzv_elastic_init(&r->e, cfg);
    init_link(r, cfg, r->e.io_timeout_ms);
    r->link.on_event = cfg->on_event;
    r->link.event_arg = cfg->event_arg;
    r->stop_pipe[0] = r->stop_pipe[1] = -1;
    r->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->evfd < 0 || pipe2(r->stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        int e = -errno;
        snprintf(err, errlen, "eventfd/pipe: %s", strerror(errno));
        if (r->evfd >= 0)
            close(r->evfd);
        free(r);
        return e;
    }
    int rc = el__rdzv_link_secret(&r->link, cfg, err, errlen);
    if (rc == 0)
        rc = maybe_host(r, cfg->is_host, err, errlen);
    if (rc == 0)
        rc = start_live(r);
    if (rc) {
        if (!*err)
            snprintf(err, errlen, "%s", r->e.base.errmsg);
        store_close(&r->e.base);
        return rc;
    }
    *out = &r->e.base;
    return 0;
}

/* ---- the read-only status (el_rdzv_status_read) ---- */

/* Fill st from the store: the round in force, its member list (or the
 * round before's while it is open), the joiners, the budget, the verdict,
 * and which members the events log lists dead.  Only reads: through the
 * same keys and primitives as the rules, on a connection of its own. */
static int read_status(struct store_rdzv *r, struct el_rdzv_status *st)
{
    char k[400];
    void *val = NULL;
    size_t len;
    int rc;
    key(r, k, sizeof k, "closed");
    rc = el_store_try_get(r->link.cl, k, &val, &len);
    if (rc && rc != EL_ENOTFOUND)
        return store_fail(r, rc, "reading the job state");
    if (rc == 0) {
        st->closed = strncmp(val, "ok", 2) == 0 ? 1 : 2;
        snprintf(st->closed_why, sizeof st->closed_why, "%s", (char *)val);
        free(val);
    }
    key(r, k, sizeof k, "round");
    if ((rc = get_int(r, k, -1, &st->round)))
        return rc;
    key(r, k, sizeof k, "restarts");
    if ((rc = get_int(r, k, 0, &st->restarts)))
        return rc;
    if (st->round < 0)
        return 0;
    if ((rc = el__rdzv_status_members(&r->e, st)))
        return rc;
    if (!st->sealed) {
        key(r, k, sizeof k, "r%" PRId64 "/joined", st->round);
        if ((rc = get_int(r, k, 0, &st->joined)))
            return rc;
    }
    if ((rc = st_refresh(&r->e)))
        return rc;
    for (int i = 0; i < st->nmembers; i++)
        st->members[i].dead = listed_dead(r->events, st->members[i].id);
    return 0;
}

int el__rdzv_store_status(const struct el_rdzv_config *cfg,
                          struct el_rdzv_status *st, char *err, size_t errlen)
{
    if (!cfg->host || !*cfg->host || cfg->port <= 0) {
        snprintf(err, errlen,
                 "the c10d rendezvous needs --rdzv-endpoint="
                 "HOST:PORT");
        return EL_EUSAGE;
    }
    struct store_rdzv *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->e.base.ops = &store_ops;
    r->e.ops = &store_state;
    init_link(r, cfg, cfg->io_timeout_ms > 0 ? cfg->io_timeout_ms : 5000);
    int rc = el__rdzv_link_secret(&r->link, cfg, err, errlen);
    if (rc == 0 && !(rc = el__rdzv_ensure(&r->e.base, &r->link, -1,
                                          el_now_ms() + r->link.io_timeout_ms)))
        rc = read_status(r, st);
    if (rc && !*err)
        snprintf(err, errlen, "%s", r->e.base.errmsg);
    if (rc)
        el_rdzv_status_free(st);
    el_store_close(r->link.cl);
    free(r->events);
    free(r);
    return rc;
}
