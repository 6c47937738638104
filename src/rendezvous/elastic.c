/* elastic.c -- the rules of the elastic rendezvous, written once over the
 * state primitives of struct el__rdzv_state_ops (elastic.h); the elrun store
 * (state_store.c) and etcd (state_etcd.c) are two backends of it.
 *
 * A round R is open until sealed.  Each node joins it once (a record of its
 * own); the node that sees MIN joiners sets the deadline (now +
 * last_call_timeout, or the keep-alive window if expected nodes are still
 * missing); the round is sealed at MAX joiners, once every expected node is
 * in, or at the deadline.  Sealing drops the joiners known dead, orders the
 * rest (the previous round's members in their old order, then newcomers by
 * arrival), keeps the first MAX and writes the member list once; the others
 * are hot spares.  A node that finds round R sealed without it and below MAX
 * opens round R+1 (scale-up), expecting R's live members and itself.
 *
 * A node the others declared dead (silent past the keep-alive window: a
 * pause, a swap storm, a debugger) can never be admitted under its id, so it
 * never opens a round for itself: it first takes a new id and rejoins as a
 * new member (backends with reborn()), or ends with one line.  And a node
 * left out of rounds it joined backs off before asking for another, so the
 * rounds it can cause are bounded whatever the reason.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elrun/err.h"
#include "elrun/net.h"
#include "rendezvous/elastic.h"

#define FAIL(e, rc, ...) el__rdzv_fail(&(e)->base, (rc), __VA_ARGS__)
#define note(e, ...) el__rdzv_note(&(e)->self, __VA_ARGS__)

void el__rdzv_elastic_init(struct el__rdzv_elastic *e,
                           const struct el_rdzv_config *cfg)
{
    e->min_nodes = cfg->min_nodes;
    e->max_nodes = cfg->max_nodes;
    e->max_restarts = cfg->max_restarts;
    e->join_timeout_ms =
        cfg->join_timeout_ms > 0 ? cfg->join_timeout_ms : 600000;
    e->last_call_ms =
        cfg->last_call_timeout_ms > 0 ? cfg->last_call_timeout_ms : 0;
    e->keepalive_ms =
        cfg->keep_alive_interval_ms > 0 ? cfg->keep_alive_interval_ms : 5000;
    e->window_ms =
        e->keepalive_ms *
        (cfg->keep_alive_max_attempt > 0 ? cfg->keep_alive_max_attempt : 3);
    e->step_ms = e->keepalive_ms;
    e->io_timeout_ms = cfg->io_timeout_ms > 0 ? cfg->io_timeout_ms : 60000;
    e->cancel_fd = -1;
    pthread_mutex_init(&e->jmu, NULL);
    e->jround = e->jcount = -1;
    e->jn = -1;
    el__rdzv_node_init(&e->self, cfg);
}

/* Names in a waiting line at most: beyond, a line names none (a list of
 * hundreds reads as noise) and nobody re-reads every joiner's record at
 * each change of the count (that would be N^2 records for N nodes). */
#define SHOW_JOINERS_MAX 16

/* Keep the joiners of the open round, as read now, for
 * el__rdzv_elastic_joiners(): read again when their count moved.  Best
 * effort: a failed read keeps the last view (the rules go on). */
static void show_joiners(struct el__rdzv_elastic *e, int64_t round,
                         int64_t count)
{
    if (round == e->jround && count == e->jcount)
        return;
    if (count > SHOW_JOINERS_MAX) {
        pthread_mutex_lock(&e->jmu);
        e->jround = round;
        e->jcount = count;
        e->jn = count < 1000000 ? (int)count : 1000000;
        e->jtext[0] = '\0';
        pthread_mutex_unlock(&e->jmu);
        return;
    }
    struct el__rdzv_member *m = NULL;
    int n = 0;
    if (e->ops->joiners(e, round, &m, &n) != 0)
        return;
    char text[sizeof e->jtext];
    size_t len = 0;
    int shown = 0;
    text[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (e->ops->is_dead(e, m[i].id))
            continue;
        char label[EL__RDZV_LABEL_MAX];
        el__rdzv_label(m[i].id, label, sizeof label);
        if (len + strlen(label) + 8 >= sizeof text) {
            snprintf(text + len, sizeof text - len, ", ...");
            shown++;
            break;
        }
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%s",
                                len ? ", " : "", label);
        shown++;
    }
    free(m);
    pthread_mutex_lock(&e->jmu);
    e->jround = round;
    e->jcount = count;
    e->jn = shown;
    memcpy(e->jtext, text, sizeof text);
    pthread_mutex_unlock(&e->jmu);
}

