/* test_shard.c -- elastic data sharding: the per-epoch order is a
 * deterministic permutation, the shards of all ranks make up exactly the
 * epoch, and so they do when the world size changes mid-epoch; the global
 * batches stay the same whatever the world size.
 */
#include <stdint.h>

#include "elrun/err.h"
#include "elrun/shard.h"
#include "test.h"

static struct el_shard *open_shard(uint64_t n, uint64_t batch, int rank,
                                   int world)
{
    struct el_shard_opts o = {.num_samples = n,
                              .global_batch = batch,
                              .seed = 1234,
                              .rank = rank,
                              .world = world};
    struct el_shard *s;
    CHECK_OK(el_shard_open(&s, &o));
    return s;
}

TEST(shard_permutation_deterministic)
{
    enum { N = 1000 };
    static uint32_t a[N], b[N], c[N];
    el_shard_permutation(7, 3, 0, a, N);
    el_shard_permutation(7, 3, 0, b, N);
    CHECK_MEM(a, sizeof a, b, sizeof b);
    /* A permutation: every index once. */
    static unsigned char seen[N];
    for (int i = 0; i < N; i++) {
        CHECK(a[i] < N);
        CHECK(!seen[a[i]]);
        seen[a[i]] = 1;
    }
    /* Another epoch or seed gives another order. */
    el_shard_permutation(7, 4, 0, c, N);
    CHECK(memcmp(a, c, sizeof a) != 0);
    el_shard_permutation(8, 3, 0, c, N);
    CHECK(memcmp(a, c, sizeof a) != 0);
    el_shard_permutation(7, 3, 1, c, N);
    for (int i = 0; i < N; i++)
        CHECK_EQ(c[i], i);
    /* Pinned values: the order must not change between versions or
     * machines, or a resumed run would repeat and skip samples. */
    uint32_t p[10];
    el_shard_permutation(42, 0, 0, p, 10);
    static const uint32_t want[10] = {5, 6, 9, 3, 0, 8, 7, 4, 2, 1};
    CHECK_MEM(p, sizeof p, want, sizeof want);
}

/* Every one of the 24 orders of 4 items comes up about equally often. */
TEST(shard_permutation_uniform)
{
    int count[256] = {0};
    enum { EPOCHS = 24000 };
    for (int e = 0; e < EPOCHS; e++) {
        uint32_t p[4];
        el_shard_permutation(99, (uint64_t)e, 0, p, 4);
        count[p[0] * 64 + p[1] * 16 + p[2] * 4 + p[3]]++;
    }
    int kinds = 0;
    for (int i = 0; i < 256; i++) {
        if (!count[i])
            continue;
        kinds++;
        CHECK(count[i] > 800 && count[i] < 1200);
    }
    CHECK_EQ(kinds, 24);
}

TEST(shard_split)
{
    for (int world = 1; world <= 9; world++)
        for (uint64_t total = 0; total < 40; total++) {
            uint64_t next = 0;
            for (int r = 0; r < world; r++) {
                uint64_t b, c;
                el_shard_split(total, r, world, &b, &c);
                CHECK_EQ(b, next);
                CHECK(c == total / (uint64_t)world ||
                      c == total / (uint64_t)world + 1);
                next = b + c;
            }
            CHECK_EQ(next, total);
        }
}

/* Run ranks 0..world-1 from (epoch, offset) for at most 'steps' global
 * batches (-1: to the end of the epoch), counting each sample seen in
 * seen[] and recording each global batch's samples, in order, in
 * batches[offset..).  Returns the offset reached (the same on all ranks). */
static uint64_t run_world(uint64_t n, uint64_t batch, int world, uint64_t epoch,
                          uint64_t offset, long steps, int *seen,
                          uint32_t *batches)
{
    uint64_t end = 0;
    for (int r = 0; r < world; r++) {
        struct el_shard *s = open_shard(n, batch, r, world);
        CHECK_OK(el_shard_seek(s, epoch, offset));
        for (long k = 0; steps < 0 || k < steps; k++) {
            struct el_shard_batch b;
            CHECK_OK(el_shard_next(s, &b));
            if (b.global_count == 0)
                break;
            CHECK_EQ(b.epoch, epoch);
            CHECK(b.global_count == batch || b.offset + b.global_count == n);
            for (uint64_t i = 0; i < b.local_count; i++) {
                CHECK(b.index[i] < n);
                seen[b.index[i]]++;
                batches[b.offset + b.local_begin + i] = b.index[i];
            }
        }
        uint64_t e, off;
        el_shard_tell(s, &e, &off);
        CHECK_EQ(e, epoch);
        if (r == 0)
            end = off;
        CHECK_EQ(off, end);
        el_shard_close(s);
    }
    return end;
}

