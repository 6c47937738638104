/* rdzv.h -- the rendezvous: how the agents of a job agree, round after round,
 * on who takes part, with which node rank, and where the workers' store is.
 *
 * The agent sees only this interface (as torch's RendezvousHandler):
 * el_rdzv_next() blocks until a round is complete and returns this node's
 * place in it; el_rdzv_num_nodes_waiting() tells a running agent that other
 * nodes want a new round (a peer failed or a node arrived), and
 * el_rdzv_notify_fd() becomes readable when that may have changed, so the
 * agent never polls; el_rdzv_exit_barrier() is the end-of-job barrier;
 * el_rdzv_set_closed() ends the job for everyone.
 *
 * Backends (chosen by el_rdzv_config.backend):
 *   "static"      fixed nodes (--nnodes=N --node-rank=i --master-addr/port):
 *                 node 0's agent hosts the store, all N agents wait for each
 *                 other every round.
 *   "standalone"  one node, the store embedded on a free port of 127.0.0.1
 *                 (or at the endpoint when it names a port).
 *   "c10d" with max_nodes == 1 is run as "standalone" at the endpoint;
 *                 with max_nodes > 1 it is the elastic rendezvous
 *                 (elastic.c's rules, state in the elrun store:
 *                 state_store.c; nodes join, leave and die between rounds).
 *   "etcd"        (alias "etcd-v2") the same elastic rendezvous with its
 *                 state in etcd (state_etcd.c): no agent hosts it;
 *                 each round's rank-0 agent serves the workers' store.
 * Rounds are numbered globally (0, 1, 2 ...), the same on every node, and the
 * agent passes the round to its workers as TORCHELASTIC_RESTART_COUNT, so the
 * workers' key prefix /worker/attempt_<round>/ is never reused; the store
 * keys of earlier attempts are deleted when a round completes.
 *
 * Store keys of "static" (prefix "/elrun/<run_id>/"): round, r<k>/join,
 * r<k>/node/<rank>, r<k>/lws/<rank>, r<k>/ok, exit/count, exit/done,
 * exit/left (nodes done with node 0's store); the elastic ones are in
 * docs/RENDEZVOUS.md.
 * Not thread-safe: one thread drives a rendezvous.
 */
#ifndef ELRUN_RDZV_H
#define ELRUN_RDZV_H

#include <stddef.h>
#include <stdint.h>

#include "elrun/net.h"

