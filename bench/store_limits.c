/* store_limits.c -- probes of the store's limits (issue #11), for
 * bench/store_limits.sh, which runs them against the starting point's
 * `elrun store` and this one side by side.  Modes:
 *
 *   flood HOST:PORT CONNS GETS KEY
 *          CONNS connections each send GETS TCPStore 1.13 GETs of KEY in one
 *          write and never read; prints "ready N" and holds them until
 *          killed (SIGTERM).
 *   put HOST:PORT KEY BYTES
 *          store a value of BYTES bytes under KEY.
 *   good HOST:PORT SECS
 *          one well-behaved client (elrun's C client: SET then GET of a
 *          small key) for SECS seconds; prints the round trips done and the
 *          median, 99th percentile and slowest in ms.
 *   hold HOST:PORT N
 *          N connections that never send a byte; prints "ready N" and holds.
 *   probe HOST:PORT N
 *          N new clients one after the other, each connecting and doing one
 *          SET + GET; prints how many succeeded.
 *   auth HOST:PORT N SECRET_FILE
 *          N connections with and N without el_store_auth(); prints the
 *          median connect time of each in microseconds.
 *
 * Only addresses in 127.0.0.0/8 are accepted; every loop is bounded.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "elrun/net.h"
#include "elrun/store.h"

static void usage(void)
{
    fprintf(stderr, "usage: store_limits put|flood|good|hold|probe|auth "
                    "127.x.x.x:PORT ARGS... (see the file's header)\n");
    exit(2);
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static void hold_forever(int n)
{
    printf("ready %d\n", n);
    fflush(stdout);
    for (;;)
        pause();
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int flood(const char *host, int port, int conns, int gets,
                 const char *key)
{
    size_t kl = strlen(key), one = 9 + kl, len = one * (size_t)gets;
    uint8_t *req = malloc(len);
    int made = 0;
    if (!req)
        return 1;
    for (int i = 0; i < gets; i++) {
        uint64_t l = kl;
        req[i * one] = 2; /* 1.13 GET */
        memcpy(req + i * one + 1, &l, 8);
        memcpy(req + i * one + 9, key, kl);
    }
    for (int i = 0; i < conns; i++) {
        int fd = el_tcp_connect(host, port, 5000);
        if (fd < 0)
            continue;
        made++;
        /* As much as the kernel takes now; the server reads the rest as
         * it goes (or never, under back-pressure). */
        (void)!send(fd, req, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    hold_forever(made);
    return 0;
}

static int put(const char *host, int port, const char *key, size_t n)
{
    struct el_store *s;
    char *v = malloc(n);
    if (!v || el_store_connect(&s, host, port, 5000, 30000))
        return 1;
    memset(v, 'v', n);
    int rc = el_store_set(s, key, v, n);
    if (!rc)
        rc = el_store_ping(s);
    el_store_close(s);
    free(v);
    return rc != 0;
}

static int good(const char *host, int port, double secs)
{
    struct el_store *s;
    if (el_store_connect(&s, host, port, 5000, 30000)) {
        printf("good: cannot connect\n");
        return 1;
    }
    size_t cap = 1 << 20, n = 0;
    long long *lat = malloc(cap * sizeof *lat);
    long long end = el_now_ns() + (long long)(secs * 1e9);
    int failed = 0;
    while (el_now_ns() < end && n < cap) {
        long long t0 = el_now_ns();
        void *v = NULL;
        if (el_store_set(s, "good", "1", 1) ||
            el_store_get(s, "good", &v, NULL, 30000)) {
            failed = 1;
            break;
        }
        free(v);
        lat[n++] = el_now_ns() - t0;
    }
    qsort(lat, n, sizeof *lat, cmp_ll);
    printf("good: %zu round trips%s, median %.3f ms, p99 %.3f ms, max %.1f "
           "ms\n",
           n, failed ? " (then an error)" : "", n ? lat[n / 2] / 1e6 : 0.0,
           n ? lat[n * 99 / 100] / 1e6 : 0.0, n ? lat[n - 1] / 1e6 : 0.0);
    el_store_close(s);
    return failed;
}

static int hold(const char *host, int port, int n)
{
    int made = 0;
    for (int i = 0; i < n; i++)
        if (el_tcp_connect(host, port, 2000) >= 0)
            made++;
    hold_forever(made);
    return 0;
}

static int probe(const char *host, int port, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        struct el_store *s;
        void *v = NULL;
        if (el_store_connect(&s, host, port, 2000, 5000) == 0) {
            if (el_store_set(s, "probe", "1", 1) == 0 &&
                el_store_get(s, "probe", &v, NULL, 5000) == 0)
                ok++;
            free(v);
            el_store_close(s);
        }
    }
    printf("probe: %d of %d new clients served\n", ok, n);
    return 0;
}

static int auth(const char *host, int port, int n, const char *path)
{
    uint8_t secret[EL_STORE_SECRET_MAX + 1];
    size_t slen;
    char err[256];
    if (el_store_read_secret(path, secret, sizeof secret, &slen, err,
                             sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    long long *t[2] = {calloc((size_t)n, sizeof(long long)),
                       calloc((size_t)n, sizeof(long long))};
    for (int i = 0; i < n; i++) {
        for (int a = 0; a < 2; a++) {
            struct el_store *s;
            long long t0 = el_now_ns();
            if (el_store_connect(&s, host, port, 2000, 5000) ||
                (a && el_store_auth(s, secret, slen))) {
                fprintf(stderr, "auth: connection %d failed\n", i);
                return 1;
            }
            t[a][i] = el_now_ns() - t0;
            el_store_close(s);
        }
    }
    qsort(t[0], (size_t)n, sizeof(long long), cmp_ll);
    qsort(t[1], (size_t)n, sizeof(long long), cmp_ll);
    printf("auth: connect %.0f us, connect + authenticate %.0f us "
           "(medians of %d)\n",
           t[0][n / 2] / 1e3, t[1][n / 2] / 1e3, n);
    return 0;
}

int main(int argc, char **argv)
{
    char host[EL_HOST_MAX];
    int port;
    if (argc < 4 || el_addr_parse(argv[2], -1, host, &port) ||
        strncmp(host, "127.", 4) != 0)
        usage();
    signal(SIGPIPE, SIG_IGN);
    raise_nofile();
    if (!strcmp(argv[1], "flood") && argc == 6)
        return flood(host, port, atoi(argv[3]), atoi(argv[4]), argv[5]);
    if (!strcmp(argv[1], "put") && argc == 5)
        return put(host, port, argv[3], (size_t)atol(argv[4]));
    if (!strcmp(argv[1], "good"))
        return good(host, port, atof(argv[3]));
    if (!strcmp(argv[1], "hold"))
        return hold(host, port, atoi(argv[3]));
    if (!strcmp(argv[1], "probe"))
        return probe(host, port, atoi(argv[3]));
    if (!strcmp(argv[1], "auth") && argc == 5)
        return auth(host, port, atoi(argv[3]), argv[4]);
    usage();
    return 2;
}
