/* store_bench.c -- load generator for TCPStore-compatible key-value stores.
 *
 * It drives any server that speaks PyTorch 1.13's TCPStore wire protocol
 * (elrun's `elrun store`, and PyTorch's own TCPStore server) with raw 1.13
 * frames, so both servers are measured by the very same client.  Modes:
 *
 *   tput   Throughput of set / get / add with C concurrent clients, each
 *          client one TCP connection with one request in flight (set is
 *          one-way and ends with a round trip).  Several servers are measured
 *          side by side, interleaved repetition by repetition, and the
 *          medians and the ratio of the first server to the second printed.
 *   storm  Connection storm: N clients connect, each ADDs 1 to one key and
 *          then WAITs on a "done" key, which the client whose ADD returned N
 *          sets (a barrier).  Many non-blocking sockets per thread, bound to
 *          several loopback source addresses for enough ephemeral ports.
 *   idle   Server memory per idle connection: the server's RSS with N idle
 *          connections minus its RSS with none, divided by N.
 *
 * bench/store.sh runs all three against both servers and prints the table;
 * its header says how to run it.  Every loop here is bounded in count or
 * time, and only addresses in 127.0.0.0/8 are accepted as targets.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elrun/net.h"

/* 1.13 op codes (torchrun-spec.md section 5.2) and elrun's X_GET. */
enum {
    OP_SET = 0,
    OP_GET = 2,
    OP_ADD = 3,
    OP_CHECK = 4,
    OP_WAIT = 5,
    OP_X_GET = 64, /* elrun only: i64 timeout_ms, key -> u8 status + bytes */
};

#define FRAME_MAX 8192
#define VALUE_MAX 4096
#define KEY_MAX 128
#define IN_MAX (2 * FRAME_MAX)
#define MAX_SERVERS 4
#define MAX_LIST 16
#define SET_KEYS_PER_CLIENT 1000 /* set cycles over this many keys      */
#define GET_KEYS_PER_CLIENT 64   /* get cycles over these prefilled keys */
#define SET_BURST 16             /* set frames per writable wake-up      */
#define DRAIN_GRACE_NS (30LL * 1000000000LL) /* after the deadline         */

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "store_bench: %s: %s\n", what, strerror(errno));
    exit(2);
}

/* ------------------------------------------------------------------------ */
/* Frames (1.13 dialect): strings are a uint64 LE length + raw bytes.        */

static size_t put_u64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
    return 8;
}

static size_t put_str(uint8_t *p, const void *s, size_t n)
{
    put_u64(p, n);
    memcpy(p + 8, s, n);
    return 8 + n;
}

static size_t frame_set(uint8_t *b, const char *key, const uint8_t *val,
                        size_t vlen)
{
    size_t n = 0;
    b[n++] = OP_SET;
    n += put_str(b + n, key, strlen(key));
    n += put_str(b + n, val, vlen);
    return n;
}

static size_t frame_key_op(uint8_t *b, uint8_t op, const char *key)
{
    b[0] = op;
    return 1 + put_str(b + 1, key, strlen(key));
}

static size_t frame_add(uint8_t *b, const char *key, int64_t delta)
{
    size_t n = frame_key_op(b, OP_ADD, key);
    return n + put_u64(b + n, (uint64_t)delta);
}

/* WAIT and CHECK on one key: op, u64 count = 1, key. */
static size_t frame_keys1(uint8_t *b, uint8_t op, const char *key)
{
    b[0] = op;
    size_t n = 1 + put_u64(b + 1, 1);
    return n + put_str(b + n, key, strlen(key));
}

static size_t frame_xget(uint8_t *b, const char *key, int64_t timeout_ms)
{
    b[0] = OP_X_GET;
    size_t n = 1 + put_u64(b + 1, (uint64_t)timeout_ms);
    return n + put_str(b + n, key, strlen(key));
}

/* What a reply looks like, so its end can be found in a byte stream. */
enum reply_kind {
    R_NONE = 0,
    R_BYTE,   /* WAIT, CHECK: 1 byte                        */
    R_I64,    /* ADD: int64                                 */
    R_BYTES,  /* GET: u64 length + bytes                    */
    R_XBYTES, /* X_GET: u8 status, then u64 length + bytes  */
};

/* Total length of the reply at the start of buf, or 0 if not yet known. */
static size_t reply_len(enum reply_kind kind, const uint8_t *buf, size_t have)
{
    uint64_t n;
    switch (kind) {
    case R_BYTE:
        return 1;
    case R_I64:
        return 8;
    case R_BYTES:
        if (have < 8)
            return 0;
        memcpy(&n, buf, 8);
        return n > IN_MAX - 8 ? (size_t)-1 : 8 + (size_t)n;
    case R_XBYTES:
        if (have < 9)
            return 0;
        if (buf[0] != 0) /* timeout status carries no value */
            return 1;
        memcpy(&n, buf + 1, 8);
        return n > IN_MAX - 9 ? (size_t)-1 : 9 + (size_t)n;
    case R_NONE:
        break;
    }
    return (size_t)-1;
}

/* ------------------------------------------------------------------------ */
/* Blocking helpers, used to prepare and verify (never timed).               */

static int write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    for (int tries = 0; n > 0 && tries < 100000; tries++) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return n == 0 ? 0 : -1;
}

