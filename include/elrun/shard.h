/* shard.h -- elastic data sharding: which samples each rank trains on.
 *
 * Each epoch visits the data set in one deterministic order, a permutation
 * of 0..num_samples-1 drawn from (seed, epoch) alone (xoshiro256** seeded by
 * splitmix64, then Fisher-Yates), so every rank, in every round, computes
 * the same order without talking to the others.
 *
 * The order is consumed in global batches of global_batch samples.  The
 * global batch starting at offset o is order[o .. o + global_batch), and
 * rank r of w takes a contiguous slice of it: global_batch / w samples, one
 * more for the first global_batch % w ranks.  Progress is therefore one
 * number shared by all ranks, the global sample offset within the epoch;
 * save it in the checkpoint, and after a restart with any other world size
 * el_shard_seek() to it: every sample of the epoch is still seen exactly
 * once, and the global batch (hence the optimisation) stays the same.
 * The last batch of an epoch may be short (num_samples % global_batch)
 * unless drop_last is set.
 *
 * Ranks may get different local counts (global_batch not divisible by the
 * world, or a short last batch), so a data-parallel step should sum the
 * gradients of its local samples, allreduce with EL_SUM, and divide by the
 * batch's global count rather than average per rank.
 *
 * Pure computation; no I/O, no locking (one el_shard per thread).
 */
#ifndef ELRUN_SHARD_H
#define ELRUN_SHARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct el_shard_opts {
    uint64_t num_samples;  /* size of the data set, 1 .. 2^32-1           */
    uint64_t global_batch; /* samples per step over all ranks (>= 1)      */
    uint64_t seed;         /* the same on every rank and every round      */
    int rank, world;       /* this rank of world (0 <= rank < world)      */
    int drop_last;         /* 1: skip a short last batch of each epoch    */
    int no_shuffle;        /* 1: the order is 0, 1, 2, ... every epoch    */
};

/* This rank's part of one global batch. */
struct el_shard_batch {
    uint64_t epoch;        /* the epoch this batch belongs to             */
    uint64_t offset;       /* global offset of the batch's first sample   */
    uint64_t global_count; /* samples in the global batch (all ranks); 0
                              when the epoch is over                       */
    uint64_t local_begin;  /* where this rank's slice starts in the batch */
    uint64_t local_count;  /* samples for this rank (may be 0)            */
    const uint32_t *index; /* local_count sample indices, borrowed until
                              the next call on the el_shard               */
};

struct el_shard;

/* Create a sampler positioned at epoch 0, offset 0.  Returns 0 and sets
 * *out, EL_EUSAGE for bad options, or -ENOMEM (it keeps one uint32_t per
 * sample). */
int el_shard_open(struct el_shard **out, const struct el_shard_opts *o);

/* Free the sampler.  NULL is a no-op. */
void el_shard_close(struct el_shard *s);

/* Position at global offset 'offset' of 'epoch' (recomputing the order if
 * the epoch changed).  The offset need not be a multiple of global_batch.
 * Returns 0, or EL_EUSAGE if offset > num_samples. */
int el_shard_seek(struct el_shard *s, uint64_t epoch, uint64_t offset);

/* Fill *b with this rank's part of the next global batch and advance the
 * offset past the whole global batch.  At the end of the epoch
 * b->global_count is 0 and the position stays; seek to the next epoch.
 * Returns 0. */
int el_shard_next(struct el_shard *s, struct el_shard_batch *b);

/* The current position: what to checkpoint. */
void el_shard_tell(const struct el_shard *s, uint64_t *epoch, uint64_t *offset);

/* Global batches per epoch (counting a short last one unless drop_last). */
uint64_t el_shard_steps_per_epoch(const struct el_shard *s);

/* The whole order of 'epoch' for a data set of n samples: perm[0..n) gets
 * a permutation of 0..n-1 (identity if no_shuffle).  What el_shard uses. */
void el_shard_permutation(uint64_t seed, uint64_t epoch, int no_shuffle,
                          uint32_t *perm, uint64_t n);

/* Rank 'rank' of 'world' takes samples [*begin, *begin + *count) of a
 * global batch of 'total' samples (contiguous, sizes differ by at most 1,
 * larger slices first). */
void el_shard_split(uint64_t total, int rank, int world, uint64_t *begin,
                    uint64_t *count);

#ifdef __cplusplus
}
#endif
#endif
