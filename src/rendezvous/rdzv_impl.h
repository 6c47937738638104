/* rdzv_impl.h -- what a rendezvous backend implements (private to
 * src/rendezvous).  Each backend embeds struct el_rdzv as its first member
 * and fills in an ops table; rdzv.c dispatches the public calls to it, and
 * backends.c picks the backend by name (the one list of names).
 */
#ifndef ELRUN_RDZV_IMPL_H
#define ELRUN_RDZV_IMPL_H

#include <pthread.h>
#include <stddef.h>

#include "elrun/net.h"
#include "elrun/rdzv.h"
#include "elrun/store.h"

struct el_rdzv_ops {
    const char *name;
    int (*next)(struct el_rdzv *r, int lws, int cancel_fd,
                struct el_rdzv_info *info);
    int (*num_nodes_waiting)(struct el_rdzv *r, int *n);
    int (*notify_fd)(struct el_rdzv *r);
    void (*ack_notify)(struct el_rdzv *r);
    int (*exit_barrier)(struct el_rdzv *r, int succeeded, int timeout_ms,
                        int cancel_fd);
    int (*set_closed)(struct el_rdzv *r);
    int (*report_failure)(struct el_rdzv *r, const char *why); /* optional */
    /* optional: el_rdzv_members, el_rdzv_is_dead */
    int (*members)(struct el_rdzv *r, int64_t *round,
                   struct el_rdzv_member_info **m, int *n);
    int (*is_dead)(struct el_rdzv *r, const char *id);
    /* optional: el_rdzv_failure (the id of round's charged failure: 1, 0) */
    int (*failure)(struct el_rdzv *r, int64_t round, char *id, size_t cap);
    /* optional: el_rdzv_joiners(); the one op called beside another */
    int (*joiners)(struct el_rdzv *r, char *buf, size_t cap);
    void (*close)(struct el_rdzv *r);
};

struct el_rdzv {
    const struct el_rdzv_ops *ops;
    char errmsg[1280];
};

/* A backend's constructor: the same contract as el_rdzv_open. */
typedef int (*el_rdzv_open_fn)(struct el_rdzv **out,
                               const struct el_rdzv_config *cfg, char *err,
                               size_t errlen);

int el__rdzv_static_open(struct el_rdzv **out, const struct el_rdzv_config *cfg,
                         char *err, size_t errlen);
/* The etcd backend's reading of cfg, shared with the event history
 * (src/events/log.c), which keeps its records under the same prefix:
 * where: the endpoints (cfg->endpoints, else HOST:PORT formatted into ep)
 * and the job's prefix "<etcd_prefix>/<run_id>/"; EL_EUSAGE with a line in
 * err when there is no endpoint or the id does not fit.  copy_opts: the
 * client's strings (the endpoints, protocol, TLS files, user, password)
 * strdup'ed into strs (free each) and pointed at by eo; -ENOMEM. */
struct el_etcd_opts;
int el__rdzv_etcd_where(const struct el_rdzv_config *cfg, char *ep,
                        size_t epcap, const char **endpoints, char *prefix,
                        size_t pcap, char *err, size_t errlen);
int el__rdzv_etcd_copy_opts(const struct el_rdzv_config *cfg,
                            const char *endpoints, char *strs[7],
                            struct el_etcd_opts *eo);
int el__rdzv_etcd_open(struct el_rdzv **out, const struct el_rdzv_config *cfg,
                       char *err, size_t errlen);
/* The read-only status of a job (el_rdzv_status_read) on each backend. */
int el__rdzv_store_status(const struct el_rdzv_config *cfg,
                          struct el_rdzv_status *st, char *err, size_t errlen);
int el__rdzv_etcd_status(const struct el_rdzv_config *cfg,
                         struct el_rdzv_status *st, char *err, size_t errlen);

int el__rdzv_store_open(struct el_rdzv **out, const struct el_rdzv_config *cfg,
                        char *err, size_t errlen);

/* A backend's connection to the rendezvous store (store_link.c): where it
 * is, the job's key prefix, and the main client, connected lazily. */
struct el__rdzv_link {
    char host[EL_HOST_MAX];
    int port;
    char prefix[300]; /* "/elrun/<run_id>/"                        */
    int io_timeout_ms;
    const char *hint;    /* how to fix "cannot reach the store"       */
    struct el_store *cl; /* NULL until connected, or after a failure */
    uint8_t secret[EL_STORE_SECRET_MAX]; /* the job secret (secret_len > 0) */
    size_t secret_len;
    void (*on_event)(void *arg, const char *msg); /* retries are logged    */
    void *event_arg;
    int seen_store; /* a store answered here once: a handshake
                                  that times out later is a stopped or busy
                                  store, worth retrying, not another service */
};

/* Copy cfg's job secret into l (checking its length); 0 or EL_EUSAGE with a
 * message in err.  A hosting backend gives it to its server:
 * so.secret = l->secret_len ? l->secret : NULL, so.secret_len. */
int el__rdzv_link_secret(struct el__rdzv_link *l,
                         const struct el_rdzv_config *cfg, char *err,
                         size_t errlen);

/* prefix + printf(fmt, ...) into buf. */
void el__rdzv_key(const struct el__rdzv_link *l, char *buf, size_t cap,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Connect a client to the link's store, retrying refused connections until
 * deadline (el_now_ms() clock), and prove the job secret if the link has
 * one; -ECANCELED as soon as cancel_fd (>= 0) is readable.  Other failures
 * set r's message and return the error.  While it retries it tells
 * l->on_event (if set) once at the start and then every 10 s. */
int el__rdzv_connect(struct el_rdzv *r, struct el__rdzv_link *l,
                     struct el_store **out, int io_timeout_ms, int cancel_fd,
                     long long deadline);

/* Connect l->cl if it is not connected. */
int el__rdzv_ensure(struct el_rdzv *r, struct el__rdzv_link *l, int cancel_fd,
                    long long deadline);

/* A call on l->cl failed with rc: set r's message naming 'what', and close
 * the connection unless it is still usable (timeout, mismatch, not found).
 * Returns rc. */
int el__rdzv_store_fail(struct el_rdzv *r, struct el__rdzv_link *l, int rc,
                        const char *what);

/* A backend's helper thread that ends when a byte is written to stop[1]
 * (and returns; it does not read the pipe).  start: pthread_create, with
 * r's message naming 'what' on failure; stop (caller's thread): write the
 * byte, join, and read the byte back so that a new thread starts with an
 * empty pipe.  *running says whether the thread runs. */
int el__rdzv_thread_start(struct el_rdzv *r, pthread_t *th, int *running,
                          void *(*fn)(void *), void *arg, const char *what);
void el__rdzv_thread_stop(pthread_t th, int *running, const int stop[2]);

/* printf into r->errmsg; returns rc. */
int el__rdzv_fail(struct el_rdzv *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
