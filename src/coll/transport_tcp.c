/* transport_tcp.c -- the collectives' transport over TCP (see transport.h):
 * a full mesh of non-blocking connections, set up through the store.
 *
 * Setup: each rank listens on an ephemeral port, publishes "host:port" under
 * "<prefix>/addr/<rank>", reads every peer's address, dials the ranks below
 * it and accepts the ranks above it.  A dialer first sends a 12-byte hello
 * (magic, rank, world) so the acceptor knows who called; connections with a
 * wrong hello are dropped.  A full mesh costs world-1 sockets per rank and
 * lets every algorithm talk to any peer and every wait watch every peer.
 * With a stop flag (opts.stop) every wait of the setup is cut into slices
 * (EL__STOP_SLICE_MS; connects CONNECT_SLICE_MS, which retry) and the flag
 * is read between them.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "coll/coll_int.h"
#include "coll/transport.h"
#include "common/errfmt.h"
#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/store.h"

#define HELLO_MAGIC 0x454c434fu /* "ELCO" */
#define ADDR_MAX (EL_HOST_MAX + 16)
/* A connect given less than this could time out on a live but busy peer. */
#define CONNECT_SLICE_MS 100

struct el_tp {
    int rank, world;
    int *fd;                     /* [world], -1 for self                     */
    char (*addr)[ADDR_MAX];      /* [world]                                  */
    struct pollfd *pfd;          /* [world] scratch for el__tp_wait          */
    volatile sig_atomic_t *stop; /* opts.stop, read during setup       */
};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    el__verrf(err, errlen, 0, fmt, ap);
    va_end(ap);
}

static int left_ms(long long deadline)
{
    long long l = deadline - el_now_ms();
    return l < 0 ? 0 : (l > 1000000000 ? 1000000000 : (int)l);
}

/* Write or read exactly len bytes on a blocking-or-not fd before deadline;
 * -ECANCELED once *stop is set. */
static int io_full(int fd, void *buf, size_t len, int out, long long deadline,
                   volatile sig_atomic_t *stop)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return EL_EPEERLOST;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        struct pollfd pf = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        int ms = left_ms(deadline);
        if (ms == 0)
            return -ETIMEDOUT;
        if (el__stop_asked(stop))
            return -ECANCELED;
        if (poll(&pf, 1, el__stop_slice(stop, ms)) < 0 && errno != EINTR)
            return -errno;
    }
    return 0;
}

static int tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    return 0;
}

static int listen_on(const char *host, char addr[ADDR_MAX], char *err,
                     size_t errlen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, "0", &hints, &res) != 0 || !res) {
        set_err(err, errlen, "cannot resolve listen host '%s'", host);
        return EL_EUSAGE;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) < 0 ||
        listen(fd, 1024) < 0) {
        int e = -errno;
        set_err(err, errlen, "listen on %s: %s", host, strerror(-e));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return e;
    }
    int v6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    int port = v6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                  : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    snprintf(addr, ADDR_MAX, v6 ? "[%s]:%d" : "%s:%d", host, port);
    return fd;
}

static int dial(struct el_tp *tp, int peer, long long deadline, char *err,
                size_t errlen)
{
    char host[EL_HOST_MAX];
    int port;
    if (el_addr_parse(tp->addr[peer], -1, host, &port) != 0) {
        set_err(err, errlen, "rank %d published a bad address '%s'", peer,
                tp->addr[peer]);
        return EL_EPROTO;
    }
    int fd;
    for (;;) {
        int ms = left_ms(deadline);
        int slice = tp->stop && ms > CONNECT_SLICE_MS ? CONNECT_SLICE_MS : ms;
        if (el__stop_asked(tp->stop)) {
            set_err(err, errlen, "connect to rank %d (%s): stopped (opts.stop)",
                    peer, tp->addr[peer]);
            return -ECANCELED;
        }
        fd = el_tcp_connect(host, port, slice);
        if (fd >= 0 || slice == ms || (fd != -ETIMEDOUT && fd != -ECONNREFUSED))
            break;
    }
    if (fd < 0) {
        set_err(err, errlen, "connect to rank %d (%s): %s", peer,
                tp->addr[peer], el_strerror(fd));
        return fd;
    }
    uint32_t hello[3] = {htonl(HELLO_MAGIC), htonl((uint32_t)tp->rank),
                         htonl((uint32_t)tp->world)};
    int rc = tune(fd);
    if (rc == 0)
        rc = io_full(fd, hello, sizeof hello, 1, deadline, tp->stop);
    if (rc < 0) {
        set_err(err, errlen, "hello to rank %d (%s): %s", peer, tp->addr[peer],
                el_strerror(rc));
        close(fd);
        return rc;
    }
    tp->fd[peer] = fd;
    return 0;
}

