/* server.c -- the store server: one libuv loop, any number of clients.
 *
 * Each connection's bytes go through el__proto_parse(); a request that needs a
 * key that does not exist yet (GET, WAIT, MULTI_GET, elrun's X_* waits) is
 * "parked": the connection keeps a copy of the request and a waiter on each
 * missing key, and the request runs again when one of those keys changes.
 * Nothing ever blocks the loop, and a bad or partial frame only concerns its
 * own connection.
 *
 * Memory per idle connection is the libuv handle plus this file's struct
 * conn: reads land in one shared buffer, and a connection owns a buffer only
 * while it holds a partial request or unsent replies.
 *
 * Bounds (struct el_store_limits): each connection's partial request and its
 * unsent replies (queued plus in flight) are capped at max_conn_buffer, and
 * every buffer is counted in a server-wide total capped at max_total_buffer.
 * Back-pressure: a connection whose replies sit unread (a write in flight,
 * the kernel's socket buffer full) is not read from, and its remaining
 * requests wait, until the client reads; one that holds a partial request
 * or unread replies without progress for stall_timeout_ms is closed.
 *
 * Descriptors: connections are counted per peer address (max_conns_per_peer,
 * loopback apart), and a client accepted into the last fd_reserve
 * descriptors makes room by dropping an idle connection (one that never
 * sent a whole request or is stuck first, else the newest idle one), or is
 * refused, so held-open connections cannot lock real clients out.
 *
 * Job secret: with opts.secret, a connection that answered the challenge
 * (X_AUTH_CHALLENGE, X_AUTH) may write anything; any other may not write a
 * key under EL_AUTH_PREFIX (the agents' rendezvous state): such a write
 * closes it with a message.
 */
#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <nettle/memops.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#include "elrun/err.h"
#include "elrun/store.h"
#include "store/proto.h"
#include "store/table.h"

#define READ_CHUNK (64 * 1024)
/* Replies queued past this are handed to the kernel before the next request
 * is served; if it cannot take them all, the connection pauses. */
#define OUT_HIGH (64 * 1024)
/* A connection's buffers up to this are never refused by max_total_buffer
 * (small requests and replies keep flowing when the total is full). */
#define CONN_FLOOR (128 * 1024)

struct conn;

/* One parked request's interest in one key. */
struct el_waiter {
    struct conn *c;
    struct el_entry *e;
    struct el_waiter *knext, *kprev; /* the entry's list                   */
    struct el_waiter *cnext;         /* the connection's list              */
};

/* A key to set or append to when the connection closes. */
struct close_hook {
    struct close_hook *next;
    int append;
    size_t klen, vlen;
    uint8_t data[]; /* key then value */
};

/* Connections from one peer address. */
struct peer {
    struct peer *next; /* hash chain                                 */
    uint8_t addr[16];  /* IPv4 in the first 4 bytes                  */
    int family;
    int loopback;
    unsigned bucket;
    size_t conns;
};

#define PEER_BUCKETS 1024
/* Near the descriptor limit, a connection quiet for less than this is not
 * dropped for a new one (in a storm, the newest would push out the new). */
#define DROP_GRACE_MS 1000

struct write_req {
    uv_write_t req;
    uint8_t *data;
};

struct conn {
    uv_tcp_t tcp; /* first: handle pointers cast to struct conn */
    struct el_store_server *srv;
    struct conn *prev, *next; /* all connections                   */
    struct conn *dirty_next;  /* connections with replies to flush */
    enum el_dialect dialect;
    uint8_t *in; /* unparsed bytes (partial request)  */
    size_t in_len, in_cap;
    uint8_t *out; /* replies not yet handed to libuv   */
    size_t out_len, out_cap;
    size_t inflight, inflight_cap;   /* the buffer of the write in flight */
    size_t mem;                      /* what this adds to srv->mem_total   */
    uv_timer_t *stall;               /* closes a connection stuck mid-way */
    size_t stall_queue;              /* write queue size when it was armed */
    size_t refused;                  /* on_alloc refused to grow by this  */
    struct peer *peer;               /* counts this connection            */
    uint64_t accepted_ms, active_ms; /* loop time: accepted, last request */
    uint64_t served;                 /* requests served                   */
    uint8_t *parked;                 /* copy of the parked request        */
    size_t parked_len;
    struct el_waiter *waiters;
    uv_timer_t *timer; /* deadline of a parked X_* request  */
    uv_timer_t *idle;  /* closes a quiet connection         */
    uint64_t idle_ms;  /* X_IDLE_TIMEOUT; 0 = never         */
    struct close_hook *hooks;
    int handles; /* open libuv handles (tcp, timer)   */
    unsigned writing : 1, closing : 1, dirty : 1, waking : 1;
    unsigned paused : 1; /* not reading: replies unread       */
    unsigned challenged : 1, authed : 1;
    unsigned native : 1;          /* used elrun's own ops (an agent)   */
    uint8_t nonce[EL_AUTH_NONCE]; /* the challenge sent to it          */
};

struct el_store_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    struct el_store_server_opts opts;
    struct el_table table;
    struct conn *conns;
    struct conn *dirty;
    struct close_hook *pending_hooks; /* from closed connections          */
    struct conn **wake;               /* scratch for wake()               */
    size_t wake_cap;
    uint8_t *rbuf; /* shared read buffer               */
    int port;
    uint64_t fd_limit;                /* RLIMIT_NOFILE when opened        */
    int fd_warned;                    /* said so once near the limit      */
    struct peer *peers[PEER_BUCKETS]; /* connections per address          */
    uint64_t other_fds;               /* descriptors that are not clients */
    uint64_t fd_counted_ms;           /* when /proc/self/fd was counted   */
    uint64_t no_victim_ms;            /* when nothing could be dropped    */
    uint64_t refused_logged_ms;       /* refusals: one line a second      */
    uint64_t refused_quiet;           /* refused since that line          */
    uint8_t *secret;                  /* the job secret, or NULL          */
    size_t secret_len;
    int handles; /* listener + async                 */
    int closing;
    /* Threaded mode (el_store_server_start). */
    int own_loop;
    pthread_t thread;
    uv_async_t stop_async;
    /* Counters, read from any thread. */
    uint64_t n_conns, n_requests, n_rejected, n_keys, n_parked;
    uint64_t buffered, buffered_peak, n_paused, n_limited, n_data;
    /* The loop thread's own count of buffered bytes; the counters above
     * are written only atomically (stat_set), since other threads read
     * them. */
    uint64_t mem_total;
    uint64_t n_ops[32]; /* by enum el_op */
};

static void conn_close(struct conn *c, const char *why);
static void reject(struct conn *c, const char *why);
static int handle(struct conn *c, const struct el_req *rq);
static void stall_arm(struct conn *c, int progress);

static void stat_set(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

static void event(struct el_store_server *srv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void event(struct el_store_server *srv, const char *fmt, ...)
{
    if (!srv->opts.on_event)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    srv->opts.on_event(srv->opts.event_arg, msg);
}

static void peer_name(struct conn *c, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    int n = sizeof ss;
    char host[64] = "?";
    int port = 0;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &n) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            uv_ip4_name(a, host, sizeof host);
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            uv_ip6_name(a, host, sizeof host);
            port = ntohs(a->sin6_port);
        }
    }
    snprintf(buf, len, "%s:%d", host, port);
}

/* ------------------------------------------------------------------------
 * Peers
 */

/* The peer entry of c's address (created at 0 connections), or NULL when
 * the address is unknown or memory is short (then it is not limited). */
