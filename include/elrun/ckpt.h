/* ckpt.h -- atomic, checksummed training checkpoints in one directory.
 *
 * A checkpoint is written to a temporary file, fsync'd, renamed into place
 * and the directory fsync'd, so a crash at any point leaves either the old
 * set of checkpoints or the new one, never a half-written file under a
 * checkpoint's name.  Every file starts with a 64-byte header (magic, format
 * version, step, world size, shard, payload length, CRC-32C of the payload,
 * CRC-32C of the header itself); readers check all of it.
 *
 * Two modes:
 *   - whole (sharded = 0): rank 0 writes the whole state as
 *     <dir>/ckpt-<step>.elck; other ranks' calls do nothing.
 *   - sharded (sharded = 1): every rank writes its own part as
 *     <dir>/ckpt-<step>.r<rank>.elck, then all ranks meet in a barrier (a
 *     callback, so this module does not depend on the collectives), then
 *     rank 0 checks every shard's header and writes the completion marker
 *     <dir>/ckpt-<step>.done listing each shard's length and checksum.  A
 *     sharded checkpoint without its marker is incomplete.  All ranks must
 *     see the same directory (one machine, or a shared file system).
 *
 * el_ckpt_latest() finds the newest complete, intact checkpoint, skipping
 * (and reporting through its scan result, never by printing) the corrupt,
 * truncated or incomplete ones it passes over.  After each successful save,
 * rank 0 deletes all but the newest 'keep' complete checkpoints, along with
 * anything older than the oldest one kept (stale temporary files, corrupt or
 * incomplete checkpoints).
 *
 * Several processes may save the same step into one directory at once
 * (each writes its own temporary file, named after its pid and a random
 * number, and renames it into place: the last rename wins, and every
 * version is complete).
 *
 * Replicated checkpoints (el_ckpt_dp_*, at the end of this file) build on
 * these for data-parallel training across nodes: every checkpoint directory
 * of the job (one per node, per rank, or one shared by all) gets each
 * checkpoint from one elected writer, the ranks agree on whether a save
 * succeeded, and resuming takes the newest step any directory holds.  They
 * use the collectives (elrun/coll.h); the functions above do not.
 *
 * Functions block on file I/O and fsync.  They are thread-safe as long as
 * two threads do not write the same step into the same directory.
 */
#ifndef ELRUN_CKPT_H
#define ELRUN_CKPT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EL_CKPT_VERSION 1      /* the on-disk format this code writes  */
#define EL_CKPT_HEADER_SIZE 64 /* bytes before the payload             */
#define EL_CKPT_MAX_SKIPPED 8  /* skipped checkpoints listed in a scan */

struct el_ckpt_opts {
    const char *dir; /* the checkpoint directory; created if missing       */
    int rank;        /* this process's rank, 0 <= rank < world             */
    int world;       /* number of ranks (>= 1); recorded in the header     */
    int sharded;     /* 0: rank 0 writes everything; 1: one shard per rank */
    int keep;        /* complete checkpoints to keep [0 = 3]; < 0 keeps all */
    /* Sharded mode only: returns once every rank has called it (0), or a
     * negative code, which el_ckpt_save() returns.  Called exactly once per
     * save on every rank, after its shard is durable. */
    int (*barrier)(void *arg);
    void *barrier_arg;
};

/* One checkpoint found on disk. */
struct el_ckpt_info {
    int64_t step;   /* the step given to el_ckpt_save()                   */
    int world;      /* world size when it was saved                       */
    int sharded;    /* 1 if it has one file per rank and a marker         */
    uint64_t bytes; /* payload bytes: whole file, or sum of all shards    */
};

/* What el_ckpt_latest() passed over on its way to the newest good one. */
struct el_ckpt_scan {
    int nskipped; /* checkpoints skipped (may exceed the array below)   */
    struct {
        int64_t step;
        int err;       /* EL_EFORMAT (bad or truncated) or -errno (I/O)     */
        char what[96]; /* e.g. "ckpt-12.elck: payload checksum mismatch"    */
    } skipped[EL_CKPT_MAX_SKIPPED];
};