/* Read one reply of the given kind into buf (IN_MAX bytes). */
static int read_reply(int fd, enum reply_kind kind, uint8_t *buf, size_t *out)
{
    size_t have = 0, need = 0;
    for (int tries = 0; tries < 100000; tries++) {
        need = reply_len(kind, buf, have);
        if (need == (size_t)-1)
            return -1;
        if (need && have >= need) {
            *out = need;
            return 0;
        }
        size_t want = need ? need - have : (kind == R_XBYTES ? 9 : 8) - have;
        ssize_t r = read(fd, buf + have, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        have += (size_t)r;
    }
    return -1;
}

static void set_timeouts(int fd, int seconds)
{
    struct timeval tv = {.tv_sec = seconds, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static void set_nonblocking(int fd, int on)
{
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* Close without TIME_WAIT (RST), so that tens of thousands of benchmark
 * sockets do not linger on a shared machine. */
static void close_hard(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

/* ------------------------------------------------------------------------ */
/* Addresses: targets must be IPv4 loopback.                                 */

struct target {
    char name[32];
    struct sockaddr_in sa;
    int pid;    /* server process, for its CPU time (0: unknown)  */
    int native; /* speaks elrun's own ops (xget)                   */
};

/* CPU time (user + system) of this process, all threads, in seconds. */
static double self_cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* CPU time (user + system, all threads) of a process in seconds, or -1. */
static double cpu_seconds(int pid)
{
    char path[64], buf[1024];
    if (pid <= 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (!p)
        return -1;
    unsigned long long ut = 0, st = 0;
    /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime stime */
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
               &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int parse_target(const char *text, struct sockaddr_in *sa)
{
    char host[EL_HOST_MAX];
    int port;
    if (el_addr_parse(text, -1, host, &port) != 0)
        return -1;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return -1;
    if ((ntohl(sa->sin_addr.s_addr) >> 24) != 127) {
        fprintf(stderr, "store_bench: %s is not in 127.0.0.0/8; refusing\n",
                text);
        return -1;
    }
    return 0;
}

/* A socket bound to source address 127.0.0.(2 + src % 250) (src < 0: no
 * bind), with TCP_NODELAY, connecting to sa.  Non-blocking if nb.  Returns
 * the fd (connect may be in progress) or -errno. */
static int open_conn(const struct sockaddr_in *sa, int src, int nb)
{
    int fd = socket(AF_INET,
                    SOCK_STREAM | SOCK_CLOEXEC | (nb ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (src >= 0) {
        struct sockaddr_in from;
        memset(&from, 0, sizeof from);
        from.sin_family = AF_INET;
        from.sin_addr.s_addr = htonl((127u << 24) | (uint32_t)(2 + src % 250));
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&from, sizeof from) != 0) {
            int e = errno;
            close(fd);
            return -e;
        }
    }
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) != 0 &&
        errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* Blocking connect with retries for up to timeout_s (refused or reset
 * connections are retried: a listen backlog may overflow). */
static int connect_blocking(const struct sockaddr_in *sa, int src,
                            int timeout_s)
{
    long long end = now_ns() + (long long)timeout_s * 1000000000LL;
    for (int tries = 0; tries < 100000; tries++) {
        int fd = open_conn(sa, src, 0);
        if (fd >= 0) {
            set_timeouts(fd, timeout_s);
            return fd;
        }
        if (now_ns() > end)
            return fd;
        usleep(10000);
    }
    return -ETIMEDOUT;
}

static void raise_nofile(long want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if ((long)rl.rlim_cur >= want)
        return;
    struct rlimit nr = {.rlim_cur = (rlim_t)want,
                        .rlim_max = rl.rlim_max > (rlim_t)want ? rl.rlim_max
                                                               : (rlim_t)want};
    if (setrlimit(RLIMIT_NOFILE, &nr) != 0) {
        nr.rlim_cur =
            rl.rlim_max; /* not root: take what the hard limit allows */
        nr.rlim_max = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nr);
        fprintf(stderr,
                "store_bench: could not raise the fd limit to %ld "
                "(hard limit %ld)\n",
                want, (long)rl.rlim_max);
    }
}

/* ------------------------------------------------------------------------ */
/* tput: throughput                                                          */

enum bench_op { B_SET, B_GET, B_GET1, B_XGET, B_ADD, B_NOPS };
static const char *const op_names[B_NOPS] = {"set", "get", "get1", "xget",
                                             "add"};

struct tconn {
    int fd;
    int client;
    uint32_t key_i;
    int step;      /* get: 0 = WAIT outstanding, 1 = GET outstanding */
    int finishing; /* deadline passed, the final round trip is out   */
    int done;
    enum reply_kind expect; /* R_NONE: nothing outstanding                    */
    size_t out_len, out_off;
    size_t in_len;
    uint64_t ops;
    uint8_t out[FRAME_MAX];
    uint8_t in[IN_MAX];
};

struct tthread {
    pthread_t tid;
    struct tconn *conns;
    int nconn;
    enum bench_op op;
    const uint8_t *value;
    size_t vlen;
    pthread_barrier_t *barrier;
    long long deadline_ns;
    long long end_ns;
    uint64_t ops;
    int failed;
};

static void key_of(char *key, enum bench_op op, int client, uint32_t i)
{
    if (op == B_SET)
        snprintf(key, KEY_MAX, "/b/s%d/%u", client, i % SET_KEYS_PER_CLIENT);
    else if (op == B_ADD)
        snprintf(key, KEY_MAX, "/b/cnt");
    else
        snprintf(key, KEY_MAX, "/b/g%d/%u", client, i % GET_KEYS_PER_CLIENT);
}

/* Try to write the pending frame.  Returns 1 when fully written, 0 when the
 * socket is full (EPOLLOUT will tell), -1 on error. */
static int tconn_flush(struct tconn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return 0;
        if (w <= 0)
            return -1;
        c->out_off += (size_t)w;
    }
    return 1;
}

/* Queue the next request of a request/reply op (or the final round trip). */
static void tconn_next_request(struct tthread *t, struct tconn *c, int past)
{
    char key[KEY_MAX];
    if (past && (t->op != B_SET || c->finishing)) {
        c->done = 1;
        c->expect = R_NONE;
        return;
    }
    if (past) { /* set: one GET of the last key proves all were applied */
        key_of(key, B_SET, c->client, c->key_i ? c->key_i - 1 : 0);
        if (c->key_i) {
            c->out_len = frame_key_op(c->out, OP_GET, key);
            c->expect = R_BYTES;
        } else { /* nothing was set: GET of a missing key would block */
            c->out_len = frame_keys1(c->out, OP_CHECK, key);
            c->expect = R_BYTE;
        }
        c->finishing = 1;
    } else if (t->op == B_ADD) {
        key_of(key, B_ADD, c->client, 0);
        c->out_len = frame_add(c->out, key, 1);
        c->expect = R_I64;
    } else if (t->op == B_GET && c->step == 0) {
        key_of(key, B_GET, c->client, c->key_i);
        c->out_len = frame_keys1(c->out, OP_WAIT, key);
        c->expect = R_BYTE;
    } else if (t->op == B_GET || t->op == B_GET1) {
        key_of(key, B_GET, c->client, c->key_i);
        c->out_len = frame_key_op(c->out, OP_GET, key);
        c->expect = R_BYTES;
    } else if (t->op == B_XGET) {
        key_of(key, B_GET, c->client, c->key_i);
        c->out_len = frame_xget(c->out, key, 10000);
        c->expect = R_XBYTES;
    }
    c->out_off = 0;
}

/* A whole reply arrived: count the op, move to the next step. */
static void tconn_on_reply(struct tthread *t, struct tconn *c, int past)
{
    if (c->finishing) {
        tconn_next_request(t, c, 1);
        return;
    }
    if (t->op == B_GET && c->step == 0) {
        c->step = 1; /* WAIT answered; now the GET */
        tconn_next_request(t, c, 0);
        return;
    }
    c->step = 0;
    c->ops++;
    c->key_i++;
    tconn_next_request(t, c, past);
}

/* set: write up to SET_BURST frames, one write() each, as a client would. */
static int tconn_set_burst(struct tthread *t, struct tconn *c, int past)
{
    char key[KEY_MAX];
    for (int k = 0; k < SET_BURST; k++) {
        if (c->out_off < c->out_len) {
            int r = tconn_flush(c);
            if (r <= 0)
                return r;
            if (!c->finishing) {
                c->ops++;
                c->key_i++;
            }
        }
        if (c->finishing || c->done)
            return 1;
        if (past) {
            tconn_next_request(t, c, 1);
            continue;
        }
        key_of(key, B_SET, c->client, c->key_i);
        c->out_len = frame_set(c->out, key, t->value, t->vlen);
        c->out_off = 0;
    }
    return 1;
}

static int tconn_read(struct tthread *t, struct tconn *c, int past)
{
    for (int rounds = 0; rounds < 64; rounds++) {
        ssize_t r = read(c->fd, c->in + c->in_len, IN_MAX - c->in_len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN)
            return 0;
        if (r <= 0)
            return -1;
        c->in_len += (size_t)r;
        size_t off = 0;
        for (int n = 0; n < 1000 && c->expect != R_NONE; n++) {
            size_t need = reply_len(c->expect, c->in + off, c->in_len - off);
            if (need == (size_t)-1)
                return -1;
            if (!need || c->in_len - off < need)
                break;
            off += need;
            tconn_on_reply(t, c, past);
            if (c->expect != R_NONE && tconn_flush(c) < 0)
                return -1;
        }
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
        if (c->done)
            return 0;
    }
    return 0;
}

static void *tput_thread(void *arg)
{
    struct tthread *t = arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    for (int i = 0; i < t->nconn; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &t->conns[i]};
        if (t->op == B_SET)
            ev.events |= EPOLLOUT;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, t->conns[i].fd, &ev) != 0)
            die("epoll_ctl");
    }
    pthread_barrier_wait(t->barrier);
    int left = t->nconn;
    for (int i = 0; i < t->nconn; i++) {
        struct tconn *c = &t->conns[i];
        if (t->op == B_SET) {
            c->out_len = c->out_off = 0;
        } else {
            tconn_next_request(t, c, 0);
            if (tconn_flush(c) < 0)
                t->failed = 1;
        }
    }
    struct epoll_event evs[256];
    long long hard_end = t->deadline_ns + DRAIN_GRACE_NS;
    while (left > 0 && !t->failed) {
        long long now = now_ns();
        if (now > hard_end) {
            fprintf(stderr,
                    "store_bench: %d clients still busy %llds after "
                    "the deadline; giving up\n",
                    left, DRAIN_GRACE_NS / 1000000000LL);
            t->failed = 1;
            break;
        }
        int past = now >= t->deadline_ns;
        int n = epoll_wait(ep, evs, 256, 10);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("epoll_wait");
        for (int i = 0; i < n; i++) {
            struct tconn *c = evs[i].data.ptr;
            if (c->done)
                continue;
            int r = 0;
            if (evs[i].events & (EPOLLERR | EPOLLHUP))
                r = -1;
            if (r == 0 && (evs[i].events & EPOLLIN))
                r = tconn_read(t, c, past);
            if (r == 0 && !c->done && (evs[i].events & EPOLLOUT)) {
                if (t->op == B_SET)
                    r = tconn_set_burst(t, c, past);
                else
                    r = tconn_flush(c) < 0 ? -1 : 0;
            }
            if (r < 0) {
                fprintf(stderr, "store_bench: client %d: connection lost\n",
                        c->client);
                t->failed = 1;
                break;
            }
            if (c->done) {
                left--;
                struct epoll_event ev = {0};
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, &ev);
            } else if (t->op == B_SET && c->finishing) {
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                if (c->out_off < c->out_len)
                    ev.events |= EPOLLOUT;
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
            } else if (t->op != B_SET && c->out_off < c->out_len) {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT,
                                         .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
            }
        }
    }
    t->end_ns = now_ns();
    for (int i = 0; i < t->nconn; i++)
        t->ops += t->conns[i].ops;
    close(ep);
    return NULL;
}

/* Blocking request on a control connection: ADD key delta, returns value. */
static int ctl_add(int fd, const char *key, int64_t delta, int64_t *out)
{
    uint8_t buf[IN_MAX];
    size_t n = frame_add(buf, key, delta), got;
    if (write_all(fd, buf, n) != 0 || read_reply(fd, R_I64, buf, &got) != 0)
        return -1;
    memcpy(out, buf, 8);
    return 0;
}

/* Each client sets its GET_KEYS_PER_CLIENT keys, then one GET round trip. */
static int prefill_gets(int fd, int client, const uint8_t *value, size_t vlen)
{
    uint8_t buf[IN_MAX];
    char key[KEY_MAX];
    size_t got;
    for (uint32_t i = 0; i < GET_KEYS_PER_CLIENT; i++) {
        key_of(key, B_GET, client, i);
        size_t n = frame_set(buf, key, value, vlen);
        if (write_all(fd, buf, n) != 0)
            return -1;
    }
    key_of(key, B_GET, client, GET_KEYS_PER_CLIENT - 1);
    size_t n = frame_key_op(buf, OP_GET, key);
    if (write_all(fd, buf, n) != 0 || read_reply(fd, R_BYTES, buf, &got) != 0)
        return -1;
    return 0;
}

/* One measurement: nclients connections to tg doing op for `seconds`.
 * Returns ops per second, or -1 on failure. */
static double tput_once(const struct target *tg, enum bench_op op, int nclients,
                        int nthreads, double seconds, const uint8_t *value,
                        size_t vlen, double *cpu_us, double *client_us)
{
    double cpu0 = -1, self0 = 0;
    *cpu_us = *client_us = -1;
    struct tconn *conns = calloc((size_t)nclients, sizeof *conns);
    if (!conns)
        die("calloc");
    int ok = 1, ctl = -1;
    int64_t cnt_before = 0, cnt_after = 0;
    for (int i = 0; i < nclients; i++) {
        conns[i].client = i;
        conns[i].fd = connect_blocking(&tg->sa, -1, 10);
        if (conns[i].fd < 0) {
            fprintf(stderr, "store_bench: %s: connect: %s\n", tg->name,
                    strerror(-conns[i].fd));
            for (int j = 0; j < i; j++)
                close_hard(conns[j].fd);
            free(conns);
            return -1;
        }
        if (op == B_GET || op == B_GET1 || op == B_XGET)
            if (prefill_gets(conns[i].fd, i, value, vlen) != 0)
                ok = 0;
        set_nonblocking(conns[i].fd, 1);
    }
    if (op == B_ADD) {
        ctl = connect_blocking(&tg->sa, -1, 10);
        if (ctl < 0 || ctl_add(ctl, "/b/cnt", 0, &cnt_before) != 0)
            ok = 0;
    }
    if (nthreads > nclients)
        nthreads = nclients;
    struct tthread th[64];
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads + 1);
    long long start = 0;
    for (int k = 0; k < nthreads && ok; k++) {
        int lo = (int)((long)nclients * k / nthreads);
        int hi = (int)((long)nclients * (k + 1) / nthreads);
        th[k] = (struct tthread){.conns = conns + lo,
                                 .nconn = hi - lo,
                                 .op = op,
                                 .value = value,
                                 .vlen = vlen,
                                 .barrier = &barrier};
    }
    double rate = -1;
    if (ok) {
        for (int k = 0; k < nthreads; k++)
            if (pthread_create(&th[k].tid, NULL, tput_thread, &th[k]) != 0)
                die("pthread_create");
        /* the threads read their deadline after the barrier */
        cpu0 = cpu_seconds(tg->pid);
        self0 = self_cpu_seconds();
        start = now_ns();
        for (int k = 0; k < nthreads; k++)
            th[k].deadline_ns = start + (long long)(seconds * 1e9);
        pthread_barrier_wait(&barrier);
        uint64_t ops = 0;
        long long end = start;
        for (int k = 0; k < nthreads; k++) {
            pthread_join(th[k].tid, NULL);
            ops += th[k].ops;
            if (th[k].end_ns > end)
                end = th[k].end_ns;
            if (th[k].failed)
                ok = 0;
        }
        double cpu1 = cpu_seconds(tg->pid), self1 = self_cpu_seconds();
        if (ok)
            rate = (double)ops / ((double)(end - start) / 1e9);
        if (ok && ops > 0)
            *client_us = (self1 - self0) * 1e6 / (double)ops;
        if (ok && ops > 0 && cpu0 >= 0 && cpu1 >= 0)
            *cpu_us = (cpu1 - cpu0) * 1e6 / (double)ops;
        if (ok && op == B_ADD) {
            if (ctl_add(ctl, "/b/cnt", 0, &cnt_after) != 0 ||
                (uint64_t)(cnt_after - cnt_before) != ops) {
                fprintf(stderr,
                        "store_bench: %s: counter moved by %" PRId64
                        ", %" PRIu64 " adds were acknowledged\n",
                        tg->name, cnt_after - cnt_before, ops);
                rate = -1;
            }
        }
    }
    pthread_barrier_destroy(&barrier);
    if (ctl >= 0)
        close(ctl);
    for (int i = 0; i < nclients; i++)
        close_hard(conns[i].fd);
    free(conns);
    return rate;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int split_list(char *s, char **items, int max)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ","))
        items[n++] = tok;
    return n;
}