static struct peer *peer_of(struct el_store_server *srv, struct conn *c)
{
    struct sockaddr_storage ss;
    int n = sizeof ss;
    uint8_t addr[16] = {0};
    int loopback = 0;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &n) != 0)
        return NULL;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        memcpy(addr, &a->sin_addr, 4);
        loopback = addr[0] == 127;
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        memcpy(addr, &a->sin6_addr, 16);
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
                                           0, 0, 0, 0, 0xff, 0xff};
        static const uint8_t one[16] = {[15] = 1};
        loopback = memcmp(addr, one, 16) == 0 ||
                   (memcmp(addr, mapped, 12) == 0 && addr[12] == 127);
    } else {
        return NULL;
    }
    uint32_t h = 2166136261u;
    for (int i = 0; i < 16; i++)
        h = (h ^ addr[i]) * 16777619u;
    struct peer **slot = &srv->peers[h % PEER_BUCKETS], *p;
    for (p = *slot; p; p = p->next)
        if (p->family == ss.ss_family && memcmp(p->addr, addr, 16) == 0)
            return p;
    p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    memcpy(p->addr, addr, 16);
    p->family = ss.ss_family;
    p->loopback = loopback;
    p->bucket = h % PEER_BUCKETS;
    p->next = *slot;
    *slot = p;
    return p;
}

static void peer_release(struct el_store_server *srv, struct conn *c)
{
    struct peer *p = c->peer;
    c->peer = NULL;
    if (!p || --p->conns > 0)
        return;
    for (struct peer **pp = &srv->peers[p->bucket]; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            free(p);
            return;
        }
}

/* ------------------------------------------------------------------------
 * Memory accounting
 */

/* Bring srv->mem_total (and its published copy) up to date with c's buffers (call after any change).
 * A closing connection is no longer counted (conn_close took it out): its
 * write in flight may end after an embedded server was freed. */
static void account(struct conn *c)
{
    struct el_store_server *srv = c->srv;
    if (c->closing)
        return;
    size_t m = c->in_cap + c->out_cap + c->inflight_cap + c->parked_len;
    srv->mem_total += (uint64_t)m - (uint64_t)c->mem;
    c->mem = m;
    stat_set(&srv->buffered, srv->mem_total);
    if (srv->mem_total > srv->buffered_peak)
        stat_set(&srv->buffered_peak, srv->mem_total);
}

static void limit_close(struct conn *c, const char *why)
{
    __atomic_add_fetch(&c->srv->n_limited, 1, __ATOMIC_RELAXED);
    conn_close(c, why);
}

/* May c grow its buffers by 'grow' bytes?  No when that takes the total
 * past max_total_buffer and c holds more than CONN_FLOOR; the message says
 * what was refused (c is not closed here). */
static int total_allows(struct conn *c, size_t grow, const char *what,
                        char *why, size_t cap)
{
    struct el_store_server *srv = c->srv;
    size_t max = srv->opts.limits.max_total_buffer;
    if (c->mem + grow <= CONN_FLOOR || srv->mem_total + grow <= max)
        return 1;
    snprintf(why, cap,
             "%s of %zu bytes would take the buffers of all "
             "connections past max_total_buffer (%zu bytes, %llu held); "
             "raise it (--max-total-buffer) if clients really move that "
             "much at once",
             what, grow, max, (unsigned long long)srv->mem_total);
    return 0;
}

/* ------------------------------------------------------------------------
 * Replies
 */

static void mark_dirty(struct conn *c)
{
    if (!c->dirty) {
        c->dirty = 1;
        c->dirty_next = c->srv->dirty;
        c->srv->dirty = c;
    }
}

/* Room for n more reply bytes, or NULL (connection closed: the replies
 * queued and in flight may not pass max_conn_buffer, nor the buffers of all
 * connections max_total_buffer). */
static uint8_t *out_reserve(struct conn *c, size_t n)
{
    size_t max = c->srv->opts.limits.max_conn_buffer;
    char why[320];
    if (c->closing)
        return NULL;
    if (c->inflight > max || n > max - c->inflight ||
        c->out_len > max - c->inflight - n) {
        snprintf(why, sizeof why,
                 "unsent replies would exceed "
                 "max_conn_buffer (%zu bytes; %zu queued, %zu in flight, "
                 "%zu more)",
                 max, c->out_len, c->inflight, n);
        limit_close(c, why);
        return NULL;
    }
    if (c->out_len + n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 64;
        while (cap < c->out_len + n)
            cap *= 2;
        if (cap > max - c->inflight)
            cap = max - c->inflight; /* still >= out_len + n */
        if (!total_allows(c, cap - c->out_cap, "a reply buffer", why,
                          sizeof why)) {
            limit_close(c, why);
            return NULL;
        }
        uint8_t *p = realloc(c->out, cap);
        if (!p) {
            conn_close(c, "out of memory for replies");
            return NULL;
        }
        c->out = p;
        c->out_cap = cap;
        account(c);
    }
    uint8_t *p = c->out + c->out_len;
    c->out_len += n;
    mark_dirty(c);
    return p;
}

static void out_u8(struct conn *c, uint8_t v)
{
    uint8_t *p = out_reserve(c, 1);
    if (p)
        *p = v;
}

static void out_i64(struct conn *c, int64_t v)
{
    uint8_t *p = out_reserve(c, 8);
    if (p)
        memcpy(p, &v, 8);
}

static void out_u32(struct conn *c, uint32_t v)
{
    uint8_t *p = out_reserve(c, 4);
    if (p)
        memcpy(p, &v, 4);
}

static void out_bytes(struct conn *c, const uint8_t *b, size_t n)
{
    uint8_t *p = out_reserve(c, 8 + n);
    if (p) {
        uint64_t n64 = n;
        memcpy(p, &n64, 8);
        if (n)
            memcpy(p + 8, b, n);
    }
}

static void flush(struct conn *c);

static void resume(struct conn *c);
static void flush_dirty(struct el_store_server *srv);

static void on_write(uv_write_t *req, int status)
{
    struct write_req *w = (struct write_req *)req;
    struct conn *c = (struct conn *)req->handle;
    struct el_store_server *srv = c->srv;
    free(w->data);
    free(w);
    c->writing = 0;
    c->inflight = c->inflight_cap = 0;
    if (c->closing)
        return; /* srv may be gone (embedded server closing) */
    account(c);
    if (status < 0) {
        conn_close(c, uv_strerror(status));
        flush_dirty(srv);
        return;
    }
    flush(c);
    if (c->paused && !c->writing && !c->closing)
        resume(c);
    if (!c->closing)
        stall_arm(c, 1);
    flush_dirty(srv);
}

static void flush(struct conn *c)
{
    if (c->closing || c->writing || c->out_len == 0)
        return;
    uv_buf_t b = uv_buf_init((char *)c->out, (unsigned)c->out_len);
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n == (int)c->out_len) {
        c->out_len = 0;
        if (c->out_cap > 4096) { /* keep idle connections small */
            free(c->out);
            c->out = NULL;
            c->out_cap = 0;
            account(c);
        }
        return;
    }
    if (n < 0 && n != UV_EAGAIN) {
        conn_close(c, uv_strerror(n));
        return;
    }
    if (n < 0)
        n = 0;
    /* The rest goes through an asynchronous write that owns the buffer. */
    struct write_req *w = malloc(sizeof *w);
    if (!w) {
        conn_close(c, "out of memory");
        return;
    }
    w->data = c->out;
    b = uv_buf_init((char *)c->out + n, (unsigned)(c->out_len - (size_t)n));
    c->inflight = c->out_len - (size_t)n;
    c->inflight_cap = c->out_cap;
    c->out = NULL;
    c->out_len = c->out_cap = 0;
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc < 0) {
        free(w->data);
        free(w);
        c->inflight = c->inflight_cap = 0;
        account(c);
        conn_close(c, uv_strerror(rc));
        return;
    }
    c->writing = 1;
    stall_arm(c, 0);
}

static void run_pending_hooks(struct el_store_server *srv);

/* End of every libuv callback: send what was produced, run close hooks. */
static void flush_dirty(struct el_store_server *srv)
{
    while (srv->pending_hooks || srv->dirty) {
        run_pending_hooks(srv);
        struct conn *c = srv->dirty;
        srv->dirty = NULL;
        while (c) {
            struct conn *next = c->dirty_next;
            c->dirty = 0;
            flush(c);
            c = next;
        }
    }
    stat_set(&srv->n_keys, srv->table.npresent);
    stat_set(&srv->n_data, srv->table.data);
}

/* ------------------------------------------------------------------------
 * Parking and waking
 */

