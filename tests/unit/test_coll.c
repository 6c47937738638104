/* test_coll.c -- the collectives against a naive reference, with real
 * processes: a store server on an ephemeral loopback port in the test
 * process, and one forked process per rank that connects to it.
 *
 * Covered: every dtype and op for world sizes 1..7 and awkward counts (0, 1,
 * primes, not divisible by the world), both algorithms (the default options
 * and ones that force the ring with tiny chunks), over shared memory and
 * over TCP; bitwise equal results on
 * all ranks; broadcast from every root, allgather, barrier; a rank killed
 * with SIGKILL mid-allreduce and a rank stopped with SIGSTOP make the others
 * fail within the bound with a message naming it; a rank that never comes
 * makes el_comm_open time out naming it; the program's stop flag (set by a
 * real signal) ends a collective or an open blocked on a silent peer, and
 * signals that do not set it change nothing.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elrun/coll.h"
#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/store.h"
#include "test.h"

/* The store server runs in a child process of its own, so that the test
 * process has no threads when it forks ranks (a fork while another thread
 * holds an allocator lock deadlocks the child under ASan). */
static pid_t srv_pid;
static int srv_port, srv_pipe = -1;

static void start_store(void)
{
    int port_p[2], life_p[2];
    CHECK(pipe(port_p) == 0 && pipe(life_p) == 0);
    fflush(NULL);
    srv_pid = fork();
    CHECK(srv_pid >= 0);
    if (srv_pid == 0) {
        struct el_store_server *srv;
        struct el_store_server_opts o = {.host = "127.0.0.1", .port = 0};
        close(life_p[1]);
        if (el_store_server_start(&srv, &o) != 0)
            _exit(1);
        int port = el_store_server_port(srv);
        if (write(port_p[1], &port, sizeof port) != sizeof port)
            _exit(1);
        char b;
        while (read(life_p[0], &b, 1) != 0) /* until the test closes it */
            ;
        el_store_server_close(srv);
        _exit(0);
    }
    close(port_p[1]);
    close(life_p[0]);
    srv_pipe = life_p[1];
    CHECK_EQ(read(port_p[0], &srv_port, sizeof srv_port), sizeof srv_port);
    close(port_p[0]);
}

