/* test_rdzv_status.c -- el_rdzv_status_read over a real elrun store whose
 * keys are written as state_store.c writes them (docs/RENDEZVOUS.md): no
 * job yet, a sealed round with a dead member, an open round (the members
 * of the round before and the joiners so far), a closed job; and that it
 * writes nothing.
 */
#include <string.h>

#include "elrun/err.h"
#include "elrun/rdzv.h"
#include "elrun/store.h"
#include "test.h"

static void put(struct el_store *s, const char *k, const char *v)
{
    char key[200];
    snprintf(key, sizeof key, "/elrun/js/%s", k);
    el_store_set(s, key, v, strlen(v));
}

TEST(rdzv_status_reads_the_store_state)
{
    struct el_store_server *srv;
    struct el_store_server_opts o = {.host = "127.0.0.1", .port = 0};
    CHECK_OK(el_store_server_start(&srv, &o));
    int port = el_store_server_port(srv);
    struct el_rdzv_config cfg = {
        .backend = "c10d", .host = "127.0.0.1", .port = port, .run_id = "js"};
    struct el_rdzv_status st;
    char err[300];
    struct el_store *s;
    CHECK_OK(el_store_connect(&s, "127.0.0.1", port, 2000, 2000));

    /* Nothing under the id: no round, and nothing written. */
    CHECK_OK(el_rdzv_status_read(&cfg, &st, err, sizeof err));
    CHECK_EQ(st.round, -1);
    CHECK_EQ(st.nmembers, 0);
    CHECK_EQ(st.closed, 0);
    int64_t keys = -1;
    CHECK_OK(el_store_num_keys(s, &keys));
    CHECK_EQ(keys, 0);

    /* Round 3 sealed with two members, b dead, one restart charged. */
    put(s, "round", "3");
    put(s, "restarts", "1");
    put(s, "r3/members", "v1 3\na#1#x 2 hosta\nb#2#y 4 hostb\n");
    put(s, "events", "round 3\ndead b#2#y\n");
    CHECK_OK(el_rdzv_status_read(&cfg, &st, err, sizeof err));
    CHECK_EQ(st.round, 3);
    CHECK_EQ(st.sealed, 1);
    CHECK_EQ(st.members_round, 3);
    CHECK_EQ(st.restarts, 1);
    CHECK_EQ(st.nmembers, 2);
    CHECK_STR(st.members[0].name, "hosta");
    CHECK_EQ(st.members[0].lws, 2);
    CHECK_EQ(st.members[0].dead, 0);
    CHECK_STR(st.members[1].id, "b#2#y");
    CHECK_EQ(st.members[1].dead, 1);
    el_rdzv_status_free(&st);

    /* Round 4 open, one joiner so far: round 3's members are shown. */
    put(s, "round", "4");
    put(s, "r4/joined", "1");
    CHECK_OK(el_rdzv_status_read(&cfg, &st, err, sizeof err));
    CHECK_EQ(st.round, 4);
    CHECK_EQ(st.sealed, 0);
    CHECK_EQ(st.members_round, 3);
    CHECK_EQ(st.joined, 1);
    CHECK_EQ(st.nmembers, 2);
    el_rdzv_status_free(&st);

    /* Closed as failed; a malformed member list is an error, not a crash. */
    put(s, "closed", "failed: no restart left");
    put(s, "r4/members", "garbage");
    CHECK(el_rdzv_status_read(&cfg, &st, err, sizeof err) != 0);
    CHECK(strstr(err, "malformed") != NULL);
    put(s, "r4/members", "v1 4\na#1#x 2 hosta\n");
    CHECK_OK(el_rdzv_status_read(&cfg, &st, err, sizeof err));
    CHECK_EQ(st.closed, 2);
    CHECK_STR(st.closed_why, "failed: no restart left");
    CHECK_EQ(st.sealed, 1);
    CHECK_EQ(st.nmembers, 1);
    el_rdzv_status_free(&st);

    /* Other backends are a usage error. */
    cfg.backend = "static";
    CHECK_EQ(el_rdzv_status_read(&cfg, &st, err, sizeof err), EL_EUSAGE);
    el_store_close(s);
    el_store_server_close(srv);
}
