/* test_events.c -- the event record (encode, decode, the human line), the
 * history's bound in a real store (the newest EL_EVENTS_KEEP kept, in
 * order), and the emitter: listeners, the JSON-lines file, and a store
 * that is gone dropping events (counted) without blocking the caller;
 * a node's progress record replaced, read and deleted.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elrun/err.h"
#include "elrun/events.h"
#include "elrun/net.h"
#include "elrun/rdzv.h"
#include "elrun/store.h"
#include "test.h"

TEST(events_record_roundtrip)
{
    struct el_event ev = {.seq = 7, .time_ms = 1796126403250LL, .round = 2};
    snprintf(ev.kind, sizeof ev.kind, "failure");
    snprintf(ev.node, sizeof ev.node, "elh2");
    ev.fields = "{\"rank\":3,\"local_rank\":1,\"pid\":42,\"host\":\"elh2\","
                "\"exitcode\":1,\"signal\":0,\"message\":\"ValueError: "
                "boom \\\"q\\\"\"}";
    char *s = el_event_encode(&ev);
    CHECK(s != NULL);
    CHECK(strchr(s, '\n') == NULL);
    CHECK(strstr(s, "\"time\":\"2026-12-01T12:00:03.250Z\"") != NULL);
    struct el_event back;
    char err[200];
    CHECK_OK(el_event_decode(s, strlen(s), &back, err, sizeof err));
    CHECK_EQ(back.seq, 7);
    CHECK_EQ(back.time_ms, 1796126403250LL);
    CHECK_EQ(back.round, 2);
    CHECK_STR(back.kind, "failure");
    CHECK_STR(back.node, "elh2");
    char line[1000];
    el_event_human(&back, line, sizeof line);
    CHECK(strstr(line, "12:00:03.250") != NULL);
    CHECK(strstr(line, "rank 3 (local 1, pid 42) on elh2 exited 1: "
                       "ValueError: boom \"q\"") != NULL);
    el_event_clear(&back);
    free(s);

    /* No round: null, and back to -1. */
    ev.round = -1;
    ev.fields = NULL;
    s = el_event_encode(&ev);
    CHECK(s && strstr(s, "\"round\":null") && strstr(s, "\"fields\":{}"));
    CHECK_OK(el_event_decode(s, strlen(s), &back, err, sizeof err));
    CHECK_EQ(back.round, -1);
    el_event_clear(&back);
    free(s);
    /* Fields that are not an object are refused, not stored. */
    ev.fields = "[1]";
    CHECK(el_event_encode(&ev) == NULL);
}

/* Two agents of one host differ by their label: the record keeps it, the
 * human line names the node by it, a round by its members' labels; an
 * event of before the labels has none and is named by its node. */
