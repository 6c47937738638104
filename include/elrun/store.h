/* store.h -- the key-value store through which agents rendezvous and workers
 * coordinate: a server (embeddable, or `elrun store`) and a blocking client.
 *
 * The server speaks PyTorch's c10d TCPStore wire protocol, both the 1.13
 * dialect and the 2.3+ dialect (told apart per connection), plus elrun's own
 * operations under op codes no PyTorch version uses.  docs/PROTOCOL.md has
 * the whole protocol.  Keys are byte strings sent as given: the C client does
 * not add PyTorch's leading '/', so a C program that wants to see a PyTorch
 * worker's key "k" asks for "/k".
 *
 * The server bounds what a client can hold (struct el_store_limits: buffers
 * per connection and in total, with back-pressure; stalls; connections per
 * address and a descriptor reserve), and with a job secret lets only
 * authenticated clients (el_store_auth) write the agents' keys.
 */
#ifndef ELRUN_STORE_H
#define ELRUN_STORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Server
 */

/* Hard limits; a request that breaks one gets its connection closed (the
 * server reports why through on_event) and never affects other clients.
 * A zero field takes the default in brackets.  docs/PROTOCOL.md ("Limits")
 * says how each is enforced. */
struct el_store_limits {
    size_t max_key_len;        /* bytes per key [8 KiB]                      */
    size_t max_value_len;      /* bytes per value [64 MiB]                   */
    size_t max_keys_per_req;   /* keys in one CHECK/WAIT/MULTI_* [128 Ki]    */
    size_t max_conn_buffer;    /* per connection, each of: the partial request
                                  held, and the replies not yet sent (queued
                                  or in flight) [max_value_len + 1 MiB]      */
    size_t max_total_buffer;   /* the same summed over every connection, plus
                                  parked requests; a connection holding more
                                  than 128 KiB that would cross it is closed
                                  [512 MiB]                                  */
    size_t max_total_data;     /* keys + values stored; a write that would
                                  pass it closes its connection (one that
                                  proved the job secret is exempt) [1 GiB]   */
    size_t stall_timeout_ms;   /* a connection that holds a partial request
                                  or unread replies and makes no progress
                                  (no byte received / written) for this long
                                  is closed [60000]                          */
    size_t max_conns_per_peer; /* connections from one non-loopback address
                                  [512]                                      */
    size_t max_conns_per_loopback; /* from one loopback address (every agent
                                  and worker of a one-machine job) [0: no
                                  limit]                                     */
    size_t fd_reserve;             /* descriptors kept free: a client accepted
                                  into them makes the server drop an idle
                                  connection, or is refused [32]             */
};
struct el_store_server_opts {
    const char *host; /* address to bind ["0.0.0.0"]                */
    int port;         /* 0 picks a free port                        */
    int backlog;      /* listen backlog [65535, capped by kernel]   */
    struct el_store_limits limits;
    /* The job secret (copied; NULL: none).  With one, keys under "/elrun/"
     * (every job's rendezvous state) may be written only by connections
     * that proved they know it (el_store_auth); others, such as PyTorch
     * workers, may write every other key and read everything.  A write
     * they may not do closes their connection with a message. */
    const void *secret;
    size_t secret_len; /* EL_STORE_SECRET_MIN .. EL_STORE_SECRET_MAX */
    /* Called on the server's thread for notable events (a client's bad
     * frame, a limit hit) with a one-line message.  May be NULL. */
    void (*on_event)(void *arg, const char *msg);
    void *event_arg;
};

