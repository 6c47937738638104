/* etcd.h -- a blocking C client for etcd's v3 API, spoken over etcd's JSON
 * gateway (HTTP/1.1 POSTs to /v3/..., keys and values base64 in JSON), with
 * libcurl and jansson.  It is the foundation of the etcd rendezvous backend:
 * key-value reads and writes, compare-and-set transactions, an atomic
 * counter, leases (with a background keep-alive helper) and watches that
 * block until events arrive, over several members with failover, TLS and
 * user/password auth.  docs/ETCD.md describes the gateway calls used, the
 * failover between members, TLS, and measured figures.
 *
 * Conventions.  Every call blocks and returns 0 or a negative code: -errno or
 * an EL_E* code of elrun/err.h; el_etcd_errmsg() then says what happened
 * (which members were tried and how each failed, the key, the lease, curl's
 * TLS message...).  The codes that callers act on:
 *
 *   -EHOSTUNREACH   no member answered within the call's deadline; the
 *                   message lists every member tried and its last failure
 *   -ECONNABORTED   el_etcd_add: a member failed while its transaction was
 *                   in flight: it may or may not have been applied (etcd's
 *                   own client has the same rule); reading back tells
 *   -ETIMEDOUT      a watch or el_etcd_wait_* reached its timeout (the
 *                   client and the watch stay usable)
 *   -ECANCELED      the cancel fd became readable
 *   EL_ENOTFOUND    get: no such key; lease calls: the lease does not exist
 *                   (expired or revoked)
 *   -EACCES         etcd refused: permission denied, no user given while
 *                   auth is on, wrong password
 *   EL_ETLS         TLS failure with every member (bad CA, bad
 *                   certificate, handshake); the message has curl's reason
 *   -ESTALE         watch: the start revision was compacted
 *   EL_EPROTO       etcd answered something this client does not understand
 *   EL_EUSAGE       bad argument or option (bad endpoint list, TLS files
 *                   without https ...)
 *
 * Threads.  A client (struct el_etcd) is used by one thread at a time: use
 * one client per thread.  A watch belongs to the client's thread too but has
 * its own HTTP connection, so it can stay open between other calls.
 *
 * Memory.  Values returned through void ** and the strings of struct
 * el_etcd_kv are malloc'd, owned by the caller, and followed by a NUL byte
 * that the length does not count (so text values can be used as C strings).
 *
 * Keys are C strings (etcd keys may hold any byte, but elrun's do not).
 */
#ifndef ELRUN_ETCD_H
#define ELRUN_ETCD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Client
 */

/* Options of el_etcd_open().  A zero field takes the default in brackets. */
struct el_etcd_opts {
    /* Members, comma separated: "http://h:p,http://h2:p2" or "h:p,h2:p2"
     * (a bare host:port takes 'protocol').  Required. */
    const char *endpoints;
    const char *protocol;   /* scheme of bare host:port: "http"|"https"
                                  ["http"]                                  */
    const char *cacert;     /* PEM CA bundle that signs the members'
                                  certificates [system store]               */
    const char *cert, *key; /* PEM client certificate and key [none]     */
    const char *user;       /* etcd user (auth enabled) [none]; the
                                  client authenticates on first use and
                                  again when its token expires            */
    const char *password;
    int connect_timeout_ms; /* TCP+TLS connect to one member [1000]      */
    int request_timeout_ms; /* one request to one member [2000]; then
                                  the call moves to the next member       */
    int op_timeout_ms;      /* one call, every retry and member included
                                  [15000]; a call that cannot finish in it
                                  returns -EHOSTUNREACH                     */
};

struct el_etcd;

/* Parse the options and prepare a client.  Does not contact any member (the
 * first call does), so it fails only for bad options (EL_EUSAGE, with the
 * reason in *errbuf if errbuf is not NULL), -ENOMEM, or when libcurl, which
 * the first open in a process dlopen()s (libcurl.so.4, or $ELRUN_LIBCURL),
 * cannot be loaded (-ELIBACC) or is not libcurl (-ELIBBAD). */
int el_etcd_open(struct el_etcd **out, const struct el_etcd_opts *opts,
                 char *errbuf, size_t errlen);
/* Close the client.  Close its watches first (a keeper has a client of its
 * own and may outlive this one).  NULL is a no-op. */
void el_etcd_close(struct el_etcd *c);

/* Why the last call failed; never NULL ("" after a success). */
const char *el_etcd_errmsg(const struct el_etcd *c);
/* The member the next call talks to first: the last one that answered, or
 * the one after a member that just failed. */
const char *el_etcd_endpoint(const struct el_etcd *c);
/* How many times a member failed and calls moved on to the next one since
 * open (for tests and logs). */
uint64_t el_etcd_failovers(const struct el_etcd *c);

