/* dashboard.h -- the agent's live dashboard (docs/DASHBOARD.md): a bounded
 * in-memory record of the job as this agent sees it (world size over time,
 * the round's members, events, the workers' progress) rendered as JSON
 * (GET /api/job) and one embedded web page (GET /), served by the metrics
 * server (el_metrics_serve_routes) on its own thread.
 *
 *   struct el_dash *d;
 *   el_dash_new(&d, &(struct el_dash_job){.run_id = "j1", ...});
 *   el_metrics_serve_routes(&srv, reg, host, port, el_dash_handle, d, ...);
 *   cfg.dashboard = d;          // the agent feeds it (src/agent/observe.c)
 *
 * Bounds: at most EL_DASH_MAX_EVENTS events and EL_DASH_MAX_POINTS points of
 * the world-size timeline are kept; older ones are dropped (and counted).
 *
 * Threads: every function is safe from any thread (one mutex, held for a
 * copy or a render).  Errors: 0 or a negative code (-ENOMEM, -EINVAL).
 */
#ifndef ELRUN_DASHBOARD_H
#define ELRUN_DASHBOARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EL_DASH_MAX_EVENTS 512
#define EL_DASH_MAX_POINTS 1024
#define EL_DASH_MAX_RANKS 256

struct el_http_request;
struct el_http_response;

/* What does not change during the job.  Strings are copied. */
struct el_dash_job {
    const char *run_id, *node, *role;
    int min_nodes, max_nodes, nproc, max_restarts;
};

struct el_dash;

int el_dash_new(struct el_dash **out, const struct el_dash_job *job);

/* No thread may use it any more (close the server first).  NULL: no-op. */
void el_dash_free(struct el_dash *d);

/* The record as the JSON document of GET /api/job (docs/DASHBOARD.md).
 * *out is malloc'd, NUL-terminated, *len bytes.  Returns 0 or -ENOMEM. */
int el_dash_json(struct el_dash *d, char **out, size_t *len);

/* An el_http_handler (arg: the struct el_dash) for "/", "/index.html",
 * the page's assets, "/api/job"; anything else is a 404 naming the
 * routes.  It never blocks. */
void el_dash_handle(void *arg, const struct el_http_request *rq,
                    struct el_http_response *rs);

/* The embedded assets (src/dashboard/assets, generated at build time):
 * how many files and how many bytes in all. */
void el_dash_assets_size(int *files, size_t *bytes);

#ifdef __cplusplus
}
#endif
#endif