#ifdef __cplusplus
extern "C" {
#endif

struct el_rdzv_config {
    const char *backend; /* "static", "standalone", "c10d"            */
    const char *run_id;  /* job id ("none")                           */
    const char *host;    /* store host (static: master addr)          */
    int port;            /* store port (0: a free one, standalone)    */
    int min_nodes, max_nodes;
    int node_rank;          /* static: this node's rank                  */
    const char *local_addr; /* this node's address for MASTER_ADDR, or NULL */
    int join_timeout_ms;    /* whole next() deadline [600 s]             */
    int io_timeout_ms;      /* one store request [60 s]                  */
    /* c10d (elastic) only: */
    int last_call_timeout_ms;   /* wait after MIN nodes joined (0: none)     */
    int keep_alive_interval_ms; /* heartbeat period [5 s]                    */
    int keep_alive_max_attempt; /* missed heartbeats before a node is dead [3] */
    int is_host;                /* host the store at the endpoint: 1 yes,
                                  -1 never, 0 when the address is local     */
    int max_restarts;           /* the job's restart budget (all nodes)      */
    /* The job secret (static, c10d): agents prove it to the store, and a
     * hosted store lets only them write the job's keys (docs/RENDEZVOUS.md,
     * "Security").  Copied by el_rdzv_open; NULL: none. */
    const void *secret;
    size_t secret_len;
    /* etcd only: the members ("h:p,h2:p2" or URLs; else host:port above)
     * and how to reach them.  Strings are copied by el_rdzv_open. */
    const char *endpoints;
    struct {
        const char *prefix; /* keys live under <prefix>/<run_id>/ ["/elrun"] */
        const char *protocol; /* "http" | "https" ["http"]                 */
        const char *cacert, *cert, *key; /* TLS files (PEM)                  */
        const char *user, *password;     /* etcd auth                       */
    } etcd;
    /* Called (on the caller's thread, or the embedded store's thread) with
     * one-line notes worth logging.  May be NULL. */
    void (*on_event)(void *arg, const char *msg);
    void *event_arg;
};

/* What a completed round tells this node. */
struct el_rdzv_info {
    int64_t round;  /* global round number, from 0               */
    int node_rank;  /* GROUP_RANK                                */
    int num_nodes;  /* GROUP_WORLD_SIZE                          */
    int base_rank;  /* global rank of this node's local rank 0   */
    int world_size; /* workers in the job (sum over nodes)       */
    char store_host[EL_HOST_MAX]; /* the workers' MASTER_ADDR               */
    int store_port;      /* the workers' MASTER_PORT                  */
    int use_agent_store; /* TORCHELASTIC_USE_AGENT_STORE              */
    /* The round's nodes in rank order, one "ID WORKERS\n" line each (ID:
     * the member's "host#pid#nonce"), truncated at a line's end; "" when
     * the backend does not say (static, standalone).  The dashboard. */
    char members[4096];
};

struct el_rdzv;

/* Open the backend named by cfg->backend.  For a hosting node this starts
 * the store server on its own thread, so signals the caller wants to read
 * with signalfd must be blocked first.  Non-hosting nodes connect lazily in
 * el_rdzv_next().  Returns 0, or EL_EUSAGE (unknown backend, bad config) or
 * -errno (-EADDRINUSE ...) with a one-line reason in err. */
int el_rdzv_open(struct el_rdzv **out, const struct el_rdzv_config *cfg,
                 char *err, size_t errlen);

/* Join the next round with local_world_size workers and block until it is
 * complete.  When cancel_fd (>= 0) becomes readable the call returns
 * -ECANCELED and may simply be called again.  Other returns: -ETIMEDOUT
 * (join timeout), EL_ECLOSED (the job ended on another node), EL_EUSAGE
 * (two nodes claim the same rank), EL_EPEERLOST / -ECONNREFUSED (store
 * unreachable); el_rdzv_errmsg() says more. */
int el_rdzv_next(struct el_rdzv *r, int local_world_size, int cancel_fd,
                 struct el_rdzv_info *info);

/* How many nodes wait for a round after the current one (0 = none).
 * Returns 0 or an error (the store is lost: the job cannot go on). */
int el_rdzv_num_nodes_waiting(struct el_rdzv *r, int *n);

/* An fd that becomes readable when num_nodes_waiting may have changed or the
 * store was lost; the caller reads it with el_rdzv_ack_notify().  -1 if the
 * backend never notifies (single node). */
int el_rdzv_notify_fd(struct el_rdzv *r);
void el_rdzv_ack_notify(struct el_rdzv *r);

/* End-of-job barrier.  succeeded = 1: wait (up to timeout_ms, cancellable)
 * until every node arrived or one reported failure.  succeeded = 0: report
 * this node's failure, release the others, return at once.  Errors are for
 * logging only. */
int el_rdzv_exit_barrier(struct el_rdzv *r, int succeeded, int timeout_ms,
                         int cancel_fd);

/* This node's workers failed in the current round.  Backends that keep a
 * job-wide restart budget (c10d) charge it (once per round, whichever node
 * reports first) and start a new round for every node; they return
 * EL_ELIMIT when the budget is used up (the job is then closed as failed).
 * Backends without one return -ENOTSUP and the agent counts restarts
 * itself. */
int el_rdzv_report_failure(struct el_rdzv *r, const char *why);

/* The nodes that joined the open round so far, as this node last read them
 * while el_rdzv_next() waits ("h1/3f2a, h2/09bc": host and a short id, the
 * names of the "joined:" lines), into buf.  Returns how many, or -1 when the
 * backend does not say (static) or nothing was read yet; more than 16 are
 * counted, not named (buf is then "").  The one call that
 * may be made from another thread while el_rdzv_next() blocks. */
int el_rdzv_joiners(struct el_rdzv *r, char *buf, size_t cap);

/* Mark the job closed: nodes still joining a round get EL_ECLOSED. */
int el_rdzv_set_closed(struct el_rdzv *r);

/* Stop the store (if hosted), the notifier, and free.  NULL is a no-op. */
void el_rdzv_close(struct el_rdzv *r);

/* Why the last call failed; never NULL. */
const char *el_rdzv_errmsg(const struct el_rdzv *r);

/* The backend's name ("static" ...). */
const char *el_rdzv_backend(const struct el_rdzv *r);

/* Is 'name' a --rdzv-backend value el_rdzv_open() accepts (1) or not (0)?
 * el_rdzv_backend_list() writes those names, comma separated ("static,
 * c10d, etcd, etcd-v2"), into buf (truncated to cap), for error messages.
 * The backends are listed once, in src/rendezvous/backends.c. */
int el_rdzv_backend_known(const char *name);
void el_rdzv_backend_list(char *buf, size_t cap);

/* ---- read-only views (elrun status, the agent's events) ---- */

struct el_rdzv_member_info {
    char id[192];           /* "<name>#<pid>#<random>": one agent's life */
    char name[EL_HOST_MAX]; /* --local-addr, else the host name          */
    /* How logs, events, status and the dashboard name it: "<name>/<4 hex
     * of its id>" (el_rdzv_label): two agents of one host differ. */
    char label[EL_HOST_MAX + 8];
    int lws;  /* its workers                               */
    int dead; /* declared dead since (status only)         */
};

/* The label of the member whose id is 'id' ("<name>#<pid>#<random>"):
 * "<name>/<the random part's last 4 hex digits>", the name every log line,
 * event and screen gives it.  An id of another form is copied as it is. */
void el_rdzv_label(const char *id, char *buf, size_t cap);

/* Whose workers' failure ended round 'round', as the rendezvous recorded
 * it when that failure charged the job's restart budget (the first node to
 * report one in that round; el_rdzv_report_failure writes it before it
 * opens the next round, so every member of the next round can read it):
 * 1 with who's id, name and label (lws 0), 0 when no failure of that
 * round was charged, -ENOTSUP for backends without a job-wide budget
 * (static, standalone), or an error.  One request (agent's thread). */
int el_rdzv_failure(struct el_rdzv *r, int64_t round,
                    struct el_rdzv_member_info *who);

/* The members of this node's last round, in rank order (*m malloc'd, free
 * it), and that round in *round.  -ENOTSUP for backends without member
 * lists (static, standalone); 0 with *n = 0 before the first round. */
int el_rdzv_members(struct el_rdzv *r, int64_t *round,
                    struct el_rdzv_member_info **m, int *n);

/* Is the node with this id known dead (1) or not (0, also when unknown)?
 * May make one request to the store (agent's thread). */
int el_rdzv_is_dead(struct el_rdzv *r, const char *id);

/* A job's rendezvous as anyone can read it, without joining. */
struct el_rdzv_status {
    int64_t round;         /* the round in force, -1: none yet           */
    int sealed;            /* 'round' has its member list                */
    int64_t joined;        /* nodes that joined 'round' (open round)     */
    int64_t members_round; /* the round the members are of, -1: none     */
    struct el_rdzv_member_info *members; /* rank order, malloc'd        */
    int nmembers;
    int64_t restarts; /* restarts charged to the job's budget       */
    int closed;       /* 0 running, 1 succeeded, 2 failed           */
    char closed_why[512];
};

/* Read it for cfg (backend "c10d": host, port, secret; "etcd": endpoints
 * and cfg->etcd; run_id): a few requests of at most cfg->io_timeout_ms
 * [5 s].  No key is written.  Returns 0, EL_EUSAGE (another backend) or
 * the connection's error, with a one-line message in err. */
int el_rdzv_status_read(const struct el_rdzv_config *cfg,
                        struct el_rdzv_status *st, char *err, size_t errlen);
void el_rdzv_status_free(struct el_rdzv_status *st);

#ifdef __cplusplus
}
#endif
#endif
