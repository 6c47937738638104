/* coll_int.h -- the communicator's insides, shared by the files of
 * src/coll: the stream engine that runs one step of an algorithm (engine.c),
 * the reduction kernels (reduce.c), the algorithms (ring.c, small.c) and the
 * public entry points (comm.c).  Private to src/coll.
 */
#ifndef ELRUN_COLL_INT_H
#define ELRUN_COLL_INT_H

#include <signal.h>
#include <stddef.h>

#include "elrun/coll.h"

struct el_tp;
struct el_shm;

struct el_comm {
    int rank, world;
    struct el_tp *tp;
    struct el_shm *shm;     /* NULL unless every rank is on this host    */
    struct el_store *store; /* borrowed; used on failure only           */
    char *prefix;
    struct el_comm_opts opts; /* defaults filled in                     */
    char *stage;              /* opts.chunk_bytes: received data to reduce */
    char *tmp;                /* scratch for the small algorithms          */
    size_t tmp_cap;
    /* The collective in progress. */
    const char *opname;
    enum el_dtype dtype;
    enum el_redop op;
    int err; /* sticky: once a collective failed          */
    char errmsg[768];
};

/* ---------------------------------------------------------------------------
 * Stream engine: one send stream to one peer and one receive stream from
 * one peer (possibly the same), made of items, moved concurrently in one
 * poll loop.  A send item may depend on a receive item: it is sent only as
 * far as that item has been received and processed, which pipelines the
 * ring chunk by chunk.
 */
enum el__rx_mode {
    EL__RX_COPY,      /* bytes land in ptr as they are                   */
    EL__RX_REDUCE,    /* ptr[i] = op(ptr[i], received[i])                */
    EL__RX_REDUCE_FIN /* the same, then the avg division if op is EL_AVG */
};

struct el__tx {
    const char *ptr;
    size_t len;
    int dep; /* receive item bounding this one, or -1           */
};

struct el__rx {
    char *ptr;
    size_t len;
    enum el__rx_mode mode;
};

/* Run the two streams to completion.  Returns 0, or the (sticky) error
 * after el__comm_fail() recorded it. */
int el__xfer(struct el_comm *c, int send_peer, const struct el__tx *tx, int ntx,
             int recv_peer, const struct el__rx *rx, int nrx);

/* Record a failure of the collective in progress: 'peer' (or -1) is at
 * fault, rc its code, what the detail.  Fetches the peer's own failure
 * report from the store if it left one (so the root cause is named),
 * publishes this rank's, shuts every connection down.  Returns rc. */
int el__comm_fail(struct el_comm *c, int rc, int peer, const char *what);

/* A transfer with 'peer' made no progress for opts.timeout_ms.  Publishes
 * whom this rank waits on, gives the other ranks up to min(timeout, 1 s) to
 * do the same, then follows the chain of waits to the rank that is not
 * waiting on anyone (the hung one) and fails naming it, so that every rank
 * blames the same peer.  Returns the sticky error. */
int el__comm_timeout(struct el_comm *c, int peer, const char *what);

/* opts.stop (include/elrun/coll.h): a wait that may block longer lasts at
 * most EL__STOP_SLICE_MS when a stop flag is given, and the flag is read
 * after every wake-up. */
#define EL__STOP_SLICE_MS 10

/* 1 when the program asked blocked calls to return (a NULL flag never). */
static inline int el__stop_asked(volatile sig_atomic_t *stop)
{
    return stop && *stop;
}

/* How long a wait of up to ms may block before looking at the flag. */
static inline int el__stop_slice(volatile sig_atomic_t *stop, int ms)
{
    return stop && (ms < 0 || ms > EL__STOP_SLICE_MS) ? EL__STOP_SLICE_MS : ms;
}

/* The collective in progress was stopped through opts.stop: make the
 * communicator broken with -ECANCELED, tell shared-memory waiters, shut
 * the connections down so that peers notice at once.  Never touches the
 * store (its server may be on the frozen node).  Returns -ECANCELED. */
int el__comm_stopped(struct el_comm *c);

/* Grow c->tmp to at least n bytes; 0 or -ENOMEM. */
int el__comm_tmp(struct el_comm *c, size_t n);

/* ---------------------------------------------------------------------------
 * Reduction kernels.  bytes is a multiple of the element size.
 */
void el__reduce(void *dst, const void *src, size_t bytes, enum el_dtype t,
                enum el_redop op);
/* dst /= world for EL_AVG; nothing for the other ops. */
void el__finish(void *dst, size_t bytes, enum el_dtype t, enum el_redop op,
                int world);

/* ---------------------------------------------------------------------------
 * Algorithms.  Arguments are validated; world > 1.
 */
int el__allreduce_ring(struct el_comm *c, char *buf, size_t count, size_t esz);
int el__allreduce_rd(struct el_comm *c, char *buf, size_t count, size_t esz);
int el__allgather_ring(struct el_comm *c, char *recvbuf, size_t bytes);
int el__broadcast_chain(struct el_comm *c, char *buf, size_t bytes, int root);
int el__broadcast_tree(struct el_comm *c, char *buf, size_t bytes, int root);
int el__barrier_dissem(struct el_comm *c);

/* ---------------------------------------------------------------------------
 * Shared memory (transport_shm.c, coll_shm.c).
 */
/* Collective over the TCP mesh: map a segment shared by every rank and set
 * c->shm, or leave it NULL if any rank cannot.  0 or the sticky error. */
int el__shm_open(struct el_comm *c, size_t chunk);
void el__shm_close(struct el_shm *s);
/* Tell every rank waiting in a barrier that 'rank' failed, or (stopped)
 * gave up waiting because its program asked it to (opts.stop). */
void el__shm_abort(struct el_shm *s, int rank, int stopped);
/* Bytes of each area of a slot. */
size_t el__shm_chunk(const struct el_shm *s);
/* The next step's slot: returns its first input area (rank r's is at
 * + r * chunk) and sets *out to its output area. */
char *el__shm_step(struct el_shm *s, char **out);
/* Wait until every rank has entered this barrier; 0 or the sticky error. */
int el__shm_barrier(struct el_comm *c);

int el__allreduce_shm(struct el_comm *c, char *buf, size_t count, size_t esz);
int el__broadcast_shm(struct el_comm *c, char *buf, size_t bytes, int root);
int el__allgather_shm(struct el_comm *c, char *recvbuf, size_t bytes);

#endif