static void stop_store(void)
{
    int st;
    close(srv_pipe);
    waitpid(srv_pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* A rank's body: returns 0 on success; failures print and return 1. */
typedef int (*rank_fn)(struct el_store *st, int rank, int world, void *arg);

#define RFAIL(...)                            \
    do {                                      \
        fprintf(stderr, "  rank %d: ", rank); \
        fprintf(stderr, __VA_ARGS__);         \
        fputc('\n', stderr);                  \
        return 1;                             \
    } while (0)

static pid_t spawn_rank(rank_fn fn, int rank, int world, void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct el_store *st = NULL;
        close(srv_pipe);
        /* Loopback only: the default listen address follows MASTER_ADDR. */
        unsetenv("MASTER_ADDR");
        int rc = el_store_connect(&st, "127.0.0.1", srv_port, 10000, 10000);
        if (rc != 0) {
            fprintf(stderr, "  rank %d: store connect: %s\n", rank,
                    el_strerror(rc));
            _exit(1);
        }
        rc = fn(st, rank, world, arg);
        el_store_close(st);
        fflush(NULL);
        _exit(rc);
    }
    return pid;
}

/* Run fn on 'world' ranks and check they all succeed. */
static void run_ranks(int world, rank_fn fn, void *arg)
{
    pid_t pids[16];
    for (int r = 0; r < world; r++)
        pids[r] = spawn_rank(fn, r, world, arg);
    int bad = 0;
    for (int r = 0; r < world; r++) {
        int st = 0;
        while (waitpid(pids[r], &st, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "  world %d: rank %d failed (status 0x%x)\n", world,
                    r, st);
            bad = 1;
        }
    }
    CHECK(!bad);
}

static int open_comm(struct el_comm **c, struct el_store *st,
                     const char *prefix, int rank, int world,
                     const struct el_comm_opts *o)
{
    int rc = el_comm_open(c, st, prefix, rank, world, o);
    if (rc != 0)
        fprintf(stderr, "  rank %d: el_comm_open(%s): %s: %s\n", rank, prefix,
                el_strerror(rc), el_comm_open_errmsg());
    return rc;
}

/* ---------------------------------------------------------------------------
 * allreduce against the reference
 */

/* Small integers (exact in float too), different per rank and index. */
static int64_t val(int rank, size_t i)
{
    return (int64_t)((rank * 7 + (int)(i % 1000) * 13 + (int)(i / 1000)) % 19) -
           9;
}

static void fill(void *buf, size_t n, enum el_dtype t, int rank)
{
    for (size_t i = 0; i < n; i++) {
        int64_t v = val(rank, i);
        switch (t) {
        case EL_FLOAT32:
            ((float *)buf)[i] = (float)v;
            break;
        case EL_FLOAT64:
            ((double *)buf)[i] = (double)v;
            break;
        case EL_INT32:
            ((int32_t *)buf)[i] = (int32_t)v;
            break;
        case EL_INT64:
            ((int64_t *)buf)[i] = v;
            break;
        }
    }
}

static void reference(void *buf, size_t n, enum el_dtype t, enum el_redop op,
                      int world)
{
    for (size_t i = 0; i < n; i++) {
        int64_t acc = val(0, i);
        for (int r = 1; r < world; r++) {
            int64_t v = val(r, i);
            if (op == EL_MAX)
                acc = v > acc ? v : acc;
            else if (op == EL_MIN)
                acc = v < acc ? v : acc;
            else
                acc += v;
        }
        switch (t) {
        case EL_FLOAT32:
            ((float *)buf)[i] =
                op == EL_AVG ? (float)acc / (float)world : (float)acc;
            break;
        case EL_FLOAT64:
            ((double *)buf)[i] =
                op == EL_AVG ? (double)acc / world : (double)acc;
            break;
        case EL_INT32:
            ((int32_t *)buf)[i] = (int32_t)(op == EL_AVG ? acc / world : acc);
            break;
        case EL_INT64:
            ((int64_t *)buf)[i] = op == EL_AVG ? acc / world : acc;
            break;
        }
    }
}

static const char *const dtype_name[] = {"f32", "f64", "i32", "i64"};
static const char *const op_name[] = {"sum", "avg", "max", "min"};

static int check_allreduce(struct el_comm *c, int rank, int world,
                           const char *tag)
{
    size_t counts[] = {0,    1,
                       2,    3,
                       5,    7,
                       13,   (size_t)world * 5 + 3,
                       1009, (size_t)world * 997,
                       40009};
    size_t maxn = 40009 + 16;
    char *buf = malloc(maxn * 8), *ref = malloc(maxn * 8);
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
        for (int t = 0; t < 4; t++)
            for (int op = 0; op < 4; op++) {
                size_t n = counts[ci];
                size_t esz = el_dtype_size((enum el_dtype)t);
                fill(buf, n, (enum el_dtype)t, rank);
                /* Canary past the end. */
                memset(buf + n * esz, 0x5a, 16);
                int rc = el_allreduce(c, buf, n, (enum el_dtype)t,
                                      (enum el_redop)op);
                if (rc != 0)
                    RFAIL("%s allreduce %s %s n=%zu: %s", tag, dtype_name[t],
                          op_name[op], n, el_comm_errmsg(c));
                reference(ref, n, (enum el_dtype)t, (enum el_redop)op, world);
                if (memcmp(buf, ref, n * esz) != 0)
                    RFAIL("%s allreduce %s %s n=%zu world=%d: wrong result",
                          tag, dtype_name[t], op_name[op], n, world);
                for (int k = 0; k < 16; k++)
                    if ((unsigned char)buf[n * esz + k] != 0x5a)
                        RFAIL("%s allreduce n=%zu wrote past the end", tag, n);
            }
    free(buf);
    free(ref);
    return 0;
}

/* The option sets every test runs under: shared memory (large and tiny
 * steps), TCP with the default algorithm choice, TCP forced onto the ring
 * with tiny chunks. */
static const struct el_comm_opts configs[] = {
    {.timeout_ms = 20000},
    {.timeout_ms = 20000, .shm_chunk_bytes = 4096},
    {.timeout_ms = 20000, .shm = -1},
    {.timeout_ms = 20000, .shm = -1, .chunk_bytes = 4096, .small_bytes = 1},
};
static const char *const config_name[] = {"shm", "shm-4k", "tcp", "tcp-ring"};
#define NCONFIGS 4

static int rank_allreduce(struct el_store *st, int rank, int world, void *arg)
{
    for (int k = 0; k < NCONFIGS; k++) {
        char prefix[64];
        struct el_comm *c;
        snprintf(prefix, sizeof prefix, "ar/%d/%s", world, config_name[k]);
        if (open_comm(&c, st, prefix, rank, world, &configs[k]) != 0)
            return 1;
        if (el_comm_rank(c) != rank || el_comm_world(c) != world)
            RFAIL("rank/world accessors");
        const char *want = world == 1 || configs[k].shm < 0 ? "tcp" : "shm";
        if (strcmp(el_comm_transport(c), want) != 0)
            RFAIL("%s: transport %s, want %s", config_name[k],
                  el_comm_transport(c), want);
        int rc = check_allreduce(c, rank, world, config_name[k]);
        el_comm_close(c);
        if (rc)
            return rc;
    }
    return 0;
}

TEST(coll_allreduce_reference)
{
    start_store();
    for (int world = 1; world <= 7; world++)
        run_ranks(world, rank_allreduce, NULL);
    stop_store();
}

/* Non-integer floats: every rank must end with bitwise the same result. */
static int rank_identical(struct el_store *st, int rank, int world, void *arg)
{
    const struct el_comm_opts *o = arg;
    char prefix[64];
    struct el_comm *c;
    snprintf(prefix, sizeof prefix, "ident/%d/%d", world, o->shm);
    if (open_comm(&c, st, prefix, rank, world, o) != 0)
        return 1;
    size_t sizes[] = {3, 1000, 100003};
    for (size_t si = 0; si < 3; si++) {
        size_t n = sizes[si];
        float *x = malloc(n * 4), *all = malloc(n * 4 * (size_t)world);
        uint32_t s = 12345u + (uint32_t)rank * 7919u;
        for (size_t i = 0; i < n; i++) {
            s = s * 1664525u + 1013904223u;
            x[i] = (float)(s >> 8) / 16777216.0f * 3.0f - 1.0f;
        }
        for (int op = 0; op < 2; op++) {
            if (el_allreduce(c, x, n, EL_FLOAT32, (enum el_redop)op) != 0 ||
                el_allgather(c, x, all, n * 4) != 0)
                RFAIL("%s", el_comm_errmsg(c));
            for (int r = 0; r < world; r++)
                if (memcmp(all + (size_t)r * n, x, n * 4) != 0)
                    RFAIL("n=%zu: rank %d's result differs", n, r);
        }
        free(x);
        free(all);
    }
    el_comm_close(c);
    return 0;
}

TEST(coll_allreduce_identical_on_all_ranks)
{
    start_store();
    struct el_comm_opts shm = {.shm_chunk_bytes = 8192};
    struct el_comm_opts tcp = {.chunk_bytes = 8192, .shm = -1};
    for (int world = 2; world <= 5; world++) {
        run_ranks(world, rank_identical, &shm);
        run_ranks(world, rank_identical, &tcp);
    }
    stop_store();
}

/* ---------------------------------------------------------------------------
 * broadcast, allgather, barrier
 */
static int rank_others(struct el_store *st, int rank, int world, void *arg)
{
    const struct el_comm_opts *o = arg;
    char prefix[64];
    struct el_comm *c;
    snprintf(prefix, sizeof prefix, "bc/%d/%d", world, o->shm);
    if (open_comm(&c, st, prefix, rank, world, o) != 0)
        return 1;
    size_t sizes[] = {0, 1, 13, 512, 513, 100003};
    unsigned char *b = malloc(100003 * (size_t)world + 64);
    unsigned char *s = malloc(100003 + 64);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        for (int root = 0; root < world; root++) {
            for (size_t i = 0; i < n + 8; i++)
                b[i] = rank == root ? (unsigned char)(i * 31 + root)
                                    : (unsigned char)0xee;
            if (el_broadcast(c, b, n, root) != 0)
                RFAIL("broadcast: %s", el_comm_errmsg(c));
            for (size_t i = 0; i < n; i++)
                if (b[i] != (unsigned char)(i * 31 + root))
                    RFAIL("broadcast n=%zu root=%d: byte %zu wrong", n, root,
                          i);
            if (rank != root && b[n] != 0xee)
                RFAIL("broadcast wrote past the end");
        }
        /* allgather, out of place then in place */
        for (int inplace = 0; inplace < 2; inplace++) {
            memset(b, 0xee, n * (size_t)world + 8);
            unsigned char *src = inplace ? b + (size_t)rank * n : s;
            for (size_t i = 0; i < n; i++)
                src[i] = (unsigned char)(i * 7 + rank * 3);
            if (el_allgather(c, src, b, n) != 0)
                RFAIL("allgather: %s", el_comm_errmsg(c));
            for (int r = 0; r < world; r++)
                for (size_t i = 0; i < n; i++)
                    if (b[(size_t)r * n + i] != (unsigned char)(i * 7 + r * 3))
                        RFAIL("allgather n=%zu: rank %d byte %zu wrong", n, r,
                              i);
            if (b[n * (size_t)world] != 0xee)
                RFAIL("allgather wrote past the end");
        }
    }
    /* barrier: nobody leaves before everybody has arrived */
    char key[64];
    for (int round = 0; round < 3; round++) {
        int64_t now;
        snprintf(key, sizeof key, "bc/%d/%d/arrived/%d", world, o->shm, round);
        if (el_store_add(st, key, 1, &now) != 0)
            RFAIL("store add");
        if (el_barrier(c) != 0)
            RFAIL("barrier: %s", el_comm_errmsg(c));
        if (el_store_add(st, key, 0, &now) != 0 || now != world)
            RFAIL("left barrier %d with %lld of %d arrived", round,
                  (long long)now, world);
    }
    free(b);
    free(s);
    el_comm_close(c);
    return 0;
}