static void unpark(struct conn *c)
{
    struct el_store_server *srv = c->srv;
    struct el_waiter *w = c->waiters, *next;
    for (; w; w = next) {
        next = w->cnext;
        struct el_entry *e = w->e;
        if (w->kprev)
            w->kprev->knext = w->knext;
        else
            e->waiters = w->knext;
        if (w->knext)
            w->knext->kprev = w->kprev;
        free(w);
        el__table_maybe_drop(&srv->table, e);
    }
    c->waiters = NULL;
}

static void park_end(struct conn *c)
{
    unpark(c);
    if (c->parked)
        __atomic_sub_fetch(&c->srv->n_parked, 1, __ATOMIC_RELAXED);
    free(c->parked);
    c->parked = NULL;
    c->parked_len = 0;
    account(c);
    if (c->timer)
        uv_timer_stop(c->timer);
}

static int add_waiter(struct conn *c, const uint8_t *key, size_t klen)
{
    struct el_entry *e = el__table_get_or_add(&c->srv->table, key, klen);
    struct el_waiter *w = e ? malloc(sizeof *w) : NULL;
    if (!w) {
        if (e)
            el__table_maybe_drop(&c->srv->table, e);
        conn_close(c, "out of memory for a waiter");
        return -1;
    }
    w->c = c;
    w->e = e;
    w->kprev = NULL;
    w->knext = e->waiters;
    if (e->waiters)
        e->waiters->kprev = w;
    e->waiters = w;
    w->cnext = c->waiters;
    c->waiters = w;
    return 0;
}

static void on_idle_timeout(uv_timer_t *t)
{
    struct conn *c = t->data;
    char why[96];
    snprintf(why, sizeof why, "nothing received for %llu ms (idle timeout)",
             (unsigned long long)c->idle_ms);
    conn_close(c, why);
    flush_dirty(c->srv);
}

static void on_timer_close(uv_handle_t *h)
{
    struct conn *c = h->data;
    free(h);
    if (--c->handles == 0)
        free(c);
}

static void on_park_timeout(uv_timer_t *t)
{
    struct conn *c = t->data;
    struct el_store_server *srv = c->srv;
    if (!c->parked)
        return;
    park_end(c);
    out_u8(c, EL_X_TIMEOUT);
    flush_dirty(srv);
}

/* Keep the request (copied unless it is already the parked copy) until one
 * of its keys changes; 'keys' lists the missing ones.  timeout_ms >= 0 arms
 * the deadline the first time the request parks. */
static int park(struct conn *c, const struct el_req *rq, const uint8_t *frame,
                int64_t timeout_ms)
{
    int first = frame != c->parked;
    if (first) {
        uint8_t *copy = malloc(rq->frame_len);
        if (!copy) {
            conn_close(c, "out of memory");
            return -1;
        }
        memcpy(copy, frame, rq->frame_len);
        if (!c->parked)
            __atomic_add_fetch(&c->srv->n_parked, 1, __ATOMIC_RELAXED);
        free(c->parked);
        c->parked = copy;
        c->parked_len = rq->frame_len;
        account(c);
    }
    if (first && timeout_ms >= 0) {
        if (!c->timer) {
            c->timer = malloc(sizeof *c->timer);
            if (!c->timer) {
                conn_close(c, "out of memory");
                return -1;
            }
            uv_timer_init(c->srv->loop, c->timer);
            c->timer->data = c;
            c->handles++;
        }
        uv_timer_start(c->timer, on_park_timeout, (uint64_t)timeout_ms, 0);
    }
    return 0;
}

/* Run every request parked on e again (the key changed).  The requests that
 * park are read-only, so running them cannot change the table further. */
static void wake(struct el_store_server *srv, struct el_entry *e)
{
    size_t n = 0;
    for (struct el_waiter *w = e->waiters; w; w = w->knext) {
        if (w->c->waking)
            continue;
        if (n == srv->wake_cap) {
            size_t cap = srv->wake_cap ? srv->wake_cap * 2 : 64;
            struct conn **p = realloc(srv->wake, cap * sizeof *p);
            if (!p)
                break; /* those left stay parked until the next change */
            srv->wake = p;
            srv->wake_cap = cap;
        }
        w->c->waking = 1;
        srv->wake[n++] = w->c;
    }
    /* Detach all first: 'e' may be freed by unpark(). */
    for (size_t i = 0; i < n; i++)
        unpark(srv->wake[i]);
    for (size_t i = 0; i < n; i++) {
        struct conn *c = srv->wake[i];
        struct el_req rq;
        char err[160];
        c->waking = 0;
        if (c->closing || !c->parked)
            continue;
        int rc = el__proto_parse(c->parked, c->parked_len, c->dialect,
                                 &srv->opts.limits, &rq, err, sizeof err);
        if (rc <= 0) {
            conn_close(c, "internal: parked request no longer parses");
            continue;
        }
        handle(c, &rq);
    }
}

/* ------------------------------------------------------------------------
 * Operations
 */

static struct el_entry *present(struct el_store_server *srv, const uint8_t *k,
                                uint64_t n)
{
    struct el_entry *e = el__table_find(&srv->table, k, n);
    return e && e->present ? e : NULL;
}

/* May c store 'add' more bytes of keys and values (replacing 'drop')?
 * Closes c with a message when that passes max_total_data. */
static int data_allows(struct conn *c, uint64_t add, uint64_t drop)
{
    struct el_store_server *srv = c->srv;
    size_t max = srv->opts.limits.max_total_data, have = srv->table.data;
    if (c->authed || add <= drop || have - drop + add <= max)
        return 1;
    char why[256];
    snprintf(why, sizeof why,
             "storing %llu more bytes would take the keys "
             "and values stored past max_total_data (%zu bytes, %zu "
             "stored); delete keys, or raise it (--max-total-data)",
             (unsigned long long)(add - drop), max, have);
    limit_close(c, why);
    return 0;
}

static int set_key(struct conn *c, const uint8_t *k, uint64_t kn,
                   const uint8_t *v, uint64_t vn)
{
    struct el_store_server *srv = c->srv;
    struct el_entry *old = el__table_find(&srv->table, k, kn);
    if (!data_allows(c, kn + vn, old && old->present ? kn + old->vlen : 0))
        return -1;
    struct el_entry *e = el__table_get_or_add(&srv->table, k, kn);
    if (!e || el__table_set_value(&srv->table, e, v, vn) < 0) {
        if (e)
            el__table_maybe_drop(&srv->table, e);
        conn_close(c, "out of memory for a value");
        return -1;
    }
    wake(srv, e);
    return 0;
}

/* Walk a key list; returns 1 if all keys exist.  With park_missing, adds a
 * waiter for each missing key. */
static int keys_present(struct conn *c, const struct el_req *rq,
                        int park_missing)
{
    const uint8_t *cur = rq->list;
    int all = 1;
    for (uint64_t i = 0; i < rq->count; i++) {
        uint64_t n;
        const uint8_t *k = el__proto_next_str(&cur, &n);
        if (!present(c->srv, k, n)) {
            all = 0;
            if (!park_missing)
                return 0;
            if (add_waiter(c, k, n) < 0)
                return -1;
        }
    }
    return all;
}

/* WAIT-like requests: reply now if every key exists, else park on the
 * missing ones.  Returns 1 if the keys are all there. */
static int need_keys(struct conn *c, const struct el_req *rq,
                     const uint8_t *frame, int64_t timeout_ms)
{
    if (keys_present(c, rq, 0) == 1)
        return 1;
    if (park(c, rq, frame, timeout_ms) < 0 || keys_present(c, rq, 1) < 0)
        return -1;
    return 0;
}

static int need_key(struct conn *c, const struct el_req *rq,
                    const uint8_t *frame, int64_t timeout_ms)
{
    if (present(c->srv, rq->str[0], rq->len[0]))
        return 1;
    if (park(c, rq, frame, timeout_ms) < 0 ||
        add_waiter(c, rq->str[0], rq->len[0]) < 0)
        return -1;
    return 0;
}