TEST(shard_union_is_epoch)
{
    static const uint64_t ns[] = {1, 2, 10, 97, 1000, 1001};
    static const uint64_t bs[] = {1, 3, 7, 64, 100, 2000};
    static int seen[1001];
    static uint32_t order[1001], ref[1001];
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof bs / sizeof bs[0]; j++)
            for (int world = 1; world <= 7; world++) {
                uint64_t n = ns[i];
                memset(seen, 0, sizeof seen);
                uint64_t end =
                    run_world(n, bs[j], world, 2, 0, -1, seen, order);
                CHECK_EQ(end, n);
                for (uint64_t k = 0; k < n; k++)
                    CHECK_EQ(seen[k], 1);
                /* Rank slices laid side by side give the epoch's order. */
                el_shard_permutation(1234, 2, 0, ref, n);
                CHECK_MEM(order, n * 4, ref, n * 4);
            }
}

/* A round of 3 ranks stops mid-epoch; the next round has 5 (then 2) and
 * resumes at the saved offset: still every sample exactly once, and the
 * global batches hold the same samples as in a run that never changed. */
TEST(shard_world_change_mid_epoch)
{
    enum { N = 1003, B = 64 };
    static int seen[N];
    static uint32_t order[N], ref[N];
    el_shard_permutation(1234, 5, 0, ref, N);
    static const int worlds[][3] = {{3, 5, 2}, {1, 7, 1}, {4, 4, 6}, {7, 1, 3}};
    for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++) {
        memset(seen, 0, sizeof seen);
        memset(order, 0xff, sizeof order);
        uint64_t off = run_world(N, B, worlds[w][0], 5, 0, 4, seen, order);
        CHECK_EQ(off, 4 * B);
        off = run_world(N, B, worlds[w][1], 5, off, 3, seen, order);
        CHECK_EQ(off, 7 * B);
        off = run_world(N, B, worlds[w][2], 5, off, -1, seen, order);
        CHECK_EQ(off, N);
        for (int k = 0; k < N; k++)
            CHECK_EQ(seen[k], 1);
        CHECK_MEM(order, sizeof order, ref, sizeof ref);
    }
    /* An offset that is not a multiple of the batch (e.g. saved by a run
     * with another batch size) works too. */
    memset(seen, 0, sizeof seen);
    uint64_t off = run_world(N, 10, 2, 5, 0, 3, seen, order);
    CHECK_EQ(off, 30);
    CHECK_EQ(run_world(N, B, 3, 5, off, -1, seen, order), N);
    for (int k = 0; k < N; k++)
        CHECK_EQ(seen[k], 1);
}

TEST(shard_epochs_and_drop_last)
{
    struct el_shard_opts o = {
        .num_samples = 10, .global_batch = 4, .seed = 1, .rank = 1, .world = 2};
    struct el_shard *s;
    CHECK_OK(el_shard_open(&s, &o));
    CHECK_EQ(el_shard_steps_per_epoch(s), 3);
    struct el_shard_batch b;
    int steps = 0;
    for (;;) {
        CHECK_OK(el_shard_next(s, &b));
        if (!b.global_count)
            break;
        steps++;
    }
    CHECK_EQ(steps, 3);
    CHECK_OK(el_shard_next(s, &b)); /* stays at the end */
    CHECK_EQ(b.global_count, 0);
    CHECK_OK(el_shard_seek(s, 1, 0));
    CHECK_OK(el_shard_next(s, &b));
    CHECK_EQ(b.epoch, 1);
    CHECK_EQ(b.local_begin, 2);
    CHECK_EQ(b.local_count, 2);
    CHECK_EQ(el_shard_seek(s, 1, 11), EL_EUSAGE);
    el_shard_close(s);

    o.drop_last = 1;
    CHECK_OK(el_shard_open(&s, &o));
    CHECK_EQ(el_shard_steps_per_epoch(s), 2);
    CHECK_OK(el_shard_seek(s, 0, 8));
    CHECK_OK(el_shard_next(s, &b));
    CHECK_EQ(b.global_count, 0);
    el_shard_close(s);

    /* More ranks than samples in a batch: some ranks get none. */
    o = (struct el_shard_opts){
        .num_samples = 5, .global_batch = 2, .rank = 3, .world = 4};
    CHECK_OK(el_shard_open(&s, &o));
    CHECK_OK(el_shard_next(s, &b));
    CHECK_EQ(b.global_count, 2);
    CHECK_EQ(b.local_count, 0);
    el_shard_close(s);

    CHECK_EQ(el_shard_open(&s, &(struct el_shard_opts){.num_samples = 0,
                                                       .global_batch = 1,
                                                       .world = 1}),
             EL_EUSAGE);
    o.rank = 4;
    CHECK_EQ(el_shard_open(&s, &o), EL_EUSAGE);
    el_shard_close(NULL);
}