/* When fd becomes readable, a blocking call (a watch wait, a retry loop
 * across members) returns -ECANCELED.  -1 clears. */
void el_etcd_set_cancel_fd(struct el_etcd *c, int fd);

/* Round trip to a member with no effect (POST /v3/maintenance/status).  If
 * leader is not NULL it gets the member id of the leader the member knows
 * (0: none), if member is not NULL the id of the member that answered. */
int el_etcd_status(struct el_etcd *c, uint64_t *member, uint64_t *leader);

/* ---------------------------------------------------------------------------
 * Keys and values
 */

/* One key as etcd holds it.  key and value are malloc'd (NUL-terminated). */
struct el_etcd_kv {
    char *key;
    size_t key_len;
    void *value;
    size_t value_len;
    int64_t create_revision; /* revision that created the key             */
    int64_t mod_revision;    /* revision of the last write                */
    int64_t version;         /* writes since creation (1 = just created)  */
    int64_t lease;           /* lease the key is attached to, 0 = none    */
};

/* Free the strings of kv (not kv itself) and zero it.  NULL is a no-op. */
void el_etcd_kv_clear(struct el_etcd_kv *kv);
/* Free an array from el_etcd_range_prefix(). */
void el_etcd_kvs_free(struct el_etcd_kv *kvs, size_t n);

/* Set key = val; lease != 0 attaches the key to that lease (EL_ENOTFOUND if
 * it does not exist).  *revision (may be NULL) gets the revision of the
 * write. */
int el_etcd_put(struct el_etcd *c, const char *key, const void *val, size_t len,
                int64_t lease, int64_t *revision);

/* Read key: EL_ENOTFOUND if it does not exist.  val/len/mod_revision may be
 * NULL. */
int el_etcd_get(struct el_etcd *c, const char *key, void **val, size_t *len,
                int64_t *mod_revision);
/* The same, with everything etcd knows of the key (clear with
 * el_etcd_kv_clear).  *revision (may be NULL) is the store's revision at the
 * time of the read, also when the key is missing. */
int el_etcd_get_kv(struct el_etcd *c, const char *key, struct el_etcd_kv *kv,
                   int64_t *revision);

/* Every key that starts with prefix, in key order, with values (free with
 * el_etcd_kvs_free; *kvs is NULL when there is none).  *revision (may be
 * NULL) is the store's revision of this snapshot: watch from revision + 1
 * to see every later change. */
int el_etcd_range_prefix(struct el_etcd *c, const char *prefix,
                         struct el_etcd_kv **kvs, size_t *n, int64_t *revision);

/* How many keys start with prefix (a count-only range: no values cross
 * the wire).  *revision (may be NULL) as el_etcd_range_prefix. */
int el_etcd_count_prefix(struct el_etcd *c, const char *prefix, int64_t *count,
                         int64_t *revision);

/* Delete key; *deleted (may be NULL) gets 1 if it existed, else 0. */
int el_etcd_delete(struct el_etcd *c, const char *key, int64_t *deleted);
/* Delete every key that starts with prefix ("" is refused: EL_EUSAGE);
 * *deleted (may be NULL) gets how many. */
int el_etcd_delete_prefix(struct el_etcd *c, const char *prefix,
                          int64_t *deleted);

/* Discard the history before 'revision' (POST /v3/kv/compaction): watches
 * from older revisions then fail with -ESTALE.  Values are kept. */
int el_etcd_compact(struct el_etcd *c, int64_t revision);

/* ---------------------------------------------------------------------------
 * Compare-and-set (one etcd transaction)
 */

enum el_etcd_if {
    EL_ETCD_IF_ABSENT, /* the key does not exist (create_revision
                                  == 0): create-if-absent                   */
    EL_ETCD_IF_VALUE,  /* the key exists and holds 'expected'       */
    EL_ETCD_IF_MOD,    /* the key's mod_revision == 'mod_revision'
                                  (0 = the key does not exist)              */
};

struct el_etcd_cas {
    enum el_etcd_if cond;
    const void *expected; /* EL_ETCD_IF_VALUE                          */
    size_t expected_len;
    int64_t mod_revision; /* EL_ETCD_IF_MOD                            */
    int remove;           /* 1: delete the key instead of writing      */
    const void *desired;  /* the new value (unless remove)             */
    size_t desired_len;
    int64_t lease; /* attach the new value to a lease, 0 = none */
};

/* If the condition holds, write desired (or delete the key), atomically.
 * Returns 0 whether or not the condition held; *succeeded says which.  If
 * cur is not NULL it gets the key as it is after the call: the new value and
 * revision on success, the value that made the condition fail otherwise
 * (cur->key == NULL: the key does not exist).  Clear cur with
 * el_etcd_kv_clear.
 *
 * A transaction is retried on another member only when it certainly was not
 * applied, or (for writes) when reading back settles it: if the first
 * attempt died in flight and the retry finds the key holding exactly
 * 'desired', that counts as success -- so callers should write values that
 * no one else would write (a node id in them).  Otherwise -ECONNABORTED. */
