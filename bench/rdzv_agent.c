/* rdzv_agent.c -- a bare rendezvous agent for bench/rdzv.sh: the agent's
 * rendezvous loop (include/elrun/rdzv.h) without workers, so the same
 * figure can be taken on every backend (c10d, etcd).  Each time
 * el_rdzv_next() returns it appends "<round> <rank> <CLOCK_REALTIME ns>
 * <pid>" to DIR/starts in one write.
 *
 *   rdzv_agent DIR go|stay BACKEND HOST:PORT MIN MAX [KEY=VALUE ...]
 *
 * go:   one round, then the exit barrier (so the store host stays until
 *       every node has its answer), then exit.
 * stay: as the agent between rounds: wait on the notify fd and join the
 *       next round when num_nodes_waiting > 0, until SIGTERM / SIGINT.
 * Keys (times in ms): run_id, last_call, keep_alive, keep_alive_n, join,
 * io, is_host (1, 0, -1), local_addr, and for etcd endpoints and
 * etcd_prefix.  The backend's notes go to stderr with a ms timestamp.  Exit: 0 after SIGTERM or a
 * completed go run, 1 on a rendezvous error (logged).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "elrun/rdzv.h"

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    long long t = now_ns();
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%lld.%03lld [%d] %s\n", t / 1000000000LL,
            t / 1000000 % 1000, (int)getpid(), msg);
}

static void on_event(void *arg, const char *msg)
{
    say("%s", msg);
}

static int record(const char *dir, const struct el_rdzv_info *info)
{
    long long t = now_ns();
    char path[4096], line[128];
    snprintf(path, sizeof path, "%s/starts", dir);
    int n = snprintf(line, sizeof line, "%lld %d %lld %d\n",
                     (long long)info->round, info->node_rank, t, (int)getpid());
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, line, (size_t)n) != n)
        return -1;
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: rdzv_agent DIR go|stay BACKEND HOST:PORT "
                        "MIN MAX [KEY=VALUE ...]\n");
        return 2;
    }
    const char *dir = argv[1];
    int stay = strcmp(argv[2], "stay") == 0;
    static char host[256];
    snprintf(host, sizeof host, "%s", argv[4]);
    char *colon = strrchr(host, ':');
    if (!colon)
        return 2;
    *colon = 0;
    struct el_rdzv_config c = {0};
    c.backend = argv[3];
    c.host = host;
    c.port = atoi(colon + 1);
    c.min_nodes = atoi(argv[5]);
    c.max_nodes = atoi(argv[6]);
    c.run_id = "bench";
    c.join_timeout_ms = 300000;
    c.last_call_timeout_ms = 0;
    c.keep_alive_interval_ms = 5000;
    c.keep_alive_max_attempt = 3;
    c.max_restarts = 1000;
    c.on_event = on_event;
    for (int i = 7; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq)
            return 2;
        *eq = 0;
        const char *k = argv[i], *v = eq + 1;
        if (strcmp(k, "run_id") == 0)
            c.run_id = v;
        else if (strcmp(k, "last_call") == 0)
            c.last_call_timeout_ms = atoi(v);
        else if (strcmp(k, "keep_alive") == 0)
            c.keep_alive_interval_ms = atoi(v);
        else if (strcmp(k, "keep_alive_n") == 0)
            c.keep_alive_max_attempt = atoi(v);
        else if (strcmp(k, "join") == 0)
            c.join_timeout_ms = atoi(v);
        else if (strcmp(k, "io") == 0)
            c.io_timeout_ms = atoi(v);
        else if (strcmp(k, "is_host") == 0)
            c.is_host = atoi(v);
        else if (strcmp(k, "local_addr") == 0)
            c.local_addr = v;
        else if (strcmp(k, "endpoints") == 0)
            c.endpoints = v;
        else if (strcmp(k, "etcd_prefix") == 0)
            c.etcd.prefix = v;
        else {
            fprintf(stderr, "rdzv_agent: unknown key %s\n", k);
            return 2;
        }
    }

    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGTERM);
    sigaddset(&ss, SIGINT);
    sigprocmask(SIG_BLOCK, &ss, NULL);
    int sfd = signalfd(-1, &ss, SFD_CLOEXEC | SFD_NONBLOCK);

    struct el_rdzv *r;
    char err[512] = "";
    int rc = el_rdzv_open(&r, &c, err, sizeof err);
    if (rc) {
        say("open: %s", err);
        return 1;
    }
    for (;;) {
        struct el_rdzv_info info;
        rc = el_rdzv_next(r, 1, sfd, &info);
        if (rc == -ECANCELED)
            break;
        if (rc) {
            say("next: %s", el_rdzv_errmsg(r));
            el_rdzv_close(r);
            return 1;
        }
        if (record(dir, &info))
            return 1;
        if (!stay) {
            rc = el_rdzv_exit_barrier(r, 1, c.join_timeout_ms, sfd);
            if (rc && rc != -ECANCELED)
                say("%s", el_rdzv_errmsg(r));
            break;
        }
        /* Between rounds: as the agent supervising its workers. */
        int nfd = el_rdzv_notify_fd(r), waiting = 0, sig = 0;
        while (!waiting && !sig) {
            struct pollfd p[2] = {{.fd = sfd, .events = POLLIN},
                                  {.fd = nfd, .events = POLLIN}};
            if (poll(p, nfd >= 0 ? 2 : 1, -1) < 0) {
                if (errno == EINTR)
                    continue;
                return 1;
            }
            if (p[0].revents)
                sig = 1;
            else if (p[1].revents) {
                el_rdzv_ack_notify(r);
                if ((rc = el_rdzv_num_nodes_waiting(r, &waiting))) {
                    say("num_nodes_waiting: %s", el_rdzv_errmsg(r));
                    el_rdzv_close(r);
                    return 1;
                }
            }
        }
        if (sig)
            break;
    }
    el_rdzv_close(r);
    return 0;
}
