/* test_rdzv_rules.c -- the rules of the elastic rendezvous (elastic.c) over
 * an in-memory state backend, with N simulated nodes in one process (one
 * thread per node blocked in el_rdzv_next): joining, the last call, MAX,
 * scale-up, hot spares, deaths after joining and during the last call, the
 * join timeout, a closed job, the restart budget, the exit barrier, and a
 * member declared dead that comes back (it must never make rounds churn).
 *
 * The backend: one mutex-guarded world (the job's state as the store or
 * etcd would hold it) with a version bumped by every change; waits block on
 * a condition variable until the version moves past the one the rules read.
 * A node "dies" when the test lists its id dead, as the store's close hook
 * or etcd's lease would.  Timeouts are tens of milliseconds.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elrun/err.h"
#include "elrun/net.h"
#include "rendezvous/elastic.h"
#include "test.h"

#define MAXR 64
#define MAXJ 32

struct mem_round {
    char *expect, *members;
    int64_t deadline;
    struct el__rdzv_member joiners[MAXJ];
    int njoin, expected_in, failed;
    char arrived[MAXJ][EL__RDZV_ID_MAX];
    int narrived, verdict;
};

struct mem_world {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t version;
    int64_t round;
    char *closed;
    int64_t restarts;
    int raises;     /* times the round was raised            */
    int64_t fround; /* the failure record: round, -1 none    */
    char fid[EL__RDZV_ID_MAX];
    struct mem_round r[MAXR];
    char dead[MAXJ][EL__RDZV_ID_MAX];
    int ndead;
};

struct mem_node {
    struct el__rdzv_elastic e; /* first */
    struct mem_world *w;
    pthread_t th;
    int lws, rc;
    struct el_rdzv_info info;
    char log[4096];
};

static struct mem_world *world_new(void)
{
    struct mem_world *w = calloc(1, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->round = -1;
    w->fround = -1;
    for (int i = 0; i < MAXR; i++)
        w->r[i].deadline = -1;
    return w;
}

#define W(e) (((struct mem_node *)(e))->w)

static void changed(struct mem_world *w)
{
    w->version++;
    pthread_cond_broadcast(&w->cv);
}

static struct mem_round *rnd(struct mem_world *w, int64_t round)
{
    if (round < 0 || round >= MAXR)
        TEST_FAIL_("round %" PRId64 ": the rounds churn", round);
    return &w->r[round];
}

static int dead_locked(struct mem_world *w, const char *id)
{
    for (int i = 0; i < w->ndead; i++)
        if (strcmp(w->dead[i], id) == 0)
            return 1;
    return 0;
}

/* The test declares a node dead (its keep-alive went silent). */
static void declare_dead(struct mem_world *w, const char *id)
{
    pthread_mutex_lock(&w->mu);
    snprintf(w->dead[w->ndead++], EL__RDZV_ID_MAX, "%s", id);
    changed(w);
    pthread_mutex_unlock(&w->mu);
}

/* A joiner with no thread behind it (it dies before it could do more). */
static void ghost_join(struct mem_world *w, int64_t round, const char *id)
{
    pthread_mutex_lock(&w->mu);
    if (w->round < round)
        w->round = round;
    struct mem_round *r = rnd(w, round);
    struct el__rdzv_member *x = &r->joiners[r->njoin++];
    memset(x, 0, sizeof *x);
    snprintf(x->id, sizeof x->id, "%s", id);
    snprintf(x->name, sizeof x->name, "ghost");
    x->lws = 1;
    x->prev_rank = -1;
    x->seq = r->njoin;
    changed(w);
    pthread_mutex_unlock(&w->mu);
}

/* ---- the state primitives ---- */

static int m_enter(struct el__rdzv_elastic *e, int cancel_fd, long long dl)
{
    e->cancel_fd = cancel_fd;
    return 0;
}

static void m_leave(struct el__rdzv_elastic *e)
{
    e->cancel_fd = -1;
}

static int m_read_job(struct el__rdzv_elastic *e, int64_t *round, int64_t *rev)
{
    struct mem_world *w = W(e);
    int closed = 0;
    pthread_mutex_lock(&w->mu);
    if (w->round < 0) {
        w->round = 0;
        changed(w);
    }
    *round = w->round;
    *rev = (int64_t)w->version;
    if (w->closed) {
        el__rdzv_fail(&e->base, EL_ECLOSED, "the job is closed (%s)",
                      w->closed);
        closed = 1;
    }
    pthread_mutex_unlock(&w->mu);
    return closed;
}

static int alive(void *arg, const char *id)
{
    return !dead_locked(arg, id);
}

static int m_raise_round(struct el__rdzv_elastic *e, int64_t target,
                         const struct el__rdzv_member *m, int n,
                         const char *extra, int64_t *now)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    struct mem_round *r = rnd(w, target);
    if (m && !r->expect && w->round < target)
        r->expect = el__rdzv_expect_list(m, n, extra, alive, w);
    if (w->round < target) {
        w->round = target;
        w->raises++;
        changed(w);
    }
    *now = w->round;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int m_read_round(struct el__rdzv_elastic *e, int64_t round,
                        struct el__rdzv_round *st)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    struct mem_round *r = rnd(w, round);
    st->members = r->members ? strdup(r->members) : NULL;
    st->deadline = r->deadline;
    st->sealing = 0;
    st->rev = (int64_t)w->version;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int m_join(struct el__rdzv_elastic *e, int64_t round, int lws,
                  int64_t *arrival, int64_t *expect_n)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    struct mem_round *r = rnd(w, round);
    struct el__rdzv_member *x = &r->joiners[r->njoin++];
    memset(x, 0, sizeof *x);
    snprintf(x->id, sizeof x->id, "%s", e->self.id);
    snprintf(x->name, sizeof x->name, "%s", e->self.name);
    x->lws = lws;
    x->prev_rank = e->self.rank;
    x->seq = r->njoin;
    *arrival = r->njoin;
    *expect_n = r->expect ? strtoll(r->expect, NULL, 10) : 0;
    if (r->expect && el__rdzv_expected(r->expect, e->self.id))
        r->expected_in++;
    changed(w);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int m_count(struct el__rdzv_elastic *e, int64_t round, int expected,
                   struct el__rdzv_round *st)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    struct mem_round *r = rnd(w, round);
    st->joiners = r->njoin;
    st->expected_in = expected ? r->expected_in : 0;
    st->jrev = (int64_t)w->version;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int m_set_deadline(struct el__rdzv_elastic *e, int64_t round,
                          long long wall_ms)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    if (rnd(w, round)->deadline < 0) {
        rnd(w, round)->deadline = wall_ms;
        changed(w);
    }
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static void m_clear_deadline(struct el__rdzv_elastic *e, int64_t round)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    rnd(w, round)->deadline = -1;
    changed(w);
    pthread_mutex_unlock(&w->mu);
}

