/* etcd_check.c -- drives the etcd client (include/elrun/etcd.h) against a
 * real etcd for tests/e2e/t0600-etcd-client.sh.  One subcommand per case;
 * each prints what it measured and exits 0 only if every check held.
 *
 *   etcd_check basic EPS               every operation against a member
 *   etcd_check race EPS N              two clients race CAS and ADD
 *   etcd_check lease EPS TTL           expiry deletes, keep-alive keeps
 *   etcd_check watch EPS N             watch latency of N puts + deletes
 *   etcd_check failover EPS MS FILE    ops (and a watch) for MS ms while
 *                                      the script kills a member; prints
 *                                      the longest gap between ops.  FILE
 *                                      is written once ops run.  With
 *                                      ETCD_CHECK_NO_ADD, puts only.
 *   etcd_check bench EPS [N]           op latencies; up to N concurrent
 *                                      joiners: a shared ADD vs a key each;
 *                                      a put seen by up to N watchers
 *   etcd_check error EPS [KEY]         a put (a watch if ETCD_CHECK_WATCH
 *                                      is set) that must fail: prints the
 *                                      code and message, exits 0 if it did
 *
 * EPS is an endpoint list.  TLS options come from the environment:
 * ETCD_CACERT, ETCD_CERT, ETCD_KEY, ETCD_PROTOCOL; auth from ETCD_USER and
 * ETCD_PASSWORD; timeouts from
 * ETCD_CONNECT_MS, ETCD_REQUEST_MS, ETCD_OP_MS.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elrun/err.h"
#include "elrun/etcd.h"

static struct el_etcd *cur_client; /* for failure messages */

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, " [errmsg: %s]\n",                              \
                    cur_client ? el_etcd_errmsg(cur_client) : "");          \
            exit(1);                                                        \
        }                                                                   \
    } while (0)