/* Accept until every rank above ours has called in. */
static int accept_all(struct el_tp *tp, int lfd, long long deadline, char *err,
                      size_t errlen)
{
    int missing = tp->world - 1 - tp->rank;
    while (missing > 0) {
        struct pollfd pf = {.fd = lfd, .events = POLLIN};
        if (el__stop_asked(tp->stop)) {
            set_err(err, errlen,
                    "stopped (opts.stop) while waiting for %d rank(s) to "
                    "connect",
                    missing);
            return -ECANCELED;
        }
        int ms = left_ms(deadline);
        int n = ms > 0 ? poll(&pf, 1, el__stop_slice(tp->stop, ms)) : 0;
        if ((n < 0 && errno == EINTR) || (n == 0 && left_ms(deadline) > 0))
            continue;
        if (n <= 0) {
            int first = -1;
            for (int j = tp->world - 1; j > tp->rank; j--)
                if (tp->fd[j] < 0)
                    first = j;
            set_err(err, errlen,
                    "timed out waiting for rank %d (%s) to connect "
                    "(%d rank(s) missing)",
                    first, tp->addr[first], missing);
            return -ETIMEDOUT;
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        uint32_t hello[3];
        /* A stray or slow caller must not eat the whole budget. */
        long long hd = el_now_ms() + 5000;
        if (tune(fd) != 0 ||
            io_full(fd, hello, sizeof hello, 0, hd < deadline ? hd : deadline,
                    tp->stop) != 0 ||
            ntohl(hello[0]) != HELLO_MAGIC ||
            ntohl(hello[2]) != (uint32_t)tp->world) {
            close(fd);
            continue;
        }
        uint32_t peer = ntohl(hello[1]);
        if (peer <= (uint32_t)tp->rank || peer >= (uint32_t)tp->world ||
            tp->fd[peer] >= 0) {
            close(fd);
            continue;
        }
        tp->fd[peer] = fd;
        missing--;
    }
    return 0;
}

int el__tp_open(struct el_tp **out, struct el_store *store, const char *prefix,
                int rank, int world, const char *host, int timeout_ms,
                volatile sig_atomic_t *stop, char *err, size_t errlen)
{
    long long deadline = el_now_ms() + timeout_ms;
    int rc = -ENOMEM, lfd = -1;
    char **keys = NULL;
    void **vals = NULL;
    size_t *lens = NULL;
    struct el_tp *tp = calloc(1, sizeof *tp);
    set_err(err, errlen, "out of memory");
    if (!tp)
        return -ENOMEM;
    tp->rank = rank;
    tp->world = world;
    tp->stop = stop;
    tp->fd = malloc(sizeof *tp->fd * (size_t)world);
    tp->addr = calloc((size_t)world, sizeof *tp->addr);
    tp->pfd = calloc((size_t)world, sizeof *tp->pfd);
    keys = calloc((size_t)world, sizeof *keys);
    vals = calloc((size_t)world, sizeof *vals);
    lens = calloc((size_t)world, sizeof *lens);
    if (tp->fd)
        for (int i = 0; i < world; i++)
            tp->fd[i] = -1;
    if (!tp->fd || !tp->addr || !tp->pfd || !keys || !vals || !lens)
        goto out;
    for (int i = 0; i < world; i++) {
        size_t kl = strlen(prefix) + 32;
        keys[i] = malloc(kl);
        if (!keys[i])
            goto out;
        snprintf(keys[i], kl, "%s/addr/%d", prefix, i);
    }

    lfd = listen_on(host, tp->addr[rank], err, errlen);
    if (lfd < 0) {
        rc = lfd;
        goto out;
    }
    rc =
        el_store_set(store, keys[rank], tp->addr[rank], strlen(tp->addr[rank]));
    /* Wait first, then read: the read then never parks in the server.  The
     * wait in slices when there is a stop flag to look at. */
    while (rc == 0) {
        if (el__stop_asked(stop)) {
            rc = -ECANCELED;
            break;
        }
        int ms = left_ms(deadline), slice = el__stop_slice(stop, ms);
        rc = el_store_wait(store, (const char *const *)keys, (size_t)world,
                           slice);
        if (rc != -ETIMEDOUT || slice == ms)
            break;
        rc = 0;
    }
    if (rc == 0)
        rc = el_store_multi_get(store, (const char *const *)keys, (size_t)world,
                                vals, lens, left_ms(deadline));
    if (rc != 0) {
        if (rc == -ECANCELED) {
            set_err(err, errlen,
                    "stopped (opts.stop) while waiting for the ranks to "
                    "publish their addresses");
        } else if (rc == -ETIMEDOUT) {
            /* Name a rank that never published. */
            int first = -1;
            for (int i = 0; i < world && first < 0; i++) {
                int all = 0;
                const char *k1[1] = {keys[i]};
                if (el_store_check(store, k1, 1, &all) == 0 && !all)
                    first = i;
            }
            set_err(err, errlen,
                    "timed out after %d ms waiting for rank %d to publish "
                    "its address (%s)",
                    timeout_ms, first, keys[first < 0 ? 0 : first]);
        } else {
            set_err(err, errlen, "store: %s", el_store_errmsg(store));
        }
        goto out;
    }
    for (int i = 0; i < world; i++) {
        if (lens[i] == 0 || lens[i] >= ADDR_MAX) {
            set_err(err, errlen, "rank %d published a bad address", i);
            rc = EL_EPROTO;
            goto out;
        }
        memcpy(tp->addr[i], vals[i], lens[i]);
        tp->addr[i][lens[i]] = '\0';
    }
    for (int j = 0; j < rank; j++) {
        rc = dial(tp, j, deadline, err, errlen);
        if (rc != 0)
            goto out;
    }
    rc = accept_all(tp, lfd, deadline, err, errlen);
out:
    if (lfd >= 0)
        close(lfd);
    for (int i = 0; keys && i < world; i++) {
        free(keys[i]);
        if (vals)
            free(vals[i]);
    }
    free(keys);
    free(vals);
    free(lens);
    if (rc != 0) {
        el__tp_close(tp);
        return rc;
    }
    err[0] = '\0';
    *out = tp;
    return 0;
}

void el__tp_close(struct el_tp *tp)
{
    if (!tp)
        return;
    for (int i = 0; tp->fd && i < tp->world; i++)
        if (tp->fd[i] >= 0)
            close(tp->fd[i]);
    free(tp->fd);
    free(tp->addr);
    free(tp->pfd);
    free(tp);
}

const char *el__tp_addr(const struct el_tp *tp, int peer)
{
    if (peer < 0 || peer >= tp->world)
        return "?";
    return tp->addr[peer];
}

long el__tp_send(struct el_tp *tp, int peer, const void *buf, size_t len)
{
    for (;;) {
        ssize_t n = send(tp->fd[peer], buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0)
            return (long)n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        return -errno;
    }
}

long el__tp_recv(struct el_tp *tp, int peer, void *buf, size_t len)
{
    for (;;) {
        ssize_t n = recv(tp->fd[peer], buf, len, MSG_DONTWAIT);
        if (n > 0)
            return (long)n;
        if (n == 0)
            return len == 0 ? 0 : EL_EPEERLOST;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        return -errno;
    }
}

int el__tp_wait(struct el_tp *tp, int send_peer, int recv_peer, int timeout_ms,
                int *bad)
{
    int n = 0;
    for (int i = 0; i < tp->world; i++) {
        if (tp->fd[i] < 0)
            continue;
        short ev = 0;
        if (i == send_peer)
            ev |= POLLOUT;
        if (i == recv_peer)
            ev |= POLLIN;
        tp->pfd[n].fd = tp->fd[i];
        tp->pfd[n].events = ev;
        tp->pfd[n].revents = 0;
        n++;
    }
    /* A signal ends the wait (nothing ready): the caller may have been
     * asked to stop. */
    int rc = poll(tp->pfd, (nfds_t)n, timeout_ms);
    if (rc < 0 && errno == EINTR)
        return 0;
    if (rc < 0)
        return -errno;
    if (rc == 0)
        return 0;
    int k = 0;
    for (int i = 0; i < tp->world; i++) {
        if (tp->fd[i] < 0)
            continue;
        struct pollfd *p = &tp->pfd[k++];
        /* On a connection in use, let send/recv report the error with
         * its errno (and read what is left before an EOF). */
        if (i == send_peer || i == recv_peer)
            continue;
        if (p->revents & (POLLERR | POLLHUP | POLLNVAL)) {
            int e = 0;
            socklen_t el = sizeof e;
            getsockopt(tp->fd[i], SOL_SOCKET, SO_ERROR, &e, &el);
            *bad = i;
            return e ? -e : EL_EPEERLOST;
        }
    }
    return 1;
}

int el__tp_check(struct el_tp *tp, int *bad)
{
    int n = 0;
    for (int i = 0; i < tp->world; i++) {
        if (tp->fd[i] < 0)
            continue;
        tp->pfd[n].fd = tp->fd[i];
        tp->pfd[n].events = POLLIN | POLLRDHUP;
        tp->pfd[n].revents = 0;
        n++;
    }
    if (poll(tp->pfd, (nfds_t)n, 0) <= 0)
        return 0;
    int k = 0;
    for (int i = 0; i < tp->world; i++) {
        if (tp->fd[i] < 0)
            continue;
        struct pollfd *p = &tp->pfd[k++];
        if (!p->revents)
            continue;
        int e = 0;
        socklen_t el = sizeof e;
        if (p->revents & (POLLERR | POLLHUP | POLLNVAL)) {
            getsockopt(tp->fd[i], SOL_SOCKET, SO_ERROR, &e, &el);
            *bad = i;
            return e ? -e : EL_EPEERLOST;
        }
        char b;
        ssize_t r = recv(tp->fd[i], &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
            *bad = i;
            return r == 0 ? EL_EPEERLOST : -errno;
        }
    }
    return 0;
}

int el__tp_wait_close(struct el_tp *tp, int timeout_ms, int *bad)
{
    int n = 0;
    for (int i = 0; i < tp->world; i++) {
        if (tp->fd[i] < 0)
            continue;
        tp->pfd[n].fd = tp->fd[i];
        tp->pfd[n].events = POLLRDHUP;
        tp->pfd[n].revents = 0;
        n++;
    }
    /* A signal ends the wait early (0): the caller may have been asked to
     * stop. */
    int rc = poll(tp->pfd, (nfds_t)n, timeout_ms);
    if (rc <= 0)
        return 0;
    int k = 0;
    for (int i = 0; i < tp->world; i++) {
        if (tp->fd[i] < 0)
            continue;
        if (tp->pfd[k++].revents) {
            *bad = i;
            return 1;
        }
    }
    return 0;
}

void el__tp_shutdown(struct el_tp *tp)
{
    for (int i = 0; i < tp->world; i++)
        if (tp->fd[i] >= 0)
            shutdown(tp->fd[i], SHUT_RDWR);
}