struct el_store_server_stats {
    uint64_t connections;   /* open client connections                    */
    uint64_t keys;          /* keys holding a value                       */
    uint64_t requests;      /* requests served since start                */
    uint64_t rejected;      /* connections closed for a bad request       */
    uint64_t parked;        /* requests waiting for keys (GET, WAIT ...)  */
    uint64_t buffered;      /* bytes buffered by all connections now      */
    uint64_t buffered_peak; /* the most bytes ever buffered at once       */
    uint64_t paused;        /* connections not read from because their
                                  replies are not being read (back-pressure) */
    uint64_t limited;       /* connections closed by a limit: buffers,
                                  data, stall timeout, peer limit,
                                  descriptors                                */
    uint64_t data;          /* bytes of keys and values stored            */
};

struct el_store_server;
struct uv_loop_s;

/* Open a server on an existing libuv loop, which the caller runs.  Returns 0
 * and sets *out, or -errno (-EADDRINUSE ...) / EL_EUSAGE. */
int el_store_server_open(struct el_store_server **out, struct uv_loop_s *loop,
                         const struct el_store_server_opts *opts);

/* Open a server that runs on a thread of its own.  Returns once the server
 * listens (el_store_server_port() is valid) or with an error. */
int el_store_server_start(struct el_store_server **out,
                          const struct el_store_server_opts *opts);

/* The port the server listens on (useful after asking for port 0). */
int el_store_server_port(const struct el_store_server *srv);

/* A snapshot of the counters.  Safe from any thread. */
void el_store_server_stats(const struct el_store_server *srv,
                           struct el_store_server_stats *st);

/* fn(arg, op, n) for each request type served so far ("SET", "GET",
 * "X_WATCH" ...: the wire protocol's names) with its count.  Safe from any
 * thread. */
void el_store_server_ops(const struct el_store_server *srv,
                         void (*fn)(void *arg, const char *op, uint64_t n),
                         void *arg);

/* Stop serving, drop every client and free everything.  For a server from
 * el_store_server_start() this joins its thread.  For one opened on a
 * caller's loop, it closes the handles; memory is released once the caller
 * runs that loop again (uv_run until it returns).  NULL is a no-op. */
void el_store_server_close(struct el_store_server *srv);

/* ---------------------------------------------------------------------------
 * Client
 *
 * One connection to a store server.  Every call blocks; calls that wait for
 * keys take a timeout_ms (negative = forever) and return -ETIMEDOUT when it
 * passes (the connection stays usable).  Other calls are bounded by the I/O
 * timeout given to el_store_connect().  If the server goes away or the
 * connection breaks, calls return -EPIPE / -ECONNRESET / EL_EPROTO and the
 * connection is unusable: close it and connect again.  A client may be used
 * by one thread at a time; use one client per thread.
 * Values returned through void ** are malloc'd (with a NUL byte after the
 * last one, not counted in the length) and owned by the caller (free()).
 */
struct el_store;

/* Connect to host:port, retrying until timeout_ms; io_timeout_ms bounds each
 * later request that does not wait for keys (<= 0: 60 s). */
int el_store_connect(struct el_store **out, const char *host, int port,
                     int timeout_ms, int io_timeout_ms);
void el_store_close(struct el_store *s);

/* Why the last call failed, naming the key or limit; never NULL. */
const char *el_store_errmsg(const struct el_store *s);

/* When fd becomes readable, a call blocked waiting for keys returns
 * -ECANCELED and the connection is closed (reconnect to go on).  -1 clears. */
void el_store_set_cancel_fd(struct el_store *s, int fd);

int el_store_set(struct el_store *s, const char *key, const void *val,
                 size_t len);
/* Wait until key exists, then return its value. */
int el_store_get(struct el_store *s, const char *key, void **val, size_t *len,
                 int timeout_ms);
/* Return the value if key exists, else EL_ENOTFOUND; never waits. */
int el_store_try_get(struct el_store *s, const char *key, void **val,
                     size_t *len);
/* Add delta to the decimal integer stored at key (missing = 0). */
int el_store_add(struct el_store *s, const char *key, int64_t delta,
                 int64_t *result);
