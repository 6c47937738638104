/* comm.c -- the public face of the collectives (see include/elrun/coll.h):
 * opening and closing a communicator, checking arguments, picking the
 * algorithm for each call, and recording failures so that they name the
 * peer at fault.
 *
 * Failure reports: the rank that first sees a peer die or hang writes
 * "<prefix>/abort/<rank>" = "rank P (ADDR): what happened" to the store and
 * then shuts its connections down.  A rank that loses a connection reads
 * that peer's report, if any, and adopts it, so the message at every rank
 * names the rank that actually died rather than the neighbour that passed
 * the failure on.  The report is written before the connections go down,
 * so whoever sees them go down finds it.  A call stopped through opts.stop
 * writes no report (el__comm_stopped): the store may be on the frozen node.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "coll/coll_int.h"
#include "coll/transport.h"
#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/store.h"

static _Thread_local char open_err[512];

/* The address of this host's interface that routes to MASTER_ADDR (the
 * store's host, set by the agent), found by connecting a UDP socket, which
 * sends nothing; "127.0.0.1" without MASTER_ADDR or on any failure. */
static void default_host(char *out, size_t len)
{
    snprintf(out, len, "127.0.0.1");
    const char *m = getenv("MASTER_ADDR");
    if (!m || !*m)
        return;
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *res = NULL;
    if (getaddrinfo(m, "9", &hints, &res) != 0 || !res)
        return;
    int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        char ip[INET6_ADDRSTRLEN];
        const void *a =
            ss.ss_family == AF_INET6
                ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
        if (inet_ntop(ss.ss_family, a, ip, sizeof ip))
            snprintf(out, len, "%s", ip);
    }
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
}

const char *el_comm_open_errmsg(void)
{
    return open_err[0] ? open_err : "no error";
}

