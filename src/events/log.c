/* log.c -- the job's event history in the rendezvous' store or in etcd
 * (include/elrun/events.h): "ev/n" counts the events (an ADD counter: the
 * store's ADD, etcd's read-and-transaction el_etcd_add) and "ev/<slot>"
 * holds one, so the history is bounded to EL_EVENTS_KEEP keys.  Keys live
 * under the job's prefix: /elrun/<run_id>/ in the store (the same prefix as
 * the rendezvous, so a job secret protects them too), <etcd_prefix>/
 * <run_id>/ in etcd.
 *
 * Blocking: every call is one or a few requests of at most io_timeout_ms;
 * a read of many events batches its slots (the store: MULTI_GET, 100 slots
 * a request; etcd: a range per leading digit of the slot).
 * A failed connection is dropped and made again by the next call.  One
 * thread at a time per log.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errfmt.h"
#include "elrun/err.h"
#include "elrun/etcd.h"
#include "elrun/events.h"
#include "elrun/rdzv.h"
#include "elrun/store.h"
#include "rendezvous/rdzv_impl.h"

struct el_events_log {
    int etcd;
    char prefix[600];
    /* the store */
    char host[EL_HOST_MAX];
    int port;
    uint8_t secret[EL_STORE_SECRET_MAX];
    size_t secret_len;
    struct el_store *st;
    /* etcd */
    struct el_etcd_opts eo;
    char *strs[7];
    struct el_etcd *ec;
    int io_ms;
    int cancel_fd;
    char errmsg[1024];
};

#define FAIL(lg, rc, ...) \
    el__errf((lg)->errmsg, sizeof(lg)->errmsg, rc, __VA_ARGS__)

int el_events_log_open(struct el_events_log **out,
                       const struct el_rdzv_config *cfg, char *err,
                       size_t errlen)
{
    const char *b = cfg->backend ? cfg->backend : "";
    int etcd = !strcmp(b, "etcd") || !strcmp(b, "etcd-v2");
    if (!etcd && strcmp(b, "c10d"))
        return el__errf(err, errlen, EL_EUSAGE,
                        "the event history needs the c10d or etcd "
                        "rendezvous (got '%s')",
                        b);
    const char *run_id = cfg->run_id ? cfg->run_id : "none";
    struct el_events_log *lg = calloc(1, sizeof *lg);
    if (!lg)
        return -ENOMEM;
    lg->etcd = etcd;
    lg->cancel_fd = -1;
    lg->io_ms = cfg->io_timeout_ms > 0 ? cfg->io_timeout_ms : 5000;
    if (cfg->secret_len > sizeof lg->secret) {
        free(lg);
        return el__errf(err, errlen, EL_EUSAGE, "the job secret is too long");
    }
    if (cfg->secret_len)
        memcpy(lg->secret, cfg->secret, cfg->secret_len);
    lg->secret_len = cfg->secret_len;
    if (!etcd) {
        if (!cfg->host || !*cfg->host || cfg->port <= 0) {
            free(lg);
            return el__errf(err, errlen, EL_EUSAGE,
                            "the c10d event history needs HOST:PORT");
        }
        snprintf(lg->host, sizeof lg->host, "%s", cfg->host);
        lg->port = cfg->port;
        snprintf(lg->prefix, sizeof lg->prefix, "/elrun/%s/ev/", run_id);
        *out = lg;
        return 0;
    }
    char ep[EL_HOST_MAX + 16], prefix[sizeof lg->prefix - 4]; /* + "ev/" */
    const char *endpoints;
    int rc = el__rdzv_etcd_where(cfg, ep, sizeof ep, &endpoints, prefix,
                                 sizeof prefix, err, errlen);
    snprintf(lg->prefix, sizeof lg->prefix, "%sev/", prefix);
    if (rc == 0 &&
        el__rdzv_etcd_copy_opts(cfg, endpoints, lg->strs, &lg->eo) < 0)
        rc = el__errf(err, errlen, -ENOMEM, "out of memory");
    if (rc) {
        el_events_log_close(lg);
        return rc;
    }
    lg->eo.op_timeout_ms = lg->io_ms;
    lg->eo.request_timeout_ms = lg->io_ms < 2000 ? lg->io_ms : 2000;
    rc = el_etcd_open(&lg->ec, &lg->eo, err, errlen);
    if (rc) {
        el_events_log_close(lg);
        return rc;
    }
    *out = lg;
    return 0;
}

