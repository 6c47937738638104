/* dp.c -- replicated checkpoints for data-parallel training: one writer per
 * distinct checkpoint directory (found with probe files), saves whose
 * outcome every rank agrees on, and resuming from the newest step any
 * directory holds, broadcast by the rank that holds it.  The contract is in
 * include/elrun/ckpt.h; the file format is ckpt.c's.
 *
 * Every collective exchange here is an allgather of a small fixed-size
 * record per rank (or, for the payload, a broadcast), so that each rank
 * computes the verdict from the same data and all return the same value.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "ckpt_int.h"
#include "elrun/ckpt.h"
#include "elrun/coll.h"
#include "elrun/err.h"

#define DIRNAME 112 /* directory names as other ranks see them (cut)  */

struct el_ckpt_dp {
    struct el_comm *comm; /* borrowed; NULL for a world of one     */
    int rank, world, keep;
    int writer;            /* this rank writes its directory        */
    int ndirs;             /* distinct directories (writers)        */
    int *owner;            /* owner[r]: the writer of rank r's dir  */
    char (*dirs)[DIRNAME]; /* dirs[r]: rank r's directory, cut      */
    char *dir;             /* this rank's directory                 */
    char msg[1024];
};

/* What each rank tells the others at open. */
struct probe_rec {
    uint64_t nonce; /* its probe file is .elck-probe-<nonce in hex>  */
    int32_t rc;     /* 0, or why it cannot use its directory        */
    int32_t pad;
    char dir[DIRNAME];
};

/* What each writer tells the others when resuming. */
struct latest_rec {
    int64_t step;    /* newest good step in its directory, -1: none   */
    int32_t rc;      /* 0, or why it cannot read its directory        */
    int32_t sharded; /* the newest one is sharded (not replicated)    */
};

static void setmsg(char *b, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void setmsg(char *b, size_t n, const char *fmt, ...)
{
    if (!n)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(b, n, fmt, ap) < 0)
        b[0] = '\0';
    va_end(ap);
}

/* Allgather 'bytes' per rank (a copy alone).  On failure the message says
 * which exchange failed and why. */
static int gather(struct el_comm *comm, const void *mine, void *all,
                  size_t bytes, const char *what, char *msg, size_t mlen)
{
    if (!comm) {
        memcpy(all, mine, bytes);
        return 0;
    }
    int rc = el_allgather(comm, mine, all, bytes);
    if (rc != 0)
        setmsg(msg, mlen, "%s: the exchange between ranks failed: %s (%s)",
               what, el_strerror(rc), el_comm_errmsg(comm));
    return rc;
}

static void probe_name(char *b, size_t n, uint64_t nonce)
{
    snprintf(b, n, ".elck-probe-%016" PRIx64, nonce);
}

