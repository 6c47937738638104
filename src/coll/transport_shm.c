/* transport_shm.c -- the shared-memory transport, used when every rank of a
 * communicator runs on the same host: one mapping shared by all ranks, with
 * two slots of (world inputs + one output) chunk-sized areas, and a
 * process-shared barrier on a futex.
 *
 * Setup (collective, over the TCP mesh that exists already): rank 0 creates
 * a memfd holding a random token and sends "/proc/<pid>/fd/<fd>"; every
 * rank opens and maps it and checks the token (another host or pid
 * namespace fails here); an allreduce of the outcome makes all ranks agree.
 * The memory goes away with the last mapping, whatever dies when.  Without
 * memfd, or when some rank cannot open it through /proc (a process that is
 * not dumpable), they agree again on a /dev/shm file, which every rank
 * unlinks after the agreement.  If any rank cannot map it (other
 * host, other /dev/shm), every rank stays on TCP.
 *
 * Waiting: a rank sleeps on the futex at once, in slices of SLICE_MS (no
 * spinning: with more ranks than idle cores, as on a 2-core machine, a
 * spinning rank steals the time the late rank needs; measured slower).  Between slices
 * it checks the shared abort word (set by a rank that failed) and its TCP
 * connections, which carry no data in this mode: a dead peer's kernel
 * closes them, so a killed rank is noticed within a slice, and a hung one
 * after opts.timeout_ms.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "coll/coll_int.h"
#include "coll/transport.h"
#include "elrun/err.h"
#include "elrun/net.h"

#define SLICE_MS 10
#define HDR_BYTES 4096
#define ABORT_STOPPED 0x80000000u

struct shm_hdr {
    uint64_t token;
    _Atomic uint32_t arrive; /* barrier counter, the futex word           */
    _Atomic uint32_t abort;  /* 1 + rank of the first rank that failed,
                                | ABORT_STOPPED if it was asked to stop   */
    _Atomic uint32_t seen[]; /* [world] barriers each rank has entered     */
};

struct el_shm {
    char *base;
    size_t size, chunk;
    int world;
    uint32_t gen; /* barriers this rank has passed             */
    unsigned seq; /* steps taken; picks the slot               */
};

static long futex(_Atomic uint32_t *w, int op, uint32_t val,
                  const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)w, op, val, ts, NULL, 0);
}

static struct shm_hdr *hdr(struct el_shm *s)
{
    return (struct shm_hdr *)s->base;
}

size_t el__shm_chunk(const struct el_shm *s)
{
    return s->chunk;
}

/* Next step's slot: its input areas (world of them) and output area. */
char *el__shm_step(struct el_shm *s, char **out)
{
    unsigned slot = s->seq++ & 1u;
    char *in =
        s->base + HDR_BYTES + (size_t)slot * (size_t)(s->world + 1) * s->chunk;
    *out = in + (size_t)s->world * s->chunk;
    return in;
}

static int map(const char *path, size_t size, int create, char **base)
{
    int fd =
        open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0600);
    if (fd < 0)
        return -errno;
    if (create && ftruncate(fd, (off_t)size) != 0) {
        int e = -errno;
        close(fd);
        unlink(path);
        return e;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, fd, 0);
    int e = -errno;
    close(fd);
    if (p == MAP_FAILED) {
        if (create)
            unlink(path);
        return e;
    }
    *base = p;
    return 0;
}

struct shm_hello {
    uint64_t token;
    uint64_t size, chunk;
    uint32_t named; /* path is a /dev/shm name to unlink            */
    char path[92];
};

/* Rank 0: an anonymous memfd that the others open through /proc, so that
 * no name can outlive the ranks; a /dev/shm name if memfd is missing. */
static int create_segment(struct shm_hello *h, int named, char **base, int *mfd)
{
    int fd = named ? -1 : memfd_create("elrun-coll", MFD_CLOEXEC);
    if (fd >= 0) {
        void *p = MAP_FAILED;
        if (ftruncate(fd, (off_t)h->size) == 0)
            p = mmap(NULL, h->size, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_POPULATE, fd, 0);
        if (p != MAP_FAILED) {
            snprintf(h->path, sizeof h->path, "/proc/%d/fd/%d", (int)getpid(),
                     fd);
            *base = p;
            *mfd = fd;
            return 0;
        }
        close(fd);
    }
    h->named = 1;
    snprintf(h->path, sizeof h->path, "/dev/shm/elrun-coll-%d-%016llx",
             (int)getpid(), (unsigned long long)h->token);
    return map(h->path, h->size, 1, base);
}

/* One try at agreeing on a segment: 1 when c->shm is set, 0 when some
 * rank could not map it, 2 when that happened with a memfd (worth another
 * try with a name), or the sticky error. */
