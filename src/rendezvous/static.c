/* static.c -- the static and standalone rendezvous backends.
 *
 * static: a fixed set of N nodes.  Node 0 hosts the store at
 * --master-addr:--master-port (on its own thread); every node connects to
 * it.  Each round k, a node writes its worker count to r<k>/lws/<rank>,
 * claims r<k>/node/<rank> (a second claim is a configuration error) and adds
 * itself to r<k>/join; the N-th arrival deletes the previous attempt's keys
 * (the workers' //worker/attempt_* and r<k-1>/) and sets r<k>/ok, which every
 * node waits for.  A node that wants a new round (its workers failed) raises
 * the "round" key; the others watch that key from a helper thread, which
 * makes el_rdzv_notify_fd() readable, so their agents stop their workers and
 * join too.  Round numbers are thus global.
 *
 * standalone: the same with N = 1 and the store embedded on a free port of
 * 127.0.0.1 (or the endpoint's host and port); no watcher is needed.
 * "c10d" with max_nodes == 1 (TorchX's single-node command line) runs as
 * standalone at its endpoint; a real multi-node c10d backend is a separate
 * backend.
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
#include <unistd.h>

#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/store.h"
#include "rendezvous/rdzv_impl.h"

struct st_rdzv {
    struct el_rdzv base;
    char run_id[256];
    struct el__rdzv_link link;     /* the store: where, key prefix, client */
    char master_addr[EL_HOST_MAX]; /* what workers get as MASTER_ADDR */
    int nodes, node_rank, standalone;
    int join_timeout_ms;
    struct el_store_server *srv;
    int64_t round;   /* last completed round, -1 before */
    int64_t joining; /* round being joined, -1 if none */
    int stage;       /* progress in joining (resumable) */
    int closed;
    /* Watcher of the "round" key (multi-node only). */
    pthread_t th;
    int th_running;
    int stop_pipe[2];
    int evfd;
    int64_t watch_from;
    atomic_int lost; /* the watcher lost the store           */
    void (*on_event)(void *, const char *);
    void *event_arg;
};

#define FAIL(r, rc, ...) el__rdzv_fail(&(r)->base, (rc), __VA_ARGS__)

#define key(r, ...) el__rdzv_key(&(r)->link, __VA_ARGS__)
#define ensure_client(r, cancel_fd, deadline) \
    el__rdzv_ensure(&(r)->base, &(r)->link, (cancel_fd), (deadline))
#define store_fail(r, rc, what) \
    el__rdzv_store_fail(&(r)->base, &(r)->link, (rc), (what))

static int is_loopback(const char *h)
{
    return strcmp(h, "localhost") == 0 || strncmp(h, "127.", 4) == 0 ||
           strcmp(h, "::1") == 0;
}

static int get_int(struct st_rdzv *r, const char *k, int64_t *v)
{
    int rc = el_store_add(r->link.cl, k, 0, v);
    return rc ? store_fail(r, rc, "reading a counter") : 0;
}

/* ---- the watcher thread ---- */

static void *watch_main(void *arg)
{
    struct st_rdzv *r = arg;
    struct el_store *w = NULL;
    char k[400], exp[32];
    uint64_t one = 1;
    int64_t seen = r->watch_from;
    int rc = el_store_connect(&w, r->link.host, r->link.port, 5000,
                              r->link.io_timeout_ms);
    if (rc == 0) {
        el_store_set_cancel_fd(w, r->stop_pipe[0]);
        key(r, k, sizeof k, "round");
        for (;;) {
            int present = 0;
            void *val = NULL;
            size_t len = 0;
            snprintf(exp, sizeof exp, "%" PRId64, seen);
            rc = el_store_watch(w, k, 1, exp, strlen(exp), &present, &val, &len,
                                -1);
            if (rc)
                break;
            if (present && val)
                seen = strtoll(val, NULL, 10);
            free(val);
            if (write(r->evfd, &one, sizeof one) < 0) {
                /* eventfd cannot overflow here; nothing to do */
            }
        }
    }
    if (rc != -ECANCELED) {
        atomic_store(&r->lost, 1);
        if (write(r->evfd, &one, sizeof one) < 0) {
            /* as above */
        }
    }
    el_store_close(w);
    return NULL;
}