int el_etcd_cas(struct el_etcd *c, const char *key,
                const struct el_etcd_cas *cas, int *succeeded,
                struct el_etcd_kv *cur);

/* A general transaction: if every comparison holds, run the 'then' ops,
 * else the 'otherwise' ops, atomically (several keys at once: e.g. bump a
 * round and write its expectation together).  *succeeded says which branch
 * ran; *revision (may be NULL) is the store's revision after it.  Ops do not
 * return values (read afterwards).  Retried only when certainly not
 * applied; a member failing with it in flight gives -ECONNABORTED. */
struct el_etcd_cmp {
    const char *key;
    enum el_etcd_if cond; /* as in struct el_etcd_cas                  */
    const void *value;    /* EL_ETCD_IF_VALUE                          */
    size_t value_len;
    int64_t mod_revision; /* EL_ETCD_IF_MOD                            */
};

enum el_etcd_op_type {
    EL_ETCD_OP_PUT,           /* key = value (on lease if not 0)           */
    EL_ETCD_OP_DELETE,        /* key                                       */
    EL_ETCD_OP_DELETE_PREFIX, /* every key starting with key ("" refused)  */
};

struct el_etcd_op {
    enum el_etcd_op_type type;
    const char *key;
    const void *value;
    size_t value_len;
    int64_t lease;
};

int el_etcd_txn(struct el_etcd *c, const struct el_etcd_cmp *cmps, size_t ncmp,
                const struct el_etcd_op *then, size_t nthen,
                const struct el_etcd_op *otherwise, size_t notherwise,
                int *succeeded, int64_t *revision);

/* Add delta to the decimal integer held by key (missing = 0) and return the
 * result in *result (may be NULL): a read and a transaction on the read's
 * mod_revision, repeated while other writers get in between.  EL_EPROTO if
 * the value is not a decimal integer.  -ECONNABORTED if a member failed with
 * the write in flight (it may or may not have been applied). */
int el_etcd_add(struct el_etcd *c, const char *key, int64_t delta,
                int64_t *result);

/* ---------------------------------------------------------------------------
 * Leases
 */

/* Grant a lease of ttl_s seconds; *id gets its id.  id_hint != 0 asks for
 * that id (-EEXIST if a lease with that id exists).  A grant whose member
 * fails in flight is retried elsewhere: the orphan lease, if any, expires. */
int el_etcd_lease_grant(struct el_etcd *c, int64_t ttl_s, int64_t id_hint,
                        int64_t *id);
/* Revoke a lease: its keys are deleted at once.  EL_ENOTFOUND if it is
 * already gone. */
int el_etcd_lease_revoke(struct el_etcd *c, int64_t id);
/* Refresh a lease once; *ttl_s (may be NULL) gets the TTL it now has.
 * EL_ENOTFOUND if the lease expired or was revoked (its keys are gone). */
int el_etcd_lease_keepalive(struct el_etcd *c, int64_t id, int64_t *ttl_s);
/* Seconds the lease has left (without refreshing it); EL_ENOTFOUND if it is
 * gone.  granted_s (may be NULL) gets the TTL it was granted with. */
int el_etcd_lease_ttl(struct el_etcd *c, int64_t id, int64_t *ttl_s,
                      int64_t *granted_s);

/* A thread that keeps one lease alive: it refreshes it every TTL/3 (on a
 * client of its own, made from the same options, with the same failover),
 * and declares the lease lost when etcd says it is gone, or gives it up
 * when no member confirmed a refresh for a TTL plus a grace period (a TTL,
 * at least 3 s): a cut-off client's lease has expired by then, while a
 * leader election longer than the TTL does not lose it (the new leader
 * extends every lease) and etcd answers again within it.  Loss is reported
 * once: the callback if one is given (called on the keeper's thread, with
 * the reason; it must not call el_etcd_keeper_stop()), then the eventfd of
 * el_etcd_keeper_fd() becomes readable, so a thread woken by the fd finds
 * the callback returned.  The thread then ends. */
struct el_etcd_keeper;

typedef void (*el_etcd_lost_fn)(void *arg, int64_t lease, int err,
                                const char *why);

/* Start keeping lease 'id' of ttl_s seconds alive.  'c' only lends its
 * options (it is not used by the thread).  on_lost may be NULL. */
int el_etcd_keeper_start(struct el_etcd_keeper **out, struct el_etcd *c,
                         int64_t id, int64_t ttl_s, el_etcd_lost_fn on_lost,
                         void *arg);