/* TCPStore's COMPARE_SET: if key holds 'expected' (or is missing and
 * expected is empty) it is set to 'desired'.  Returns 0 when key now holds
 * 'desired', EL_EMISMATCH otherwise.  If cur is not NULL it receives what the
 * server returned (the current value, or 'expected' for a missing key). */
int el_store_compare_set(struct el_store *s, const char *key,
                         const void *expected, size_t elen, const void *desired,
                         size_t dlen, void **cur, size_t *curlen);
/* *all_exist = 1 if every key exists now, else 0. */
int el_store_check(struct el_store *s, const char *const keys[], size_t n,
                   int *all_exist);
/* Wait until every key exists. */
int el_store_wait(struct el_store *s, const char *const keys[], size_t n,
                  int timeout_ms);
/* *deleted = 1 if the key existed. */
int el_store_delete(struct el_store *s, const char *key, int *deleted);
/* Delete every key that starts with prefix; *count gets how many. */
int el_store_delete_prefix(struct el_store *s, const char *prefix,
                           int64_t *count);
int el_store_num_keys(struct el_store *s, int64_t *n);
int el_store_append(struct el_store *s, const char *key, const void *val,
                    size_t len);
/* Wait until every key exists, then fill vals[i]/lens[i] (caller frees each
 * vals[i]).  On error nothing is allocated. */
int el_store_multi_get(struct el_store *s, const char *const keys[], size_t n,
                       void *vals[], size_t lens[], int timeout_ms);
int el_store_multi_set(struct el_store *s, const char *const keys[],
                       const void *const vals[], const size_t lens[], size_t n);
/* Wait until key's state differs from the given one: present with a value
 * other than 'expected' (expect_present = 1), or present at all
 * (expect_present = 0 means "I saw it missing").  Deleting the key counts as
 * a change when expect_present = 1.  Returns the new state in *present and,
 * if present, *val and *len. */
int el_store_watch(struct el_store *s, const char *key, int expect_present,
                   const void *expected, size_t elen, int *present, void **val,
                   size_t *len, int timeout_ms);
/* Ask the server to set key = val when this connection closes, for whatever
 * reason (clean close, process death, timeout).  Registrations accumulate. */
int el_store_on_close_set(struct el_store *s, const char *key, const void *val,
                          size_t len);
/* The same, appending val to key (creating it if missing): several
 * connections can record their end in one log that watchers read whole. */
int el_store_on_close_append(struct el_store *s, const char *key,
                             const void *val, size_t len);
/* Ask the server to close this connection when it receives nothing from it
 * for idle_ms (<= 0 turns it off).  With el_store_on_close_set, this makes
 * a silent peer (a cut link, a frozen host) look like a dead one: the client
 * must then send something (a ping, or a watch that times out) more often
 * than idle_ms. */
int el_store_set_idle_timeout(struct el_store *s, int idle_ms);
/* Round trip with no effect. */
int el_store_ping(struct el_store *s);

/* Prove to the server that this connection knows the job secret, and check
 * that the server knows it too (challenge and response: HMAC-SHA256 of
 * nonces, the secret never crosses the wire).  Returns 0; -EACCES when the
 * server refused the proof (the secrets differ; the connection is closed),
 * when it has no secret (start it with one: otherwise anyone could write
 * the job's keys) or when its answer is wrong; EL_EPROTO when the server
 * knows no secrets at all (an older elrun). */
int el_store_auth(struct el_store *s, const void *secret, size_t len);

#define EL_STORE_SECRET_MIN 16
#define EL_STORE_SECRET_MAX 4096
/* Read a job secret from the file at path into buf (cap bytes, at least
 * EL_STORE_SECRET_MAX + 1); one trailing newline is dropped.  Refuses a file
 * every user may read or write, a secret shorter than EL_STORE_SECRET_MIN
 * and a longer file than fits.  Returns 0 and *len, or an error with a
 * one-line message in err. */
int el_store_read_secret(const char *path, uint8_t *buf, size_t cap,
                         size_t *len, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
