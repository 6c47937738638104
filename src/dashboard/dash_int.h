/* dash_int.h -- how the agent feeds the dashboard's record (dashboard.c).
 *
 * One entry point for events, el__dash_event(), taking a plain struct: the
 * agent's metrics hooks (src/agent/observe.c) call it today, and a job-wide
 * event emitter can call it the same way later.  Two more calls carry state
 * that is not an event: the workers' progress and the round's members
 * (inside the ROUND event).  All are safe from any thread; a NULL
 * dashboard is a no-op, so callers need no "is it on" test.
 */
#ifndef ELRUN_DASH_INT_H
#define ELRUN_DASH_INT_H

#include <stdint.h>

#include "elrun/dashboard.h"

enum el__dash_kind {
    EL__DASH_ROUND,      /* a round completed: round, nodes, world, members */
    EL__DASH_JOIN,       /* a node in this round that was not in the last   */
    EL__DASH_LEAVE,      /* a node of the last round missing, none died     */
    EL__DASH_DEATH,      /* a node gone while its round ran: text = cause   */
    EL__DASH_FAILURE,    /* a worker's exit failed the group: rank, code/sig */
    EL__DASH_EXIT,       /* any other worker exit                          */
    EL__DASH_MEMBERSHIP, /* healthy workers stopped: other nodes wait; with
                          * node: that node is known gone (the store) */
    EL__DASH_RESTART,    /* a restart charged: restarts = used              */
    EL__DASH_RECOVERY,   /* every worker of the next round runs: seconds    */
    EL__DASH_STATE,      /* the worker group's state: text = its name       */
    EL__DASH_NKINDS
};

struct el__dash_event {
    enum el__dash_kind kind;
    int64_t t_ms;        /* wall-clock ms since the epoch; 0: now          */
    int64_t round;       /* -1: not known                                  */
    int nodes, world;    /* ROUND                                          */
    int node_rank;       /* ROUND: this node's rank                        */
    int rank;            /* FAILURE, EXIT: global rank (-1: not known)     */
    int code, sig;       /* FAILURE, EXIT: exit code, or the signal (> 0)  */
    int restarts;        /* RESTART: used so far                           */
    double seconds;      /* RECOVERY                                       */
    const char *members; /* ROUND: "id workers\n" per node in rank
                          * order, or NULL (the backend does not say)   */
    char node[200];      /* JOIN, LEAVE, DEATH (MEMBERSHIP): a member's id */
    char text[256];      /* a one-line description ("" makes one)          */
};

/* Record ev (copied).  ROUND also diffs the members with the last round's
 * and records the JOIN, LEAVE or DEATH events itself: a missing member is
 * a DEATH when a MEMBERSHIP event came since the last round or one named
 * it (among the last 16 named), else a LEAVE. */
void el__dash_event(struct el_dash *d, const struct el__dash_event *ev);

/* The job's sizes learnt while it runs (elrun dashboard: the round and
 * restart events of the job's history give them): each value < 0 keeps
 * what the record has (el_dash_new's, or an earlier call's). */
void el__dash_job_sizes(struct el_dash *d, int min_nodes, int max_nodes,
                        int nproc, int max_restarts);

/* A worker's progress line: rate < 0 when not known yet, loss NaN when
 * it reported none. */
void el__dash_progress(struct el_dash *d, int rank, int local_rank,
                       int64_t step, int64_t samples, double rate, double loss);

/* The embedded files (the generated assets.c). */
struct el__dash_asset {
    const char *name; /* "index.html" */
    const unsigned char *data;
    unsigned len;
};
extern const struct el__dash_asset el__dash_assets[];
extern const int el__dash_nassets;

#endif