TEST(events_label_names_the_agent_and_the_round_members)
{
    struct el_event ev = {.seq = 3, .time_ms = 1796126403250LL, .round = 1};
    snprintf(ev.kind, sizeof ev.kind, "round");
    snprintf(ev.node, sizeof ev.node, "h1");
    snprintf(ev.label, sizeof ev.label, "h1/3f2a");
    ev.fields = "{\"nodes\":3,\"world\":3,\"members\":[\"h1\",\"h1\",\"h1\"],"
                "\"joined\":[\"h1\"],\"left\":[\"h1\"],"
                "\"member_labels\":[\"h1/3f2a\",\"h1/09bc\",\"h1/77aa\"],"
                "\"joined_labels\":[\"h1/77aa\"],\"left_labels\":[\"h1/5e5e\"],"
                "\"cause\":\"worker_failure\",\"failed_node\":\"h1/09bc\"}";
    char *s = el_event_encode(&ev);
    CHECK(s && strstr(s, "\"node\":\"h1\",\"label\":\"h1/3f2a\","));
    struct el_event back;
    char err[200], line[1000];
    CHECK_OK(el_event_decode(s, strlen(s), &back, err, sizeof err));
    CHECK_STR(back.label, "h1/3f2a");
    el_event_human(&back, line, sizeof line);
    CHECK(strstr(line, " h1/3f2a ") != NULL);
    CHECK(strstr(line, "3 nodes, world 3 (joined: h1/77aa; left: h1/5e5e); "
                       "cause: worker_failure (h1/09bc)") != NULL);
    el_event_clear(&back);
    free(s);
    /* An event without a label: none in the JSON, the name in the line. */
    ev.label[0] = 0;
    ev.fields = "{\"nodes\":1,\"world\":1,\"joined\":[],\"left\":[\"h2\"],"
                "\"cause\":\"node_left\"}";
    s = el_event_encode(&ev);
    CHECK(s && !strstr(s, "\"label\""));
    CHECK_OK(el_event_decode(s, strlen(s), &back, err, sizeof err));
    CHECK_STR(back.label, "");
    el_event_human(&back, line, sizeof line);
    CHECK(strstr(line, " h1 ") != NULL);
    CHECK(strstr(line, "(joined: -; left: h2); cause: node_left") != NULL);
    el_event_clear(&back);
    free(s);
    const char *bad = "{\"seq\":1,\"time_ms\":1,\"kind\":\"x\",\"node\":\"n\","
                      "\"label\":7,\"round\":0,\"fields\":{}}";
    CHECK_EQ(el_event_decode(bad, strlen(bad), &back, err, sizeof err),
             EL_EFORMAT);
}

TEST(events_decode_rejects_what_is_not_an_event)
{
    struct el_event ev;
    char err[200];
    const char *bad[] = {"",
                         "{",
                         "[]",
                         "{\"seq\":1}",
                         "{\"seq\":\"1\",\"time_ms\":1,\"kind\":\"x\","
                         "\"node\":\"n\",\"round\":0,\"fields\":{}}",
                         "{\"seq\":1,\"time_ms\":1,\"kind\":\"x\","
                         "\"node\":\"n\",\"round\":0,\"fields\":[]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(el_event_decode(bad[i], strlen(bad[i]), &ev, err, sizeof err),
                 EL_EFORMAT);
        CHECK(err[0] != 0);
    }
}

TEST(events_slots_are_bounded)
{
    CHECK_EQ(el_events_slot(1), 0);
    CHECK_EQ(el_events_slot(EL_EVENTS_KEEP), EL_EVENTS_KEEP - 1);
    CHECK_EQ(el_events_slot(EL_EVENTS_KEEP + 1), 0);
    CHECK_EQ(el_events_slot(3 * EL_EVENTS_KEEP + 5), 4);
}

static int start_server(struct el_store_server **srv)
{
    struct el_store_server_opts o = {.host = "127.0.0.1", .port = 0};
    if (el_store_server_start(srv, &o))
        return -1;
    return el_store_server_port(*srv);
}

static void store_cfg(struct el_rdzv_config *rc, int port)
{
    memset(rc, 0, sizeof *rc);
    rc->backend = "c10d";
    rc->host = "127.0.0.1";
    rc->port = port;
    rc->run_id = "tj";
}

/* A store on a free port and the history of job "tj" in it; returns the
 * port (a failed check ends the test). */
static int open_history(struct el_store_server **srv, struct el_events_log **lg)
{
    int port = start_server(srv);
    CHECK(port > 0);
    struct el_rdzv_config rc;
    store_cfg(&rc, port);
    char err[300];
    CHECK_OK(el_events_log_open(lg, &rc, err, sizeof err));
    return port;
}