static void stop_watcher(struct st_rdzv *r)
{
    el__rdzv_thread_stop(r->th, &r->th_running, r->stop_pipe);
}

static int start_watcher(struct st_rdzv *r)
{
    if (r->nodes <= 1)
        return 0;
    r->watch_from = r->round;
    return el__rdzv_thread_start(&r->base, &r->th, &r->th_running, watch_main,
                                 r, "watcher");
}

/* ---- operations ---- */

static int st_next(struct el_rdzv *base, int lws, int cancel_fd,
                   struct el_rdzv_info *info)
{
    struct st_rdzv *r = (struct st_rdzv *)base;
    long long deadline = el_now_ms() + r->join_timeout_ms;
    char k[400], v[32];
    int rc;

    stop_watcher(r);
    if (r->closed)
        return FAIL(r, EL_ECLOSED, "the rendezvous is closed");
    rc = ensure_client(r, cancel_fd, deadline);
    if (rc)
        return rc;
    el_store_set_cancel_fd(r->link.cl, -1);

    if (r->joining < 0) {
        int64_t cur, target = r->round + 1, done = 0;
        key(r, k, sizeof k, "round");
        if ((rc = get_int(r, k, &cur)))
            return rc;
        if (cur > target)
            target = cur;
        /* Raise the shared round to target (other nodes watch it). */
        while (cur < target) {
            char e[32], d[32];
            void *got = NULL;
            size_t glen;
            snprintf(e, sizeof e, "%" PRId64, cur);
            snprintf(d, sizeof d, "%" PRId64, target);
            rc = el_store_compare_set(r->link.cl, k, e, strlen(e), d, strlen(d),
                                      &got, &glen);
            if (rc == 0) {
                free(got);
                break;
            }
            if (rc != EL_EMISMATCH)
                return store_fail(r, rc, "raising the round");
            cur = got ? strtoll(got, NULL, 10) : 0;
            free(got);
            if (cur > target)
                target = cur;
        }
        key(r, k, sizeof k, "exit/count");
        if ((rc = get_int(r, k, &done)))
            return rc;
        if (done > 0) {
            /* The nodes waiting in the exit barrier must not wait for us:
             * this job cannot finish as a whole any more. */
            key(r, k, sizeof k, "exit/done");
            el_store_set(r->link.cl, k, "failed", 6);
            return FAIL(r, EL_ECLOSED,
                        "another node already finished the "
                        "job, so round %" PRId64 " cannot start",
                        target);
        }
        key(r, k, sizeof k, "closed");
        if ((rc = get_int(r, k, &done)))
            return rc;
        if (done > 0)
            return FAIL(r, EL_ECLOSED, "the job was closed by another node");
        r->joining = target;
        r->stage = 0;
    }
    int64_t k_round = r->joining;
    if (r->stage == 0) {
        int64_t claims;
        key(r, k, sizeof k, "r%" PRId64 "/lws/%d", k_round, r->node_rank);
        snprintf(v, sizeof v, "%d", lws);
        if ((rc = el_store_set(r->link.cl, k, v, strlen(v))))
            return store_fail(r, rc, "publishing the worker count");
        key(r, k, sizeof k, "r%" PRId64 "/node/%d", k_round, r->node_rank);
        if ((rc = el_store_add(r->link.cl, k, 1, &claims)))
            return store_fail(r, rc, "claiming the node rank");
        if (claims > 1) {
            r->joining = -1;
            return FAIL(r, EL_EUSAGE,
                        "another agent already joined round "
                        "%" PRId64 " as node rank %d; give every node its "
                        "own --node-rank",
                        k_round, r->node_rank);
        }
        r->stage = 1;
    }
    if (r->stage == 1) {
        int64_t n;
        key(r, k, sizeof k, "r%" PRId64 "/join", k_round);
        if ((rc = el_store_add(r->link.cl, k, 1, &n)))
            return store_fail(r, rc, "joining the round");
        if (n == r->nodes) {
            int64_t cnt;
            /* Last to arrive: no worker of an earlier round runs any more,
             * so their keys can go. */
            el_store_delete_prefix(r->link.cl, "//worker/attempt_", &cnt);
            el_store_delete_prefix(r->link.cl, "/worker/attempt_", &cnt);
            if (k_round > 0) {
                key(r, k, sizeof k, "r%" PRId64 "/", k_round - 1);
                el_store_delete_prefix(r->link.cl, k, &cnt);
            }
            key(r, k, sizeof k, "r%" PRId64 "/ok", k_round);
            if ((rc = el_store_set(r->link.cl, k, "1", 1)))
                return store_fail(r, rc, "completing the round");
        }
        r->stage = 2;
    }
    {
        void *val = NULL;
        size_t len;
        long long left = deadline - el_now_ms();
        key(r, k, sizeof k, "r%" PRId64 "/ok", k_round);
        el_store_set_cancel_fd(r->link.cl, cancel_fd);
        rc = el_store_get(r->link.cl, k, &val, &len, left > 0 ? (int)left : 0);
        if (r->link.cl)
            el_store_set_cancel_fd(r->link.cl, -1);
        int closed = rc == 0 && len == 6 && memcmp(val, "closed", 6) == 0;
        free(val);
        if (closed) {
            r->joining = -1;
            return FAIL(r, EL_ECLOSED,
                        "another node already finished the "
                        "job, so round %" PRId64 " cannot start",
                        k_round);
        }
        if (rc == -ETIMEDOUT)
            return FAIL(r, rc,
                        "round %" PRId64 ": not all %d nodes joined "
                        "within %d s; start the missing nodes or raise "
                        "--rdzv-conf=join_timeout",
                        k_round, r->nodes, r->join_timeout_ms / 1000);
        if (rc)
            return store_fail(r, rc, "waiting for the round");
    }
    /* Everybody is in: compute this node's global ranks. */
    int base_rank = 0, world = 0;
    if (r->nodes == 1) {
        world = lws;
    } else {
        const char **keys = calloc((size_t)r->nodes, sizeof *keys);
        char *kbuf = malloc((size_t)r->nodes * 400);
        void **vals = calloc((size_t)r->nodes, sizeof *vals);
        size_t *lens = calloc((size_t)r->nodes, sizeof *lens);
        if (!keys || !kbuf || !vals || !lens) {
            free(keys);
            free(kbuf);
            free(vals);
            free(lens);
            return FAIL(r, -ENOMEM, "out of memory");
        }
        for (int i = 0; i < r->nodes; i++) {
            key(r, kbuf + (size_t)i * 400, 400, "r%" PRId64 "/lws/%d", k_round,
                i);
            keys[i] = kbuf + (size_t)i * 400;
        }
        rc = el_store_multi_get(r->link.cl, keys, (size_t)r->nodes, vals, lens,
                                r->link.io_timeout_ms);
        if (rc == 0) {
            for (int i = 0; i < r->nodes; i++) {
                int n = atoi(vals[i]);
                if (i < r->node_rank)
                    base_rank += n;
                world += n;
                free(vals[i]);
            }
        }
        free(keys);
        free(kbuf);
        free(vals);
        free(lens);
        if (rc)
            return store_fail(r, rc,
                              "reading the other nodes' worker "
                              "counts");
    }
    r->round = k_round;
    r->joining = -1;
    memset(info, 0, sizeof *info);
    info->round = k_round;
    info->node_rank = r->node_rank;
    info->num_nodes = r->nodes;
    info->base_rank = base_rank;
    info->world_size = world;
    snprintf(info->store_host, sizeof info->store_host, "%s", r->master_addr);
    info->store_port = r->link.port;
    info->use_agent_store = 1;
    return start_watcher(r);
}

