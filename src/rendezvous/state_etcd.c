/* state_etcd.c -- the elastic rendezvous on etcd ("etcd", alias "etcd-v2"):
 * the semantics of dynamic.c (rounds, last call, stable ranks, hot spares,
 * scale-up, a job-wide restart budget), with its state in a replicated
 * etcd cluster instead of one agent's store, so no agent is a single point
 * of failure.  docs/RENDEZVOUS.md describes the keys; in short, under
 * <etcd_prefix>/<run_id>/:
 *
 *   c/round          the current round R (decimal)
 *   c/closed         present once the job ended ("ok" or "failed: ...")
 *   c/restarts       rounds charged to the restart budget so far
 *   failure          "<R> <id>": the last charged failure (not under c/: it
 *                    wakes no watch), written before round R+1 opens
 *   alive/<id>       one per agent, on the agent's lease
 *   r<R>/node/<id>   "v1 <id> <lws> <prev_rank> <name> <port> <lease>",
 *                    on the lease; etcd's create_revision is the arrival
 *                    order
 *   r<R>/exp/<id>    an expected node arrived (on the lease)
 *   r<R>/expect      the nodes expected in round R ("<n>\n<id>\n...")
 *   r<R>/s/deadline  wall-clock ms when round R completes
 *   r<R>/s/sealer    the node sealing round R (on its lease)
 *   r<R>/s/members   the sealed member list (created once)
 *   r<R>/failed      created by the first failure report of round R
 *   r<R>/exit/...    the exit barrier
 *
 * Joining is a put of a key of one's own (no shared counter: contended
 * read-modify-write costs O(N^2) transactions on etcd; see docs/ETCD.md),
 * and counting is a count-only range.  Liveness is the lease: an agent that
 * dies or is cut off for a TTL (keep_alive_interval x keep_alive_max_attempt)
 * loses its keys, and every agent's watch of alive/ (deletes only) hears of
 * it at once.  A killed agent is seen sooner, by the ring: each member
 * holds a connection to its successor's store and revokes the successor's
 * lease when that connection closes and a new one is refused.  A second
 * watch on c/ hears of new rounds and of the end; a joiner waits on its
 * round's r<R>/s/ (three changes a round).
 *
 * The workers' store: every agent serves one (an elrun store on a free port
 * of its address), and the workers of a round use the one of the round's
 * rank 0, announced in the member list; so the job survives the loss of any
 * agent, and of any minority of etcd members.
 *
 * A finished job cleans up: each agent revokes its lease when it closes (its
 * keys go), and the last one out deletes the job's prefix.
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "elrun/err.h"
#include "elrun/etcd.h"
#include "elrun/net.h"
#include "elrun/store.h"
#include "rendezvous/elastic.h"
#include "rendezvous/rdzv_impl.h"

#define ID_MAX EL__RDZV_ID_MAX
#define KEY_MAX 700

struct etcd_rdzv {
    struct el__rdzv_elastic e; /* first: the rules' state, then base   */
    char prefix[512];          /* "<etcd_prefix>/<run_id>/"             */
    struct el_etcd_opts eo;    /* strings owned by 'strs'               */
    char *strs[7];
    struct el_etcd *c; /* the caller's thread's client          */
    int64_t lease;
    int64_t ttl_s;
    struct el_etcd_keeper *keeper;
    struct el_store_server *srv; /* this agent's workers' store           */
    int srv_port;
    int64_t served; /* last round its workers used it, or -1 */
    /* The watcher threads (deaths: alive/ deletes; ctl: c/ changes). */
    pthread_t th[2];
    int th_running[2];
    int64_t watch_from; /* revision the watches start at         */
    int stop_pipe[2];
    int evfd;
    pthread_mutex_t mu; /* guards dead[]                         */
    char **dead;        /* ids whose alive/ key was deleted      */
    int ndead, capdead;
    /* The ring thread watches one connection to the successor's store. */
    pthread_t ring_th;
    int ring_running;
    int ring_evfd;               /* readable: a new successor to watch    */
    struct el__rdzv_member succ; /* guarded by mu; port 0: none           */
    atomic_int lost;             /* the lease is gone: lost_why says why  */
    char lost_why[300];          /* guarded by mu (the keeper writes it)  */
};

#define R(e) ((struct etcd_rdzv *)(e))
#define FAIL(r, rc, ...) el__rdzv_fail(&(r)->e.base, (rc), __VA_ARGS__)
#define note(r, ...) el__rdzv_note(&(r)->e.self, __VA_ARGS__)

static void key(const struct etcd_rdzv *r, char *buf, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void key(const struct etcd_rdzv *r, char *buf, const char *fmt, ...)
{
    int n = snprintf(buf, KEY_MAX, "%s", r->prefix);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, (size_t)(KEY_MAX - n), fmt, ap);
    va_end(ap);
}

/* The lease is gone (the keeper said why): EL_EPEERLOST with that reason. */
static int lease_gone(struct etcd_rdzv *r, const char *more)
{
    char why[300];
    pthread_mutex_lock(&r->mu);
    snprintf(why, sizeof why, "%s", r->lost_why);
    pthread_mutex_unlock(&r->mu);
    return FAIL(r, EL_EPEERLOST, "this node's etcd lease is gone (%s)%s", why,
                more);
}

/* An etcd call failed with rc while doing 'what': say so, with the client's
 * reason (which names the members tried).  Returns rc. */
static int efail(struct etcd_rdzv *r, struct el_etcd *c, int rc,
                 const char *what)
{
    if (rc == -ECANCELED)
        return FAIL(r, rc, "canceled");
    if (rc == EL_ENOTFOUND && atomic_load(&r->lost))
        return lease_gone(r, "");
    if (rc == EL_ENOTFOUND)
        return FAIL(r, EL_EPEERLOST,
                    "%s: this node's etcd lease %" PRId64
                    " expired (the node was cut off from etcd for longer "
                    "than its %" PRId64 " s TTL)",
                    what, r->lease, r->ttl_s);
    const char *m = el_etcd_errmsg(c);
    return FAIL(r,
                rc == -EHOSTUNREACH || rc == EL_ETLS || rc == -EACCES
                    ? EL_EPEERLOST
                    : rc,
                "%s: %s", what, *m ? m : el_strerror(rc));
}

static void signal_fd(int fd)
{
    uint64_t one = 1;
    if (write(fd, &one, sizeof one) < 0) {
        /* an eventfd counter does not overflow here */
    }
}

