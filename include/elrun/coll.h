/* coll.h -- collectives among the workers of one round: allreduce,
 * broadcast, allgather and barrier over shared memory or TCP, connected
 * through the store.
 *
 * A communicator joins 'world' processes (ranks 0..world-1).  Every rank
 * calls el_comm_open() with the same store, prefix, world and options; each
 * publishes a listening address under the prefix and connects to every
 * other rank.  Then every rank must call the same collectives, in the same
 * order, with the same counts, types, operations and roots (as with MPI,
 * gloo or NCCL: a mismatch is not detected and gives garbage or a timeout).
 *
 * Transport: when every rank runs on the same host (checked at open: they
 * all map one shared-memory segment), data moves through shared memory
 * (allreduce: copy in, each rank reduces a slice, copy out) and the TCP
 * connections only serve to notice dead peers.  Otherwise, or with
 * opts.shm = -1, everything goes over TCP:
 * allreduce uses recursive doubling (log2 steps, latency
 * optimal) up to opts.small_bytes and a pipelined ring (reduce-scatter then
 * all-gather, bandwidth optimal) above; every rank ends with bitwise the
 * same result.  Broadcast uses a binomial tree for small buffers and a
 * pipelined chain for large ones; allgather a ring; barrier a dissemination
 * barrier.  Any world size (1..N) and any element count (including 0) work.
 *
 * Failures: a peer that dies is noticed at once: over TCP by the EOF or
 * reset on a connection in use (or a reset on any other), over shared
 * memory within 10 ms by its TCP connections, idle in that mode, closing.
 * A peer that hangs (or never enters the collective) is noticed when no
 * byte has moved for opts.timeout_ms.  Over shared memory the barrier
 * shows which rank did not arrive; over TCP the ranks take up to
 * min(timeout_ms, 1 s) more to agree on which rank is hung (each publishes
 * whom it waits on, and the chain is followed to the rank waiting on no
 * one).  The collective then returns EL_EPEERLOST or -ETIMEDOUT, and
 * el_comm_errmsg() names the peer at fault by rank and address: ranks tell
 * each other through the store ("<prefix>/abort/<rank>"), so that ranks
 * further away name the same root cause rather than the neighbour that
 * passed the failure on.  After a failure the communicator is broken:
 * every later call returns the same error at once; close it (the agent
 * restarts the round).
 *
 * Stopping a blocked call: a peer that is frozen (SIGSTOP, a paused VM)
 * keeps its connections open and answers nothing, so a collective with it
 * would wait for opts.timeout_ms.  A program that has been asked to stop
 * (its SIGTERM handler set a flag) points opts.stop at that flag.  Every
 * call that waits for peers (el_comm_open() included: the store, the
 * connections; every collective) checks it each time its wait is woken and
 * at least every 10 ms, so it returns -ECANCELED within about 10 ms of the
 * flag becoming non-zero: poll() and futex waits return EINTR on a signal
 * even under SA_RESTART, and the 10 ms bound covers a signal caught just
 * before a wait or by another thread.  A call that needs no wait may still
 * complete while the flag is set.  After -ECANCELED the communicator is
 * broken like after a failure (the data of the interrupted collective is
 * undefined, later calls return -ECANCELED at once; close it); its
 * connections are shut down at once, so peers blocked on this rank fail
 * with EL_EPEERLOST naming it instead of waiting.  Unlike a failure, the
 * store is not used (it may be on the frozen node): el_comm_errmsg() says
 * the call was stopped; peers learn why only over shared memory (their
 * message says this rank stopped waiting), over TCP they see its
 * connections close.  A program that wants
 * its ranks to finish the collective they are in when every peer answers
 * (to agree on a stop, as examples/train_fmnist.c does) sets the flag it
 * passes here a little after its stop signal, from a timer.
 *
 * Threads: a communicator is used by one thread at a time.  The store
 * client passed to el_comm_open() is borrowed: it must outlive the
 * communicator, and it is used again only when a collective fails (to
 * publish and read the cause), so the caller must not use it from another
 * thread during collectives.
 */
#ifndef ELRUN_COLL_H
#define ELRUN_COLL_H

#include <signal.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct el_store;
struct el_comm;

enum el_dtype { EL_FLOAT32, EL_FLOAT64, EL_INT32, EL_INT64 };

/* EL_AVG divides the sum by the world size (integer types: truncating C
 * division); int sums wrap around on overflow. */
enum el_redop { EL_SUM, EL_AVG, EL_MAX, EL_MIN };