TEST(events_history_keeps_the_newest_in_order)
{
    struct el_store_server *srv;
    struct el_events_log *lg;
    int port = open_history(&srv, &lg);
    int64_t last = -1;
    CHECK_OK(el_events_log_last(lg, &last));
    CHECK_EQ(last, 0);
    const int total = EL_EVENTS_KEEP + 25;
    for (int i = 1; i <= total; i++) {
        struct el_event ev = {.time_ms = i, .round = i / 100};
        snprintf(ev.kind, sizeof ev.kind, "restart");
        snprintf(ev.node, sizeof ev.node, "n");
        char f[64];
        snprintf(f, sizeof f, "{\"i\":%d}", i);
        ev.fields = f;
        CHECK_OK(el_events_log_append(lg, &ev));
        CHECK_EQ(ev.seq, i);
    }
    /* The keys stay bounded: one per slot, plus the counter. */
    int64_t keys = 0;
    struct el_store *c;
    CHECK_OK(el_store_connect(&c, "127.0.0.1", port, 2000, 2000));
    CHECK_OK(el_store_num_keys(c, &keys));
    CHECK_EQ(keys, EL_EVENTS_KEEP + 1);
    el_store_close(c);

    struct el_event *evs;
    int n;
    CHECK_OK(el_events_log_read(lg, 0, 0, &evs, &n, &last));
    CHECK_EQ(n, EL_EVENTS_KEEP);
    CHECK_EQ(last, total);
    CHECK_EQ(evs[0].seq, total - EL_EVENTS_KEEP + 1);
    for (int i = 1; i < n; i++)
        CHECK_EQ(evs[i].seq, evs[i - 1].seq + 1);
    CHECK_STR(evs[n - 1].fields, "{\"i\":10025}");
    el_events_free(evs, n);
    /* The last 3 only, and nothing after the last. */
    CHECK_OK(el_events_log_read(lg, 0, 3, &evs, &n, &last));
    CHECK_EQ(n, 3);
    CHECK_EQ(evs[0].seq, total - 2);
    el_events_free(evs, n);
    CHECK_OK(el_events_log_read(lg, total, 0, &evs, &n, &last));
    CHECK_EQ(n, 0);
    CHECK_EQ(last, total);
    el_events_free(evs, n);
    /* A wait with nothing new times out; one after an older seq returns. */
    CHECK_EQ(el_events_log_wait(lg, total, 50), -ETIMEDOUT);
    CHECK_OK(el_events_log_wait(lg, total - 1, 50));
    el_events_log_close(lg);
    el_store_server_close(srv);
}

/* A read batches its slots (MULTI_GET of 100); a slot that is missing (an
 * event whose writer died between its two requests) or holds another seq
 * costs its batch a slot-by-slot read and is skipped, and a missing newest
 * slot ends the read before it (its writer may still be at it). */
TEST(events_batched_read_skips_lost_slots)
{
    struct el_store_server *srv;
    struct el_events_log *lg;
    int port = open_history(&srv, &lg);
    struct el_store *c;
    CHECK_OK(el_store_connect(&c, "127.0.0.1", port, 2000, 2000));
    int64_t seq;
    for (int i = 1; i <= 250; i++) {
        struct el_event ev = {.time_ms = i, .round = 0};
        snprintf(ev.kind, sizeof ev.kind, "restart");
        snprintf(ev.node, sizeof ev.node, "n");
        ev.fields = "{}";
        if (i == 120 || i == 250) { /* counted, never written */
            CHECK_OK(el_store_add(c, "/elrun/tj/ev/n", 1, &seq));
            CHECK_EQ(seq, i);
            continue;
        }
        CHECK_OK(el_events_log_append(lg, &ev));
    }
    /* slot of seq 130 holds seq 7's event: overwritten, skipped */
    void *v;
    size_t len;
    CHECK_OK(el_store_try_get(c, "/elrun/tj/ev/6", &v, &len));
    CHECK_OK(el_store_set(c, "/elrun/tj/ev/129", v, len));
    free(v);
    struct el_event *evs;
    int n;
    int64_t last;
    CHECK_OK(el_events_log_read(lg, 0, 0, &evs, &n, &last));
    CHECK_EQ(n, 247); /* 1..249 but 120 and 130 */
    CHECK_EQ(last, 249);
    for (int i = 0, want = 1; i < n; i++, want++) {
        if (want == 120 || want == 130)
            want++;
        CHECK_EQ(evs[i].seq, want);
    }
    el_events_free(evs, n);
    CHECK_OK(el_events_log_read(lg, 100, 25, &evs, &n, &last));
    CHECK_EQ(n, 24); /* the last 25, 226..250, but 250 */
    CHECK_EQ(evs[0].seq, 226);
    CHECK_EQ(last, 249);
    el_events_free(evs, n);
    el_store_close(c);
    el_events_log_close(lg);
    el_store_server_close(srv);
}

