/* members.h -- the member list of an elastic round, shared by the elastic
 * backends (dynamic.c on the elrun store, etcd.c on etcd; private to
 * src/rendezvous): its text form, the rank order, the expect list of a new
 * round, and the "joined/left" summary logged on each change.
 */
#ifndef ELRUN_RDZV_MEMBERS_H
#define ELRUN_RDZV_MEMBERS_H

#include <stddef.h>
#include <stdint.h>

#include "elrun/net.h"

#define EL__RDZV_ID_MAX 192

struct el__rdzv_member {
    char id[EL__RDZV_ID_MAX];  /* "<name>#<pid>#<random>": one agent's life  */
    char name[EL_HOST_MAX];    /* --local-addr, else the hostname           */
    int lws;                   /* its local world size                      */
    int prev_rank;             /* its rank in the round before, -1 if none  */
    int64_t seq;               /* arrival order (lower = earlier)           */
    int port;                  /* etcd: the port of its workers' store      */
};

/* Parse a sealed list, "v1 <round>\n" then "<id> <lws> <name>[ <port>]\n"
 * per member in rank order.  *out is malloc'd.  EL_EFORMAT if malformed. */
int el__rdzv_parse_members(const char *text, struct el__rdzv_member **out,
                           int *n);

/* The text parse_members reads, for round 'round'; with_port adds each
 * member's port.  malloc'd; *len gets its length.  NULL if out of memory. */
char *el__rdzv_format_members(int64_t round, const struct el__rdzv_member *m,
                              int n, int with_port, size_t *len);

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
