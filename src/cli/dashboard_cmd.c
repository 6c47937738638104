/* dashboard_cmd.c -- `elrun dashboard`: the live dashboard of a whole job,
 * served by a process of its own that is no member of the job.
 *
 *   elrun dashboard --rdzv-endpoint=HOST:PORT --rdzv-id=ID
 *       [--dashboard-addr=HOST:PORT]   (default 127.0.0.1:0)
 *       [--nnodes=MIN:MAX] [--max-restarts=N]   (shown; not known otherwise)
 *
 * It reads the elastic rendezvous' state in the elrun store (c10d backend,
 * docs/RENDEZVOUS.md "State in the store"): `round`, `r<R>/members`,
 * `restarts`, `closed` and the `events` log (`dead <id>` lines), and feeds
 * what changed to a dashboard record (src/dashboard) served as the agents'
 * is (/, /api/job, /metrics of an empty registry).  It waits on the store
 * (a WATCH of the current round's members until it is sealed, then of
 * `events`; at most 1 s, then it reads the keys again), so a new round
 * shows at once.  A round whose members were deleted before it looked (the
 * next round's sealer deletes them) is not shown.  What happened before
 * it started is not
 * known (the store keeps no history with times): its timeline starts with
 * the round it finds.  Only reads: it needs no job secret.
 *
 * Exit: 0 on SIGTERM/SIGINT, 2 on a usage error, 1 when the store cannot
 * be reached or is lost.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli/cli.h"
#include "dashboard/dash_int.h"
#include "elrun/dashboard.h"
#include "elrun/err.h"
#include "elrun/log.h"
#include "elrun/metrics.h"
#include "elrun/net.h"
#include "elrun/store.h"

struct watch {
    struct el_store *st;
    struct el_dash *dash;
    char prefix[300];
    int64_t round;    /* the last round recorded, -1: none */
    int64_t next;     /* the first round to look for, -1: the current */
    int64_t unsealed; /* the current round, members not yet there, or -1 */
    int64_t restarts; /* the last count recorded            */
    size_t seen;      /* bytes of `events` already taken    */
    int closed;
};

static int usage(const char *msg)
{
    fprintf(stderr,
            "elrun dashboard: %s\nusage: elrun dashboard "
            "--rdzv-endpoint=HOST:PORT --rdzv-id=ID "
            "[--dashboard-addr=HOST:PORT] [--nnodes=MIN:MAX] "
            "[--max-restarts=N]\n",
            msg);
    return 2;
}

/* The value of the job's key, NUL-terminated, or NULL when missing (*rc 0)
 * or on an error (*rc < 0). */
static char *get(struct watch *w, const char *name, int *rc)
{
    char k[400];
    snprintf(k, sizeof k, "%s%s", w->prefix, name);
    void *v;
    size_t n;
    *rc = el_store_try_get(w->st, k, &v, &n);
    if (*rc == EL_ENOTFOUND) {
        *rc = 0;
        return NULL;
    }
    if (*rc < 0)
        return NULL;
    char *s = realloc(v, n + 1);
    if (!s) {
        free(v);
        *rc = -ENOMEM;
        return NULL;
    }
    s[n] = 0;
    return s;
}

/* "v1 R\n<id> <lws> <name>\n..." into "id lws\n" lines; the counts. */
static void members(const char *val, char *out, size_t cap, int *nodes,
                    int *world)
{
    *nodes = *world = 0;
    out[0] = 0;
    size_t used = 0;
    const char *p = strchr(val, '\n');
    while (p && *++p) {
        char id[200];
        int lws;
        if (sscanf(p, "%199s %d", id, &lws) == 2) {
            int k = snprintf(out + used, cap - used, "%s %d\n", id, lws);
            if (k > 0 && (size_t)k < cap - used)
                used += (size_t)k;
            (*nodes)++;
            *world += lws;
        }
        p = strchr(p, '\n');
    }
}

