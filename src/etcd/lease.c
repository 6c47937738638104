/* lease.c -- etcd leases: grant, revoke, one keep-alive, time-to-live, and
 * the keeper: a thread with a client of its own that refreshes one lease
 * every TTL/3 and reports the lease's loss through an eventfd and an
 * optional callback.  Over the gateway a keep-alive is a POST to
 * /v3/lease/keepalive that returns one {"result":...} line and ends, so the
 * keeper needs no stream.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "elrun/err.h"
#include "etcd/etcd_int.h"

static json_t *id_body(int64_t id)
{
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, id);
    return json_pack("{s:s}", "ID", b);
}

static int lease_gone(struct el_etcd *c, int64_t id, const char *what)
{
    return el__etcd_fail(
        c, EL_ENOTFOUND,
        "etcd %s: lease %" PRId64 " not found (expired or revoked)", what, id);
}

int el_etcd_lease_grant(struct el_etcd *c, int64_t ttl_s, int64_t id_hint,
                        int64_t *id)
{
    if (ttl_s <= 0)
        return el__etcd_fail(c, EL_EUSAGE, "etcd lease grant: TTL must be > 0");
    json_t *b = json_pack("{s:I}", "TTL", (json_int_t)ttl_s), *r;
    int ambiguous = 0;
    if (b && id_hint) {
        char s[32];
        snprintf(s, sizeof s, "%" PRId64, id_hint);
        json_object_set_new(b, "ID", json_string(s));
    }
    if (!b)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    int rc = el__etcd_call(c, "/v3/lease/grant", b, EL_ETCD_RETRY_FLAG, &r,
                           &ambiguous);
    if (rc == -EEXIST && ambiguous && id_hint) {
        *id = id_hint; /* our first attempt made it */
        return 0;
    }
    if (rc)
        return rc;
    int64_t got = el__etcd_json_int(r, "ID");
    const char *err = json_string_value(json_object_get(r, "error"));
    json_decref(r);
    if (err && *err)
        return el__etcd_fail(c, EL_EPROTO, "etcd lease grant: %s", err);
    if (got == 0)
        return el__etcd_fail(c, EL_EPROTO, "etcd lease grant: no ID in reply");
    *id = got;
    return 0;
}

int el_etcd_lease_revoke(struct el_etcd *c, int64_t id)
{
    json_t *b = id_body(id), *r;
    if (!b)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    int rc =
        el__etcd_call(c, "/v3/lease/revoke", b, EL_ETCD_RETRY_ALWAYS, &r, NULL);
    if (rc == EL_ENOTFOUND)
        return lease_gone(c, id, "lease revoke");
    if (rc)
        return rc;
    json_decref(r);
    return 0;
}

int el_etcd_lease_keepalive(struct el_etcd *c, int64_t id, int64_t *ttl_s)
{
    json_t *b = id_body(id), *r;
    if (!b)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    int rc = el__etcd_call(c, "/v3/lease/keepalive", b, EL_ETCD_RETRY_ALWAYS,
                           &r, NULL);
    if (rc == EL_ENOTFOUND)
        return lease_gone(c, id, "lease keepalive");
    if (rc)
        return rc;
    json_t *res = json_object_get(r, "result");
    int64_t ttl = el__etcd_json_int(res, "TTL");
    int ok = json_is_object(res);
    json_decref(r);
    if (!ok)
        return el__etcd_fail(c, EL_EPROTO, "etcd lease keepalive: no result");
    if (ttl <= 0) /* an expired lease answers with no TTL */
        return lease_gone(c, id, "lease keepalive");
    if (ttl_s)
        *ttl_s = ttl;
    return 0;
}

int el_etcd_lease_ttl(struct el_etcd *c, int64_t id, int64_t *ttl_s,
                      int64_t *granted_s)
{
    json_t *b = id_body(id), *r;
    if (!b)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    int rc = el__etcd_call(c, "/v3/lease/timetolive", b, EL_ETCD_RETRY_ALWAYS,
                           &r, NULL);
    if (rc == EL_ENOTFOUND)
        return lease_gone(c, id, "lease ttl");
    if (rc)
        return rc;
    int64_t ttl = el__etcd_json_int(r, "TTL");
    int64_t granted = el__etcd_json_int(r, "grantedTTL");
    json_decref(r);
    if (ttl < 0 || (ttl == 0 && granted == 0))
        return lease_gone(c, id, "lease ttl");
    if (ttl_s)
        *ttl_s = ttl;
    if (granted_s)
        *granted_s = granted;
    return 0;
}

/* ---- the keeper thread ---- */

struct el_etcd_keeper {
    struct el_etcd *c; /* the thread's own client                  */
    pthread_t thread;
    int64_t id, ttl_ms;
    int lost_fd; /* eventfd: readable once the lease is lost */
    int stop_fd; /* eventfd: el_etcd_keeper_stop             */
    el_etcd_lost_fn on_lost;
    void *arg;
    atomic_int status;
    atomic_uint_least64_t refreshes;
    char why[1024]; /* written once, before status is set       */
};

