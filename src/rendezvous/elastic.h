/* elastic.h -- what the elastic backends share (dynamic.c on the elrun
 * store, etcd.c on etcd; private to src/rendezvous): this node's place in
 * the job (id, name, its last round and rank), the member list of a round
 * (text form, rank order), the expect list of a new round, and the one log
 * line per change of membership.
 */
#ifndef ELRUN_RDZV_ELASTIC_H
#define ELRUN_RDZV_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "elrun/net.h"
#include "elrun/rdzv.h"

#define EL__RDZV_ID_MAX 192

struct el__rdzv_member {
    char id[EL__RDZV_ID_MAX];  /* "<name>#<pid>#<random>": one agent's life  */
    char name[EL_HOST_MAX];    /* --local-addr, else the hostname           */
    int lws;                   /* its local world size                      */
    int prev_rank;             /* its rank in the round before, -1 if none  */
    int64_t seq;               /* arrival order (lower = earlier)           */
    int port;                  /* etcd: the port of its workers' store      */
    int64_t lease;             /* etcd: its lease                           */
};

/* This node as the elastic protocol sees it. */
struct el__rdzv_node {
    char id[EL__RDZV_ID_MAX];  /* "<name>#<pid>#<random>"                   */
    char name[EL_HOST_MAX];    /* --local-addr, else the hostname           */
    int64_t round;             /* last round this node was a member of      */
    int rank;                  /* its rank in that round, -1 if none        */
    struct el__rdzv_member *members; /* that round's members, rank order    */
    int nmembers;
    int64_t joined_round;      /* round joined but not yet sealed, or -1    */
    int spare_logged;          /* "waits as a hot spare" said this round    */
    void (*on_event)(void *arg, const char *msg);
    void *event_arg;
};

/* Fill in the id and name (from cfg->local_addr or the hostname), no round
 * yet, and the event callback. */
void el__rdzv_node_init(struct el__rdzv_node *self,
                        const struct el_rdzv_config *cfg);
void el__rdzv_node_free(struct el__rdzv_node *self);

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
                           char *joined, size_t jcap, char *left,
                           size_t lcap);

/* The expect list of a new round, "<count>\n<id>\n...": the members of m
 * for which alive(arg, id) says 1 (all if alive is NULL), plus 'extra' if
 * not NULL.  malloc'd; NULL if out of memory. */
char *el__rdzv_expect_list(const struct el__rdzv_member *m, int n,
                           const char *extra,
                           int (*alive)(void *arg, const char *id),
                           void *arg);

/* Is 'id' on a line of an expect list? */
int el__rdzv_expected(const char *list, const char *id);

#endif