static void signal_agent(struct etcd_rdzv *r)
{
    signal_fd(r->evfd);
}

/* ---- keys ---- */

/* Read a decimal key: *v = dflt if missing; *mod (may be NULL) gets its
 * mod_revision (0 if missing). */
static int get_int(struct etcd_rdzv *r, const char *k, int64_t dflt, int64_t *v,
                   int64_t *mod)
{
    void *val = NULL;
    int rc = el_etcd_get(r->c, k, &val, NULL, mod);
    if (rc == EL_ENOTFOUND) {
        *v = dflt;
        if (mod)
            *mod = 0;
        return 0;
    }
    if (rc)
        return efail(r, r->c, rc, "reading the rendezvous state");
    *v = strtoll(val, NULL, 10);
    free(val);
    return 0;
}

/* Create k = val unless it exists.  *created (may be NULL) says whether
 * this call did. */
static int create(struct etcd_rdzv *r, const char *k, const char *val,
                  int64_t lease, int *created, const char *what)
{
    struct el_etcd_cas cas = {.cond = EL_ETCD_IF_ABSENT,
                              .desired = val,
                              .desired_len = strlen(val),
                              .lease = lease};
    int ok = 0;
    int rc = el_etcd_cas(r->c, k, &cas, &ok, NULL);
    if (rc)
        return efail(r, r->c, rc, what);
    if (created)
        *created = ok;
    return 0;
}

static int count(struct etcd_rdzv *r, const char *k, int64_t *n, int64_t *rev)
{
    int rc = el_etcd_count_prefix(r->c, k, n, rev);
    return rc ? efail(r, r->c, rc, "counting the joiners") : 0;
}

static int is_dead(struct etcd_rdzv *r, const char *id)
{
    int dead = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->ndead && !dead; i++)
        dead = strcmp(r->dead[i], id) == 0;
    pthread_mutex_unlock(&r->mu);
    return dead;
}

static void mark_dead(struct etcd_rdzv *r, const char *id)
{
    if (is_dead(r, id))
        return; /* the ring saw it, then the watch (or the other way) */
    char *copy = strdup(id);
    pthread_mutex_lock(&r->mu);
    if (copy && r->ndead == r->capdead) {
        int cap = r->capdead ? r->capdead * 2 : 16;
        char **d = realloc(r->dead, (size_t)cap * sizeof *d);
        if (d) {
            r->dead = d;
            r->capdead = cap;
        }
    }
    if (copy && r->ndead < r->capdead)
        r->dead[r->ndead++] = copy;
    else
        free(copy);
    pthread_mutex_unlock(&r->mu);
}

/* Which members of this node's round are gone for sure.  Every agent
 * serves a store, so a refused connection to it proves that its agent
 * exited, long before its lease expires; a host that is down (no answer)
 * is left to the lease.  Marks them dead; returns how many. */
static int probe_members(struct etcd_rdzv *r)
{
    int gone = 0;
    for (int i = 0; i < r->e.self.nmembers; i++) {
        const struct el__rdzv_member *m = &r->e.self.members[i];
        if (strcmp(m->id, r->e.self.id) == 0 || m->port <= 0 ||
            is_dead(r, m->id))
            continue;
        int fd = el_tcp_connect(m->name, m->port, 50);
        if (fd >= 0) {
            close(fd);
            continue;
        }
        if (fd != -ECONNREFUSED)
            continue;
        mark_dead(r, m->id);
        gone++;
        char label[EL__RDZV_LABEL_MAX];
        el__rdzv_label(m->id, label, sizeof label);
        note(r,
             "round %" PRId64 " (rank %d of %d nodes): node %s is gone "
             "(its agent refuses connections); re-forming",
             r->e.self.round, r->e.self.rank, r->e.self.nmembers, label);
    }
    return gone;
}

/* The live agents of the job (their alive/ keys, less those known dead),
 * for expect lists. */
struct live_set {
    struct etcd_rdzv *r;
    struct el_etcd_kv *kvs;
    size_t n, skip; /* skip: the prefix length of the keys   */
};

static int live_has(void *arg, const char *id)
{
    struct live_set *s = arg;
    if (is_dead(s->r, id))
        return 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->kvs[i].key_len > s->skip &&
            strcmp(s->kvs[i].key + s->skip, id) == 0)
            return 1;
    return 0;
}

/* Raise c/round to at least 'target'; *now gets the round in force.  When
 * this node is the first to ask for round 'target', it first writes that
 * round's expect list: the live nodes of m (n of them) plus 'extra' (may be
 * NULL); m NULL: no list. */
static int raise_round(struct etcd_rdzv *r, int64_t target,
                       const struct el__rdzv_member *m, int n,
                       const char *extra, int64_t *now)
{
    char k[KEY_MAX], e[32], d[32];
    int64_t cur, mod;
    int rc;
    key(r, k, "c/round");
    if ((rc = get_int(r, k, -1, &cur, &mod)))
        return rc;
    if (cur >= target) {
        *now = cur;
        return 0;
    }
    if (m) {
        char ek[KEY_MAX];
        key(r, ek, "r%" PRId64 "/expect", target);
        void *old = NULL;
        rc = el_etcd_get(r->c, ek, &old, NULL, NULL);
        free(old);
        if (rc == EL_ENOTFOUND) {
            struct live_set live = {.r = r};
            char ak[KEY_MAX];
            key(r, ak, "alive/");
            live.skip = strlen(ak);
            if ((rc = el_etcd_range_prefix(r->c, ak, &live.kvs, &live.n, NULL)))
                return efail(r, r->c, rc, "listing the live nodes");
            char *list = el__rdzv_expect_list(m, n, extra, live_has, &live);
            el_etcd_kvs_free(live.kvs, live.n);
            if (!list)
                return FAIL(r, -ENOMEM, "out of memory");
            rc = create(r, ek, list, 0, NULL, "announcing the next round");
            free(list);
            if (rc)
                return rc;
        } else if (rc) {
            return efail(r, r->c, rc, "reading the next round");
        }
    }
    while (cur < target) {
        struct el_etcd_cas cas = {.desired = d};
        snprintf(d, sizeof d, "%" PRId64, target);
        cas.desired_len = strlen(d);
        if (cur < 0) {
            cas.cond = EL_ETCD_IF_ABSENT;
        } else {
            snprintf(e, sizeof e, "%" PRId64, cur);
            cas.cond = EL_ETCD_IF_VALUE;
            cas.expected = e;
            cas.expected_len = strlen(e);
        }
        int ok = 0;
        struct el_etcd_kv kv = {0};
        if ((rc = el_etcd_cas(r->c, k, &cas, &ok, &kv)))
            return efail(r, r->c, rc, "raising the round");
        if (!ok)
            cur = kv.key ? strtoll(kv.value, NULL, 10) : -1;
        else
            cur = target;
        el_etcd_kv_clear(&kv);
    }
    *now = cur;
    return 0;
}