static void reply_values(struct conn *c, const struct el_req *rq)
{
    const uint8_t *cur = rq->list;
    for (uint64_t i = 0; i < rq->count; i++) {
        uint64_t n;
        const uint8_t *k = el__proto_next_str(&cur, &n);
        struct el_entry *e = present(c->srv, k, n);
        out_bytes(c, e->val, e->vlen);
    }
}

static int parse_i64(const uint8_t *s, size_t n, int64_t *v)
{
    char buf[32];
    char *end;
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    long long x = strtoll(buf, &end, 10);
    if (errno || *end)
        return -1;
    *v = x;
    return 0;
}

static void op_add(struct conn *c, const struct el_req *rq)
{
    struct el_entry *e = present(c->srv, rq->str[0], rq->len[0]);
    int64_t cur = 0, sum;
    char txt[32];
    if (e && parse_i64(e->val, e->vlen, &cur) < 0) {
        conn_close(c, "ADD on a key whose value is not a decimal integer");
        return;
    }
    if (__builtin_add_overflow(cur, rq->num, &sum)) {
        conn_close(c, "ADD overflows int64");
        return;
    }
    int n = snprintf(txt, sizeof txt, "%lld", (long long)sum);
    if (set_key(c, rq->str[0], rq->len[0], (const uint8_t *)txt, (uint64_t)n) ==
        0)
        out_i64(c, sum);
}

static void op_compare_set(struct conn *c, const struct el_req *rq)
{
    struct el_entry *e = present(c->srv, rq->str[0], rq->len[0]);
    if (!e) {
        /* TCPStore: a missing key is created only when 'expected' is
         * empty; otherwise the reply is 'expected' itself. */
        if (rq->len[1] == 0) {
            if (set_key(c, rq->str[0], rq->len[0], rq->str[2], rq->len[2]) < 0)
                return;
            out_bytes(c, rq->str[2], rq->len[2]);
        } else {
            out_bytes(c, rq->str[1], rq->len[1]);
        }
        return;
    }
    if (e->vlen == rq->len[1] &&
        (e->vlen == 0 || memcmp(e->val, rq->str[1], e->vlen) == 0)) {
        if (set_key(c, rq->str[0], rq->len[0], rq->str[2], rq->len[2]) < 0)
            return;
        e = present(c->srv, rq->str[0], rq->len[0]);
    }
    out_bytes(c, e->val, e->vlen);
}

static void op_append(struct conn *c, const struct el_req *rq)
{
    struct el_store_server *srv = c->srv;
    struct el_entry *e = present(srv, rq->str[0], rq->len[0]);
    if (!e) {
        set_key(c, rq->str[0], rq->len[0], rq->str[1], rq->len[1]);
        return;
    }
    if (e->vlen + rq->len[1] > srv->opts.limits.max_value_len) {
        conn_close(c, "APPEND would make the value exceed max_value_len");
        return;
    }
    if (!data_allows(c, rq->len[1], 0))
        return;
    uint8_t *p = realloc(e->val, e->vlen + rq->len[1] + 1);
    if (!p) {
        conn_close(c, "out of memory for a value");
        return;
    }
    memcpy(p + e->vlen, rq->str[1], rq->len[1]);
    e->val = p;
    e->vlen += rq->len[1];
    el__table_grew(&srv->table, rq->len[1]);
    wake(srv, e);
}

static void op_delete(struct conn *c, const struct el_req *rq)
{
    struct el_store_server *srv = c->srv;
    struct el_entry *e = present(srv, rq->str[0], rq->len[0]);
    int existed = e != NULL;
    if (e) {
        el__table_clear_value(&srv->table, e);
        if (e->waiters)
            wake(srv, e); /* watchers see the deletion */
        e = el__table_find(&srv->table, rq->str[0], rq->len[0]);
        if (e)
            el__table_maybe_drop(&srv->table, e);
    }
    out_i64(c, existed);
}

struct prefix_scan {
    const uint8_t *prefix;
    size_t n;
    struct el_entry **hits;
    size_t count, cap;
    int oom;
};

static void scan_prefix(struct el_entry *e, void *arg)
{
    struct prefix_scan *s = arg;
    if (!e->present || e->klen < s->n || memcmp(e->key, s->prefix, s->n))
        return;
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        struct el_entry **p = realloc(s->hits, cap * sizeof *p);
        if (!p) {
            s->oom = 1;
            return;
        }
        s->hits = p;
        s->cap = cap;
    }
    s->hits[s->count++] = e;
}

static void op_delete_prefix(struct conn *c, const struct el_req *rq)
{
    struct el_store_server *srv = c->srv;
    struct prefix_scan s = {.prefix = rq->str[0], .n = rq->len[0]};
    el__table_foreach(&srv->table, scan_prefix, &s);
    if (s.oom) {
        free(s.hits);
        conn_close(c, "out of memory");
        return;
    }
    /* Clear all, then wake the watchers.  The hits are pinned meanwhile:
     * waking a connection drops its other waiters, which could otherwise
     * free an entry that is still on the list. */
    for (size_t i = 0; i < s.count; i++) {
        el__table_clear_value(&srv->table, s.hits[i]);
        s.hits[i]->pin++;
    }
    for (size_t i = 0; i < s.count; i++)
        if (s.hits[i]->waiters)
            wake(srv, s.hits[i]);
    for (size_t i = 0; i < s.count; i++) {
        s.hits[i]->pin--;
        el__table_maybe_drop(&srv->table, s.hits[i]);
    }
    free(s.hits);
    out_i64(c, (int64_t)s.count);
}

static void op_watch(struct conn *c, const struct el_req *rq,
                     const uint8_t *frame)
{
    struct el_entry *e = present(c->srv, rq->str[0], rq->len[0]);
    int changed =
        rq->flag ? !e || e->vlen != rq->len[1] ||
                       (e->vlen && memcmp(e->val, rq->str[1], e->vlen) != 0)
                 : e != NULL;
    if (changed) {
        park_end(c);
        out_u8(c, EL_X_OK);
        out_u8(c, e ? 1 : 0);
        out_bytes(c, e ? e->val : NULL, e ? e->vlen : 0);
        return;
    }
    if (park(c, rq, frame, rq->num) == 0)
        add_waiter(c, rq->str[0], rq->len[0]);
}

static int add_close_hook(struct conn *c, const struct el_req *rq)
{
    struct close_hook *h = malloc(sizeof *h + rq->len[0] + rq->len[1]);
    if (!h) {
        conn_close(c, "out of memory");
        return -1;
    }
    h->append = rq->op == EL_OP_X_ON_CLOSE_APPEND;
    h->klen = rq->len[0];
    h->vlen = rq->len[1];
    memcpy(h->data, rq->str[0], h->klen);
    memcpy(h->data + h->klen, rq->str[1], h->vlen);
    h->next = c->hooks;
    c->hooks = h;
    return 0;
}

static void run_pending_hooks(struct el_store_server *srv)
{
    struct close_hook *h = srv->pending_hooks, *next;
    srv->pending_hooks = NULL;
    for (; h; h = next) {
        next = h->next;
        struct el_entry *e =
            el__table_get_or_add(&srv->table, h->data, h->klen);
        const uint8_t *v = h->data + h->klen;
        int ok = 0;
        if (e && h->append && e->present) {
            uint8_t *p = realloc(e->val, e->vlen + h->vlen + 1);
            if (p) {
                memcpy(p + e->vlen, v, h->vlen);
                e->val = p;
                e->vlen += h->vlen;
                el__table_grew(&srv->table, h->vlen); /* hooks pass caps */
                ok = 1;
            }
        } else if (e) {
            ok = el__table_set_value(&srv->table, e, v, h->vlen) == 0;
        }
        if (ok)
            wake(srv, e);
        else if (e)
            el__table_maybe_drop(&srv->table, e);
        free(h);
    }
}

/* ------------------------------------------------------------------------
 * Job secret
 */

/* May c write key (or, with prefix, delete every key starting with it)?
 * Refuses (closing c with a message) a write under EL_AUTH_PREFIX by a
 * connection that did not prove the job secret. */