int el__rdzv_elastic_joiners(struct el_rdzv *base, char *buf, size_t cap)
{
    struct el__rdzv_elastic *e = (struct el__rdzv_elastic *)base;
    pthread_mutex_lock(&e->jmu);
    int n = e->jn;
    if (cap)
        snprintf(buf, cap, "%s", n >= 0 ? e->jtext : "");
    pthread_mutex_unlock(&e->jmu);
    return n;
}

int el__rdzv_backoff_ms(int left_out, int window_ms)
{
    if (left_out <= 1)
        return 0; /* once is a race with the sealer, not a pattern */
    int shift = left_out - 2 < 10 ? left_out - 2 : 10;
    long long ms = 100LL << shift;
    long long cap = window_ms > 30000 ? window_ms : 30000;
    return ms > cap ? (int)cap : (int)ms;
}

static int dead(struct el__rdzv_elastic *e, const char *id)
{
    return e->ops->is_dead(e, id);
}

static int refresh(struct el__rdzv_elastic *e)
{
    return e->ops->refresh ? e->ops->refresh(e) : 0;
}

/* Was this node declared dead?  Then it takes a new id and rejoins as a new
 * member (returns 1), or, on a backend where the dead stay dead, fails.
 * 0: alive. */
static int check_self(struct el__rdzv_elastic *e)
{
    int rc;
    if ((rc = refresh(e)))
        return rc;
    if (!dead(e, e->self.id))
        return 0;
    double window = e->window_ms / 1000.0;
    if (!e->ops->reborn)
        return FAIL(e, EL_EPEERLOST,
                    "this node (%s) was declared dead by the "
                    "others: it was silent for longer than the keep-alive "
                    "window (%.3g s), e.g. paused or cut off",
                    e->self.label, window);
    char was[EL__RDZV_LABEL_MAX];
    snprintf(was, sizeof was, "%s", e->self.label);
    el__rdzv_node_new_id(&e->self);
    e->self.rank = -1;
    e->self.joined_round = -1;
    e->left_out = 0;
    e->rebirths++;
    note(e,
         "this node (%s) was declared dead by the others: it was silent "
         "for longer than the keep-alive window (%.3g s), e.g. paused or cut "
         "off; it rejoins as a new member (%s)",
         was, window, e->self.label);
    if ((rc = e->ops->reborn(e)))
        return rc;
    return 1;
}

/* Complete round R: 0 when a member list exists afterwards (sealed by us or
 * by someone else), 1 if fewer than MIN live nodes joined, < 0 on error. */
static int seal(struct el__rdzv_elastic *e, int64_t round)
{
    const struct el__rdzv_state_ops *o = e->ops;
    struct el__rdzv_member *m = NULL;
    int n = 0, live = 0, rc;
    if ((rc = o->joiners(e, round, &m, &n)))
        return rc;
    if ((rc = refresh(e))) {
        free(m);
        return rc;
    }
    for (int i = 0; i < n; i++)
        if (!dead(e, m[i].id))
            m[live++] = m[i];
    char *list = NULL;
    size_t len = 0;
    rc = el__rdzv_seal_list(round, m, live, e->min_nodes, e->max_nodes,
                            e->list_ports, &list, &len);
    free(m);
    if (rc)
        return rc == 1 ? 1 : FAIL(e, rc, "out of memory");
    int created = 0;
    rc = o->publish(e, round, list, len, &created);
    free(list);
    if (rc)
        return rc;
    if (created && round > 0)
        o->forget(e, round - 1); /* nobody needs the round before */
    return 0;
}