static int st_num_nodes_waiting(struct el_rdzv *base, int *n)
{
    struct st_rdzv *r = (struct st_rdzv *)base;
    char k[400];
    int64_t cur, joined;
    int rc;
    *n = 0;
    if (r->nodes <= 1)
        return 0;
    if (atomic_load(&r->lost))
        return FAIL(r, EL_EPEERLOST,
                    "lost the connection to the rendezvous "
                    "store at %s:%d (node 0 gone?)",
                    r->link.host, r->link.port);
    if (!r->link.cl && (rc = ensure_client(r, -1, el_now_ms() + 1000)))
        return rc;
    key(r, k, sizeof k, "round");
    if ((rc = get_int(r, k, &cur)))
        return rc;
    if (cur <= r->round)
        return 0;
    key(r, k, sizeof k, "r%" PRId64 "/join", cur);
    if ((rc = get_int(r, k, &joined)))
        return rc;
    *n = joined > 0 ? (int)joined : 1;
    return 0;
}

static int st_notify_fd(struct el_rdzv *base)
{
    struct st_rdzv *r = (struct st_rdzv *)base;
    return r->nodes > 1 ? r->evfd : -1;
}

static void st_ack_notify(struct el_rdzv *base)
{
    struct st_rdzv *r = (struct st_rdzv *)base;
    uint64_t v;
    if (read(r->evfd, &v, sizeof v) < 0) {
        /* nothing pending */
    }
}

