/* events_cmd.c -- `elrun events --rdzv-endpoint=H:P --rdzv-id=ID
 * [--rdzv-backend c10d|etcd] [--json] [-f] [-n N]`: the job's event history
 * (docs/EVENTS.md) from the rendezvous' store or etcd, as human lines or
 * JSON lines; -f follows (new events as they come, waiting in the store,
 * not polling) until SIGINT/SIGTERM.  Also what status_cmd.c and
 * dashboard_cmd.c share with it (view.h): the rendezvous flags, and the
 * read-then-follow loop over the history.
 */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/job_cli.h"
#include "cli/view.h"
#include "elrun/err.h"
#include "elrun/events.h"
#include "elrun/job.h"
#include "elrun/rdzv.h"

#define usage cjob_usage /* "elrun VERB: error: ..." (job_cmd.c) */

int cli_flag_value(const char *arg, const char *name, int argc, char **argv,
                   int *i, const char **val)
{
    if (strncmp(arg, "--", 2))
        return 0;
    size_t n = strlen(name), k = 0;
    for (; k < n; k++) {
        char c = arg[2 + k];
        if (!(c == name[k] || (name[k] == '-' && c == '_')))
            return 0;
    }
    if (arg[2 + n] == '=') {
        *val = arg + 3 + n;
        return 1;
    }
    if (arg[2 + n] != 0)
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *val = argv[++*i];
    return 1;
}

int cli_view_flag(struct cli_view *v, int argc, char **argv, int *i)
{
    static const char *const names[] = {"rdzv-endpoint", "rdzv-id",
                                        "rdzv-backend", "rdzv-conf"};
    const char **dst[] = {&v->endpoint, &v->run_id, &v->backend, &v->conf};
    for (int k = 0; k < 4; k++) {
        const char *val = NULL;
        int rc = cli_flag_value(argv[*i], names[k], argc, argv, i, &val);
        if (rc < 0) {
            usage(v->verb, "--%s needs a value", names[k]);
            return -1;
        }
        if (rc) {
            *dst[k] = val;
            (*i)++;
            return 1;
        }
    }
    return 0;
}

/* v->rc from the flags; 0 or 2 after printing a usage error. */
static int view_config(struct cli_view *v)
{
    char err[1400];
    if (!v->endpoint || !*v->endpoint || !v->run_id || !*v->run_id)
        return usage(v->verb, "which job? give --rdzv-endpoint=HOST:PORT and "
                              "--rdzv-id=ID, as the job's agents were given");
    if (!v->backend)
        v->backend = "c10d";
    int etcd = !strcmp(v->backend, "etcd") || !strcmp(v->backend, "etcd-v2");
    if (!etcd && strcmp(v->backend, "c10d"))
        return usage(v->verb,
                     "--rdzv-backend=%s: the history and status are kept "
                     "by the c10d and etcd rendezvous only",
                     v->backend);
    if (el_opts_rdzv_conf(v->conf ? v->conf : "", "--rdzv-conf", &v->oc, err,
                          sizeof err))
        return usage(v->verb, "%s", err);
    struct el_rdzv_config *rc = &v->rc;
    memset(rc, 0, sizeof *rc);
    rc->backend = v->backend;
    rc->run_id = v->run_id;
    rc->io_timeout_ms =
        v->oc.read_timeout > 0 ? (int)(v->oc.read_timeout * 1000) : 3000;
    if (etcd) {
        rc->endpoints = v->endpoint;
        el_opts_etcd_config(&v->oc, rc);
    } else {
        if (el_addr_parse(v->endpoint, 29400, v->host, &rc->port) != 0)
            return usage(v->verb, "--rdzv-endpoint=%s: expected HOST:PORT",
                         v->endpoint);
        rc->host = v->host;
        const char *path = v->oc.secret_file;
        if (!path || !*path)
            path = getenv("ELRUN_SECRET_FILE");
        if (path && *path) {
            if (el_store_read_secret(path, v->secret, sizeof v->secret,
                                     &rc->secret_len, err, sizeof err))
                return usage(v->verb, "%s", err);
            rc->secret = v->secret;
        }
    }
    return 0;
}

int cli_view_finish(struct cli_view *v)
{
    v->sigfd = -1;
    int rc = v->handle && !v->endpoint && !v->run_id ? cli_view_handle(v) : 0;
    if (rc || (rc = view_config(v)))
        return rc;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    v->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    return 0;
}

/* The first line of dir/name into buf ("" if none). */
static void read_line(const char *dir, const char *name, char *buf, size_t cap)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    buf[0] = 0;
    FILE *f = fopen(p, "r");
    if (!f)
        return;
    if (fgets(buf, (int)cap, f))
        buf[strcspn(buf, "\n")] = 0;
    fclose(f);
}