static int attempt(struct el_comm *c, size_t chunk, int named)
{
    int n = c->world, rc;
    struct shm_hello h;
    memset(&h, 0, sizeof h);
    int32_t ok = 1;
    char *base = NULL;
    int mfd = -1;
    /* Cap the mapping at about 64 MiB whatever the world size. */
    size_t cap = ((size_t)64 << 20) / (2 * (size_t)(n + 1));
    if (sizeof(struct shm_hdr) + (size_t)n * 4 > HDR_BYTES)
        return 0; /* too many ranks for the header: stay on TCP */
    if (chunk > cap)
        chunk = cap;
    chunk &= ~(size_t)4095;
    if (chunk < 4096)
        chunk = 4096;
    if (c->rank == 0) {
        if (getrandom(&h.token, sizeof h.token, 0) != sizeof h.token)
            h.token = (uint64_t)el_now_ns() ^ ((uint64_t)getpid() << 32);
        h.chunk = chunk;
        h.size = HDR_BYTES + 2 * (size_t)(n + 1) * chunk;
        if (create_segment(&h, named, &base, &mfd) != 0) {
            h.size = 0; /* tells the others not to try */
        } else {
            memset(base, 0, HDR_BYTES);
            ((struct shm_hdr *)base)->token = h.token;
        }
    }
    c->opname = "open (shared memory)";
    if ((rc = el__broadcast_tree(c, (char *)&h, sizeof h, 0)) != 0)
        goto fail;
    h.path[sizeof h.path - 1] = '\0';
    if (h.size == 0)
        return 0; /* rank 0 could not create it: stay on TCP */
    if (c->rank != 0 && (map(h.path, h.size, 0, &base) != 0 ||
                         ((struct shm_hdr *)base)->token != h.token))
        ok = 0;
    c->dtype = EL_INT32;
    c->op = EL_MIN;
    rc = el__allreduce_rd(c, (char *)&ok, 1, sizeof ok);
    /* Every rank that knows a name removes it (ENOENT is fine), so that
     * it is gone even if rank 0 died after sending it.  A memfd lives on
     * in the mappings. */
    if (h.named)
        unlink(h.path);
    if (mfd >= 0)
        close(mfd);
    mfd = -1;
    if (rc != 0)
        goto fail;
    if (!ok) {
        if (base)
            munmap(base, h.size);
        return h.named ? 0 : 2;
    }
    struct el_shm *s = calloc(1, sizeof *s);
    if (!s) {
        rc = el__comm_fail(c, -ENOMEM, -1, "out of memory");
        goto fail;
    }
    s->base = base;
    s->size = h.size;
    s->chunk = h.chunk;
    s->world = n;
    c->shm = s;
    return 1;
fail:
    if (h.named && h.size && h.path[0])
        unlink(h.path);
    if (mfd >= 0)
        close(mfd);
    if (base)
        munmap(base, h.size);
    return rc;
}

int el__shm_open(struct el_comm *c, size_t chunk)
{
    int rc = attempt(c, chunk, 0);
    /* A memfd that some rank could not open through /proc (not dumpable,
     * another pid namespace): try a /dev/shm name. */
    if (rc == 2)
        rc = attempt(c, chunk, 1);
    return rc < 0 ? rc : 0;
}

void el__shm_close(struct el_shm *s)
{
    if (!s)
        return;
    munmap(s->base, s->size);
    free(s);
}

void el__shm_abort(struct el_shm *s, int rank, int stopped)
{
    uint32_t zero = 0;
    atomic_compare_exchange_strong(&hdr(s)->abort, &zero,
                                   ((uint32_t)rank + 1) |
                                       (stopped ? ABORT_STOPPED : 0));
    /* A sleeper that missed this wake-up sees the flag after its slice. */
    futex(&hdr(s)->arrive, FUTEX_WAKE, INT32_MAX, NULL);
}

static int reached(uint32_t now, uint32_t target)
{
    return (int32_t)(now - target) >= 0;
}

int el__shm_barrier(struct el_comm *c)
{
    struct el_shm *s = c->shm;
    struct shm_hdr *h = hdr(s);
    uint32_t target = (s->gen + 1) * (uint32_t)s->world;
    s->gen++;
    atomic_store(&h->seen[c->rank], s->gen);
    uint32_t now = atomic_fetch_add(&h->arrive, 1) + 1;
    if (now == target) {
        futex(&h->arrive, FUTEX_WAKE, INT32_MAX, NULL);
        return 0;
    }
    long long deadline = el_now_ms() + c->opts.timeout_ms;
    for (;;) {
        now = atomic_load(&h->arrive);
        if (reached(now, target) || atomic_load(&h->abort))
            break;
        /* Asked to stop (opts.stop): the slice bounds how late this is
         * seen; a signal ends the futex wait at once (EINTR). */
        if (el__stop_asked(c->opts.stop))
            return el__comm_stopped(c);
        struct timespec ts = {0, SLICE_MS * 1000000L};
        long fr = futex(&h->arrive, FUTEX_WAIT, now, &ts);
        now = atomic_load(&h->arrive);
        if (reached(now, target) || atomic_load(&h->abort))
            break;
        if (fr == 0 || errno != ETIMEDOUT)
            continue; /* woken, or another rank arrived: look again */
        int bad = -1;
        int rc = el__tp_check(c->tp, &bad);
        /* A peer that finished the whole collective may close at once;
         * its departure is no error if the barrier completed. */
        if (rc < 0 && !reached(atomic_load(&h->arrive), target))
            return el__comm_fail(c, EL_EPEERLOST, bad,
                                 rc == EL_EPEERLOST ? "connection closed "
                                                      "(process died?)"
                                                    : el_strerror(rc));
        if (el_now_ms() >= deadline) {
            int late = -1;
            for (int r = 0; r < s->world && late < 0; r++)
                if (!reached(atomic_load(&h->seen[r]), s->gen))
                    late = r;
            char what[160];
            snprintf(what, sizeof what,
                     "did not reach the barrier within %d ms (hung, or too "
                     "slow to enter the collective?)",
                     c->opts.timeout_ms);
            return el__comm_fail(c, -ETIMEDOUT, late, what);
        }
    }
    uint32_t a = atomic_load(&h->abort);
    if (a && !reached(atomic_load(&h->arrive), target))
        return el__comm_fail(c, EL_EPEERLOST, (int)(a & ~ABORT_STOPPED) - 1,
                             a & ABORT_STOPPED
                                 ? "stopped waiting, asked to by its program "
                                   "(opts.stop; a rank that does not answer "
                                   "is the likely cause)"
                                 : "failed (shared memory)");
    return 0;
}