#define OK(call)                                                      \
    do {                                                              \
        int rc_ = (call);                                             \
        CHECK(rc_ == 0, "%s -> %d %s", #call, rc_, el_strerror(rc_)); \
    } while (0)

static const char *eps;
static char prefix[64]; /* every key of this run lives under it */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int env_int(const char *name)
{
    const char *v = getenv(name);
    return v ? atoi(v) : 0;
}

static struct el_etcd *client(void)
{
    struct el_etcd_opts o = {
        .endpoints = eps,
        .protocol = getenv("ETCD_PROTOCOL"),
        .cacert = getenv("ETCD_CACERT"),
        .cert = getenv("ETCD_CERT"),
        .key = getenv("ETCD_KEY"),
        .user = getenv("ETCD_USER"),
        .password = getenv("ETCD_PASSWORD"),
        .connect_timeout_ms = env_int("ETCD_CONNECT_MS"),
        .request_timeout_ms = env_int("ETCD_REQUEST_MS"),
        .op_timeout_ms = env_int("ETCD_OP_MS"),
    };
    struct el_etcd *c;
    char eb[256];
    int rc = el_etcd_open(&c, &o, eb, sizeof eb);
    if (rc) {
        fprintf(stderr, "FAIL el_etcd_open: %d %s\n", rc, eb);
        exit(1);
    }
    return c;
}

static char *k(const char *suffix)
{
    static _Thread_local char buf[8][256];
    static _Thread_local int i;
    char *b = buf[i++ % 8];
    snprintf(b, sizeof buf[0], "%s%s", prefix, suffix);
    return b;
}

/* ---- basic: every operation ---- */

/* Threads of the wait cases: write 'key' 50 ms from now, own client. */
static void *later_put(void *key)
{
    struct el_etcd *c = client();
    usleep(50000);
    if (el_etcd_put(c, key, "later", 5, 0, NULL))
        fprintf(stderr, "later put: %s\n", el_etcd_errmsg(c));
    el_etcd_close(c);
    return NULL;
}

static void *later_delete(void *key)
{
    struct el_etcd *c = client();
    usleep(50000);
    if (el_etcd_delete(c, key, NULL))
        fprintf(stderr, "later delete: %s\n", el_etcd_errmsg(c));
    el_etcd_close(c);
    return NULL;
}

static int cmd_basic(void)
{
    struct el_etcd *c = client();
    cur_client = c;
    void *v;
    size_t len;
    int64_t rev, mod, n;
    struct el_etcd_kv kv;

    uint64_t member, leader;
    OK(el_etcd_status(c, &member, &leader));
    CHECK(member && leader, "status: member %" PRIu64 " leader %" PRIu64,
          member, leader);

    OK(el_etcd_put(c, k("a"), "hello", 5, 0, &rev));
    CHECK(rev > 0, "put revision %" PRId64, rev);
    OK(el_etcd_get(c, k("a"), &v, &len, &mod));
    CHECK(len == 5 && memcmp(v, "hello", 5) == 0 && mod == rev,
          "get: %.*s mod %" PRId64 " rev %" PRId64, (int)len, (char *)v, mod,
          rev);
    CHECK(((char *)v)[5] == '\0', "value NUL-terminated");
    free(v);

    /* binary values and an empty value survive base64 */
    unsigned char bin[256];
    for (int i = 0; i < 256; i++)
        bin[i] = (unsigned char)i;
    OK(el_etcd_put(c, k("bin"), bin, sizeof bin, 0, NULL));
    OK(el_etcd_get(c, k("bin"), &v, &len, NULL));
    CHECK(len == 256 && memcmp(v, bin, 256) == 0, "binary value");
    free(v);
    OK(el_etcd_put(c, k("empty"), "", 0, 0, NULL));
    OK(el_etcd_get_kv(c, k("empty"), &kv, &rev));
    CHECK(kv.value_len == 0 && kv.version == 1 && kv.create_revision > 0,
          "empty value: len %zu version %" PRId64, kv.value_len, kv.version);
    el_etcd_kv_clear(&kv);

    int rc = el_etcd_get(c, k("missing"), &v, &len, NULL);
    CHECK(rc == EL_ENOTFOUND, "get missing -> %d", rc);
    printf("get of a missing key: %s\n", el_etcd_errmsg(c));

    /* range by prefix */
    OK(el_etcd_put(c, k("dir/x"), "1", 1, 0, NULL));
    OK(el_etcd_put(c, k("dir/y"), "2", 1, 0, NULL));
    OK(el_etcd_put(c, k("dir0"), "outside", 7, 0, NULL));
    struct el_etcd_kv *kvs;
    size_t nk;
    OK(el_etcd_range_prefix(c, k("dir/"), &kvs, &nk, &rev));
    CHECK(nk == 2 && strcmp(kvs[0].key, k("dir/x")) == 0 &&
              strcmp(kvs[1].key, k("dir/y")) == 0 &&
              strcmp(kvs[1].value, "2") == 0,
          "range: %zu keys", nk);
    el_etcd_kvs_free(kvs, nk);
    OK(el_etcd_range_prefix(c, k("nothing/"), &kvs, &nk, NULL));
    CHECK(nk == 0 && kvs == NULL, "empty range");

    /* delete, delete prefix */
    OK(el_etcd_delete(c, k("a"), &n));
    CHECK(n == 1, "delete: %" PRId64, n);
    OK(el_etcd_delete(c, k("a"), &n));
    CHECK(n == 0, "delete again: %" PRId64, n);
    OK(el_etcd_delete_prefix(c, k("dir/"), &n));
    CHECK(n == 2, "delete prefix: %" PRId64, n);
    OK(el_etcd_get(c, k("dir0"), &v, &len, NULL));
    free(v);
    CHECK(el_etcd_delete_prefix(c, "", &n) == EL_EUSAGE, "empty prefix");

    /* compare-and-set: create-if-absent */
    struct el_etcd_cas cas = {
        .cond = EL_ETCD_IF_ABSENT, .desired = "v1", .desired_len = 2};
    int succ;
    OK(el_etcd_cas(c, k("state"), &cas, &succ, &kv));
    CHECK(succ && kv.key && strcmp(kv.value, "v1") == 0, "create");
    int64_t created_rev = kv.mod_revision;
    el_etcd_kv_clear(&kv);
    cas.desired = "v9";
    OK(el_etcd_cas(c, k("state"), &cas, &succ, &kv));
    CHECK(!succ && strcmp(kv.value, "v1") == 0, "second create fails, sees v1");
    el_etcd_kv_clear(&kv);
    /* swap if value equals */
    cas = (struct el_etcd_cas){.cond = EL_ETCD_IF_VALUE,
                               .expected = "v1",
                               .expected_len = 2,
                               .desired = "v2",
                               .desired_len = 2};
    OK(el_etcd_cas(c, k("state"), &cas, &succ, &kv));
    CHECK(succ && strcmp(kv.value, "v2") == 0 && kv.version == 2,
          "swap on value");
    int64_t v2_rev = kv.mod_revision;
    el_etcd_kv_clear(&kv);
    OK(el_etcd_cas(c, k("state"), &cas, &succ, &kv));
    CHECK(!succ && strcmp(kv.value, "v2") == 0, "stale swap on value fails");
    el_etcd_kv_clear(&kv);
    cas.expected = "x";
    cas.expected_len = 1;
    OK(el_etcd_cas(c, k("nokey"), &cas, &succ, &kv));
    CHECK(!succ && kv.key == NULL, "value compare on a missing key fails");
    /* swap if mod_revision equals */
    cas = (struct el_etcd_cas){.cond = EL_ETCD_IF_MOD,
                               .mod_revision = created_rev,
                               .desired = "v3",
                               .desired_len = 2};
    OK(el_etcd_cas(c, k("state"), &cas, &succ, NULL));
    CHECK(!succ, "swap on an old mod_revision fails");
    cas.mod_revision = v2_rev;
    OK(el_etcd_cas(c, k("state"), &cas, &succ, &kv));
    CHECK(succ && strcmp(kv.value, "v3") == 0, "swap on mod_revision");
    el_etcd_kv_clear(&kv);
    /* delete if value equals */
    cas = (struct el_etcd_cas){.cond = EL_ETCD_IF_VALUE,
                               .expected = "v3",
                               .expected_len = 2,
                               .remove = 1};
    OK(el_etcd_cas(c, k("state"), &cas, &succ, &kv));
    CHECK(succ && kv.key == NULL, "delete if value");

    /* a general transaction over several keys */
    struct el_etcd_cmp cm[2] = {
        {.key = k("t/round"), .cond = EL_ETCD_IF_ABSENT}};
    struct el_etcd_op th[3] = {
        {.type = EL_ETCD_OP_PUT,
         .key = k("t/round"),
         .value = "1",
         .value_len = 1},
        {.type = EL_ETCD_OP_PUT,
         .key = k("t/expect"),
         .value = "3",
         .value_len = 1},
        {.type = EL_ETCD_OP_PUT,
         .key = k("t/dir/a"),
         .value = "a",
         .value_len = 1},
    };
    struct el_etcd_op el[1] = {
        {.type = EL_ETCD_OP_PUT,
         .key = k("t/lost"),
         .value = "x",
         .value_len = 1},
    };
    int64_t trev;
    OK(el_etcd_txn(c, cm, 1, th, 3, NULL, 0, &succ, &trev));
    CHECK(succ && trev > 0, "txn creates");
    OK(el_etcd_get_kv(c, k("t/expect"), &kv, NULL));
    CHECK(strcmp(kv.value, "3") == 0 && kv.mod_revision == trev,
          "all writes of a txn at one revision");
    int64_t expect_mod = kv.mod_revision;
    el_etcd_kv_clear(&kv);
    OK(el_etcd_txn(c, cm, 1, th, 3, el, 1, &succ, NULL));
    CHECK(!succ, "txn compare fails the second time");
    OK(el_etcd_get(c, k("t/lost"), &v, &len, NULL));
    free(v);
    cm[0] = (struct el_etcd_cmp){.key = k("t/round"),
                                 .cond = EL_ETCD_IF_VALUE,
                                 .value = "1",
                                 .value_len = 1};
    cm[1] = (struct el_etcd_cmp){.key = k("t/expect"),
                                 .cond = EL_ETCD_IF_MOD,
                                 .mod_revision = expect_mod};
    struct el_etcd_op th2[3] = {
        {.type = EL_ETCD_OP_PUT,
         .key = k("t/round"),
         .value = "2",
         .value_len = 1},
        {.type = EL_ETCD_OP_DELETE, .key = k("t/expect")},
        {.type = EL_ETCD_OP_DELETE_PREFIX, .key = k("t/dir/")},
    };
    OK(el_etcd_txn(c, cm, 2, th2, 3, NULL, 0, &succ, NULL));
    CHECK(succ, "txn on value and mod_revision");
    CHECK(el_etcd_get(c, k("t/expect"), &v, &len, NULL) == EL_ENOTFOUND &&
              el_etcd_get(c, k("t/dir/a"), &v, &len, NULL) == EL_ENOTFOUND,
          "txn deletes");
    OK(el_etcd_get(c, k("t/round"), &v, &len, NULL));
    CHECK(strcmp(v, "2") == 0, "txn put");
    free(v);
    OK(el_etcd_txn(c, cm, 2, th2, 3, NULL, 0, &succ, NULL));
    CHECK(!succ, "stale txn fails");
    th2[0].key = "";
    CHECK(el_etcd_txn(c, cm, 2, th2, 1, NULL, 0, &succ, NULL) == EL_EUSAGE,
          "txn with an empty key");

    /* atomic add */
    int64_t res;
    OK(el_etcd_add(c, k("ctr"), 5, &res));
    CHECK(res == 5, "add from missing: %" PRId64, res);
    OK(el_etcd_add(c, k("ctr"), -2, &res));
    CHECK(res == 3, "add: %" PRId64, res);
    OK(el_etcd_put(c, k("notnum"), "abc", 3, 0, NULL));
    CHECK(el_etcd_add(c, k("notnum"), 1, &res) == EL_EPROTO, "add on text");

    /* leases */
    int64_t lease, ttl, granted;
    OK(el_etcd_lease_grant(c, 30, 0, &lease));
    OK(el_etcd_put(c, k("leased"), "x", 1, lease, NULL));
    OK(el_etcd_get_kv(c, k("leased"), &kv, NULL));
    CHECK(kv.lease == lease, "key carries its lease");
    el_etcd_kv_clear(&kv);
    OK(el_etcd_lease_ttl(c, lease, &ttl, &granted));
    CHECK(granted == 30 && ttl > 0 && ttl <= 30, "ttl %" PRId64, ttl);
    OK(el_etcd_lease_keepalive(c, lease, &ttl));
    CHECK(ttl == 30, "keepalive ttl %" PRId64, ttl);
    cas = (struct el_etcd_cas){.cond = EL_ETCD_IF_ABSENT,
                               .desired = "y",
                               .desired_len = 1,
                               .lease = lease};
    OK(el_etcd_cas(c, k("leased2"), &cas, &succ, &kv));
    CHECK(succ && kv.lease == lease, "cas with a lease");
    el_etcd_kv_clear(&kv);
    OK(el_etcd_lease_revoke(c, lease));
    rc = el_etcd_get(c, k("leased"), &v, &len, NULL);
    CHECK(rc == EL_ENOTFOUND, "revoke deletes the leased key: %d", rc);
    rc = el_etcd_get(c, k("leased2"), &v, &len, NULL);
    CHECK(rc == EL_ENOTFOUND, "revoke deletes the cas'd key: %d", rc);
    rc = el_etcd_lease_keepalive(c, lease, &ttl);
    CHECK(rc == EL_ENOTFOUND, "keepalive of a revoked lease: %d", rc);
    printf("keepalive of a revoked lease: %s\n", el_etcd_errmsg(c));
    rc = el_etcd_lease_revoke(c, lease);
    CHECK(rc == EL_ENOTFOUND, "revoke twice: %d", rc);
    rc = el_etcd_lease_ttl(c, lease, &ttl, NULL);
    CHECK(rc == EL_ENOTFOUND, "ttl of a revoked lease: %d", rc);
    rc = el_etcd_put(c, k("leased"), "x", 1, lease, NULL);
    CHECK(rc == EL_ENOTFOUND, "put on a revoked lease: %d", rc);
    printf("put on a revoked lease: %s\n", el_etcd_errmsg(c));
    OK(el_etcd_lease_grant(c, 10, 4242, &lease));
    CHECK(lease == 4242, "chosen lease id");
    rc = el_etcd_lease_grant(c, 10, 4242, &lease);
    CHECK(rc == -EEXIST, "same lease id twice: %d", rc);
    OK(el_etcd_lease_revoke(c, 4242));

    /* watch: a key, from a revision (history), and a prefix */
    OK(el_etcd_put(c, k("w/one"), "1", 1, 0, &rev));
    struct el_etcd_watch *w;
    struct el_etcd_event *evs;
    size_t ne;
    OK(el_etcd_watch_open(c, k("w/one"), 0, rev, &w));
    OK(el_etcd_watch_next(w, &evs, &ne, 5000));
    CHECK(ne == 1 && evs[0].type == EL_ETCD_PUT &&
              evs[0].kv.mod_revision == rev &&
              strcmp(evs[0].kv.value, "1") == 0,
          "history event");
    el_etcd_events_free(evs, ne);
    rc = el_etcd_watch_next(w, &evs, &ne, 100);
    CHECK(rc == -ETIMEDOUT && ne == 0, "nothing more: %d", rc);
    el_etcd_watch_close(w);

    OK(el_etcd_watch_open(c, k("w/"), 1, 0, &w));
    OK(el_etcd_put(c, k("w/two"), "2", 1, 0, NULL));
    OK(el_etcd_put(c, k("wx"), "outside", 7, 0, NULL));
    OK(el_etcd_delete(c, k("w/one"), NULL));
    size_t got = 0;
    int saw_put = 0, saw_del = 0;
    while (got < 2) {
        OK(el_etcd_watch_next(w, &evs, &ne, 5000));
        for (size_t i = 0; i < ne; i++) {
            if (evs[i].type == EL_ETCD_PUT)
                saw_put += strcmp(evs[i].kv.key, k("w/two")) == 0;
            else
                saw_del += strcmp(evs[i].kv.key, k("w/one")) == 0;
        }
        got += ne;
        el_etcd_events_free(evs, ne);
    }
    CHECK(got == 2 && saw_put == 1 && saw_del == 1, "prefix watch events");
    el_etcd_watch_close(w);

    /* cancel fd ends a watch wait */
    int pfd[2];
    CHECK(pipe(pfd) == 0, "pipe");
    OK(el_etcd_watch_open(c, k("w/"), 1, 0, &w));
    el_etcd_set_cancel_fd(c, pfd[0]);
    CHECK(write(pfd[1], "x", 1) == 1, "write");
    double t0 = now_ms();
    rc = el_etcd_watch_next(w, &evs, &ne, 10000);
    CHECK(rc == -ECANCELED && now_ms() - t0 < 1000, "cancel: %d", rc);
    el_etcd_set_cancel_fd(c, -1);
    el_etcd_watch_close(w);

    /* waits: for a key to appear, for a key to change */
    struct el_etcd_kv wk;
    OK(el_etcd_put(c, k("wait/here"), "1", 1, 0, NULL));
    OK(el_etcd_wait_key(c, k("wait/here"), &wk, 1000));
    CHECK(strcmp(wk.value, "1") == 0, "wait for an existing key");
    el_etcd_kv_clear(&wk);
    rc = el_etcd_wait_key(c, k("wait/later"), &wk, 100);
    CHECK(rc == -ETIMEDOUT, "wait for a missing key times out: %d", rc);
    pthread_t wt;
    pthread_create(&wt, NULL, later_put, k("wait/later"));
    t0 = now_ms();
    OK(el_etcd_wait_key(c, k("wait/later"), &wk, 5000));
    double waited = now_ms() - t0;
    pthread_join(wt, NULL);
    CHECK(strcmp(wk.value, "later") == 0, "wait_key: the value written");
    int64_t seen_rev = wk.mod_revision;
    el_etcd_kv_clear(&wk);
    int present;
    rc = el_etcd_wait_change(c, k("wait/later"), seen_rev, &present, &wk, 100);
    CHECK(rc == -ETIMEDOUT, "no change after what was seen: %d", rc);
    pthread_create(&wt, NULL, later_delete, k("wait/later"));
    OK(el_etcd_wait_change(c, k("wait/later"), seen_rev, &present, &wk, 5000));
    pthread_join(wt, NULL);
    CHECK(!present && wk.key == NULL, "wait_change sees the delete");
    OK(el_etcd_put(c, k("wait/later"), "again", 5, 0, NULL));
    /* No other change follows, so a wait that missed this one would time
     * out: the bound only has to outlast a slow machine, not be short. */
    OK(el_etcd_wait_change(c, k("wait/later"), seen_rev, &present, &wk, 5000));
    CHECK(present && strcmp(wk.value, "again") == 0,
          "a change already made is returned at once");
    el_etcd_kv_clear(&wk);
    printf("wait_key returned %.1f ms after a put made 50 ms in\n", waited);

    /* compaction: a watch from a compacted revision says so */
    OK(el_etcd_put(c, k("compact"), "a", 1, 0, &rev));
    OK(el_etcd_put(c, k("compact"), "b", 1, 0, NULL));
    int64_t rev2;
    OK(el_etcd_put(c, k("compact"), "c", 1, 0, &rev2));
    OK(el_etcd_compact(c, rev2));
    OK(el_etcd_watch_open(c, k("compact"), 0, rev, &w));
    rc = el_etcd_watch_next(w, &evs, &ne, 5000);
    CHECK(rc == -ESTALE && el_etcd_watch_compact_revision(w) == rev2,
          "compacted watch: %d, compact rev %" PRId64, rc,
          el_etcd_watch_compact_revision(w));
    printf("watch from a compacted revision: %s\n", el_etcd_errmsg(c));
    el_etcd_watch_close(w);
    rc = el_etcd_get(c, k("compact"), &v, &len, NULL);
    CHECK(rc == 0 && strcmp(v, "c") == 0, "compaction keeps the value");
    free(v);
    printf("last revision %" PRId64 "\n", rev2);

    /* count-only ranges; watches that skip puts or deletes */
    int64_t cnt = -1;
    OK(el_etcd_count_prefix(c, k("cnt/"), &cnt, NULL));
    CHECK(cnt == 0, "count of an empty prefix: %" PRId64, cnt);
    struct el_etcd_watch *dels, *puts;
    OK(el_etcd_watch_open_filtered(c, k("cnt/"), 1, 0, EL_ETCD_WATCH_NO_PUT,
                                   &dels));
    OK(el_etcd_watch_open_filtered(c, k("cnt/"), 1, 0, EL_ETCD_WATCH_NO_DELETE,
                                   &puts));
    for (int i = 0; i < 3; i++) {
        char key[16];
        snprintf(key, sizeof key, "cnt/%d", i);
        OK(el_etcd_put(c, k(key), "x", 1, 0, NULL));
    }
    OK(el_etcd_put(c, k("cntx"), "not under cnt/", 14, 0, NULL));
    OK(el_etcd_count_prefix(c, k("cnt/"), &cnt, NULL));
    CHECK(cnt == 3, "count after 3 puts: %" PRId64, cnt);
    OK(el_etcd_delete(c, k("cnt/1"), NULL));
    OK(el_etcd_count_prefix(c, k("cnt/"), &cnt, NULL));
    CHECK(cnt == 2, "count after a delete: %" PRId64, cnt);
    OK(el_etcd_watch_next(dels, &evs, &ne, 5000));
    CHECK(ne == 1 && evs[0].type == EL_ETCD_DELETE &&
              strcmp(evs[0].kv.key, k("cnt/1")) == 0,
          "a deletes-only watch sees the delete alone (%zu events)", ne);
    el_etcd_events_free(evs, ne);
    size_t seen = 0;
    while (seen < 3) {
        OK(el_etcd_watch_next(puts, &evs, &ne, 5000));
        for (size_t i = 0; i < ne; i++)
            CHECK(evs[i].type == EL_ETCD_PUT, "a puts-only watch: a delete");
        seen += ne;
        el_etcd_events_free(evs, ne);
    }
    CHECK(seen == 3, "a puts-only watch sees the 3 puts (%zu)", seen);
    rc = el_etcd_watch_next(puts, &evs, &ne, 200);
    CHECK(rc == -ETIMEDOUT && ne == 0, "and not the delete: %d, %zu", rc, ne);
    el_etcd_watch_close(dels);
    el_etcd_watch_close(puts);
    /* waiting for a prefix to change after a revision */
    int64_t crev;
    OK(el_etcd_count_prefix(c, k("cnt/"), &cnt, &crev));
    rc = el_etcd_wait_prefix(c, k("cnt/"), crev, 200);
    CHECK(rc == -ETIMEDOUT, "wait_prefix with no change: %d", rc);
    OK(el_etcd_put(c, k("cnt/9"), "y", 1, 0, NULL));
    OK(el_etcd_wait_prefix(c, k("cnt/"), crev, 5000)); /* already changed */
    OK(el_etcd_delete_prefix(c, prefix, &n));
    el_etcd_close(c);
    printf("basic: all operations ok\n");
    return 0;
}

/* ---- race: two clients ---- */

struct racer {
    int id, n;
    int created; /* won the create-if-absent race              */
    int swaps;   /* swaps won                                  */
    int64_t last_add;
    int64_t *results; /* what each ADD returned                     */
};
static atomic_int race_go;

static void *race_main(void *arg)
{
    struct racer *r = arg;
    struct el_etcd *c = client();
    char mine[32];
    snprintf(mine, sizeof mine, "owner-%d", r->id);
    while (!atomic_load(&race_go))
        ;
    struct el_etcd_cas cas = {.cond = EL_ETCD_IF_ABSENT,
                              .desired = mine,
                              .desired_len = strlen(mine)};
    int succ;
    struct el_etcd_kv kv;
    if (el_etcd_cas(c, k("race/owner"), &cas, &succ, &kv) == 0) {
        r->created = succ;
        if (!succ && (!kv.key || strcmp(kv.value, mine) == 0))
            r->created = -1; /* the loser must see the winner's value */
        el_etcd_kv_clear(&kv);
    } else {
        r->created = -2;
    }
    for (int i = 0; i < r->n; i++) {
        int64_t res;
        if (el_etcd_add(c, k("race/ctr"), 1, &res)) {
            fprintf(stderr, "add failed: %s\n", el_etcd_errmsg(c));
            r->last_add = -1;
            break;
        }
        r->last_add = res;
        r->results[i] = res;
        /* swap on value: read, then swap from what was read */
        void *v;
        size_t len;
        int64_t mod;
        if (el_etcd_get(c, k("race/tok"), &v, &len, &mod))
            continue;
        char next[32];
        snprintf(next, sizeof next, "%lld", atoll(v) + 1);
        struct el_etcd_cas sw = {.cond = EL_ETCD_IF_MOD,
                                 .mod_revision = mod,
                                 .desired = next,
                                 .desired_len = strlen(next)};
        if (el_etcd_cas(c, k("race/tok"), &sw, &succ, NULL) == 0 && succ)
            r->swaps++;
        free(v);
    }
    el_etcd_close(c);
    return NULL;
}

static int cmd_race(int n)
{
    struct el_etcd *c = client();
    cur_client = c;
    OK(el_etcd_put(c, k("race/tok"), "0", 1, 0, NULL));
    struct racer r[2] = {{.id = 1, .n = n}, {.id = 2, .n = n}};
    char *seen = calloc((size_t)(2 * n + 1), 1);
    r[0].results = calloc((size_t)n, sizeof(int64_t));
    r[1].results = calloc((size_t)n, sizeof(int64_t));
    pthread_t t[2];
    double t0 = now_ms();
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, race_main, &r[i]);
    atomic_store(&race_go, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    double dt = now_ms() - t0;
    CHECK(r[0].created >= 0 && r[1].created >= 0, "cas errors: %d %d",
          r[0].created, r[1].created);
    CHECK(r[0].created + r[1].created == 1, "exactly one creator: %d %d",
          r[0].created, r[1].created);
    /* every ADD got a distinct result: together they are 1..2n */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < n; j++) {
            int64_t x = r[i].results[j];
            CHECK(x >= 1 && x <= 2 * n && !seen[x],
                  "client %d add %d returned %" PRId64 "%s", i + 1, j, x,
                  x >= 1 && x <= 2 * n ? " twice" : "");
            seen[x] = 1;
        }
    void *v;
    size_t len;
    OK(el_etcd_get(c, k("race/ctr"), &v, &len, NULL));
    CHECK(atoll(v) == 2 * n, "counter %s, want %d", (char *)v, 2 * n);
    free(v);
    OK(el_etcd_get(c, k("race/tok"), &v, &len, NULL));
    CHECK(atoll(v) == r[0].swaps + r[1].swaps, "token %s, swaps won %d + %d",
          (char *)v, r[0].swaps, r[1].swaps);
    printf("race: client %d created the key, the other saw its value; %d "
           "ADDs each gave distinct results, counter %d; mod_revision swaps "
           "won %d + %d (token %s); %.0f ms\n",
           r[0].created ? 1 : 2, n, 2 * n, r[0].swaps, r[1].swaps, (char *)v,
           dt);
    free(v);
    free(seen);
    free(r[0].results);
    free(r[1].results);
    OK(el_etcd_delete_prefix(c, prefix, NULL));
    el_etcd_close(c);
    return 0;
}