static void *keeper_main(void *arg)
{
    struct el_etcd_keeper *k = arg;
    int64_t last_ok = el__etcd_now_ms();
    int64_t period = k->ttl_ms / 3 > 0 ? k->ttl_ms / 3 : 1;
    int64_t wait = 0;
    for (;;) {
        struct pollfd p = {.fd = k->stop_fd, .events = POLLIN};
        if (poll(&p, 1, (int)wait) > 0)
            return NULL;
        int64_t ttl = 0;
        int rc = el_etcd_lease_keepalive(k->c, k->id, &ttl);
        int64_t now = el__etcd_now_ms();
        if (rc == 0) {
            last_ok = now;
            atomic_fetch_add(&k->refreshes, 1);
            wait = period;
            continue;
        }
        if (rc == -ECANCELED) /* stop_fd is the client's cancel fd */
            return NULL;
        /* No answer for a TTL does not prove the lease gone: a new etcd
         * leader extends every lease, so an election longer than the TTL
         * keeps it.  Give the cluster a grace period (a TTL, at least 3 s)
         * to answer; etcd then says whether the lease lives. */
        int64_t grace = k->ttl_ms > 3000 ? k->ttl_ms : 3000;
        if (rc == EL_ENOTFOUND || now - last_ok >= k->ttl_ms + grace) {
            if (rc == EL_ENOTFOUND)
                snprintf(k->why, sizeof k->why, "%s", el_etcd_errmsg(k->c));
            else
                snprintf(k->why, sizeof k->why,
                         "etcd lease %" PRId64 " given up: no refresh "
                         "confirmed for %" PRId64 " ms (TTL %" PRId64 " ms "
                         "+ %" PRId64 " ms grace); last error: %s",
                         k->id, now - last_ok, k->ttl_ms, grace,
                         el_etcd_errmsg(k->c));
            /* status, then the callback, then the fd: whoever wakes on
             * the fd finds both done */
            atomic_store(&k->status, rc);
            if (k->on_lost)
                k->on_lost(k->arg, k->id, rc, k->why);
            uint64_t one = 1;
            if (write(k->lost_fd, &one, sizeof one) < 0) {
                /* an eventfd write only fails on overflow: it is readable */
            }
            return NULL;
        }
        /* A member failed: try again soon, well within the TTL. */
        wait = period / 4 > 0 ? period / 4 : 1;
    }
}

int el_etcd_keeper_start(struct el_etcd_keeper **out, struct el_etcd *c,
                         int64_t id, int64_t ttl_s, el_etcd_lost_fn on_lost,
                         void *arg)
{
    *out = NULL;
    if (ttl_s <= 0 || id == 0)
        return el__etcd_fail(c, EL_EUSAGE, "etcd keeper: bad lease or TTL");
    struct el_etcd_keeper *k = calloc(1, sizeof *k);
    if (!k)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    k->id = id;
    k->ttl_ms = ttl_s * 1000;
    k->on_lost = on_lost;
    k->arg = arg;
    k->lost_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    k->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    /* Each refresh must settle well within the TTL to leave time for the
     * next one: a call gets TTL/3, and one member TTL/6, so a hung member
     * leaves time to try another within the same call. */
    struct el_etcd_opts o = c->opts;
    int third = (int)(k->ttl_ms / 3), sixth = (int)(k->ttl_ms / 6);
    if (o.request_timeout_ms > sixth)
        o.request_timeout_ms = sixth > 0 ? sixth : 1;
    if (o.op_timeout_ms > third)
        o.op_timeout_ms = third > 0 ? third : 1;
    if (o.connect_timeout_ms > sixth)
        o.connect_timeout_ms = sixth > 0 ? sixth : 1;
    char eb[256];
    int rc = k->lost_fd < 0 || k->stop_fd < 0
                 ? -errno
                 : el_etcd_open(&k->c, &o, eb, sizeof eb);
    if (rc == 0) {
        el_etcd_set_cancel_fd(k->c, k->stop_fd);
        rc = -pthread_create(&k->thread, NULL, keeper_main, k);
    }
    if (rc) {
        el_etcd_close(k->c);
        if (k->lost_fd >= 0)
            close(k->lost_fd);
        if (k->stop_fd >= 0)
            close(k->stop_fd);
        free(k);
        return el__etcd_fail(c, rc, "etcd keeper: cannot start: %s",
                             el_strerror(rc));
    }
    *out = k;
    return 0;
}

int el_etcd_keeper_fd(const struct el_etcd_keeper *k)
{
    return k->lost_fd;
}

int el_etcd_keeper_status(struct el_etcd_keeper *k, const char **why)
{
    int st = atomic_load(&k->status);
    if (why)
        *why = st ? k->why : "";
    return st;
}

uint64_t el_etcd_keeper_refreshes(struct el_etcd_keeper *k)
{
    return atomic_load(&k->refreshes);
}

void el_etcd_keeper_stop(struct el_etcd_keeper *k)
{
    if (!k)
        return;
    uint64_t one = 1;
    if (write(k->stop_fd, &one, sizeof one) < 0) {
        /* cannot fail on a fresh eventfd */
    }
    pthread_join(k->thread, NULL);
    el_etcd_close(k->c);
    close(k->lost_fd);
    close(k->stop_fd);
    free(k);
}