int el_comm_open(struct el_comm **out, struct el_store *store,
                 const char *prefix, int rank, int world,
                 const struct el_comm_opts *opts)
{
    open_err[0] = '\0';
    if (!out || !store || !prefix || world < 1 || rank < 0 || rank >= world) {
        snprintf(open_err, sizeof open_err, "bad arguments (rank %d, world %d)",
                 rank, world);
        return EL_EUSAGE;
    }
    struct el_comm *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->rank = rank;
    c->world = world;
    c->store = store;
    if (opts)
        c->opts = *opts;
    if (c->opts.timeout_ms <= 0)
        c->opts.timeout_ms = 300000;
    if (c->opts.connect_timeout_ms <= 0)
        c->opts.connect_timeout_ms = 60000;
    if (c->opts.chunk_bytes == 0)
        c->opts.chunk_bytes = 256 << 10;
    /* Whole elements of every type, and not absurdly small. */
    c->opts.chunk_bytes = (c->opts.chunk_bytes + 7) & ~(size_t)7;
    if (c->opts.chunk_bytes < 4096)
        c->opts.chunk_bytes = 4096;
    if (c->opts.small_bytes == 0)
        c->opts.small_bytes = 32 << 10;
    if (c->opts.shm == 0)
        c->opts.shm = 1;
    if (c->opts.shm_chunk_bytes == 0)
        c->opts.shm_chunk_bytes = 1 << 20;
    c->opts.host = NULL; /* not kept: only needed during open */
    c->prefix = strdup(prefix);
    c->stage = malloc(c->opts.chunk_bytes);
    if (!c->prefix || !c->stage) {
        el_comm_close(c);
        return -ENOMEM;
    }
    char dhost[INET6_ADDRSTRLEN + 1];
    const char *host = opts && opts->host ? opts->host : NULL;
    if (!host && world > 1) {
        default_host(dhost, sizeof dhost);
        host = dhost;
    }
    int rc = 0;
    if (world > 1)
        rc = el__tp_open(&c->tp, store, prefix, rank, world, host,
                         c->opts.connect_timeout_ms, c->opts.stop, open_err,
                         sizeof open_err);
    if (rc == 0 && world > 1 && c->opts.shm > 0) {
        rc = el__shm_open(c, c->opts.shm_chunk_bytes);
        if (rc != 0)
            snprintf(open_err, sizeof open_err, "%.500s", c->errmsg);
    }
    if (rc != 0) {
        el_comm_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

void el_comm_close(struct el_comm *c)
{
    if (!c)
        return;
    el__shm_close(c->shm);
    el__tp_close(c->tp);
    free(c->prefix);
    free(c->stage);
    free(c->tmp);
    free(c);
}

int el_comm_rank(const struct el_comm *c)
{
    return c->rank;
}

int el_comm_world(const struct el_comm *c)
{
    return c->world;
}

const char *el_comm_transport(const struct el_comm *c)
{
    return c->shm ? "shm" : "tcp";
}

const char *el_comm_errmsg(const struct el_comm *c)
{
    if (!c)
        return "no communicator";
    return c->errmsg[0] ? c->errmsg : "no error";
}

int el__comm_tmp(struct el_comm *c, size_t n)
{
    if (n <= c->tmp_cap)
        return 0;
    char *p = realloc(c->tmp, n);
    if (!p)
        return el__comm_fail(c, -ENOMEM, -1, "out of memory");
    c->tmp = p;
    c->tmp_cap = n;
    return 0;
}

int el__comm_fail(struct el_comm *c, int rc, int peer, const char *what)
{
    char root[512];
    int adopted = 0;
    if (peer >= 0 && c->tp) {
        /* Did the peer fail first, and why? */
        char key[600];
        void *val = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "%s/abort/%d", c->prefix, peer);
        if (el_store_try_get(c->store, key, &val, &len) == 0 && len > 0) {
            snprintf(root, sizeof root, "%.*s", (int)len, (char *)val);
            adopted = 1;
            rc = EL_EPEERLOST;
        }
        free(val);
        if (!adopted)
            snprintf(root, sizeof root, "rank %d (%s): %s", peer,
                     el__tp_addr(c->tp, peer), what);
    } else {
        snprintf(root, sizeof root, "rank %d: %s", c->rank, what);
    }
    if (adopted)
        snprintf(c->errmsg, sizeof c->errmsg,
                 "%s failed on rank %d: %s (reported by rank %d)", c->opname,
                 c->rank, root, peer);
    else
        snprintf(c->errmsg, sizeof c->errmsg, "%s failed on rank %d: %s",
                 c->opname, c->rank, root);
    c->err = rc;
    if (c->tp) {
        char key[600];
        snprintf(key, sizeof key, "%s/abort/%d", c->prefix, c->rank);
        /* Best effort: without the store, peers still see the shutdown. */
        (void)el_store_set(c->store, key, root, strlen(root));
        if (c->shm)
            el__shm_abort(c->shm, c->rank, 0);
        el__tp_shutdown(c->tp);
    }
    return rc;
}

int el__comm_stopped(struct el_comm *c)
{
    snprintf(c->errmsg, sizeof c->errmsg,
             "%s stopped on rank %d: the program asked it to return "
             "(opts.stop); the communicator is broken, close it",
             c->opname ? c->opname : "collective", c->rank);
    c->err = -ECANCELED;
    if (c->shm)
        el__shm_abort(c->shm, c->rank, 1);
    if (c->tp)
        el__tp_shutdown(c->tp);
    return -ECANCELED;
}

int el__comm_timeout(struct el_comm *c, int peer, const char *what)
{
    char key[600], val[16];
    snprintf(key, sizeof key, "%s/wait/%d", c->prefix, c->rank);
    snprintf(val, sizeof val, "%d", peer);
    (void)el_store_set(c->store, key, val, strlen(val));
    int grace = c->opts.timeout_ms < 1000 ? c->opts.timeout_ms : 1000;
    int bad = -1;
    /* Someone may settle it first: adopt its report. */
    long long end = el_now_ms() + grace;
    for (;;) {
        if (el__stop_asked(c->opts.stop))
            return el__comm_stopped(c);
        long long left = end - el_now_ms();
        if (left <= 0)
            break;
        if (el__tp_wait_close(c->tp, el__stop_slice(c->opts.stop, (int)left),
                              &bad) > 0)
            return el__comm_fail(c, EL_EPEERLOST, bad, "connection closed");
    }
    /* Follow who waits on whom, from our peer on. */
    char chain[256];
    int len = snprintf(chain, sizeof chain, "%d", peer);
    int x = peer;
    for (int steps = 0; steps < c->world; steps++) {
        void *v = NULL;
        size_t vl = 0;
        snprintf(key, sizeof key, "%s/wait/%d", c->prefix, x);
        if (el_store_try_get(c->store, key, &v, &vl) != 0) {
            if (x == peer)
                return el__comm_fail(c, -ETIMEDOUT, peer, what);
            char w[400];
            snprintf(w, sizeof w,
                     "hung, or not calling the collective: nothing moved "
                     "for %d ms (rank %d waits on rank %s)",
                     c->opts.timeout_ms, c->rank, chain);
            return el__comm_fail(c, -ETIMEDOUT, x, w);
        }
        int next = atoi(v);
        free(v);
        if (next < 0 || next >= c->world || next == c->rank)
            break;
        x = next;
        if (len < (int)sizeof chain - 16)
            len +=
                snprintf(chain + len, sizeof chain - (size_t)len, " -> %d", x);
    }
    char w[400];
    snprintf(w, sizeof w,
             "ranks wait on each other in a cycle (%d -> %s): mismatched "
             "collectives?",
             c->rank, chain);
    return el__comm_fail(c, -ETIMEDOUT, peer, w);
}

/* Common entry checks; sets the name used in messages. */
static int begin(struct el_comm *c, const char *name)
{
    if (!c)
        return EL_EUSAGE;
    if (c->err)
        return c->err;
    c->opname = name;
    return 0;
}

int el_allreduce(struct el_comm *c, void *buf, size_t count,
                 enum el_dtype dtype, enum el_redop op)
{
    int rc = begin(c, "allreduce");
    if (rc)
        return rc;
    size_t esz = el_dtype_size(dtype);
    if (esz == 0 || (unsigned)op > EL_MIN || (!buf && count > 0) ||
        count > ((size_t)-1) / 8) {
        snprintf(c->errmsg, sizeof c->errmsg,
                 "allreduce: bad arguments (dtype %d, op %d, count %zu)",
                 (int)dtype, (int)op, count);
        return EL_EUSAGE;
    }
    c->dtype = dtype;
    c->op = op;
    if (c->world == 1 || count == 0)
        return 0;
    if (c->shm)
        return el__allreduce_shm(c, buf, count, esz);
    if (count * esz <= c->opts.small_bytes || count < (size_t)c->world)
        return el__allreduce_rd(c, buf, count, esz);
    return el__allreduce_ring(c, buf, count, esz);
}

int el_broadcast(struct el_comm *c, void *buf, size_t bytes, int root)
{
    int rc = begin(c, "broadcast");
    if (rc)
        return rc;
    if ((!buf && bytes > 0) || root < 0 || root >= c->world) {
        snprintf(c->errmsg, sizeof c->errmsg,
                 "broadcast: bad arguments (root %d of %d)", root, c->world);
        return EL_EUSAGE;
    }
    if (c->world == 1 || bytes == 0)
        return 0;
    if (c->shm)
        return el__broadcast_shm(c, buf, bytes, root);
    if (bytes <= c->opts.small_bytes)
        return el__broadcast_tree(c, buf, bytes, root);
    return el__broadcast_chain(c, buf, bytes, root);
}

int el_allgather(struct el_comm *c, const void *sendbuf, void *recvbuf,
                 size_t bytes)
{
    int rc = begin(c, "allgather");
    if (rc)
        return rc;
    if (bytes > 0 && (!sendbuf || !recvbuf)) {
        snprintf(c->errmsg, sizeof c->errmsg, "allgather: NULL buffer");
        return EL_EUSAGE;
    }
    if (bytes == 0)
        return 0;
    char *own = (char *)recvbuf + (size_t)c->rank * bytes;
    if (own != sendbuf)
        memmove(own, sendbuf, bytes);
    if (c->world == 1)
        return 0;
    if (c->shm)
        return el__allgather_shm(c, recvbuf, bytes);
    return el__allgather_ring(c, recvbuf, bytes);
}

int el_barrier(struct el_comm *c)
{
    int rc = begin(c, "barrier");
    if (rc)
        return rc;
    if (c->world == 1)
        return 0;
    if (c->shm)
        return el__shm_barrier(c);
    return el__barrier_dissem(c);
}