static int m_joiners(struct el__rdzv_elastic *e, int64_t round,
                     struct el__rdzv_member **m, int *n)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    struct mem_round *r = rnd(w, round);
    *m = calloc((size_t)r->njoin + 1, sizeof **m);
    memcpy(*m, r->joiners, (size_t)r->njoin * sizeof **m);
    *n = r->njoin;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int m_publish(struct el__rdzv_elastic *e, int64_t round,
                     const char *list, size_t len, int *created)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    struct mem_round *r = rnd(w, round);
    *created = !r->members;
    if (!r->members) {
        r->members = strndup(list, len);
        changed(w);
    }
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static void m_forget(struct el__rdzv_elastic *e, int64_t round)
{
}

/* Until the world changes after the state read (token), or ms pass. */
static int wait_version(struct mem_world *w, uint64_t token, int ms,
                        int (*done)(struct mem_world *, int64_t), int64_t arg)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    while (done ? !done(w, arg) : w->version == token) {
        if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) == ETIMEDOUT) {
            rc = -ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static int m_wait(struct el__rdzv_elastic *e, enum el__rdzv_wait what,
                  int64_t round, const struct el__rdzv_round *st, int64_t rev,
                  int ms)
{
    uint64_t token = what == EL__RDZV_WAIT_ROUND   ? (uint64_t)rev
                     : what == EL__RDZV_WAIT_STATE ? (uint64_t)st->rev
                                                   : (uint64_t)st->jrev;
    return wait_version(W(e), token, ms, NULL, 0);
}

static int m_is_dead(struct el__rdzv_elastic *e, const char *id)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    int d = dead_locked(w, id);
    pthread_mutex_unlock(&w->mu);
    return d;
}