static int st_exit_barrier(struct el_rdzv *base, int succeeded, int timeout_ms,
                           int cancel_fd)
{
    struct st_rdzv *r = (struct st_rdzv *)base;
    char k[400];
    int rc;
    stop_watcher(r);
    if (r->nodes <= 1)
        return 0;
    if ((rc = ensure_client(r, cancel_fd, el_now_ms() + 2000)))
        return rc;
    el_store_set_cancel_fd(r->link.cl, -1);
    key(r, k, sizeof k, "exit/done");
    if (!succeeded) {
        /* Release nodes in the barrier, close the job, and raise the round
         * so that running nodes are notified, stop their workers and find
         * the job closed instead of waiting for peers that will not come. */
        int64_t v;
        char kr[400], e[32], d[32];
        rc = el_store_set(r->link.cl, k, "failed", 6);
        key(r, kr, sizeof kr, "closed");
        if (!rc)
            rc = el_store_add(r->link.cl, kr, 1, &v);
        key(r, kr, sizeof kr, "round");
        snprintf(e, sizeof e, "%" PRId64, r->round);
        snprintf(d, sizeof d, "%" PRId64, r->round + 1);
        if (!rc) {
            rc = el_store_compare_set(r->link.cl, kr, e, strlen(e), d,
                                      strlen(d), NULL, NULL);
            if (rc == EL_EMISMATCH)
                rc = 0; /* someone raised it already */
        }
        return rc ? store_fail(r, rc, "reporting the failure") : 0;
    }
    int64_t n;
    char kc[400];
    key(r, kc, sizeof kc, "exit/count");
    if ((rc = el_store_add(r->link.cl, kc, 1, &n)))
        return store_fail(r, rc, "entering the exit barrier");
    if (n >= r->nodes && (rc = el_store_set(r->link.cl, k, "ok", 2)))
        return store_fail(r, rc, "completing the exit barrier");
    /* A node that asked for a new round before we got here waits for us
     * in vain: end its round as closed and release the barrier.  (One that
     * asks after our ADD sees exit/count and does the same.) */
    int64_t cur;
    char kr[400];
    key(r, kr, sizeof kr, "round");
    if ((rc = get_int(r, kr, &cur)))
        return rc;
    if (cur > r->round) {
        key(r, kr, sizeof kr, "r%" PRId64 "/ok", cur);
        if ((rc = el_store_set(r->link.cl, kr, "closed", 6)) ||
            (rc = el_store_set(r->link.cl, k, "failed", 6)))
            return store_fail(r, rc, "closing a round nobody can finish");
    }
    void *val = NULL;
    size_t len;
    el_store_set_cancel_fd(r->link.cl, cancel_fd);
    rc = el_store_get(r->link.cl, k, &val, &len, timeout_ms);
    if (r->link.cl)
        el_store_set_cancel_fd(r->link.cl, -1);
    free(val);
    if (rc == -ETIMEDOUT)
        return FAIL(r, rc,
                    "exit barrier: not every node finished within "
                    "%d s",
                    timeout_ms / 1000);
    return rc ? store_fail(r, rc, "waiting in the exit barrier") : 0;
}

