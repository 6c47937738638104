/* events_fill.c -- fake a big job in a real elrun store for bench/events.sh:
 * the rendezvous state of round R with N members (the keys state_store.c
 * writes: round, r<R>/members, restarts, events with one death) and a
 * history of E events as agents write them (el_events_log_append): a
 * round event listing all N members every 10th event, failures, restarts
 * and recoveries between.  `elrun status` of that job is then timed.
 *
 *   events_fill HOST PORT RUN_ID NODES EVENTS
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elrun/events.h"
#include "elrun/rdzv.h"
#include "elrun/store.h"

static int set(struct el_store *s, const char *id, const char *k, const char *v)
{
    char key[512];
    snprintf(key, sizeof key, "/elrun/%s/%s", id, k);
    int rc = el_store_set(s, key, v, strlen(v));
    if (rc)
        fprintf(stderr, "set %s: %s\n", key, el_store_errmsg(s));
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: events_fill HOST PORT RUN_ID NODES EVENTS\n");
        return 2;
    }
    const char *host = argv[1], *id = argv[3];
    int port = atoi(argv[2]), nodes = atoi(argv[4]), nev = atoi(argv[5]);
    struct el_store *s;
    if (el_store_connect(&s, host, port, 5000, 5000))
        return 1;
    const int64_t round = 7;
    size_t cap = 64 + (size_t)nodes * 96;
    char *list = malloc(cap), *names = malloc(cap);
    size_t l = (size_t)snprintf(list, cap, "v1 %" PRId64 "\n", round);
    size_t nl = 0;
    for (int i = 0; i < nodes; i++) {
        l +=
            (size_t)snprintf(list + l, cap - l,
                             "node%03d#%d#abcdef 8 node%03d\n", i, 1000 + i, i);
        nl += (size_t)snprintf(names + nl, cap - nl, "%s\"node%03d\"",
                               i ? "," : "", i);
    }
    char r[32];
    snprintf(r, sizeof r, "%" PRId64, round);
    int rc = set(s, id, "round", r) || set(s, id, "r7/members", list) ||
             set(s, id, "restarts", "2") ||
             set(s, id, "events", "round 7\ndead node999#1#x\n");
    el_store_close(s);
    if (rc)
        return 1;
    struct el_rdzv_config cfg = {
        .backend = "c10d", .host = host, .port = port, .run_id = id};
    struct el_events_log *lg;
    char err[300];
    if (el_events_log_open(&lg, &cfg, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    size_t fcap = nl + 512;
    char *fields = malloc(fcap);
    for (int i = 0; i < nev; i++) {
        struct el_event ev = {.time_ms = 1796126400000LL + i * 1000,
                              .round = i / 10};
        snprintf(ev.node, sizeof ev.node, "node%03d", i % nodes);
        if (i % 10 == 0) {
            snprintf(ev.kind, sizeof ev.kind, "round");
            snprintf(fields, fcap,
                     "{\"round\":%d,\"nodes\":%d,\"world\":%d,\"lws\":8,"
                     "\"members\":[%s],\"joined\":[],\"left\":[],\"died\":[],"
                     "\"cause\":\"restart\",\"min_nodes\":%d,\"max_nodes\":%d,"
                     "\"max_restarts\":10}",
                     i / 10, nodes, nodes * 8, names, nodes / 2, nodes);
        } else if (i % 10 == 1) {
            snprintf(ev.kind, sizeof ev.kind, "failure");
            snprintf(fields, fcap,
                     "{\"rank\":%d,\"local_rank\":3,\"pid\":4242,\"host\":"
                     "\"node%03d\",\"exitcode\":1,\"signal\":0,\"signal_name\":"
                     "\"\",\"message\":\"RuntimeError: NCCL timeout\","
                     "\"ran_ms\":60000,\"root_cause\":true}",
                     i % (nodes * 8), i % nodes);
        } else {
            snprintf(ev.kind, sizeof ev.kind, "recovery");
            snprintf(fields, fcap,
                     "{\"seconds\":1.5,\"cause\":\"membership\"}");
        }
        ev.fields = fields;
        if (el_events_log_append(lg, &ev)) {
            fprintf(stderr, "%s\n", el_events_log_errmsg(lg));
            return 1;
        }
    }
    el_events_log_close(lg);
    free(fields);
    free(list);
    free(names);
    return 0;
}