static int m_charge(struct el__rdzv_elastic *e, int64_t round, int *first)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    *first = ++rnd(w, round)->failed == 1;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int m_add_restart(struct el__rdzv_elastic *e, int64_t *used)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    *used = ++w->restarts;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int m_close_job(struct el__rdzv_elastic *e, const char *why)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    if (!w->closed) {
        w->closed = strdup(why);
        changed(w);
    }
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int m_exit_verdict(struct el__rdzv_elastic *e, int64_t round, int ok)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    rnd(w, round)->verdict = ok ? 1 : 2;
    changed(w);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int m_exit_count(struct el__rdzv_elastic *e, int64_t round, int64_t *n)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    *n = rnd(w, round)->narrived;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int m_exit_arrive(struct el__rdzv_elastic *e, int64_t round, int64_t *n)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    struct mem_round *r = rnd(w, round);
    snprintf(r->arrived[r->narrived++], EL__RDZV_ID_MAX, "%s", e->self.id);
    *n = r->narrived;
    changed(w);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int m_exit_arrived(struct el__rdzv_elastic *e, int64_t round,
                          const char *id)
{
    struct mem_world *w = W(e);
    int found = 0;
    pthread_mutex_lock(&w->mu);
    struct mem_round *r = rnd(w, round);
    for (int i = 0; i < r->narrived; i++)
        found |= strcmp(r->arrived[i], id) == 0;
    pthread_mutex_unlock(&w->mu);
    return found;
}

static int verdict_given(struct mem_world *w, int64_t round)
{
    return w->r[round].verdict != 0;
}

static int m_exit_wait(struct el__rdzv_elastic *e, int64_t round, int ms)
{
    return wait_version(W(e), 0, ms, verdict_given, round);
}

static void m_took_round(struct el__rdzv_elastic *e, int64_t round,
                         const struct el__rdzv_member *m, int n, int me,
                         struct el_rdzv_info *info)
{
    snprintf(info->store_host, sizeof info->store_host, "memory");
    info->store_port = 1;
}

static int m_put_failure(struct el__rdzv_elastic *e, int64_t round)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    w->fround = round;
    snprintf(w->fid, sizeof w->fid, "%s", e->self.id);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int m_get_failure(struct el__rdzv_elastic *e, int64_t *round, char *id,
                         size_t cap)
{
    struct mem_world *w = W(e);
    pthread_mutex_lock(&w->mu);
    int have = w->fround >= 0;
    *round = w->fround;
    snprintf(id, cap, "%s", w->fid);
    pthread_mutex_unlock(&w->mu);
    return have;
}

static int m_reborn(struct el__rdzv_elastic *e)
{
    return 0; /* the store backend restarts its keep-alive here */
}

static const struct el__rdzv_state_ops mem_state = {
    .enter = m_enter,
    .leave = m_leave,
    .read_job = m_read_job,
    .raise_round = m_raise_round,
    .read_round = m_read_round,
    .join = m_join,
    .count = m_count,
    .set_deadline = m_set_deadline,
    .clear_deadline = m_clear_deadline,
    .joiners = m_joiners,
    .publish = m_publish,
    .forget = m_forget,
    .wait = m_wait,
    .is_dead = m_is_dead,
    .charge = m_charge,
    .add_restart = m_add_restart,
    .put_failure = m_put_failure,
    .get_failure = m_get_failure,
    .close_job = m_close_job,
    .exit_verdict = m_exit_verdict,
    .exit_arrive = m_exit_arrive,
    .exit_count = m_exit_count,
    .exit_arrived = m_exit_arrived,
    .exit_wait = m_exit_wait,
    .took_round = m_took_round,
    .reborn = m_reborn,
};

/* As etcd: the dead stay dead (no reborn). */
static struct el__rdzv_state_ops mem_state_final;

static void m_close(struct el_rdzv *base)
{
    el__rdzv_node_free(&((struct mem_node *)base)->e.self);
}

static const struct el_rdzv_ops mem_ops = {
    .name = "memory",
    .next = el__rdzv_elastic_next,
    .num_nodes_waiting = el__rdzv_elastic_num_nodes_waiting,
    .exit_barrier = el__rdzv_elastic_exit_barrier,
    .set_closed = el__rdzv_elastic_set_closed,
    .report_failure = el__rdzv_elastic_report_failure,
    .joiners = el__rdzv_elastic_joiners,
    .failure = el__rdzv_elastic_failure,
    .close = m_close,
};

/* ---- simulated nodes ---- */

struct opts {
    int min, max, last_call_ms, join_timeout_ms, max_restarts;
};

/* The nodes' logs are written by their threads and read by the test. */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_line(void *arg, const char *msg)
{
    struct mem_node *n = arg;
    pthread_mutex_lock(&log_mu);
    size_t len = strlen(n->log);
    snprintf(n->log + len, sizeof n->log - len, "%s\n", msg);
    pthread_mutex_unlock(&log_mu);
}

/* Does n's log hold s yet? */
static int log_has(struct mem_node *n, const char *s)
{
    pthread_mutex_lock(&log_mu);
    int has = strstr(n->log, s) != NULL;
    pthread_mutex_unlock(&log_mu);
    return has;
}