/* Read the job's keys and record what changed.  0 or a store error. */
static int refresh(struct watch *w)
{
    int rc;
    char *ev = get(w, "events", &rc);
    if (rc < 0)
        return rc;
    for (char *p = ev ? ev + w->seen : NULL; p && *p;) {
        char *nl = strchr(p, '\n');
        if (!nl)
            break; /* a line being written: next time */
        *nl = 0;
        if (strncmp(p, "dead ", 5) == 0) {
            /* The diff of the next round's members makes it a death. */
            struct el__dash_event e = {.kind = EL__DASH_MEMBERSHIP,
                                       .round = -1};
            snprintf(e.node, sizeof e.node, "%.199s", p + 5);
            snprintf(e.text, sizeof e.text,
                     "the store saw node %.200s go (its connection closed)",
                     p + 5);
            el__dash_event(w->dash, &e);
        } else if (strncmp(p, "closed ", 7) == 0 && !w->closed) {
            w->closed = 1;
            struct el__dash_event e = {.kind = EL__DASH_STATE, .round = -1};
            snprintf(e.text, sizeof e.text, "%s",
                     strncmp(p + 7, "ok", 2) == 0 ? "succeeded" : "failed");
            el__dash_event(w->dash, &e);
            el_log(EL_LOG_WARN, "the job is closed: %s", p + 7);
        }
        w->seen = (size_t)(nl + 1 - ev);
        p = nl + 1;
    }
    free(ev);

    char *rs = get(w, "restarts", &rc);
    if (rc < 0)
        return rc;
    int64_t used = rs ? strtoll(rs, NULL, 10) : 0;
    free(rs);
    if (used > w->restarts) {
        w->restarts = used;
        el__dash_event(w->dash,
                       &(struct el__dash_event){.kind = EL__DASH_RESTART,
                                                .round = -1,
                                                .restarts = (int)used});
    }

    char *r = get(w, "round", &rc);
    if (rc < 0 || !r)
        return rc;
    int64_t round = strtoll(r, NULL, 10);
    free(r);
    /* Every round since the last one recorded whose members are still
     * there (the sealer of round R deletes round R-1's keys: a round that
     * ended within a second may be gone, and is then not shown). */
    if (w->next < 0)
        w->next = round;
    w->unsealed = -1;
    for (int64_t k = w->next; k <= round; k++) {
        char name[64];
        snprintf(name, sizeof name, "r%" PRId64 "/members", k);
        char *m = get(w, name, &rc);
        if (rc < 0)
            return rc;
        if (!m) {
            if (k == round)
                w->unsealed = round;
            if (k == round && !w->closed) /* not sealed yet */
                el__dash_event(w->dash,
                               &(struct el__dash_event){.kind = EL__DASH_STATE,
                                                        .round = -1,
                                                        .text = "rendezvous"});
            continue;
        }
        char list[4096];
        int nodes, world;
        members(m, list, sizeof list, &nodes, &world);
        free(m);
        w->round = k;
        w->next = k + 1;
        el__dash_event(w->dash, &(struct el__dash_event){.kind = EL__DASH_ROUND,
                                                         .round = k,
                                                         .nodes = nodes,
                                                         .world = world,
                                                         .node_rank = -1,
                                                         .members = list});
        if (!w->closed)
            el__dash_event(w->dash,
                           &(struct el__dash_event){.kind = EL__DASH_STATE,
                                                    .round = -1,
                                                    .text = "running"});
        el_log(EL_LOG_WARN, "round %" PRId64 ": %d nodes, %d workers", k, nodes,
               world);
    }
    return 0;
}