int cli_view_handle(struct cli_view *v)
{
    struct el_job_handle h;
    char err[1400], home[3800], dir[4200];
    if (el_job_parse_handle(v->handle, &h, err, sizeof err))
        return usage(v->verb, "%s", err);
    if (strcmp(h.sched, "local"))
        return usage(v->verb,
                     "%s: the endpoint of a %s job is not recorded here; "
                     "give --rdzv-endpoint and --rdzv-id",
                     v->handle, h.sched);
    cjob_home(home, sizeof home);
    snprintf(dir, sizeof dir, "%s/jobs/local/%s", home, h.id);
    char p[4300];
    snprintf(p, sizeof p, "%s/job.json", dir);
    json_t *spec = json_load_file(p, 0, NULL);
    if (!spec)
        return usage(v->verb,
                     "no job %s: nothing at %s (elrun list shows the jobs)",
                     v->handle, dir);
    const char *be = json_string_value(json_object_get(spec, "rdzv_backend"));
    const char *ep = json_string_value(json_object_get(spec, "rdzv_endpoint"));
    snprintf(v->h_backend, sizeof v->h_backend, "%s", be ? be : "c10d");
    if (!strncmp(v->h_backend, "etcd", 4))
        snprintf(v->h_endpoint, sizeof v->h_endpoint, "%s", ep ? ep : "");
    else
        read_line(dir, "store.addr", v->h_endpoint, sizeof v->h_endpoint);
    json_decref(spec);
    if (!v->h_endpoint[0])
        return usage(v->verb,
                     "%s: a one-node job's store is its agent's, on a "
                     "port the job does not record; give --rdzv-endpoint "
                     "and --rdzv-id",
                     v->handle);
    /* The supervisor runs attempt N as rendezvous id <id>-N; "restarts"
     * holds at least the newest N: take the newest with a rendezvous. */
    char line[64];
    read_line(dir, "restarts", line, sizeof line);
    v->endpoint = v->h_endpoint;
    v->backend = v->h_backend;
    v->run_id = v->h_id;
    for (int n = atoi(line); n >= 0; n--) {
        snprintf(v->h_id, sizeof v->h_id, "%s-%d", h.id, n);
        struct el_rdzv_status st;
        if (n == 0 || view_config(v))
            break;
        if (el_rdzv_status_read(&v->rc, &st, err, sizeof err) == 0) {
            int found = st.round >= 0;
            el_rdzv_status_free(&st);
            if (found)
                break;
        }
    }
    return 0;
}

int cli_view_signaled(struct cli_view *v, int ms)
{
    struct pollfd p = {.fd = v->sigfd, .events = POLLIN};
    return v->sigfd >= 0 && poll(&p, 1, ms) > 0;
}

int cli_view_follow(struct cli_view *v, struct el_events_log *lg, int last_n,
                    int follow,
                    void (*fn)(void *arg, const struct el_event *evs, int n),
                    void *arg)
{
    el_events_log_set_cancel_fd(lg, v->sigfd);
    int64_t last = 0;
    struct el_event *evs;
    int n, rc;
    if ((rc = el_events_log_read(lg, 0, last_n, &evs, &n, &last))) {
        fprintf(stderr, "elrun %s: error: %s\n", v->verb,
                el_events_log_errmsg(lg));
        return 1;
    }
    fn(arg, evs, n);
    el_events_free(evs, n);
    while (follow) {
        rc = el_events_log_wait(lg, last, 5000);
        if (rc == -ECANCELED || cli_view_signaled(v, 0))
            break;
        if (rc && rc != -ETIMEDOUT) {
            fprintf(stderr,
                    "elrun %s: error: %s (the job ended, or its store "
                    "is gone)\n",
                    v->verb, el_events_log_errmsg(lg));
            return 1;
        }
        if ((rc = el_events_log_read(lg, last, 0, &evs, &n, &last))) {
            fprintf(stderr, "elrun %s: error: %s\n", v->verb,
                    el_events_log_errmsg(lg));
            return 1;
        }
        fn(arg, evs, n);
        el_events_free(evs, n);
    }
    return 0;
}

/* ---- elrun events ---- */

static void print(void *arg, const struct el_event *evs, int n)
{
    int as_json = *(const int *)arg;
    char line[4096];
    for (int i = 0; i < n; i++) {
        if (as_json) {
            char *s = el_event_encode(&evs[i]);
            if (s)
                puts(s);
            free(s);
        } else {
            el_event_human(&evs[i], line, sizeof line);
            puts(line);
        }
    }
    fflush(stdout);
}

static const char events_usage[] =
    "usage: elrun events (--rdzv-endpoint=HOST:PORT --rdzv-id=ID | HANDLE) "
    "[--rdzv-backend c10d|etcd] [--rdzv-conf K=V,...] [--json] [-f] [-n N]";

int cli_events_main(int argc, char **argv)
{
    struct cli_view v = {.verb = "events"};
    int as_json = 0, follow = 0, last_n = 0;
    for (int i = 1; i < argc;) {
        int t = cli_view_flag(&v, argc, argv, &i);
        if (t < 0)
            return 2;
        if (t)
            continue;
        const char *a = argv[i];
        if (!strcmp(a, "--json"))
            as_json = 1;
        else if (!strcmp(a, "-f") || !strcmp(a, "--follow"))
            follow = 1;
        else if (!strcmp(a, "-n") && i + 1 < argc) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n <= 0)
                return usage("events", "-n %s: expected a count > 0", argv[i]);
            last_n = (int)n;
        } else if (a[0] != '-' && !v.handle) {
            v.handle = a;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("%s\n(docs/EVENTS.md)\n", events_usage);
            return 0;
        } else
            return usage("events", "unknown argument '%s'; %s", a,
                         events_usage);
        i++;
    }
    int rc = cli_view_finish(&v);
    if (rc)
        return rc;
    char err[1400];
    struct el_events_log *lg;
    if ((rc = el_events_log_open(&lg, &v.rc, err, sizeof err)))
        return usage("events", "%s", err);
    int code = cli_view_follow(&v, lg, last_n, follow, print, &as_json);
    el_events_log_close(lg);
    return code;
}