TEST(coll_broadcast_allgather_barrier)
{
    start_store();
    struct el_comm_opts shm = {.shm_chunk_bytes = 4096};
    struct el_comm_opts tcp = {
        .chunk_bytes = 4096, .small_bytes = 512, .shm = -1};
    for (int world = 1; world <= 7; world++) {
        run_ranks(world, rank_others, &shm);
        run_ranks(world, rank_others, &tcp);
    }
    stop_store();
}

static int rank_usage(struct el_store *st, int rank, int world, void *arg)
{
    struct el_comm *c;
    if (open_comm(&c, st, "usage", rank, world, NULL) != 0)
        return 1;
    float x = 1;
    if (el_allreduce(c, &x, 1, (enum el_dtype)9, EL_SUM) != EL_EUSAGE ||
        el_allreduce(c, &x, 1, EL_FLOAT32, (enum el_redop)9) != EL_EUSAGE ||
        el_allreduce(c, NULL, 1, EL_FLOAT32, EL_SUM) != EL_EUSAGE ||
        el_broadcast(c, &x, 4, world) != EL_EUSAGE)
        RFAIL("bad arguments accepted");
    /* Usage errors leave the communicator working. */
    if (el_allreduce(c, &x, 1, EL_FLOAT32, EL_SUM) != 0 || x != world)
        RFAIL("allreduce after usage error: %s", el_comm_errmsg(c));
    el_comm_close(c);
    return 0;
}

