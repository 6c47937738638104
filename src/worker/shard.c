/* shard.c -- deterministic per-epoch sample order and its split into
 * per-rank slices of constant global batches; see shard.h for the scheme.
 *
 * The generator is xoshiro256** (Blackman & Vigna), its state filled by
 * splitmix64 from (seed, epoch); bounded draws use Lemire's multiply-shift
 * with rejection, so the shuffle is unbiased and identical on every machine.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "elrun/err.h"
#include "elrun/shard.h"

struct el_shard {
    struct el_shard_opts o;
    uint32_t *perm; /* the order of epoch 'epoch'                      */
    uint64_t epoch;
    uint64_t offset; /* next global sample offset within the epoch      */
    int have_perm;   /* perm holds 'epoch' already                      */
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, range), range >= 1 (Lemire 2019). */
static uint32_t bounded(uint64_t s[4], uint32_t range)
{
    uint64_t m = (xoshiro(s) >> 32) * (uint64_t)range;
    uint32_t l = (uint32_t)m;
    if (l < range) {
        uint32_t t = (uint32_t)(-range) % range;
        while (l < t) {
            m = (xoshiro(s) >> 32) * (uint64_t)range;
            l = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

void el_shard_permutation(uint64_t seed, uint64_t epoch, int no_shuffle,
                          uint32_t *perm, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    if (no_shuffle || n < 2)
        return;
    uint64_t x = seed ^ splitmix64(&(uint64_t){epoch});
    uint64_t s[4];
    for (int i = 0; i < 4; i++)
        s[i] = splitmix64(&x);
    for (uint64_t i = n - 1; i > 0; i--) {
        uint32_t j = bounded(s, (uint32_t)(i + 1));
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

void el_shard_split(uint64_t total, int rank, int world, uint64_t *begin,
                    uint64_t *count)
{
    uint64_t w = (uint64_t)world, r = (uint64_t)rank;
    uint64_t q = total / w, rem = total % w;
    *count = q + (r < rem ? 1 : 0);
    *begin = r * q + (r < rem ? r : rem);
}

int el_shard_open(struct el_shard **out, const struct el_shard_opts *o)
{
    if (!out || !o || o->num_samples == 0 || o->num_samples > UINT32_MAX ||
        o->global_batch == 0 || o->world < 1 || o->rank < 0 ||
        o->rank >= o->world)
        return EL_EUSAGE;
    struct el_shard *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->perm = malloc(o->num_samples * sizeof *s->perm);
    if (!s->perm) {
        free(s);
        return -ENOMEM;
    }
    s->o = *o;
    *out = s;
    return 0;
}

void el_shard_close(struct el_shard *s)
{
    if (!s)
        return;
    free(s->perm);
    free(s);
}

int el_shard_seek(struct el_shard *s, uint64_t epoch, uint64_t offset)
{
    if (offset > s->o.num_samples)
        return EL_EUSAGE;
    if (!s->have_perm || epoch != s->epoch)
        s->have_perm = 0;
    s->epoch = epoch;
    s->offset = offset;
    return 0;
}

int el_shard_next(struct el_shard *s, struct el_shard_batch *b)
{
    if (!s->have_perm) {
        el_shard_permutation(s->o.seed, s->epoch, s->o.no_shuffle, s->perm,
                             s->o.num_samples);
        s->have_perm = 1;
    }
    uint64_t left = s->o.num_samples - s->offset;
    uint64_t total = left < s->o.global_batch ? left : s->o.global_batch;
    if (s->o.drop_last && total < s->o.global_batch)
        total = 0;
    memset(b, 0, sizeof *b);
    b->epoch = s->epoch;
    b->offset = s->offset;
    b->global_count = total;
    b->index = s->perm + s->offset;
    if (total == 0)
        return 0;
    el_shard_split(total, s->o.rank, s->o.world, &b->local_begin,
                   &b->local_count);
    b->index = s->perm + s->offset + b->local_begin;
    s->offset += total;
    return 0;
}

void el_shard_tell(const struct el_shard *s, uint64_t *epoch, uint64_t *offset)
{
    *epoch = s->epoch;
    *offset = s->offset;
}

uint64_t el_shard_steps_per_epoch(const struct el_shard *s)
{
    uint64_t n = s->o.num_samples, b = s->o.global_batch;
    return s->o.drop_last ? n / b : (n + b - 1) / b;
}