/* Create this rank's probe in dir; *dirfd stays open on success. */
static int make_probe(const char *dir, uint64_t *nonce, int *dirfd)
{
    int rc = el__ckpt_mkdir_p(dir);
    if (rc != 0)
        return rc;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    for (int tries = 0; tries < 8; tries++) {
        if (getrandom(nonce, sizeof *nonce, 0) != sizeof *nonce) {
            rc = -errno;
            break;
        }
        char name[64];
        probe_name(name, sizeof name, *nonce);
        int pf =
            openat(fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (pf >= 0) {
            close(pf);
            *dirfd = fd;
            return 0;
        }
        rc = -errno;
        if (errno != EEXIST)
            break;
    }
    close(fd);
    return rc;
}

int el_ckpt_dp_open(struct el_ckpt_dp **out, struct el_comm *comm,
                    const char *dir, int keep, char *err, size_t errlen)
{
    if (errlen)
        err[0] = '\0';
    if (!out || !dir || !dir[0]) {
        setmsg(err, errlen, "el_ckpt_dp_open: no checkpoint directory");
        return EL_EUSAGE;
    }
    *out = NULL;
    struct el_ckpt_dp *dp = calloc(1, sizeof *dp);
    if (!dp)
        return -ENOMEM;
    dp->comm = comm;
    dp->rank = comm ? el_comm_rank(comm) : 0;
    dp->world = comm ? el_comm_world(comm) : 1;
    dp->keep = keep;
    dp->dir = strdup(dir);
    dp->owner = calloc((size_t)dp->world, sizeof *dp->owner);
    dp->dirs = calloc((size_t)dp->world, sizeof *dp->dirs);
    struct probe_rec *all = calloc((size_t)dp->world, sizeof *all);
    int32_t *owners = calloc((size_t)dp->world, sizeof *owners);
    int rc = dp->dir && dp->owner && dp->dirs && all && owners ? 0 : -ENOMEM;
    /* Running out of memory here, before any exchange, leaves the other
     * ranks waiting in the allgather until the communicator times out. */
    if (rc != 0)
        goto out;

    struct probe_rec me = {0};
    int dirfd = -1;
    me.rc = make_probe(dir, &me.nonce, &dirfd);
    snprintf(me.dir, sizeof me.dir, "%s", dir);
    rc = gather(comm, &me, all, sizeof me,
                "finding the checkpoint "
                "directories",
                err, errlen);
    int bad = -1;
    for (int r = 0; rc == 0 && r < dp->world && bad < 0; r++)
        if (all[r].rc != 0)
            bad = r;
    if (rc == 0 && bad >= 0) {
        rc = all[bad].rc;
        setmsg(err, errlen,
               "rank %d cannot create files in its checkpoint "
               "directory %s: %s",
               bad, all[bad].dir, el_strerror(rc));
    }
    int32_t mine = dp->rank;
    for (int r = 0; rc == 0 && r < dp->rank; r++) {
        char name[64];
        probe_name(name, sizeof name, all[r].nonce);
        if (faccessat(dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
            mine = r;
            break;
        }
    }
    /* Also the barrier before the probes go: every rank has looked. */
    if (rc == 0)
        rc = gather(comm, &mine, owners, sizeof mine,
                    "finding the "
                    "checkpoint directories",
                    err, errlen);
    if (dirfd >= 0) {
        char name[64];
        probe_name(name, sizeof name, me.nonce);
        unlinkat(dirfd, name, 0);
        close(dirfd);
    }
    if (rc != 0)
        goto out;
    for (int r = 0; r < dp->world; r++) {
        dp->owner[r] = owners[r];
        dp->ndirs += owners[r] == r;
        memcpy(dp->dirs[r], all[r].dir, DIRNAME);
        dp->dirs[r][DIRNAME - 1] = '\0';
    }
    dp->writer = dp->owner[dp->rank] == dp->rank;
    snprintf(dp->msg, sizeof dp->msg, "no error");
out:
    free(all);
    free(owners);
    if (rc != 0) {
        el_ckpt_dp_close(dp);
        return rc;
    }
    *out = dp;
    return 0;
}

void el_ckpt_dp_close(struct el_ckpt_dp *dp)
{
    if (!dp)
        return;
    free(dp->dir);
    free(dp->owner);
    free(dp->dirs);
    free(dp);
}

int el_ckpt_dp_is_writer(const struct el_ckpt_dp *dp)
{
    return dp->writer;
}

int el_ckpt_dp_dirs(const struct el_ckpt_dp *dp)
{
    return dp->ndirs;
}

const char *el_ckpt_dp_dir(const struct el_ckpt_dp *dp)
{
    return dp->dir;
}

const char *el_ckpt_dp_errmsg(const struct el_ckpt_dp *dp)
{
    return dp->msg;
}

static int save_here(struct el_ckpt_dp *dp, int64_t step,
                     const struct iovec *iov, int iovcnt)
{
    struct el_ckpt_opts o = {
        .dir = dp->dir, .rank = 0, .world = dp->world, .keep = dp->keep};
    return el_ckpt_savev(&o, step, iov, iovcnt);
}

int el_ckpt_dp_savev(struct el_ckpt_dp *dp, int64_t step,
                     const struct iovec *iov, int iovcnt,
                     struct el_ckpt_dp_saved *out)
{
    struct el_ckpt_dp_saved res = {.dirs = dp ? dp->ndirs : 0, .saved = -1};
    if (out)
        *out = res;
    if (!dp || step < 0 || iovcnt < 0 || (iovcnt > 0 && !iov))
        return EL_EUSAGE;
    int32_t mine = dp->writer ? save_here(dp, step, iov, iovcnt) : 0;
    res.local_rc = mine;
    if (out)
        *out = res;
    int32_t *all = malloc((size_t)dp->world * sizeof *all);
    if (!all) /* the others time out in the allgather */
        return -ENOMEM;
    char what[64];
    snprintf(what, sizeof what, "checkpoint step %" PRId64, step);
    int rc = gather(dp->comm, &mine, all, sizeof mine, what, dp->msg,
                    sizeof dp->msg);
    if (rc != 0) {
        free(all);
        return rc;
    }
    int failed = 0, first = -1;
    for (int r = 0; r < dp->world; r++)
        if (dp->owner[r] == r && all[r] != 0) {
            if (first < 0)
                first = r;
            failed++;
        }
    res.saved = dp->ndirs - failed;
    if (out)
        *out = res;
    if (first < 0) {
        free(all);
        return 0;
    }
    rc = all[first];
    int p = snprintf(dp->msg, sizeof dp->msg,
                     "checkpoint step %" PRId64
                     " is not saved in %d of %d checkpoint directories: "
                     "rank %d (%s): %s",
                     step, failed, dp->ndirs, first, dp->dirs[first],
                     el_strerror(rc));
    for (int r = first + 1;
         r < dp->world && p > 0 && (size_t)p < sizeof dp->msg; r++)
        if (dp->owner[r] == r && all[r] != 0)
            p += snprintf(dp->msg + p, sizeof dp->msg - (size_t)p,
                          "; rank %d (%s): %s", r, dp->dirs[r],
                          el_strerror(all[r]));
    free(all);
    return rc;
}

int el_ckpt_dp_save_alone(struct el_ckpt_dp *dp, int64_t step,
                          const struct iovec *iov, int iovcnt)
{
    if (!dp)
        return EL_EUSAGE;
    int rc = save_here(dp, step, iov, iovcnt);
    if (rc != 0)
        setmsg(dp->msg, sizeof dp->msg,
               "checkpoint step %" PRId64 " in %s: "
               "%s",
               step, dp->dir, el_strerror(rc));
    return rc;
}

/* The lowest writer whose record has an error, or -1. */
static int first_failed(const struct el_ckpt_dp *dp,
                        const struct latest_rec *all)
{
    for (int r = 0; r < dp->world; r++)
        if (dp->owner[r] == r && all[r].rc != 0)
            return r;
    return -1;
}

int el_ckpt_dp_resume(struct el_ckpt_dp *dp, void **buf, size_t *len,
                      struct el_ckpt_dp_found *found, struct el_ckpt_scan *scan)
{
    if (scan)
        scan->nskipped = 0;
    if (!dp || !buf || !len)
        return EL_EUSAGE;
    *buf = NULL;
    *len = 0;
    struct latest_rec mine = {.step = -1};
    struct el_ckpt_info info = {0};
    if (dp->writer) {
        int rc = el_ckpt_latest(dp->dir, &info, scan);
        if (rc == 0) {
            mine.step = info.step;
            mine.sharded = info.sharded;
        } else if (rc != -ENOENT) {
            mine.rc = rc;
        }
    }
    struct latest_rec *all = malloc((size_t)dp->world * sizeof *all);
    if (!all)
        return -ENOMEM;
    int rc = gather(dp->comm, &mine, all, sizeof mine,
                    "finding the newest "
                    "checkpoint",
                    dp->msg, sizeof dp->msg);
    int bad = rc == 0 ? first_failed(dp, all) : -1;
    if (bad >= 0) {
        rc = all[bad].rc;
        setmsg(dp->msg, sizeof dp->msg,
               "rank %d cannot read its checkpoint "
               "directory %s: %s",
               bad, dp->dirs[bad], el_strerror(rc));
    }
    int64_t best = -1;
    int src = -1, holders = 0;
    for (int r = 0; rc == 0 && r < dp->world; r++) {
        if (dp->owner[r] != r || all[r].step < 0)
            continue;
        if (all[r].step > best) {
            best = all[r].step;
            src = r;
            holders = 0;
        }
        holders += all[r].step == best;
    }
    if (rc == 0 && best < 0) {
        rc = -ENOENT;
        setmsg(dp->msg, sizeof dp->msg,
               "no good checkpoint in any of the %d "
               "checkpoint directories",
               dp->ndirs);
    }
    if (rc == 0 && all[src].sharded) {
        rc = EL_EFORMAT;
        setmsg(dp->msg, sizeof dp->msg,
               "checkpoint step %" PRId64 " in %s "
               "(rank %d) is sharded, not one replicated payload",
               best, dp->dirs[src], src);
    }
    free(all);
    if (rc != 0)
        return rc;

    /* The holder loads it and says how it went and how long it is; then
     * every rank says whether it could make room; then the payload. */
    void *p = NULL;
    struct {
        int64_t rc;
        uint64_t len;
        int64_t world;
    } hd = {0, 0, 0};
    if (dp->rank == src) {
        size_t l = 0;
        hd.rc = el_ckpt_load(dp->dir, best, 0, &p, &l, &info);
        hd.len = l;
        hd.world = info.world;
    }
    if (dp->comm) {
        rc = el_broadcast(dp->comm, &hd, sizeof hd, src);
        if (rc != 0)
            goto comm_failed;
    }
    if (hd.rc != 0) {
        free(p);
        setmsg(dp->msg, sizeof dp->msg,
               "rank %d cannot load checkpoint step "
               "%" PRId64 " from %s: %s",
               src, best, dp->dirs[src], el_strerror((int)hd.rc));
        return (int)hd.rc;
    }
    if (dp->rank != src)
        p = malloc(hd.len ? (size_t)hd.len : 1);
    if (dp->comm) {
        int32_t ok = p != NULL;
        rc = el_allreduce(dp->comm, &ok, 1, EL_INT32, EL_MIN);
        if (rc == 0 && !ok) {
            free(p);
            setmsg(dp->msg, sizeof dp->msg,
                   "a rank has no memory for "
                   "checkpoint step %" PRId64 " (%" PRIu64 " bytes)",
                   best, hd.len);
            return -ENOMEM;
        }
        if (rc == 0)
            rc = el_broadcast(dp->comm, p, (size_t)hd.len, src);
        if (rc != 0)
            goto comm_failed;
    }
    *buf = p;
    *len = (size_t)hd.len;
    if (found)
        *found = (struct el_ckpt_dp_found){.info = {.step = best,
                                                    .world = (int)hd.world,
                                                    .sharded = 0,
                                                    .bytes = hd.len},
                                           .src = src,
                                           .holders = holders,
                                           .dirs = dp->ndirs};
    return 0;

comm_failed:
    free(p);
    setmsg(dp->msg, sizeof dp->msg,
           "broadcast of checkpoint step %" PRId64
           " from rank %d failed: %s (%s)",
           best, src, el_strerror(rc), el_comm_errmsg(dp->comm));
    return rc;
}