/* ---- lease: expiry and keep-alive ---- */

static atomic_int lost_calls;
static void on_lost(void *arg, int64_t lease, int err, const char *why)
{
    atomic_fetch_add(&lost_calls, 1);
}

static int cmd_lease(int ttl_s)
{
    struct el_etcd *c = client();
    cur_client = c;
    int64_t l1, l2, rev;
    void *v;
    size_t len;

    /* 1. no keep-alive: the key goes when the lease expires */
    OK(el_etcd_lease_grant(c, ttl_s, 0, &l1));
    OK(el_etcd_put(c, k("lease/dies"), "x", 1, l1, &rev));
    double t0 = now_ms();
    struct el_etcd_watch *w;
    OK(el_etcd_watch_open(c, k("lease/dies"), 0, rev + 1, &w));
    struct el_etcd_event *evs;
    size_t ne;
    OK(el_etcd_watch_next(w, &evs, &ne, ttl_s * 1000 + 10000));
    double gone = now_ms() - t0;
    CHECK(ne == 1 && evs[0].type == EL_ETCD_DELETE, "expiry delete event");
    el_etcd_events_free(evs, ne);
    el_etcd_watch_close(w);
    int rc = el_etcd_get(c, k("lease/dies"), &v, &len, NULL);
    CHECK(rc == EL_ENOTFOUND, "expired key is gone: %d", rc);
    CHECK(gone >= ttl_s * 1000 - 50, "expired too early: %.0f ms", gone);
    printf("lease: TTL %d s, the unrefreshed key went after %.0f ms\n", ttl_s,
           gone);

    /* 2. the keeper keeps a key alive for 3 TTLs */
    OK(el_etcd_lease_grant(c, ttl_s, 0, &l2));
    OK(el_etcd_put(c, k("lease/lives"), "y", 1, l2, NULL));
    struct el_etcd_keeper *kp;
    OK(el_etcd_keeper_start(&kp, c, l2, ttl_s, on_lost, NULL));
    struct pollfd p = {.fd = el_etcd_keeper_fd(kp), .events = POLLIN};
    CHECK(poll(&p, 1, ttl_s * 3000) == 0, "keeper reported a loss: %s",
          (el_etcd_keeper_status(kp, NULL), ""));
    OK(el_etcd_get(c, k("lease/lives"), &v, &len, NULL));
    free(v);
    uint64_t refreshes = el_etcd_keeper_refreshes(kp);
    CHECK(refreshes >= 7, "refreshes in 3 TTLs: %" PRIu64, refreshes);
    printf("lease: keeper kept the key for %d s with %" PRIu64 " refreshes\n",
           3 * ttl_s, refreshes);

    /* 3. the lease revoked behind the keeper's back: it reports the loss */
    OK(el_etcd_lease_revoke(c, l2));
    t0 = now_ms();
    CHECK(poll(&p, 1, ttl_s * 2000 + 2000) == 1, "keeper did not see the loss");
    double seen = now_ms() - t0;
    const char *why;
    rc = el_etcd_keeper_status(kp, &why);
    CHECK(rc == EL_ENOTFOUND && atomic_load(&lost_calls) == 1,
          "keeper status %d, callbacks %d", rc, atomic_load(&lost_calls));
    printf("lease: keeper reported the revoked lease after %.0f ms: %s\n", seen,
           why);
    el_etcd_keeper_stop(kp);
    el_etcd_close(c);
    return 0;
}

