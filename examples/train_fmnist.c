/* train_fmnist.c -- elastic data-parallel training of an MLP on
 * Fashion-MNIST, in C, on libelrun: the program `make demo` runs.
 *
 *   elrun --standalone --nproc-per-node=2 build/examples/train_fmnist
 *   ELRUN_STANDALONE=1 build/examples/train_fmnist --epochs 2
 *
 * Model: 784-256-10 by default (--hidden 512,256 for more layers), ReLU,
 * softmax cross-entropy, SGD with momentum and a cosine learning rate;
 * OpenBLAS sgemm for every matrix product.  Data: the gzip'd IDX files of
 * Debian's dataset-fashion-mnist, read with zlib.
 *
 * Data parallel: every rank holds the whole model, trains on its slice of
 * each global batch (elrun/shard.h), sums its gradients, and one allreduce
 * (elrun/coll.h) adds them up; every rank then divides by the global batch's
 * size and takes the same step, so the weights stay bitwise identical.
 * The global batch (--batch) stays the same whatever the world size, so a
 * round with another number of workers continues the same optimisation.
 *
 * Fault tolerance: the weights, momentum and position (epoch, global sample
 * offset, step) are checkpointed every --ckpt-every steps and at the end of
 * each epoch into every checkpoint directory of the job (elrun/ckpt.h's
 * el_ckpt_dp: one writer per distinct --ckpt-dir, so one per node with
 * node-local directories, one in all for a shared one), and every rank
 * learns whether the save succeeded everywhere.  At start the ranks agree on
 * the newest good checkpoint any directory holds and its holder broadcasts
 * it, so losing a node and its disk loses no progress.  A peer's death makes
 * the allreduce fail at once: the worker saves the last finished step in its
 * own directory, exits non-zero and the agent starts a new round, which
 * resumes.
 * Under elrun it also beats every step (el_worker_heartbeat, for
 * --worker-stall-timeout) and, on a preemption notice (SIGUSR1 from the
 * agent's --preempt-notice-*), checkpoints the step at once on every rank
 * (the flag travels in the allreduce) and trains on.
 *
 * --fail-at-step S kills one rank (SIGKILL; --fail-mode abort or exit) at
 * step S of the first attempt, for demonstrating exactly that.
 *
 * Output: rank 0 prints one line per epoch and a final line on stdout
 * ("final: test accuracy 88.61% ..."), a progress line on stderr, and
 * events (resume, checkpoints, errors) through el_log.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>
#include <zlib.h>

#include "elrun/ckpt.h"
#include "elrun/coll.h"
#include "elrun/err.h"
#include "elrun/log.h"
#include "elrun/shard.h"
#include "elrun/worker.h"

#define IMG 784
#define CLASSES 10
#define MAX_LAYERS 8
#define EVAL_CHUNK 500

/* ------------------------------------------------------------------------
 * Options.
 */

struct opts {
    int epochs;
    long subset;          /* train on the first N samples; 0 = all     */
    const char *ckpt_dir; /* NULL: no checkpoints                      */
    const char *data_dir;
    long batch; /* global batch                              */
    float lr, momentum, wd;
    uint64_t seed;
    long fail_at;   /* -1: never                                 */
    int fail_rank;  /* -1: the last rank                         */
    char fail_mode; /* 'k' SIGKILL, 'a' abort(), 'e' exit(1)     */
    int ckpt_every;
    int keep;
    int nhidden, hidden[MAX_LAYERS - 1];
    int threads; /* OpenBLAS threads per rank; 0 = auto       */
};

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: train_fmnist [options]\n"
        "  --epochs N        passes over the training set [10]\n"
        "  --subset N        train on the first N samples only [all]\n"
        "  --batch N         global batch, over all ranks [128]\n"
        "  --lr X            peak learning rate (cosine decay) [0.05]\n"
        "  --momentum X      SGD momentum [0.9]\n"
        "  --wd X            weight decay [0.0001]\n"
        "  --hidden A[,B..]  hidden layer sizes [256]\n"
        "  --seed N          initialisation and shuffling seed [1]\n"
        "  --data-dir DIR    [/usr/share/datasets/fashion-mnist]\n"
        "  --ckpt-dir DIR    checkpoint here and resume from here [none]\n"
        "  --ckpt-every N    steps between checkpoints [200]\n"
        "  --keep N          checkpoints to keep [3]\n"
        "  --fail-at-step S  first attempt only: kill a rank at step S\n"
        "  --fail-rank R     the rank --fail-at-step kills [last]\n"
        "  --fail-mode M     kill (SIGKILL), abort (SIGABRT) or exit (exit 1\n"
        "                    with an error file) [kill]\n"
        "  --threads N       OpenBLAS threads per rank [cores / local ranks]\n"
        "Run under elrun, or alone with ELRUN_STANDALONE=1.\n");
}

static int parse_hidden(struct opts *o, const char *s)
{
    o->nhidden = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 65536 || o->nhidden >= MAX_LAYERS - 1)
            return -1;
        o->hidden[o->nhidden++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return o->nhidden ? 0 : -1;
}

