/* test_metrics.c -- the registry's Prometheus text format (0.0.4): HELP and
 * TYPE lines, label escaping, histogram buckets (cumulative, +Inf, _sum,
 * _count), constant labels, bad names refused, NULL families ignored, and
 * updates from several threads adding up.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "elrun/metrics.h"
#include "test.h"

static char *render(struct el_metrics *r)
{
    char *out;
    size_t len;
    CHECK_EQ(el_metrics_render(r, &out, &len), 0);
    CHECK_EQ(strlen(out), len);
    return out;
}

TEST(metrics_counter_gauge_text)
{
    struct el_metrics *r;
    const char *const consts[] = {"run_id", "j\"1", "node", "h\\1", NULL};
    CHECK_EQ(el_metrics_new(&r, consts), 0);
    struct el_metric *c, *g;
    CHECK_EQ(el_metrics_register(r, &c, EL_METRIC_COUNTER, "elrun_x_total",
                                 "Exits.\nSecond \\ line.", "code,signal", NULL,
                                 0),
             0);
    CHECK_EQ(el_metrics_register(r, &g, EL_METRIC_GAUGE, "elrun_round",
                                 "The round.", NULL, NULL, 0),
             0);
    CHECK_EQ(el_metric_add(c, (const char *[]){"1", ""}, 1), 0);
    CHECK_EQ(el_metric_add(c, (const char *[]){"1", ""}, 2), 0);
    CHECK_EQ(el_metric_add(c, (const char *[]){"", "SIG\nKILL"}, 1), 0);
    CHECK_EQ(el_metric_set(g, NULL, 0.25), 0);
    char *t = render(r);
    CHECK_STR(
        t,
        "# HELP elrun_x_total Exits.\\nSecond \\\\ line.\n"
        "# TYPE elrun_x_total counter\n"
        "elrun_x_total{run_id=\"j\\\"1\",node=\"h\\\\1\",code=\"1\",signal=\"\"} 3\n"
        "elrun_x_total{run_id=\"j\\\"1\",node=\"h\\\\1\",code=\"\",signal=\"SIG\\nKILL\"} 1\n"
        "# HELP elrun_round The round.\n"
        "# TYPE elrun_round gauge\n"
        "elrun_round{run_id=\"j\\\"1\",node=\"h\\\\1\"} 0.25\n");
    free(t);
    /* A counter never goes down; observe is for histograms only. */
    CHECK_EQ(el_metric_add(c, (const char *[]){"1", ""}, -1), -EINVAL);
    CHECK_EQ(el_metric_observe(g, NULL, 1), -EINVAL);
    el_metrics_free(r);
}

TEST(metrics_histogram_text)
{
    struct el_metrics *r;
    CHECK_EQ(el_metrics_new(&r, NULL), 0);
    struct el_metric *h;
    const double b[] = {0.005, 0.1, 1, 2.5};
    CHECK_EQ(el_metrics_register(r, &h, EL_METRIC_HISTOGRAM,
                                 "elrun_rdzv_seconds", "Rendezvous.", NULL, b,
                                 4),
             0);
    /* A histogram without labels shows its zero series from the start. */
    char *t = render(r);
    CHECK(strstr(t, "elrun_rdzv_seconds_bucket{le=\"+Inf\"} 0\n"));
    CHECK(strstr(t, "elrun_rdzv_seconds_count 0\n"));
    free(t);
    el_metric_observe(h, NULL, 0.005); /* le is inclusive */
    el_metric_observe(h, NULL, 0.5);
    el_metric_observe(h, NULL, 0.75);
    el_metric_observe(h, NULL, 100);
    t = render(r);
    CHECK_STR(t, "# HELP elrun_rdzv_seconds Rendezvous.\n"
                 "# TYPE elrun_rdzv_seconds histogram\n"
                 "elrun_rdzv_seconds_bucket{le=\"0.005\"} 1\n"
                 "elrun_rdzv_seconds_bucket{le=\"0.1\"} 1\n"
                 "elrun_rdzv_seconds_bucket{le=\"1\"} 3\n"
                 "elrun_rdzv_seconds_bucket{le=\"2.5\"} 3\n"
                 "elrun_rdzv_seconds_bucket{le=\"+Inf\"} 4\n"
                 "elrun_rdzv_seconds_sum 101.255\n"
                 "elrun_rdzv_seconds_count 4\n");
    free(t);
    el_metrics_free(r);
}

TEST(metrics_labelled_histogram_and_specials)
{
    struct el_metrics *r;
    const char *const consts[] = {"role", "trainer", NULL};
    CHECK_EQ(el_metrics_new(&r, consts), 0);
    struct el_metric *h, *g;
    const double b[] = {1};
    CHECK_EQ(el_metrics_register(r, &h, EL_METRIC_HISTOGRAM, "h_seconds", "",
                                 "cause", b, 1),
             0);
    CHECK_EQ(
        el_metrics_register(r, &g, EL_METRIC_GAUGE, "g", "G.", "rank", NULL, 0),
        0);
    el_metric_observe(h, (const char *[]){"failure"}, 2);
    el_metric_set(g, (const char *[]){"0"}, INFINITY);
    el_metric_set(g, (const char *[]){"1"}, -INFINITY);
    el_metric_set(g, (const char *[]){"2"}, NAN);
    el_metric_set(g, (const char *[]){"3"}, 1e21);
    char *t = render(r);
    CHECK(strstr(
        t,
        "h_seconds_bucket{role=\"trainer\",cause=\"failure\",le=\"1\"} 0\n"));
    CHECK(strstr(
        t,
        "h_seconds_bucket{role=\"trainer\",cause=\"failure\",le=\"+Inf\"} 1\n"));
    CHECK(strstr(t, "h_seconds_sum{role=\"trainer\",cause=\"failure\"} 2\n"));
    CHECK(strstr(t, "g{role=\"trainer\",rank=\"0\"} +Inf\n"));
    CHECK(strstr(t, "g{role=\"trainer\",rank=\"1\"} -Inf\n"));
    CHECK(strstr(t, "g{role=\"trainer\",rank=\"2\"} NaN\n"));
    CHECK(strstr(t, "g{role=\"trainer\",rank=\"3\"} 1e+21\n"));
    free(t);
    el_metric_clear(g);
    t = render(r);
    CHECK(!strstr(t, "rank="));
    CHECK(strstr(t, "# TYPE g gauge\n"));
    free(t);
    el_metrics_free(r);
}