/* ---- watch latency ---- */

struct watcher {
    struct el_etcd_watch *w;
    struct el_etcd *c;
    int want;
    double *lat; /* per event: receive time - write time in value     */
    int got, dels;
};

static void *watch_main(void *arg)
{
    struct watcher *wt = arg;
    while (wt->got + wt->dels < wt->want) {
        struct el_etcd_event *evs;
        size_t ne;
        if (el_etcd_watch_next(wt->w, &evs, &ne, 10000))
            break;
        double t = now_ms();
        for (size_t i = 0; i < ne; i++) {
            if (evs[i].type == EL_ETCD_PUT)
                wt->lat[wt->got++] = t - atof(evs[i].kv.value);
            else
                wt->dels++;
        }
        el_etcd_events_free(evs, ne);
    }
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmd_watch(int n)
{
    struct el_etcd *c = client();
    cur_client = c;
    struct watcher wt = {.c = client(), .want = 2 * n};
    wt.lat = calloc((size_t)n, sizeof *wt.lat);
    OK(el_etcd_watch_open(wt.c, k("wl/"), 1, 0, &wt.w));
    pthread_t t;
    pthread_create(&t, NULL, watch_main, &wt);
    for (int i = 0; i < n; i++) {
        char key[64], val[64];
        snprintf(key, sizeof key, "wl/%d", i);
        snprintf(val, sizeof val, "%.6f", now_ms());
        OK(el_etcd_put(c, k(key), val, strlen(val), 0, NULL));
        /* spaced writes: each event is measured alone */
        usleep(2000);
    }
    for (int i = 0; i < n; i++) {
        char key[64];
        snprintf(key, sizeof key, "wl/%d", i);
        OK(el_etcd_delete(c, k(key), NULL));
    }
    pthread_join(t, NULL);
    CHECK(wt.got == n && wt.dels == n, "watch saw %d puts %d deletes of %d",
          wt.got, wt.dels, n);
    qsort(wt.lat, (size_t)n, sizeof *wt.lat, cmp_d);
    printf("watch: %d puts and %d deletes pushed; put->event latency "
           "median %.2f ms, p99 %.2f ms, max %.2f ms\n",
           n, n, wt.lat[n / 2], wt.lat[(n * 99) / 100], wt.lat[n - 1]);
    el_etcd_watch_close(wt.w);
    el_etcd_close(wt.c);
    free(wt.lat);
    el_etcd_close(c);
    return 0;
}

/* ---- failover ---- */

struct fo_watch {
    struct el_etcd *c;
    struct el_etcd_watch *w;
    atomic_int stop;
    int64_t seen;     /* puts seen                                  */
    int64_t last_idx; /* value of the last put seen                 */
    int out_of_order;
    int dups; /* a put applied twice (retried in flight)    */
    int err;
};

static void *fo_watch_main(void *arg)
{
    struct fo_watch *f = arg;
    while (!atomic_load(&f->stop)) {
        struct el_etcd_event *evs;
        size_t ne;
        int rc = el_etcd_watch_next(f->w, &evs, &ne, 200);
        if (rc == -ETIMEDOUT)
            continue;
        if (rc) {
            f->err = rc;
            fprintf(stderr, "watch failed: %s\n", el_etcd_errmsg(f->c));
            break;
        }
        for (size_t i = 0; i < ne; i++) {
            if (evs[i].type != EL_ETCD_PUT)
                continue;
            int64_t idx = atoll(evs[i].kv.value);
            /* A put retried after its member failed in flight may have
             * been applied twice: the same value again is fine. */
            if (idx == f->last_idx)
                f->dups++;
            else if (idx != f->last_idx + 1)
                f->out_of_order++;
            f->last_idx = idx;
            f->seen++;
        }
        el_etcd_events_free(evs, ne);
    }
    return NULL;
}

static int cmd_failover(int ms, const char *file)
{
    struct el_etcd *c = client();
    cur_client = c;
    struct fo_watch fw = {.c = client()};
    OK(el_etcd_watch_open(fw.c, k("fo/log"), 0, 0, &fw.w));
    pthread_t t;
    pthread_create(&t, NULL, fo_watch_main, &fw);
    /* a leased key kept alive through the failover */
    int64_t lease;
    struct el_etcd_keeper *kp;
    OK(el_etcd_lease_grant(c, 5, 0, &lease));
    OK(el_etcd_put(c, k("fo/alive"), "1", 1, lease, NULL));
    OK(el_etcd_keeper_start(&kp, c, lease, 5, NULL, NULL));
    printf("failover: starting on %s\n", el_etcd_endpoint(c));
    fflush(stdout);
    double t0 = now_ms(), last = t0, max_gap = 0, gap_at = 0;
    int64_t ops = 0, puts = 0, adds = 0, ambiguous = 0, errors = 0;
    int no_add = getenv("ETCD_CHECK_NO_ADD") != NULL; /* puts only */
    int written = 0;
    while (now_ms() - t0 < ms) {
        char val[32];
        snprintf(val, sizeof val, "%" PRId64, puts + 1);
        int rc = el_etcd_put(c, k("fo/log"), val, strlen(val), 0, NULL);
        if (rc == 0)
            puts++;
        int64_t res;
        int rc2 = rc       ? rc
                  : no_add ? (res = 0, 0)
                           : el_etcd_add(c, k("fo/ctr"), 1, &res);
        if (rc == 0 && rc2 == 0)
            adds++;
        else if (rc2 == -ECONNABORTED)
            ambiguous++;
        if (rc || (rc2 && rc2 != -ECONNABORTED)) {
            errors++;
            fprintf(stderr, "op failed at %.0f ms: %s\n", now_ms() - t0,
                    el_etcd_errmsg(c));
            continue;
        }
        double now = now_ms();
        if (now - last > max_gap) {
            max_gap = now - last;
            gap_at = last - t0;
        }
        last = now;
        ops++;
        if (!written && ops == 20) {
            FILE *f = fopen(file, "w");
            if (f) {
                fprintf(f, "%s\n", el_etcd_endpoint(c));
                fclose(f);
            }
            written = 1;
        }
    }
    /* let the watch catch up with the last put */
    double wait_until = now_ms() + 10000;
    while (fw.last_idx < puts && now_ms() < wait_until && !fw.err)
        usleep(10000);
    atomic_store(&fw.stop, 1);
    pthread_join(t, NULL);
    void *v;
    size_t len;
    int64_t ctr = 0;
    if (!no_add) {
        OK(el_etcd_get(c, k("fo/ctr"), &v, &len, NULL));
        ctr = atoll(v);
        free(v);
    }
    printf("failover: %" PRId64 " rounds (put + add) in %d ms, %" PRId64
           " errors, %" PRId64 " adds in doubt; longest gap %.0f ms (at "
           "%.0f ms); client failovers %" PRIu64
           ", now on %s; watch saw %" PRId64 " of %" PRId64
           " puts in order (%d out of order, %d "
           "applied twice), watch failovers %" PRIu64 "; counter %" PRId64 "\n",
           ops, ms, errors, ambiguous, max_gap, gap_at, el_etcd_failovers(c),
           el_etcd_endpoint(c), fw.seen - fw.dups, puts, fw.out_of_order,
           fw.dups, el_etcd_failovers(fw.c), ctr);
    const char *why;
    int kst = el_etcd_keeper_status(kp, &why);
    uint64_t refreshes = el_etcd_keeper_refreshes(kp);
    el_etcd_keeper_stop(kp);
    printf("failover: lease keeper %s after %" PRIu64 " refreshes\n",
           kst ? why : "kept its lease", refreshes);
    CHECK(kst == 0, "lease lost during the failover: %s", why);
    OK(el_etcd_get(c, k("fo/alive"), &v, &len, NULL));
    free(v);
    OK(el_etcd_lease_revoke(c, lease));
    CHECK(errors == 0, "%" PRId64 " operations failed", errors);
    CHECK(written, "fewer than 20 rounds");
    CHECK(fw.err == 0 && fw.seen - fw.dups == puts && fw.out_of_order == 0,
          "watch lost events");
    CHECK(no_add || (ctr >= adds && ctr <= adds + ambiguous),
          "counter %" PRId64 " outside [%" PRId64 ", %" PRId64 "]", ctr, adds,
          adds + ambiguous);
    OK(el_etcd_delete_prefix(c, prefix, NULL));
    el_etcd_watch_close(fw.w);
    el_etcd_close(fw.c);
    el_etcd_close(c);
    return 0;
}

/* ---- bench: latencies, and N joiners through ADD vs per-node keys ---- */

struct joiner {
    int id, use_add;
    pthread_barrier_t *go;
    double done_ms;
    int rc;
};

static void *join_main(void *arg)
{
    struct joiner *j = arg;
    struct el_etcd *c = client();
    char key[64];
    el_etcd_status(c, NULL, NULL); /* connected before the start */
    pthread_barrier_wait(j->go);
    if (j->use_add) {
        int64_t seq;
        j->rc = el_etcd_add(c, k("bench/joined"), 1, &seq);
    } else {
        snprintf(key, sizeof key, "bench/node/%d", j->id);
        j->rc = el_etcd_put(c, k(key), "x", 1, 0, NULL);
    }
    j->done_ms = now_ms();
    el_etcd_close(c);
    return NULL;
}

static double join_round(int n, int use_add)
{
    struct joiner *js = calloc((size_t)n, sizeof *js);
    pthread_t *ts = calloc((size_t)n, sizeof *ts);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        js[i] = (struct joiner){.id = i, .use_add = use_add, .go = &go};
        pthread_create(&ts[i], NULL, join_main, &js[i]);
    }
    pthread_barrier_wait(&go);
    double t0 = now_ms(), last = t0;
    for (int i = 0; i < n; i++) {
        pthread_join(ts[i], NULL);
        CHECK(js[i].rc == 0, "joiner %d: %d", i, js[i].rc);
        if (js[i].done_ms > last)
            last = js[i].done_ms;
    }
    pthread_barrier_destroy(&go);
    free(js);
    free(ts);
    return last - t0;
}