static int read_round(struct etcd_rdzv *r, int64_t *round, int64_t *mod)
{
    char k[KEY_MAX];
    int rc;
    key(r, k, "c/round");
    if ((rc = get_int(r, k, -1, round, mod)))
        return rc;
    if (*round >= 0)
        return 0;
    if ((rc = raise_round(r, 0, NULL, 0, NULL, round)))
        return rc;
    return get_int(r, k, 0, round, mod);
}

/* The job's state in one read of c/: the round in force (created as 0 if
 * there is none) and its mod_revision; 1 if the job is closed (the reason
 * in errmsg), else 0; < 0 on error. */
static int read_job(struct etcd_rdzv *r, int64_t *round, int64_t *mod)
{
    char k[KEY_MAX];
    struct el_etcd_kv *kvs = NULL;
    size_t n = 0;
    key(r, k, "c/");
    size_t skip = strlen(k);
    int rc = el_etcd_range_prefix(r->c, k, &kvs, &n, NULL);
    if (rc)
        return efail(r, r->c, rc, "reading the job state");
    int closed = 0;
    *round = -1;
    *mod = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = kvs[i].key + skip;
        if (strcmp(name, "closed") == 0) {
            FAIL(r, EL_ECLOSED, "the job is closed (%s)", (char *)kvs[i].value);
            closed = 1;
        } else if (strcmp(name, "round") == 0) {
            *round = strtoll(kvs[i].value, NULL, 10);
            *mod = kvs[i].mod_revision;
        }
    }
    el_etcd_kvs_free(kvs, n);
    if (closed || *round >= 0)
        return closed;
    return read_round(r, round, mod);
}

/* ---- the watcher threads ---- */

/* Follow one watch until stopped: 'deaths' records the ids whose alive/
 * key was deleted; both wake the agent on any event.  A watch that fails
 * (every member unreachable for a while) is opened again from where it
 * stopped: a lasting outage shows as the lease's loss, through the keeper. */
static void watch_loop(struct etcd_rdzv *r, int deaths)
{
    char k[KEY_MAX], eb[256];
    struct el_etcd *c = NULL;
    key(r, k, deaths ? "alive/" : "c/");
    size_t skip = strlen(k);
    int64_t from = r->watch_from;
    if (el_etcd_open(&c, &r->eo, eb, sizeof eb))
        return;
    el_etcd_set_cancel_fd(c, r->stop_pipe[0]);
    for (;;) {
        struct el_etcd_watch *w = NULL;
        int rc = el_etcd_watch_open_filtered(
            c, k, 1, from, deaths ? EL_ETCD_WATCH_NO_PUT : 0, &w);
        while (rc == 0) {
            struct el_etcd_event *evs = NULL;
            size_t n = 0;
            rc = el_etcd_watch_next(w, &evs, &n, -1);
            for (size_t i = 0; i < n && deaths; i++) {
                if (evs[i].type != EL_ETCD_DELETE || evs[i].kv.key_len <= skip)
                    continue;
                mark_dead(r, evs[i].kv.key + skip);
            }
            el_etcd_events_free(evs, n);
            if (n)
                signal_agent(r);
        }
        int64_t next = w ? el_etcd_watch_revision(w) : from;
        el_etcd_watch_close(w);
        if (rc == -ECANCELED)
            break;
        from = rc == -ESTALE ? 0 : next;
        signal_agent(r);
        struct pollfd p = {.fd = r->stop_pipe[0], .events = POLLIN};
        if (poll(&p, 1, 500) > 0)
            break;
    }
    el_etcd_close(c);
}

static void *deaths_main(void *arg)
{
    watch_loop(arg, 1);
    return NULL;
}

static void *ctl_main(void *arg)
{
    watch_loop(arg, 0);
    return NULL;
}

/* The ring: each member keeps one connection open to the store its
 * successor in the round serves.  The store never writes unasked, so the
 * connection becomes readable only when it closes; then a refused
 * reconnection proves the successor's agent gone, and this node revokes its
 * lease: every agent's deletes-only watch hears of the death within
 * milliseconds instead of a TTL.  A host that went silent is left to the
 * lease (no refusal comes), so a cut link revokes nothing. */
