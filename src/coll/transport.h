/* transport.h -- what the collective algorithms see of the network: one
 * connection to every other rank, moving bytes without ever blocking, plus
 * one wait call.  transport_tcp.c implements it over TCP; the algorithms
 * (ring.c, small.c) and the stream engine (engine.c) only use this file.
 * Private to src/coll.
 */
#ifndef ELRUN_COLL_TRANSPORT_H
#define ELRUN_COLL_TRANSPORT_H

#include <signal.h>
#include <stddef.h>

struct el_store;
struct el_tp;

/* Listen on host (port 0), publish "<prefix>/addr/<rank>" in the store,
 * read every peer's address and connect to all of them (rank i dials the
 * ranks below it and accepts the ones above).  Blocks up to timeout_ms, or
 * until *stop (may be NULL) is set: -ECANCELED.  Returns 0 and sets *out,
 * or a negative code with a message naming the peer or step in err. */
int el__tp_open(struct el_tp **out, struct el_store *store, const char *prefix,
                int rank, int world, const char *host, int timeout_ms,
                volatile sig_atomic_t *stop, char *err, size_t errlen);

/* Close every connection; NULL is a no-op. */
void el__tp_close(struct el_tp *tp);

/* "host:port" that peer listened on (for messages). */
const char *el__tp_addr(const struct el_tp *tp, int peer);

/* Move up to len bytes to / from peer.  Return the number of bytes moved
 * (> 0), 0 when the connection would block, EL_EPEERLOST when the peer
 * closed its end (EOF), or -errno (-ECONNRESET, -EPIPE, ...). */
long el__tp_send(struct el_tp *tp, int peer, const void *buf, size_t len);
long el__tp_recv(struct el_tp *tp, int peer, void *buf, size_t len);

/* Wait until send_peer can take bytes or recv_peer has bytes (either may be
 * -1), for at most timeout_ms.  Every other connection is watched for a
 * reset or hang-up.  Returns 1 when something is ready, 0 on timeout or
 * when a signal was caught, or a negative code with *bad set to the peer
 * whose connection failed. */
int el__tp_wait(struct el_tp *tp, int send_peer, int recv_peer, int timeout_ms,
                int *bad);

/* Without waiting: 0 if every connection is healthy, else a negative code
 * with *bad set to a peer whose connection was closed or reset.  Data
 * waiting to be read is left alone (it is not a failure). */
int el__tp_check(struct el_tp *tp, int *bad);

/* Wait up to timeout_ms for any peer to close or reset its connection.
 * Returns 1 with *bad set, or 0 when none did (or a signal was caught). */
int el__tp_wait_close(struct el_tp *tp, int timeout_ms, int *bad);

/* Shut every connection down (both directions) so that peers blocked on
 * this rank notice at once.  The transport is unusable afterwards. */
void el__tp_shutdown(struct el_tp *tp);

#endif