static int next_round(struct el__rdzv_elastic *e, int lws, long long deadline,
                      struct el_rdzv_info *info)
{
    const struct el__rdzv_state_ops *o = e->ops;
    int64_t stale = -1, stale_round = -1, backoff_round = -1;
    long long backoff_until = 0;
    int rc;
    for (;;) {
        if (el_now_ms() > deadline)
            return FAIL(e, -ETIMEDOUT,
                        "no round with at least %d nodes formed within %d s; "
                        "start more nodes or raise --rdzv-conf=join_timeout",
                        e->min_nodes, e->join_timeout_ms / 1000);
        int64_t round, rrev;
        if ((rc = o->read_job(e, &round, &rrev)) != 0)
            return rc < 0 ? rc : EL_ECLOSED;
        /* Known dead (by the deaths last loaded: the agent asked
         * num_nodes_waiting just before): take a new id first. */
        if (e->self.rank >= 0 && dead(e, e->self.id) &&
            (rc = check_self(e)) < 0)
            return rc;
        /* After a round this node took part in, the next one is newer; its
         * live members are expected in it. */
        if (e->self.rank >= 0 && round <= e->self.round &&
            (rc = o->raise_round(e, e->self.round + 1, e->self.members,
                                 e->self.nmembers, NULL, &round)))
            return rc;
        struct el__rdzv_round st;
        memset(&st, 0, sizeof st);
        if ((rc = o->read_round(e, round, &st)))
            return rc;
        long long left = deadline - el_now_ms();
        int step = e->step_ms < left ? e->step_ms : left > 0 ? (int)left : 0;

        if (st.members) {
            struct el__rdzv_member *m = NULL;
            int n = 0, me = -1;
            rc = el__rdzv_parse_members(st.members, &m, &n);
            free(st.members);
            if (rc)
                return FAIL(e, rc,
                            "round %" PRId64 ": unreadable member "
                            "list in the rendezvous state",
                            round);
            for (int i = 0; i < n && me < 0; i++)
                if (strcmp(m[i].id, e->self.id) == 0)
                    me = i;
            if (me >= 0) {
                el__rdzv_take_round(&e->self, round, m, n, me, info);
                o->took_round(e, round, m, n, me, info);
                e->left_out = 0;
                return 0;
            }
            /* Members known dead leave room too (their round may never
             * be raised by them: every member of it may have been declared
             * dead at once, as when the store's host was paused). */
            if ((rc = check_self(e)) < 0) {
                free(m);
                return rc;
            }
            int live = 0;
            for (int i = 0; i < n; i++)
                live += !dead(e, m[i].id);
            if (live < e->max_nodes) {
                /* Room for us: open the next round (scale-up), expecting
                 * its live members and us; but never for a node that
                 * cannot be admitted (check_self above: a node declared
                 * dead rejoins as a new one first). */
                if (e->self.joined_round == round) {
                    e->left_out++;
                    e->self.joined_round = -1;
                }
                int backoff = el__rdzv_backoff_ms(e->left_out, e->window_ms);
                if (rc == 0 && backoff > 0 && backoff_round != round) {
                    backoff_round = round;
                    backoff_until = el_now_ms() + backoff;
                    note(e,
                         "round %" PRId64 " was sealed without this node "
                         "(%s) %d times in a row; waiting %d ms before asking "
                         "for another",
                         round, e->self.label, e->left_out, backoff);
                }
                long long wait =
                    backoff_round == round ? backoff_until - el_now_ms() : 0;
                if (rc == 0 && wait > 0) {
                    free(m);
                    rc = o->wait(e, EL__RDZV_WAIT_ROUND, round, NULL, rrev,
                                 wait < step ? (int)wait : step);
                    if (rc && rc != -ETIMEDOUT)
                        return rc;
                    continue;
                }
                int64_t now;
                rc = o->raise_round(e, round + 1, m, n, e->self.id, &now);
                free(m);
                if (rc)
                    return rc;
                continue;
            }
            free(m);
            if (!e->self.spare_logged) {
                note(e,
                     "round %" PRId64 " is full (%d nodes); this node "
                     "(%s) waits as a hot spare",
                     round, n, e->self.label);
                e->self.spare_logged = 1;
            }
            e->self.joined_round = -1;
            rc = o->wait(e, EL__RDZV_WAIT_ROUND, round, NULL, rrev, step);
            if (rc && rc != -ETIMEDOUT)
                return rc;
            continue;
        }

        /* Round 'round' is open: join it once. */
        if (e->self.joined_round != round) {
            if ((rc = o->join(e, round, lws, &e->arrival, &e->expect_n)))
                return rc;
            e->self.joined_round = round;
        }
        if ((rc = o->count(e, round, e->expect_n > 0, &st)))
            return rc;
        show_joiners(e, round, st.joiners);
        /* 'stale': sealing found too few live nodes among this many
         * joiners (some died); only a new joiner can change that. */
        if (round != stale_round)
            stale = -1;
        if (left <= 0)
            continue;
        /* Complete at MAX, or once every expected node is in; or at the
         * deadline (plus a stagger by arrival, so that the first in line
         * seals while the others wait). */
        int all_in = e->expect_n > 0 && st.expected_in >= e->expect_n &&
                     st.joiners >= e->min_nodes;
        long long until = st.deadline < 0
                              ? -1
                              : st.deadline - el__rdzv_wall_ms() +
                                    (e->arrival < 50 ? e->arrival : 50) * 4;
        int due = st.joiners >= e->max_nodes || all_in ||
                  (st.deadline >= 0 && until <= 0);
        if (due && st.joiners > stale && !st.sealing) {
            int won = 1;
            if (o->claim_seal && (rc = o->claim_seal(e, round, &won)))
                return rc;
            if (!won)
                continue; /* another node seals; wait for its list */
            if ((rc = seal(e, round)) < 0)
                return rc;
            if (rc == 1) {
                /* Joiners died: fewer than MIN live ones; reopen the
                 * deadline and wait for another. */
                stale = st.joiners;
                stale_round = round;
                o->clear_deadline(e, round);
                if (o->release_seal)
                    o->release_seal(e, round);
            }
            continue;
        }
        if (st.deadline < 0 && st.joiners >= e->min_nodes &&
            st.joiners > stale) {
            /* Set by whoever sees MIN joiners first.  Expected nodes still
             * missing get the keep-alive window: a live one arrives well
             * within it, a dead one is known dead by then. */
            long long wait = e->last_call_ms;
            if (e->expect_n > 0 && wait < e->window_ms)
                wait = e->window_ms;
            if ((rc = o->set_deadline(e, round, el__rdzv_wall_ms() + wait)))
                return rc;
            continue;
        }
        if (stale >= 0 && st.joiners <= stale) {
            rc = o->wait(e, EL__RDZV_WAIT_JOINERS, round, &st, 0, step);
        } else {
            /* The deadline to be set, a sealer to start or die, the member
             * list; or the deadline itself. */
            if (until > 0 && until < step && !st.sealing)
                step = (int)until;
            rc = o->wait(e, EL__RDZV_WAIT_STATE, round, &st, 0, step);
        }
        if (rc && rc != -ETIMEDOUT)
            return rc;
    }
}