static int may_write(struct conn *c, const uint8_t *key, uint64_t n, int prefix,
                     const char *what)
{
    static const char p[] = EL_AUTH_PREFIX;
    const size_t pn = sizeof p - 1;
    struct el_store_server *srv = c->srv;
    if (!srv->secret || c->authed)
        return 1;
    int hit =
        n >= pn ? memcmp(key, p, pn) == 0 : prefix && memcmp(key, p, n) == 0;
    if (!hit)
        return 1;
    char text[80], why[256];
    size_t i, m = n < 64 ? n : 64;
    for (i = 0; i < m; i++)
        text[i] = key[i] >= 0x20 && key[i] < 0x7f ? (char)key[i] : '?';
    text[i] = '\0';
    snprintf(why, sizeof why,
             "refused: %s of '%s%s' needs a connection "
             "authenticated with the job secret (only the job's agents "
             "write under %s)",
             what, text, n > m ? "..." : "", p);
    reject(c, why);
    return 0;
}

static void op_auth_challenge(struct conn *c)
{
    struct el_store_server *srv = c->srv;
    if (!srv->secret) {
        out_bytes(c, NULL, 0); /* no secret here: nothing to prove */
        return;
    }
    int rc = el__auth_nonce(c->nonce);
    if (rc) {
        conn_close(c, "no random bytes for an authentication nonce");
        return;
    }
    c->challenged = 1;
    out_bytes(c, c->nonce, EL_AUTH_NONCE);
}

static void op_auth(struct conn *c, const struct el_req *rq)
{
    struct el_store_server *srv = c->srv;
    uint8_t want[EL_AUTH_MAC];
    if (!srv->secret || !c->challenged) {
        reject(c, "X_AUTH without a challenge (X_AUTH_CHALLENGE first)");
        return;
    }
    c->challenged = 0; /* one answer per nonce */
    el__auth_mac(srv->secret, srv->secret_len, EL_AUTH_CLIENT_TAG, c->nonce,
                 EL_AUTH_NONCE, NULL, 0, want);
    if (rq->len[0] != EL_AUTH_MAC ||
        !memeql_sec(rq->str[0], want, EL_AUTH_MAC)) {
        out_u8(c, 1);
        flush(c);
        reject(c, "authentication failed: wrong job secret");
        return;
    }
    c->authed = 1;
    el__auth_mac(srv->secret, srv->secret_len, EL_AUTH_SERVER_TAG, c->nonce,
                 EL_AUTH_NONCE, rq->str[1], rq->len[1], want);
    out_u8(c, 0);
    out_bytes(c, want, EL_AUTH_MAC);
}

/* Serve one request whose bytes start at 'frame'.  Returns 0, or -1 when
 * the connection was closed. */
static int handle(struct conn *c, const struct el_req *rq)
{
    struct el_store_server *srv = c->srv;
    const uint8_t *frame = rq->frame;
    int rc;
    __atomic_add_fetch(&srv->n_requests, 1, __ATOMIC_RELAXED);
    c->served++;
    if (rq->op >= EL_OP_X_GET)
        c->native = 1;
    c->active_ms = uv_now(srv->loop);
    _Static_assert(EL_OP_X_AUTH < 32, "n_ops has a slot per op");
    __atomic_add_fetch(&srv->n_ops[(unsigned)rq->op % 32], 1, __ATOMIC_RELAXED);
    if (c->parked && frame != c->parked) {
        /* A new request while one is parked: the client gave up waiting
         * (a 1.13 client's socket timeout) or cancels (2.x CANCEL_WAIT).
         * Drop the parked one without a reply, so no stray STOP_WAITING
         * ever desynchronizes the connection. */
        park_end(c);
    }
    if (rq->dialect != EL_DIALECT_UNKNOWN)
        c->dialect = rq->dialect;
    switch (rq->op) {
    case EL_OP_NONE:
    case EL_OP_VALIDATE:
        break;
    case EL_OP_SET:
        if (may_write(c, rq->str[0], rq->len[0], 0, "SET"))
            set_key(c, rq->str[0], rq->len[0], rq->str[1], rq->len[1]);
        break;
    case EL_OP_COMPARE_SET:
        if (may_write(c, rq->str[0], rq->len[0], 0, "COMPARE_SET"))
            op_compare_set(c, rq);
        break;
    case EL_OP_GET:
        if ((rc = need_key(c, rq, frame, -1)) == 1) {
            struct el_entry *e = present(srv, rq->str[0], rq->len[0]);
            park_end(c);
            out_bytes(c, e->val, e->vlen);
        }
        break;
    case EL_OP_ADD:
        if (may_write(c, rq->str[0], rq->len[0], 0, "ADD"))
            op_add(c, rq);
        break;
    case EL_OP_CHECK:
        out_u8(c, keys_present(c, rq, 0) == 1 ? EL_CHECK_READY
                                              : EL_CHECK_NOT_READY);
        break;
    case EL_OP_WAIT:
        if (need_keys(c, rq, frame, -1) == 1) {
            park_end(c);
            out_u8(c, EL_WAIT_STOP);
        }
        break;
    case EL_OP_NUM_KEYS:
        out_i64(c, (int64_t)srv->table.npresent);
        break;
    case EL_OP_DELETE:
        if (may_write(c, rq->str[0], rq->len[0], 0, "DELETE_KEY"))
            op_delete(c, rq);
        break;
    case EL_OP_APPEND:
        if (may_write(c, rq->str[0], rq->len[0], 0, "APPEND"))
            op_append(c, rq);
        break;
    case EL_OP_MULTI_GET:
        /* Reply before park_end(): rq may point into the parked copy. */
        if (need_keys(c, rq, frame, -1) == 1) {
            reply_values(c, rq);
            park_end(c);
        }
        break;
    case EL_OP_MULTI_SET: {
        const uint8_t *cur = rq->list;
        for (uint64_t i = 0; i < rq->count && srv->secret && !c->authed; i++) {
            uint64_t kn, vn;
            const uint8_t *k = el__proto_next_str(&cur, &kn);
            el__proto_next_str(&cur, &vn);
            if (!may_write(c, k, kn, 0, "MULTI_SET"))
                break;
        }
        cur = rq->list;
        for (uint64_t i = 0; i < rq->count && !c->closing; i++) {
            uint64_t kn, vn;
            const uint8_t *k = el__proto_next_str(&cur, &kn);
            const uint8_t *v = el__proto_next_str(&cur, &vn);
            set_key(c, k, kn, v, vn);
        }
        break;
    }
    case EL_OP_CANCEL_WAIT:
        out_u8(c, EL_WAIT_CANCELED);
        break;
    case EL_OP_PING:
        out_u32(c, rq->u32);
        break;
    case EL_OP_X_GET:
        if (need_key(c, rq, frame, rq->num) == 1) {
            struct el_entry *e = present(srv, rq->str[0], rq->len[0]);
            park_end(c);
            out_u8(c, EL_X_OK);
            out_bytes(c, e->val, e->vlen);
        }
        break;
    case EL_OP_X_WAIT:
        if (need_keys(c, rq, frame, rq->num) == 1) {
            park_end(c);
            out_u8(c, EL_X_OK);
        }
        break;
    case EL_OP_X_MULTI_GET:
        if (need_keys(c, rq, frame, rq->num) == 1) {
            out_u8(c, EL_X_OK);
            reply_values(c, rq);
            park_end(c);
        }
        break;
    case EL_OP_X_WATCH:
        op_watch(c, rq, frame);
        break;
    case EL_OP_X_DELETE_PREFIX:
        if (may_write(c, rq->str[0], rq->len[0], 1, "X_DELETE_PREFIX"))
            op_delete_prefix(c, rq);
        break;
    case EL_OP_X_ON_CLOSE_SET:
    case EL_OP_X_ON_CLOSE_APPEND:
        if (may_write(c, rq->str[0], rq->len[0], 0,
                      el__proto_op_name(rq->op)) &&
            add_close_hook(c, rq) == 0)
            out_u8(c, EL_X_OK);
        break;
    case EL_OP_X_AUTH_CHALLENGE:
        op_auth_challenge(c);
        break;
    case EL_OP_X_AUTH:
        op_auth(c, rq);
        break;
    case EL_OP_X_IDLE_TIMEOUT:
        if (rq->num > 0 && !c->idle) {
            c->idle = malloc(sizeof *c->idle);
            if (!c->idle) {
                conn_close(c, "out of memory");
                break;
            }
            uv_timer_init(srv->loop, c->idle);
            c->idle->data = c;
            c->handles++;
        }
        c->idle_ms = rq->num > 0 ? (uint64_t)rq->num : 0;
        if (c->idle && c->idle_ms)
            uv_timer_start(c->idle, on_idle_timeout, c->idle_ms, 0);
        else if (c->idle)
            uv_timer_stop(c->idle);
        out_u8(c, EL_X_OK);
        break;
    case EL_OP_X_TRY_GET: {
        struct el_entry *e = present(srv, rq->str[0], rq->len[0]);
        out_u8(c, e ? 1 : 0);
        if (e)
            out_bytes(c, e->val, e->vlen);
        break;
    }
    }
    return c->closing ? -1 : 0;
}