/* A zero field takes the default in brackets.  Every rank must pass the
 * same small_bytes and shm (they pick the algorithm and transport). */
struct el_comm_opts {
    int timeout_ms;         /* a collective fails when no byte has moved
                               (TCP) or a barrier step has not completed
                               (shared memory) for this long [300000]     */
    int connect_timeout_ms; /* el_comm_open() waits this long for every
                               peer to publish and connect [60000]        */
    const char *host;       /* address to listen on and publish, reachable
                               by every peer [this host's address on the
                               route to $MASTER_ADDR if set, as the agent
                               sets it, else "127.0.0.1"]                 */
    size_t chunk_bytes;     /* pipeline granularity of the ring [256 KiB] */
    size_t small_bytes;     /* allreduce and broadcast of at most this many
                               bytes use the latency-optimal algorithm
                               [32 KiB]; 1 forces the ring/chain          */
    int shm;                /* 1: when every rank runs on this host, move
                               data through shared memory instead of TCP
                               (much faster); -1: TCP only [1]            */
    size_t shm_chunk_bytes; /* shared-memory step size [1 MiB]            */
    volatile sig_atomic_t *stop; /* borrowed, may be NULL: once *stop is
                               non-zero, a call blocked on peers returns
                               -ECANCELED within ~10 ms (see "Stopping a
                               blocked call" above); it must outlive the
                               communicator [NULL: never]                 */
};

/* Join the communicator 'prefix' as 'rank' of 'world'.  Publishes the key
 * "<prefix>/addr/<rank>" and, on failure, "<prefix>/abort/<rank>" and
 * "<prefix>/wait/<rank>"; the prefix must be unique to this communicator
 * (e.g. contain the round): stale addresses under a reused prefix make the
 * open time out.  The caller may delete the prefix once every rank closed.
 * Blocks until connected to every peer or opts.connect_timeout_ms passed.
 * opts may be NULL (defaults).  Returns 0 and sets *out, or -ETIMEDOUT,
 * EL_EPEERLOST, -ECANCELED (opts.stop), EL_EUSAGE, -ENOMEM, -errno; then
 * el_comm_open_errmsg() says which peer or step failed. */
int el_comm_open(struct el_comm **out, struct el_store *store,
                 const char *prefix, int rank, int world,
                 const struct el_comm_opts *opts);

/* Why the last el_comm_open() on this thread failed; never NULL.  The text
 * is thread-local and valid until that thread's next el_comm_open(). */
const char *el_comm_open_errmsg(void);

/* Close every connection and free the communicator.  NULL is a no-op.
 * Does not wait for peers and never fails. */
void el_comm_close(struct el_comm *c);

int el_comm_rank(const struct el_comm *c);
int el_comm_world(const struct el_comm *c);
/* "shm" or "tcp": how this communicator moves data (static string). */
const char *el_comm_transport(const struct el_comm *c);

/* Why the last collective failed, naming the peer at fault; never NULL.
 * Borrowed until the next call on c. */
const char *el_comm_errmsg(const struct el_comm *c);

/* Reduce 'count' elements of buf across all ranks, in place; every rank
 * gets the result (bitwise the same on all).  Blocks.  Returns 0,
 * EL_EPEERLOST, -ETIMEDOUT, -ECANCELED (opts.stop was set), EL_EUSAGE (bad
 * type/op, NULL buf with count > 0), -ENOMEM. */
int el_allreduce(struct el_comm *c, void *buf, size_t count,
                 enum el_dtype dtype, enum el_redop op);

/* The calls below block until done and return 0, EL_EPEERLOST,
 * -ETIMEDOUT, -ECANCELED, EL_EUSAGE (bad arguments; the communicator stays
 * usable) or -ENOMEM, like el_allreduce(). */

/* Copy 'bytes' bytes of root's buf into every other rank's buf. */
int el_broadcast(struct el_comm *c, void *buf, size_t bytes, int root);

/* Every rank contributes 'bytes' bytes (sendbuf) and receives all of them,
 * rank k's at recvbuf + k * bytes (recvbuf holds world * bytes).  sendbuf
 * may equal recvbuf + rank * bytes (in place). */
int el_allgather(struct el_comm *c, const void *sendbuf, void *recvbuf,
                 size_t bytes);

/* Return once every rank has entered the barrier. */
int el_barrier(struct el_comm *c);

/* Size in bytes of one element of dtype, 0 if dtype is not valid. */
size_t el_dtype_size(enum el_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