int el__rdzv_elastic_next(struct el_rdzv *base, int lws, int cancel_fd,
                          struct el_rdzv_info *info)
{
    struct el__rdzv_elastic *e = (struct el__rdzv_elastic *)base;
    if (e->closed)
        return FAIL(e, EL_ECLOSED, "the rendezvous is closed");
    long long deadline = el_now_ms() + e->join_timeout_ms;
    pthread_mutex_lock(&e->jmu); /* a new wait: nothing read yet */
    e->jround = e->jcount = -1;
    e->jn = -1;
    pthread_mutex_unlock(&e->jmu);
    int rc = e->ops->enter(e, cancel_fd, deadline);
    if (rc == 0)
        rc = next_round(e, lws, deadline, info);
    e->ops->leave(e);
    return rc;
}

/* Note the members of this node's round known dead ("node h/3f2a is gone;
 * re-forming"); returns how many. */
static int gone_members(struct el__rdzv_elastic *e)
{
    int n = 0;
    for (int i = 0; i < e->self.nmembers; i++) {
        if (strcmp(e->self.members[i].id, e->self.id) == 0 ||
            !dead(e, e->self.members[i].id))
            continue;
        char gone[EL__RDZV_LABEL_MAX];
        el__rdzv_label(e->self.members[i].id, gone, sizeof gone);
        note(e,
             "round %" PRId64 " (rank %d of %d nodes): node %s is gone; "
             "re-forming",
             e->self.round, e->self.rank, e->self.nmembers, gone);
        n++;
    }
    return n;
}