/* Round r's deadline as the world holds it (-1: none yet). */
static long long deadline_of(struct mem_world *w, int64_t r)
{
    pthread_mutex_lock(&w->mu);
    long long d = w->r[r].deadline;
    pthread_mutex_unlock(&w->mu);
    return d;
}

static struct mem_node *node(struct mem_world *w, const char *name,
                             struct opts o)
{
    struct mem_node *n = calloc(1, sizeof *n);
    struct el_rdzv_config cfg = {
        .backend = "memory",
        .min_nodes = o.min,
        .max_nodes = o.max,
        .local_addr = name,
        .join_timeout_ms = o.join_timeout_ms ? o.join_timeout_ms : 5000,
        .last_call_timeout_ms = o.last_call_ms,
        .keep_alive_interval_ms = 20,
        .keep_alive_max_attempt = 3,
        .max_restarts = o.max_restarts,
        .on_event = log_line,
    };
    cfg.event_arg = n;
    n->w = w;
    n->lws = 2;
    n->rc = 1;
    el__rdzv_elastic_init(&n->e, &cfg);
    n->e.base.ops = &mem_ops;
    n->e.ops = &mem_state;
    return n;
}

static struct el_rdzv *R_(struct mem_node *n)
{
    return &n->e.base;
}

static void *next_main(void *arg)
{
    struct mem_node *n = arg;
    n->rc = el_rdzv_next(R_(n), n->lws, -1, &n->info);
    return NULL;
}

static void start(struct mem_node *n)
{
    n->rc = 1;
    pthread_create(&n->th, NULL, next_main, n);
}

static int finish(struct mem_node *n)
{
    pthread_join(n->th, NULL);
    if (n->rc)
        fprintf(stderr, "  %s: %s\n%s", n->e.self.name, el_rdzv_errmsg(R_(n)),
                n->log);
    return n->rc;
}

static int waiting(struct mem_node *n)
{
    int k = -1;
    CHECK_OK(el_rdzv_num_nodes_waiting(R_(n), &k));
    return k;
}

/* Every node of the list took the same round with n members. */
static void same_round(struct mem_node **ns, int count, int members)
{
    for (int i = 0; i < count; i++) {
        CHECK_EQ(ns[i]->info.round, ns[0]->info.round);
        CHECK_EQ(ns[i]->info.num_nodes, members);
        CHECK_EQ(ns[i]->info.world_size, 2 * members);
        CHECK_EQ(ns[i]->info.base_rank, 2 * ns[i]->info.node_rank);
        for (int j = 0; j < i; j++)
            CHECK(ns[i]->info.node_rank != ns[j]->info.node_rank);
    }
}

static long long ms_since(long long t0)
{
    return el_now_ms() - t0;
}

/* ---- the rules ---- */

TEST(rdzv_rules_join_min_equals_max)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 2, .max = 2, .last_call_ms = 10000};
    struct mem_node *a = node(w, "a", o), *b = node(w, "b", o);
    start(a);
    start(b);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    struct mem_node *all[] = {a, b};
    same_round(all, 2, 2);
    CHECK_EQ(a->info.round, 0);
    CHECK(log_has(a, "round 0: 2 nodes"));
}

/* A node is named "<host>/<4 hex of its id>" in every line; two agents on
 * one host differ. */
TEST(rdzv_rules_labels_tell_two_agents_of_one_host_apart)
{
    char l[EL__RDZV_LABEL_MAX];
    el__rdzv_label("vm#4242#12ab3f2a", l, sizeof l);
    CHECK_STR(l, "vm/3f2a");
    el__rdzv_label("10.0.0.7#1#00000001", l, sizeof l);
    CHECK_STR(l, "10.0.0.7/0001");
    el__rdzv_label("odd-id", l, sizeof l); /* not ours: as it is */
    CHECK_STR(l, "odd-id");
    struct mem_world *w = world_new();
    struct opts o = {.min = 2, .max = 2, .last_call_ms = 10000};
    struct mem_node *a = node(w, "vm", o), *b = node(w, "vm", o);
    CHECK(strcmp(a->e.self.label, b->e.self.label) != 0);
    CHECK(strncmp(a->e.self.label, "vm/", 3) == 0);
    start(a);
    start(b);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    char line[EL__RDZV_LABEL_MAX + 64];
    snprintf(line, sizeof line, "this node (%s) is rank %d", a->e.self.label,
             a->info.node_rank);
    CHECK(log_has(a, line));
    CHECK(log_has(a, a->e.self.label) && log_has(a, b->e.self.label));
    CHECK(log_has(a, "(joined: vm/"));
}