static struct target *find_target(struct target *tg, int ntg, const char *v,
                                  const char **rest)
{
    const char *eq = strchr(v, '=');
    for (int s = 0; s < ntg; s++)
        if ((eq && (size_t)(eq - v) == strlen(tg[s].name) &&
             !strncmp(v, tg[s].name, (size_t)(eq - v))) ||
            (!eq && !strcmp(v, tg[s].name))) {
            *rest = eq ? eq + 1 : NULL;
            return &tg[s];
        }
    fprintf(stderr,
            "store_bench: no --server named in %s (give --server "
            "first)\n",
            v);
    return NULL;
}

/* Print one table (ops/s or server CPU per op) over every op and count. */
static void print_table(int which, int reps, double seconds, int nthreads,
                        int vlen, const struct target *tg, int ntg,
                        const enum bench_op *ops, int no, const int *clients,
                        int nc, double (*res)[MAX_LIST][MAX_SERVERS][100],
                        int (*nres)[MAX_LIST][MAX_SERVERS],
                        double (*byrep)[MAX_LIST][MAX_SERVERS][100])
{
    if (which == 0)
        printf("\nThroughput, ops/s: median of %d repetitions of %.1f s "
               "(min-max); client: %d epoll thread(s), one connection per "
               "client, %d-byte values\n",
               reps, seconds, nthreads, vlen);
    else if (which == 1)
        printf("\nServer CPU time per op, us (user+system, all threads): "
               "median (min-max)\n");
    else
        printf("\nThe load generator's own CPU time per op, us (same "
               "client for every server)\n");
    printf("%-5s %7s", "op", "clients");
    for (int s = 0; s < ntg; s++)
        printf(" %26s", tg[s].name);
    if (ntg >= 2)
        printf("  %s/%s", tg[0].name, tg[1].name);
    if (ntg >= 2 && byrep)
        printf("  paired");
    printf("\n");
    for (int oi = 0; oi < no; oi++) {
        for (int ci = 0; ci < nc; ci++) {
            double med[MAX_SERVERS] = {0};
            printf("%-5s %7d", op_names[ops[oi]], clients[ci]);
            for (int s = 0; s < ntg; s++) {
                int n = nres[ci][oi][s];
                double *v = res[ci][oi][s];
                char cell[64] = "failed";
                if (ops[oi] == B_XGET && !tg[s].native)
                    snprintf(cell, sizeof cell, "n/a");
                else if (n > 0 && which == 0) {
                    med[s] = median_of(v, n);
                    snprintf(cell, sizeof cell, "%.0f (%.0f-%.0f)%s", med[s],
                             v[0], v[n - 1], n < reps ? " *" : "");
                } else if (n > 0) {
                    med[s] = median_of(v, n);
                    snprintf(cell, sizeof cell, "%.1f (%.1f-%.1f)", med[s],
                             v[0], v[n - 1]);
                } else if (which > 0) {
                    snprintf(cell, sizeof cell, "-");
                }
                printf(" %26s", cell);
            }
            if (ntg >= 2 && med[0] > 0 && med[1] > 0)
                printf("  %9.2fx", med[0] / med[1]);
            if (ntg >= 2 && byrep && med[0] > 0 && med[1] > 0) {
                /* the median of the ratios of back-to-back measurements:
                 * less sensitive to load that drifts during the run */
                double ratios[100];
                int nr = 0;
                for (int r = 0; r < reps && r < 100; r++)
                    if (byrep[ci][oi][0][r] > 0 && byrep[ci][oi][1][r] > 0)
                        ratios[nr++] =
                            byrep[ci][oi][0][r] / byrep[ci][oi][1][r];
                if (nr > 0)
                    printf("  %.2fx", median_of(ratios, nr));
            }
            printf("\n");
        }
    }
    for (int oi = 0; oi < no; oi++) {
        for (int ci = 0; ci < nc; ci++) {
            printf("RESULT %s op=%s clients=%d",
                   which == 0   ? "tput"
                   : which == 1 ? "cpu_us"
                                : "client_cpu_us",
                   op_names[ops[oi]], clients[ci]);
            for (int s = 0; s < ntg; s++) {
                int n = nres[ci][oi][s];
                printf(" %s=%.*f", tg[s].name, which == 0 ? 0 : 2,
                       n > 0 ? median_of(res[ci][oi][s], n) : 0.0);
            }
            printf("\n");
        }
    }
}