struct fan {
    pthread_barrier_t *ready;
    double seen_ms;
    int rc;
};

static void *fan_main(void *arg)
{
    struct fan *f = arg;
    struct el_etcd *c = client();
    struct el_etcd_watch *w;
    f->rc = el_etcd_watch_open(c, k("bench/fan/"), 1, 0, &w);
    pthread_barrier_wait(f->ready);
    if (f->rc == 0) {
        struct el_etcd_event *evs;
        size_t n;
        f->rc = el_etcd_watch_next(w, &evs, &n, 10000);
        f->seen_ms = now_ms();
        if (f->rc == 0)
            el_etcd_events_free(evs, n);
        el_etcd_watch_close(w);
    }
    el_etcd_close(c);
    return NULL;
}

/* m watchers of one prefix; one put; ms until the last one saw it. */
static double fan_out(struct el_etcd *c, int m, double *median)
{
    struct fan *fs = calloc((size_t)m, sizeof *fs);
    pthread_t *ts = calloc((size_t)m, sizeof *ts);
    double *d = calloc((size_t)m, sizeof *d);
    pthread_barrier_t ready;
    pthread_barrier_init(&ready, NULL, (unsigned)m + 1);
    for (int i = 0; i < m; i++) {
        fs[i].ready = &ready;
        pthread_create(&ts[i], NULL, fan_main, &fs[i]);
    }
    pthread_barrier_wait(&ready); /* every watch confirmed by etcd */
    double t0 = now_ms();
    OK(el_etcd_put(c, k("bench/fan/x"), "1", 1, 0, NULL));
    for (int i = 0; i < m; i++) {
        pthread_join(ts[i], NULL);
        CHECK(fs[i].rc == 0, "watcher %d: %d", i, fs[i].rc);
        d[i] = fs[i].seen_ms - t0;
    }
    qsort(d, (size_t)m, sizeof *d, cmp_d);
    *median = d[m / 2];
    double last = d[m - 1];
    pthread_barrier_destroy(&ready);
    free(fs);
    free(ts);
    free(d);
    return last;
}