/* While next() waits, another thread sees who joined the open round. */
TEST(rdzv_rules_joiners_seen_while_waiting)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 3, .max = 3, .last_call_ms = 10000};
    struct mem_node *a = node(w, "a", o), *b = node(w, "b", o),
                    *c = node(w, "c", o);
    char buf[256];
    CHECK_EQ(el_rdzv_joiners(R_(a), buf, sizeof buf), -1); /* nothing yet */
    start(a);
    start(b);
    long long t0 = el_now_ms();
    while (el_rdzv_joiners(R_(a), buf, sizeof buf) < 2 && ms_since(t0) < 5000)
        usleep(1000);
    CHECK_EQ(el_rdzv_joiners(R_(a), buf, sizeof buf), 2);
    CHECK(strstr(buf, a->e.self.label) && strstr(buf, b->e.self.label));
    CHECK(strstr(buf, ", ") != NULL);
    start(c);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    CHECK_OK(finish(c));
    struct mem_node *all[] = {a, b, c};
    same_round(all, 3, 3);
}

/* More than 16 joiners are counted, not named (nor read again and again). */
TEST(rdzv_rules_many_joiners_counted_not_named)
{
    enum { N = 18 };
    struct mem_world *w = world_new();
    struct opts o = {.min = N, .max = N, .last_call_ms = 10000};
    struct mem_node *n[N];
    char name[16], buf[256];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "n%d", i);
        n[i] = node(w, name, o);
    }
    for (int i = 0; i < N - 1; i++)
        start(n[i]);
    long long t0 = el_now_ms();
    while (el_rdzv_joiners(R_(n[0]), buf, sizeof buf) < N - 1 &&
           ms_since(t0) < 5000)
        usleep(1000);
    CHECK_EQ(el_rdzv_joiners(R_(n[0]), buf, sizeof buf), N - 1);
    CHECK_STR(buf, "");
    start(n[N - 1]);
    for (int i = 0; i < N; i++)
        CHECK_OK(finish(n[i]));
    same_round(n, N, N);
}

TEST(rdzv_rules_max_reached_seals_without_last_call)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 2, .max = 3, .last_call_ms = 30000};
    struct mem_node *n[3] = {node(w, "a", o), node(w, "b", o), node(w, "c", o)};
    long long t0 = el_now_ms();
    for (int i = 0; i < 3; i++)
        start(n[i]);
    for (int i = 0; i < 3; i++)
        CHECK_OK(finish(n[i]));
    CHECK(ms_since(t0) < 5000); /* not the 30 s last call */
    same_round(n, 3, 3);
}

TEST(rdzv_rules_last_call_seals_at_min_after_timeout)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 2, .max = 4, .last_call_ms = 150};
    struct mem_node *a = node(w, "a", o), *b = node(w, "b", o);
    long long t0 = el_now_ms();
    start(a);
    start(b);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    CHECK(ms_since(t0) >= 140);
    struct mem_node *all[] = {a, b};
    same_round(all, 2, 2);
}

TEST(rdzv_rules_scale_up_keeps_ranks)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 2, .max = 3, .last_call_ms = 50};
    struct mem_node *a = node(w, "a", o), *b = node(w, "b", o),
                    *c = node(w, "c", o);
    start(a);
    start(b);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    int ra = a->info.node_rank, rb = b->info.node_rank;
    CHECK_EQ(waiting(a), 0);
    start(c); /* finds round 0 below MAX: opens round 1 */
    long long t0 = el_now_ms();
    while (waiting(a) == 0 && ms_since(t0) < 2000) {
    }
    CHECK(waiting(a) > 0);
    CHECK(waiting(b) > 0);
    t0 = el_now_ms();
    start(a);
    start(b);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    CHECK_OK(finish(c));
    /* every expected node in: no keep-alive window, no last call */
    CHECK(ms_since(t0) < 1000);
    struct mem_node *all[] = {a, b, c};
    same_round(all, 3, 3);
    CHECK_EQ(a->info.round, 1);
    CHECK_EQ(a->info.node_rank, ra);
    CHECK_EQ(b->info.node_rank, rb);
    CHECK_EQ(c->info.node_rank, 2);
    CHECK_EQ(w->raises, 1);
}