static int st_set_closed(struct el_rdzv *base)
{
    struct st_rdzv *r = (struct st_rdzv *)base;
    char k[400];
    int64_t v;
    r->closed = 1;
    if (r->nodes <= 1 || !r->link.cl)
        return 0;
    key(r, k, sizeof k, "closed");
    int rc = el_store_add(r->link.cl, k, 1, &v);
    return rc ? store_fail(r, rc, "closing") : 0;
}

/* The host: the other nodes may still be reading the exit barrier's
 * answer, so wait (parked on a WATCH of exit/left, up to 2 s) until the
 * nodes - 1 others said they are done with the store. */
static void wait_others_left(struct st_rdzv *r)
{
    char k[400], cur[32];
    int64_t left = 0;
    long long end = el_now_ms() + 2000;
    key(r, k, sizeof k, "exit/left");
    if (el_store_add(r->link.cl, k, 0, &left) != 0)
        return;
    while (left < r->nodes - 1) {
        long long ms = end - el_now_ms();
        int present = 0;
        void *val = NULL;
        size_t len = 0;
        if (ms <= 0)
            return;
        snprintf(cur, sizeof cur, "%" PRId64, left);
        if (el_store_watch(r->link.cl, k, 1, cur, strlen(cur), &present, &val,
                           &len, (int)ms) != 0)
            return;
        left = present && val ? strtoll(val, NULL, 10) : left;
        free(val);
    }
}

static void st_close(struct el_rdzv *base)
{
    struct st_rdzv *r = (struct st_rdzv *)base;
    stop_watcher(r);
    if (r->nodes > 1 && r->link.cl) {
        if (r->srv) {
            wait_others_left(r);
        } else {
            char k[400];
            int64_t v;
            key(r, k, sizeof k, "exit/left");
            el_store_add(r->link.cl, k, 1, &v); /* done with the store */
        }
    }
    el_store_close(r->link.cl);
    r->link.cl = NULL;
    el_store_server_close(r->srv);
    close(r->stop_pipe[0]);
    close(r->stop_pipe[1]);
    close(r->evfd);
    free(r);
}

static const struct el_rdzv_ops st_ops = {
    .name = "static",
    .next = st_next,
    .num_nodes_waiting = st_num_nodes_waiting,
    .notify_fd = st_notify_fd,
    .ack_notify = st_ack_notify,
    .exit_barrier = st_exit_barrier,
    .set_closed = st_set_closed,
    .close = st_close,
};

static const struct el_rdzv_ops standalone_ops = {
    .name = "standalone",
    .next = st_next,
    .num_nodes_waiting = st_num_nodes_waiting,
    .notify_fd = st_notify_fd,
    .ack_notify = st_ack_notify,
    .exit_barrier = st_exit_barrier,
    .set_closed = st_set_closed,
    .close = st_close,
};