/* Save checkpoint 'step' (>= 0) from iovcnt buffers written back to back
 * (the payload is their concatenation).  Whole mode: rank 0 writes, other
 * ranks return 0 at once.  Sharded mode: every rank writes its shard, calls
 * the barrier, then rank 0 writes the marker; a non-zero rank returns after
 * the barrier, before the marker exists.  Saving a step that exists
 * replaces it.  Returns 0, EL_EUSAGE for bad options, the barrier's error,
 * or -errno from the file system (the previous checkpoints are intact). */
int el_ckpt_savev(const struct el_ckpt_opts *o, int64_t step,
                  const struct iovec *iov, int iovcnt);

/* el_ckpt_savev() with one buffer. */
int el_ckpt_save(const struct el_ckpt_opts *o, int64_t step, const void *buf,
                 size_t len);

/* Find the newest complete checkpoint in dir whose headers and checksums
 * are all intact and fill *info.  Every newer one that is corrupt,
 * truncated or incomplete is recorded in *scan (may be NULL).  Returns 0,
 * -ENOENT if there is no good checkpoint (or no directory), or -errno if the
 * directory cannot be read.  Reads every payload to check it. */
int el_ckpt_latest(const char *dir, struct el_ckpt_info *info,
                   struct el_ckpt_scan *scan);

/* Read checkpoint 'step' (its shard 'shard' if sharded; shard is ignored
 * for a whole checkpoint) and check it again.  On success *buf is a
 * malloc'd copy of the payload (the caller frees it) of *len bytes, and
 * *info (may be NULL) describes the checkpoint.  Returns 0, -ENOENT,
 * EL_EFORMAT (corrupt, truncated, or shard out of range) or -errno. */
int el_ckpt_load(const char *dir, int64_t step, int shard, void **buf,
                 size_t *len, struct el_ckpt_info *info);

/* Read checkpoint 'step' (or shard) into the caller's buffer, which must
 * hold exactly 'len' bytes: EL_EFORMAT if the payload has another size.
 * After a checksum failure (EL_EFORMAT) the buffer's contents are
 * unspecified. */
int el_ckpt_load_into(const char *dir, int64_t step, int shard, void *buf,
                      size_t len);

/* CRC-32C (Castagnoli) of len bytes, continuing from crc (start with 0).
 * Uses the SSE4.2 instruction when the CPU has it. */
uint32_t el_crc32c(uint32_t crc, const void *buf, size_t len);

/* ------------------------------------------------------------------------
 * Replicated checkpoints for data-parallel training.
 *
 * With data parallelism every rank holds the same state, so a checkpoint is
 * one payload (whole mode), and it should be in every checkpoint directory
 * the job has: then losing a node, and its local directory with it, loses
 * no progress, because the next round resumes from the newest step that any
 * directory holds.  Each rank names its own directory; ranks may name the
 * same one (a shared file system, or the ranks of one node) or each their
 * own.
 *
 * el_ckpt_dp_open() finds out which ranks see the same directory: each rank
 * creates a probe file with a random name in its directory, the names are
 * exchanged (allgather), and each rank looks for the probes of the ranks
 * below it; then the probes are removed.  The lowest rank that sees a
 * directory is its writer: a directory shared by all ranks has one writer
 * (rank 0), one directory per node has one writer per node, so no two
 * writers ever prune or replace each other's files.  (The probe relies on a
 * file created by one rank being visible to the others after a collective,
 * which holds for local file systems and NFS's close-to-open consistency.)
 *
 * Every function below except el_ckpt_dp_save_alone() is collective: every
 * rank of the communicator calls it, in the same order, and gets the same
 * return value, unless the communicator fails (a peer died: EL_EPEERLOST or
 * -ETIMEDOUT, as from el_allreduce(); then el_ckpt_dp_errmsg() says so and
 * the outcome is not agreed).  comm may be NULL for a world of one.  They
 * block on file I/O and on the other ranks.  A context is used by one thread
 * at a time.
 */

struct el_comm;
struct el_ckpt_dp;

/* Open the replicated-checkpoint context of this rank: dir is this rank's
 * checkpoint directory (created if missing), keep as in el_ckpt_opts.
 * Collective.  Returns 0 and sets *out, or, on every rank, the error of the
 * lowest rank that cannot create a file in its directory (-errno,
 * EL_EUSAGE), with a message naming that rank and directory in err (errlen
 * bytes, may be 0); or a collective's error. */