TEST(rdzv_rules_hot_spare_takes_a_dead_members_place)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 2, .max = 2, .last_call_ms = 30000};
    struct mem_node *a = node(w, "a", o), *b = node(w, "b", o),
                    *c = node(w, "c", o);
    start(a);
    start(b);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    start(c);
    long long t0 = el_now_ms();
    while (!log_has(c, "waits as a hot spare") && ms_since(t0) < 2000) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    CHECK(log_has(c, "waits as a hot spare"));
    CHECK_EQ(waiting(a), 0); /* a spare is not a reason for a round */
    declare_dead(w, b->e.self.id);
    CHECK_EQ(waiting(a), 1);
    /* a says why, unless the spare, woken by the same death, already
     * opened the next round (then a counts it as the one waiting). */
    pthread_mutex_lock(&w->mu);
    int64_t raised = w->round;
    pthread_mutex_unlock(&w->mu);
    char gone[EL__RDZV_LABEL_MAX + 16];
    snprintf(gone, sizeof gone, "node %s is gone", b->e.self.label);
    CHECK(log_has(a, gone) || raised > 0);
    t0 = el_now_ms();
    start(a);
    CHECK_OK(finish(a));
    CHECK_OK(finish(c));
    CHECK(ms_since(t0) < 5000); /* at MAX at once: not the 30 s last call */
    struct mem_node *all[] = {a, c};
    same_round(all, 2, 2);
    CHECK_EQ(a->info.node_rank, 0);
    CHECK_EQ(c->info.node_rank, 1);
}

TEST(rdzv_rules_death_after_join_is_left_out)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 2, .max = 3, .last_call_ms = 30000};
    ghost_join(w, 0, "ghost#1#1");
    declare_dead(w, "ghost#1#1");
    struct mem_node *a = node(w, "a", o), *b = node(w, "b", o);
    start(a);
    start(b);
    CHECK_OK(finish(a)); /* MAX joiners, one dead: sealed with 2 */
    CHECK_OK(finish(b));
    struct mem_node *all[] = {a, b};
    same_round(all, 2, 2);
    CHECK(strstr(w->r[0].members, "ghost") == NULL);
}

TEST(rdzv_rules_death_during_last_call_waits_for_another)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 3, .max = 4, .last_call_ms = 100};
    struct mem_node *a = node(w, "a", o), *b = node(w, "b", o),
                    *d = node(w, "d", o);
    ghost_join(w, 0, "ghost#2#2");
    start(a);
    start(b);
    long long t0 = el_now_ms();
    while (deadline_of(w, 0) < 0 && ms_since(t0) < 2000) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    CHECK(deadline_of(w, 0) >= 0); /* three joined: the last call runs */
    declare_dead(w, "ghost#2#2");
    /* Sealing at the deadline finds 2 live < MIN: the round stays open. */
    struct timespec ts = {0, 300 * 1000000};
    nanosleep(&ts, NULL);
    CHECK(w->r[0].members == NULL);
    start(d);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    CHECK_OK(finish(d));
    struct mem_node *all[] = {a, b, d};
    same_round(all, 3, 3);
    CHECK_EQ(a->info.round, 0);
}

TEST(rdzv_rules_join_timeout)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 3, .max = 3, .join_timeout_ms = 100};
    struct mem_node *a = node(w, "a", o);
    CHECK_EQ(el_rdzv_next(R_(a), 1, -1, &a->info), -ETIMEDOUT);
    CHECK(strstr(el_rdzv_errmsg(R_(a)), "no round with at least 3 nodes "
                                        "formed within 0 s") != NULL);
}

TEST(rdzv_rules_closed_job)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 2, .max = 3, .last_call_ms = 50};
    struct mem_node *a = node(w, "a", o), *b = node(w, "b", o),
                    *c = node(w, "c", o);
    start(a);
    start(b);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    CHECK_OK(el_rdzv_set_closed(R_(a)));
    CHECK_EQ(waiting(b), 1);
    CHECK_EQ(el_rdzv_next(R_(b), 2, -1, &b->info), EL_ECLOSED);
    CHECK_EQ(el_rdzv_next(R_(c), 2, -1, &c->info), EL_ECLOSED);
    CHECK(strstr(el_rdzv_errmsg(R_(c)), "the job is closed (ok)") != NULL);
    CHECK_EQ(el_rdzv_next(R_(a), 2, -1, &a->info), EL_ECLOSED);
}

TEST(rdzv_rules_restart_budget_once_per_round)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 2, .max = 2, .max_restarts = 1};
    struct mem_node *a = node(w, "a", o), *b = node(w, "b", o);
    start(a);
    start(b);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    /* both report round 0's failure: one restart charged */
    CHECK_OK(el_rdzv_report_failure(R_(a), "x"));
    CHECK_OK(el_rdzv_report_failure(R_(b), "x"));
    CHECK_EQ(w->restarts, 1);
    start(a);
    start(b);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    CHECK_EQ(a->info.round, 1);
    CHECK_EQ(el_rdzv_report_failure(R_(b), "boom"), EL_ELIMIT);
    CHECK(strstr(el_rdzv_errmsg(R_(b)), "restart budget of 1 used up "
                                        "(last: boom)") != NULL);
    CHECK(w->closed != NULL);
}