/* Round 'cur' was opened after this node's: say which node caused it if
 * that shows (a member gone, or a newcomer among its joiners); a failure
 * reported on another node shows neither, and the agent's line covers it.
 * Best effort: a failed read says nothing. */
static void say_why(struct el__rdzv_elastic *e, int64_t cur)
{
    if (refresh(e) != 0 || gone_members(e) > 0)
        return;
    struct el__rdzv_member *m = NULL;
    int n = 0;
    if (e->ops->joiners(e, cur, &m, &n) != 0)
        return;
    for (int i = 0; i < n; i++) {
        int known = 0;
        for (int j = 0; j < e->self.nmembers && !known; j++)
            known = strcmp(m[i].id, e->self.members[j].id) == 0;
        if (known)
            continue;
        char label[EL__RDZV_LABEL_MAX];
        el__rdzv_label(m[i].id, label, sizeof label);
        note(e,
             "round %" PRId64 " (rank %d of %d nodes): node %s joined; "
             "re-forming",
             e->self.round, e->self.rank, e->self.nmembers, label);
    }
    free(m);
}

static int waiting(struct el__rdzv_elastic *e, int *n)
{
    const struct el__rdzv_state_ops *o = e->ops;
    int64_t cur, rev;
    int rc = o->read_job(e, &cur, &rev);
    if (rc) {
        if (rc < 0)
            return rc;
        *n = 1; /* the agent's next() reports the closure */
        return 0;
    }
    if (cur > e->self.round) {
        struct el__rdzv_round st;
        memset(&st, 0, sizeof st);
        if ((rc = o->count(e, cur, 0, &st)))
            return rc;
        *n = st.joiners > 0 ? (int)st.joiners : 1;
        say_why(e, cur);
        return 0;
    }
    if ((rc = refresh(e)))
        return rc;
    if (dead(e, e->self.id)) {
        *n = 1; /* next() takes a new id (or says why it cannot) */
        return 0;
    }
    /* A member of this round died: a change of membership, like a new
     * node; next() opens the next round without charging the budget. */
    *n = gone_members(e) > 0;
    return 0;
}

int el__rdzv_elastic_num_nodes_waiting(struct el_rdzv *base, int *n)
{
    struct el__rdzv_elastic *e = (struct el__rdzv_elastic *)base;
    *n = 0;
    int rc = e->ops->enter(e, -1, el_now_ms() + e->io_timeout_ms);
    if (rc == 0)
        rc = waiting(e, n);
    e->ops->leave(e);
    return rc;
}

