/* status_cmd.c -- `elrun status --rdzv-endpoint=H:P --rdzv-id=ID
 * [--rdzv-backend c10d|etcd] [--watch]`: one screen about a running job,
 * read from its rendezvous (el_rdzv_status_read: round, members, restarts,
 * verdict) and its event history (the last 200 events: MIN:MAX, the
 * budget, since when each member is in, the last failure, the last
 * events) and the members' progress records (docs/EVENTS.md, "progress":
 * each node's step and step rate; the job's are the minimum across the
 * members that report, the slowest node bounding a synchronous job).
 * Members are named by their labels (el_rdzv_label), as the logs and the
 * events name them.
 * --watch redraws it every second in place on a terminal (on
 * anything else it prints one screen after the other), until SIGINT or
 * SIGTERM.  `elrun status HANDLE` stays job_cmd.c's.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/view.h"
#include "elrun/events.h"
#include "elrun/net.h"
#include "elrun/rdzv.h"

#define HISTORY 200 /* events read per screen */
#define SHOWN 8     /* of them shown          */

int cli_status_of_rdzv(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--rdzv", 6))
            return 1;
    return 0;
}

static void clock_of(int64_t ms, char *buf, size_t cap)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, cap, "%H:%M:%S", &tm);
}

static int in_list(json_t *arr, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        if (json_is_string(v) && !strcmp(json_string_value(v), name))
            return 1;
    }
    return 0;
}

/* What the history adds to the rendezvous' state. */
struct from_events {
    long long min_nodes, max_nodes, max_restarts; /* -1: unknown */
    char failure[1400];
    int64_t *since; /* per member: ms, 0 unknown */
};

static void read_history(const struct el_event *evs, int n,
                         const struct el_rdzv_status *st,
                         struct from_events *fe)
{
    fe->min_nodes = fe->max_nodes = fe->max_restarts = -1;
    fe->failure[0] = 0;
    int *open_run = calloc((size_t)(st->nmembers + 1), sizeof *open_run);
    for (int m = 0; m < st->nmembers; m++)
        open_run[m] = 1;
    for (int i = n - 1; i >= 0; i--) { /* newest first */
        json_t *f = json_loads(evs[i].fields, 0, NULL);
        if (!f)
            continue;
        if (!strcmp(evs[i].kind, "round")) {
            if (fe->min_nodes < 0) {
                fe->min_nodes =
                    json_integer_value(json_object_get(f, "min_nodes"));
                fe->max_nodes =
                    json_integer_value(json_object_get(f, "max_nodes"));
                fe->max_restarts =
                    json_integer_value(json_object_get(f, "max_restarts"));
            }
            /* By label: two agents of one host differ (an event of
             * before the labels has names only). */
            json_t *labels = json_object_get(f, "member_labels");
            json_t *members = labels ? labels : json_object_get(f, "members");
            for (int m = 0; m < st->nmembers; m++) {
                if (!open_run[m])
                    continue;
                if (in_list(members, labels ? st->members[m].label
                                            : st->members[m].name))
                    fe->since[m] = evs[i].time_ms;
                else if (fe->since[m])
                    open_run[m] = 0;
            }
        } else if (!strcmp(evs[i].kind, "failure") && !fe->failure[0] &&
                   json_is_true(json_object_get(f, "root_cause"))) {
            char line[1000];
            el_event_human(&evs[i], line, sizeof line);
            const char *what = strstr(line, "failure ");
            char when[16];
            clock_of(evs[i].time_ms, when, sizeof when);
            snprintf(fe->failure, sizeof fe->failure,
                     "%s (round %" PRId64 ", %s)", what ? what + 8 : line,
                     evs[i].round, when);
        }
        json_decref(f);
    }
    free(open_run);
}

/* A member's progress record, when it has one of the members' round. */
struct progress {
    int have;
    long long step;
    double rate; /* -1: not measured yet */
    int64_t last_ms;
};

