/* wait.c -- blocking waits built on a read and a watch: "until the key
 * exists", "until the key changes after revision R" and "until anything
 * under a prefix changes after revision R".  These are
 * the store's wait-for-key and watch-until-changed, on etcd (see the table
 * at the end of docs/ETCD.md).  The watch starts at the revision after the
 * read, so a write between the read and the watch is never missed.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "elrun/err.h"
#include "etcd/etcd_int.h"

/* Milliseconds left before deadline (INT64_MAX: forever), as a timeout for
 * el_etcd_watch_next (-1 forever, 0 when past). */
static int left_ms(int64_t deadline)
{
    if (deadline == INT64_MAX)
        return -1;
    int64_t left = deadline - el__etcd_now_ms();
    if (left <= 0)
        return 0;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

/* Follow a watch on key from revision 'from' until an event comes (a PUT,
 * if puts_only); the last such event of a batch wins.  present and kv are
 * set as el_etcd_wait_change says. */
static int follow(struct el_etcd *c, const char *key, int64_t from,
                  int puts_only, int *present, struct el_etcd_kv *kv,
                  int64_t deadline, int timeout_ms)
{
    struct el_etcd_watch *w;
    int rc = el_etcd_watch_open(c, key, 0, from, &w);
    if (rc)
        return rc;
    for (;;) {
        struct el_etcd_event *evs;
        size_t n;
        int t = left_ms(deadline);
        if (t == 0) {
            rc = el__etcd_fail(c, -ETIMEDOUT,
                               "etcd wait %s: nothing within "
                               "%d ms",
                               key, timeout_ms);
            break;
        }
        rc = el_etcd_watch_next(w, &evs, &n, t);
        if (rc == -ETIMEDOUT)
            rc = el__etcd_fail(c, -ETIMEDOUT,
                               "etcd wait %s: nothing within "
                               "%d ms",
                               key, timeout_ms);
        if (rc)
            break;
        ssize_t pick = -1;
        for (size_t i = 0; i < n; i++)
            if (!puts_only || evs[i].type == EL_ETCD_PUT)
                pick = (ssize_t)i;
        if (pick >= 0) {
            *present = evs[pick].type == EL_ETCD_PUT;
            if (*present) {
                *kv = evs[pick].kv;
                memset(&evs[pick].kv, 0, sizeof evs[pick].kv);
            }
            el_etcd_events_free(evs, n);
            break;
        }
        el_etcd_events_free(evs, n);
    }
    el_etcd_watch_close(w);
    return rc;
}

int el_etcd_wait_key(struct el_etcd *c, const char *key, struct el_etcd_kv *kv,
                     int timeout_ms)
{
    int64_t deadline =
        timeout_ms < 0 ? INT64_MAX : el__etcd_now_ms() + timeout_ms;
    int64_t rev = 0;
    int present = 0;
    int rc = el_etcd_get_kv(c, key, kv, &rev);
    if (rc != EL_ENOTFOUND)
        return rc; /* there (0), or an error */
    return follow(c, key, rev + 1, 1, &present, kv, deadline, timeout_ms);
}

int el_etcd_wait_change(struct el_etcd *c, const char *key, int64_t after,
                        int *present, struct el_etcd_kv *kv, int timeout_ms)
{
    int64_t deadline =
        timeout_ms < 0 ? INT64_MAX : el__etcd_now_ms() + timeout_ms;
    memset(kv, 0, sizeof *kv);
    *present = 0;
    if (after < 0)
        return el__etcd_fail(c, EL_EUSAGE, "etcd wait_change: bad revision");
    return follow(c, key, after + 1, 0, present, kv, deadline, timeout_ms);
}

int el_etcd_wait_prefix(struct el_etcd *c, const char *prefix, int64_t after,
                        int timeout_ms)
{
    if (after < 0)
        return el__etcd_fail(c, EL_EUSAGE, "etcd wait_prefix: bad revision");
    struct el_etcd_watch *w;
    int rc = el_etcd_watch_open(c, prefix, 1, after + 1, &w);
    if (rc)
        return rc;
    struct el_etcd_event *evs = NULL;
    size_t n = 0;
    rc = el_etcd_watch_next(w, &evs, &n, timeout_ms);
    el_etcd_events_free(evs, n);
    el_etcd_watch_close(w);
    if (rc == -ETIMEDOUT)
        return el__etcd_fail(c, -ETIMEDOUT,
                             "etcd wait %s: nothing within "
                             "%d ms",
                             prefix, timeout_ms);
    return rc;
}