TEST(metrics_bad_names_refused)
{
    struct el_metrics *r;
    const char *const bad_const[] = {"__x", "1", NULL};
    CHECK_EQ(el_metrics_new(&r, bad_const), -EINVAL);
    const char *const consts[] = {"node", "a", NULL};
    CHECK_EQ(el_metrics_new(&r, consts), 0);
    struct el_metric *m = NULL;
    const double up[] = {1, 1};
    CHECK_EQ(
        el_metrics_register(r, &m, EL_METRIC_GAUGE, "1x", "", NULL, NULL, 0),
        -EINVAL);
    CHECK_EQ(
        el_metrics_register(r, &m, EL_METRIC_GAUGE, "a-b", "", NULL, NULL, 0),
        -EINVAL);
    CHECK_EQ(
        el_metrics_register(r, &m, EL_METRIC_GAUGE, "x", "", "a:b", NULL, 0),
        -EINVAL);
    CHECK_EQ(
        el_metrics_register(r, &m, EL_METRIC_GAUGE, "x", "", "a,a", NULL, 0),
        -EINVAL);
    CHECK_EQ(
        el_metrics_register(r, &m, EL_METRIC_GAUGE, "x", "", "node", NULL, 0),
        -EINVAL);
    CHECK_EQ(
        el_metrics_register(r, &m, EL_METRIC_HISTOGRAM, "x", "", "le", up, 1),
        -EINVAL);
    CHECK_EQ(
        el_metrics_register(r, &m, EL_METRIC_HISTOGRAM, "x", "", NULL, up, 2),
        -EINVAL);
    CHECK_EQ(
        el_metrics_register(r, &m, EL_METRIC_GAUGE, "ns:x", "", "a", NULL, 0),
        0);
    CHECK_EQ(el_metrics_register(r, &m, EL_METRIC_COUNTER, "ns:x", "", NULL,
                                 NULL, 0),
             -EEXIST);
    /* Off: a NULL family is a no-op. */
    CHECK_EQ(el_metric_add(NULL, NULL, 1), 0);
    CHECK_EQ(el_metric_observe(NULL, NULL, 1), 0);
    el_metric_clear(NULL);
    el_metrics_free(r);
    el_metrics_free(NULL);
}

TEST(metrics_series_cap)
{
    struct el_metrics *r;
    CHECK_EQ(el_metrics_new(&r, NULL), 0);
    struct el_metric *m;
    CHECK_EQ(el_metrics_register(r, &m, EL_METRIC_GAUGE, "g", "", "k", NULL, 0),
             0);
    char v[16];
    for (int i = 0; i < EL_METRICS_MAX_SERIES; i++) {
        snprintf(v, sizeof v, "%d", i);
        CHECK_EQ(el_metric_set(m, (const char *[]){v}, i), 0);
    }
    CHECK_EQ(el_metric_set(m, (const char *[]){"new"}, 1), -ENOSPC);
    CHECK_EQ(el_metric_set(m, (const char *[]){"7"}, 8), 0);
    el_metrics_free(r);
}

static struct el_metric *shared_c;

static void *adder(void *arg)
{
    for (int i = 0; i < 20000; i++)
        el_metric_add(shared_c, (const char *[]){(const char *)arg}, 1);
    return NULL;
}

static int hook_calls;
static void hook(void *arg)
{
    hook_calls++;
    el_metric_set(arg, NULL, 42); /* a hook may update: no lock held */
}

TEST(metrics_threads_and_hooks)
{
    struct el_metrics *r;
    CHECK_EQ(el_metrics_new(&r, NULL), 0);
    struct el_metric *g;
    CHECK_EQ(el_metrics_register(r, &shared_c, EL_METRIC_COUNTER, "c_total", "",
                                 "t", NULL, 0),
             0);
    CHECK_EQ(
        el_metrics_register(r, &g, EL_METRIC_GAUGE, "g", "", NULL, NULL, 0), 0);
    CHECK_EQ(el_metrics_on_collect(r, hook, g), 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, adder, (void *)(i % 2 ? "a" : "b"));
    for (int k = 0; k < 50; k++)
        free(render(r));
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    char *t = render(r);
    CHECK(strstr(t, "c_total{t=\"b\"} 40000\n"));
    CHECK(strstr(t, "c_total{t=\"a\"} 40000\n"));
    CHECK(strstr(t, "\ng 42\n"));
    CHECK_EQ(hook_calls, 51);
    free(t);
    el_metrics_free(r);
}