static int cmd_bench(int n)
{
    struct el_etcd *c = client();
    cur_client = c;
    double lat[4][200];
    const char *names[4] = {"put", "get", "cas", "add"};
    for (int i = 0; i < 200; i++) {
        double t = now_ms();
        OK(el_etcd_put(c, k("bench/k"), "v", 1, 0, NULL));
        lat[0][i] = now_ms() - t;
        void *v;
        size_t len;
        t = now_ms();
        OK(el_etcd_get(c, k("bench/k"), &v, &len, NULL));
        lat[1][i] = now_ms() - t;
        free(v);
        struct el_etcd_cas cas = {.cond = EL_ETCD_IF_VALUE,
                                  .expected = "v",
                                  .expected_len = 1,
                                  .desired = "v",
                                  .desired_len = 1};
        int ok;
        t = now_ms();
        OK(el_etcd_cas(c, k("bench/k"), &cas, &ok, NULL));
        lat[2][i] = now_ms() - t;
        t = now_ms();
        OK(el_etcd_add(c, k("bench/ctr"), 1, NULL));
        lat[3][i] = now_ms() - t;
    }
    for (int o = 0; o < 4; o++) {
        qsort(lat[o], 200, sizeof(double), cmp_d);
        printf("bench: %s median %.2f ms, p99 %.2f ms\n", names[o], lat[o][100],
               lat[o][198]);
    }
    for (int m = 16; m <= n; m *= 4) {
        OK(el_etcd_delete_prefix(c, k("bench/"), NULL));
        double add = join_round(m, 1);
        void *v;
        size_t len;
        OK(el_etcd_get(c, k("bench/joined"), &v, &len, NULL));
        CHECK(atoi(v) == m, "counter %s after %d joiners", (char *)v, m);
        free(v);
        double put = join_round(m, 0);
        printf("bench: %d concurrent joiners: one shared ADD counter %.0f ms, "
               "a key each (order by create_revision) %.0f ms\n",
               m, add, put);
    }
    for (int m = 16; m <= n; m *= 4) {
        double med, last = fan_out(c, m, &med);
        printf("bench: one put seen by %d watchers (each its own stream): "
               "median %.1f ms, last %.1f ms\n",
               m, med, last);
    }
    OK(el_etcd_delete_prefix(c, prefix, NULL));
    el_etcd_close(c);
    return 0;
}