/* ------------------------------------------------------------------------
 * Connections
 */

static void on_conn_close(uv_handle_t *h)
{
    struct conn *c = (struct conn *)h;
    if (--c->handles == 0)
        free(c);
}

static void close_timer(struct conn *c, uv_timer_t **t)
{
    if (*t) {
        uv_close((uv_handle_t *)*t, on_timer_close);
        *t = NULL;
    }
}

static void conn_close(struct conn *c, const char *why)
{
    struct el_store_server *srv = c->srv;
    if (c->closing)
        return;
    if (why) {
        char peer[96];
        peer_name(c, peer, sizeof peer);
        event(srv, "closed connection from %s: %s", peer, why);
    }
    c->closing = 1;
    park_end(c);
    /* Its close hooks run at the end of the current callback, outside any
     * wake() in progress. */
    while (c->hooks) {
        struct close_hook *h = c->hooks;
        c->hooks = h->next;
        h->next = srv->pending_hooks;
        srv->pending_hooks = h;
    }
    free(c->in);
    free(c->out);
    c->in = c->out = NULL;
    c->in_len = c->in_cap = c->out_len = c->out_cap = 0;
    srv->mem_total -= c->mem; /* a write in flight is freed by its callback */
    c->mem = 0;
    stat_set(&srv->buffered, srv->mem_total);
    if (c->paused) {
        c->paused = 0;
        __atomic_sub_fetch(&srv->n_paused, 1, __ATOMIC_RELAXED);
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    peer_release(srv, c);
    __atomic_sub_fetch(&srv->n_conns, 1, __ATOMIC_RELAXED);
    close_timer(c, &c->timer);
    close_timer(c, &c->idle);
    close_timer(c, &c->stall);
    uv_close((uv_handle_t *)&c->tcp, on_conn_close);
}

static void reject(struct conn *c, const char *why)
{
    __atomic_add_fetch(&c->srv->n_rejected, 1, __ATOMIC_RELAXED);
    conn_close(c, why);
}

/* ------------------------------------------------------------------------
 * Stalls and back-pressure
 */

static void on_stall(uv_timer_t *t)
{
    struct conn *c = t->data;
    struct el_store_server *srv = c->srv;
    char why[160];
    if (c->writing && c->tcp.write_queue_size < c->stall_queue) {
        stall_arm(c, 1); /* the client reads, slowly */
        return;
    }
    if (c->writing)
        snprintf(why, sizeof why,
                 "%zu bytes of replies unread for %zu ms "
                 "(stall timeout)",
                 c->inflight + c->out_len, srv->opts.limits.stall_timeout_ms);
    else
        snprintf(why, sizeof why,
                 "a partial request of %zu bytes with "
                 "nothing more for %zu ms (stall timeout)",
                 c->in_len, srv->opts.limits.stall_timeout_ms);
    limit_close(c, why);
    flush_dirty(srv);
}

/* Keep the stall timer running while c waits for its client: for the rest
 * of a partial request, or for it to read its replies.  progress restarts
 * the period. */
static void stall_arm(struct conn *c, int progress)
{
    int waiting = c->writing || (c->in_len > 0 && !c->paused);
    if (c->closing)
        return;
    if (!waiting) {
        if (c->stall)
            uv_timer_stop(c->stall);
        return;
    }
    if (!c->stall) {
        c->stall = malloc(sizeof *c->stall);
        if (!c->stall)
            return; /* no timeout for this one; the caps still hold */
        uv_timer_init(c->srv->loop, c->stall);
        c->stall->data = c;
        c->handles++;
    }
    if (progress || !uv_is_active((uv_handle_t *)c->stall)) {
        c->stall_queue = c->tcp.write_queue_size;
        uv_timer_start(c->stall, on_stall, c->srv->opts.limits.stall_timeout_ms,
                       0);
    }
}

/* Stop reading c until its client reads the replies in flight. */
static void pause_conn(struct conn *c)
{
    if (c->paused)
        return;
    c->paused = 1;
    __atomic_add_fetch(&c->srv->n_paused, 1, __ATOMIC_RELAXED);
    uv_read_stop((uv_stream_t *)&c->tcp);
}

/* Before serving another request: may c go on?  Queued replies past
 * OUT_HIGH go to the kernel first; if it cannot take them, c pauses. */
static int may_serve(struct conn *c)
{
    if (!c->writing && c->out_len >= OUT_HIGH)
        flush(c);
    if (c->closing)
        return 0;
    if (c->writing) {
        pause_conn(c);
        return 0;
    }
    return 1;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = (struct conn *)h;
    struct el_store_server *srv = c->srv;
    size_t max = srv->opts.limits.max_conn_buffer;
    (void)suggested;
    if (c->in_len == 0) {
        *buf = uv_buf_init((char *)srv->rbuf, READ_CHUNK);
        return;
    }
    if (c->in_cap - c->in_len < READ_CHUNK && c->in_cap < max) {
        size_t cap = c->in_cap * 2;
        if (cap < c->in_len + READ_CHUNK)
            cap = c->in_len + READ_CHUNK;
        if (cap > max)
            cap = max; /* on_read refuses a partial request that fills it */
        char why[320];
        if (!total_allows(c, cap - c->in_cap, "a partial request", why,
                          sizeof why)) {
            c->refused = cap - c->in_cap; /* on_read says why */
            *buf = uv_buf_init(NULL, 0);  /* libuv reports UV_ENOBUFS */
            return;
        }
        uint8_t *p = realloc(c->in, cap);
        if (!p) {
            *buf = uv_buf_init(NULL, 0);
            return;
        }
        c->in = p;
        c->in_cap = cap;
        account(c);
    }
    *buf = uv_buf_init((char *)c->in + c->in_len,
                       (unsigned)(c->in_cap - c->in_len));
}

/* Serve every complete request in buf, as long as the client reads its
 * replies; returns the bytes consumed, or -1 when the connection was
 * closed. */
static ssize_t process(struct conn *c, const uint8_t *buf, size_t len)
{
    struct el_store_server *srv = c->srv;
    size_t pos = 0;
    while (pos < len) {
        struct el_req rq;
        char err[160];
        if (!may_serve(c))
            break;
        int rc = el__proto_parse(buf + pos, len - pos, c->dialect,
                                 &srv->opts.limits, &rq, err, sizeof err);
        if (rc == 0)
            break;
        if (rc < 0) {
            reject(c, err);
            return -1;
        }
        if (handle(c, &rq) < 0)
            return -1;
        pos += (size_t)rc;
    }
    return c->closing ? -1 : (ssize_t)pos;
}

/* Keep what process() left of data[0..len) as c's input: copied out of the
 * shared buffer, or moved to the front of c->in. */
static void keep_rest(struct conn *c, const uint8_t *data, size_t len,
                      size_t used, int shared)
{
    struct el_store_server *srv = c->srv;
    size_t rest = len - used;
    if (!c->paused && rest >= srv->opts.limits.max_conn_buffer) {
        char why[160];
        snprintf(why, sizeof why,
                 "a partial request exceeds "
                 "max_conn_buffer (%zu bytes)",
                 srv->opts.limits.max_conn_buffer);
        __atomic_add_fetch(&srv->n_limited, 1, __ATOMIC_RELAXED);
        reject(c, why);
    } else if (shared && rest) {
        char why[320];
        size_t cap = rest + READ_CHUNK;
        if (cap > srv->opts.limits.max_conn_buffer)
            cap = srv->opts.limits.max_conn_buffer;
        if (!total_allows(c, cap, "a partial request", why, sizeof why)) {
            limit_close(c, why);
            return;
        }
        c->in = malloc(cap);
        if (!c->in) {
            conn_close(c, "out of memory");
            return;
        }
        c->in_cap = cap;
        memcpy(c->in, data + used, rest);
        c->in_len = rest;
        account(c);
    } else if (!shared) {
        memmove(c->in, c->in + used, rest);
        c->in_len = rest;
        if (rest == 0) { /* idle connections own no buffer */
            free(c->in);
            c->in = NULL;
            c->in_cap = 0;
            account(c);
        }
    }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* c's client read its replies: serve the requests that waited, then read
 * again unless they paused c once more. */
static void resume(struct conn *c)
{
    struct el_store_server *srv = c->srv;
    c->paused = 0;
    __atomic_sub_fetch(&srv->n_paused, 1, __ATOMIC_RELAXED);
    if (c->in_len) {
        ssize_t used = process(c, c->in, c->in_len);
        if (used < 0)
            return;
        keep_rest(c, c->in, c->in_len, (size_t)used, 0);
        if (c->closing || c->paused)
            return;
    }
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc < 0)
        conn_close(c, uv_strerror(rc));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = (struct conn *)s;
    struct el_store_server *srv = c->srv;
    if (nread < 0) {
        char why[320];
        if (nread == UV_ENOBUFS && c->refused &&
            !total_allows(c, c->refused, "a partial request", why, sizeof why))
            limit_close(c, why);
        else
            conn_close(c, nread == UV_EOF || nread == UV_ECONNRESET
                              ? NULL
                              : uv_strerror((int)nread));
        flush_dirty(srv);
        return;
    }
    if (nread == 0)
        return;
    if (c->idle_ms)
        uv_timer_start(c->idle, on_idle_timeout, c->idle_ms, 0);
    const uint8_t *data;
    size_t len;
    int shared = buf->base == (char *)srv->rbuf;
    if (shared) {
        data = srv->rbuf;
        len = (size_t)nread;
    } else {
        c->in_len += (size_t)nread;
        data = c->in;
        len = c->in_len;
    }
    ssize_t used = process(c, data, len);
    if (used >= 0)
        keep_rest(c, data, len, (size_t)used, shared);
    stall_arm(c, 1);
    flush_dirty(srv);
}

/* Near the descriptor limit: the connection to drop for a new one, or
 * NULL.  Of those quiet for DROP_GRACE_MS: first one that never sent a
 * whole request or is stuck (partial request, unread replies), the oldest;
 * else an idle one, the newest (a long-lived worker's connection is kept);
 * else one waiting in a parked request, the newest.  Never an agent's
 * (close hooks, an idle timeout of its own, authenticated with the job
 * secret, or, on a store without one, using elrun's own operations): its
 * end would read as a death, or fail its rendezvous. */
static struct conn *pick_victim(struct el_store_server *srv,
                                const struct conn *except)
{
    struct conn *stuck = NULL, *idle = NULL, *waiting = NULL;
    uint64_t now = uv_now(srv->loop);
    for (struct conn *c = srv->conns; c; c = c->next) {
        if (c == except || c->closing || c->hooks || c->idle_ms || c->authed ||
            (c->native && !srv->secret))
            continue;
        if (now - (c->served ? c->active_ms : c->accepted_ms) < DROP_GRACE_MS)
            continue;
        if (!c->served || c->in_len || c->writing) {
            if (!stuck || c->accepted_ms < stuck->accepted_ms)
                stuck = c;
        } else if (c->parked) {
            if (!waiting || c->accepted_ms > waiting->accepted_ms)
                waiting = c;
        } else if (!idle || c->accepted_ms > idle->accepted_ms) {
            idle = c;
        }
    }
    return stuck ? stuck : idle ? idle : waiting;
}

/* Descriptors this process has open, or 0 if /proc cannot tell. */
static uint64_t count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    uint64_t n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own */
}

