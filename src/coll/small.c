/* small.c -- the latency-optimal algorithms, for small buffers: recursive
 * doubling allreduce, binomial-tree broadcast and dissemination barrier.
 * Each takes ceil(log2 n) rounds of one message (plus two for allreduce
 * when n is not a power of two), where the ring takes 2(n-1).
 *
 * Recursive doubling gives every rank bitwise the same result: partners
 * compute a op b and b op a, equal because the operations are commutative,
 * and the ranks folded in at the start get the result copied back.
 */
#include <stddef.h>

#include "coll/coll_int.h"

static int exchange(struct el_comm *c, int peer, char *buf, size_t bytes,
                    char *into)
{
    struct el__tx tx = {buf, bytes, -1};
    struct el__rx rx = {into, bytes, EL__RX_COPY};
    return el__xfer(c, peer, &tx, 1, peer, &rx, 1);
}

static int send_to(struct el_comm *c, int peer, const char *buf, size_t n)
{
    struct el__tx tx = {buf, n, -1};
    return el__xfer(c, peer, &tx, 1, -1, NULL, 0);
}

static int recv_from(struct el_comm *c, int peer, char *buf, size_t n)
{
    struct el__rx rx = {buf, n, EL__RX_COPY};
    return el__xfer(c, -1, NULL, 0, peer, &rx, 1);
}

int el__allreduce_rd(struct el_comm *c, char *buf, size_t count, size_t esz)
{
    int n = c->world, r = c->rank, rc;
    size_t bytes = count * esz;
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    int rem = n - p;
    if ((rc = el__comm_tmp(c, bytes)) != 0)
        return rc;
    char *tmp = c->tmp;

    /* Fold: ranks p.. hand their data to rank r-p and wait for the result. */
    if (r >= p) {
        if ((rc = send_to(c, r - p, buf, bytes)) != 0)
            return rc;
        return recv_from(c, r - p, buf, bytes);
    }
    if (r < rem) {
        if ((rc = recv_from(c, r + p, tmp, bytes)) != 0)
            return rc;
        el__reduce(buf, tmp, bytes, c->dtype, c->op);
    }
    for (int mask = 1; mask < p; mask <<= 1) {
        if ((rc = exchange(c, r ^ mask, buf, bytes, tmp)) != 0)
            return rc;
        el__reduce(buf, tmp, bytes, c->dtype, c->op);
    }
    el__finish(buf, bytes, c->dtype, c->op, n);
    if (r < rem)
        return send_to(c, r + p, buf, bytes);
    return 0;
}

int el__broadcast_tree(struct el_comm *c, char *buf, size_t bytes, int root)
{
    int n = c->world, d = ((c->rank - root) % n + n) % n, rc;
    int mask = 1;
    while (mask < n) {
        if (d & mask) {
            int parent = ((d - mask) + root) % n;
            if ((rc = recv_from(c, parent, buf, bytes)) != 0)
                return rc;
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (d + mask < n)
            if ((rc = send_to(c, (d + mask + root) % n, buf, bytes)) != 0)
                return rc;
    return 0;
}

int el__barrier_dissem(struct el_comm *c)
{
    int n = c->world, r = c->rank, rc;
    char token = 0, got;
    for (int k = 1; k < n; k <<= 1) {
        struct el__tx tx = {&token, 1, -1};
        struct el__rx rx = {&got, 1, EL__RX_COPY};
        rc = el__xfer(c, (r + k) % n, &tx, 1, (r - k + n) % n, &rx, 1);
        if (rc != 0)
            return rc;
    }
    return 0;
}