/* The round after a worker failure knows whose it was, on every node: the
 * failing node's report records it before it opens the next round. */
TEST(rdzv_rules_the_next_round_knows_whose_failure_it_follows)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 2, .max = 2, .max_restarts = 3};
    struct mem_node *a = node(w, "a", o), *b = node(w, "b", o);
    struct el_rdzv_member_info who;
    start(a);
    start(b);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    CHECK_EQ(el_rdzv_failure(R_(a), 0, &who), 0); /* none yet */
    CHECK_OK(el_rdzv_report_failure(R_(b), "x"));
    CHECK_OK(el_rdzv_report_failure(R_(a), "x")); /* second: not recorded */
    start(a);
    start(b);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    CHECK_EQ(a->info.round, 1);
    char label[EL_HOST_MAX + 8];
    el_rdzv_label(b->e.self.id, label, sizeof label);
    for (int i = 0; i < 2; i++) {
        struct mem_node *n = i ? b : a;
        CHECK_EQ(el_rdzv_failure(R_(n), 0, &who), 1);
        CHECK_STR(who.id, b->e.self.id);
        CHECK_STR(who.name, "b");
        CHECK_STR(who.label, label);
        CHECK_EQ(el_rdzv_failure(R_(n), 1, &who), 0); /* round 1 did not fail */
    }
    CHECK(strncmp(label, "b/", 2) == 0 && strlen(label) == 6);
}

static void *barrier_main(void *arg)
{
    struct mem_node *n = arg;
    n->rc = el_rdzv_exit_barrier(R_(n), 1, 5000, -1);
    return NULL;
}

TEST(rdzv_rules_exit_barrier_counts_the_dead_as_through)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 3, .max = 3};
    struct mem_node *n[3] = {node(w, "a", o), node(w, "b", o), node(w, "c", o)};
    for (int i = 0; i < 3; i++)
        start(n[i]);
    for (int i = 0; i < 3; i++)
        CHECK_OK(finish(n[i]));
    declare_dead(w, n[2]->e.self.id);
    long long t0 = el_now_ms();
    pthread_t th;
    pthread_create(&th, NULL, barrier_main, n[0]);
    CHECK_OK(el_rdzv_exit_barrier(R_(n[1]), 1, 5000, -1));
    pthread_join(th, NULL);
    CHECK_OK(n[0]->rc);
    CHECK(ms_since(t0) < 2000); /* not the 5 s timeout */
    CHECK_EQ(w->r[0].verdict, 1);
}

TEST(rdzv_rules_backoff_is_bounded)
{
    CHECK_EQ(el__rdzv_backoff_ms(0, 15000), 0);
    CHECK_EQ(el__rdzv_backoff_ms(1, 15000), 0);
    CHECK_EQ(el__rdzv_backoff_ms(2, 15000), 100);
    CHECK_EQ(el__rdzv_backoff_ms(3, 15000), 200);
    CHECK_EQ(el__rdzv_backoff_ms(100, 15000), 30000);
    CHECK_EQ(el__rdzv_backoff_ms(100, 60000), 60000);
    for (int k = 2; k < 40; k++)
        CHECK(el__rdzv_backoff_ms(k + 1, 15000) >=
              el__rdzv_backoff_ms(k, 15000));
}

/* Round 0 with a, b, c; c freezes and is declared dead; a and b re-form
 * round 1 without it.  Then c resumes. */
static void frozen_member(struct mem_world *w, struct mem_node **n)
{
    for (int i = 0; i < 3; i++)
        start(n[i]);
    for (int i = 0; i < 3; i++)
        CHECK_OK(finish(n[i]));
    declare_dead(w, n[2]->e.self.id);
    CHECK_EQ(waiting(n[0]), 1);
    CHECK_EQ(waiting(n[1]), 1);
    start(n[0]);
    start(n[1]);
    CHECK_OK(finish(n[0]));
    CHECK_OK(finish(n[1]));
    CHECK_EQ(n[0]->info.round, 1);
    CHECK_EQ(n[0]->info.num_nodes, 2);
}