void el_events_log_close(struct el_events_log *lg)
{
    if (!lg)
        return;
    el_store_close(lg->st);
    el_etcd_close(lg->ec);
    for (int i = 0; i < 7; i++)
        free(lg->strs[i]);
    free(lg);
}

const char *el_events_log_errmsg(const struct el_events_log *lg)
{
    return lg->errmsg;
}

void el_events_log_set_cancel_fd(struct el_events_log *lg, int fd)
{
    lg->cancel_fd = fd;
    if (lg->ec)
        el_etcd_set_cancel_fd(lg->ec, fd);
}

static int connect_store(struct el_events_log *lg)
{
    if (lg->st)
        return 0;
    int rc =
        el_store_connect(&lg->st, lg->host, lg->port, lg->io_ms, lg->io_ms);
    if (rc) {
        lg->st = NULL;
        return FAIL(lg, rc, "cannot reach the rendezvous store at %s:%d: %s",
                    lg->host, lg->port, el_strerror(rc));
    }
    if (lg->secret_len &&
        (rc = el_store_auth(lg->st, lg->secret, lg->secret_len))) {
        FAIL(lg, rc, "the store at %s:%d refused the job secret: %s", lg->host,
             lg->port, el_strerror(rc));
        el_store_close(lg->st);
        lg->st = NULL;
        return rc;
    }
    return 0;
}

/* A store call failed: keep the message, drop the connection unless it is
 * still usable. */
static int store_fail(struct el_events_log *lg, int rc, const char *what)
{
    FAIL(lg, rc, "%s at %s:%d: %s", what, lg->host, lg->port,
         lg->st ? el_store_errmsg(lg->st) : el_strerror(rc));
    if (rc != -ETIMEDOUT && rc != EL_ENOTFOUND && lg->st) {
        el_store_close(lg->st);
        lg->st = NULL;
    }
    return rc;
}

static int etcd_fail(struct el_events_log *lg, int rc, const char *what)
{
    return FAIL(lg, rc, "%s: %s", what, el_etcd_errmsg(lg->ec));
}

static void key(const struct el_events_log *lg, char *buf, size_t cap,
                const char *what)
{
    snprintf(buf, cap, "%s%s", lg->prefix, what);
}

int el_events_log_append(struct el_events_log *lg, struct el_event *ev)
{
    char k[700], slot[32];
    int64_t seq = 0;
    int rc;
    key(lg, k, sizeof k, "n");
    if (lg->etcd)
        rc = el_etcd_add(lg->ec, k, 1, &seq);
    else if (!(rc = connect_store(lg)))
        rc = el_store_add(lg->st, k, 1, &seq);
    else
        return rc;
    if (rc)
        return lg->etcd ? etcd_fail(lg, rc, "counting an event")
                        : store_fail(lg, rc, "counting an event");
    ev->seq = seq;
    char *text = el_event_encode(ev);
    if (!text)
        return FAIL(lg, -ENOMEM, "cannot encode the event");
    snprintf(slot, sizeof slot, "%" PRId64, el_events_slot(seq));
    key(lg, k, sizeof k, slot);
    if (lg->etcd)
        rc = el_etcd_put(lg->ec, k, text, strlen(text), 0, NULL);
    else
        rc = el_store_set(lg->st, k, text, strlen(text));
    free(text);
    if (rc)
        return lg->etcd ? etcd_fail(lg, rc, "writing an event")
                        : store_fail(lg, rc, "writing an event");
    return 0;
}

