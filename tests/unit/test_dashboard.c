/* test_dashboard.c -- the dashboard's record (src/dashboard/dashboard.c):
 * members diffed into join / leave / death events, the bounded rings, the
 * workers' progress with and without a loss, and the routes of
 * el_dash_handle (the page, /api/job, 404). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dashboard/dash_int.h"
#include "elrun/err.h"
#include "elrun/http.h"
#include "test.h"

static struct el_dash *mk(void)
{
    struct el_dash *d;
    CHECK_OK(el_dash_new(&d, &(struct el_dash_job){.run_id = "j1",
                                                   .node = "h1",
                                                   .role = "trainer",
                                                   .min_nodes = 2,
                                                   .max_nodes = 3,
                                                   .nproc = 2,
                                                   .max_restarts = 3}));
    return d;
}

static json_t *doc(struct el_dash *d)
{
    char *s;
    size_t n;
    CHECK_OK(el_dash_json(d, &s, &n));
    CHECK_EQ(strlen(s), n);
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    free(s);
    CHECK(j != NULL);
    return j;
}

static void round_ev(struct el_dash *d, int64_t r, int nodes,
                     const char *members)
{
    el__dash_event(d, &(struct el__dash_event){.kind = EL__DASH_ROUND,
                                               .round = r,
                                               .nodes = nodes,
                                               .world = 2 * nodes,
                                               .node_rank = 0,
                                               .members = members});
}

/* The kinds of the events, space-separated, and the node of the last
 * join/leave/death. */
static void kinds(json_t *j, char *out, size_t cap, char *node, size_t ncap)
{
    out[0] = 0;
    node[0] = 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(j, "events"), i, e)
    {
        const char *k = json_string_value(json_object_get(e, "kind"));
        snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? " " : "", k);
        json_t *n = json_object_get(e, "node");
        if (n)
            snprintf(node, ncap, "%s", json_string_value(n));
    }
}

TEST(dash_members_join_death_leave)
{
    struct el_dash *d = mk();
    char k[512], node[200];
    round_ev(d, 0, 2, "a#1#x 2\nb#2#y 2\n");
    json_t *j = doc(d);
    kinds(j, k, sizeof k, node, sizeof node);
    CHECK_STR(k, "round"); /* the first round's members are no joins */
    CHECK_EQ(json_array_size(json_object_get(j, "members")), 2);
    json_t *m1 = json_array_get(json_object_get(j, "members"), 1);
    CHECK_STR(json_string_value(json_object_get(m1, "host")), "b");
    CHECK_EQ(json_integer_value(json_object_get(m1, "workers")), 2);
    CHECK(json_is_false(json_object_get(m1, "self")));
    json_decref(j);

    round_ev(d, 1, 3, "a#1#x 2\nb#2#y 2\nc#3#z 2\n");
    j = doc(d);
    kinds(j, k, sizeof k, node, sizeof node);
    CHECK_STR(k, "round round join");
    CHECK_STR(node, "c#3#z");
    json_decref(j);

    /* c gone after a membership stop: a death. */
    el__dash_event(
        d, &(struct el__dash_event){.kind = EL__DASH_MEMBERSHIP, .round = -1});
    round_ev(d, 2, 2, "a#1#x 2\nb#2#y 2\n");
    j = doc(d);
    kinds(j, k, sizeof k, node, sizeof node);
    CHECK_STR(k, "round round join membership round death");
    CHECK_STR(node, "c#3#z");
    json_t *last = json_array_get(json_object_get(j, "events"), 5);
    CHECK(strstr(json_string_value(json_object_get(last, "text")),
                 "node c#3#z died") != NULL);
    CHECK_EQ(json_integer_value(json_object_get(last, "round")), 2);
    CHECK_EQ(json_array_size(json_object_get(j, "timeline")), 3);
    CHECK_EQ(json_integer_value(json_object_get(
                 json_array_get(json_object_get(j, "timeline"), 1), "nodes")),
             3);
    json_decref(j);

    /* members and their events are named by label too */
    round_ev(d, 3, 3, "a#1#x 2\nb#2#y 2\nh#7#0000d00d 2\n");
    j = doc(d);
    json_t *m2 = json_array_get(json_object_get(j, "members"), 2);
    CHECK_STR(json_string_value(json_object_get(m2, "label")), "h/d00d");
    CHECK_STR(json_string_value(json_object_get(m2, "host")), "h");
    json_t *ev =
        json_array_get(json_object_get(j, "events"),
                       json_array_size(json_object_get(j, "events")) - 1);
    CHECK_STR(json_string_value(json_object_get(ev, "label")), "h/d00d");
    CHECK_STR(json_string_value(json_object_get(ev, "node")), "h#7#0000d00d");
    CHECK_STR(json_string_value(json_object_get(ev, "text")),
              "node h/d00d joined (round 3)");
    json_decref(j);
    round_ev(d, 4, 2, "a#1#x 2\nb#2#y 2\n");

    /* b gone with no membership stop: a leave. */
    round_ev(d, 5, 1, "a#1#x 2\n");
    j = doc(d);
    kinds(j, k, sizeof k, node, sizeof node);
    CHECK(strstr(k, "round leave") != NULL);
    CHECK_STR(node, "b#2#y");
    CHECK_EQ(json_integer_value(json_object_get(j, "nodes")), 1);
    CHECK_EQ(json_integer_value(json_object_get(j, "world")), 2);
    CHECK_EQ(json_integer_value(json_object_get(j, "round")), 5);
    json_decref(j);
    el_dash_free(d);
}

