/* ring.c -- the bandwidth-optimal algorithms: ring allreduce (reduce-scatter
 * then all-gather), ring allgather and the pipelined chain broadcast.
 *
 * Each is a single el__xfer() call: the whole send stream to the right
 * neighbour and the whole receive stream from the left one, where send item
 * i+1 is the segment received as item i.  The engine sends each chunk of it
 * as soon as that chunk has arrived and been reduced, so the steps of the
 * ring overlap instead of waiting for each other.  Each rank moves
 * 2(n-1)/n of the buffer in and out, the minimum.
 */
#include <errno.h>
#include <stdlib.h>

#include "coll/coll_int.h"

static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

/* Run the ring whose receive items are rx[0..m-1]: send own[] first, then
 * every received item but the last, each as it arrives. */
static int ring_run(struct el_comm *c, char *own, size_t ownlen,
                    struct el__rx *rx, int m)
{
    struct el__tx *tx = malloc(sizeof *tx * (size_t)m);
    if (!tx)
        return el__comm_fail(c, -ENOMEM, -1, "out of memory");
    tx[0] = (struct el__tx){own, ownlen, -1};
    for (int i = 1; i < m; i++)
        tx[i] = (struct el__tx){rx[i - 1].ptr, rx[i - 1].len, i - 1};
    int n = c->world;
    int rc =
        el__xfer(c, mod(c->rank + 1, n), tx, m, mod(c->rank - 1, n), rx, m);
    free(tx);
    return rc;
}

int el__allreduce_ring(struct el_comm *c, char *buf, size_t count, size_t esz)
{
    int n = c->world, r = c->rank, m = 2 * (n - 1);
    size_t base = count / (size_t)n, extra = count % (size_t)n;
#define SEG_OFF(k) \
    (((size_t)(k)*base + ((size_t)(k) < extra ? (size_t)(k) : extra)) * esz)
#define SEG_LEN(k) ((base + ((size_t)(k) < extra ? 1 : 0)) * esz)
    struct el__rx *rx = malloc(sizeof *rx * (size_t)m);
    if (!rx)
        return el__comm_fail(c, -ENOMEM, -1, "out of memory");
    /* Reduce-scatter: step s receives segment r-s-1 and adds ours; after
     * the last step this rank owns segment r+1, fully reduced. */
    for (int s = 0; s < n - 1; s++) {
        int k = mod(r - s - 1, n);
        rx[s] = (struct el__rx){buf + SEG_OFF(k), SEG_LEN(k),
                                s == n - 2 ? EL__RX_REDUCE_FIN : EL__RX_REDUCE};
    }
    /* All-gather: step t receives the final segment r-t. */
    for (int t = 0; t < n - 1; t++) {
        int k = mod(r - t, n);
        rx[n - 1 + t] =
            (struct el__rx){buf + SEG_OFF(k), SEG_LEN(k), EL__RX_COPY};
    }
    int rc = ring_run(c, buf + SEG_OFF(r), SEG_LEN(r), rx, m);
#undef SEG_OFF
#undef SEG_LEN
    free(rx);
    return rc;
}

int el__allgather_ring(struct el_comm *c, char *recvbuf, size_t bytes)
{
    int n = c->world, r = c->rank, m = n - 1;
    struct el__rx *rx = malloc(sizeof *rx * (size_t)m);
    if (!rx)
        return el__comm_fail(c, -ENOMEM, -1, "out of memory");
    for (int t = 0; t < m; t++) {
        int k = mod(r - t - 1, n);
        rx[t] =
            (struct el__rx){recvbuf + (size_t)k * bytes, bytes, EL__RX_COPY};
    }
    int rc = ring_run(c, recvbuf + (size_t)r * bytes, bytes, rx, m);
    free(rx);
    return rc;
}

int el__broadcast_chain(struct el_comm *c, char *buf, size_t bytes, int root)
{
    int n = c->world, d = mod(c->rank - root, n);
    int right = mod(c->rank + 1, n), left = mod(c->rank - 1, n);
    struct el__rx rx = {buf, bytes, EL__RX_COPY};
    struct el__tx tx = {buf, bytes, d == 0 ? -1 : 0};
    if (d == 0)
        return el__xfer(c, right, &tx, 1, -1, NULL, 0);
    if (d == n - 1)
        return el__xfer(c, -1, NULL, 0, left, &rx, 1);
    return el__xfer(c, right, &tx, 1, left, &rx, 1);
}