static void *ring_main(void *arg)
{
    struct etcd_rdzv *r = arg;
    struct el_etcd *c = NULL;
    struct el__rdzv_member peer = {0};
    char eb[256];
    int sock = -1;
    if (el_etcd_open(&c, &r->eo, eb, sizeof eb))
        return NULL;
    el_etcd_set_cancel_fd(c, r->stop_pipe[0]);
    for (;;) {
        struct pollfd p[3] = {{.fd = r->stop_pipe[0], .events = POLLIN},
                              {.fd = r->ring_evfd, .events = POLLIN},
                              {.fd = sock, .events = POLLIN}};
        /* Connect now if there is a peer but no connection (again each
         * second while its host does not answer). */
        int timeout = peer.port > 0 && sock < 0 ? 1000 : -1;
        if (peer.port > 0 && sock < 0) {
            int fd = el_tcp_connect(peer.name, peer.port, 50);
            if (fd >= 0) {
                sock = fd;
                p[2].fd = sock;
                timeout = -1;
            } else if (fd == -ECONNREFUSED) {
                if (!is_dead(r, peer.id)) {
                    char label[EL__RDZV_LABEL_MAX];
                    el__rdzv_label(peer.id, label, sizeof label);
                    mark_dead(r, peer.id);
                    note(r,
                         "node %s is gone (its agent refuses "
                         "connections); revoking its lease",
                         label);
                    el_etcd_lease_revoke(c, peer.lease);
                    signal_agent(r);
                }
                peer.port = 0;
                continue;
            }
        }
        if (poll(p, sock >= 0 ? 3 : 2, timeout) < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            break;
        if (p[1].revents & POLLIN) {
            uint64_t v;
            if (read(r->ring_evfd, &v, sizeof v) < 0) {
                /* raced with another read: nothing pending */
            }
            pthread_mutex_lock(&r->mu);
            peer = r->succ;
            pthread_mutex_unlock(&r->mu);
            if (sock >= 0)
                close(sock);
            sock = -1;
            continue;
        }
        if (sock >= 0 && p[2].revents) {
            char b[256];
            ssize_t got = recv(sock, b, sizeof b, MSG_DONTWAIT);
            if (got > 0 || (got < 0 && (errno == EAGAIN || errno == EINTR)))
                continue;
            close(sock); /* closed: reconnect, or learn it is gone */
            sock = -1;
        }
    }
    if (sock >= 0)
        close(sock);
    el_etcd_close(c);
    return NULL;
}

/* Watch the successor of this node in the round it just took. */
static void ring_follow(struct etcd_rdzv *r)
{
    int n = r->e.self.nmembers, me = r->e.self.rank;
    pthread_mutex_lock(&r->mu);
    memset(&r->succ, 0, sizeof r->succ);
    if (n > 1 && me >= 0)
        r->succ = r->e.self.members[(me + 1) % n];
    pthread_mutex_unlock(&r->mu);
    signal_fd(r->ring_evfd);
}

static void on_lease_lost(void *arg, int64_t lease, int err, const char *why)
{
    struct etcd_rdzv *r = arg;
    (void)lease; /* 'why' names it */
    pthread_mutex_lock(&r->mu);
    snprintf(r->lost_why, sizeof r->lost_why, "%s", why);
    pthread_mutex_unlock(&r->mu);
    atomic_store(&r->lost, 1);
    signal_agent(r);
}

/* ---- operations ---- */

/* This agent's store serves the workers of 'round': delete what the
 * workers of the last round it served left there (best effort). */
static void forget_served(struct etcd_rdzv *r, int64_t round)
{
    int64_t old = r->served;
    r->served = round;
    if (old < 0)
        return;
    struct el_store *cl = NULL;
    if (el_store_connect(&cl, "127.0.0.1", r->srv_port, 1000, 2000) != 0)
        return;
    char wk[64];
    int64_t n;
    snprintf(wk, sizeof wk, "/worker/attempt_%" PRId64 "/", old);
    el_store_delete_prefix(cl, wk, &n);
    snprintf(wk, sizeof wk, "//worker/attempt_%" PRId64 "/", old);
    el_store_delete_prefix(cl, wk, &n);
    el_store_close(cl);
}

/* Round 'round' is sealed with m (n members), this node at 'me'. */
static void et_took_round(struct el__rdzv_elastic *e, int64_t round,
                          const struct el__rdzv_member *m, int n, int me,
                          struct el_rdzv_info *info)
{
    struct etcd_rdzv *r = R(e);
    ring_follow(r);
    if (me == 0)
        forget_served(r, round);
    /* The workers' store is rank 0's. */
    snprintf(info->store_host, sizeof info->store_host, "%s", m[0].name);
    info->store_port = m[0].port;
    info->use_agent_store = 1;
}

/* Join open round 'round': publish this node, and mark it arrived if the
 * round expects it.  *expect_n gets the number of nodes expected (0: no
 * list). */
static int et_join(struct el__rdzv_elastic *e, int64_t round, int lws,
                   int64_t *arrival, int64_t *expect_n)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX], v[ID_MAX + EL_HOST_MAX + 64];
    int rc;
    key(r, k, "r%" PRId64 "/node/%s", round, r->e.self.id);
    snprintf(v, sizeof v, "v1 %s %d %d %s %d %" PRId64, r->e.self.id, lws,
             r->e.self.rank, r->e.self.name, r->srv_port, r->lease);
    if ((rc = el_etcd_put(r->c, k, v, strlen(v), r->lease, NULL)))
        return efail(r, r->c, rc, "joining the round");
    /* Its place: the joiners counted right after joining. */
    key(r, k, "r%" PRId64 "/node/", round);
    if ((rc = count(r, k, arrival, NULL)))
        return rc;
    *expect_n = 0;
    void *ev = NULL;
    key(r, k, "r%" PRId64 "/expect", round);
    rc = el_etcd_get(r->c, k, &ev, NULL, NULL);
    if (rc == EL_ENOTFOUND)
        return 0;
    if (rc)
        return efail(r, r->c, rc, "reading the expected nodes");
    *expect_n = strtoll(ev, NULL, 10);
    int mine = el__rdzv_expected(ev, r->e.self.id);
    free(ev);
    if (!mine)
        return 0;
    key(r, k, "r%" PRId64 "/exp/%s", round, r->e.self.id);
    rc = el_etcd_put(r->c, k, "1", 1, r->lease, NULL);
    return rc ? efail(r, r->c, rc, "joining as expected") : 0;
}

/* The state of an open round, one range read of r<R>/s/: its deadline
 * (-1: none), whether someone is sealing it, its member list (NULL: not
 * sealed; malloc'd), and the revision of the read. */
static int et_read_round(struct el__rdzv_elastic *e, int64_t round,
                         struct el__rdzv_round *st)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    struct el_etcd_kv *kvs = NULL;
    size_t n = 0;
    st->members = NULL;
    st->sealing = 0;
    st->deadline = -1;
    key(r, k, "r%" PRId64 "/s/", round);
    size_t skip = strlen(k);
    int rc = el_etcd_range_prefix(r->c, k, &kvs, &n, &st->rev);
    if (rc)
        return efail(r, r->c, rc, "reading the round");
    for (size_t i = 0; i < n; i++) {
        const char *name = kvs[i].key + skip;
        if (strcmp(name, "deadline") == 0)
            st->deadline = strtoll(kvs[i].value, NULL, 10);
        else if (strcmp(name, "sealer") == 0)
            st->sealing = 1;
        else if (strcmp(name, "members") == 0) {
            st->members = kvs[i].value;
            kvs[i].value = NULL;
        }
    }
    el_etcd_kvs_free(kvs, n);
    return 0;
}

/* Wait up to ms for a change under the round's 'sub' prefix ("s/": the
 * deadline, sealer and member list, three changes a round, so a thousand
 * waiters get three events each; "node/": the joiners) after revision
 * 'rev'.  0 (or -ETIMEDOUT: look again), or an error. */