TEST(dash_failure_restart_recovery_state)
{
    struct el_dash *d = mk();
    round_ev(d, 0, 2, NULL);
    el__dash_progress(d, 4, 0, 10, 320, 5.0, NAN);
    el__dash_event(
        d, &(struct el__dash_event){
               .kind = EL__DASH_FAILURE, .round = -1, .rank = 4, .sig = 9});
    el__dash_event(d, &(struct el__dash_event){.kind = EL__DASH_RESTART,
                                               .round = -1,
                                               .restarts = 1});
    el__dash_event(d, &(struct el__dash_event){.kind = EL__DASH_RECOVERY,
                                               .round = -1,
                                               .seconds = 1.5});
    struct el__dash_event st = {.kind = EL__DASH_STATE, .round = -1};
    snprintf(st.text, sizeof st.text, "healthy");
    el__dash_event(d, &st);
    json_t *j = doc(d);
    CHECK_STR(json_string_value(json_object_get(j, "state")), "healthy");
    CHECK_EQ(json_integer_value(json_object_get(j, "restarts")), 1);
    CHECK_EQ(json_integer_value(json_object_get(j, "restarts_left")), 2);
    json_t *ev = json_object_get(j, "events");
    CHECK_EQ(json_array_size(ev), 4); /* state changes are not listed */
    json_t *f = json_array_get(ev, 1);
    CHECK_STR(json_string_value(json_object_get(f, "kind")), "failure");
    CHECK_EQ(json_integer_value(json_object_get(f, "signal")), 9);
    CHECK_EQ(json_integer_value(json_object_get(f, "round")), 0);
    CHECK_STR(json_string_value(json_object_get(f, "text")),
              "worker rank 4 failed (signal 9, SIGKILL)");
    CHECK_STR(json_string_value(json_object_get(json_array_get(ev, 2), "text")),
              "restart 1 of 3");
    CHECK(json_real_value(json_object_get(json_array_get(ev, 3), "seconds")) ==
          1.5);
    json_t *w = json_array_get(json_object_get(j, "workers"), 0);
    CHECK_STR(json_string_value(json_object_get(w, "state")), "failed");
    CHECK(json_is_null(json_object_get(w, "loss")));
    CHECK_EQ(json_array_size(json_object_get(j, "members")), 0);
    json_decref(j);
    el_dash_free(d);
}

/* elrun dashboard learns the sizes from the job's events: a value < 0
 * keeps the one the record has; unknown ones are null until given. */
TEST(dash_job_sizes_learnt)
{
    struct el_dash *d;
    CHECK_OK(el_dash_new(&d, &(struct el_dash_job){.run_id = "j1",
                                                   .min_nodes = -1,
                                                   .max_nodes = -1,
                                                   .nproc = -1,
                                                   .max_restarts = -1}));
    json_t *j = doc(d), *job = json_object_get(j, "job");
    CHECK(json_is_null(json_object_get(job, "max_nodes")));
    CHECK(json_is_null(json_object_get(j, "restarts_left")));
    json_decref(j);
    el__dash_job_sizes(d, 2, 3, -1, 3);
    el__dash_job_sizes(d, -1, -1, -1, -1);
    el__dash_event(d, &(struct el__dash_event){.kind = EL__DASH_RESTART,
                                               .round = -1,
                                               .restarts = 1});
    j = doc(d);
    job = json_object_get(j, "job");
    CHECK_EQ(json_integer_value(json_object_get(job, "min_nodes")), 2);
    CHECK_EQ(json_integer_value(json_object_get(job, "max_nodes")), 3);
    CHECK_EQ(json_integer_value(json_object_get(job, "max_restarts")), 3);
    CHECK(json_is_null(json_object_get(job, "nproc_per_node")));
    CHECK_EQ(json_integer_value(json_object_get(j, "restarts_left")), 2);
    json_decref(j);
    el_dash_free(d);
    el__dash_job_sizes(NULL, 1, 1, 1, 1); /* a NULL record: no-op */
}