static int cmd_tput(int argc, char **argv)
{
    struct target tg[MAX_SERVERS];
    int ntg = 0, nthreads = 1, reps = 5, vlen = 64;
    double seconds = 1.0;
    char clients_arg[256] = "1,16,256", ops_arg[256] = "set,get,add";
    memset(tg, 0, sizeof tg);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char *rest;
        struct target *t;
        if (!v) {
            fprintf(stderr, "store_bench tput: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--server") && ntg < MAX_SERVERS) {
            const char *eq = strchr(v, '=');
            if (!eq || eq - v >= (long)sizeof tg[ntg].name) {
                fprintf(stderr, "store_bench: --server NAME=HOST:PORT\n");
                return 2;
            }
            snprintf(tg[ntg].name, sizeof tg[ntg].name, "%.*s", (int)(eq - v),
                     v);
            if (parse_target(eq + 1, &tg[ntg].sa) != 0)
                return 2;
            ntg++;
        } else if (!strcmp(a, "--pid")) {
            if (!(t = find_target(tg, ntg, v, &rest)) || !rest)
                return 2;
            t->pid = atoi(rest);
        } else if (!strcmp(a, "--native")) {
            if (!(t = find_target(tg, ntg, v, &rest)))
                return 2;
            t->native = 1;
        } else if (!strcmp(a, "--clients")) {
            snprintf(clients_arg, sizeof clients_arg, "%s", v);
        } else if (!strcmp(a, "--ops")) {
            snprintf(ops_arg, sizeof ops_arg, "%s", v);
        } else if (!strcmp(a, "--seconds")) {
            seconds = atof(v);
        } else if (!strcmp(a, "--reps")) {
            reps = atoi(v);
        } else if (!strcmp(a, "--threads")) {
            nthreads = atoi(v);
        } else if (!strcmp(a, "--value-size")) {
            vlen = atoi(v);
        } else {
            fprintf(stderr, "store_bench tput: unknown option %s\n", a);
            return 2;
        }
    }
    char *citems[MAX_LIST], *oitems[MAX_LIST];
    int nc = split_list(clients_arg, citems, MAX_LIST);
    int no = split_list(ops_arg, oitems, MAX_LIST);
    int clients[MAX_LIST];
    enum bench_op ops[MAX_LIST];
    int maxc = 1;
    for (int i = 0; i < nc; i++) {
        clients[i] = atoi(citems[i]);
        if (clients[i] < 1 || clients[i] > 10000) {
            fprintf(stderr, "store_bench: clients must be 1..10000\n");
            return 2;
        }
        if (clients[i] > maxc)
            maxc = clients[i];
    }
    for (int i = 0; i < no; i++) {
        int found = -1;
        for (int k = 0; k < B_NOPS; k++)
            if (!strcmp(oitems[i], op_names[k]))
                found = k;
        if (found < 0) {
            fprintf(stderr,
                    "store_bench: unknown op %s (set get get1 xget "
                    "add)\n",
                    oitems[i]);
            return 2;
        }
        ops[i] = (enum bench_op)found;
    }
    if (ntg < 1 || reps < 1 || reps > 100 || seconds <= 0 || seconds > 60 ||
        nthreads < 1 || nthreads > 64 || vlen < 0 || vlen > VALUE_MAX) {
        fprintf(stderr, "store_bench tput: bad arguments\n");
        return 2;
    }
    raise_nofile(maxc * 2L + 256);
    uint8_t value[VALUE_MAX];
    memset(value, 'v', sizeof value);

    static double res[MAX_LIST][MAX_LIST][MAX_SERVERS][100];
    static double cpu[MAX_LIST][MAX_LIST][MAX_SERVERS][100];
    static int nres[MAX_LIST][MAX_LIST][MAX_SERVERS];
    static int ncpu[MAX_LIST][MAX_LIST][MAX_SERVERS];
    static double ccpu[MAX_LIST][MAX_LIST][MAX_SERVERS][100];
    static double byrep[MAX_LIST][MAX_LIST][MAX_SERVERS][100];
    static int nccpu[MAX_LIST][MAX_LIST][MAX_SERVERS];
    for (int rep = 0; rep < reps; rep++) {
        for (int ci = 0; ci < nc; ci++) {
            for (int oi = 0; oi < no; oi++) {
                for (int s = 0; s < ntg; s++) {
                    /* alternate which server goes first, rep by rep */
                    int si = rep % 2 ? ntg - 1 - s : s;
                    if (ops[oi] == B_XGET && !tg[si].native)
                        continue;
                    double cpu_us, client_us;
                    double r = tput_once(&tg[si], ops[oi], clients[ci],
                                         nthreads, seconds, value, (size_t)vlen,
                                         &cpu_us, &client_us);
                    printf("tput server=%s op=%s clients=%d rep=%d "
                           "ops_per_s=%.0f server_cpu_us_per_op=%.2f "
                           "client_cpu_us_per_op=%.2f\n",
                           tg[si].name, op_names[ops[oi]], clients[ci], rep + 1,
                           r, cpu_us, client_us);
                    fflush(stdout);
                    if (r > 0)
                        res[ci][oi][si][nres[ci][oi][si]++] = r;
                    byrep[ci][oi][si][rep] = r;
                    if (cpu_us > 0)
                        cpu[ci][oi][si][ncpu[ci][oi][si]++] = cpu_us;
                    if (client_us > 0)
                        ccpu[ci][oi][si][nccpu[ci][oi][si]++] = client_us;
                }
            }
        }
    }
    print_table(0, reps, seconds, nthreads, vlen, tg, ntg, ops, no, clients, nc,
                res, nres, byrep);
    print_table(1, reps, seconds, nthreads, vlen, tg, ntg, ops, no, clients, nc,
                cpu, ncpu, NULL);
    print_table(2, reps, seconds, nthreads, vlen, tg, ntg, ops, no, clients, nc,
                ccpu, nccpu, NULL);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* storm: N clients, ADD then WAIT on "done" (a barrier)                     */