static int wait_round(struct etcd_rdzv *r, int64_t round, const char *sub,
                      int64_t rev, int ms)
{
    char k[KEY_MAX];
    key(r, k, "r%" PRId64 "/%s", round, sub);
    int rc = el_etcd_wait_prefix(r->c, k, rev, ms);
    if (rc == 0 || rc == -ETIMEDOUT || rc == -ESTALE)
        return 0; /* ESTALE: history compacted; read the round again */
    return efail(r, r->c, rc, "waiting for the round");
}

/* ---- the rest of the state primitives (elastic.h) ---- */

static int et_enter(struct el__rdzv_elastic *e, int cancel_fd,
                    long long deadline)
{
    struct etcd_rdzv *r = R(e);
    e->cancel_fd = cancel_fd;
    el_etcd_set_cancel_fd(r->c, cancel_fd);
    if (atomic_load(&r->lost))
        return lease_gone(r, "; the other nodes re-form without it");
    return 0;
}

static void et_leave(struct el__rdzv_elastic *e)
{
    el_etcd_set_cancel_fd(R(e)->c, -1);
    e->cancel_fd = -1;
}

static int et_read_job(struct el__rdzv_elastic *e, int64_t *round, int64_t *rev)
{
    return read_job(R(e), round, rev);
}

static int et_raise_round(struct el__rdzv_elastic *e, int64_t target,
                          const struct el__rdzv_member *m, int n,
                          const char *extra, int64_t *now)
{
    return raise_round(R(e), target, m, n, extra, now);
}

static int et_count(struct el__rdzv_elastic *e, int64_t round, int expected,
                    struct el__rdzv_round *st)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    int rc;
    key(r, k, "r%" PRId64 "/node/", round);
    if ((rc = count(r, k, &st->joiners, &st->jrev)))
        return rc;
    st->expected_in = 0;
    if (!expected)
        return 0;
    key(r, k, "r%" PRId64 "/exp/", round);
    return count(r, k, &st->expected_in, NULL);
}

static int et_set_deadline(struct el__rdzv_elastic *e, int64_t round,
                           long long wall_ms)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX], d[32];
    key(r, k, "r%" PRId64 "/s/deadline", round);
    snprintf(d, sizeof d, "%lld", wall_ms);
    return create(r, k, d, 0, NULL, "setting the deadline");
}

static void et_clear_deadline(struct el__rdzv_elastic *e, int64_t round)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    key(r, k, "r%" PRId64 "/s/deadline", round);
    el_etcd_delete(r->c, k, NULL);
}

/* One sealer per round (the holder of r<R>/s/sealer, on its lease), since
 * sealing reads every joiner's record and a thousand nodes doing it at
 * once swamp etcd.  If the holder dies its key goes with its lease. */
static int et_claim_seal(struct el__rdzv_elastic *e, int64_t round, int *won)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    struct el_etcd_cas cas = {.cond = EL_ETCD_IF_ABSENT,
                              .desired = e->self.id,
                              .desired_len = strlen(e->self.id),
                              .lease = r->lease};
    struct el_etcd_kv cur = {0};
    int rc;
    *won = 0;
    key(r, k, "r%" PRId64 "/s/sealer", round);
    if ((rc = el_etcd_cas(r->c, k, &cas, won, &cur)))
        return efail(r, r->c, rc, "electing the round's sealer");
    if (!*won && cur.key && strcmp(cur.value, e->self.id) == 0)
        *won = 1; /* ours from an attempt that failed midway */
    el_etcd_kv_clear(&cur);
    return 0;
}

static void et_release_seal(struct el__rdzv_elastic *e, int64_t round)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    key(r, k, "r%" PRId64 "/s/sealer", round);
    el_etcd_delete(r->c, k, NULL); /* too few: a later attempt may */
}

static int et_joiners(struct el__rdzv_elastic *e, int64_t round,
                      struct el__rdzv_member **out, int *nout)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    struct el_etcd_kv *kvs = NULL;
    size_t nk = 0;
    int rc;
    key(r, k, "r%" PRId64 "/node/", round);
    if ((rc = el_etcd_range_prefix(r->c, k, &kvs, &nk, NULL)))
        return efail(r, r->c, rc, "reading the joiners");
    struct el__rdzv_member *m = calloc(nk + 1, sizeof *m);
    if (!m) {
        el_etcd_kvs_free(kvs, nk);
        return FAIL(r, -ENOMEM, "out of memory");
    }
    int n = 0;
    for (size_t i = 0; i < nk; i++) {
        struct el__rdzv_member *x = &m[n];
        if (sscanf(kvs[i].value, "v1 %191s %d %d %255s %d %" SCNd64, x->id,
                   &x->lws, &x->prev_rank, x->name, &x->port, &x->lease) == 6) {
            x->seq = kvs[i].create_revision;
            n++;
        }
    }
    el_etcd_kvs_free(kvs, nk);
    *out = m;
    *nout = n;
    return 0;
}

static int et_publish(struct el__rdzv_elastic *e, int64_t round,
                      const char *list, size_t len, int *created)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    key(r, k, "r%" PRId64 "/s/members", round);
    return create(r, k, list, 0, created, "sealing the round");
}

static void et_forget(struct el__rdzv_elastic *e, int64_t round)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    key(r, k, "r%" PRId64 "/", round);
    el_etcd_delete_prefix(r->c, k, NULL);
}

static int et_wait(struct el__rdzv_elastic *e, enum el__rdzv_wait what,
                   int64_t round, const struct el__rdzv_round *st, int64_t rev,
                   int ms)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    int rc;
    if (what == EL__RDZV_WAIT_ROUND) {
        int present;
        struct el_etcd_kv kv = {0};
        key(r, k, "c/round");
        rc = el_etcd_wait_change(r->c, k, rev, &present, &kv, ms);
        el_etcd_kv_clear(&kv);
        if (rc && rc != -ETIMEDOUT && rc != -ESTALE)
            return efail(r, r->c, rc, "waiting as a spare");
    } else {
        rc = wait_round(r, round, what == EL__RDZV_WAIT_STATE ? "s/" : "node/",
                        what == EL__RDZV_WAIT_STATE ? st->rev : st->jrev, ms);
        if (rc)
            return rc;
    }
    /* Waits end at least every TTL: a lost lease shows here. */
    if (atomic_load(&r->lost))
        return lease_gone(r, "");
    return 0;
}

