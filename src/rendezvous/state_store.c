/* state_store.c -- the elastic rendezvous ("c10d" with --nnodes=MIN:MAX, MAX > 1).
 *
 * Nodes come, go and die; each round is a fresh agreement on who takes part.
 * All state lives in the elrun store at the endpoint, under
 * /elrun/<run_id>/ (docs/RENDEZVOUS.md describes every key):
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
 * polls.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
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

struct dyn_rdzv {
    struct el_rdzv base;
    char run_id[256];
    struct el__rdzv_link link;    /* the store endpoint, prefix, client    */
    struct el__rdzv_node self;    /* id, name, round, rank, members        */
    int min_nodes, max_nodes, max_restarts;
    int join_timeout_ms, last_call_ms;
    int keepalive_ms, keepalive_attempts;
    struct el_store_server *srv;  /* when this agent hosts the store       */
    int64_t seq;
    int64_t expect_n;             /* nodes joined_round expects (0: none)  */
    size_t events_seen;           /* bytes of the events log processed     */
    int closed;
    /* The liveness thread. */
    pthread_t th;
    int th_running;
    int stop_pipe[2];
    int evfd;
    volatile int lost;
};

#define FAIL(r, rc, ...) el__rdzv_fail(&(r)->base, (rc), __VA_ARGS__)
#define note(r, ...) el__rdzv_note(&(r)->self, __VA_ARGS__)

#define key(r, ...) el__rdzv_key(&(r)->link, __VA_ARGS__)
#define ensure_client(r, cancel_fd, deadline)                               \
    el__rdzv_ensure(&(r)->base, &(r)->link, (cancel_fd), (deadline))
#define store_fail(r, rc, what) el__rdzv_store_fail(&(r)->base, &(r)->link, \
                                                    (rc), (what))

/* ---- store access ---- */