enum sstate {
    S_QUEUED,
    S_CONNECTING,
    S_ADD_SENT,
    S_WAIT_SENT,
    S_DONE,
    S_FAILED
};

struct sconn {
    int fd;
    uint8_t state;
    uint8_t in_len;
    uint8_t in[8];
    long long not_before_ns; /* retry time for a refused connect */
};

struct sthread {
    pthread_t tid;
    struct sconn *conns;
    int first, nconn; /* global index of conns[0], count               */
    int n_total;      /* N                                             */
    int window;       /* connections in handshake or ADD at once       */
    int sources;
    int idle_only; /* stop after the ADD reply (idle mode)          */
    const struct sockaddr_in *sa;
    const char *cnt_key, *done_key;
    long long start_ns, deadline_ns;
    /* results */
    long long t_connected, t_added, t_done;
    int n_connected, n_added, n_done, n_failed, retries;
    char first_error[128];
};

static void storm_fail(struct sthread *t, struct sconn *c, const char *what,
                       int err)
{
    if (!t->first_error[0])
        snprintf(t->first_error, sizeof t->first_error, "%s: %s", what,
                 strerror(err));
    if (c->fd >= 0)
        close_hard(c->fd);
    c->fd = -1;
    c->state = S_FAILED;
    t->n_failed++;
}