static int et_is_dead(struct el__rdzv_elastic *e, const char *id)
{
    return is_dead(R(e), id);
}

static int et_probe(struct el__rdzv_elastic *e)
{
    return probe_members(R(e));
}

static int et_charge(struct el__rdzv_elastic *e, int64_t round, int *first)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    key(r, k, "r%" PRId64 "/failed", round);
    return create(r, k, e->self.id, 0, first, "reporting a failure");
}

static int et_add_restart(struct el__rdzv_elastic *e, int64_t *used)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    key(r, k, "c/restarts");
    int rc = el_etcd_add(r->c, k, 1, used);
    return rc ? efail(r, r->c, rc, "charging the restart budget") : 0;
}

static int et_put_failure(struct el__rdzv_elastic *e, int64_t round)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX], v[EL__RDZV_ID_MAX + 32];
    key(r, k, "failure");
    int n = snprintf(v, sizeof v, "%" PRId64 " %s", round, e->self.id);
    int rc = el_etcd_put(r->c, k, v, (size_t)n, 0, NULL);
    return rc ? efail(r, r->c, rc, "recording a failure") : 0;
}

static int et_get_failure(struct el__rdzv_elastic *e, int64_t *round, char *id,
                          size_t cap)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    void *val = NULL;
    size_t len = 0;
    key(r, k, "failure");
    int rc = el_etcd_get(r->c, k, &val, &len, NULL);
    if (rc == EL_ENOTFOUND)
        return 0;
    if (rc)
        return efail(r, r->c, rc, "reading the last failure");
    rc = el__rdzv_parse_failure(val, len, round, id, cap);
    free(val);
    return rc;
}

static int et_close_job(struct el__rdzv_elastic *e, const char *why)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    key(r, k, "c/closed");
    return create(r, k, why, 0, NULL, "closing the job");
}

static int et_exit_verdict(struct el__rdzv_elastic *e, int64_t round, int ok)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    key(r, k, "r%" PRId64 "/exit/done", round);
    int rc = el_etcd_put(r->c, k, ok ? "ok" : "failed", ok ? 2 : 6, 0, NULL);
    return rc ? efail(r, r->c, rc,
                      ok ? "completing the exit barrier"
                         : "reporting the failure")
              : 0;
}

static int et_exit_count(struct el__rdzv_elastic *e, int64_t round, int64_t *n)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    key(r, k, "r%" PRId64 "/exit/in/", round);
    return count(r, k, n, NULL);
}

static int et_exit_arrive(struct el__rdzv_elastic *e, int64_t round, int64_t *n)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    /* Not on the lease: an arrival stands after its agent exits. */
    key(r, k, "r%" PRId64 "/exit/in/%s", round, e->self.id);
    int rc = el_etcd_put(r->c, k, "1", 1, 0, NULL);
    if (rc)
        return efail(r, r->c, rc, "entering the exit barrier");
    return et_exit_count(e, round, n);
}

static int et_exit_arrived(struct el__rdzv_elastic *e, int64_t round,
                           const char *id)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    key(r, k, "r%" PRId64 "/exit/in/%s", round, id);
    int rc = el_etcd_get(r->c, k, NULL, NULL, NULL);
    if (rc == EL_ENOTFOUND)
        return 0;
    return rc ? efail(r, r->c, rc, "counting the nodes done") : 1;
}

static int et_exit_wait(struct el__rdzv_elastic *e, int64_t round, int ms)
{
    struct etcd_rdzv *r = R(e);
    char k[KEY_MAX];
    struct el_etcd_kv kv = {0};
    key(r, k, "r%" PRId64 "/exit/done", round);
    int rc = el_etcd_wait_key(r->c, k, &kv, ms);
    el_etcd_kv_clear(&kv);
    if (rc && rc != -ETIMEDOUT)
        return efail(r, r->c, rc, "waiting in the exit barrier");
    return rc;
}

/* No reborn(): a node declared dead on etcd has lost its lease, and says
 * so (the others re-formed without it). */
static const struct el__rdzv_state_ops etcd_state = {
    .enter = et_enter,
    .leave = et_leave,
    .read_job = et_read_job,
    .raise_round = et_raise_round,
    .read_round = et_read_round,
    .join = et_join,
    .count = et_count,
    .set_deadline = et_set_deadline,
    .clear_deadline = et_clear_deadline,
    .claim_seal = et_claim_seal,
    .release_seal = et_release_seal,
    .joiners = et_joiners,
    .publish = et_publish,
    .forget = et_forget,
    .wait = et_wait,
    .is_dead = et_is_dead,
    .probe = et_probe,
    .charge = et_charge,
    .add_restart = et_add_restart,
    .put_failure = et_put_failure,
    .get_failure = et_get_failure,
    .close_job = et_close_job,
    .exit_verdict = et_exit_verdict,
    .exit_arrive = et_exit_arrive,
    .exit_count = et_exit_count,
    .exit_arrived = et_exit_arrived,
    .exit_wait = et_exit_wait,
    .took_round = et_took_round,
};

static int etcd_notify_fd(struct el_rdzv *base)
{
    return ((struct etcd_rdzv *)base)->evfd;
}

static void etcd_ack_notify(struct el_rdzv *base)
{
    uint64_t v;
    if (read(((struct etcd_rdzv *)base)->evfd, &v, sizeof v) < 0) {
        /* nothing pending */
    }
}

static void stop_watchers(struct etcd_rdzv *r)
{
    char c = 1;
    if (r->stop_pipe[1] >= 0 && write(r->stop_pipe[1], &c, 1) < 0) {
        /* the pipe is ours and empty */
    }
    for (int i = 0; i < 2; i++)
        if (r->th_running[i]) {
            pthread_join(r->th[i], NULL);
            r->th_running[i] = 0;
        }
    if (r->ring_running) {
        pthread_join(r->ring_th, NULL);
        r->ring_running = 0;
    }
}

