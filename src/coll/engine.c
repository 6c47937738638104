/* engine.c -- the stream engine under every collective (see coll_int.h):
 * moves one send stream and one receive stream at the same time in a
 * single poll loop over non-blocking connections, reducing received data
 * chunk by chunk and releasing dependent sends as soon as their bytes are
 * ready.  A ring step, a recursive-doubling exchange or a tree edge is one
 * call.  Sending and receiving at once matters: with blocking sockets every
 * rank of a ring would sit in send() on a full socket and deadlock.  Before
 * every wait the program's stop flag (opts.stop) is read; with one, a wait
 * lasts at most EL__STOP_SLICE_MS.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "coll/coll_int.h"
#include "coll/transport.h"
#include "elrun/err.h"
#include "elrun/net.h"

/* Bytes of send item i that may go out now. */
static size_t tx_ready(const struct el__tx *t, int ri, size_t rproc)
{
    if (t->dep < 0 || t->dep < ri)
        return t->len;
    if (t->dep > ri)
        return 0;
    return rproc < t->len ? rproc : t->len;
}

static int io_fail(struct el_comm *c, long rc, int peer, const char *dir)
{
    char what[128];
    if (rc == EL_EPEERLOST)
        snprintf(what, sizeof what, "connection closed while %s", dir);
    else
        snprintf(what, sizeof what, "%s while %s", el_strerror((int)rc), dir);
    return el__comm_fail(c, EL_EPEERLOST, peer, what);
}

int el__xfer(struct el_comm *c, int send_peer, const struct el__tx *tx, int ntx,
             int recv_peer, const struct el__rx *rx, int nrx)
{
    if (c->err)
        return c->err;
    const size_t chunk = c->opts.chunk_bytes;
    int ti = 0, ri = 0;
    size_t toff = 0;  /* bytes of tx[ti] sent                    */
    size_t rgot = 0;  /* bytes of rx[ri] received                */
    size_t rproc = 0; /* bytes of rx[ri] processed (reduced)     */
    size_t fill = 0;  /* bytes waiting in c->stage               */
    long long deadline = el_now_ms() + c->opts.timeout_ms;

    for (;;) {
        int moved = 0;

        while (ti < ntx) {
            const struct el__tx *t = &tx[ti];
            if (toff == t->len) {
                ti++;
                toff = 0;
                continue;
            }
            size_t avail = tx_ready(t, ri, rproc);
            if (toff >= avail)
                break;
            long n = el__tp_send(c->tp, send_peer, t->ptr + toff, avail - toff);
            if (n < 0)
                return io_fail(c, n, send_peer, "sending");
            if (n == 0)
                break;
            toff += (size_t)n;
            moved = 1;
        }

        while (ri < nrx) {
            const struct el__rx *r = &rx[ri];
            if (rproc == r->len) {
                ri++;
                rgot = rproc = 0;
                continue;
            }
            long n;
            if (r->mode == EL__RX_COPY) {
                n = el__tp_recv(c->tp, recv_peer, r->ptr + rgot, r->len - rgot);
                if (n > 0)
                    rgot = rproc = rgot + (size_t)n;
            } else {
                size_t want = chunk - fill;
                if (want > r->len - rgot)
                    want = r->len - rgot;
                n = el__tp_recv(c->tp, recv_peer, c->stage + fill, want);
                if (n > 0) {
                    rgot += (size_t)n;
                    fill += (size_t)n;
                    if (fill == chunk || rgot == r->len) {
                        el__reduce(r->ptr + rproc, c->stage, fill, c->dtype,
                                   c->op);
                        if (r->mode == EL__RX_REDUCE_FIN)
                            el__finish(r->ptr + rproc, fill, c->dtype, c->op,
                                       c->world);
                        rproc += fill;
                        fill = 0;
                    }
                }
            }
            if (n < 0)
                return io_fail(c, n, recv_peer, "receiving");
            if (n == 0)
                break;
            moved = 1;
        }

        if (ti == ntx && ri == nrx)
            return 0;
        if (moved) {
            deadline = el_now_ms() + c->opts.timeout_ms;
            continue;
        }
        int want_send = -1;
        if (ti < ntx && toff < tx_ready(&tx[ti], ri, rproc))
            want_send = send_peer;
        int want_recv = ri < nrx ? recv_peer : -1;
        if (el__stop_asked(c->opts.stop))
            return el__comm_stopped(c);
        long long left = deadline - el_now_ms();
        int bad = -1, rc = 0;
        if (left > 0)
            rc = el__tp_wait(c->tp, want_send, want_recv,
                             el__stop_slice(c->opts.stop, left > 1 << 30
                                                              ? 1 << 30
                                                              : (int)left),
                             &bad);
        if (rc < 0)
            return io_fail(c, rc, bad, "waiting");
        if (rc == 0 && el_now_ms() >= deadline) {
            char what[160];
            if (want_recv >= 0)
                snprintf(what, sizeof what,
                         "no data received for %d ms (hung or too slow to "
                         "enter the collective?)",
                         c->opts.timeout_ms);
            else
                snprintf(what, sizeof what,
                         "could not send for %d ms (peer not reading)",
                         c->opts.timeout_ms);
            return el__comm_timeout(c, want_recv >= 0 ? want_recv : want_send,
                                    what);
        }
    }
}