/* c was just accepted: may it stay?  Applies the per-peer limits and the
 * descriptor reserve; closes (and returns -1) when it may not.  The
 * descriptors in use are estimated from the connections, and counted
 * exactly (/proc/self/fd) only when the estimate or c's own descriptor
 * says the reserve is reached. */
static int admit(struct el_store_server *srv, struct conn *c)
{
    const struct el_store_limits *lim = &srv->opts.limits;
    char peer[96], why[256];
    c->peer = peer_of(srv, c);
    if (c->peer) {
        size_t max = c->peer->loopback ? lim->max_conns_per_loopback
                                       : lim->max_conns_per_peer;
        if (max && c->peer->conns >= max) {
            snprintf(why, sizeof why,
                     "refused: %zu connections from this "
                     "%saddress already (%s %zu)",
                     c->peer->conns, c->peer->loopback ? "loopback " : "",
                     c->peer->loopback ? "--max-conns-per-loopback"
                                       : "--max-conns-per-peer",
                     max);
            c->peer = NULL; /* not counted */
            limit_close(c, why);
            return -1;
        }
        c->peer->conns++;
    }
    if (!srv->fd_limit || lim->fd_reserve >= srv->fd_limit)
        return 0;
    uint64_t room = srv->fd_limit - lim->fd_reserve;
    uint64_t now = uv_now(srv->loop), open;
    uv_os_fd_t fd = -1;
    uv_fileno((uv_handle_t *)&c->tcp, &fd);
    if (srv->n_conns + srv->other_fds < room && (uint64_t)fd < room)
        return 0;
    /* Counted at most every 100 ms (a storm at the limit would otherwise
     * read /proc for every client); in between, the estimate holds. */
    if (srv->fd_counted_ms && now - srv->fd_counted_ms < 100) {
        open = srv->n_conns + srv->other_fds;
    } else {
        if (!(open = count_fds()))
            return 0;
        srv->other_fds = open > srv->n_conns ? open - srv->n_conns : 0;
        srv->fd_counted_ms = now;
    }
    peer_name(c, peer, sizeof peer);
    for (; open > room; open--) {
        /* Nothing to drop a moment ago: refuse without another scan. */
        struct conn *v = srv->no_victim_ms && now - srv->no_victim_ms < 100
                             ? NULL
                             : pick_victim(srv, c);
        if (!v) {
            srv->no_victim_ms = now;
            if (srv->refused_logged_ms && now - srv->refused_logged_ms < 1000) {
                srv->refused_quiet++; /* a storm: one line a second */
                limit_close(c, NULL);
                return -1;
            }
            snprintf(why, sizeof why,
                     "refused: %llu descriptors open, "
                     "within the reserve of %zu of this process's limit of "
                     "%llu, and no idle connection to drop; raise the limit "
                     "(ulimit -n) [%llu more refused since the last such "
                     "line]",
                     (unsigned long long)open, lim->fd_reserve,
                     (unsigned long long)srv->fd_limit,
                     (unsigned long long)srv->refused_quiet);
            srv->refused_logged_ms = now;
            srv->refused_quiet = 0;
            limit_close(c, why);
            return -1;
        }
        snprintf(why, sizeof why,
                 "dropped to make room for a new client "
                 "(%s) near the descriptor limit of %llu: this connection "
                 "%s for %llu ms",
                 peer, (unsigned long long)srv->fd_limit,
                 !v->served                ? "had sent no request"
                 : v->in_len || v->writing ? "was stuck mid-request"
                 : v->parked               ? "had waited for a key"
                                           : "had been idle",
                 (unsigned long long)(now - (v->served ? v->active_ms
                                                       : v->accepted_ms)));
        limit_close(v, why);
    }
    srv->no_victim_ms = 0;
    return 0;
}

