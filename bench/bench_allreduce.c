/* bench_allreduce.c -- allreduce latency and bus bandwidth of libelrun's
 * collectives, measured the way torchrun-baseline.md section 6 measured
 * gloo, so that bench/allreduce.sh can print both side by side.
 *
 *   build/bench/bench_allreduce [-n 2,4] [-s 4K,1M,16M,64M] [-r REPEATS]
 *
 * Starts a store server on an ephemeral loopback port and forks one process
 * per rank.  For each size, float32 sum:
 *   per-op:       a barrier, then one timed allreduce; an iteration's time is
 *                 the max over the ranks; the median over 500/100/20/10
 *                 iterations (4 KiB / 1 MiB / 16 MiB / 64 MiB, scaled by -r);
 *   back-to-back: that many allreduces in a row timed together, three
 *                 batches, the median batch.
 * ELRUN_BENCH_TCP=1 keeps elrun off shared memory (TCP only);
 * ELRUN_BENCH_CHUNK=BYTES sets the ring chunk and shared-memory step.
 * busbw = 2(n-1)/n * bytes / time.  One line per measurement on stdout:
 *   RESULT elrun <ranks> <bytes> <perop_us> <perop_busbw_GBps> <b2b_us> <b2b_busbw_GBps>
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elrun/coll.h"
#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/store.h"

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int iters_for(size_t bytes, double scale)
{
    int it = bytes <= (8 << 10)    ? 500
             : bytes <= (2 << 20)  ? 100
             : bytes <= (32 << 20) ? 20
                                   : 10;
    it = (int)(it * scale);
    return it < 3 ? 3 : it;
}

static int die(const char *what, struct el_comm *c, int rc)
{
    fprintf(stderr, "bench: %s: %s: %s\n", what, el_strerror(rc),
            c ? el_comm_errmsg(c) : el_comm_open_errmsg());
    return 1;
}

static int run_rank(int port, int rank, int world, const size_t *sizes,
                    int nsizes, double scale, const char *prefix)
{
    struct el_store *st;
    struct el_comm *c = NULL;
    int rc = el_store_connect(&st, "127.0.0.1", port, 10000, 10000);
    if (rc)
        return die("store", NULL, rc);
    struct el_comm_opts o = {.shm = getenv("ELRUN_BENCH_TCP") ? -1 : 1};
    if (getenv("ELRUN_BENCH_CHUNK")) /* TCP ring / shm step size, bytes */
        o.chunk_bytes = o.shm_chunk_bytes =
            (size_t)atol(getenv("ELRUN_BENCH_CHUNK"));
    if ((rc = el_comm_open(&c, st, prefix, rank, world, &o)) != 0)
        return die("open", NULL, rc);
    if (rank == 0)
        fprintf(stderr, "bench: %d ranks over %s\n", world,
                el_comm_transport(c));
    for (int si = 0; si < nsizes; si++) {
        size_t bytes = sizes[si], n = bytes / 4;
        float *x = malloc(bytes);
        for (size_t i = 0; i < n; i++)
            x[i] = (float)(i % 7);
        int it = iters_for(bytes, scale);
        double *t = malloc(sizeof *t * (size_t)it);
        /* Warm up: connections, page faults, TCP windows. */
        for (int w = 0; w < 3; w++)
            if ((rc = el_allreduce(c, x, n, EL_FLOAT32, EL_SUM)) != 0)
                return die("allreduce", c, rc);
        for (int i = 0; i < it; i++) {
            if ((rc = el_barrier(c)) != 0)
                return die("barrier", c, rc);
            long long t0 = el_now_ns();
            if ((rc = el_allreduce(c, x, n, EL_FLOAT32, EL_SUM)) != 0)
                return die("allreduce", c, rc);
            double dt = (double)(el_now_ns() - t0) / 1e3;
            if ((rc = el_allreduce(c, &dt, 1, EL_FLOAT64, EL_MAX)) != 0)
                return die("allreduce", c, rc);
            t[i] = dt;
        }
        double perop = median(t, it);
        double batch[3];
        for (int b = 0; b < 3; b++) {
            if ((rc = el_barrier(c)) != 0)
                return die("barrier", c, rc);
            long long t0 = el_now_ns();
            for (int i = 0; i < it; i++)
                if ((rc = el_allreduce(c, x, n, EL_FLOAT32, EL_SUM)) != 0)
                    return die("allreduce", c, rc);
            double dt = (double)(el_now_ns() - t0) / 1e3 / it;
            if ((rc = el_allreduce(c, &dt, 1, EL_FLOAT64, EL_MAX)) != 0)
                return die("allreduce", c, rc);
            batch[b] = dt;
        }
        double b2b = median(batch, 3);
        double f = 2.0 * (world - 1) / world;
        if (rank == 0) {
            printf("RESULT elrun %d %zu %.1f %.3f %.1f %.3f\n", world, bytes,
                   perop, f * (double)bytes / perop / 1e3, b2b,
                   f * (double)bytes / b2b / 1e3);
            fflush(stdout);
        }
        free(x);
        free(t);
    }
    el_comm_close(c);
    el_store_close(st);
    return 0;
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k')
        v *= 1024;
    else if (*end == 'M' || *end == 'm')
        v *= 1024 * 1024;
    else if (*end == 'G' || *end == 'g')
        v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

int main(int argc, char **argv)
{
    const char *ranks = "2,4", *sizes_s = "4K,1M,16M,64M";
    double scale = 1;
    int opt;
    while ((opt = getopt(argc, argv, "n:s:r:")) != -1) {
        if (opt == 'n')
            ranks = optarg;
        else if (opt == 's')
            sizes_s = optarg;
        else if (opt == 'r')
            scale = atof(optarg);
        else {
            fprintf(stderr,
                    "usage: %s [-n 2,4] [-s 4K,1M,16M,64M] "
                    "[-r scale]\n",
                    argv[0]);
            return 2;
        }
    }
    size_t sizes[32];
    int nsizes = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", sizes_s);
    for (char *tok = strtok(buf, ","); tok && nsizes < 32;
         tok = strtok(NULL, ","))
        sizes[nsizes++] = parse_size(tok) & ~(size_t)3;
    signal(SIGPIPE, SIG_IGN);

    struct el_store_server *srv;
    struct el_store_server_opts so = {.host = "127.0.0.1", .port = 0};
    int rc = el_store_server_start(&srv, &so);
    if (rc) {
        fprintf(stderr, "bench: store server: %s\n", el_strerror(rc));
        return 1;
    }
    int port = el_store_server_port(srv), status = 0;
    snprintf(buf, sizeof buf, "%s", ranks);
    char list[256];
    snprintf(list, sizeof list, "%s", ranks);
    int round = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int world = atoi(tok);
        if (world < 1 || world > 64)
            continue;
        char prefix[64];
        snprintf(prefix, sizeof prefix, "bench/%d", round++);
        pid_t pids[64];
        fflush(NULL);
        for (int r = 0; r < world; r++) {
            pids[r] = fork();
            if (pids[r] == 0)
                _exit(run_rank(port, r, world, sizes, nsizes, scale, prefix));
        }
        for (int r = 0; r < world; r++) {
            int st;
            while (waitpid(pids[r], &st, 0) < 0 && errno == EINTR)
                ;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                status = 1;
        }
    }
    el_store_server_close(srv);
    return status;
}
