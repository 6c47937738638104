/* test_rdzv_stale.c -- the c10d rendezvous on a store that an earlier job
 * used (#14, t0950's hung-worker flake): torch's worker keys
 * (/worker/attempt_<round>/) carry no run id, so a round's workers found
 * the addresses of another job's dead workers there and dialled them until
 * their timeout.  The node that opens a round (raises it, round 0
 * included) must clear that attempt's keys before any worker starts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elrun/err.h"
#include "elrun/rdzv.h"
#include "elrun/store.h"
#include "test.h"

/* 1 if key is in the store, 0 if not. */
static int has_key(struct el_store *cl, const char *key)
{
    void *v = NULL;
    size_t len = 0;
    int rc = el_store_try_get(cl, key, &v, &len);
    free(v);
    CHECK(rc == 0 || rc == EL_ENOTFOUND);
    return rc == 0;
}

TEST(rdzv_store_round_clears_its_attempts_stale_worker_keys)
{
    struct el_store_server *srv = NULL;
    struct el_store_server_opts so = {.host = "127.0.0.1"};
    CHECK_OK(el_store_server_start(&srv, &so));
    int port = el_store_server_port(srv);
    struct el_store *cl = NULL;
    CHECK_OK(el_store_connect(&cl, "127.0.0.1", port, 2000, 2000));
    /* What a job "old" left: its workers' addresses in attempts 0 and 1,
     * in both spellings torch uses (PrefixStore's leading "/" doubled). */
    static const char *const stale[] = {
        "/worker/attempt_0/fmnist/addr/0", "//worker/attempt_0/x",
        "/worker/attempt_1/fmnist/addr/0", "//worker/attempt_1/x",
        "/worker/attempt_2/fmnist/addr/0",
    };
    for (size_t i = 0; i < sizeof stale / sizeof *stale; i++)
        CHECK_OK(el_store_set(cl, stale[i], "127.0.0.1:1", 11));

    struct el_rdzv_config cfg = {
        .backend = "c10d",
        .run_id = "new",
        .host = "127.0.0.1",
        .port = port,
        .min_nodes = 1,
        .max_nodes = 2, /* 1..1 would be the static backend */
        .last_call_timeout_ms = 50,
        .is_host = -1,
        .join_timeout_ms = 20000,
        .max_restarts = 3,
    };
    struct el_rdzv *r = NULL;
    char err[256] = "";
    struct el_rdzv_info info;
    int orc = el_rdzv_open(&r, &cfg, err, sizeof err);
    if (orc)
        fprintf(stderr, "  el_rdzv_open: %s\n", err);
    CHECK_OK(orc);
    CHECK_OK(el_rdzv_next(r, 1, -1, &info));
    CHECK_EQ(info.round, 0);
    CHECK(!has_key(cl, "/worker/attempt_0/fmnist/addr/0"));
    CHECK(!has_key(cl, "//worker/attempt_0/x"));
    /* Only the round opened so far: a later attempt is cleared when its
     * round opens (another job may still be in it now). */
    CHECK(has_key(cl, "/worker/attempt_1/fmnist/addr/0"));

    /* A failure opens round 1: its attempt is clean before it starts. */
    CHECK_OK(el_rdzv_report_failure(r, "test"));
    CHECK_OK(el_rdzv_next(r, 1, -1, &info));
    CHECK_EQ(info.round, 1);
    CHECK(!has_key(cl, "/worker/attempt_1/fmnist/addr/0"));
    CHECK(!has_key(cl, "//worker/attempt_1/x"));
    CHECK(has_key(cl, "/worker/attempt_2/fmnist/addr/0"));

    el_rdzv_close(r);
    el_store_close(cl);
    el_store_server_close(srv);
}