/* The counter, and (etcd) its mod_revision for waits. */
static int last_rev(struct el_events_log *lg, int64_t *last, int64_t *rev)
{
    char k[700];
    void *val = NULL;
    size_t len;
    int rc;
    key(lg, k, sizeof k, "n");
    *rev = 0;
    if (lg->etcd)
        rc = el_etcd_get(lg->ec, k, &val, &len, rev);
    else if (!(rc = connect_store(lg)))
        rc = el_store_try_get(lg->st, k, &val, &len);
    else
        return rc;
    if (rc == EL_ENOTFOUND) {
        *last = 0;
        return 0;
    }
    if (rc)
        return lg->etcd ? etcd_fail(lg, rc, "reading the event count")
                        : store_fail(lg, rc, "reading the event count");
    *last = strtoll(val, NULL, 10);
    free(val);
    return 0;
}

int el_events_log_last(struct el_events_log *lg, int64_t *last)
{
    int64_t rev;
    return last_rev(lg, last, &rev);
}

/* ---- reading: the slots of seqs [from, from + n) in as few requests as
 * the backend allows ---- */

/* Keys per MULTI_GET: about 30 KB of reply for events of 300 bytes, 400 KB
 * for the 4 KB round events of a 256-node job. */
#define STORE_BATCH 100
/* A group of slots with one leading digit ("ev/1": 1, 10-19, 100-199,
 * 1000-1999; at most 1111 keys) wanted this many times or more is read
 * with one range over its prefix; fewer, one GET each. */
#define ETCD_RANGE_MIN 16

static void slot_key(const struct el_events_log *lg, int64_t seq, char *k,
                     size_t cap)
{
    snprintf(k, cap, "%s%" PRId64, lg->prefix, el_events_slot(seq));
}

/* The store: MULTI_GET a batch with no wait; a batch with a missing slot
 * (its writer between its two requests, or an event lost) times out at
 * once and is read again one TRY_GET per slot. */
static int fetch_store(struct el_events_log *lg, int64_t from, int n,
                       void **vals, size_t *lens)
{
    char(*keys)[700] = malloc((size_t)STORE_BATCH * sizeof *keys);
    const char *kp[STORE_BATCH];
    if (!keys)
        return FAIL(lg, -ENOMEM, "out of memory");
    int rc = 0;
    for (int b = 0; b < n && rc == 0; b += STORE_BATCH) {
        int c = n - b < STORE_BATCH ? n - b : STORE_BATCH;
        for (int i = 0; i < c; i++) {
            slot_key(lg, from + b + i, keys[i], sizeof keys[i]);
            kp[i] = keys[i];
        }
        rc = el_store_multi_get(lg->st, kp, (size_t)c, vals + b, lens + b, 0);
        if (rc != -ETIMEDOUT)
            continue;
        rc = 0;
        for (int i = 0; i < c && rc == 0; i++) {
            rc = el_store_try_get(lg->st, kp[i], &vals[b + i], &lens[b + i]);
            if (rc == EL_ENOTFOUND) {
                vals[b + i] = NULL;
                rc = 0;
            }
        }
    }
    free(keys);
    return rc ? store_fail(lg, rc, "reading the events") : 0;
}

/* etcd: per leading digit of the slot, one range over that prefix when
 * the group is wanted ETCD_RANGE_MIN times or more, else one GET a slot. */