static void read_progress(struct el_events_log *lg,
                          const struct el_rdzv_status *st, struct progress *pr)
{
    int n = st->nmembers;
    const char **ids = calloc((size_t)n + 1, sizeof *ids);
    char **texts = calloc((size_t)n + 1, sizeof *texts);
    if (!ids || !texts)
        goto out;
    for (int i = 0; i < n; i++)
        ids[i] = st->members[i].id;
    if (el_events_log_get_progress(lg, ids, n, texts))
        goto out; /* no progress shown: the events' error says why */
    for (int i = 0; i < n; i++) {
        if (!texts[i])
            continue;
        json_t *o = json_loads(texts[i], 0, NULL);
        free(texts[i]);
        json_t *step = json_object_get(o, "step"),
               *round = json_object_get(o, "round"),
               *rate = json_object_get(o, "rate");
        /* A record of an older round is of workers since restarted. */
        if (json_is_integer(step) && json_is_integer(round) &&
            json_integer_value(round) >= st->members_round) {
            pr[i].have = 1;
            pr[i].step = json_integer_value(step);
            pr[i].rate = json_is_number(rate) ? json_number_value(rate) : -1;
            pr[i].last_ms = json_integer_value(json_object_get(o, "last_ms"));
        }
        json_decref(o);
    }
out:
    free(ids);
    free(texts);
}

static void progress_line(FILE *out, const struct progress *pr, int n)
{
    int have = 0, rated = 0;
    long long step = 0;
    double rate = 0;
    int64_t last = 0;
    for (int i = 0; i < n; i++) {
        if (!pr[i].have)
            continue;
        if (!have++ || pr[i].step < step)
            step = pr[i].step;
        if (pr[i].rate >= 0 && (!rated++ || pr[i].rate < rate))
            rate = pr[i].rate;
        if (pr[i].last_ms > last)
            last = pr[i].last_ms;
    }
    if (!have) {
        fprintf(out, "step rate: not reported (the agents publish it with "
                     "--metrics-addr or --dashboard-addr, from workers that "
                     "write progress lines to ELRUN_PROGRESS_FD)\n");
        return;
    }
    double ago = (double)((int64_t)time(NULL) * 1000 - last) / 1000.0;
    char r[48] = "not measured yet";
    if (rated)
        snprintf(r, sizeof r, "%.1f steps/s", rate);
    fprintf(out,
            "step rate: %s (the slowest of %d/%d nodes), step %lld, last "
            "step %.1f s ago\n",
            r, rated ? rated : have, n, step, ago > 0 ? ago : 0);
}

static void screen(FILE *out, const struct cli_view *v,
                   const struct el_rdzv_status *st, const struct el_event *evs,
                   int n, const char *hist_err, const struct progress *pr)
{
    struct from_events fe = {0};
    fe.since = calloc((size_t)(st->nmembers + 1), sizeof *fe.since);
    read_history(evs, n, st, &fe);
    char now[16];
    clock_of(el_now_ms() > 0 ? (int64_t)time(NULL) * 1000 : 0, now, sizeof now);
    const char *state = st->closed == 1   ? "succeeded"
                        : st->closed == 2 ? "failed"
                        : st->round < 0   ? "not started (no rendezvous "
                                            "state under this id)"
                        : st->sealed      ? "running"
                                          : "forming a new round";
    fprintf(out, "job %s  (%s at %s)  %s UTC\n", v->run_id, v->backend,
            v->endpoint, now);
    fprintf(out, "state:     %s%s%s\n", state, st->closed == 2 ? ": " : "",
            st->closed == 2 ? st->closed_why : "");
    int workers = 0, live = 0;
    for (int i = 0; i < st->nmembers; i++) {
        workers += st->members[i].lws;
        live += !st->members[i].dead;
    }
    char mm[64] = "MIN:MAX unknown";
    if (fe.min_nodes > 0)
        snprintf(mm, sizeof mm, "MIN:MAX %lld:%lld", fe.min_nodes,
                 fe.max_nodes);
    if (st->round >= 0 && !st->sealed)
        fprintf(out,
                "round:     %" PRId64 " (open: %" PRId64
                " nodes joined so far)\n",
                st->round, st->joined);
    else if (st->round >= 0)
        fprintf(out, "round:     %" PRId64 "\n", st->round);
    fprintf(out, "world:     %d nodes, %d workers (%s)%s\n", st->nmembers,
            workers, mm,
            st->members_round >= 0 && st->members_round != st->round
                ? "  [members of the round before]"
                : "");
    if (fe.max_restarts >= 0) {
        long long left = fe.max_restarts - st->restarts;
        fprintf(out,
                "restarts:  %" PRId64
                " used, %lld left (--max-restarts %lld)\n",
                st->restarts, left > 0 ? left : 0, fe.max_restarts);
    } else {
        fprintf(out, "restarts:  %" PRId64 " used\n", st->restarts);
    }
    fprintf(out, "last failure: %s\n", fe.failure[0] ? fe.failure : "none");
    progress_line(out, pr, st->nmembers);
    fprintf(out, "\n  %-4s %-24s %-7s %-10s %-11s %-9s %s\n", "RANK", "NODE",
            "WORKERS", "STATE", "SINCE (UTC)", "STEP", "STEPS/S");
    for (int i = 0; i < st->nmembers; i++) {
        char since[16] = "-", step[24] = "-", rate[24] = "-";
        if (fe.since[i])
            clock_of(fe.since[i], since, sizeof since);
        if (pr[i].have)
            snprintf(step, sizeof step, "%lld", pr[i].step);
        if (pr[i].have && pr[i].rate >= 0)
            snprintf(rate, sizeof rate, "%.1f", pr[i].rate);
        fprintf(out, "  %-4d %-24s %-7d %-10s %-11s %-9s %s\n", i,
                st->members[i].label, st->members[i].lws,
                st->members[i].dead ? "dead"
                : st->closed        ? "ended"
                : st->sealed        ? "running"
                                    : "rejoining",
                since, step, rate);
    }
    (void)live;
    fprintf(out, "\nlast events:\n");
    if (hist_err)
        fprintf(out, "  (cannot read them: %s)\n", hist_err);
    else if (!n)
        fprintf(out, "  none\n");
    char line[1200];
    for (int i = n > SHOWN ? n - SHOWN : 0; i < n; i++) {
        el_event_human(&evs[i], line, sizeof line);
        fprintf(out, "  %s\n", line);
    }
    free(fe.since);
}