static int report_failure(struct el__rdzv_elastic *e, const char *why)
{
    const struct el__rdzv_state_ops *o = e->ops;
    int64_t cur, rev, used, now;
    int first = 0;
    int rc = o->read_job(e, &cur, &rev);
    if (rc < 0)
        return rc;
    /* Workers often fail because a peer node died (their collectives or
     * their store lose it), or because this node was away: that round
     * ended for a change of membership, and charges nothing. */
    if ((rc = refresh(e)))
        return rc;
    int lost = dead(e, e->self.id);
    for (int i = 0; i < e->self.nmembers && !lost; i++)
        lost = dead(e, e->self.members[i].id);
    if (cur > e->self.round || lost || (o->probe && o->probe(e) > 0))
        return 0;
    if ((rc = o->charge(e, e->self.round, &first)))
        return rc;
    if (first) {
        if ((rc = o->add_restart(e, &used)))
            return rc;
        if (used > e->max_restarts) {
            char msg[300];
            snprintf(msg, sizeof msg,
                     "failed: restart budget of %d used up "
                     "(last: %s)",
                     e->max_restarts, why ? why : "failure");
            o->close_job(e, msg);
            return FAIL(e, EL_ELIMIT, "%s", msg);
        }
        note(e,
             "round %" PRId64 " (rank %d of %d nodes) failed (%s); "
             "restart %" PRId64 " of %d",
             e->self.round, e->self.rank, e->self.nmembers,
             why ? why : "failure", used, e->max_restarts);
        /* Before the next round opens: its members learn its cause here
         * (el_rdzv_failure).  Only a record; a store that fails now fails
         * the raise below. */
        if (o->put_failure)
            o->put_failure(e, e->self.round);
    }
    if ((rc = o->read_job(e, &cur, &rev)) != 0)
        return rc < 0 ? rc : EL_ELIMIT;
    return o->raise_round(e, e->self.round + 1, e->self.members,
                          e->self.nmembers, NULL, &now);
}

int el__rdzv_elastic_report_failure(struct el_rdzv *base, const char *why)
{
    struct el__rdzv_elastic *e = (struct el__rdzv_elastic *)base;
    int rc = e->ops->enter(e, -1, el_now_ms() + e->io_timeout_ms);
    if (rc == 0)
        rc = report_failure(e, why);
    e->ops->leave(e);
    return rc;
}

/* Members of this node's round through the barrier: arrived, or dead
 * without arriving (they never will). */
static int exit_through(struct el__rdzv_elastic *e, int64_t arrived, int64_t *n)
{
    int rc;
    *n = arrived;
    if ((rc = refresh(e)))
        return rc;
    for (int i = 0; i < e->self.nmembers; i++) {
        if (!dead(e, e->self.members[i].id))
            continue;
        rc = e->ops->exit_arrived(e, e->self.round, e->self.members[i].id);
        if (rc < 0)
            return rc;
        if (rc == 0)
            (*n)++;
    }
    return 0;
}

static int exit_barrier(struct el__rdzv_elastic *e, int timeout_ms)
{
    const struct el__rdzv_state_ops *o = e->ops;
    int64_t round = e->self.round, arrived, through;
    int rc;
    if ((rc = o->exit_arrive(e, round, &arrived)))
        return rc;
    long long until = el_now_ms() + timeout_ms;
    for (;;) {
        if ((rc = exit_through(e, arrived, &through)))
            return rc;
        if (through >= e->self.nmembers && (rc = o->exit_verdict(e, round, 1)))
            return rc;
        long long left = until - el_now_ms();
        if (left <= 0)
            return FAIL(e, -ETIMEDOUT,
                        "exit barrier: not every node "
                        "finished within %d s",
                        timeout_ms / 1000);
        /* A death wakes nobody here: look again each keep-alive interval. */
        rc = o->exit_wait(e, round,
                          left < e->keepalive_ms ? (int)left : e->keepalive_ms);
        if (rc != -ETIMEDOUT)
            return rc;
        if ((rc = o->exit_count(e, round, &arrived)))
            return rc;
    }
}