static void etcd_close(struct el_rdzv *base)
{
    struct etcd_rdzv *r = (struct etcd_rdzv *)base;
    stop_watchers(r);
    el_etcd_keeper_stop(r->keeper);
    if (r->c && r->lease && !atomic_load(&r->lost)) {
        /* This node's keys go now rather than after the TTL; the last node
         * out removes the job. */
        char k[KEY_MAX];
        int64_t left = 1;
        el_etcd_lease_revoke(r->c, r->lease);
        key(r, k, "alive/");
        if (el_etcd_count_prefix(r->c, k, &left, NULL) == 0 && left == 0)
            el_etcd_delete_prefix(r->c, r->prefix, NULL);
    }
    el_etcd_close(r->c);
    el_store_server_close(r->srv);
    for (int i = 0; i < r->ndead; i++)
        free(r->dead[i]);
    free(r->dead);
    pthread_mutex_destroy(&r->mu);
    if (r->stop_pipe[0] >= 0) {
        close(r->stop_pipe[0]);
        close(r->stop_pipe[1]);
    }
    if (r->evfd >= 0)
        close(r->evfd);
    if (r->ring_evfd >= 0)
        close(r->ring_evfd);
    for (size_t i = 0; i < sizeof r->strs / sizeof r->strs[0]; i++)
        free(r->strs[i]);
    el__rdzv_node_free(&r->e.self);
    free(r);
}

static const struct el_rdzv_ops etcd_ops = {
    .name = "etcd",
    .next = el__rdzv_elastic_next,
    .num_nodes_waiting = el__rdzv_elastic_num_nodes_waiting,
    .notify_fd = etcd_notify_fd,
    .ack_notify = etcd_ack_notify,
    .exit_barrier = el__rdzv_elastic_exit_barrier,
    .set_closed = el__rdzv_elastic_set_closed,
    .report_failure = el__rdzv_elastic_report_failure,
    .joiners = el__rdzv_elastic_joiners,
    .close = etcd_close,
    .members = el__rdzv_elastic_members,
    .is_dead = el__rdzv_elastic_is_dead,
    .failure = el__rdzv_elastic_failure,
};

int el__rdzv_etcd_copy_opts(const struct el_rdzv_config *cfg,
                            const char *endpoints, char *strs[7],
                            struct el_etcd_opts *eo)
{
    const char *src[7] = {
        endpoints,     cfg->etcd.protocol, cfg->etcd.cacert,  cfg->etcd.cert,
        cfg->etcd.key, cfg->etcd.user,     cfg->etcd.password};
    for (int i = 0; i < 7; i++)
        if (src[i] && !(strs[i] = strdup(src[i])))
            return -ENOMEM;
    eo->endpoints = strs[0];
    eo->protocol = strs[1];
    eo->cacert = strs[2];
    eo->cert = strs[3];
    eo->key = strs[4];
    eo->user = strs[5];
    eo->password = strs[6];
    return 0;
}

/* Everything open does after the struct is filled: the workers' store, the
 * lease and this node's alive/ key, the keeper and the watchers. */
static int start(struct etcd_rdzv *r, char *err, size_t errlen)
{
    char eb[512], k[KEY_MAX];
    int rc = el_etcd_open(&r->c, &r->eo, eb, sizeof eb);
    if (rc) {
        snprintf(err, errlen, "%s", eb); /* says "etcd: " itself */
        return rc;
    }
    struct el_store_server_opts so = {.host = "0.0.0.0", .port = 0};
    if ((rc = el_store_server_start(&r->srv, &so))) {
        snprintf(err, errlen, "cannot start the workers' store: %s",
                 el_strerror(rc));
        return rc;
    }
    r->srv_port = el_store_server_port(r->srv);
    if ((rc = el_etcd_lease_grant(r->c, r->ttl_s, 0, &r->lease))) {
        efail(r, r->c, rc, "granting this node's lease");
        snprintf(err, errlen, "%s", r->e.base.errmsg);
        return rc;
    }
    key(r, k, "alive/%s", r->e.self.id);
    if ((rc = el_etcd_put(r->c, k, r->e.self.name, strlen(r->e.self.name),
                          r->lease, &r->watch_from))) {
        efail(r, r->c, rc, "announcing this node");
        snprintf(err, errlen, "%s", r->e.base.errmsg);
        return rc;
    }
    r->watch_from++;
    if ((rc = el_etcd_keeper_start(&r->keeper, r->c, r->lease, r->ttl_s,
                                   on_lease_lost, r))) {
        snprintf(err, errlen, "%s", el_etcd_errmsg(r->c));
        return rc;
    }
    void *(*mains[2])(void *) = {deaths_main, ctl_main};
    for (int i = 0; i < 2; i++) {
        if ((rc = pthread_create(&r->th[i], NULL, mains[i], r))) {
            snprintf(err, errlen, "cannot start an etcd watcher: %s",
                     strerror(rc));
            return -rc;
        }
        r->th_running[i] = 1;
    }
    if ((rc = pthread_create(&r->ring_th, NULL, ring_main, r))) {
        snprintf(err, errlen, "cannot start the ring watcher: %s",
                 strerror(rc));
        return -rc;
    }
    r->ring_running = 1;
    note(r,
         "etcd rendezvous at %s, keys under %s, lease %" PRId64 " (TTL "
         "%" PRId64 " s); workers' store on port %d",
         r->eo.endpoints, r->prefix, r->lease, r->ttl_s, r->srv_port);
    return 0;
}

/* Where the job's keys are: the members (cfg->endpoints, else host:port
 * into ep) and the prefix "<etcd_prefix>/<run_id>/".  0, or EL_EUSAGE with
 * a message in err. */
int el__rdzv_etcd_where(const struct el_rdzv_config *cfg, char *ep,
                        size_t epcap, const char **endpoints, char *prefix,
                        size_t pcap, char *err, size_t errlen)
{
    *endpoints = cfg->endpoints;
    if (!*endpoints || !**endpoints) {
        if (!cfg->host || !*cfg->host || cfg->port <= 0) {
            snprintf(err, errlen,
                     "the etcd rendezvous needs --rdzv-endpoint="
                     "HOST:PORT[,HOST:PORT...] (etcd's client URLs)");
            return EL_EUSAGE;
        }
        snprintf(ep, epcap, strchr(cfg->host, ':') ? "[%s]:%d" : "%s:%d",
                 cfg->host, cfg->port);
        *endpoints = ep;
    }
    const char *pfx =
        cfg->etcd.prefix && *cfg->etcd.prefix ? cfg->etcd.prefix : "/elrun";
    const char *run_id = cfg->run_id ? cfg->run_id : "none";
    if (strlen(pfx) + strlen(run_id) > 300 || strchr(run_id, '/')) {
        snprintf(err, errlen,
                 "etcd_prefix and --rdzv-id must be at most 300 "
                 "bytes together, and the id must not contain '/'");
        return EL_EUSAGE;
    }
    snprintf(prefix, pcap, "%s%s%s/", pfx,
             pfx[strlen(pfx) - 1] == '/' ? "" : "/", run_id);
    return 0;
}

