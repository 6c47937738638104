/* coll_shm.c -- the collectives over the shared-memory transport, used when
 * every rank is on this host (transport_shm.c).
 *
 * Allreduce works chunk by chunk through the two slots: every rank copies
 * its chunk into its input area; barrier; rank r reduces slice r of the
 * chunk across all input areas, in rank order, into input area 0; barrier;
 * every rank copies the reduced chunk out.  Each element is reduced by one
 * rank, so all ranks get bitwise the same result, and each rank moves the
 * chunk through memory three times instead of through the kernel's TCP
 * stack.  The next chunk uses the other slot, which is why one slot's
 * areas are never written while another rank may still read them: a rank
 * writes a slot again only after a barrier that every rank reached after
 * its last read of it.
 */
#include <string.h>

#include "coll/coll_int.h"

int el__allreduce_shm(struct el_comm *c, char *buf, size_t count, size_t esz)
{
    struct el_shm *s = c->shm;
    int n = c->world, r = c->rank, rc;
    size_t C = el__shm_chunk(s), per = C / esz * esz;
    size_t bytes = count * esz;
    for (size_t off = 0; off < bytes; off += per) {
        size_t len = bytes - off < per ? bytes - off : per;
        size_t ne = len / esz, base = ne / (size_t)n, extra = ne % (size_t)n;
        char *out, *in = el__shm_step(s, &out);
        memcpy(in + (size_t)r * C, buf + off, len);
        if ((rc = el__shm_barrier(c)) != 0)
            return rc;
        size_t a =
            ((size_t)r * base + ((size_t)r < extra ? (size_t)r : extra)) * esz;
        size_t l = (base + ((size_t)r < extra ? 1 : 0)) * esz;
        if (l > 0) {
            for (int k = 1; k < n; k++)
                el__reduce(in + a, in + (size_t)k * C + a, l, c->dtype, c->op);
            el__finish(in + a, l, c->dtype, c->op, n);
        }
        if ((rc = el__shm_barrier(c)) != 0)
            return rc;
        memcpy(buf + off, in, len);
    }
    return 0;
}

int el__broadcast_shm(struct el_comm *c, char *buf, size_t bytes, int root)
{
    struct el_shm *s = c->shm;
    size_t C = el__shm_chunk(s);
    for (size_t off = 0; off < bytes; off += C) {
        size_t len = bytes - off < C ? bytes - off : C;
        char *out;
        el__shm_step(s, &out);
        if (c->rank == root)
            memcpy(out, buf + off, len);
        int rc = el__shm_barrier(c);
        if (rc != 0)
            return rc;
        if (c->rank != root)
            memcpy(buf + off, out, len);
    }
    return 0;
}

int el__allgather_shm(struct el_comm *c, char *recvbuf, size_t bytes)
{
    struct el_shm *s = c->shm;
    size_t C = el__shm_chunk(s);
    int n = c->world;
    for (size_t off = 0; off < bytes; off += C) {
        size_t len = bytes - off < C ? bytes - off : C;
        char *out, *in = el__shm_step(s, &out);
        memcpy(in + (size_t)c->rank * C,
               recvbuf + (size_t)c->rank * bytes + off, len);
        int rc = el__shm_barrier(c);
        if (rc != 0)
            return rc;
        for (int k = 0; k < n; k++)
            if (k != c->rank)
                memcpy(recvbuf + (size_t)k * bytes + off, in + (size_t)k * C,
                       len);
    }
    return 0;
}
