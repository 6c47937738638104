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

#define EL_CKPT_VERSION 1          /* the on-disk format this code writes  */
#define EL_CKPT_HEADER_SIZE 64     /* bytes before the payload             */
#define EL_CKPT_MAX_SKIPPED 8      /* skipped checkpoints listed in a scan */

struct el_ckpt_opts {
    const char *dir;   /* the checkpoint directory; created if missing       */
    int rank;          /* this process's rank, 0 <= rank < world             */
    int world;         /* number of ranks (>= 1); recorded in the header     */
    int sharded;       /* 0: rank 0 writes everything; 1: one shard per rank */
    int keep;          /* complete checkpoints to keep [0 = 3]; < 0 keeps all */
    /* Sharded mode only: returns once every rank has called it (0), or a
     * negative code, which el_ckpt_save() returns.  Called exactly once per
     * save on every rank, after its shard is durable. */
    int (*barrier)(void *arg);
    void *barrier_arg;
};

/* One checkpoint found on disk. */
struct el_ckpt_info {
    int64_t step;      /* the step given to el_ckpt_save()                   */
    int world;         /* world size when it was saved                       */
    int sharded;       /* 1 if it has one file per rank and a marker         */
    uint64_t bytes;    /* payload bytes: whole file, or sum of all shards    */
};

/* What el_ckpt_latest() passed over on its way to the newest good one. */
struct el_ckpt_scan {
    int nskipped;      /* checkpoints skipped (may exceed the array below)   */
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

#ifdef __cplusplus
}
#endif
#endif