static int fetch_etcd(struct el_events_log *lg, int64_t from, int n,
                      void **vals, size_t *lens)
{
    int want[10] = {0};
    char k[700];
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "%" PRId64, el_events_slot(from + i));
        want[k[0] - '0']++;
    }
    size_t pl = strlen(lg->prefix);
    for (int d = 0; d < 10; d++) {
        if (want[d] < ETCD_RANGE_MIN)
            continue;
        struct el_etcd_kv *kvs = NULL;
        size_t nk = 0;
        snprintf(k, sizeof k, "%s%d", lg->prefix, d);
        int rc = el_etcd_range_prefix(lg->ec, k, &kvs, &nk, NULL);
        if (rc)
            return etcd_fail(lg, rc, "reading the events");
        for (size_t j = 0; j < nk; j++) {
            char *end;
            int64_t slot = strtoll(kvs[j].key + pl, &end, 10);
            /* the slot's seq in [from, from + n): n <= EL_EVENTS_KEEP */
            int64_t i =
                (slot - el_events_slot(from) + EL_EVENTS_KEEP) % EL_EVENTS_KEEP;
            if (*end || i >= n || vals[i])
                continue;
            vals[i] = kvs[j].value;
            lens[i] = kvs[j].value_len;
            kvs[j].value = NULL;
        }
        el_etcd_kvs_free(kvs, nk);
    }
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "%" PRId64, el_events_slot(from + i));
        if (want[k[0] - '0'] >= ETCD_RANGE_MIN)
            continue;
        slot_key(lg, from + i, k, sizeof k);
        int rc = el_etcd_get(lg->ec, k, &vals[i], &lens[i], NULL);
        if (rc == EL_ENOTFOUND)
            vals[i] = NULL;
        else if (rc)
            return etcd_fail(lg, rc, "reading an event");
    }
    return 0;
}

int el_events_log_read(struct el_events_log *lg, int64_t after, int max,
                       struct el_event **evs, int *n, int64_t *last)
{
    int64_t top, rev;
    *evs = NULL;
    *n = 0;
    *last = after;
    int rc = last_rev(lg, &top, &rev);
    if (rc)
        return rc;
    if (top <= after)
        return 0;
    int64_t from = after + 1;
    if (top - from + 1 > EL_EVENTS_KEEP)
        from = top - EL_EVENTS_KEEP + 1;
    if (max > 0 && top - from + 1 > max)
        from = top - max + 1;
    int want = (int)(top - from + 1);
    struct el_event *out = calloc((size_t)want, sizeof *out);
    void **vals = calloc((size_t)want, sizeof *vals);
    size_t *lens = calloc((size_t)want, sizeof *lens);
    if (!out || !vals || !lens) {
        free(out);
        free(vals);
        free(lens);
        return FAIL(lg, -ENOMEM, "out of memory");
    }
    rc = lg->etcd ? fetch_etcd(lg, from, want, vals, lens)
                  : fetch_store(lg, from, want, vals, lens);
    int k = 0;
    int64_t seen = from - 1;
    for (int i = 0; rc == 0 && i < want; i++) {
        int64_t s = from + i;
        char err[200];
        /* missing, overwritten already, or not an event: skipped */
        int ok = vals[i] && el_event_decode(vals[i], lens[i], &out[k], err,
                                            sizeof err) == 0;
        if (ok && out[k].seq != s) {
            el_event_clear(&out[k]);
            ok = 0;
        }
        if (ok) {
            k++;
            seen = s;
        } else if (s == top) {
            break; /* its writer is between its two requests: next time */
        } else {
            seen = s; /* a later event is in: this one is lost */
        }
    }
    for (int i = 0; i < want; i++)
        free(vals[i]);
    free(vals);
    free(lens);
    if (rc) {
        el_events_free(out, k);
        return rc;
    }
    *evs = out;
    *n = k;
    *last = seen;
    return 0;
}