TEST(coll_usage_errors)
{
    start_store();
    run_ranks(2, rank_usage, NULL);
    stop_store();
    el_comm_close(NULL);
}

/* A seeded random sequence of collectives (the same on every rank):
 * sizes, types, ops and roots mixed, each checked against the reference,
 * so that one collective's leftovers would corrupt the next. */
static uint32_t rnd(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static int rank_random(struct el_store *st, int rank, int world, void *arg)
{
    const struct el_comm_opts *o = arg;
    char prefix[64];
    struct el_comm *c;
    snprintf(prefix, sizeof prefix, "rand/%d/%d", world, o->shm);
    if (open_comm(&c, st, prefix, rank, world, o) != 0)
        return 1;
    size_t cap = 60000;
    char *buf = malloc(cap * 8 * (size_t)world), *ref = malloc(cap * 8);
    uint32_t seed = 42;
    for (int it = 0; it < 150; it++) {
        uint32_t kind = rnd(&seed) % 4;
        size_t n = rnd(&seed) % 3 == 0 ? rnd(&seed) % 60000 : rnd(&seed) % 50;
        int t = (int)(rnd(&seed) % 4), op = (int)(rnd(&seed) % 4);
        int root = (int)(rnd(&seed) % (uint32_t)world);
        size_t esz = el_dtype_size((enum el_dtype)t);
        int rc = 0;
        if (kind <= 1) {
            fill(buf, n, (enum el_dtype)t, rank);
            rc = el_allreduce(c, buf, n, (enum el_dtype)t, (enum el_redop)op);
            reference(ref, n, (enum el_dtype)t, (enum el_redop)op, world);
            if (rc == 0 && memcmp(buf, ref, n * esz) != 0)
                RFAIL("op %d: allreduce n=%zu wrong", it, n);
        } else if (kind == 2) {
            for (size_t i = 0; i < n; i++)
                buf[i] = rank == root ? (char)(i * 3 + (size_t)it) : 0;
            rc = el_broadcast(c, buf, n, root);
            for (size_t i = 0; rc == 0 && i < n; i++)
                if (buf[i] != (char)(i * 3 + (size_t)it))
                    RFAIL("op %d: broadcast n=%zu wrong", it, n);
        } else {
            for (size_t i = 0; i < n; i++)
                ref[i] = (char)(i + (size_t)rank * 5 + (size_t)it);
            rc = el_allgather(c, ref, buf, n);
            for (int r = 0; rc == 0 && r < world; r++)
                for (size_t i = 0; i < n; i++)
                    if (buf[(size_t)r * n + i] !=
                        (char)(i + (size_t)r * 5 + (size_t)it))
                        RFAIL("op %d: allgather n=%zu wrong", it, n);
        }
        if (rc != 0)
            RFAIL("op %d: %s", it, el_comm_errmsg(c));
    }
    free(buf);
    free(ref);
    el_comm_close(c);
    return 0;
}

TEST(coll_random_sequence)
{
    start_store();
    struct el_comm_opts shm = {.shm_chunk_bytes = 8192};
    struct el_comm_opts tcp = {
        .shm = -1, .chunk_bytes = 4096, .small_bytes = 2048};
    for (int world = 2; world <= 5; world += 3) {
        run_ranks(world, rank_random, &shm);
        run_ranks(world, rank_random, &tcp);
    }
    stop_store();
}

/* Ranks that finish first close and exit at once, while the others may
 * still be reading their last data or waiting on the last barrier: that
 * departure must not count as a failure. */
static int rank_quick_exit(struct el_store *st, int rank, int world, void *arg)
{
    const struct el_comm_opts *o = arg;
    static float x[70000];
    for (int round = 0; round < 15; round++) {
        char prefix[64];
        struct el_comm *c;
        snprintf(prefix, sizeof prefix, "quick/%d/%d/%d", world, o->shm, round);
        if (open_comm(&c, st, prefix, rank, world, o) != 0)
            return 1;
        size_t n = (size_t)(round % 3 == 0 ? 3 : round % 3 == 1 ? 5000 : 70000);
        for (size_t i = 0; i < n; i++)
            x[i] = 1;
        if (el_allreduce(c, x, n, EL_FLOAT32, EL_SUM) != 0)
            RFAIL("round %d: %s", round, el_comm_errmsg(c));
        if (x[n - 1] != world)
            RFAIL("round %d: wrong sum", round);
        el_comm_close(c);
    }
    return 0;
}

TEST(coll_early_close_is_not_a_failure)
{
    start_store();
    struct el_comm_opts shm = {.shm_chunk_bytes = 4096};
    struct el_comm_opts tcp = {.shm = -1, .chunk_bytes = 4096};
    run_ranks(4, rank_quick_exit, &shm);
    run_ranks(4, rank_quick_exit, &tcp);
    run_ranks(3, rank_quick_exit, &shm);
    run_ranks(3, rank_quick_exit, &tcp);
    stop_store();
}

/* ---------------------------------------------------------------------------
 * failures
 */
struct report {
    int rank, rc;
    long long t_fail_ms;
    char msg[400];
};

struct fault_arg {
    int shm;
    int victim;
    int timeout_ms;
    int ready_fd;  /* the victim writes a byte here once it is in the loop */
    int report_fd; /* survivors write a struct report here */
};

static int rank_fault(struct el_store *st, int rank, int world, void *argp)
{
    struct fault_arg *a = argp;
    struct el_comm *c;
    struct el_comm_opts o = {.timeout_ms = a->timeout_ms, .shm = a->shm};
    if (open_comm(&c, st, "fault", rank, world, &o) != 0)
        return 1;
    size_t n = 1 << 20; /* 4 MiB: the ring, many chunks in flight */
    float *x = calloc(n, 4);
    for (int it = 0;; it++) {
        if (rank == a->victim && it == 3) {
            char b = 1;
            if (write(a->ready_fd, &b, 1) != 1)
                return 1;
        }
        int rc = el_allreduce(c, x, n, EL_FLOAT32, EL_SUM);
        if (rc != 0) {
            struct report rep = {
                .rank = rank, .rc = rc, .t_fail_ms = el_now_ms()};
            snprintf(rep.msg, sizeof rep.msg, "%s", el_comm_errmsg(c));
            /* Later calls fail at once with the same error. */
            if (el_barrier(c) != rc)
                RFAIL("error is not sticky");
            if (write(a->report_fd, &rep, sizeof rep) != sizeof rep)
                return 1;
            el_comm_close(c);
            return 0;
        }
        if (it > 100000)
            RFAIL("never failed");
    }
}

/* Start 'world' ranks, wait until the victim is looping, signal it, and
 * check every survivor fails within bound_ms naming it. */
static void fault_case(int shm, int world, int victim, int sig, int timeout_ms,
                       int bound_ms)
{
    int ready[2], rep[2];
    CHECK(pipe(ready) == 0 && pipe(rep) == 0);
    struct fault_arg a = {shm, victim, timeout_ms, ready[1], rep[1]};
    pid_t pids[16];
    for (int r = 0; r < world; r++)
        pids[r] = spawn_rank(rank_fault, r, world, &a);
    char b;
    CHECK_EQ(read(ready[0], &b, 1), 1);
    long long t0 = el_now_ms();
    kill(pids[victim], sig);
    close(rep[1]);
    char want[32];
    snprintf(want, sizeof want, "rank %d (127.0.0.1:", victim);
    for (int i = 0; i < world - 1; i++) {
        struct report r;
        CHECK_EQ(read(rep[0], &r, sizeof r), sizeof r);
        long long dt = r.t_fail_ms - t0;
        fprintf(stderr, "  # rank %d failed after %lld ms: %s\n", r.rank, dt,
                r.msg);
        CHECK(r.rc == EL_EPEERLOST || r.rc == -ETIMEDOUT);
        CHECK(dt <= bound_ms);
        CHECK(strstr(r.msg, want) != NULL);
    }
    kill(pids[victim], SIGKILL);
    for (int r = 0; r < world; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (r != victim)
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    close(ready[0]);
    close(ready[1]);
    close(rep[0]);
}

/* The timeout is long: a killed peer must be noticed through its closed
 * connections, far sooner. */
TEST(coll_peer_killed_mid_allreduce_shm)
{
    start_store();
    fault_case(1, 4, 2, SIGKILL, 20000, 3000);
    stop_store();
}

TEST(coll_peer_killed_mid_allreduce_tcp)
{
    start_store();
    fault_case(-1, 4, 2, SIGKILL, 20000, 3000);
    stop_store();
}

TEST(coll_peer_hung_times_out_shm)
{
    start_store();
    fault_case(1, 3, 1, SIGSTOP, 700, 700 + 2500);
    stop_store();
}

TEST(coll_peer_hung_times_out_tcp)
{
    start_store();
    fault_case(-1, 3, 1, SIGSTOP, 700, 700 + 2500);
    stop_store();
}

static int rank_open_timeout(struct el_store *st, int rank, int world,
                             void *arg)
{
    struct el_comm *c;
    struct el_comm_opts o = {.connect_timeout_ms = 500};
    long long t0 = el_now_ms();
    int rc = el_comm_open(&c, st, "lonely", rank, world, &o);
    long long dt = el_now_ms() - t0;
    if (rc != -ETIMEDOUT)
        RFAIL("el_comm_open returned %d, want -ETIMEDOUT", rc);
    if (dt > 3000)
        RFAIL("open took %lld ms", dt);
    if (!strstr(el_comm_open_errmsg(), "rank 2"))
        RFAIL("message does not name rank 2: %s", el_comm_open_errmsg());
    return 0;
}

TEST(coll_open_times_out_naming_missing_rank)
{
    start_store();
    pid_t p0 = spawn_rank(rank_open_timeout, 0, 3, NULL);
    pid_t p1 = spawn_rank(rank_open_timeout, 1, 3, NULL);
    int s0, s1;
    waitpid(p0, &s0, 0);
    waitpid(p1, &s1, 0);
    CHECK(WIFEXITED(s0) && WEXITSTATUS(s0) == 0);
    CHECK(WIFEXITED(s1) && WEXITSTATUS(s1) == 0);
    stop_store();
}

/* ---------------------------------------------------------------------------
 * opts.stop: a real signal, from a POSIX timer, sets the flag while the rank
 * is blocked on a peer that never answers (a frozen node); the call returns
 * -ECANCELED promptly, the communicator stays broken, and a peer blocked in
 * the same collective fails at once naming the stopped rank.  Under ASan,
 * the stopped rank checks that nothing leaked once it closed.
 */

extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

static volatile sig_atomic_t stop_flag;
static volatile sig_atomic_t other_signals;

static void on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void on_other(int sig)
{
    (void)sig;
    other_signals++;
}

/* A timer raising sig after first_ms, then every every_ms (0: once);
 * handler installed with SA_RESTART, as a program does. */
static int arm_timer(timer_t *t, int sig, void (*fn)(int), int first_ms,
                     int every_ms)
{
    struct sigaction sa = {.sa_handler = fn, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = sig};
    struct itimerspec its = {
        .it_value = {first_ms / 1000, (first_ms % 1000) * 1000000L},
        .it_interval = {every_ms / 1000, (every_ms % 1000) * 1000000L}};
    if (sigaction(sig, &sa, NULL) != 0 ||
        timer_create(CLOCK_MONOTONIC, &ev, t) != 0)
        return -1;
    return timer_settime(*t, 0, &its, NULL);
}

enum { STOP_ALLREDUCE, STOP_BARRIER, STOP_BROADCAST, STOP_OPEN, STOP_NOPS };
static const char *const stop_op_name[] = {"allreduce", "barrier", "broadcast",
                                           "open"};
#define STOP_AFTER_MS 300

struct stop_arg {
    int shm, op;
    int silent_fd; /* rank 2 reads it until EOF: silent until then    */
    int silent_wr; /* its other end, which only the test keeps        */
    int report_fd; /* ranks 0 and 1 write a struct report here        */
};

static int stop_op(struct el_comm *c, int op, float *x, size_t n)
{
    switch (op) {
    case STOP_ALLREDUCE:
        return el_allreduce(c, x, n, EL_FLOAT32, EL_SUM);
    case STOP_BARRIER:
        return el_barrier(c);
    default:
        return el_broadcast(c, x, n * 4, 2); /* from the silent rank */
    }
}

static int rank_stop(struct el_store *st, int rank, int world, void *argp)
{
    struct stop_arg *a = argp;
    struct el_comm *c = NULL;
    struct el_comm_opts o = {.timeout_ms = 20000,
                             .connect_timeout_ms = 20000,
                             .shm = a->shm,
                             .stop = rank == 0 ? &stop_flag : NULL};
    char prefix[64];
    snprintf(prefix, sizeof prefix, "stop-%d-%d", a->shm, a->op);
    close(a->silent_wr);
    if (rank == 2) { /* the frozen node: joins (or not), then says nothing */
        if (a->op != STOP_OPEN && open_comm(&c, st, prefix, rank, world, &o))
            return 1;
        char b;
        while (read(a->silent_fd, &b, 1) > 0)
            ;
        el_comm_close(c);
        return 0;
    }
    size_t n = 1 << 20; /* 4 MiB: the ring and the chain over TCP */
    float *x = calloc(n, 4);
    if (!x)
        RFAIL("out of memory");
    if (a->op != STOP_OPEN) {
        if (open_comm(&c, st, prefix, rank, world, &o) != 0)
            return 1;
        if (strcmp(el_comm_transport(c), a->shm > 0 ? "shm" : "tcp") != 0)
            RFAIL("transport %s", el_comm_transport(c));
    }
    timer_t t;
    long long t0 = el_now_ms();
    if (rank == 0 && arm_timer(&t, SIGUSR1, on_stop, STOP_AFTER_MS, 0) != 0)
        RFAIL("timer: %s", strerror(errno));
    int rc;
    const char *msg;
    if (a->op == STOP_OPEN) {
        rc = el_comm_open(&c, st, prefix, rank, world, &o);
        msg = el_comm_open_errmsg();
    } else {
        rc = stop_op(c, a->op, x, n);
        msg = el_comm_errmsg(c);
    }
    struct report rep = {.rank = rank, .rc = rc, .t_fail_ms = el_now_ms()};
    snprintf(rep.msg, sizeof rep.msg, "%s", msg);
    if (rank == 0) {
        long long dt = rep.t_fail_ms - t0 - STOP_AFTER_MS;
        if (rc != -ECANCELED)
            RFAIL("%s returned %d (%s), want -ECANCELED", stop_op_name[a->op],
                  rc, msg);
        if (!stop_flag)
            RFAIL("returned before the signal");
        fprintf(stderr, "  # rank 0: %s returned %lld ms after the signal\n",
                stop_op_name[a->op], dt);
        if (dt > 1000)
            RFAIL("returned %lld ms after the signal", dt);
        if (!strstr(msg, "stopped"))
            RFAIL("message does not say it was stopped: %s", msg);
        if (c && stop_op(c, STOP_BARRIER, x, n) != -ECANCELED)
            RFAIL("a stopped communicator is not broken for good");
        timer_delete(t);
    }
    if (write(a->report_fd, &rep, sizeof rep) != sizeof rep)
        return 1;
    el_comm_close(c);
    free(x);
    if (rank == 0 && __lsan_do_recoverable_leak_check &&
        __lsan_do_recoverable_leak_check() != 0)
        RFAIL("leaked after a stopped %s", stop_op_name[a->op]);
    return 0;
}

static void stop_case(int shm, int op)
{
    int silent[2], rep[2];
    CHECK(pipe(silent) == 0 && pipe(rep) == 0);
    struct stop_arg a = {shm, op, silent[0], silent[1], rep[1]};
    /* Opening: rank 1 is not started either, rank 2 never opens. */
    int world = 3, nrep = op == STOP_OPEN ? 1 : 2;
    pid_t pids[3];
    for (int r = 0; r < world; r++)
        pids[r] = r == 1 && op == STOP_OPEN
                      ? -1
                      : spawn_rank(rank_stop, r, world, &a);
    close(rep[1]);
    close(silent[0]);
    struct report got[2];
    for (int i = 0; i < nrep; i++) {
        struct report r;
        CHECK_EQ(read(rep[0], &r, sizeof r), sizeof r);
        fprintf(stderr, "  # %s %s: rank %d returned %d: %s\n",
                shm > 0 ? "shm" : "tcp", stop_op_name[op], r.rank, r.rc, r.msg);
        CHECK(r.rank == 0 || r.rank == 1);
        got[r.rank] = r;
    }
    if (nrep == 2) {
        /* The peer in the same collective is not left waiting. */
        long long dt = got[1].t_fail_ms - got[0].t_fail_ms;
        fprintf(stderr, "  # rank 1 failed %lld ms after rank 0 stopped\n", dt);
        CHECK_EQ(got[1].rc, EL_EPEERLOST);
        CHECK(dt < 1000);
        CHECK(strstr(got[1].msg, "rank 0 (127.0.0.1:") != NULL);
        if (shm > 0) /* the shared segment says why */
            CHECK(strstr(got[1].msg, "asked to by its program") != NULL);
    }
    close(silent[1]); /* the silent rank ends */
    for (int r = 0; r < world; r++) {
        int st;
        if (pids[r] < 0)
            continue;
        CHECK(waitpid(pids[r], &st, 0) == pids[r]);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    close(rep[0]);
}

TEST(coll_stop_flag_ends_blocked_collectives_shm)
{
    start_store();
    for (int op = 0; op < STOP_OPEN; op++)
        stop_case(1, op);
    stop_store();
}

TEST(coll_stop_flag_ends_blocked_collectives_tcp)
{
    start_store();
    for (int op = 0; op < STOP_OPEN; op++)
        stop_case(-1, op);
    stop_store();
}

TEST(coll_stop_flag_ends_a_blocked_open)
{
    start_store();
    stop_case(1, STOP_OPEN);
    stop_store();
}

/* Signals that do not set the flag (a progress timer, SIGCHLD ...) only
 * wake the waits: the collective completes with the right result. */
static int rank_signalled(struct el_store *st, int rank, int world, void *argp)
{
    int shm = *(int *)argp;
    struct el_comm *c;
    struct el_comm_opts o = {
        .timeout_ms = 20000, .shm = shm, .stop = &stop_flag};
    char prefix[32];
    snprintf(prefix, sizeof prefix, "signalled-%d", shm);
    if (open_comm(&c, st, prefix, rank, world, &o) != 0)
        return 1;
    timer_t t;
    if (arm_timer(&t, SIGUSR2, on_other, 1, 2) != 0)
        RFAIL("timer: %s", strerror(errno));
    size_t n = 1 << 18;
    float *x = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(rank + 1);
    /* Late (the signals cut sleeps short): the others wait, woken every
     * 2 ms. */
    for (long long end = el_now_ms() + 200;
         rank == world - 1 && el_now_ms() < end;)
        usleep(10000);
    int rc = el_allreduce(c, x, n, EL_FLOAT32, EL_SUM);
    if (rc == 0)
        rc = el_barrier(c);
    timer_delete(t);
    if (rc != 0)
        RFAIL("failed under signals: %s", el_comm_errmsg(c));
    for (size_t i = 0; i < n; i++)
        if (x[i] != (float)(world * (world + 1) / 2))
            RFAIL("x[%zu] = %g", i, x[i]);
    if (rank != world - 1 && other_signals < 20)
        RFAIL("only %d signals came while waiting", (int)other_signals);
    free(x);
    el_comm_close(c);
    return 0;
}

TEST(coll_other_signals_do_not_stop_a_collective)
{
    start_store();
    int shm = 1;
    run_ranks(3, rank_signalled, &shm);
    shm = -1;
    run_ranks(3, rank_signalled, &shm);
    stop_store();
}