/* One screen into a memory buffer (drawn in one write: no flicker).
 * 0, or 1 after printing why it cannot be read. */
static int draw(const struct cli_view *v, struct el_events_log *lg, int tty,
                int clear)
{
    struct el_rdzv_status st;
    char err[1400] = "";
    if (el_rdzv_status_read(&v->rc, &st, err, sizeof err)) {
        fprintf(stderr, "elrun status: error: %s\n", err);
        return 1;
    }
    struct el_event *evs = NULL;
    int n = 0;
    int64_t last;
    const char *hist_err = NULL;
    if (el_events_log_read(lg, 0, HISTORY, &evs, &n, &last))
        hist_err = el_events_log_errmsg(lg);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) {
        el_events_free(evs, n);
        el_rdzv_status_free(&st);
        return 1;
    }
    struct progress *pr =
        calloc((size_t)st.nmembers + 1, sizeof *pr); /* all "have" 0 */
    if (pr && !hist_err)
        read_progress(lg, &st, pr);
    if (clear && tty)
        fputs("\033[H\033[2J", m);
    if (pr)
        screen(m, v, &st, evs, n, hist_err, pr);
    free(pr);
    fclose(m);
    fwrite(buf, 1, len, stdout);
    if (clear && !tty)
        fputs("--\n", stdout);
    fflush(stdout);
    free(buf);
    el_events_free(evs, n);
    el_rdzv_status_free(&st);
    return 0;
}

static const char status_usage[] =
    "usage: elrun status --rdzv-endpoint=HOST:PORT --rdzv-id=ID "
    "[--rdzv-backend c10d|etcd] [--rdzv-conf K=V,...] [--watch] "
    "(or elrun status HANDLE)";

int cli_status_main(int argc, char **argv)
{
    struct cli_view v = {.verb = "status"};
    int watch = 0;
    for (int i = 1; i < argc;) {
        int t = cli_view_flag(&v, argc, argv, &i);
        if (t < 0)
            return 2;
        if (t)
            continue;
        if (!strcmp(argv[i], "--watch") || !strcmp(argv[i], "-w"))
            watch = 1;
        else {
            fprintf(stderr, "elrun status: error: unknown argument '%s'; %s\n",
                    argv[i], status_usage);
            return 2;
        }
        i++;
    }
    int rc = cli_view_finish(&v);
    if (rc)
        return rc;
    char err[1400];
    struct el_events_log *lg;
    if ((rc = el_events_log_open(&lg, &v.rc, err, sizeof err))) {
        fprintf(stderr, "elrun status: error: %s\n", err);
        return 2;
    }
    int tty = isatty(1);
    rc = draw(&v, lg, tty, watch);
    while (watch && rc == 0 && !cli_view_signaled(&v, 1000))
        rc = draw(&v, lg, tty, 1);
    el_events_log_close(lg);
    return rc;
}