int el_events_log_wait(struct el_events_log *lg, int64_t last, int timeout_ms)
{
    int64_t top, rev;
    int rc = last_rev(lg, &top, &rev);
    if (rc)
        return rc;
    if (top > last)
        return 0;
    char k[700];
    key(lg, k, sizeof k, "n");
    if (lg->etcd) {
        int present = 0;
        struct el_etcd_kv kv = {0};
        el_etcd_set_cancel_fd(lg->ec, lg->cancel_fd);
        rc = el_etcd_wait_change(lg->ec, k, rev, &present, &kv, timeout_ms);
        el_etcd_kv_clear(&kv);
        if (rc == -ESTALE)
            rc = 0;
        if (rc && rc != -ETIMEDOUT && rc != -ECANCELED)
            return etcd_fail(lg, rc, "waiting for events");
        return rc;
    }
    char cur[32];
    snprintf(cur, sizeof cur, "%" PRId64, top);
    int present = 0;
    void *val = NULL;
    size_t len;
    el_store_set_cancel_fd(lg->st, lg->cancel_fd);
    rc = el_store_watch(lg->st, k, top > 0, cur, strlen(cur), &present, &val,
                        &len, timeout_ms);
    free(val);
    if (rc == -ECANCELED) {
        el_store_close(lg->st); /* a cancelled wait closes the connection */
        lg->st = NULL;
        return rc;
    }
    if (lg->st)
        el_store_set_cancel_fd(lg->st, -1);
    if (rc && rc != -ETIMEDOUT)
        return store_fail(lg, rc, "waiting for events");
    return rc;
}

/* ---- the nodes' progress records: "ev/p/<member id>" ---- */

int el_events_log_put_progress(struct el_events_log *lg, const char *id,
                               const char *text)
{
    char k[700];
    snprintf(k, sizeof k, "%sp/%s", lg->prefix, id);
    int rc;
    if (lg->etcd) {
        rc = text ? el_etcd_put(lg->ec, k, text, strlen(text), 0, NULL)
                  : el_etcd_delete(lg->ec, k, NULL);
        return rc ? etcd_fail(lg, rc, "writing the node's progress") : 0;
    }
    if ((rc = connect_store(lg)))
        return rc;
    rc = text ? el_store_set(lg->st, k, text, strlen(text))
              : el_store_delete(lg->st, k, NULL);
    return rc ? store_fail(lg, rc, "writing the node's progress") : 0;
}

static char *dup_text(const void *val, size_t len)
{
    char *s = malloc(len + 1);
    if (s) {
        memcpy(s, val, len);
        s[len] = 0;
    }
    return s;
}

/* etcd: one range over ev/p/ (the records of every life, killed agents'
 * included: a few); the store: one GET per id (no range in its protocol,
 * and MULTI_GET waits for missing keys). */
int el_events_log_get_progress(struct el_events_log *lg, const char *const *ids,
                               int n, char **texts)
{
    char k[700];
    int rc;
    for (int i = 0; i < n; i++)
        texts[i] = NULL;
    if (lg->etcd) {
        struct el_etcd_kv *kvs = NULL;
        size_t nk = 0;
        snprintf(k, sizeof k, "%sp/", lg->prefix);
        if ((rc = el_etcd_range_prefix(lg->ec, k, &kvs, &nk, NULL)))
            return etcd_fail(lg, rc, "reading the nodes' progress");
        size_t pl = strlen(k);
        for (size_t j = 0; j < nk; j++)
            for (int i = 0; i < n; i++)
                if (!texts[i] && kvs[j].key_len > pl &&
                    !strcmp(kvs[j].key + pl, ids[i]))
                    texts[i] = dup_text(kvs[j].value, kvs[j].value_len);
        el_etcd_kvs_free(kvs, nk);
        return 0;
    }
    if ((rc = connect_store(lg)))
        return rc;
    for (int i = 0; i < n; i++) {
        void *val = NULL;
        size_t len = 0;
        snprintf(k, sizeof k, "%sp/%s", lg->prefix, ids[i]);
        rc = el_store_try_get(lg->st, k, &val, &len);
        if (rc == EL_ENOTFOUND)
            continue;
        if (rc) {
            for (int j = 0; j < i; j++) {
                free(texts[j]);
                texts[j] = NULL;
            }
            return store_fail(lg, rc, "reading a node's progress");
        }
        texts[i] = dup_text(val, len);
        free(val);
    }
    return 0;
}
