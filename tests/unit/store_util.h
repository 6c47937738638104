/* store_util.h -- what the store's unit tests share: a server on a free
 * port of 127.0.0.1, C clients, and raw sockets for what a broken or hostile
 * client sends.  Each helper ends the test on failure (CHECK). */
#ifndef ELRUN_TEST_STORE_UTIL_H
#define ELRUN_TEST_STORE_UTIL_H

#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/store.h"
#include "test.h"

static inline struct el_store_server *start(const struct el_store_limits *lim)
{
    struct el_store_server_opts o = {.host = "127.0.0.1", .port = 0};
    if (lim)
        o.limits = *lim;
    struct el_store_server *srv = NULL;
    CHECK_OK(el_store_server_start(&srv, &o));
    return srv;
}

static inline struct el_store *client(struct el_store_server *srv)
{
    struct el_store *s = NULL;
    CHECK_OK(el_store_connect(&s, "127.0.0.1", el_store_server_port(srv), 5000,
                              5000));
    return s;
}

static inline void check_value(struct el_store *s, const char *key,
                               const char *want)
{
    void *v = NULL;
    size_t n = 0;
    CHECK_OK(el_store_get(s, key, &v, &n, 1000));
    CHECK_MEM(v, n, want, strlen(want));
    free(v);
}

static inline int raw_connect(struct el_store_server *srv)
{
    int fd = el_tcp_connect("127.0.0.1", el_store_server_port(srv), 5000);
    CHECK(fd >= 0);
    return fd;
}

static inline void raw_send(int fd, const void *p, size_t n)
{
    CHECK(send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n);
}

/* 1 if the server closed fd within timeout_ms. */
static inline int closed_by_server(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char b[64];
    while (poll(&p, 1, timeout_ms) == 1) {
        ssize_t n = recv(fd, b, sizeof b, 0);
        if (n <= 0)
            return 1;
    }
    return 0;
}

#endif