int el_ckpt_dp_open(struct el_ckpt_dp **out, struct el_comm *comm,
                    const char *dir, int keep, char *err, size_t errlen);

/* Free the context (no collective, no file I/O).  NULL is a no-op. */
void el_ckpt_dp_close(struct el_ckpt_dp *dp);

/* 1 if this rank writes its directory, 0 if a lower rank does. */
int el_ckpt_dp_is_writer(const struct el_ckpt_dp *dp);

/* How many distinct checkpoint directories (writers) the job has. */
int el_ckpt_dp_dirs(const struct el_ckpt_dp *dp);

/* This rank's directory, as given to el_ckpt_dp_open(). */
const char *el_ckpt_dp_dir(const struct el_ckpt_dp *dp);

/* Why the last failed call on dp failed: which rank, which directory, what
 * error, and how many directories hold the step; never NULL. */
const char *el_ckpt_dp_errmsg(const struct el_ckpt_dp *dp);

/* What a save did, on every rank. */
struct el_ckpt_dp_saved {
    int dirs;     /* checkpoint directories of the job (one writer each)  */
    int saved;    /* how many of them hold the step now; -1 if unknown
                      (the exchange of outcomes failed)                    */
    int local_rc; /* this rank's own el_ckpt_savev(): 0, or its error;
                      0 on a rank that is not a writer                      */
};

/* Save checkpoint 'step' (whole mode; the payload is the concatenation of
 * iov) in every directory: each writer writes its own, then all ranks
 * exchange the outcomes (allgather), so that every rank returns the same
 * verdict.  Collective.  Returns 0 only if every directory now holds the
 * step.  Otherwise, on every rank, the error of the lowest writer that
 * failed (-ENOSPC, -EIO ...), and el_ckpt_dp_errmsg() names that rank, its
 * directory and how many directories hold the step; the previous
 * checkpoints of a failed directory are intact.  If the exchange fails,
 * returns the collective's error and out->saved is -1.  out may be NULL. */
int el_ckpt_dp_savev(struct el_ckpt_dp *dp, int64_t step,
                     const struct iovec *iov, int iovcnt,
                     struct el_ckpt_dp_saved *out);

/* Not collective: save checkpoint 'step' in this rank's directory whether
 * or not it is the writer, for when the communicator is broken (a peer
 * died) and the writer of this directory may be gone.  Several ranks may do
 * it into one directory at once (see the top of this file).  Returns 0 or
 * el_ckpt_savev()'s error. */
int el_ckpt_dp_save_alone(struct el_ckpt_dp *dp, int64_t step,
                          const struct iovec *iov, int iovcnt);

/* What el_ckpt_dp_resume() found. */
struct el_ckpt_dp_found {
    struct el_ckpt_info info; /* the checkpoint every rank now has          */
    int src;     /* the rank that read it and broadcast it: the lowest
                      writer whose directory holds the newest step         */
    int holders; /* how many directories hold that step                  */
    int dirs;    /* checkpoint directories of the job                    */
};

/* Resume from the newest intact checkpoint that any directory holds: every
 * writer scans its directory (el_ckpt_latest(); scan, which may be NULL,
 * gets what this rank skipped, and stays empty on a rank that is not a
 * writer), the ranks agree on the newest step (allgather), and the lowest
 * writer holding it loads it and broadcasts it.  Collective.  Returns 0
 * with, on every rank, *buf a malloc'd copy of the payload (the caller
 * frees it) of *len bytes and *found (may be NULL) filled; -ENOENT on every
 * rank if no directory holds a good checkpoint; or, on every rank, the
 * error of the lowest writer that cannot read its directory, or of the rank
 * that failed to load or to receive the checkpoint (-ENOMEM), with a
 * message in el_ckpt_dp_errmsg(). */
int el_ckpt_dp_resume(struct el_ckpt_dp *dp, void **buf, size_t *len,
                      struct el_ckpt_dp_found *found,
                      struct el_ckpt_scan *scan);

#ifdef __cplusplus
}
#endif
#endif