/* ---- an error that must happen ---- */

static int cmd_error(const char *key)
{
    struct el_etcd *c = client();
    double t0 = now_ms();
    int rc;
    if (getenv("ETCD_CHECK_WATCH")) { /* a watch instead of a put */
        struct el_etcd_watch *w;
        struct el_etcd_event *evs;
        size_t n;
        rc = el_etcd_watch_open(c, key, 1, 0, &w);
        if (rc == 0) {
            rc = el_etcd_watch_next(w, &evs, &n, 2000);
            el_etcd_events_free(evs, n);
            el_etcd_watch_close(w);
        }
    } else {
        rc = el_etcd_put(c, key, "1", 1, 0, NULL);
    }
    printf("error: rc=%d (%s) after %.0f ms: %s\n", rc, el_strerror(rc),
           now_ms() - t0, el_etcd_errmsg(c));
    el_etcd_close(c);
    return rc ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: etcd_check basic|race|lease|watch|failover|"
                        "error ENDPOINTS [ARGS]\n");
        return 2;
    }
    eps = argv[2];
    snprintf(prefix, sizeof prefix, "/elrun-test/%d-%ld/", (int)getpid(),
             (long)time(NULL));
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "basic"))
        return cmd_basic();
    if (!strcmp(cmd, "race"))
        return cmd_race(argc > 3 ? atoi(argv[3]) : 100);
    if (!strcmp(cmd, "lease"))
        return cmd_lease(argc > 3 ? atoi(argv[3]) : 1);
    if (!strcmp(cmd, "watch"))
        return cmd_watch(argc > 3 ? atoi(argv[3]) : 200);
    if (!strcmp(cmd, "failover") && argc > 4)
        return cmd_failover(atoi(argv[3]), argv[4]);
    if (!strcmp(cmd, "bench"))
        return cmd_bench(argc > 3 ? atoi(argv[3]) : 64);
    if (!strcmp(cmd, "error"))
        return cmd_error(argc > 3 ? argv[3] : "/elrun-test/x");
    fprintf(stderr, "etcd_check: unknown command %s\n", cmd);
    return 2;
}