int el__rdzv_elastic_exit_barrier(struct el_rdzv *base, int succeeded,
                                  int timeout_ms, int cancel_fd)
{
    struct el__rdzv_elastic *e = (struct el__rdzv_elastic *)base;
    int rc = e->ops->enter(e, cancel_fd, el_now_ms() + 2000);
    if (rc == 0)
        rc = succeeded ? exit_barrier(e, timeout_ms)
                       : e->ops->exit_verdict(e, e->self.round, 0);
    e->ops->leave(e);
    return rc;
}

int el__rdzv_elastic_set_closed(struct el_rdzv *base)
{
    struct el__rdzv_elastic *e = (struct el__rdzv_elastic *)base;
    e->closed = 1;
    int rc = e->ops->enter(e, -1, el_now_ms() + 2000);
    if (rc == 0)
        rc = e->ops->close_job(e, "ok");
    e->ops->leave(e);
    return rc;
}

/* ---- read-only views ---- */

static void to_info(const struct el__rdzv_member *src, int n,
                    struct el_rdzv_member_info *dst)
{
    for (int i = 0; i < n; i++) {
        snprintf(dst[i].id, sizeof dst[i].id, "%s", src[i].id);
        snprintf(dst[i].name, sizeof dst[i].name, "%s", src[i].name);
        el__rdzv_label(src[i].id, dst[i].label, sizeof dst[i].label);
        dst[i].lws = src[i].lws;
        dst[i].dead = 0;
    }
}

int el__rdzv_elastic_members(struct el_rdzv *base, int64_t *round,
                             struct el_rdzv_member_info **m, int *n)
{
    struct el__rdzv_elastic *e = (struct el__rdzv_elastic *)base;
    *round = e->self.nmembers ? e->self.round : -1;
    if (!e->self.nmembers)
        return 0;
    *m = calloc((size_t)e->self.nmembers, sizeof **m);
    if (!*m)
        return -ENOMEM;
    to_info(e->self.members, e->self.nmembers, *m);
    *n = e->self.nmembers;
    return 0;
}

int el__rdzv_elastic_failure(struct el_rdzv *base, int64_t round, char *id,
                             size_t cap)
{
    struct el__rdzv_elastic *e = (struct el__rdzv_elastic *)base;
    if (!e->ops->get_failure)
        return -ENOTSUP;
    int64_t failed = -1;
    int rc = e->ops->enter(e, -1, el_now_ms() + e->io_timeout_ms);
    if (rc == 0)
        rc = e->ops->get_failure(e, &failed, id, cap);
    e->ops->leave(e);
    if (rc < 0)
        return rc;
    return rc == 1 && failed == round;
}

int el__rdzv_elastic_is_dead(struct el_rdzv *base, const char *id)
{
    struct el__rdzv_elastic *e = (struct el__rdzv_elastic *)base;
    if (refresh(e))
        return 0;
    return dead(e, id) ? 1 : 0;
}

int el__rdzv_member_infos(const char *list, struct el_rdzv_member_info **m,
                          int *n)
{
    struct el__rdzv_member *mm = NULL;
    int k = 0;
    *m = NULL;
    *n = 0;
    int rc = el__rdzv_parse_members(list, &mm, &k);
    if (rc)
        return rc;
    *m = calloc((size_t)(k ? k : 1), sizeof **m);
    if (!*m) {
        free(mm);
        return -ENOMEM;
    }
    to_info(mm, k, *m);
    free(mm);
    *n = k;
    return 0;
}

int el__rdzv_status_members(struct el__rdzv_elastic *e,
                            struct el_rdzv_status *st)
{
    for (int64_t round = st->round; round >= 0 && round >= st->round - 1;
         round--) {
        struct el__rdzv_round rs = {0};
        int rc = e->ops->read_round(e, round, &rs);
        if (rc)
            return rc;
        if (!rs.members)
            continue;
        st->sealed = round == st->round;
        st->members_round = round;
        rc = el__rdzv_member_infos(rs.members, &st->members, &st->nmembers);
        free(rs.members);
        if (rc)
            return FAIL(e, rc, "round %" PRId64 "'s member list is malformed",
                        round);
        return 0;
    }
    return 0;
}