struct seen {
    int n;
    int64_t last_seq;
};

static void listener(void *arg, const struct el_event *ev, const char *json)
{
    struct seen *s = arg;
    s->n++;
    s->last_seq = ev->seq;
    (void)json;
}

TEST(events_emitter_stores_writes_and_tells_listeners)
{
    struct el_store_server *srv;
    int port = start_server(&srv);
    CHECK(port > 0);
    struct el_rdzv_config rc;
    store_cfg(&rc, port);
    char path[] = "/tmp/elrun-events-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    struct el_events_config ec = {
        .rdzv = &rc, .node = "me", .jsonl_path = path};
    struct el_events *em;
    char err[300];
    CHECK_OK(el_events_open(&em, &ec, err, sizeof err));
    struct seen s = {0};
    CHECK_OK(el_events_listen(em, listener, &s));
    CHECK_EQ(el_events_emit(em, "round", 0, "{\"nodes\":2}"), 0);
    /* the label set after the first event is on the events after it */
    el_events_set_label(em, "me/3f2a");
    CHECK_EQ(el_events_emit(em, "end", 0, NULL), 0);
    el_events_close(em, 5000);
    CHECK_EQ(s.n, 2);
    CHECK_EQ(s.last_seq, 2);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    char line[1000];
    int lines = 0;
    while (f && fgets(line, sizeof line, f)) {
        struct el_event ev;
        line[strcspn(line, "\n")] = 0;
        CHECK_OK(el_event_decode(line, strlen(line), &ev, err, sizeof err));
        CHECK_STR(ev.node, "me");
        CHECK_STR(ev.label, lines ? "me/3f2a" : "");
        el_event_clear(&ev);
        lines++;
    }
    if (f)
        fclose(f);
    CHECK_EQ(lines, 2);
    unlink(path);
    el_store_server_close(srv);
}

/* el_events_flush returns once what was emitted is in the history: a
 * reader (another node) finds it there while the emitter still runs. */
TEST(events_flush_stores_what_was_emitted)
{
    struct el_store_server *srv;
    struct el_events_log *lg;
    int port = open_history(&srv, &lg);
    struct el_rdzv_config rc;
    store_cfg(&rc, port);
    struct el_events_config ec = {.rdzv = &rc, .node = "me"};
    struct el_events *em;
    char err[300];
    CHECK_OK(el_events_open(&em, &ec, err, sizeof err));
    for (int i = 0; i < 50; i++)
        CHECK_EQ(el_events_emit(em, "failure", 3, NULL), 0);
    el_events_flush(em, 5000);
    int64_t emitted = 0, stored = 0, dropped = 0, last = -1;
    el_events_counts(em, &emitted, &stored, &dropped);
    CHECK_EQ(stored, 50);
    CHECK_OK(el_events_log_last(lg, &last));
    CHECK_EQ(last, 50);
    el_events_flush(em, 5000); /* nothing queued: at once */
    el_events_flush(NULL, 5000);
    el_events_close(em, 5000);
    el_events_log_close(lg);
    el_store_server_close(srv);
}

static void count_notes(void *arg, const char *msg)
{
    (*(int *)arg)++;
    (void)msg;
}