static void on_connection(uv_stream_t *l, int status)
{
    struct el_store_server *srv = l->data;
    if (status < 0) {
        event(srv, "accept failed: %s", uv_strerror(status));
        return;
    }
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        event(srv, "accept: out of memory");
        return;
    }
    c->srv = srv;
    uv_tcp_init(srv->loop, &c->tcp);
    c->handles = 1;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0) {
        uv_close((uv_handle_t *)&c->tcp, on_conn_close);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->accepted_ms = uv_now(srv->loop);
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    __atomic_add_fetch(&srv->n_conns, 1, __ATOMIC_RELAXED);
    if (admit(srv, c) < 0) {
        flush_dirty(srv); /* a dropped connection's hooks */
        return;
    }
    /* Past the descriptor limit libuv accepts and drops connections without
     * telling us: say so while there is still room. */
    if (!srv->fd_warned && srv->fd_limit &&
        srv->n_conns >= srv->fd_limit / 10 * 9) {
        srv->fd_warned = 1;
        event(srv,
              "%llu connections, near this process's descriptor limit "
              "of %llu: idle clients are dropped for new ones, and new ones "
              "refused when none is idle; raise it (ulimit -n)",
              (unsigned long long)srv->n_conns,
              (unsigned long long)srv->fd_limit);
    }
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc < 0)
        conn_close(c, uv_strerror(rc));
    flush_dirty(srv);
}

/* ------------------------------------------------------------------------
 * Server life cycle
 */

static void srv_free(struct el_store_server *srv)
{
    if (srv->secret) {
        memset(srv->secret, 0, srv->secret_len);
        free(srv->secret);
    }
    el__table_free(&srv->table);
    free(srv->wake);
    free(srv->rbuf);
    free(srv);
}

static void on_srv_handle_close(uv_handle_t *h)
{
    struct el_store_server *srv = h->data;
    if (--srv->handles == 0 && !srv->own_loop)
        srv_free(srv);
}

static int resolve(const char *host, int port, struct sockaddr_storage *ss)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(host, service, &hints, &res) != 0 || !res)
        return EL_EUSAGE;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

int el_store_server_open(struct el_store_server **out, struct uv_loop_s *loop,
                         const struct el_store_server_opts *opts)
{
    struct el_store_server *srv = calloc(1, sizeof *srv);
    struct sockaddr_storage ss;
    int rc;
    if (!srv)
        return -ENOMEM;
    if (opts)
        srv->opts = *opts;
    el__proto_limits_fill(&srv->opts.limits);
    srv->opts.secret = NULL; /* our copy below */
    if (opts && opts->secret) {
        if (opts->secret_len < EL_STORE_SECRET_MIN ||
            opts->secret_len > EL_STORE_SECRET_MAX ||
            !(srv->secret = malloc(opts->secret_len))) {
            free(srv);
            return opts->secret_len < EL_STORE_SECRET_MIN ||
                           opts->secret_len > EL_STORE_SECRET_MAX
                       ? EL_EUSAGE
                       : -ENOMEM;
        }
        memcpy(srv->secret, opts->secret, opts->secret_len);
        srv->secret_len = opts->secret_len;
    }
    if (!srv->opts.host || !*srv->opts.host)
        srv->opts.host = "0.0.0.0";
    srv->loop = loop;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        srv->fd_limit = rl.rlim_cur;
    srv->rbuf = malloc(READ_CHUNK);
    if (!srv->rbuf || el__table_init(&srv->table) < 0) {
        srv_free(srv);
        return -ENOMEM;
    }
    if (srv->opts.port < 0 || srv->opts.port > 65535 ||
        resolve(srv->opts.host, srv->opts.port, &ss) < 0) {
        srv_free(srv);
        return EL_EUSAGE;
    }
    uv_tcp_init(loop, &srv->listener);
    srv->listener.data = srv;
    srv->handles = 1;
    rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener,
                       srv->opts.backlog > 0 ? srv->opts.backlog : 65535,
                       on_connection);
    if (rc < 0) {
        srv->own_loop = 1; /* freed here, not by the close callback */
        uv_close((uv_handle_t *)&srv->listener, on_srv_handle_close);
        uv_run(loop, UV_RUN_NOWAIT);
        srv_free(srv);
        return rc;
    }
    int n = sizeof ss;
    uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &n);
    srv->port =
        ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                       : ((struct sockaddr_in *)&ss)->sin_port);
    *out = srv;
    return 0;
}

int el_store_server_port(const struct el_store_server *srv)
{
    return srv->port;
}

void el_store_server_stats(const struct el_store_server *srv,
                           struct el_store_server_stats *st)
{
    st->connections = __atomic_load_n(&srv->n_conns, __ATOMIC_RELAXED);
    st->keys = __atomic_load_n(&srv->n_keys, __ATOMIC_RELAXED);
    st->requests = __atomic_load_n(&srv->n_requests, __ATOMIC_RELAXED);
    st->rejected = __atomic_load_n(&srv->n_rejected, __ATOMIC_RELAXED);
    st->parked = __atomic_load_n(&srv->n_parked, __ATOMIC_RELAXED);
    st->buffered = __atomic_load_n(&srv->buffered, __ATOMIC_RELAXED);
    st->buffered_peak = __atomic_load_n(&srv->buffered_peak, __ATOMIC_RELAXED);
    st->paused = __atomic_load_n(&srv->n_paused, __ATOMIC_RELAXED);
    st->limited = __atomic_load_n(&srv->n_limited, __ATOMIC_RELAXED);
    st->data = __atomic_load_n(&srv->n_data, __ATOMIC_RELAXED);
}

void el_store_server_ops(const struct el_store_server *srv,
                         void (*fn)(void *arg, const char *op, uint64_t n),
                         void *arg)
{
    for (unsigned op = 1; op < 32; op++) {
        uint64_t n = __atomic_load_n(&srv->n_ops[op], __ATOMIC_RELAXED);
        if (n)
            fn(arg, el__proto_op_name((enum el_op)op), n);
    }
}

/* Close every handle; in embedded mode the last close callback frees. */
static void begin_close(struct el_store_server *srv)
{
    srv->closing = 1;
    while (srv->conns)
        conn_close(srv->conns, NULL);
    struct close_hook *h = srv->pending_hooks, *next;
    for (; h; h = next) {
        next = h->next;
        free(h);
    }
    srv->pending_hooks = NULL;
    uv_close((uv_handle_t *)&srv->listener, on_srv_handle_close);
}

static void on_stop_async(uv_async_t *a)
{
    struct el_store_server *srv = a->data;
    begin_close(srv);
    srv->handles++; /* the async handle itself */
    uv_close((uv_handle_t *)a, on_srv_handle_close);
}

static void *server_thread(void *arg)
{
    struct el_store_server *srv = arg;
    uv_run(srv->loop, UV_RUN_DEFAULT);
    return NULL;
}

int el_store_server_start(struct el_store_server **out,
                          const struct el_store_server_opts *opts)
{
    uv_loop_t *loop = malloc(sizeof *loop);
    struct el_store_server *srv = NULL;
    int rc;
    if (!loop)
        return -ENOMEM;
    rc = uv_loop_init(loop);
    if (rc < 0) {
        free(loop);
        return rc;
    }
    rc = el_store_server_open(&srv, loop, opts);
    if (rc < 0)
        goto fail;
    srv->own_loop = 1;
    uv_async_init(loop, &srv->stop_async, on_stop_async);
    srv->stop_async.data = srv;
    rc = -pthread_create(&srv->thread, NULL, server_thread, srv);
    if (rc < 0) {
        begin_close(srv);
        uv_close((uv_handle_t *)&srv->stop_async, NULL);
        uv_run(loop, UV_RUN_DEFAULT);
        srv_free(srv);
        goto fail;
    }
    *out = srv;
    return 0;
fail:
    uv_loop_close(loop);
    free(loop);
    return rc;
}

void el_store_server_close(struct el_store_server *srv)
{
    if (!srv)
        return;
    if (srv->own_loop) {
        uv_loop_t *loop = srv->loop;
        uv_async_send(&srv->stop_async);
        pthread_join(srv->thread, NULL);
        uv_loop_close(loop);
        free(loop);
        srv_free(srv);
        return;
    }
    begin_close(srv);
}