static void *storm_thread(void *arg)
{
    struct sthread *t = arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    /* FIFO of connections to (re)start; each is in it at most once. */
    int *queue = malloc(sizeof(int) * (size_t)t->nconn);
    if (!queue)
        die("malloc");
    int qhead = 0, qlen = 0;
    for (int i = 0; i < t->nconn; i++) {
        t->conns[i].fd = -1;
        t->conns[i].state = S_QUEUED;
        queue[qlen++] = i;
    }
    int in_flight = 0, finished = 0;
    uint8_t add_frame[FRAME_MAX], tail_frame[FRAME_MAX];
    size_t add_len = frame_add(add_frame, t->cnt_key, 1);
    /* the client that completes the count sets done, then waits like all */
    size_t set_len =
        frame_set(tail_frame, t->done_key, (const uint8_t *)"1", 1);
    size_t wait_len = frame_keys1(tail_frame + set_len, OP_WAIT, t->done_key);
    struct epoll_event evs[512];
    while (finished < t->nconn) {
        long long now = now_ns();
        if (now > t->deadline_ns)
            break;
        while (qlen > 0 && in_flight < t->window) {
            int i = queue[qhead];
            struct sconn *c = &t->conns[i];
            if (c->not_before_ns > now)
                break;
            qhead = (qhead + 1) % t->nconn;
            qlen--;
            int gi = t->first + i;
            int fd = open_conn(t->sa, t->sources > 0 ? gi % t->sources : -1, 1);
            if (fd < 0) {
                if (fd == -EMFILE || fd == -ENFILE) {
                    storm_fail(t, c, "socket", -fd);
                    finished++;
                    continue;
                }
                t->retries++; /* EADDRNOTAVAIL etc.: try again shortly */
                c->not_before_ns = now + 50000000LL;
                queue[(qhead + qlen++) % t->nconn] = i;
                break;
            }
            c->fd = fd;
            c->state = S_CONNECTING;
            struct epoll_event ev = {.events = EPOLLOUT,
                                     .data.u32 = (uint32_t)i};
            if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
                die("epoll_ctl");
            in_flight++;
        }
        int n = epoll_wait(ep, evs, 512, 5);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("epoll_wait");
        now = now_ns();
        for (int k = 0; k < n; k++) {
            int i = (int)evs[k].data.u32;
            struct sconn *c = &t->conns[i];
            if (c->state == S_CONNECTING) {
                int err = 0;
                socklen_t el = sizeof err;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
                if (err == 0 && (evs[k].events & (EPOLLERR | EPOLLHUP)))
                    err = ECONNRESET;
                if (err) { /* refused or reset before ADD: safe to retry */
                    close_hard(c->fd);
                    c->fd = -1;
                    in_flight--;
                    t->retries++;
                    c->state = S_QUEUED;
                    c->not_before_ns = now + 20000000LL;
                    queue[(qhead + qlen++) % t->nconn] = i;
                    continue;
                }
                t->n_connected++;
                t->t_connected = now;
                if (write(c->fd, add_frame, add_len) != (ssize_t)add_len) {
                    storm_fail(t, c, "write ADD", errno);
                    in_flight--;
                    finished++;
                    continue;
                }
                struct epoll_event ev = {.events = EPOLLIN,
                                         .data.u32 = (uint32_t)i};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                c->state = S_ADD_SENT;
                c->in_len = 0;
                continue;
            }
            if (c->state != S_ADD_SENT && c->state != S_WAIT_SENT)
                continue;
            size_t want = c->state == S_ADD_SENT ? 8u - c->in_len : 1u;
            ssize_t r = read(c->fd, c->in + c->in_len, want);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (r <= 0) {
                if (c->state == S_ADD_SENT)
                    in_flight--;
                storm_fail(t, c,
                           c->state == S_ADD_SENT ? "read ADD reply"
                                                  : "read WAIT reply",
                           r == 0 ? ECONNRESET : errno);
                finished++;
                continue;
            }
            c->in_len = (uint8_t)(c->in_len + r);
            if (c->state == S_ADD_SENT && c->in_len == 8) {
                int64_t v;
                memcpy(&v, c->in, 8);
                in_flight--;
                t->n_added++;
                t->t_added = now;
                if (t->idle_only) {
                    c->state = S_DONE;
                    t->n_done++;
                    t->t_done = now;
                    finished++;
                    continue;
                }
                const uint8_t *p = tail_frame + set_len;
                size_t len = wait_len;
                if (v == t->n_total) {
                    p = tail_frame;
                    len = set_len + wait_len;
                }
                if (write(c->fd, p, len) != (ssize_t)len) {
                    storm_fail(t, c, "write WAIT", errno);
                    finished++;
                    continue;
                }
                c->state = S_WAIT_SENT;
                c->in_len = 0;
            } else if (c->state == S_WAIT_SENT) {
                c->state = S_DONE;
                t->n_done++;
                t->t_done = now;
                finished++;
            }
        }
    }
    close(ep);
    free(queue);
    return NULL;
}