int cli_dashboard_main(int argc, char **argv)
{
    el_log_init("elrun dashboard", EL_LOG_INFO);
    static const struct option lo[] = {
        {"rdzv-endpoint", required_argument, NULL, 'e'},
        {"rdzv_endpoint", required_argument, NULL, 'e'},
        {"rdzv-id", required_argument, NULL, 'i'},
        {"rdzv_id", required_argument, NULL, 'i'},
        {"dashboard-addr", required_argument, NULL, 'a'},
        {"nnodes", required_argument, NULL, 'n'},
        {"max-restarts", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    const char *endpoint = NULL, *id = NULL, *addr = "127.0.0.1:0";
    int min_nodes = -1, max_nodes = -1, max_restarts = -1, c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'e':
            endpoint = optarg;
            break;
        case 'i':
            id = optarg;
            break;
        case 'a':
            addr = optarg;
            break;
        case 'n':
            if (sscanf(optarg, "%d:%d", &min_nodes, &max_nodes) != 2) {
                if (sscanf(optarg, "%d", &min_nodes) != 1)
                    return usage("--nnodes: expected N or MIN:MAX");
                max_nodes = min_nodes;
            }
            if (min_nodes < 1 || max_nodes < min_nodes)
                return usage("--nnodes: expected 1 <= MIN <= MAX");
            break;
        case 'r':
            if (sscanf(optarg, "%d", &max_restarts) != 1 || max_restarts < 0)
                return usage("--max-restarts: expected a count >= 0");
            break;
        case 'h':
            usage("serve the live dashboard of a job on the elrun store");
            return 0;
        default:
            return usage("unknown option");
        }
    }
    if (optind < argc)
        return usage("unexpected argument (every value belongs to a flag)");
    if (!endpoint || !id)
        return usage("--rdzv-endpoint=HOST:PORT (the job's elrun store, "
                     "c10d backend) and --rdzv-id=ID are required");
    char host[EL_HOST_MAX], dhost[EL_HOST_MAX];
    int port, dport;
    if (el_addr_parse(endpoint, 29400, host, &port) < 0)
        return usage("--rdzv-endpoint: expected HOST:PORT");
    if (el_addr_parse(addr, -1, dhost, &dport) < 0)
        return usage("--dashboard-addr needs HOST:PORT (for example "
                     "127.0.0.1:8080, or port 0 for a free one)");

    /* SIGTERM/SIGINT on a signalfd, which also cancels a parked watch. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);

    struct watch w = {.round = -1, .next = -1, .unsealed = -1};
    snprintf(w.prefix, sizeof w.prefix, "/elrun/%s/", id);
    char err[512], node[256];
    if (gethostname(node, sizeof node) != 0)
        snprintf(node, sizeof node, "?");
    struct el_metrics *reg = NULL;
    struct el_metrics_server *srv = NULL;
    int rc = el_dash_new(&w.dash, &(struct el_dash_job){
                                      .run_id = id,
                                      .node = node,
                                      .role = "",
                                      .min_nodes = min_nodes,
                                      .max_nodes = max_nodes,
                                      .nproc = -1,
                                      .max_restarts = max_restarts,
                                  });
    if (rc == 0)
        rc = el_metrics_new(&reg, NULL);
    if (rc < 0) {
        el_log(EL_LOG_ERROR, "%s", el_strerror(rc));
        return 1;
    }
    int code = 1;
    if ((rc = el_store_connect(&w.st, host, port, 10000, 10000)) < 0) {
        el_log(EL_LOG_ERROR,
               "cannot reach the job's store at %s:%d: %s (is the job's "
               "--rdzv-endpoint right, and its backend c10d?)",
               host, port, el_strerror(rc));
        goto out;
    }
    el_store_set_cancel_fd(w.st, sfd);
    if ((rc = el_metrics_serve_routes(&srv, reg, dhost, dport, el_dash_handle,
                                      w.dash, err, sizeof err)) < 0) {
        el_log(EL_LOG_ERROR, "%s", err);
        goto out;
    }
    el_log(EL_LOG_INFO, "dashboard of job %s at http://%s%s%s:%d/", id,
           strchr(dhost, ':') ? "[" : "", dhost, strchr(dhost, ':') ? "]" : "",
           el_metrics_server_port(srv));
    char evk[400];
    snprintf(evk, sizeof evk, "%sevents", w.prefix);
    for (;;) {
        struct signalfd_siginfo si;
        if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
            code = 0;
            break;
        }
        if ((rc = refresh(&w)) < 0)
            break;
        /* Until the current round is sealed (a round may last less than a
         * second, and its members go with the next one), else until
         * `events` changes (new lines); at most 1 s. */
        int present;
        void *val = NULL;
        size_t len;
        char *cur = NULL, mk[400];
        if (w.unsealed >= 0) {
            snprintf(mk, sizeof mk, "%sr%" PRId64 "/members", w.prefix,
                     w.unsealed);
            rc = el_store_watch(w.st, mk, 0, NULL, 0, &present, &val, &len,
                                1000);
        } else if ((cur = get(&w, "events", &rc)) || rc == 0) {
            rc = el_store_watch(w.st, evk, cur != NULL, cur,
                                cur ? strlen(cur) : 0, &present, &val, &len,
                                1000);
        }
        free(cur);
        free(val);
        if (rc == -ECANCELED) {
            code = 0;
            break;
        }
        if (rc < 0 && rc != -ETIMEDOUT)
            break;
    }
    if (code)
        el_log(EL_LOG_ERROR, "the job's store was lost: %s",
               el_store_errmsg(w.st));
out:
    el_metrics_server_close(srv);
    el_store_close(w.st);
    el_metrics_free(reg);
    el_dash_free(w.dash);
    close(sfd);
    return code;
}