TEST(events_emitter_never_blocks_on_a_store_that_is_gone)
{
    /* A port nothing listens on. */
    struct el_store_server *srv;
    int port = start_server(&srv);
    CHECK(port > 0);
    el_store_server_close(srv);
    struct el_rdzv_config rc;
    store_cfg(&rc, port);
    int notes = 0;
    struct el_events_config ec = {
        .rdzv = &rc, .node = "me", .on_note = count_notes, .note_arg = &notes};
    struct el_events *em;
    char err[300];
    CHECK_OK(el_events_open(&em, &ec, err, sizeof err));
    long long t0 = el_now_ms();
    int dropped_now = 0;
    for (int i = 0; i < 3000; i++)
        dropped_now += el_events_emit(em, "restart", i, NULL);
    /* 3000 emits cost no store request of the caller's. */
    CHECK(el_now_ms() - t0 < 1000);
    CHECK(dropped_now >= 3000 - EL_EVENTS_QUEUE - 1);
    /* Every event is dropped and counted, none stored. */
    int64_t emitted = 0, stored = 0, dropped = 0;
    for (long long dl = el_now_ms() + 10000; el_now_ms() < dl;) {
        el_events_counts(em, &emitted, &stored, &dropped);
        if (dropped == emitted)
            break;
        usleep(10000);
    }
    CHECK_EQ(emitted, 3000);
    CHECK_EQ(stored, 0);
    CHECK_EQ(dropped, 3000);
    el_events_close(em, 100);
    CHECK(notes >= 1); /* one note per outage, not one per event */
    CHECK(notes <= 2);
}

/* A node's progress record: the newest one queued is what the store holds
 * (one slot, not a queue), a NULL record deletes it, and a reader of
 * several ids gets NULL for those without one. */
TEST(events_progress_record_is_replaced_and_deleted)
{
    struct el_store_server *srv;
    int port = start_server(&srv);
    CHECK(port > 0);
    struct el_rdzv_config rc;
    store_cfg(&rc, port);
    struct el_events_config ec = {.rdzv = &rc, .node = "me"};
    struct el_events *em;
    char err[300];
    CHECK_OK(el_events_open(&em, &ec, err, sizeof err));
    CHECK_EQ(el_events_progress(em, "me#1#a", "{\"step\":1}"), 0);
    CHECK_EQ(el_events_progress(em, "me#1#a", "{\"step\":2}"), 0);
    CHECK_EQ(el_events_progress(em, "you#2#b", "{\"step\":7}"), 0);
    CHECK_EQ(el_events_progress(em, "you#2#b", NULL), 0);
    CHECK_EQ(el_events_progress(em, "me#1#a", "{\"step\":3}"), 0);
    el_events_close(em, 5000);
    CHECK_EQ(el_events_progress(NULL, "me#1#a", "{}"), 1);

    struct el_events_log *lg;
    CHECK_OK(el_events_log_open(&lg, &rc, err, sizeof err));
    const char *ids[] = {"me#1#a", "nobody#3#c"};
    char *texts[2];
    CHECK_OK(el_events_log_get_progress(lg, ids, 2, texts));
    CHECK(texts[0] != NULL);
    if (texts[0])
        CHECK_STR(texts[0], "{\"step\":3}");
    CHECK(texts[1] == NULL);
    free(texts[0]);
    /* Deleted (or never written past the newer record): absent. */
    const char *gone[] = {"you#2#b"};
    CHECK_OK(el_events_log_get_progress(lg, gone, 1, texts));
    CHECK(texts[0] == NULL);
    free(texts[0]);
    CHECK_OK(el_events_log_put_progress(lg, "me#1#a", NULL));
    CHECK_OK(el_events_log_get_progress(lg, ids, 1, texts));
    CHECK(texts[0] == NULL);
    el_events_log_close(lg);
    el_store_server_close(srv);
}
