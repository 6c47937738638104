/* dashboard_cmd.c -- `elrun dashboard`: the live dashboard of a whole job,
 * served by a process of its own that is no member of the job.
 *
 *   elrun dashboard --rdzv-endpoint=HOST:PORT --rdzv-id=ID
 *       [--rdzv-backend c10d|etcd] [--rdzv-conf K=V,...]
 *       [--dashboard-addr=HOST:PORT]   (default 127.0.0.1:0)
 *
 * Its only source is the job's event history (docs/EVENTS.md): read from
 * the start, then followed as `elrun events -f` does (cli_view_follow,
 * events_cmd.c), each event translated into el__dash_event calls on a
 * dashboard record of its own (src/dashboard), served as the agents' is
 * (/, /api/job, /metrics of an empty registry).  So it knows what happened
 * before it started, on either backend, and nothing of the rendezvous'
 * own keys.  The sizes (MIN:MAX nodes, the restart budget) come from the
 * round and restart events; members are named by their labels (the round
 * events' member_labels; names in events of before the labels).  Only reads: a c10d job's secret is needed
 * only when the job has one (--rdzv-conf secret_file=PATH).
 *
 * Exit: 0 on SIGTERM/SIGINT, 2 on a usage error, 1 when the history
 * cannot be read or is lost.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/job_cli.h"
#include "cli/view.h"
#include "dashboard/dash_int.h"
#include "elrun/dashboard.h"
#include "elrun/err.h"
#include "elrun/events.h"
#include "elrun/log.h"
#include "elrun/metrics.h"
#include "elrun/net.h"

static const char dash_usage[] =
    "usage: elrun dashboard --rdzv-endpoint=HOST:PORT --rdzv-id=ID "
    "[--rdzv-backend c10d|etcd] [--rdzv-conf K=V,...] "
    "[--dashboard-addr=HOST:PORT]";

struct feed {
    struct el_dash *dash;
    int ended; /* an `end` event came: the state stays its outcome */
};

static int num(json_t *f, const char *key, int dflt)
{
    json_t *v = json_object_get(f, key);
    return json_is_integer(v) ? (int)json_integer_value(v) : dflt;
}

static const char *str(json_t *f, const char *key)
{
    const char *s = json_string_value(json_object_get(f, key));
    return s ? s : "";
}

/* A round event's list "key" by label ("member_labels", "died_labels"),
 * or by name ("members", "died") in an event of before the labels. */
static json_t *labels(json_t *f, const char *key, const char *old)
{
    json_t *l = json_object_get(f, key);
    return json_is_array(l) ? l : json_object_get(f, old);
}

/* "label workers\n" per member of a round event, in rank order (malloc'd,
 * NULL when out of memory).  The event gives the workers of its emitter
 * only (lws): every member is given them when nodes * lws is the world,
 * else 0 (not known). */
static char *member_list(json_t *f)
{
    json_t *m = labels(f, "member_labels", "members"), *x;
    int lws = num(f, "lws", 0), nodes = num(f, "nodes", 0);
    int each = lws > 0 && nodes * lws == num(f, "world", -1) ? lws : 0;
    size_t cap = 1, i;
    json_array_foreach(m, i, x)
    {
        const char *name = json_string_value(x);
        cap += (name ? strlen(name) : 0) + 16;
    }
    char *out = malloc(cap), *p = out;
    if (!out)
        return NULL;
    *p = 0;
    json_array_foreach(m, i, x)
    {
        const char *name = json_string_value(x);
        if (name && *name)
            p += snprintf(p, cap - (size_t)(p - out), "%s %d\n", name, each);
    }
    return out;
}

static void state(struct feed *fd, int64_t t_ms, const char *name)
{
    struct el__dash_event e = {
        .kind = EL__DASH_STATE, .t_ms = t_ms, .round = -1};
    snprintf(e.text, sizeof e.text, "%s", name);
    el__dash_event(fd->dash, &e);
}

/* One event of the history into the record.  A round event's `died`
 * members are named gone first (MEMBERSHIP with node), so the record's
 * diff of the members makes them DEATH, the others missing LEAVE. */