int el__rdzv_static_open(struct el_rdzv **out, const struct el_rdzv_config *cfg,
                         char *err, size_t errlen)
{
    int standalone = strcmp(cfg->backend, "static") != 0;
    if (standalone && cfg->max_nodes > 1) {
        snprintf(err, errlen,
                 "the %s rendezvous with --nnodes=%d:%d is not "
                 "available yet; use --rdzv-backend=static with "
                 "--node-rank on each node",
                 cfg->backend, cfg->min_nodes, cfg->max_nodes);
        return EL_EUSAGE;
    }
    if (!standalone && cfg->min_nodes != cfg->max_nodes) {
        snprintf(err, errlen,
                 "the static rendezvous needs a fixed number of "
                 "nodes (got %d:%d)",
                 cfg->min_nodes, cfg->max_nodes);
        return EL_EUSAGE;
    }
    if (!standalone && cfg->port == 0 && cfg->max_nodes > 1) {
        snprintf(err, errlen,
                 "the static rendezvous of %d nodes needs a "
                 "fixed --master-port (not 0)",
                 cfg->max_nodes);
        return EL_EUSAGE;
    }
    struct st_rdzv *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    int src = el__rdzv_link_secret(&r->link, cfg, err, errlen);
    if (src) {
        free(r);
        return src;
    }
    r->base.ops = standalone ? &standalone_ops : &st_ops;
    r->standalone = standalone;
    r->nodes = standalone ? 1 : cfg->max_nodes;
    r->node_rank = standalone ? 0 : cfg->node_rank;
    r->round = -1;
    r->joining = -1;
    r->stop_pipe[0] = r->stop_pipe[1] = -1;
    r->join_timeout_ms =
        cfg->join_timeout_ms > 0 ? cfg->join_timeout_ms : 600000;
    r->link.io_timeout_ms = cfg->io_timeout_ms > 0 ? cfg->io_timeout_ms : 60000;
    r->on_event = cfg->on_event;
    r->event_arg = cfg->event_arg;
    snprintf(r->run_id, sizeof r->run_id, "%s",
             cfg->run_id ? cfg->run_id : "none");
    snprintf(r->link.prefix, sizeof r->link.prefix, "/elrun/%s/", r->run_id);
    const char *host = cfg->host && *cfg->host ? cfg->host
                       : standalone            ? "127.0.0.1"
                                               : "127.0.0.1";
    if (standalone && strcmp(host, "localhost") == 0)
        host = "127.0.0.1";
    snprintf(r->link.host, sizeof r->link.host, "%s", host);
    r->link.port = cfg->port;
    r->link.hint = "start node 0 first or check --master-addr/--master-port";
    r->link.on_event = cfg->on_event; /* retries are logged */
    r->link.event_arg = cfg->event_arg;
    r->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->evfd < 0 || pipe2(r->stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        int e = -errno;
        snprintf(err, errlen, "eventfd/pipe: %s", strerror(errno));
        if (r->evfd >= 0)
            close(r->evfd);
        free(r);
        return e;
    }
    if (standalone || r->node_rank == 0) {
        struct el_store_server_opts so = {0};
        char bind[EL_HOST_MAX];
        /* Loopback stays loopback (a single node needs no more), unless
         * the workers are told another address with --local-addr. */
        int local_only = is_loopback(host) && !(standalone && cfg->local_addr &&
                                                !is_loopback(cfg->local_addr));
        /* c10d's one node hosts only at its endpoint's own address: where
         * that is another host's, binding fails (EADDRNOTAVAIL) and
         * c10d_open joins the store there instead, as torch does. */
        int exact = local_only ||
                    (strcmp(cfg->backend, "c10d") == 0 && !is_loopback(host));
        snprintf(bind, sizeof bind, "%s", exact ? r->link.host : "0.0.0.0");
        if (strcmp(bind, "localhost") == 0)
            snprintf(bind, sizeof bind, "127.0.0.1");
        so.host = bind;
        so.port = cfg->port;
        so.secret = r->link.secret_len ? r->link.secret : NULL;
        so.secret_len = r->link.secret_len;
        so.on_event = r->on_event; /* the store's limits and refusals */
        so.event_arg = r->event_arg;
        int rc = el_store_server_start(&r->srv, &so);
        if (rc) {
            /* The port came from --master-port (static) or the endpoint
             * (c10d's single node; --standalone picks a free one). */
            snprintf(err, errlen, "cannot host the store on %s:%d: %s%s%s",
                     bind, cfg->port, el_strerror(rc),
                     rc != -EADDRINUSE ? ""
                     : strcmp(cfg->backend, "c10d") == 0
                         ? "; pick another port in --rdzv-endpoint"
                         : "; pick another --master-port",
                     rc == -EADDRINUSE ? " or stop what uses it" : "");
            close(r->evfd);
            close(r->stop_pipe[0]);
            close(r->stop_pipe[1]);
            free(r);
            return rc;
        }
        r->link.port = el_store_server_port(r->srv);
    }
    snprintf(r->master_addr, sizeof r->master_addr, "%s",
             cfg->local_addr && standalone ? cfg->local_addr : r->link.host);
    *out = &r->base;
    return 0;
}