/* Read a decimal key; *v = dflt if it is missing. */
static int get_int(struct dyn_rdzv *r, const char *k, int64_t dflt,
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

static int append_event(struct dyn_rdzv *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int append_event(struct dyn_rdzv *r, const char *fmt, ...)
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

/* Raise the shared round to at least 'target' (compare-and-set loop).
 * *now gets the round in force afterwards.  Appends "round N" when this
 * call raised it.  'expect' (may be NULL) lists the nodes known to be
 * coming, "<count>\n<id>\n...": the live members of the round that ends,
 * plus a newcomer.  The new round completes as soon as all of them joined,
 * without waiting for the last call, and it never completes without one of
 * them before the keep-alive window passed, so no member is left out only
 * for being slower to stop its workers.  It is written before the round is
 * raised, so every joiner sees it. */
static int raise_round(struct dyn_rdzv *r, int64_t target, const char *expect,
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
                                  &got,
                                  &glen);
        if (rc == 0) {
            free(got);
            cur = target;
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

static int read_round(struct dyn_rdzv *r, int64_t *round)
{
    char k[400];
    int64_t cur;
    int rc;
    key(r, k, sizeof k, "round");
    if ((rc = get_int(r, k, -1, &cur)))
        return rc;
    if (cur < 0)
        return raise_round(r, 0, NULL, round);
    *round = cur;
    return 0;
}

/* 1 if the job is closed (reason in errmsg), 0 if not, < 0 on error. */
static int check_closed(struct dyn_rdzv *r)
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

/* ---- the member list ---- */

/* Is 'id' listed as dead in the events log? */
static int is_dead(const char *events, const char *id)
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

static int read_events(struct dyn_rdzv *r, char **out)
{
    char k[400];
    void *val = NULL;
    size_t len;
    key(r, k, sizeof k, "events");
    int rc = el_store_try_get(r->link.cl, k, &val, &len);
    if (rc == EL_ENOTFOUND) {
        *out = strdup("");
        return *out ? 0 : -ENOMEM;
    }
    if (rc)
        return store_fail(r, rc, "reading the events");
    *out = val;
    return 0;
}

/* Try to complete round R.  Returns 0 when r<R>/members exists afterwards
 * (sealed by us or by someone else), 1 if fewer than MIN live nodes joined
 * (the round stays open), < 0 on error. */
static int seal(struct dyn_rdzv *r, int64_t round)
{
    char k[400];
    int64_t count;
    int rc;
    key(r, k, sizeof k, "r%" PRId64 "/joined", round);
    if ((rc = el_store_add(r->link.cl, k, 0, &count)))
        return store_fail(r, rc, "counting the joiners");
    if (count <= 0)
        return 1;
    struct el__rdzv_member *m = calloc((size_t)count, sizeof *m);
    char *events = NULL;
    if (!m)
        return FAIL(r, -ENOMEM, "out of memory");
    if ((rc = read_events(r, &events))) {
        free(m);
        return rc;
    }
    /* Every joiner's record in one request; a joiner writes it right after
     * its ADD, so give them a moment.  If one died in between, read them
     * one by one and skip the missing one. */
    void **vals = calloc((size_t)count, sizeof *vals);
    size_t *lens = calloc((size_t)count, sizeof *lens);
    char *kbuf = malloc((size_t)count * 400);
    const char **keys = calloc((size_t)count, sizeof *keys);
    int batch = vals && lens && kbuf && keys ? 0 : -ENOMEM;
    for (int64_t s = 0; s < count && !batch; s++) {
        keys[s] = kbuf + s * 400;
        key(r, kbuf + s * 400, 400, "r%" PRId64 "/node/%" PRId64, round,
            s + 1);
    }
    if (!batch)
        batch = el_store_multi_get(r->link.cl, keys, (size_t)count, vals, lens,
                                   r->link.io_timeout_ms < 1000
                                       ? r->link.io_timeout_ms
                                                           : 1000);
    free(keys);
    free(kbuf);
    free(lens);
    if (batch && batch != -ETIMEDOUT && batch != -ENOMEM) {
        free(vals);
        free(m);
        free(events);
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
                free(events);
                return store_fail(r, rc, "reading a joiner");
            }
        }
        struct el__rdzv_member *x = &m[n];
        if (sscanf(val, "v1 %191s %d %d %255s", x->id, &x->lws, &x->prev_rank,
                   x->name) == 4 &&
            !is_dead(events, x->id)) {
            x->seq = s;
            n++;
        }
        free(val);
    }
    free(vals);
    free(events);
    char *list;
    size_t len;
    rc = el__rdzv_seal_list(round, m, n, r->min_nodes, r->max_nodes, 0,
                            &list, &len);
    free(m);
    if (rc)
        return rc == 1 ? 1 : FAIL(r, rc, "out of memory");
    key(r, k, sizeof k, "r%" PRId64 "/members", round);
    rc = el_store_compare_set(r->link.cl, k, "", 0, list, len, NULL, NULL);
    free(list);
    if (rc == 0 || rc == EL_EMISMATCH) {
        /* Nodes still waiting for a deadline wake up and find the list. */
        char dk[400];
        key(r, dk, sizeof dk, "r%" PRId64 "/deadline", round);
        int drc = el_store_compare_set(r->link.cl, dk, "", 0, "0", 1, NULL,
                                       NULL);
        if (drc && drc != EL_EMISMATCH)
            return store_fail(r, drc, "marking the round sealed");
    }
    if (rc == 0) {
        /* We sealed it: no worker or agent of an earlier round needs the
         * earlier rounds' keys any more. */
        int64_t cnt;
        char wk[64];
        if (round > 0) {
            snprintf(wk, sizeof wk, "/worker/attempt_%" PRId64 "/",
                     round - 1);
            el_store_delete_prefix(r->link.cl, wk, &cnt);
            snprintf(wk, sizeof wk, "//worker/attempt_%" PRId64 "/",
                     round - 1);
            el_store_delete_prefix(r->link.cl, wk, &cnt);
            key(r, k, sizeof k, "r%" PRId64 "/", round - 1);
            el_store_delete_prefix(r->link.cl, k, &cnt);
        }
        return 0;
    }
    if (rc == EL_EMISMATCH)
        return 0; /* someone else sealed first */
    return store_fail(r, rc, "sealing the round");
}

/* ---- the liveness thread ---- */

static void signal_agent(struct dyn_rdzv *r)
{
    uint64_t one = 1;
    if (write(r->evfd, &one, sizeof one) < 0) {
        /* an eventfd counter does not overflow here */
    }
}

static void *live_main(void *arg)
{
    struct dyn_rdzv *r = arg;
    struct el_store *w = NULL;
    char k[400], line[ID_MAX + 8];
    void *seen = NULL;
    size_t seen_len = 0;
    int seen_present = 0, rc;
    /* This connection's silence beyond the keep-alive window is a death. */
    int window = r->keepalive_ms * r->keepalive_attempts;
    rc = el__rdzv_connect(&r->base, &r->link, &w, window, r->stop_pipe[0],
                       el_now_ms() + r->link.io_timeout_ms);
    if (rc == 0) {
        el_store_set_cancel_fd(w, r->stop_pipe[0]);
        key(r, k, sizeof k, "events");
        snprintf(line, sizeof line, "dead %s\n", r->self.id);
        rc = el_store_on_close_append(w, k, line, strlen(line));
        if (rc == 0)
            rc = el_store_set_idle_timeout(w, window);
    }
    while (rc == 0) {
        int present = 0;
        void *val = NULL;
        size_t len = 0;
        rc = el_store_watch(w, k, seen_present, seen, seen_len, &present,
                            &val, &len, r->keepalive_ms);
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
        r->lost = 1;
        signal_agent(r);
    }
    el_store_close(w);
    return NULL;
}

static int start_live(struct dyn_rdzv *r)
{
    int rc = pthread_create(&r->th, NULL, live_main, r);
    if (rc)
        return FAIL(r, -rc, "cannot start the rendezvous keep-alive thread: "
                    "%s", strerror(rc));
    r->th_running = 1;
    return 0;
}

static void stop_live(struct dyn_rdzv *r)
{
    if (!r->th_running)
        return;
    char c = 1;
    if (write(r->stop_pipe[1], &c, 1) < 0) {
        /* the pipe is ours and empty */
    }
    pthread_join(r->th, NULL);
    r->th_running = 0;
}

/* ---- operations ---- */

static int alive_in_log(void *events, const char *id)
{
    return !is_dead(events, id);
}

/* The expect list of a new round: the live nodes of 'm' (n of them), plus
 * 'extra' if not NULL.  Returns a malloc'd "<count>\n<id>\n..." or NULL
 * with r's error set. */
static char *expect_list(struct dyn_rdzv *r,
                         const struct el__rdzv_member *m, int n,
                         const char *extra)
{
    char *events = NULL;
    if (read_events(r, &events))
        return NULL;
    char *list = el__rdzv_expect_list(m, n, extra, alive_in_log, events);
    free(events);
    if (!list)
        FAIL(r, -ENOMEM, "out of memory");
    return list;
}

static int dyn_next(struct el_rdzv *base, int lws, int cancel_fd,
                    struct el_rdzv_info *info)
{
    struct dyn_rdzv *r = (struct dyn_rdzv *)base;
    long long deadline = el_now_ms() + r->join_timeout_ms;
    char k[400], v[ID_MAX + EL_HOST_MAX + 64];
    int rc;

    int64_t stale = -1, stale_round = -1;
    if (r->closed)
        return FAIL(r, EL_ECLOSED, "the rendezvous is closed");
    for (;;) {
        if (el_now_ms() > deadline)
            return FAIL(r, -ETIMEDOUT,
                        "no round with at least %d nodes formed within %d s; "
                        "start more nodes or raise --rdzv-conf=join_timeout",
                        r->min_nodes, r->join_timeout_ms / 1000);
        if ((rc = ensure_client(r, cancel_fd, deadline)))
            return rc;
        el_store_set_cancel_fd(r->link.cl, -1);
        if ((rc = check_closed(r)) != 0)
            return rc < 0 ? rc : EL_ECLOSED;
        int64_t round;
        if ((rc = read_round(r, &round)))
            return rc;
        /* After a round this node took part in, the next one is newer; its
         * live members are expected in it. */
        if (r->self.rank >= 0 && round <= r->self.round) {
            char *list = expect_list(r, r->self.members, r->self.nmembers,
                                     NULL);
            if (!list)
                return r->base.errmsg[0] ? EL_EPEERLOST : -ENOMEM;
            rc = raise_round(r, r->self.round + 1, list, &round);
            free(list);
            if (rc)
                return rc;
        }

        /* Is round 'round' sealed already? */
        void *val = NULL;
        size_t len;
        key(r, k, sizeof k, "r%" PRId64 "/members", round);
        rc = el_store_try_get(r->link.cl, k, &val, &len);
        if (rc && rc != EL_ENOTFOUND)
            return store_fail(r, rc, "reading the members");
        if (rc == 0) {
            struct el__rdzv_member *m = NULL;
            int n = 0, me = -1;
            rc = el__rdzv_parse_members(val, &m, &n);
            free(val);
            if (rc)
                return FAIL(r, rc, "round %" PRId64 ": unreadable member "
                            "list in the store", round);
            for (int i = 0; i < n && me < 0; i++)
                if (strcmp(m[i].id, r->self.id) == 0)
                    me = i;
            if (me >= 0) {
                el__rdzv_take_round(&r->self, round, m, n, me, info);
                snprintf(info->store_host, sizeof info->store_host, "%s",
                         r->link.host);
                info->store_port = r->link.port;
                info->use_agent_store = 1;
                return 0;
            }
            if (n < r->max_nodes) {
                /* Room for us: open the next round (scale-up; it charges
                 * no restart), expecting its members and us. */
                int64_t now;
                char *list = expect_list(r, m, n, r->self.id);
                free(m);
                if (!list)
                    return r->base.errmsg[0] ? EL_EPEERLOST : -ENOMEM;
                rc = raise_round(r, round + 1, list, &now);
                free(list);
                if (rc)
                    return rc;
                continue;
            }
            free(m);
            /* Full: wait as a hot spare until the round changes. */
            if (!r->self.spare_logged) {
                note(r, "round %" PRId64 " is full (%d nodes); this node "
                     "(%s) waits as a hot spare", round, n, r->self.name);
                r->self.spare_logged = 1;
            }
            char cur[32];
            int present;
            void *nv = NULL;
            snprintf(cur, sizeof cur, "%" PRId64, round);
            key(r, k, sizeof k, "round");
            long long left = deadline - el_now_ms();
            el_store_set_cancel_fd(r->link.cl, cancel_fd);
            rc = el_store_watch(r->link.cl, k, 1, cur, strlen(cur), &present,
                                &nv,
                                &len, left > 0 ? (int)left : 0);
            free(nv);
            if (rc && rc != -ETIMEDOUT)
                return store_fail(r, rc, "waiting as a spare");
            continue;
        }

        /* Round 'round' is open: join it once. */
        if (r->self.joined_round != round) {
            key(r, k, sizeof k, "r%" PRId64 "/joined", round);
            if ((rc = el_store_add(r->link.cl, k, 1, &r->seq)))
                return store_fail(r, rc, "joining");
            key(r, k, sizeof k, "r%" PRId64 "/node/%" PRId64, round, r->seq);
            int prev = r->self.rank;
            snprintf(v, sizeof v, "v1 %s %d %d %s", r->self.id, lws, prev,
                     r->self.name);
            if ((rc = el_store_set(r->link.cl, k, v, strlen(v))))
                return store_fail(r, rc, "publishing this node");
            r->self.joined_round = round;
            /* Count this node in if the round expects it. */
            void *ev = NULL;
            size_t el;
            r->expect_n = 0;
            key(r, k, sizeof k, "r%" PRId64 "/expect", round);
            rc = el_store_try_get(r->link.cl, k, &ev, &el);
            if (rc && rc != EL_ENOTFOUND)
                return store_fail(r, rc, "reading the expected nodes");
            if (rc == 0) {
                r->expect_n = strtoll(ev, NULL, 10);
                int mine = el__rdzv_expected(ev, r->self.id);
                free(ev);
                key(r, k, sizeof k, "r%" PRId64 "/expected_in", round);
                if (mine && (rc = el_store_add(r->link.cl, k, 1, NULL)))
                    return store_fail(r, rc, "joining as expected");
            }
        }
        int64_t count;
        key(r, k, sizeof k, "r%" PRId64 "/joined", round);
        if ((rc = el_store_add(r->link.cl, k, 0, &count)))
            return store_fail(r, rc, "counting the joiners");
        /* 'stale': sealing found too few live nodes among this many
         * joiners (some died); only a new joiner can change that. */
        if (round != stale_round)
            stale = -1;
        /* Complete at MAX, or once every expected node is in. */
        int64_t expected_in = 0;
        int64_t expect_n = r->expect_n;
        if (expect_n > 0) {
            key(r, k, sizeof k, "r%" PRId64 "/expected_in", round);
            if ((rc = get_int(r, k, 0, &expected_in)))
                return rc;
        }
        int all_in = expect_n > 0 && expected_in >= expect_n &&
                     count >= r->min_nodes;
        if ((count >= r->max_nodes || all_in) && count > stale) {
            if ((rc = seal(r, round)) < 0)
                return rc;
            if (rc == 1) {
                stale = count;
                stale_round = round;
            }
            continue;
        }
        /* The round's deadline: set by whoever sees MIN joiners first. */
        int64_t dl;
        char dk[400];
        key(r, dk, sizeof dk, "r%" PRId64 "/deadline", round);
        if ((rc = get_int(r, dk, -1, &dl)))
            return rc;
        if (dl < 0 && count >= r->min_nodes && count > stale) {
            /* Expected nodes still missing get the keep-alive window: a
             * live one arrives well within it, a dead one is gone by then. */
            long long wait = r->last_call_ms;
            long long window = (long long)r->keepalive_ms *
                               r->keepalive_attempts;
            if (expect_n > 0 && wait < window)
                wait = window;
            char d[32];
            snprintf(d, sizeof d, "%lld", el__rdzv_wall_ms() + wait);
            rc = el_store_compare_set(r->link.cl, dk, "", 0, d, strlen(d), NULL,
                                      NULL);
            if (rc && rc != EL_EMISMATCH)
                return store_fail(r, rc, "setting the round's deadline");
            continue;
        }
        long long left = deadline - el_now_ms();
        if (left <= 0)
            continue;
        el_store_set_cancel_fd(r->link.cl, cancel_fd);
        if (dl < 0 && stale >= 0) {
            /* Too few live joiners: wait for another one. */
            char cur[32];
            int present;
            snprintf(cur, sizeof cur, "%" PRId64, count);
            key(r, k, sizeof k, "r%" PRId64 "/joined", round);
            int wait = r->keepalive_ms < left ? r->keepalive_ms : (int)left;
            rc = el_store_watch(r->link.cl, k, 1, cur, strlen(cur), &present,
                                NULL, NULL, wait);
        } else if (dl < 0) {
            /* Fewer than MIN so far: wait for the deadline to be set (the
             * seal sets it too); look again every keep-alive interval. */
            int wait = r->keepalive_ms < left ? r->keepalive_ms : (int)left;
            rc = el_store_get(r->link.cl, dk, NULL, NULL, wait);
        } else {
            /* Wait for the seal until the deadline (plus a stagger by
             * arrival, so one node seals and the others just read). */
            long long until = dl - el__rdzv_wall_ms() +
                              (r->seq < 50 ? r->seq : 50) * 4;
            if (until > left)
                until = left;
            key(r, k, sizeof k, "r%" PRId64 "/members", round);
            rc = until > 0 ? el_store_get(r->link.cl, k, NULL, NULL, (int)until)
                           : -ETIMEDOUT;
            if (rc == -ETIMEDOUT) {
                el_store_set_cancel_fd(r->link.cl, -1);
                if ((rc = seal(r, round)) < 0)
                    return rc;
                if (rc == 1) {
                    /* Joiners died: below MIN again; reopen the deadline
                     * and wait for more. */
                    stale = count;
                    stale_round = round;
                    el_store_delete(r->link.cl, dk, NULL);
                }
                continue;
            }
        }
        if (r->link.cl)
            el_store_set_cancel_fd(r->link.cl, -1);
        if (rc && rc != -ETIMEDOUT)
            return store_fail(r, rc, "waiting for the round");
    }
}

/* Scan the events log for what concerns the round this node runs. */
static int dyn_num_nodes_waiting(struct el_rdzv *base, int *n)
{
    struct dyn_rdzv *r = (struct dyn_rdzv *)base;
    char k[400];
    int64_t cur, waiting;
    int rc;
    *n = 0;
    if (r->lost)
        return FAIL(r, EL_EPEERLOST, "lost the rendezvous store at %s:%d "
                    "(its host is gone, or this node was cut off for longer "
                    "than the keep-alive window)", r->link.host, r->link.port);
    if ((rc = ensure_client(r, -1, el_now_ms() + r->link.io_timeout_ms)))
        return rc;
    if ((rc = check_closed(r)) != 0) {
        if (rc < 0)
            return rc;
        *n = 1; /* the agent's next() reports the closure */
        return 0;
    }
    key(r, k, sizeof k, "round");
    if ((rc = get_int(r, k, 0, &cur)))
        return rc;
    if (cur > r->self.round) {
        key(r, k, sizeof k, "r%" PRId64 "/joined", cur);
        if ((rc = get_int(r, k, 1, &waiting)))
            return rc;
        *n = waiting > 0 ? (int)waiting : 1;
        return 0;
    }
    /* A member of this round died: end the round (it counts against the
     * job's restart budget, like a worker failure). */
    char *events = NULL;
    if ((rc = read_events(r, &events)))
        return rc;
    const char *dead = NULL;
    for (int i = 0; i < r->self.nmembers && !dead; i++)
        if (is_dead(events, r->self.members[i].id))
            dead = r->self.members[i].name;
    if (dead)
        note(r, "round %" PRId64 " (rank %d of %d nodes): node %s is gone; "
             "re-forming", r->self.round, r->self.rank, r->self.nmembers, dead);
    free(events);
    /* A lost node is a change of membership, like a new one: next() opens
     * the next round without charging the restart budget. */
    *n = dead ? 1 : 0;
    return 0;
}

/* Charge the round's end to the job's restart budget, once per round. */
static int dyn_report_failure(struct el_rdzv *base, const char *why)
{
    struct dyn_rdzv *r = (struct dyn_rdzv *)base;
    char k[400];
    int64_t first, used, now;
    int rc;
    if ((rc = ensure_client(r, -1, el_now_ms() + r->link.io_timeout_ms)))
        return rc;
    /* Workers often fail because a peer node died (their collectives lose
     * it).  That round ended for a change of membership: re-form without
     * charging the budget, as when the death was noticed first. */
    int64_t cur;
    key(r, k, sizeof k, "round");
    if ((rc = get_int(r, k, 0, &cur)))
        return rc;
    char *events = NULL;
    if ((rc = read_events(r, &events)))
        return rc;
    int lost = 0;
    for (int i = 0; i < r->self.nmembers && !lost; i++)
        lost = is_dead(events, r->self.members[i].id);
    free(events);
    if (cur > r->self.round || lost)
        return 0;
    key(r, k, sizeof k, "r%" PRId64 "/failed", r->self.round);
    if ((rc = el_store_add(r->link.cl, k, 1, &first)))
        return store_fail(r, rc, "reporting a failure");
    if (first == 1) {
        key(r, k, sizeof k, "restarts");
        if ((rc = el_store_add(r->link.cl, k, 1, &used)))
            return store_fail(r, rc, "charging the restart budget");
        if (used > r->max_restarts) {
            char msg[300];
            snprintf(msg, sizeof msg, "failed: restart budget of %d used up "
                     "(last: %s)", r->max_restarts, why ? why : "failure");
            key(r, k, sizeof k, "closed");
            el_store_compare_set(r->link.cl, k, "", 0, msg, strlen(msg), NULL,
                                 NULL);
            append_event(r, "closed %s", msg);
            return FAIL(r, EL_ELIMIT, "%s", msg);
        }
        note(r, "round %" PRId64 " (rank %d of %d nodes) failed (%s); "
             "restart %" PRId64 " of %d", r->self.round, r->self.rank,
             r->self.nmembers,
             why ? why : "failure", used, r->max_restarts);
    }
    if ((rc = check_closed(r)) != 0)
        return rc < 0 ? rc : EL_ELIMIT;
    char *list = expect_list(r, r->self.members, r->self.nmembers, NULL);
    if (!list)
        return r->base.errmsg[0] ? EL_EPEERLOST : -ENOMEM;
    rc = raise_round(r, r->self.round + 1, list, &now);
    free(list);
    return rc;
}

static int dyn_notify_fd(struct el_rdzv *base)
{
    return ((struct dyn_rdzv *)base)->evfd;
}

static void dyn_ack_notify(struct el_rdzv *base)
{
    struct dyn_rdzv *r = (struct dyn_rdzv *)base;
    uint64_t v;
    if (read(r->evfd, &v, sizeof v) < 0) {
        /* nothing pending */
    }
}

static int dyn_exit_barrier(struct el_rdzv *base, int succeeded,
                            int timeout_ms, int cancel_fd)
{
    struct dyn_rdzv *r = (struct dyn_rdzv *)base;
    char k[400], kc[400];
    int rc;
    if ((rc = ensure_client(r, cancel_fd, el_now_ms() + 2000)))
        return rc;
    key(r, k, sizeof k, "r%" PRId64 "/exit/done", r->self.round);
    if (!succeeded) {
        rc = el_store_set(r->link.cl, k, "failed", 6);
        return rc ? store_fail(r, rc, "reporting the failure") : 0;
    }
    int64_t n;
    key(r, kc, sizeof kc, "r%" PRId64 "/exit/count", r->self.round);
    if ((rc = el_store_add(r->link.cl, kc, 1, &n)))
        return store_fail(r, rc, "entering the exit barrier");
    if (n >= r->self.nmembers && (rc = el_store_set(r->link.cl, k, "ok", 2)))
        return store_fail(r, rc, "completing the exit barrier");
    el_store_set_cancel_fd(r->link.cl, cancel_fd);
    rc = el_store_get(r->link.cl, k, NULL, NULL, timeout_ms);
    if (r->link.cl)
        el_store_set_cancel_fd(r->link.cl, -1);
    if (rc == -ETIMEDOUT)
        return FAIL(r, rc, "exit barrier: not every node finished within "
                    "%d s", timeout_ms / 1000);
    return rc ? store_fail(r, rc, "waiting in the exit barrier") : 0;
}

static int dyn_set_closed(struct el_rdzv *base)
{
    struct dyn_rdzv *r = (struct dyn_rdzv *)base;
    char k[400];
    r->closed = 1;
    if (!r->link.cl && ensure_client(r, -1, el_now_ms() + 2000))
        return EL_EPEERLOST;
    key(r, k, sizeof k, "closed");
    int rc = el_store_compare_set(r->link.cl, k, "", 0, "ok", 2, NULL, NULL);
    if (rc && rc != EL_EMISMATCH)
        return store_fail(r, rc, "closing");
    return append_event(r, "closed ok");
}

static void dyn_close(struct el_rdzv *base)
{
    struct dyn_rdzv *r = (struct dyn_rdzv *)base;
    stop_live(r);
    el_store_close(r->link.cl);
    el_store_server_close(r->srv);
    close(r->stop_pipe[0]);
    close(r->stop_pipe[1]);
    close(r->evfd);
    el__rdzv_node_free(&r->self);
    free(r);
}

static const struct el_rdzv_ops dyn_ops = {
    .name = "c10d",
    .next = dyn_next,
    .num_nodes_waiting = dyn_num_nodes_waiting,
    .notify_fd = dyn_notify_fd,
    .ack_notify = dyn_ack_notify,
    .exit_barrier = dyn_exit_barrier,
    .set_closed = dyn_set_closed,
    .report_failure = dyn_report_failure,
    .close = dyn_close,
};

/* Host the store at the endpoint?  is_host = 1 must, -1 must not, 0 tries:
 * binding works only where the endpoint's address is local and free. */
static int maybe_host(struct dyn_rdzv *r, int is_host, char *err,
                      size_t errlen)
{
    if (is_host < 0)
        return 0;
    struct el_store_server_opts so = {.host = r->link.host,
                                      .port = r->link.port};
    if (strcmp(r->link.host, "localhost") == 0)
        so.host = "127.0.0.1";
    int rc = el_store_server_start(&r->srv, &so);
    if (rc == 0) {
        note(r, "hosting the rendezvous store on %s:%d", r->link.host,
             r->link.port);
        return 0;
    }
    r->srv = NULL;
    if (is_host == 0 && (rc == -EADDRINUSE || rc == -EADDRNOTAVAIL ||
                        rc == EL_EUSAGE))
        return 0; /* someone else hosts it, or the address is not ours */
    snprintf(err, errlen, "cannot host the rendezvous store on %s:%d: %s",
             r->link.host, r->link.port, el_strerror(rc));
    return rc;
}

int el__rdzv_store_open(struct el_rdzv **out,
                        const struct el_rdzv_config *cfg, char *err,
                        size_t errlen)
{
    if (cfg->min_nodes < 1 || cfg->max_nodes < cfg->min_nodes) {
        snprintf(err, errlen, "--nnodes must be MIN:MAX with 1 <= MIN <= MAX "
                 "(got %d:%d)", cfg->min_nodes, cfg->max_nodes);
        return EL_EUSAGE;
    }
    if (!cfg->host || !*cfg->host || cfg->port <= 0) {
        snprintf(err, errlen, "the c10d rendezvous needs --rdzv-endpoint="
                 "HOST:PORT (every node gives the same one)");
        return EL_EUSAGE;
    }
    struct dyn_rdzv *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->base.ops = &dyn_ops;
    r->min_nodes = cfg->min_nodes;
    r->max_nodes = cfg->max_nodes;
    r->max_restarts = cfg->max_restarts;
    r->join_timeout_ms = cfg->join_timeout_ms > 0 ? cfg->join_timeout_ms
                                                  : 600000;
    r->link.io_timeout_ms = cfg->io_timeout_ms > 0 ? cfg->io_timeout_ms : 60000;
    r->last_call_ms = cfg->last_call_timeout_ms > 0 ? cfg->last_call_timeout_ms
                                                    : 0;
    r->keepalive_ms = cfg->keep_alive_interval_ms > 0
                          ? cfg->keep_alive_interval_ms : 5000;
    r->keepalive_attempts = cfg->keep_alive_max_attempt > 0
                                ? cfg->keep_alive_max_attempt : 3;
    el__rdzv_node_init(&r->self, cfg);
    r->stop_pipe[0] = r->stop_pipe[1] = -1;
    snprintf(r->run_id, sizeof r->run_id, "%s",
             cfg->run_id ? cfg->run_id : "none");
    snprintf(r->link.prefix, sizeof r->link.prefix, "/elrun/%s/", r->run_id);
    snprintf(r->link.host, sizeof r->link.host, "%s", cfg->host);
    r->link.port = cfg->port;
    r->link.hint = "check --rdzv-endpoint and that the host agent (or "
                   "'elrun store') runs there";
    r->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->evfd < 0 || pipe2(r->stop_pipe, O_CLOEXEC) < 0) {
        int e = -errno;
        snprintf(err, errlen, "eventfd/pipe: %s", strerror(errno));
        if (r->evfd >= 0)
            close(r->evfd);
        free(r);
        return e;
    }
    int rc = maybe_host(r, cfg->is_host, err, errlen);
    if (rc == 0)
        rc = start_live(r);
    if (rc) {
        if (!*err)
            snprintf(err, errlen, "%s", r->base.errmsg);
        dyn_close(&r->base);
        return rc;
    }
    *out = &r->base;
    return 0;
}