/* What one client process of a storm reports (times are CLOCK_MONOTONIC
 * ns, shared by every process on the machine). */
struct storm_res {
    long long t_connected, t_added, t_done;
    int connected, added, done, failed, retries;
    char first_error[128];
};

/* Run clients [lo, hi) of the storm in this process with nthreads threads. */
static void storm_part(const struct sockaddr_in *sa, int n, int lo, int hi,
                       int nthreads, int window, int sources,
                       const char *cnt_key, const char *done_key,
                       long long start, long long deadline, int idle_only,
                       struct storm_res *out, struct sconn **keep)
{
    int count = hi - lo;
    memset(out, 0, sizeof *out);
    raise_nofile(count + 1024L);
    struct sconn *conns = calloc((size_t)count, sizeof *conns);
    if (!conns)
        die("calloc");
    if (nthreads > count)
        nthreads = count;
    struct sthread th[64];
    for (int k = 0; k < nthreads; k++) {
        int a = (int)((long)count * k / nthreads);
        int b = (int)((long)count * (k + 1) / nthreads);
        th[k] = (struct sthread){
            .conns = conns + a,
            .first = lo + a,
            .nconn = b - a,
            .n_total = n,
            .window = window / nthreads > 0 ? window / nthreads : 1,
            .sources = sources,
            .sa = sa,
            .idle_only = idle_only,
            .cnt_key = cnt_key,
            .done_key = done_key,
            .start_ns = start,
            .deadline_ns = deadline};
        if (pthread_create(&th[k].tid, NULL, storm_thread, &th[k]) != 0)
            die("pthread_create");
    }
    out->t_connected = out->t_added = out->t_done = start;
    for (int k = 0; k < nthreads; k++) {
        pthread_join(th[k].tid, NULL);
        out->connected += th[k].n_connected;
        out->added += th[k].n_added;
        out->done += th[k].n_done;
        out->failed += th[k].n_failed;
        out->retries += th[k].retries;
        if (th[k].t_connected > out->t_connected)
            out->t_connected = th[k].t_connected;
        if (th[k].t_added > out->t_added)
            out->t_added = th[k].t_added;
        if (th[k].t_done > out->t_done)
            out->t_done = th[k].t_done;
        if (!out->first_error[0] && th[k].first_error[0])
            memcpy(out->first_error, th[k].first_error,
                   sizeof out->first_error);
    }
    /* The sockets stay open: the caller closes them (storm: by exiting,
     * once every process of the storm is done). */
    if (keep)
        *keep = conns;
}

static int cmd_storm(int argc, char **argv)
{
    struct sockaddr_in sa;
    int have_addr = 0, n = 1000, nthreads = 1, sources = 8, window = 4096;
    int procs = 0;
    double timeout = 60;
    char name[32] = "server";
    for (int i = 0; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--addr")) {
            if (parse_target(v, &sa) != 0)
                return 2;
            have_addr = 1;
        } else if (!strcmp(a, "--name")) {
            snprintf(name, sizeof name, "%s", v);
        } else if (!strcmp(a, "--n")) {
            n = atoi(v);
        } else if (!strcmp(a, "--threads")) {
            nthreads = atoi(v);
        } else if (!strcmp(a, "--procs")) {
            procs = atoi(v);
        } else if (!strcmp(a, "--sources")) {
            sources = atoi(v);
        } else if (!strcmp(a, "--window")) {
            window = atoi(v);
        } else if (!strcmp(a, "--timeout")) {
            timeout = atof(v);
        } else {
            fprintf(stderr, "store_bench storm: unknown option %s\n", a);
            return 2;
        }
    }
    if (procs <= 0) /* stay well below a 20000 descriptor limit per process */
        procs = (n + 14999) / 15000;
    if (!have_addr || n < 1 || n > 1000000 || nthreads < 1 || nthreads > 64 ||
        procs < 1 || procs > 64 || procs > n || sources < 0 || sources > 250 ||
        window < 1 || timeout <= 0 || timeout > 3600) {
        fprintf(stderr, "store_bench storm: bad arguments\n");
        return 2;
    }
    char cnt_key[KEY_MAX], done_key[KEY_MAX];
    snprintf(cnt_key, sizeof cnt_key, "/storm/%d-%d/cnt", (int)getpid(), n);
    snprintf(done_key, sizeof done_key, "/storm/%d-%d/done", (int)getpid(), n);
    int pfd[2], rel[2];
    if (pipe(pfd) != 0 || pipe(rel) != 0)
        die("pipe");
    pid_t kids[64];
    long long start = now_ns();
    long long deadline = start + (long long)(timeout * 1e9);
    int pwindow = window / procs > 0 ? window / procs : 1;
    for (int p = 0; p < procs; p++) {
        int lo = (int)((long)n * p / procs),
            hi = (int)((long)n * (p + 1) / procs);
        kids[p] = fork();
        if (kids[p] < 0)
            die("fork");
        if (kids[p] == 0) {
            struct storm_res r;
            close(pfd[0]);
            close(rel[1]);
            storm_part(&sa, n, lo, hi, nthreads, pwindow, sources, cnt_key,
                       done_key, start, deadline, 0, &r, NULL);
            if (write(pfd[1], &r, sizeof r) != (ssize_t)sizeof r)
                _exit(3);
            /* hold the connections until the parent has every report:
             * it closes the release pipe then (bounded wait) */
            struct pollfd pf = {.fd = rel[0], .events = POLLIN};
            poll(&pf, 1, (int)(timeout * 1000) + 10000);
            _exit(0);
        }
    }
    close(pfd[1]);
    close(rel[0]);
    struct storm_res tot;
    memset(&tot, 0, sizeof tot);
    tot.t_connected = tot.t_added = tot.t_done = start;
    for (int p = 0; p < procs; p++) {
        struct storm_res r;
        ssize_t got = read(pfd[0], &r, sizeof r);
        if (got != (ssize_t)sizeof r) {
            fprintf(stderr, "store_bench storm: a client process died\n");
            continue;
        }
        tot.connected += r.connected;
        tot.added += r.added;
        tot.done += r.done;
        tot.failed += r.failed;
        tot.retries += r.retries;
        if (r.t_connected > tot.t_connected)
            tot.t_connected = r.t_connected;
        if (r.t_added > tot.t_added)
            tot.t_added = r.t_added;
        if (r.t_done > tot.t_done)
            tot.t_done = r.t_done;
        if (!tot.first_error[0] && r.first_error[0])
            memcpy(tot.first_error, r.first_error, sizeof tot.first_error);
    }
    long long end = now_ns();
    close(rel[1]); /* release the client processes */
    for (int p = 0; p < procs; p++)
        waitpid(kids[p], NULL, 0);
    close(pfd[0]);
    const char *result = tot.done == n     ? "ok"
                         : end >= deadline ? "timeout"
                                           : "failed";
    printf("RESULT storm server=%s n=%d result=%s done=%d added=%d "
           "connected=%d failed=%d retries=%d t_connected=%.3f t_added=%.3f "
           "t_done=%.3f elapsed=%.3f procs=%d",
           name, n, result, tot.done, tot.added, tot.connected, tot.failed,
           tot.retries, (double)(tot.t_connected - start) / 1e9,
           (double)(tot.t_added - start) / 1e9,
           (double)(tot.t_done - start) / 1e9, (double)(end - start) / 1e9,
           procs);
    if (tot.first_error[0])
        printf(" first_error=\"%s\"", tot.first_error);
    printf("\n");
    fflush(stdout);
    return tot.done == n ? 0 : 1;
}