TEST(dash_progress_loss)
{
    struct el_dash *d = mk();
    round_ev(d, 0, 1, NULL);
    el__dash_progress(d, 0, 0, 1, 32, -1, 0.75);
    el__dash_progress(d, 1, 1, 1, -1, -1, NAN);
    el__dash_progress(d, 0, 0, 2, 64, 20.0, 0.5);
    json_t *j = doc(d);
    json_t *ws = json_object_get(j, "workers");
    CHECK_EQ(json_array_size(ws), 2);
    json_t *w0 = json_array_get(ws, 0), *w1 = json_array_get(ws, 1);
    CHECK_EQ(json_integer_value(json_object_get(w0, "step")), 2);
    CHECK_EQ(json_integer_value(json_object_get(w0, "samples")), 64);
    CHECK(json_real_value(json_object_get(w0, "loss")) == 0.5);
    CHECK(json_real_value(json_object_get(w0, "steps_per_second")) == 20.0);
    CHECK(json_is_null(json_object_get(w1, "loss")));
    CHECK(json_is_null(json_object_get(w1, "steps_per_second")));
    /* The loss series keeps points 250 ms apart: the second report came
     * at once, so only the first is in it. */
    json_t *ls = json_object_get(j, "loss");
    CHECK_EQ(json_array_size(ls), 1);
    CHECK(json_real_value(json_array_get(json_array_get(ls, 0), 2)) == 0.75);
    json_decref(j);
    /* A new round drops the old ranks' rows. */
    round_ev(d, 1, 1, NULL);
    j = doc(d);
    CHECK_EQ(json_array_size(json_object_get(j, "workers")), 0);
    json_decref(j);
    el__dash_progress(NULL, 0, 0, 1, 1, 1, 1); /* no-ops */
    el__dash_event(NULL, &(struct el__dash_event){.kind = EL__DASH_ROUND});
    el__dash_progress(d, 0, EL_DASH_MAX_RANKS, 1, 1, 1, 1);
    el_dash_free(d);
}

TEST(dash_bounded)
{
    struct el_dash *d = mk();
    for (int i = 0; i < EL_DASH_MAX_EVENTS + 88; i++)
        el__dash_event(d, &(struct el__dash_event){
                              .kind = EL__DASH_EXIT, .round = -1, .rank = i});
    for (int i = 0; i < EL_DASH_MAX_POINTS + 5; i++)
        round_ev(d, i, 1, NULL);
    json_t *j = doc(d);
    CHECK_EQ(json_array_size(json_object_get(j, "events")), EL_DASH_MAX_EVENTS);
    CHECK_EQ(json_array_size(json_object_get(j, "timeline")),
             EL_DASH_MAX_POINTS);
    json_t *dr = json_object_get(j, "dropped");
    CHECK_EQ(json_integer_value(json_object_get(dr, "events")),
             88 + EL_DASH_MAX_POINTS + 5);
    CHECK_EQ(json_integer_value(json_object_get(dr, "timeline")), 5);
    /* oldest first: the newest round is last */
    json_t *tl = json_object_get(j, "timeline");
    CHECK_EQ(json_integer_value(json_object_get(
                 json_array_get(tl, EL_DASH_MAX_POINTS - 1), "round")),
             EL_DASH_MAX_POINTS + 4);
    json_decref(j);
    el_dash_free(d);
}

static void get(struct el_dash *d, const char *path,
                struct el_http_response *rs)
{
    memset(rs, 0, sizeof *rs);
    el_dash_handle(
        d,
        &(struct el_http_request){.method = "GET", .path = path, .query = ""},
        rs);
}

TEST(dash_routes)
{
    struct el_dash *d = mk();
    struct el_http_response rs;
    get(d, "/", &rs);
    CHECK_EQ(rs.status, 0); /* 200 */
    CHECK_STR(rs.content_type, "text/html; charset=utf-8");
    CHECK(rs.len > 100 && memmem(rs.body, rs.len, "dash.js", 7) != NULL);
    free(rs.body);
    get(d, "/dash.js", &rs);
    CHECK_STR(rs.content_type, "text/javascript; charset=utf-8");
    /* no CDN: nothing is loaded from another origin */
    CHECK(memmem(rs.body, rs.len, "http://", 7) == NULL ||
          memmem(rs.body, rs.len, "http://www.w3.org/2000/svg", 26) != NULL);
    CHECK(memmem(rs.body, rs.len, "https://", 8) == NULL);
    free(rs.body);
    get(d, "/api/job", &rs);
    CHECK_STR(rs.content_type, "application/json");
    json_t *j = json_loadb(rs.body, rs.len, 0, NULL);
    CHECK(j != NULL);
    CHECK_STR(
        json_string_value(json_object_get(json_object_get(j, "job"), "run_id")),
        "j1");
    CHECK_STR(json_string_value(json_object_get(j, "state")), "init");
    json_decref(j);
    free(rs.body);
    get(d, "/nope", &rs);
    CHECK_EQ(rs.status, 404);
    CHECK(strstr(rs.body, "/api/job") != NULL);
    free(rs.body);
    int files;
    size_t bytes;
    el_dash_assets_size(&files, &bytes);
    CHECK_EQ(files, 3);
    CHECK(bytes > 1000);
    el_dash_free(d);
}
