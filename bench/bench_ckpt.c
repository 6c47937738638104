/* bench_ckpt.c -- checkpoint save throughput of libelrun (el_ckpt_save:
 * CRC-32C, write, fsync, rename, fsync of the directory, pruning), for
 * bench/ckpt.sh to set beside `dd conv=fsync` on the same file system.
 *
 *   build/bench/bench_ckpt [-d DIR] [-s 64M,256M] [-r REPEATS]
 *
 * For each size: a buffer of random bytes is saved REPEATS times (default
 * 5) as successive steps into DIR (default ./bench-ckpt.tmp, removed
 * afterwards) with keep = 1, so each save also deletes the previous
 * checkpoint, as in training; the median save time gives the throughput.
 * Each save is also loaded back (el_ckpt_load_into checks the CRC) once, to
 * show the read side.  One line per size on stdout:
 *   RESULT ckpt <bytes> <median_save_ms> <save_MBps> <load_ms> <load_MBps>
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elrun/ckpt.h"
#include "elrun/err.h"
#include "elrun/net.h"

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'K':
    case 'k':
        v *= 1024;
        break;
    case 'M':
    case 'm':
        v *= 1024 * 1024;
        break;
    case 'G':
    case 'g':
        v *= 1024.0 * 1024 * 1024;
        break;
    default:
        break;
    }
    return (size_t)v;
}

int main(int argc, char **argv)
{
    const char *dir = "bench-ckpt.tmp";
    char sizes[256] = "64M,256M";
    int reps = 5;
    int c;
    while ((c = getopt(argc, argv, "d:s:r:")) != -1) {
        switch (c) {
        case 'd':
            dir = optarg;
            break;
        case 's':
            snprintf(sizes, sizeof sizes, "%s", optarg);
            break;
        case 'r':
            reps = atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: bench_ckpt [-d DIR] [-s 64M,256M] "
                            "[-r REPEATS]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 1000)
        reps = 5;
    double *t = calloc((size_t)reps, sizeof *t);
    int64_t step = 0;
    for (char *tok = strtok(sizes, ","); tok; tok = strtok(NULL, ",")) {
        size_t n = parse_size(tok);
        unsigned char *buf = malloc(n ? n : 1);
        if (!buf || !t) {
            fprintf(stderr, "bench_ckpt: out of memory\n");
            return 1;
        }
        uint64_t x = 88172645463325252ull;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = (unsigned char)x;
        }
        struct el_ckpt_opts o = {.dir = dir, .world = 1, .keep = 1};
        for (int r = 0; r < reps; r++) {
            long long t0 = el_now_ns();
            int rc = el_ckpt_save(&o, ++step, buf, n);
            t[r] = (double)(el_now_ns() - t0) / 1e6;
            if (rc != 0) {
                fprintf(stderr, "bench_ckpt: save: %s\n", el_strerror(rc));
                return 1;
            }
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        double med =
            reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
        long long t0 = el_now_ns();
        int rc = el_ckpt_load_into(dir, step, 0, buf, n);
        double load = (double)(el_now_ns() - t0) / 1e6;
        if (rc != 0) {
            fprintf(stderr, "bench_ckpt: load: %s\n", el_strerror(rc));
            return 1;
        }
        printf("RESULT ckpt %zu %.1f %.1f %.1f %.1f\n", n, med,
               (double)n / 1e3 / med, load, (double)n / 1e3 / load);
        fflush(stdout);
        free(buf);
    }
    /* Remove what the runs left (keep = 1 leaves one checkpoint). */
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", dir);
    if (strchr(dir, '\'') == NULL && system(cmd) != 0)
        fprintf(stderr, "bench_ckpt: could not remove %s\n", dir);
    free(t);
    return 0;
}
