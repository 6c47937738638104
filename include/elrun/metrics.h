/* metrics.h -- a small metrics registry: counters, gauges and histograms
 * with labels, rendered in the Prometheus text exposition format 0.0.4, and
 * the HTTP endpoint that serves it (GET /metrics, src/http).
 *
 *   struct el_metrics *reg;
 *   const char *const consts[] = {"run_id", "job1", "node", "h1", NULL};
 *   el_metrics_new(&reg, consts);
 *   struct el_metric *exits;
 *   el_metrics_register(reg, &exits, EL_METRIC_COUNTER,
 *                       "elrun_worker_exits_total", "Worker exits.",
 *                       "code,signal", NULL, 0);
 *   el_metric_add(exits, (const char *[]){"1", ""}, 1);
 *
 * Threads: every function is safe from any thread.  A registry has one
 * mutex; updates and el_metrics_render() take it for a few hundred ns.
 * Collect hooks (el_metrics_on_collect) run on the rendering thread before
 * the lock is taken, so they may update metrics themselves.
 *
 * Off costs nothing: every update function takes a NULL family and does
 * nothing, so code that records metrics needs no "is it on" test.
 *
 * Errors: 0 or a negative code (-EINVAL for a bad name or label count,
 * -ENOMEM, -ENOSPC when a family already holds EL_METRICS_MAX_SERIES
 * series: the update is dropped, the series that exist go on).
 */
#ifndef ELRUN_METRICS_H
#define ELRUN_METRICS_H

#include <stddef.h>

#include "elrun/http.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EL_METRICS_MAX_LABELS 8
#define EL_METRICS_MAX_SERIES 4096
#define EL_METRICS_MAX_BUCKETS 32

enum el_metric_type { EL_METRIC_COUNTER, EL_METRIC_GAUGE, EL_METRIC_HISTOGRAM };

struct el_metrics;
struct el_metric;

/* A registry.  consts: NULL, or name, value pairs ending with NULL: labels
 * put first on every series (run_id, node, role).  Copied.  Returns 0,
 * -EINVAL (a bad label name) or -ENOMEM. */
int el_metrics_new(struct el_metrics **out, const char *const *consts);

/* Free the registry and its families.  No thread may use it any more.
 * NULL is a no-op. */
void el_metrics_free(struct el_metrics *reg);

/* Add a family.  name and the label names follow Prometheus' rules
 * ([a-zA-Z_:][a-zA-Z0-9_:]*, labels without ':', not "__..." nor "le" for a
 * histogram).  labels: comma-separated names or NULL.  buckets: the
 * histogram's upper bounds, strictly increasing, +Inf implied (ignored
 * for the other types).  A family without labels has its one series from
 * the start (value 0).  *out belongs to the registry.  Returns 0,
 * -EINVAL, -EEXIST (the name is taken) or -ENOMEM. */
int el_metrics_register(struct el_metrics *reg, struct el_metric **out,
                        enum el_metric_type type, const char *name,
                        const char *help, const char *labels,
                        const double *buckets, int nbuckets);

/* A table of families to register at once into struct fields: each row's
 * family goes to *(struct el_metric **)((char *)base + off). */
struct el_metric_def {
    size_t off;
    enum el_metric_type type;
    const char *name, *help, *labels;
};

/* el_metrics_register for each of the n rows (histograms get buckets).
 * Returns 0 or the first error (families registered before it stay). */
int el_metrics_register_table(struct el_metrics *reg, void *base,
                              const struct el_metric_def *defs, size_t n,
                              const double *buckets, int nbuckets);

/* Updates.  values: one string per label of the family (NULL when it has
 * none); the series is created on first use.  add: counters (v >= 0) and
 * gauges; set: gauges (and counters mirroring a count kept elsewhere);
 * observe: histograms.  m NULL: no-op, returns 0. */
int el_metric_add(struct el_metric *m, const char *const *values, double v);
int el_metric_set(struct el_metric *m, const char *const *values, double v);
int el_metric_observe(struct el_metric *m, const char *const *values, double v);

/* Drop every series of m (for per-rank gauges when the ranks change). */
void el_metric_clear(struct el_metric *m);

/* fn(arg) is called at the start of every el_metrics_render(), on the
 * rendering thread, without the registry's lock: it may set gauges from
 * state read at scrape time.  At most 8 hooks.  Returns 0 or -ENOSPC. */
int el_metrics_on_collect(struct el_metrics *reg, void (*fn)(void *arg),
                          void *arg);

/* Remove a hook added with the same fn and arg; once it returns, fn is
 * not running and will not be called again. */
void el_metrics_off_collect(struct el_metrics *reg, void (*fn)(void *arg),
                            void *arg);

/* The whole registry in the text format 0.0.4 (families in registration
 * order, series in creation order).  *out is malloc'd (caller frees),
 * NUL-terminated, *len bytes.  Returns 0 or -ENOMEM. */
int el_metrics_render(struct el_metrics *reg, char **out, size_t *len);

/* The content type of el_metrics_render's output. */
#define EL_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* ---- serving /metrics (src/metrics/serve.c over src/http) ---- */

struct el_metrics_server;

/* Serve GET /metrics for reg at host:port (port 0 picks one) on a thread
 * of its own with its own libuv loop: nothing of it runs on the caller's
 * thread.  Returns once it listens (el_metrics_server_port() is valid), or
 * -errno / EL_EUSAGE with a one-line reason in err. */
int el_metrics_serve(struct el_metrics_server **out, struct el_metrics *reg,
                     const char *host, int port, char *err, size_t errlen);

/* The same, with other(other_arg, ...) answering every path but /metrics
 * (the dashboard: el_dash_handle), on the server's thread.  NULL other:
 * as el_metrics_serve. */
int el_metrics_serve_routes(struct el_metrics_server **out,
                            struct el_metrics *reg, const char *host, int port,
                            el_http_handler other, void *other_arg, char *err,
                            size_t errlen);

int el_metrics_server_port(const struct el_metrics_server *s);

/* --metrics-addr in one call: a new registry with consts (as
 * el_metrics_new) served at addr "HOST:PORT".  Returns 0; EL_EUSAGE when
 * addr is not HOST:PORT; or an error of el_metrics_serve; err says why.
 * The URL served is "http://HOST:<el_metrics_server_port>/metrics". */
int el_metrics_start(const char *addr, const char *const *consts,
                     struct el_metrics **reg, struct el_metrics_server **srv,
                     char *err, size_t errlen);

/* Stop serving, join the thread, free.  reg is not freed.  NULL: no-op. */
void el_metrics_server_close(struct el_metrics_server *s);

#ifdef __cplusplus
}
#endif
#endif