/* An eventfd that becomes readable when the lease is lost. */
int el_etcd_keeper_fd(const struct el_etcd_keeper *k);
/* 0 while the lease is believed alive, else the error that lost it; 'why'
 * (may be NULL) gets the reason (valid until el_etcd_keeper_stop). */
int el_etcd_keeper_status(struct el_etcd_keeper *k, const char **why);
/* Refreshes done so far (for tests). */
uint64_t el_etcd_keeper_refreshes(struct el_etcd_keeper *k);
/* Stop the thread (the lease is left as it is: revoke it with
 * el_etcd_lease_revoke to delete its keys now).  NULL is a no-op. */
void el_etcd_keeper_stop(struct el_etcd_keeper *k);

/* ---------------------------------------------------------------------------
 * Watches
 */

enum el_etcd_event_type { EL_ETCD_PUT = 0, EL_ETCD_DELETE = 1 };

struct el_etcd_event {
    enum el_etcd_event_type type;
    struct el_etcd_kv kv; /* a DELETE has key and mod_revision only    */
};

void el_etcd_events_free(struct el_etcd_event *evs, size_t n);

struct el_etcd_watch;

/* Watch key (prefix = 0) or every key starting with key (prefix = 1) for
 * changes at revisions >= start_revision (0: from now on).  Returns once
 * etcd confirmed the watch, so a write made after this returns is seen.
 * The watch has its own HTTP connection (a streaming POST /v3/watch); if
 * its member fails it is re-created on another member from the revision
 * after the last event delivered, so no event is lost or repeated. */
int el_etcd_watch_open(struct el_etcd *c, const char *key, int prefix,
                       int64_t start_revision, struct el_etcd_watch **out);

/* The same, without the events 'filter' excludes (EL_ETCD_WATCH_NO_PUT:
 * deletes only, e.g. to learn of expired leases without hearing every
 * write; EL_ETCD_WATCH_NO_DELETE: puts only).  The filter holds across
 * failovers (a re-created watch starts after the last event reported and
 * skips the filtered ones again). */
enum { EL_ETCD_WATCH_NO_PUT = 1, EL_ETCD_WATCH_NO_DELETE = 2 };
int el_etcd_watch_open_filtered(struct el_etcd *c, const char *key, int prefix,
                                int64_t start_revision, int filter,
                                struct el_etcd_watch **out);

/* Wait until events arrive, then return all that arrived (in revision
 * order; free with el_etcd_events_free).  timeout_ms < 0 waits forever; at
 * the timeout -ETIMEDOUT with *n = 0 (the watch stays usable).  The client's
 * cancel fd ends the wait with -ECANCELED.  -ESTALE if the revision asked
 * for was compacted (el_etcd_watch_compact_revision tells the oldest one
 * left): read the current state and watch again from there.  Messages go to
 * the client's el_etcd_errmsg(). */
int el_etcd_watch_next(struct el_etcd_watch *w, struct el_etcd_event **evs,
                       size_t *n, int timeout_ms);

/* The next revision this watch will report from (the last event's + 1). */
int64_t el_etcd_watch_revision(const struct el_etcd_watch *w);
/* After -ESTALE: the compaction revision etcd gave. */
int64_t el_etcd_watch_compact_revision(const struct el_etcd_watch *w);
/* Close the watch (and its connection).  NULL is a no-op. */
void el_etcd_watch_close(struct el_etcd_watch *w);

/* ---------------------------------------------------------------------------
 * Waiting (a watch underneath: no polling)
 */

/* Return key once it exists (at once if it does), in *kv (clear with
 * el_etcd_kv_clear).  timeout_ms < 0 waits forever; -ETIMEDOUT,
 * -ECANCELED (cancel fd), or a watch's errors. */
int el_etcd_wait_key(struct el_etcd *c, const char *key, struct el_etcd_kv *kv,
                     int timeout_ms);

/* Wait until key is written or deleted at a revision after 'after' (a
 * mod_revision the caller saw, or a range's revision); then *present says
 * whether it exists, and if so *kv holds it (clear with el_etcd_kv_clear).
 * Returns at once if that already happened (a compacted history gives
 * -ESTALE).  Timeouts and cancel as el_etcd_wait_key. */
int el_etcd_wait_change(struct el_etcd *c, const char *key, int64_t after,
                        int *present, struct el_etcd_kv *kv, int timeout_ms);

/* Wait until some key starting with prefix is written or deleted at a
 * revision after 'after' (a range's revision); returns at once if that
 * already happened.  0, -ETIMEDOUT, -ESTALE (history compacted: read again),
 * -ECANCELED, or a watch's errors. */
int el_etcd_wait_prefix(struct el_etcd *c, const char *prefix, int64_t after,
                        int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
