/* elastic.h -- the elastic rendezvous (private to src/rendezvous).
 *
 * The rules (elastic.c) are written once: joining, the last call, sealing,
 * hot spares, scale-up, the death of a member, the restart budget, the exit
 * barrier, and what a node declared dead does.  They run over a table of
 * state primitives (struct el__rdzv_state_ops) that a backend implements
 * with one key per joiner: state_store.c on the elrun store, state_etcd.c
 * on etcd, and an in-memory one in tests/unit/test_rdzv_rules.c.
 *
 * Also here (members.c): this node's place in the job (id, name, last round
 * and rank), member lists (text form, rank order), expect lists, and the one
 * log line per change of membership.
 */
#ifndef ELRUN_RDZV_ELASTIC_H
#define ELRUN_RDZV_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "elrun/net.h"
#include "elrun/rdzv.h"
#include "rendezvous/rdzv_impl.h"

#define EL__RDZV_ID_MAX 192
/* A node as lines name it: "<name>/<4 hex of its id>" (two agents on one
 * host, or one agent before and after it was declared dead, differ). */
#define EL__RDZV_LABEL_MAX (EL_HOST_MAX + 8)

struct el__rdzv_member {
    char id[EL__RDZV_ID_MAX]; /* "<name>#<pid>#<random>": one agent's life  */
    char name[EL_HOST_MAX];   /* --local-addr, else the hostname           */
    int lws;                  /* its local world size                      */
    int prev_rank;            /* its rank in the round before, -1 if none  */
    int64_t seq;              /* arrival order (lower = earlier)           */
    int port;                 /* etcd: the port of its workers' store      */
    int64_t lease;            /* etcd: its lease                           */
};

/* This node as the elastic protocol sees it. */
struct el__rdzv_node {
    char id[EL__RDZV_ID_MAX]; /* "<name>#<pid>#<random>"                   */
    char name[EL_HOST_MAX];   /* --local-addr, else the hostname           */
    int64_t round;            /* last round this node was a member of      */
    int rank;                 /* its rank in that round, -1 if none        */
    struct el__rdzv_member *members; /* that round's members, rank order    */
    int nmembers;
    int64_t joined_round; /* round joined but not yet sealed, or -1    */
    int spare_logged;     /* "waits as a hot spare" said this round    */
    /* How lines name this node: el__rdzv_label(id), "<name>/<4 hex>". */
    char label[EL__RDZV_LABEL_MAX];
    void (*on_event)(void *arg, const char *msg);
    void *event_arg;
};

/* Fill in the id and name (from cfg->local_addr or the hostname), no round
 * yet, and the event callback. */
void el__rdzv_node_init(struct el__rdzv_node *self,
                        const struct el_rdzv_config *cfg);
void el__rdzv_node_free(struct el__rdzv_node *self);

/* A new id for this node ("<name>#<pid>#<random>"): after it was declared
 * dead, it rejoins as a new member.  Sets the label too. */
void el__rdzv_node_new_id(struct el__rdzv_node *self);

/* The label of the member whose id is 'id' ("<name>#<pid>#<random>"):
 * "<name>/<the random part's last 4 hex digits>", the one name of a node in
 * every line (joined, left, gone, waiting).  An id of another form is
 * copied as it is. */
void el__rdzv_label(const char *id, char *buf, size_t cap);