int el__rdzv_etcd_open(struct el_rdzv **out, const struct el_rdzv_config *cfg,
                       char *err, size_t errlen)
{
    char ep[EL_HOST_MAX + 16], prefix[512];
    const char *endpoints;
    if (cfg->min_nodes < 1 || cfg->max_nodes < cfg->min_nodes) {
        snprintf(err, errlen,
                 "--nnodes must be MIN:MAX with 1 <= MIN <= MAX "
                 "(got %d:%d)",
                 cfg->min_nodes, cfg->max_nodes);
        return EL_EUSAGE;
    }
    int rc = el__rdzv_etcd_where(cfg, ep, sizeof ep, &endpoints, prefix,
                                 sizeof prefix, err, errlen);
    if (rc)
        return rc;
    struct etcd_rdzv *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->e.base.ops = &etcd_ops;
    r->e.ops = &etcd_state;
    r->stop_pipe[0] = r->stop_pipe[1] = -1;
    r->evfd = -1;
    r->ring_evfd = -1;
    pthread_mutex_init(&r->mu, NULL);
    snprintf(r->prefix, sizeof r->prefix, "%s", prefix);
    el__rdzv_elastic_init(&r->e, cfg);
    r->e.list_ports = 1;
    /* Waits are watches; they end at least every TTL, to notice a lost
     * lease or the join timeout. */
    r->e.step_ms = r->e.window_ms;
    r->ttl_s = (r->e.window_ms + 999) / 1000;
    r->served = -1;
    rc = el__rdzv_etcd_copy_opts(cfg, endpoints, r->strs, &r->eo);
    /* One etcd call, retries across members included, gives up after
     * read_timeout [15 s], and never outlasts the join timeout. */
    r->eo.op_timeout_ms = cfg->io_timeout_ms > 0 ? cfg->io_timeout_ms : 15000;
    /* A range of a thousand joiners on a busy member takes seconds: give a
     * request 5 s before trying another member (a dead one refuses at
     * once; the client's 2 s default gave up on slow answers, resent them
     * and added to the load). */
    r->eo.request_timeout_ms = 5000;
    if (r->eo.op_timeout_ms > r->e.join_timeout_ms)
        r->eo.op_timeout_ms = r->e.join_timeout_ms;
    if (rc == 0) {
        r->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        r->ring_evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (r->evfd < 0 || r->ring_evfd < 0 ||
            pipe2(r->stop_pipe, O_CLOEXEC) < 0) {
            rc = -errno;
            snprintf(err, errlen, "eventfd/pipe: %s", strerror(errno));
        }
    }
    if (rc == 0)
        rc = start(r, err, errlen);
    if (rc) {
        etcd_close(&r->e.base);
        return rc;
    }
    *out = &r->e.base;
    return 0;
}

/* ---- the read-only status (el_rdzv_status_read) ---- */

/* As state_store.c's: the round in force and its members (or the round
 * before's while it is open), joiners, budget, verdict; a member whose
 * alive/ key is gone is dead.  Only reads. */
static int read_status(struct etcd_rdzv *r, struct el_rdzv_status *st)
{
    char k[KEY_MAX];
    void *val = NULL;
    int rc;
    key(r, k, "c/closed");
    rc = el_etcd_get(r->c, k, &val, NULL, NULL);
    if (rc && rc != EL_ENOTFOUND)
        return efail(r, r->c, rc, "reading the job state");
    if (rc == 0) {
        st->closed = strncmp(val, "ok", 2) == 0 ? 1 : 2;
        snprintf(st->closed_why, sizeof st->closed_why, "%s", (char *)val);
        free(val);
    }
    key(r, k, "c/round");
    if ((rc = get_int(r, k, -1, &st->round, NULL)))
        return rc;
    key(r, k, "c/restarts");
    if ((rc = get_int(r, k, 0, &st->restarts, NULL)))
        return rc;
    if (st->round < 0)
        return 0;
    if ((rc = el__rdzv_status_members(&r->e, st)))
        return rc;
    if (!st->sealed) {
        int64_t rev;
        key(r, k, "r%" PRId64 "/node/", st->round);
        if ((rc = count(r, k, &st->joined, &rev)))
            return rc;
    }
    for (int i = 0; i < st->nmembers; i++) {
        key(r, k, "alive/%s", st->members[i].id);
        rc = el_etcd_get(r->c, k, &val, NULL, NULL);
        if (rc && rc != EL_ENOTFOUND)
            return efail(r, r->c, rc, "reading a member's liveness");
        if (rc == 0)
            free(val);
        st->members[i].dead = rc == EL_ENOTFOUND;
    }
    return 0;
}

int el__rdzv_etcd_status(const struct el_rdzv_config *cfg,
                         struct el_rdzv_status *st, char *err, size_t errlen)
{
    char ep[EL_HOST_MAX + 16], prefix[512];
    const char *endpoints;
    int rc = el__rdzv_etcd_where(cfg, ep, sizeof ep, &endpoints, prefix,
                                 sizeof prefix, err, errlen);
    if (rc)
        return rc;
    struct etcd_rdzv *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->e.base.ops = &etcd_ops;
    r->e.ops = &etcd_state;
    pthread_mutex_init(&r->mu, NULL);
    snprintf(r->prefix, sizeof r->prefix, "%s", prefix);
    rc = el__rdzv_etcd_copy_opts(cfg, endpoints, r->strs, &r->eo);
    r->eo.op_timeout_ms = cfg->io_timeout_ms > 0 ? cfg->io_timeout_ms : 5000;
    r->eo.request_timeout_ms = 2000;
    char eb[512] = "";
    if (rc == 0 && (rc = el_etcd_open(&r->c, &r->eo, eb, sizeof eb)))
        snprintf(err, errlen, "%s", eb);
    else if (rc == 0 && (rc = read_status(r, st)))
        snprintf(err, errlen, "%s", r->e.base.errmsg);
    if (rc)
        el_rdzv_status_free(st);
    el_etcd_close(r->c);
    for (int i = 0; i < 7; i++)
        free(r->strs[i]);
    pthread_mutex_destroy(&r->mu);
    free(r);
    return rc;
}
