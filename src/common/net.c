/* net.c -- address parsing and connecting with a deadline (see net.h). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "elrun/err.h"
#include "elrun/net.h"

long long el_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

long long el_now_ms(void)
{
    return el_now_ns() / 1000000LL;
}

static int valid_host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
           c == ':' || c == '%';
}

int el_addr_parse(const char *text, int default_port, char host[EL_HOST_MAX],
                  int *port)
{
    const char *h = text, *colon = NULL;
    size_t hlen;
    if (!text || !*text)
        return EL_EUSAGE;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close)
            return EL_EUSAGE;
        h = text + 1;
        hlen = (size_t)(close - h);
        if (close[1] == ':')
            colon = close + 1;
        else if (close[1] != '\0')
            return EL_EUSAGE;
    } else {
        colon = strrchr(text, ':');
        /* More than one colon without brackets: a bare IPv6 literal. */
        if (colon && strchr(text, ':') != colon)
            colon = NULL;
        hlen = colon ? (size_t)(colon - text) : strlen(text);
    }
    if (hlen == 0 || hlen >= EL_HOST_MAX)
        return EL_EUSAGE;
    for (size_t i = 0; i < hlen; i++)
        if (!valid_host_char(h[i]))
            return EL_EUSAGE;
    if (colon) {
        const char *p = colon + 1;
        char *end;
        if (!*p || strlen(p) > 5)
            return EL_EUSAGE;
        for (const char *q = p; *q; q++)
            if (*q < '0' || *q > '9')
                return EL_EUSAGE;
        long v = strtol(p, &end, 10);
        if (v < 0 || v > 65535)
            return EL_EUSAGE;
        *port = (int)v;
    } else {
        if (default_port < 0)
            return EL_EUSAGE;
        *port = default_port;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    return 0;
}

static int connect_once(const struct addrinfo *ai, int timeout_ms)
{
    int fd =
        socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc < 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        do
            rc = poll(&p, 1, timeout_ms);
        while (rc < 0 && errno == EINTR);
        if (rc == 0) {
            close(fd);
            return -ETIMEDOUT;
        }
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err ? -1 : 0;
        errno = err;
    }
    if (rc < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

int el_tcp_connect(const char *host, int port, int timeout_ms)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(host, service, &hints, &res) != 0 || !res)
        return EL_EUSAGE;
    long long deadline = timeout_ms < 0 ? -1 : el_now_ms() + timeout_ms;
    int last = -ECONNREFUSED, backoff_ms = 1;
    for (;;) {
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            long long left = deadline < 0 ? 10000 : deadline - el_now_ms();
            if (left <= 0)
                left = 1;
            int fd = connect_once(ai, (int)(left > 10000 ? 10000 : left));
            if (fd >= 0) {
                freeaddrinfo(res);
                return fd;
            }
            last = fd;
        }
        if (deadline >= 0 && el_now_ms() >= deadline)
            break;
        /* Refused or reset: the server may not be up yet, or its backlog
         * overflowed.  Back off exponentially, capped at 100 ms. */
        struct timespec ts = {0, (long)backoff_ms * 1000000L};
        nanosleep(&ts, NULL);
        if (backoff_ms < 100)
            backoff_ms *= 2;
    }
    freeaddrinfo(res);
    return last;
}