/* ------------------------------------------------------------------------ */
/* idle: memory per idle connection                                          */

static long rss_kib(int pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long kib = -1;
    for (int i = 0; i < 200 && fgets(line, sizeof line, f); i++)
        if (!strncmp(line, "VmRSS:", 6))
            kib = atol(line + 6);
    fclose(f);
    return kib;
}

static int cmd_idle(int argc, char **argv)
{
    struct sockaddr_in sa;
    int have_addr = 0, n = 10000, pid = 0, sources = 8, partial = 0;
    char name[32] = "server";
    for (int i = 0; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--addr")) {
            if (parse_target(v, &sa) != 0)
                return 2;
            have_addr = 1;
        } else if (!strcmp(a, "--name")) {
            snprintf(name, sizeof name, "%s", v);
        } else if (!strcmp(a, "--n")) {
            n = atoi(v);
        } else if (!strcmp(a, "--pid")) {
            pid = atoi(v);
        } else if (!strcmp(a, "--partial")) {
            partial = atoi(v);
        } else if (!strcmp(a, "--sources")) {
            sources = atoi(v);
        } else {
            fprintf(stderr, "store_bench idle: unknown option %s\n", a);
            return 2;
        }
    }
    if (!have_addr || pid <= 0 || n < 1 || n > 200000 || sources < 0) {
        fprintf(stderr, "store_bench idle: bad arguments\n");
        return 2;
    }
    /* Every connection does one ADD round trip (as a 1.13 client's first
     * request), so the server has surely accepted it and set up whatever
     * it keeps per connection; then it stays idle.  The connections are
     * opened concurrently (the storm machinery without the barrier). */
    long before = rss_kib(pid);
    long long start = now_ns();
    struct storm_res r;
    struct sconn *conns = NULL;
    storm_part(&sa, n, 0, n, 1, 1024, sources, "/idle/cnt", "/idle/done", start,
               start + 120LL * 1000000000LL, 1, &r, &conns);
    int opened = r.done;
    double connect_s = (double)(now_ns() - start) / 1e9;
    /* --partial B: then each connection sends the first B bytes of a SET
     * frame and stops, as a slow or stalled client would. */
    uint8_t frame[FRAME_MAX];
    size_t flen = frame_set(frame, "/idle/partial", (const uint8_t *)"x", 1);
    if (partial > 0 && (size_t)partial < flen)
        for (int i = 0; i < n; i++)
            if (conns[i].fd >= 0 &&
                write(conns[i].fd, frame, (size_t)partial) < 0)
                opened--;
    usleep(1000000); /* let the server settle */
    long with = rss_kib(pid);
    for (int i = 0; i < n; i++)
        if (conns[i].fd >= 0)
            close_hard(conns[i].fd);
    free(conns);
    usleep(1000000);
    long after = rss_kib(pid);
    double per = opened > 0 ? (double)(with - before) * 1024.0 / opened : 0;
    printf("RESULT idle server=%s n=%d partial=%d opened=%d rss_before_kib=%ld "
           "rss_with_kib=%ld rss_after_close_kib=%ld bytes_per_conn=%.0f "
           "connect_s=%.2f\n",
           name, n, partial, opened, before, with, after, per, connect_s);
    return opened == n ? 0 : 1;
}

static void usage(void)
{
    fprintf(
        stderr,
        "usage:\n"
        "  store_bench tput --server NAME=HOST:PORT [--server ...]\n"
        "        [--pid NAME=SERVER_PID] [--native NAME]\n"
        "        [--clients 1,16,256] [--ops set,get,add] [--seconds 1]\n"
        "        [--reps 5] [--threads 1] [--value-size 64]\n"
        "     --pid: report the server's CPU time per op; --native: the\n"
        "     server speaks elrun's own ops (xget is run only there)\n"
        "     ops: set (one-way + final GET), get (WAIT+GET, as the\n"
        "     PyTorch client), get1 (GET only), xget (elrun X_GET), add\n"
        "  store_bench storm --addr HOST:PORT --n N [--name S] [--threads 2]\n"
        "        [--sources 8] [--window 4096] [--timeout 60]\n"
        "  store_bench idle --addr HOST:PORT --pid SERVER_PID [--n 10000]\n"
        "        [--name S] [--sources 8] [--partial BYTES]\n"
        "     --partial: each idle connection also holds the first BYTES\n"
        "     bytes of a SET frame (a stalled client)\n"
        "Targets must be in 127.0.0.0/8; client sockets of storm and idle\n"
        "are bound to 127.0.0.2.. (one per source).\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage();
        return 2;
    }
    if (!strcmp(argv[1], "tput"))
        return cmd_tput(argc - 2, argv + 2);
    if (!strcmp(argv[1], "storm"))
        return cmd_storm(argc - 2, argv + 2);
    if (!strcmp(argv[1], "idle"))
        return cmd_idle(argc - 2, argv + 2);
    usage();
    return 2;
}