static void parse_opts(struct opts *o, int argc, char **argv)
{
    *o = (struct opts){.epochs = 10,
                       .data_dir = "/usr/share/datasets/fashion-mnist",
                       .batch = 128,
                       .lr = 0.05f,
                       .momentum = 0.9f,
                       .wd = 1e-4f,
                       .seed = 1,
                       .fail_at = -1,
                       .fail_rank = -1,
                       .fail_mode = 'k',
                       .ckpt_every = 200,
                       .keep = 3,
                       .nhidden = 1,
                       .hidden = {256}};
    static const struct option lo[] = {
        {"epochs", 1, 0, 'e'},    {"subset", 1, 0, 's'},
        {"ckpt-dir", 1, 0, 'c'},  {"data-dir", 1, 0, 'd'},
        {"batch", 1, 0, 'b'},     {"lr", 1, 0, 'l'},
        {"momentum", 1, 0, 'm'},  {"wd", 1, 0, 'w'},
        {"seed", 1, 0, 'S'},      {"fail-at-step", 1, 0, 'F'},
        {"fail-rank", 1, 0, 'R'}, {"ckpt-every", 1, 0, 'E'},
        {"keep", 1, 0, 'k'},      {"hidden", 1, 0, 'H'},
        {"threads", 1, 0, 't'},   {"fail-mode", 1, 0, 'M'},
        {"help", 0, 0, 'h'},      {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'e':
            o->epochs = atoi(optarg);
            break;
        case 's':
            o->subset = atol(optarg);
            break;
        case 'c':
            o->ckpt_dir = optarg;
            break;
        case 'd':
            o->data_dir = optarg;
            break;
        case 'b':
            o->batch = atol(optarg);
            break;
        case 'l':
            o->lr = strtof(optarg, NULL);
            break;
        case 'm':
            o->momentum = strtof(optarg, NULL);
            break;
        case 'w':
            o->wd = strtof(optarg, NULL);
            break;
        case 'S':
            o->seed = strtoull(optarg, NULL, 10);
            break;
        case 'F':
            o->fail_at = atol(optarg);
            break;
        case 'R':
            o->fail_rank = atoi(optarg);
            break;
        case 'E':
            o->ckpt_every = atoi(optarg);
            break;
        case 'k':
            o->keep = atoi(optarg);
            break;
        case 't':
            o->threads = atoi(optarg);
            break;
        case 'M':
            if (strcmp(optarg, "kill") != 0 && strcmp(optarg, "abort") != 0 &&
                strcmp(optarg, "exit") != 0) {
                fprintf(stderr, "train_fmnist: --fail-mode is kill, abort "
                                "or exit\n");
                exit(2);
            }
            o->fail_mode = optarg[0];
            break;
        case 'H':
            if (parse_hidden(o, optarg) != 0) {
                fprintf(stderr, "train_fmnist: bad --hidden %s\n", optarg);
                exit(2);
            }
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (optind < argc || o->epochs < 1 || o->batch < 1 || o->subset < 0 ||
        o->ckpt_every < 1 || !(o->lr > 0)) {
        usage(stderr);
        exit(2);
    }
}

/* ------------------------------------------------------------------------
 * Fatal-error helpers (a program, not a library: errors end the run).
 */

/* Log the error, leave it in the error file for the agent's failure
 * report, and exit 1. */
static void die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    el_log(EL_LOG_ERROR, "%s", msg);
    el_worker_record_error("%s", msg);
    exit(1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die("out of memory (%zu bytes)", n);
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------
 * Data: IDX files (big-endian header, then bytes), gzip'd.
 */

struct dataset {
    long n;
    unsigned char *x; /* n x 784 pixels, as in the file (a quarter of
                          the memory of floats; normalised in gather) */
    unsigned char *y; /* n labels 0..9       */
};

static unsigned char *read_idx(const char *dir, const char *name,
                               uint32_t magic, int ndims, uint32_t *dims)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    gzFile f = gzopen(path, "rb");
    if (!f)
        die("cannot open %s: %s (install dataset-fashion-mnist, or pass "
            "--data-dir)",
            path, strerror(errno));
    unsigned char h[16];
    int hl = 4 + 4 * ndims;
    if (gzread(f, h, (unsigned)hl) != hl)
        die("%s: short header", path);
    uint32_t m = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
                 (uint32_t)h[2] << 8 | h[3];
    if (m != magic)
        die("%s: bad magic 0x%08x", path, m);
    size_t total = 1;
    for (int i = 0; i < ndims; i++) {
        const unsigned char *p = h + 4 + 4 * i;
        dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                  (uint32_t)p[2] << 8 | p[3];
        total *= dims[i];
    }
    unsigned char *buf = xmalloc(total);
    size_t got = 0;
    while (got < total) {
        unsigned chunk =
            total - got > (1u << 30) ? (1u << 30) : (unsigned)(total - got);
        int r = gzread(f, buf + got, chunk);
        if (r <= 0)
            die("%s: truncated", path);
        got += (size_t)r;
    }
    gzclose(f);
    return buf;
}

static void load_split(struct dataset *d, const char *dir, const char *split,
                       long limit)
{
    char in[64], ln[64];
    snprintf(in, sizeof in, "%s-images-idx3-ubyte.gz", split);
    snprintf(ln, sizeof ln, "%s-labels-idx1-ubyte.gz", split);
    uint32_t di[3], dl[1];
    unsigned char *img = read_idx(dir, in, 0x803, 3, di);
    unsigned char *lab = read_idx(dir, ln, 0x801, 1, dl);
    if (di[0] != dl[0] || di[1] * di[2] != IMG)
        die("%s: %u images of %ux%u but %u labels", split, di[0], di[1], di[2],
            dl[0]);
    d->n = (long)di[0];
    if (limit > 0 && limit < d->n)
        d->n = limit;
    d->x = img; /* the first n images */
    d->y = xmalloc((size_t)d->n);
    for (long i = 0; i < d->n; i++) {
        if (lab[i] >= CLASSES)
            die("%s: label %u out of range", split, lab[i]);
        d->y[i] = lab[i];
    }
    free(lab);
}

/* ------------------------------------------------------------------------
 * The model: layers of W (in x out, row-major) then b (out), back to back
 * in one array, so gradients and momentum share the layout and one
 * allreduce moves every gradient.
 */

struct mlp {
    int nl;                   /* weight layers                          */
    int size[MAX_LAYERS + 1]; /* size[0] = 784 ... size[nl] = 10        */
    size_t woff[MAX_LAYERS], boff[MAX_LAYERS];
    size_t nparams;
    float *w, *v, *g;           /* weights, momentum, gradients (+3: loss,
                                    right answers, ranks stopping)          */
    int maxrows;                /* rows the activation buffers hold       */
    float *act[MAX_LAYERS + 1]; /* act[0] = input rows, act[nl] = logits  */
    float *delta, *delta2;      /* backprop buffers, maxrows x max width  */
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double gauss(uint64_t *st)
{
    double u1 = ((double)(splitmix64(st) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = (double)(splitmix64(st) >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static void mlp_init(struct mlp *m, const struct opts *o)
{
    memset(m, 0, sizeof *m);
    m->nl = o->nhidden + 1;
    m->size[0] = IMG;
    for (int i = 0; i < o->nhidden; i++)
        m->size[i + 1] = o->hidden[i];
    m->size[m->nl] = CLASSES;
    size_t off = 0;
    for (int l = 0; l < m->nl; l++) {
        m->woff[l] = off;
        off += (size_t)m->size[l] * (size_t)m->size[l + 1];
        m->boff[l] = off;
        off += (size_t)m->size[l + 1];
    }
    m->nparams = off;
    m->w = xmalloc(off * sizeof(float));
    m->v = calloc(off, sizeof(float));
    m->g = xmalloc((off + 4) * sizeof(float));
    if (!m->v)
        die("out of memory");
    /* He initialisation from the seed: the same on every rank. */
    uint64_t st = o->seed * 0x2545F4914F6CDD1Dull + 17;
    for (int l = 0; l < m->nl; l++) {
        double sd = sqrt(2.0 / m->size[l]);
        size_t n = (size_t)m->size[l] * (size_t)m->size[l + 1];
        for (size_t i = 0; i < n; i++)
            m->w[m->woff[l] + i] = (float)(gauss(&st) * sd);
        memset(m->w + m->boff[l], 0, (size_t)m->size[l + 1] * sizeof(float));
    }
}

/* Activation and backprop buffers for up to 'maxrows' samples at once. */
static void mlp_alloc(struct mlp *m, int maxrows)
{
    int widest = 0;
    for (int l = 0; l <= m->nl; l++)
        if (m->size[l] > widest)
            widest = m->size[l];
    m->maxrows = maxrows < 1 ? 1 : maxrows;
    for (int l = 0; l <= m->nl; l++)
        m->act[l] =
            xmalloc((size_t)m->maxrows * (size_t)m->size[l] * sizeof(float));
    m->delta = xmalloc((size_t)m->maxrows * (size_t)widest * sizeof(float));
    m->delta2 = xmalloc((size_t)m->maxrows * (size_t)widest * sizeof(float));
}

static void mlp_free(struct mlp *m)
{
    free(m->w);
    free(m->v);
    free(m->g);
    for (int l = 0; l <= m->nl; l++)
        free(m->act[l]);
    free(m->delta);
    free(m->delta2);
}

/* act[0] holds 'rows' inputs; fill the other layers (act[nl] = logits). */
static void mlp_forward(struct mlp *m, int rows)
{
    for (int l = 0; l < m->nl; l++) {
        int in = m->size[l], out = m->size[l + 1];
        float *y = m->act[l + 1];
        const float *b = m->w + m->boff[l];
        for (int r = 0; r < rows; r++)
            memcpy(y + (size_t)r * out, b, (size_t)out * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, out, in,
                    1.0f, m->act[l], in, m->w + m->woff[l], out, 1.0f, y, out);
        if (l + 1 < m->nl)
            for (size_t i = 0; i < (size_t)rows * out; i++)
                y[i] = y[i] > 0 ? y[i] : 0;
    }
}

/* Softmax cross-entropy of the logits against labels: returns the summed
 * loss, adds the number of right answers to *correct, and (if grad) leaves
 * d(loss)/d(logits) in m->delta. */
static double mlp_loss(struct mlp *m, int rows, const unsigned char *y,
                       int grad, long *correct)
{
    double loss = 0;
    const float *z = m->act[m->nl];
    for (int r = 0; r < rows; r++) {
        const float *zr = z + (size_t)r * CLASSES;
        int best = 0;
        float mx = zr[0];
        for (int k = 1; k < CLASSES; k++)
            if (zr[k] > mx) {
                mx = zr[k];
                best = k;
            }
        *correct += best == y[r];
        double sum = 0;
        float e[CLASSES];
        for (int k = 0; k < CLASSES; k++) {
            e[k] = expf(zr[k] - mx);
            sum += e[k];
        }
        loss += log(sum) - (double)(zr[y[r]] - mx);
        if (grad) {
            float *d = m->delta + (size_t)r * CLASSES;
            float inv = (float)(1.0 / sum);
            for (int k = 0; k < CLASSES; k++)
                d[k] = e[k] * inv - (k == y[r] ? 1.0f : 0.0f);
        }
    }
    return loss;
}

/* m->g = gradient of the summed loss over the 'rows' samples in act[0]
 * (m->delta holds d/d logits). */
static void mlp_backward(struct mlp *m, int rows)
{
    float *delta = m->delta, *next = m->delta2;
    for (int l = m->nl - 1; l >= 0; l--) {
        int in = m->size[l], out = m->size[l + 1];
        float *gw = m->g + m->woff[l], *gb = m->g + m->boff[l];
        if (rows > 0)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, out, rows,
                        1.0f, m->act[l], in, delta, out, 0.0f, gw, out);
        else
            memset(gw, 0, (size_t)in * out * sizeof(float));
        memset(gb, 0, (size_t)out * sizeof(float));
        for (int r = 0; r < rows; r++)
            for (int k = 0; k < out; k++)
                gb[k] += delta[(size_t)r * out + k];
        if (l == 0)
            break;
        if (rows > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, in, out,
                        1.0f, delta, out, m->w + m->woff[l], out, 0.0f, next,
                        in);
        const float *a = m->act[l]; /* ReLU output of the layer below */
        for (size_t i = 0; i < (size_t)rows * in; i++)
            if (a[i] <= 0)
                next[i] = 0;
        float *t = delta;
        delta = next;
        next = t;
    }
}

/* Copy the samples idx[0..rows) into act[0], normalised with
 * Fashion-MNIST's pixel mean and standard deviation. */
static void gather(struct mlp *m, const struct dataset *d, const uint32_t *idx,
                   int rows, unsigned char *labels)
{
    static float norm[256];
    if (norm[255] == 0)
        for (int v = 0; v < 256; v++)
            norm[v] = ((float)v / 255.0f - 0.2860f) * (1.0f / 0.3530f);
    for (int r = 0; r < rows; r++) {
        const unsigned char *src = d->x + (size_t)idx[r] * IMG;
        float *dst = m->act[0] + (size_t)r * IMG;
        for (int k = 0; k < IMG; k++)
            dst[k] = norm[src[k]];
        labels[r] = d->y[idx[r]];
    }
}

/* ------------------------------------------------------------------------
 * Distributed pieces: the allreduce, evaluation, checkpoints.
 */

struct run {
    struct opts o;
    struct el_worker *w;
    const struct el_worker_info *info;
    struct el_comm *comm;  /* NULL with a world of 1 */
    struct el_ckpt_dp *dp; /* NULL without --ckpt-dir */
    int rank, world;
};

/* Sum 'count' floats over all ranks, in place: the one collective a step
 * needs.  With a world of 1 there is nothing to do.  Returns 0 or the
 * collective's error (a peer died or hung). */
static int allreduce_sum_f32(struct run *r, float *buf, size_t count)
{
    if (!r->comm)
        return 0;
    return el_allreduce(r->comm, buf, count, EL_FLOAT32, EL_SUM);
}

static int allreduce_sum_f64(struct run *r, double *buf, size_t count)
{
    if (!r->comm)
        return 0;
    return el_allreduce(r->comm, buf, count, EL_FLOAT64, EL_SUM);
}

/* Test accuracy (%) into *acc and mean loss; every rank scores its slice of
 * the test set, then the counts are summed.  Returns 0 or the collective's
 * error. */
static int evaluate(struct run *r, struct mlp *m, const struct dataset *t,
                    double *acc, double *mean_loss)
{
    uint64_t begin, count;
    el_shard_split((uint64_t)t->n, r->rank, r->world, &begin, &count);
    double loss = 0;
    long correct = 0;
    uint32_t idx[EVAL_CHUNK];
    unsigned char lab[EVAL_CHUNK];
    for (uint64_t i = 0; i < count; i += EVAL_CHUNK) {
        int rows = (int)(count - i < EVAL_CHUNK ? count - i : EVAL_CHUNK);
        for (int k = 0; k < rows; k++)
            idx[k] = (uint32_t)(begin + i + (uint64_t)k);
        gather(m, t, idx, rows, lab);
        mlp_forward(m, rows);
        loss += mlp_loss(m, rows, lab, 0, &correct);
    }
    double s[2] = {loss, (double)correct};
    int rc = allreduce_sum_f64(r, s, 2);
    *mean_loss = s[0] / (double)t->n;
    *acc = 100.0 * s[1] / (double)t->n;
    return rc;
}

/* What a checkpoint holds besides weights and momentum. */
#define MAX_CHANGES 8

struct state {
    char magic[8];         /* "FMNIST02"                                */
    int64_t step;          /* optimiser steps taken                     */
    int64_t epoch, offset; /* where the next batch starts               */
    int64_t global_batch, nparams, train_n;
    int64_t layers[MAX_LAYERS + 1];
    double epoch_loss; /* summed training loss so far this epoch    */
    double epoch_samples;
    double epoch_seconds; /* training time so far this epoch           */
    /* The world sizes of this epoch, for its line ("world 3 -> 2 at step
     * 120"): at its first step, then each change (a later round resumed
     * mid-epoch with another world), the first MAX_CHANGES of them. */
    int64_t world;        /* of the steps taken so far                 */
    int64_t epoch_world0; /* at this epoch's first step                */
    int64_t nchanges;
    int64_t change_step[MAX_CHANGES], change_world[MAX_CHANGES];
};

/* " 3 -> 2 at step 120 -> 3 at step 150": the epoch's world sizes, for
 * its line after "world" (just " 2" when it never changed). */
static void world_history(const struct state *s, int world, char *buf,
                          size_t cap)
{
    if (s->nchanges == 0) {
        snprintf(buf, cap, " %d", world);
        return;
    }
    size_t len =
        (size_t)snprintf(buf, cap, " %lld", (long long)s->epoch_world0);
    for (int64_t i = 0; i < s->nchanges && i < MAX_CHANGES && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, " -> %lld at step %lld",
                                (long long)s->change_world[i],
                                (long long)s->change_step[i]);
    if (s->nchanges > MAX_CHANGES && len < cap)
        snprintf(buf + len, cap - len, " (and %lld more changes) -> %d",
                 (long long)(s->nchanges - MAX_CHANGES), world);
}

/* A checkpoint's payload: state, weights, momentum. */
static void ckpt_iov(struct iovec iov[3], struct mlp *m, const struct state *s)
{
    iov[0] = (struct iovec){(void *)s, sizeof *s};
    iov[1] = (struct iovec){m->w, m->nparams * sizeof(float)};
    iov[2] = (struct iovec){m->v, m->nparams * sizeof(float)};
}

/* Checkpoint the state of the last finished step in every checkpoint
 * directory of the job: each directory's writer writes it, then the ranks
 * agree on the outcome (collective).  Returns 0 if every directory has it,
 * else the agreed error (el_ckpt_dp_errmsg() says who failed where), or a
 * collective's error with sv->saved = -1 when the round broke meanwhile. */
static int save_ckpt(struct run *r, struct mlp *m, const struct state *s,
                     struct el_ckpt_dp_saved *sv)
{
    struct iovec iov[3];
    ckpt_iov(iov, m, s);
    double t0 = now_s();
    int rc = el_ckpt_dp_savev(r->dp, s->step, iov, 3, sv);
    if (rc == 0 && r->rank == 0)
        el_log(EL_LOG_DEBUG,
               "checkpoint step %lld saved in %d checkpoint "
               "director%s in %.0f ms",
               (long long)s->step, sv->saved, sv->saved == 1 ? "y" : "ies",
               (now_s() - t0) * 1e3);
    return rc;
}

/* The same, alone, when the round is broken: this rank writes its own
 * directory, whoever its writer was (it may be the rank that died). */
static int save_ckpt_alone(struct run *r, struct mlp *m, const struct state *s)
{
    struct iovec iov[3];
    ckpt_iov(iov, m, s);
    return el_ckpt_dp_save_alone(r->dp, s->step, iov, 3);
}

/* Resume from the newest good checkpoint any checkpoint directory holds:
 * the ranks agree on the newest step and the lowest writer whose directory
 * has it reads it and broadcasts state, weights and momentum, so that ranks
 * on machines without a shared file system, or whose node lost its disk,
 * resume together.  Returns 1 if resumed. */
static int load_ckpt(struct run *r, struct mlp *m, struct state *s)
{
    if (!r->dp)
        return 0;
    void *p;
    size_t len;
    struct el_ckpt_dp_found f;
    struct el_ckpt_scan scan;
    int rc = el_ckpt_dp_resume(r->dp, &p, &len, &f, &scan);
    for (int i = 0; i < scan.nskipped && i < EL_CKPT_MAX_SKIPPED; i++)
        el_log(EL_LOG_WARN, "skipping checkpoint %s: %s", scan.skipped[i].what,
               el_strerror(scan.skipped[i].err));
    if (rc == -ENOENT)
        return 0;
    if (rc != 0)
        die("cannot resume: %s", el_ckpt_dp_errmsg(r->dp));
    size_t want = sizeof *s + 2 * m->nparams * sizeof(float);
    int64_t best = f.info.step;
    if (len != want)
        die("checkpoint %lld is from another model (%zu bytes, want %zu); "
            "use another --ckpt-dir",
            (long long)best, len, want);
    char *buf = p;
    struct state st;
    memcpy(&st, buf, sizeof st);
    if (memcmp(st.magic, "FMNIST02", 8) != 0 ||
        st.nparams != (int64_t)m->nparams)
        die("checkpoint %lld is from another model; use another "
            "--ckpt-dir",
            (long long)best);
    for (int l = 0; l <= m->nl; l++)
        if (st.layers[l] != m->size[l])
            die("checkpoint %lld has other layer sizes; use another "
                "--ckpt-dir",
                (long long)best);
    memcpy(m->w, buf + sizeof st, m->nparams * sizeof(float));
    memcpy(m->v, buf + sizeof st + m->nparams * sizeof(float),
           m->nparams * sizeof(float));
    free(buf);
    *s = st;
    if (r->rank == 0)
        el_log(EL_LOG_INFO,
               "resumed from checkpoint step %lld (epoch %lld, sample %lld; "
               "saved by %d ranks, now %d; global batch %lld; in %d of %d "
               "checkpoint directories; read by rank %d)",
               (long long)st.step, (long long)st.epoch + 1,
               (long long)st.offset, f.info.world, r->world,
               (long long)st.global_batch, f.holders, f.dirs, f.src);
    return 1;
}

/* ------------------------------------------------------------------------
 * Stopping early.  The agent stops the workers with SIGTERM when the job's
 * membership changes, and a peer's death makes the allreduce fail.  Either
 * way the ranks still hold the complete state of the last finished step
 * (the same on every rank), so it is saved before going.  A signal only
 * sets a flag, which travels in the next step's allreduce: all ranks then
 * stop after the same step and save it together, in every directory, with
 * an outcome they agree on.  When the round is broken, every survivor saves
 * in its own directory (its writer may be the rank that died).  The next
 * round loses no work, whichever node is gone.
 *
 * A frozen peer (its node SIGSTOPped, a paused VM) answers nothing, so the
 * collective in progress would wait for it up to its timeout and the stop
 * flag would never travel.  So the stop signal also arms a timer: STOP_WAIT_MS
 * later it sets 'give_up', the communicator's opts.stop, and a collective
 * still blocked then returns -ECANCELED.  Peers that answer have finished
 * the step long before (milliseconds), so an ordinary stop is still agreed;
 * a round with a silent peer is broken, and every survivor saves alone and
 * dies of its stop signal, as a stopped worker does.
 */
#define STOP_WAIT_MS 500

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t give_up; /* opts.stop of the communicator */
static timer_t give_up_timer;
static volatile sig_atomic_t give_up_armed; /* 1: created, 2: started */

static void on_stop_signal(int sig)
{
    stop_signal = sig;
    if (give_up_armed == 1) { /* timer_settime is async-signal-safe */
        struct itimerspec its = {
            .it_value = {STOP_WAIT_MS / 1000, STOP_WAIT_MS % 1000 * 1000000L}};
        give_up_armed = 2;
        timer_settime(give_up_timer, 0, &its, NULL);
    }
}

static void on_give_up(int sig)
{
    (void)sig;
    give_up = 1;
}

/* Catch SIGTERM and SIGINT into stop_signal, and the timer behind
 * give_up. */
static void catch_stop_signals(void)
{
    struct sigaction sa = {.sa_handler = on_give_up, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGALRM};
    if (timer_create(CLOCK_MONOTONIC, &ev, &give_up_timer) == 0)
        give_up_armed = 1;
    else /* without it, a frozen peer costs the collective timeout */
        el_log(EL_LOG_WARN, "timer_create: %s", strerror(errno));
    sa.sa_handler = on_stop_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

/* Save the state of the last finished step (unless every directory has it
 * already) before the process exits, and say truthfully what happened:
 * together (collective) after an agreed stop, alone when the round is
 * broken.  Logged by each directory's writer, or by every survivor. */
static void save_on_exit(struct run *r, struct mlp *m, const struct state *s,
                         int64_t last_saved, int broken, const char *why)
{
    if (!r->dp)
        return;
    int say = broken || el_ckpt_dp_is_writer(r->dp);
    if (s->step == last_saved) { /* an agreed save of this step succeeded */
        if (say)
            el_log(EL_LOG_INFO,
                   "rank %d: %s: checkpoint step %lld is saved "
                   "already; exiting",
                   r->rank, why, (long long)s->step);
        return;
    }
    int rc;
    if (!broken) {
        struct el_ckpt_dp_saved sv;
        rc = save_ckpt(r, m, s, &sv);
        if (rc == 0) {
            if (say)
                el_log(EL_LOG_INFO,
                       "rank %d: %s: saved checkpoint step %lld "
                       "before exiting (in %d checkpoint director%s)",
                       r->rank, why, (long long)s->step, sv.saved,
                       sv.saved == 1 ? "y" : "ies");
            return;
        }
        if (sv.saved >= 0) {
            el_log(EL_LOG_ERROR, "rank %d: %s: %s; exiting", r->rank, why,
                   el_ckpt_dp_errmsg(r->dp));
            return;
        }
        /* The round broke during the save: fall through, alone. */
        broken = 1;
        if (el_ckpt_dp_is_writer(r->dp) && sv.local_rc == 0) {
            el_log(EL_LOG_INFO,
                   "rank %d: %s: saved checkpoint step %lld "
                   "before exiting (in %s; the round broke, so the other "
                   "directories are unknown)",
                   r->rank, why, (long long)s->step, el_ckpt_dp_dir(r->dp));
            return;
        }
    }
    rc = save_ckpt_alone(r, m, s);
    if (rc == 0)
        el_log(EL_LOG_INFO,
               "rank %d: %s: saved checkpoint step %lld before "
               "exiting (in %s)",
               r->rank, why, (long long)s->step, el_ckpt_dp_dir(r->dp));
    else
        el_log(EL_LOG_ERROR,
               "rank %d: %s: checkpoint step %lld is not "
               "saved: %s; exiting",
               r->rank, why, (long long)s->step, el_ckpt_dp_errmsg(r->dp));
}

/* The round is broken (a peer died or hung, or this rank gave up on a
 * silent one after its stop signal: rc -ECANCELED): save alone, then go:
 * by the stop signal if one came (a stopped worker, as the agent expects),
 * else exit 1 with 'why' so that the agent starts a new round. */
static void leave_broken(struct run *r, struct mlp *m, const struct state *s,
                         int64_t last_saved, int rc, const char *why)
    __attribute__((noreturn));
static void leave_broken(struct run *r, struct mlp *m, const struct state *s,
                         int64_t last_saved, int rc, const char *why)
{
    int sig = stop_signal;
    save_on_exit(r, m, s, last_saved, 1,
                 rc == -ECANCELED ? "a peer does not answer"
                                  : "the round is broken");
    if (!sig)
        die("%s; exiting so that the agent starts a new round", why);
    el_log(EL_LOG_WARN, "rank %d: %s; stopping (%s)", r->rank, why,
           strsignal(sig));
    signal(sig, SIG_DFL);
    raise(sig);
    die("%s", why); /* the signal was blocked */
}

/* After a failed save: exit, saying why on every rank. */
static void save_failed(struct run *r, struct mlp *m, const struct state *s,
                        int64_t last_saved, int rc,
                        const struct el_ckpt_dp_saved *sv)
{
    if (sv->saved < 0) { /* the round broke during the exchange */
        char why[1100];
        snprintf(why, sizeof why, "checkpoint step %lld: %s",
                 (long long)s->step, el_ckpt_dp_errmsg(r->dp));
        leave_broken(r, m, s, last_saved, rc, why);
    }
    die("%s; exiting (the previous checkpoints are intact)",
        el_ckpt_dp_errmsg(r->dp));
}

/* A collective of the loop failed: leave_broken() saying which. */
static void coll_failed(struct run *r, struct mlp *m, const struct state *s,
                        int64_t last_saved, int rc, const char *what)
    __attribute__((noreturn));
static void coll_failed(struct run *r, struct mlp *m, const struct state *s,
                        int64_t last_saved, int rc, const char *what)
{
    char why[1100];
    snprintf(why, sizeof why, "%s failed: %s (%s)", what, el_strerror(rc),
             el_comm_errmsg(r->comm));
    leave_broken(r, m, s, last_saved, rc, why);
}

/* ------------------------------------------------------------------------
 * Progress line.
 */

static void progress(const struct run *r, const struct state *s, uint64_t n,
                     double rate, int final)
{
    static double last;
    if (r->rank != 0)
        return;
    int tty = isatty(STDERR_FILENO);
    double t = now_s();
    /* A terminal gets a live bar; a log file one line every 2 s (and none
     * at the end of an epoch, which has its own line). */
    if (final ? !tty : t - last < (tty ? 0.2 : 2.0))
        return;
    last = t;
    int pct = (int)(100 * (uint64_t)s->offset / n);
    char bar[21];
    for (int i = 0; i < 20; i++)
        bar[i] = i < pct / 5 ? '#' : '.';
    bar[20] = '\0';
    double loss = s->epoch_samples > 0 ? s->epoch_loss / s->epoch_samples : 0;
    fprintf(stderr,
            "%sepoch %lld/%d [%s] %3d%%  step %lld  loss %.4f  "
            "%.0f samples/s%s",
            tty ? "\r" : "", (long long)s->epoch + 1, r->o.epochs, bar, pct,
            (long long)s->step, loss, rate, tty && !final ? "" : "\n");
    fflush(stderr);
}

/* ------------------------------------------------------------------------
 * Training.
 */

int main(int argc, char **argv)
{
    struct run r;
    /* One line per epoch is an event: let it out when it happens, also when
     * stdout is a file or a pipe (a log, a test, the agent's tee). */
    setvbuf(stdout, NULL, _IOLBF, 0);
    parse_opts(&r.o, argc, argv);
    el_log_init("train", EL_LOG_INFO);

    char err[512];
    int rc = el_worker_open(&r.w, NULL, err, sizeof err);
    if (rc != 0)
        die("%s", err);
    r.info = el_worker_info(r.w);
    r.rank = r.info->rank;
    r.world = r.info->world_size;
    r.comm = NULL;
    r.dp = NULL;
    if (r.world > 1) {
        char prefix[128];
        el_worker_key(r.w, "fmnist", prefix, sizeof prefix);
        struct el_comm_opts co = {.timeout_ms = 60000, .stop = &give_up};
        rc = el_comm_open(&r.comm, el_worker_store(r.w), prefix, r.rank,
                          r.world, &co);
        if (rc != 0)
            die("cannot connect to the other ranks: %s (%s)", el_strerror(rc),
                el_comm_open_errmsg());
    }
    if (r.o.ckpt_dir) {
        rc = el_ckpt_dp_open(&r.dp, r.comm, r.o.ckpt_dir, r.o.keep, err,
                             sizeof err);
        if (rc != 0)
            die("checkpoints: %s", err);
        if (el_ckpt_dp_is_writer(r.dp))
            el_log(EL_LOG_INFO,
                   "rank %d writes checkpoints to %s (%d "
                   "checkpoint director%s in the job)",
                   r.rank, r.o.ckpt_dir, el_ckpt_dp_dirs(r.dp),
                   el_ckpt_dp_dirs(r.dp) == 1 ? "y" : "ies");
    }
    int threads = r.o.threads;
    if (threads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = (int)(cpus / r.info->local_world_size);
        if (threads < 1)
            threads = 1;
    }
    openblas_set_num_threads(threads);

    struct dataset train, test;
    double t_load = now_s();
    load_split(&train, r.o.data_dir, "train", r.o.subset);
    load_split(&test, r.o.data_dir, "t10k", 0);
    t_load = now_s() - t_load;

    struct mlp m;
    mlp_init(&m, &r.o);
    struct state s = {.magic = "FMNIST02",
                      .global_batch = r.o.batch,
                      .nparams = (int64_t)m.nparams,
                      .train_n = train.n};
    for (int l = 0; l <= m.nl; l++)
        s.layers[l] = m.size[l];
    int resumed = load_ckpt(&r, &m, &s);
    if (resumed && s.global_batch != r.o.batch && r.rank == 0)
        el_log(EL_LOG_WARN,
               "keeping the checkpoint's global batch %lld "
               "(--batch %ld ignored)",
               (long long)s.global_batch, r.o.batch);
    if (resumed && s.train_n != train.n)
        die("checkpoint was trained on %lld samples, this run has %ld",
            (long long)s.train_n, train.n);
    /* A round with another world size resumed mid-epoch: the epoch's line
     * will say so. */
    if (resumed && s.offset > 0 && s.world > 0 && s.world != r.world) {
        if (s.nchanges < MAX_CHANGES) {
            s.change_step[s.nchanges] = s.step;
            s.change_world[s.nchanges] = r.world;
        }
        s.nchanges++;
    }
    s.world = r.world;
    long global_batch = (long)s.global_batch;
    long local_max = (global_batch + r.world - 1) / r.world;
    mlp_alloc(&m, (int)(local_max > EVAL_CHUNK ? local_max : EVAL_CHUNK));

    struct el_shard *sh;
    struct el_shard_opts so = {.num_samples = (uint64_t)train.n,
                               .global_batch = (uint64_t)global_batch,
                               .seed = r.o.seed,
                               .rank = r.rank,
                               .world = r.world};
    rc = el_shard_open(&sh, &so);
    if (rc != 0)
        die("sampler: %s", el_strerror(rc));
    uint64_t steps_per_epoch = el_shard_steps_per_epoch(sh);
    uint64_t total_steps = steps_per_epoch * (uint64_t)r.o.epochs;
    int fail_rank = r.o.fail_rank >= 0 ? r.o.fail_rank : r.world - 1;

    if (r.rank == 0) {
        char arch[128], per[48];
        int p = 0;
        for (int l = 0; l <= m.nl; l++)
            p += snprintf(arch + p, sizeof arch - (size_t)p, "%s%d",
                          l ? "-" : "", m.size[l]);
        if (global_batch % r.world)
            snprintf(per, sizeof per, "%ld-%ld", global_batch / r.world,
                     global_batch / r.world + 1);
        else
            snprintf(per, sizeof per, "%ld", global_batch / r.world);
        el_log(EL_LOG_INFO,
               "rank 0 of %d (attempt %d, run %s): MLP %s (%zu parameters), "
               "%ld training / %ld test samples (loaded in %.1f s), global "
               "batch %ld (%s per rank), %llu steps per epoch, %d BLAS "
               "threads per rank",
               r.world, r.info->restart_count, r.info->run_id, arch, m.nparams,
               train.n, test.n, t_load, global_batch, per,
               (unsigned long long)steps_per_epoch, threads);
    }

    unsigned char *labels = xmalloc((size_t)m.maxrows);
    int64_t last_saved = resumed ? s.step : -1;
    catch_stop_signals();
    /* The agent's preemption notice (SIGUSR1 by default) sets a flag that
     * travels in the allreduce like the stop flag: see the loop. */
    el_worker_watch_preemption();
    int noticed = 0;
    double run_t0 = now_s();
    double acc = 0, test_loss = 0;
    long run_samples = 0;
    double run_train_s = 0;
    while (s.epoch < r.o.epochs) {
        if (s.offset == 0) { /* a new epoch */
            s.epoch_world0 = r.world;
            s.nchanges = 0;
        }
        el_shard_seek(sh, (uint64_t)s.epoch, (uint64_t)s.offset);
        double t0 = now_s();
        double seconds0 = s.epoch_seconds;
        for (;;) {
            struct el_shard_batch b;
            el_shard_next(sh, &b);
            if (b.global_count == 0)
                break;
            if (r.o.fail_at >= 0 && s.step == r.o.fail_at &&
                r.info->restart_count == 0 && r.rank == fail_rank) {
                const char *how = r.o.fail_mode == 'k'   ? "kills itself"
                                  : r.o.fail_mode == 'a' ? "aborts"
                                                         : "exits with 1";
                el_log(EL_LOG_WARN,
                       "injected failure: rank %d %s at step "
                       "%lld (--fail-at-step)",
                       r.rank, how, (long long)s.step);
                if (r.o.fail_mode == 'e')
                    die("injected failure at step %lld (--fail-at-step)",
                        (long long)s.step);
                signal(SIGABRT, SIG_DFL);
                raise(r.o.fail_mode == 'a' ? SIGABRT : SIGKILL);
            }
            int rows = (int)b.local_count;
            gather(&m, &train, b.index, rows, labels);
            long correct = 0;
            double loss = 0;
            if (rows > 0) {
                mlp_forward(&m, rows);
                loss = mlp_loss(&m, rows, labels, 1, &correct);
            }
            mlp_backward(&m, rows);
            /* Gradients, the loss and who is being stopped travel in one
             * allreduce. */
            m.g[m.nparams] = (float)loss;
            m.g[m.nparams + 1] = (float)correct;
            m.g[m.nparams + 2] = stop_signal ? 1.0f : 0.0f;
            m.g[m.nparams + 3] = el_worker_preempted() ? 1.0f : 0.0f;
            rc = allreduce_sum_f32(&r, m.g, m.nparams + 4);
            if (rc != 0)
                coll_failed(&r, &m, &s, last_saved, rc, "allreduce");

            float lr = (float)(r.o.lr * 0.5 *
                               (1.0 + cos(M_PI * (double)s.step /
                                          (double)total_steps)));
            float inv = 1.0f / (float)b.global_count;
            float mu = r.o.momentum, wd = r.o.wd;
            for (size_t i = 0; i < m.nparams; i++) {
                float g = m.g[i] * inv + wd * m.w[i];
                m.v[i] = mu * m.v[i] + g;
                m.w[i] -= lr * m.v[i];
            }
            s.step++;
            s.offset = (int64_t)(b.offset + b.global_count);
            s.epoch_loss += m.g[m.nparams];
            s.epoch_samples += (double)b.global_count;
            s.epoch_seconds = seconds0 + (now_s() - t0);
            run_samples += (long)b.global_count;
            progress(&r, &s, (uint64_t)train.n,
                     s.epoch_samples / (s.epoch_seconds + 1e-9), 0);
            el_worker_heartbeat(s.step);
            /* Progress (step, samples, this step's mean loss) for the
             * agent's metrics and dashboard, at most 10 times a second. */
            static double reported;
            if (now_s() - reported >= 0.1) {
                reported = now_s();
                el_worker_progress_loss(s.step, run_samples,
                                        m.g[m.nparams] /
                                            (double)b.global_count);
            }
            int stopping = m.g[m.nparams + 2] > 0; /* the same everywhere */
            /* A preemption notice on any node: save this step at once, all
             * ranks together, and train on until the node goes. */
            int notice = m.g[m.nparams + 3] > 0 && !noticed;
            if (notice && r.rank == 0)
                el_log(EL_LOG_WARN,
                       "a node got a preemption notice: "
                       "checkpointing step %lld now",
                       (long long)s.step);
            noticed |= notice;
            if ((s.step % r.o.ckpt_every == 0 || notice) &&
                (uint64_t)s.offset < (uint64_t)train.n && !stopping) {
                struct el_ckpt_dp_saved sv;
                if (r.dp && (rc = save_ckpt(&r, &m, &s, &sv)) != 0)
                    save_failed(&r, &m, &s, last_saved, rc, &sv);
                last_saved = s.step;
            }
            if (stopping) {
                int sig = stop_signal;
                save_on_exit(&r, &m, &s, last_saved, 0,
                             sig ? strsignal(sig) : "another rank is stopped");
                /* The other node is leaving: this node's agent learns it
                 * from the rendezvous within milliseconds and stops this
                 * worker for the next round.  Wait for that stop (up to
                 * 3 s): exiting on our own first would look like a
                 * failure and charge a restart. */
                if (!sig)
                    el_log(EL_LOG_WARN,
                           "rank %d: another rank was stopped "
                           "by a signal after step %lld; stopping with it",
                           r.rank, (long long)s.step);
                for (int i = 0; i < 300 && !stop_signal; i++)
                    usleep(10000);
                sig = stop_signal;
                if (!sig)
                    die("rank %d: stopped with another rank after step %lld "
                        "(no stop came from this node's agent)",
                        r.rank, (long long)s.step);
                signal(sig, SIG_DFL);
                raise(sig);
            }
        }
        double train_s = s.epoch_seconds;
        double rate = s.epoch_samples / (train_s + 1e-9);
        progress(&r, &s, (uint64_t)train.n, rate, 1);
        if ((rc = evaluate(&r, &m, &test, &acc, &test_loss)) != 0)
            coll_failed(&r, &m, &s, last_saved, rc, "evaluation");
        if (r.rank == 0) {
            char worlds[512];
            world_history(&s, r.world, worlds, sizeof worlds);
            printf("epoch %lld/%d: %llu steps (to step %lld), train loss "
                   "%.4f, %.0f samples/s, %.1f s, test loss %.4f, test "
                   "accuracy %.2f%%, world%s\n",
                   (long long)s.epoch + 1, r.o.epochs,
                   (unsigned long long)steps_per_epoch, (long long)s.step,
                   s.epoch_loss / (s.epoch_samples + 1e-9), rate, train_s,
                   test_loss, acc, worlds);
            fflush(stdout);
        }
        run_train_s += train_s - seconds0;
        s.epoch++;
        s.offset = 0;
        s.epoch_loss = s.epoch_samples = s.epoch_seconds = 0;
        struct el_ckpt_dp_saved sv;
        if (r.dp && (rc = save_ckpt(&r, &m, &s, &sv)) != 0)
            save_failed(&r, &m, &s, last_saved, rc, &sv);
        last_saved = s.step;
    }
    /* Resumed after the last epoch: just score. */
    if (run_samples == 0 &&
        (rc = evaluate(&r, &m, &test, &acc, &test_loss)) != 0)
        coll_failed(&r, &m, &s, last_saved, rc, "evaluation");
    if (r.rank == 0 && run_samples == 0) {
        printf("final: test accuracy %.2f%% after %d epochs (%lld steps), "
               "nothing left to train, world %d\n",
               acc, r.o.epochs, (long long)s.step, r.world);
    } else if (r.rank == 0) {
        printf("final: test accuracy %.2f%% after %d epochs (%lld steps), "
               "%.0f samples/s, %.1f s in this run, world %d\n",
               acc, r.o.epochs, (long long)s.step,
               (double)run_samples / (run_train_s + 1e-9), now_s() - run_t0,
               r.world);
    }
    fflush(stdout);
    /* Rank 0 may serve the store; let the others finish with it first. */
    el_worker_barrier(r.w, "exit", 60000);
    el_ckpt_dp_close(r.dp);
    el_comm_close(r.comm);
    el_shard_close(sh);
    el_worker_close(r.w);
    mlp_free(&m);
    free(labels);
    free(train.x), free(train.y), free(test.x), free(test.y);
    return 0;
}