/* A one-line note to the caller's on_event (if any). */
void el__rdzv_note(const struct el__rdzv_node *self, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Round 'round' is sealed with m (n members, malloc'd; self takes it) and
 * this node at index 'me': log "round R: N nodes (joined: ...; left: ...)",
 * make it this node's round, and fill info's round and ranks (the caller
 * fills in the workers' store). */
void el__rdzv_take_round(struct el__rdzv_node *self, int64_t round,
                         struct el__rdzv_member *m, int n, int me,
                         struct el_rdzv_info *info);

/* Wall-clock ms (round deadlines are shared between hosts). */
long long el__rdzv_wall_ms(void);

/* Parse a sealed list, "v1 <round>\n" then
 * "<id> <lws> <name>[ <port> <lease>]\n" per member in rank order.  *out is malloc'd.  EL_EFORMAT if malformed. */
int el__rdzv_parse_members(const char *text, struct el__rdzv_member **out,
                           int *n);

/* The text parse_members reads, for round 'round'; with_store adds each
 * member's store port and lease.  malloc'd; *len gets its length.  NULL if out of memory. */
char *el__rdzv_format_members(int64_t round, const struct el__rdzv_member *m,
                              int n, int with_store, size_t *len);

/* The member list that seals a round from its n live joiners (any order):
 * ordered by el__rdzv_member_order, the first max_nodes kept, formatted as
 * above into *list (malloc'd) and *len.  Returns 0, 1 if fewer than
 * min_nodes joined (nothing written), or -ENOMEM.  Sorts m in place. */
int el__rdzv_seal_list(int64_t round, struct el__rdzv_member *m, int n,
                       int min_nodes, int max_nodes, int with_store,
                       char **list, size_t *len);

/* qsort order of a new round: the previous round's members first in their
 * old order (stable ranks), then newcomers by arrival. */
int el__rdzv_member_order(const void *a, const void *b);

/* Names of the members that joined (in 'now', not in 'old') and that left,
 * comma separated ("-" if none), for the one line per round change. */
void el__rdzv_round_change(const struct el__rdzv_member *old, int nold,
                           const struct el__rdzv_member *now, int n,
                           char *joined, size_t jcap, char *left, size_t lcap);

/* The expect list of a new round, "<count>\n<id>\n...": the members of m
 * for which alive(arg, id) says 1 (all if alive is NULL), plus 'extra' if
 * not NULL.  malloc'd; NULL if out of memory. */
char *el__rdzv_expect_list(const struct el__rdzv_member *m, int n,
                           const char *extra,
                           int (*alive)(void *arg, const char *id), void *arg);

/* The job's failure record, "<round> <id>": parse val (len bytes): 1 with
 * *round and id, 0 when it is not one (treated as no record). */
int el__rdzv_parse_failure(const char *val, size_t len, int64_t *round,
                           char *id, size_t cap);

/* Is 'id' on a line of an expect list? */
int el__rdzv_expected(const char *list, const char *id);

/* ------------------------------------------------------------------------
 * The rules over a state backend.
 *
 * A backend embeds struct el__rdzv_elastic as its first member (which embeds
 * struct el_rdzv first), fills in its settings with el__rdzv_elastic_init()
 * and 'ops', and uses el__rdzv_elastic_{next,num_nodes_waiting,
 * report_failure,exit_barrier,set_closed} as its el_rdzv_ops.  Every
 * primitive runs on the caller's thread, returns 0 or a negative code with
 * the message set in e->base.errmsg (el__rdzv_fail), and may block for one
 * request (waits: at most 'ms', cancellable through the cancel_fd given to
 * enter()).
 */

struct el__rdzv_elastic;

/* What one read of an open round tells (read_round, then count). */
struct el__rdzv_round {
    char *members;       /* the sealed list (malloc'd), NULL if open  */
    int64_t deadline;    /* wall-clock ms it completes at, -1: none   */
    int sealing;         /* another node holds the right to seal it   */
    int64_t rev;         /* backend token: the state as read          */
    int64_t joiners;     /* count(): nodes that joined                */
    int64_t expected_in; /* count(): expected nodes that joined       */
    int64_t jrev;        /* count(): backend token of the joiners     */
};

enum el__rdzv_wait {
    EL__RDZV_WAIT_ROUND,   /* the job's round moves past 'round'        */
    EL__RDZV_WAIT_STATE,   /* the open round's state (deadline set,
                                * sealer, member list) changes from st      */
    EL__RDZV_WAIT_JOINERS, /* someone joins after st->joiners / jrev    */
};

struct el__rdzv_state_ops {
    /* Around every public call: connect, remember cancel_fd for the waits,
     * and fail at once (EL_EPEERLOST) if the state is lost for good (store
     * gone, etcd lease gone).  A node merely declared dead is not lost: the
     * rules see it through is_dead(self).  leave() undoes what enter did to
     * the connection (cancel fd). */
    int (*enter)(struct el__rdzv_elastic *e, int cancel_fd, long long deadline);
    void (*leave)(struct el__rdzv_elastic *e);
    /* The round in force (created as 0 if none) and a token for
     * WAIT_ROUND; returns 1 if the job is closed (errmsg: why). */
    int (*read_job)(struct el__rdzv_elastic *e, int64_t *round, int64_t *rev);
    /* Raise the round to at least target; *now gets the round in force.
     * If m != NULL and round target has no expect list yet, first write
     * one: the live nodes of m (n of them) plus 'extra' (may be NULL). */
    int (*raise_round)(struct el__rdzv_elastic *e, int64_t target,
                       const struct el__rdzv_member *m, int n,
                       const char *extra, int64_t *now);
    /* The open round's member list, deadline, sealer (st: see above). */
    int (*read_round)(struct el__rdzv_elastic *e, int64_t round,
                      struct el__rdzv_round *st);
    /* Publish this node's record in round (its id, lws, previous rank,
     * name and the backend's extras) and count it in if the round expects
     * it.  *arrival: its place in arrival order (1 = first); *expect_n: the
     * number of nodes the round expects (0: no list). */
    int (*join)(struct el__rdzv_elastic *e, int64_t round, int lws,
                int64_t *arrival, int64_t *expect_n);
    /* st->joiners, st->jrev, and st->expected_in if expected. */
    int (*count)(struct el__rdzv_elastic *e, int64_t round, int expected,
                 struct el__rdzv_round *st);
    /* Set the round's deadline unless one is set; clear it (a seal found
     * too few live joiners: the round waits for more). */
    int (*set_deadline)(struct el__rdzv_elastic *e, int64_t round,
                        long long wall_ms);
    void (*clear_deadline)(struct el__rdzv_elastic *e, int64_t round);
    /* Optional: the right to seal, one node at a time (*won = 0: another
     * holds it); release() gives it back when nothing was sealed. */
    int (*claim_seal)(struct el__rdzv_elastic *e, int64_t round, int *won);
    void (*release_seal)(struct el__rdzv_elastic *e, int64_t round);
    /* Every joiner's record (malloc'd; seq = arrival order); those that
     * vanished mid-join are left out. */
    int (*joiners)(struct el__rdzv_elastic *e, int64_t round,
                   struct el__rdzv_member **m, int *n);
    /* Write the member list unless one exists (*created says if this call
     * did), and wake the round's waiters. */
    int (*publish)(struct el__rdzv_elastic *e, int64_t round, const char *list,
                   size_t len, int *created);
    /* Best effort: delete round's keys (the sealer of round+1 calls it). */
    void (*forget)(struct el__rdzv_elastic *e, int64_t round);
    /* Block up to ms for 'what'; 0 or -ETIMEDOUT (look again) or error. */
    int (*wait)(struct el__rdzv_elastic *e, enum el__rdzv_wait what,
                int64_t round, const struct el__rdzv_round *st, int64_t rev,
                int ms);
    /* Deaths: refresh() loads what the backend knows (may be NULL: kept
     * current by a thread); is_dead() asks the last load. */
    int (*refresh)(struct el__rdzv_elastic *e);
    int (*is_dead)(struct el__rdzv_elastic *e, const char *id);
    /* Optional: look for members gone for sure (etcd: a refused
     * connection); returns how many it marked dead. */
    int (*probe)(struct el__rdzv_elastic *e);
    /* The restart budget: *first = 1 for the first failure report of
     * round; add_restart() charges one, *used = rounds charged so far. */
    int (*charge)(struct el__rdzv_elastic *e, int64_t round, int *first);
    int (*add_restart)(struct el__rdzv_elastic *e, int64_t *used);
    /* Optional: the job's last charged failure, "<round> <id>" (one key,
     * kept for the job's life): put_failure records this node's for round
     * (after charge() said first); get_failure reads it: 1 with *round and
     * the id, 0 when none was recorded. */
    int (*put_failure)(struct el__rdzv_elastic *e, int64_t round);
    int (*get_failure)(struct el__rdzv_elastic *e, int64_t *round, char *id,
                       size_t cap);
    /* Close the job ("ok" or "failed: ..."), if not closed yet. */
    int (*close_job)(struct el__rdzv_elastic *e, const char *why);
    /* The exit barrier of round: ok/failed verdict; arrive (*n: arrivals
     * so far); count the arrivals; did 'id' arrive; wait for the verdict
     * (0: given, -ETIMEDOUT). */
    int (*exit_verdict)(struct el__rdzv_elastic *e, int64_t round, int ok);
    int (*exit_arrive)(struct el__rdzv_elastic *e, int64_t round, int64_t *n);
    int (*exit_count)(struct el__rdzv_elastic *e, int64_t round, int64_t *n);
    int (*exit_arrived)(struct el__rdzv_elastic *e, int64_t round,
                        const char *id);
    int (*exit_wait)(struct el__rdzv_elastic *e, int64_t round, int ms);
    /* This node took round (its members m, itself at index me): fill in
     * info's workers' store. */
    void (*took_round)(struct el__rdzv_elastic *e, int64_t round,
                       const struct el__rdzv_member *m, int n, int me,
                       struct el_rdzv_info *info);
    /* Optional: this node was declared dead; take self.id (new, set by the
     * rules) into use (liveness).  NULL: a dead node cannot come back
     * (etcd: its lease is gone), the rules end with EL_EPEERLOST. */
    int (*reborn)(struct el__rdzv_elastic *e);
};

struct el__rdzv_elastic {
    struct el_rdzv base;
    const struct el__rdzv_state_ops *ops;
    struct el__rdzv_node self; /* id, name, round, rank, members        */
    int min_nodes, max_nodes, max_restarts;
    int join_timeout_ms, last_call_ms;
    int keepalive_ms;  /* keep_alive_interval                   */
    int window_ms;     /* keep-alive window: silence = death    */
    int step_ms;       /* longest wait before looking again     */
    int io_timeout_ms; /* read_timeout                          */
    int list_ports;    /* member lists carry store port, lease  */
    int64_t arrival;   /* place in the round joined             */
    int64_t expect_n;  /* nodes that round expects (0: none)    */
    int closed;
    int left_out;  /* rounds in a row sealed without us     */
    int rebirths;  /* times declared dead and rejoined      */
    int cancel_fd; /* of the call in progress (backends)    */
    /* The open round's joiners as this node last read them, for
     * el__rdzv_elastic_joiners() on another thread (under jmu, which
     * el__rdzv_elastic_init sets up and nothing needs to destroy). */
    pthread_mutex_t jmu;
    int64_t jround, jcount; /* the round and count they were read at   */
    int jn;                 /* labels in jtext; -1: none read          */
    char jtext[512];        /* "h/3f2a, h/09bc"                        */
};

/* Settings from cfg (timeouts with their defaults), self from cfg. */
void el__rdzv_elastic_init(struct el__rdzv_elastic *e,
                           const struct el_rdzv_config *cfg);

int el__rdzv_elastic_next(struct el_rdzv *base, int lws, int cancel_fd,
                          struct el_rdzv_info *info);
int el__rdzv_elastic_num_nodes_waiting(struct el_rdzv *base, int *n);
int el__rdzv_elastic_report_failure(struct el_rdzv *base, const char *why);
int el__rdzv_elastic_exit_barrier(struct el_rdzv *base, int succeeded,
                                  int timeout_ms, int cancel_fd);
int el__rdzv_elastic_set_closed(struct el_rdzv *base);
/* el_rdzv_members / el_rdzv_is_dead over the rules' state. */
int el__rdzv_elastic_members(struct el_rdzv *base, int64_t *round,
                             struct el_rdzv_member_info **m, int *n);
int el__rdzv_elastic_is_dead(struct el_rdzv *base, const char *id);
/* el_rdzv_failure's op over put_failure/get_failure: 1 (id), 0, or error. */
int el__rdzv_elastic_failure(struct el_rdzv *base, int64_t round, char *id,
                             size_t cap);
/* el_rdzv_status_read's members: those of st->round, or of the round before
 * while st->round is open (e->ops->read_round); sets sealed and
 * members_round.  0 or an error (message in e->base). */
int el__rdzv_status_members(struct el__rdzv_elastic *e,
                            struct el_rdzv_status *st);
/* Members of a sealed list's text as el_rdzv_member_info (rank order). */
int el__rdzv_member_infos(const char *list, struct el_rdzv_member_info **m,
                          int *n);
/* el_rdzv_ops.joiners: thread-safe, beside a blocked next(). */
int el__rdzv_elastic_joiners(struct el_rdzv *base, char *buf, size_t cap);

/* How long a node left out of 'left_out' rounds in a row (that it joined,
 * sealed below MAX without it) waits before it opens another: 0 for the
 * first (a race with the sealer), then 100 ms doubling up to the larger of
 * the keep-alive window and 30 s.  So whatever the cause, one node opens at
 * most one round per that much time. */
int el__rdzv_backoff_ms(int left_out, int window_ms);

#endif