TEST(rdzv_rules_member_declared_dead_rejoins_once_as_new)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 2, .max = 3, .last_call_ms = 50};
    struct mem_node *n[3] = {node(w, "a", o), node(w, "b", o), node(w, "c", o)};
    frozen_member(w, n);
    char old[EL__RDZV_ID_MAX];
    snprintf(old, sizeof old, "%s", n[2]->e.self.id);
    int raises = w->raises;
    /* c resumes: its agent hears that a round is wanted... */
    CHECK(waiting(n[2]) > 0);
    /* ...and rejoins under a new id, which can be admitted. */
    start(n[2]);
    long long t0 = el_now_ms();
    while (waiting(n[0]) == 0 && ms_since(t0) < 2000) {
    }
    start(n[0]);
    start(n[1]);
    CHECK_OK(finish(n[0]));
    CHECK_OK(finish(n[1]));
    CHECK_OK(finish(n[2]));
    CHECK(strcmp(old, n[2]->e.self.id) != 0);
    CHECK(strstr(n[2]->log, "was declared dead by the others") != NULL);
    CHECK(strstr(n[2]->log, "rejoins as a new member") != NULL);
    same_round(n, 3, 3);
    CHECK_EQ(n[2]->info.round, 2);
    CHECK_EQ(n[2]->info.node_rank, 2);
    CHECK_EQ(w->raises, raises + 1); /* one round for it, not a churn */
    CHECK_EQ(waiting(n[0]), 0);
    CHECK_EQ(waiting(n[2]), 0);
}

TEST(rdzv_rules_member_declared_dead_cannot_open_rounds)
{
    struct mem_world *w = world_new();
    struct opts o = {.min = 2, .max = 3, .last_call_ms = 50};
    struct mem_node *n[3] = {node(w, "a", o), node(w, "b", o), node(w, "c", o)};
    mem_state_final = mem_state;
    mem_state_final.reborn = NULL; /* as etcd: its lease is gone */
    n[2]->e.ops = &mem_state_final;
    frozen_member(w, n);
    int64_t round = w->round;
    CHECK_EQ(el_rdzv_next(R_(n[2]), 2, -1, &n[2]->info), EL_EPEERLOST);
    CHECK(strstr(el_rdzv_errmsg(R_(n[2])), "this node (c/") != NULL);
    CHECK(strstr(el_rdzv_errmsg(R_(n[2])),
                 ") was declared dead "
                 "by the others: it was silent for longer than the "
                 "keep-alive window (0.06 s)") != NULL);
    CHECK_EQ(w->round, round);  /* no round opened for a node that cannot */
    CHECK_EQ(waiting(n[0]), 0); /* be admitted: the others keep running */
}

/* Whatever makes a node be left out of the rounds it joins (here a sealer
 * that drops it each time, as the frozen node's was), the rounds it opens
 * slow down: no more than a handful within a second. */
static int m_joiners_drop_c(struct el__rdzv_elastic *e, int64_t round,
                            struct el__rdzv_member **m, int *n)
{
    m_joiners(e, round, m, n);
    int k = 0;
    for (int i = 0; i < *n; i++)
        if (strcmp((*m)[i].name, "c") != 0)
            (*m)[k++] = (*m)[i];
    *n = k;
    return 0;
}

static struct el__rdzv_state_ops mem_state_drop;

struct runner {
    struct mem_node *n;
    atomic_int stop;
};

/* A member's agent: take rounds until told to stop, as the agent does when
 * num_nodes_waiting says others wait. */
static void *member_main(void *arg)
{
    struct runner *r = arg;
    while (!r->stop) {
        int k = 0;
        if (el_rdzv_num_nodes_waiting(R_(r->n), &k) == 0 && k > 0 &&
            el_rdzv_next(R_(r->n), 2, -1, &r->n->info) != 0)
            break;
        struct timespec ts = {0, 2 * 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

TEST(rdzv_rules_left_out_node_backs_off)
{
    struct mem_world *w = world_new();
    struct opts o = {
        .min = 2, .max = 3, .last_call_ms = 10, .join_timeout_ms = 1000};
    struct mem_node *a = node(w, "a", o), *b = node(w, "b", o),
                    *c = node(w, "c", o);
    mem_state_drop = mem_state;
    mem_state_drop.joiners = m_joiners_drop_c;
    a->e.ops = b->e.ops = c->e.ops = &mem_state_drop;
    start(a);
    start(b);
    CHECK_OK(finish(a));
    CHECK_OK(finish(b));
    struct runner ra = {.n = a}, rb = {.n = b};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, member_main, &ra);
    pthread_create(&tb, NULL, member_main, &rb);
    int rc = el_rdzv_next(R_(c), 2, -1, &c->info); /* never admitted */
    ra.stop = rb.stop = 1;
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_EQ(rc, -ETIMEDOUT);
    fprintf(stderr, "  rounds opened in 1 s: %d\n%s", w->raises,
            getenv("V") ? c->log : "");
    CHECK(w->raises <= 8);
    CHECK(log_has(c, "times in a row; waiting"));
}