static void translate(struct feed *fd, const struct el_event *ev)
{
    json_t *f = json_loads(ev->fields, 0, NULL);
    if (!f)
        return;
    struct el__dash_event e = {
        .t_ms = ev->time_ms, .round = ev->round, .node_rank = -1, .rank = -1};
    const char *k = ev->kind;
    if (!strcmp(k, "round")) {
        el__dash_job_sizes(fd->dash, num(f, "min_nodes", -1),
                           num(f, "max_nodes", -1), -1,
                           num(f, "max_restarts", -1));
        json_t *x;
        size_t i;
        json_array_foreach(labels(f, "died_labels", "died"), i, x)
        {
            struct el__dash_event g = {.kind = EL__DASH_MEMBERSHIP,
                                       .t_ms = ev->time_ms,
                                       .round = ev->round};
            const char *name = json_string_value(x);
            snprintf(g.node, sizeof g.node, "%s", name ? name : "");
            snprintf(g.text, sizeof g.text,
                     "node %.180s declared dead by the rendezvous", g.node);
            el__dash_event(fd->dash, &g);
        }
        char *list = member_list(f);
        e.kind = EL__DASH_ROUND;
        e.nodes = num(f, "nodes", 0);
        e.world = num(f, "world", 0);
        e.members = list;
        snprintf(e.text, sizeof e.text, "round %lld: %d nodes, %d workers (%s)",
                 (long long)ev->round, e.nodes, e.world, str(f, "cause"));
        el__dash_event(fd->dash, &e);
        free(list);
        if (!fd->ended)
            state(fd, ev->time_ms, "running");
        el_log(EL_LOG_INFO, "%s", e.text);
    } else if (!strcmp(k, "failure")) {
        e.kind = EL__DASH_FAILURE;
        e.rank = num(f, "rank", -1);
        e.sig = num(f, "signal", 0);
        e.code = num(f, "exitcode", 0);
        char how[48];
        if (e.sig > 0)
            snprintf(how, sizeof how, "%s", str(f, "signal_name"));
        else
            snprintf(how, sizeof how, "exit code %d", e.code);
        snprintf(e.text, sizeof e.text,
                 "worker rank %d on %.60s failed (%s): %s", e.rank,
                 ev->label[0] ? ev->label : ev->node, how, str(f, "message"));
        el__dash_event(fd->dash, &e);
    } else if (!strcmp(k, "restart")) {
        el__dash_job_sizes(fd->dash, -1, -1, -1, num(f, "max_restarts", -1));
        e.kind = EL__DASH_RESTART;
        e.restarts = num(f, "restarts", 0);
        el__dash_event(fd->dash, &e);
        if (!fd->ended)
            state(fd, ev->time_ms, "restarting");
    } else if (!strcmp(k, "recovery")) {
        e.kind = EL__DASH_RECOVERY;
        e.seconds = json_number_value(json_object_get(f, "seconds"));
        el__dash_event(fd->dash, &e);
    } else if (!strcmp(k, "end")) {
        fd->ended = 1;
        const char *out = str(f, "outcome");
        state(fd, ev->time_ms,
              !strcmp(out, "succeeded") ? "succeeded" : "failed");
        el_log(EL_LOG_INFO, "the job ended: %s%s%s", out,
               *str(f, "why") ? ": " : "", str(f, "why"));
    }
    /* "leave": the next round's members show the node gone. */
    json_decref(f);
}

static void feed_batch(void *arg, const struct el_event *evs, int n)
{
    for (int i = 0; i < n; i++)
        translate(arg, &evs[i]);
}

int cli_dashboard_main(int argc, char **argv)
{
    el_log_init("elrun dashboard", EL_LOG_INFO);
    struct cli_view v = {.verb = "dashboard"};
    const char *addr = "127.0.0.1:0";
    for (int i = 1; i < argc;) {
        int t = cli_view_flag(&v, argc, argv, &i);
        if (t < 0)
            return 2;
        if (t)
            continue;
        const char *a = argv[i], *val;
        int d = cli_flag_value(a, "dashboard-addr", argc, argv, &i, &val);
        if (d < 0)
            return cjob_usage("dashboard", "--dashboard-addr needs a value");
        if (d)
            addr = val;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("%s\n(docs/DASHBOARD.md)\n", dash_usage);
            return 0;
        } else
            return cjob_usage("dashboard", "unknown argument '%s'; %s", a,
                              dash_usage);
        i++;
    }
    char dhost[EL_HOST_MAX], err[1400];
    int dport;
    if (el_addr_parse(addr, -1, dhost, &dport) < 0)
        return cjob_usage("dashboard",
                          "--dashboard-addr needs HOST:PORT (for example "
                          "127.0.0.1:8080, or port 0 for a free one), got '%s'",
                          addr);
    int rc = cli_view_finish(&v); /* SIGINT/SIGTERM blocked from here on */
    if (rc)
        return rc;
    struct el_events_log *lg;
    if ((rc = el_events_log_open(&lg, &v.rc, err, sizeof err)))
        return cjob_usage("dashboard", "%s", err);
    el_events_log_set_cancel_fd(lg, v.sigfd);
    int64_t last;
    if ((rc = el_events_log_last(lg, &last)) < 0) {
        int code = rc == -ECANCELED ? 0 : 1;
        if (code)
            fprintf(stderr, "elrun dashboard: error: %s\n",
                    el_events_log_errmsg(lg));
        el_events_log_close(lg);
        return code;
    }

    char node[256];
    if (gethostname(node, sizeof node) != 0)
        snprintf(node, sizeof node, "?");
    struct feed fd = {0};
    struct el_metrics *reg = NULL;
    struct el_metrics_server *srv = NULL;
    int code = 1;
    rc = el_dash_new(&fd.dash, &(struct el_dash_job){.run_id = v.run_id,
                                                     .node = node,
                                                     .role = "",
                                                     .min_nodes = -1,
                                                     .max_nodes = -1,
                                                     .nproc = -1,
                                                     .max_restarts = -1});
    if (rc == 0)
        rc = el_metrics_new(&reg, NULL);
    if (rc < 0) {
        el_log(EL_LOG_ERROR, "%s", el_strerror(rc));
        goto out;
    }
    /* The server's thread starts with SIGINT/SIGTERM blocked too. */
    if (el_metrics_serve_routes(&srv, reg, dhost, dport, el_dash_handle,
                                fd.dash, err, sizeof err) < 0) {
        el_log(EL_LOG_ERROR, "%s", err);
        goto out;
    }
    el_log(EL_LOG_INFO, "dashboard of job %s at http://%s%s%s:%d/", v.run_id,
           strchr(dhost, ':') ? "[" : "", dhost, strchr(dhost, ':') ? "]" : "",
           el_metrics_server_port(srv));
    code = cli_view_follow(&v, lg, 0, 1, feed_batch, &fd);
out:
    el_metrics_server_close(srv);
    el_metrics_free(reg);
    el_dash_free(fd.dash);
    el_events_log_close(lg);
    return code;
}
