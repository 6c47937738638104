/* test_http.c -- the HTTP server (src/http) and the /metrics endpoint
 * (el_metrics_serve) over real sockets: a scrape answers 200 with the
 * registry in the text format; a request that does not parse gets 400 and
 * the server goes on serving others; an oversized request gets 431; a
 * slow client is dropped after the timeout; keep-alive and pipelined
 * requests are answered in order; other paths 404, other methods 405.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "elrun/http.h"
#include "elrun/metrics.h"
#include "elrun/net.h"
#include "test.h"

/* Read fd until the peer closes, cap bytes or timeout_ms of silence; close
 * it; return what was read (malloc'd, NUL-terminated). */
static char *read_all(int fd, size_t cap, int timeout_ms, size_t *lenp)
{
    size_t len = 0;
    char *out = malloc(cap + 1);
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) <= 0)
            break;
        ssize_t n = read(fd, out + len, cap - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    out[len] = 0;
    close(fd);
    if (lenp)
        *lenp = len;
    return out;
}

/* Send req on a new connection and read the answer (read_all). */
static char *exchange(int port, const char *req, size_t reqlen, int timeout_ms)
{
    int fd = el_tcp_connect("127.0.0.1", port, 5000);
    CHECK(fd >= 0);
    if (reqlen && send(fd, req, reqlen, MSG_NOSIGNAL) < 0)
        CHECK(errno == EPIPE || errno == ECONNRESET);
    return read_all(fd, 1 << 16, timeout_ms, NULL);
}

static int count(const char *s, const char *sub)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, sub)); p++)
        n++;
    return n;
}

static struct el_metrics_server *serve(struct el_metrics **reg)
{
    struct el_metric *g;
    CHECK_EQ(el_metrics_new(reg, (const char *const[]){"run_id", "t", NULL}),
             0);
    CHECK_EQ(el_metrics_register(*reg, &g, EL_METRIC_GAUGE, "elrun_round",
                                 "The round.", NULL, NULL, 0),
             0);
    el_metric_set(g, NULL, 3);
    struct el_metrics_server *s;
    char err[256];
    CHECK_EQ(el_metrics_serve(&s, *reg, "127.0.0.1", 0, err, sizeof err), 0);
    CHECK(el_metrics_server_port(s) > 0);
    return s;
}

TEST(http_metrics_scrape_and_bad_requests)
{
    struct el_metrics *reg;
    struct el_metrics_server *s = serve(&reg);
    int port = el_metrics_server_port(s);
    const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: "
                       "close\r\n\r\n";
    char *r = exchange(port, get, sizeof get - 1, 5000);
    CHECK(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
    CHECK(strstr(r, "Content-Type: text/plain; version=0.0.4; charset=utf-8"));
    CHECK(strstr(r, "\r\n\r\n# HELP elrun_round The round.\n"));
    CHECK(strstr(r, "elrun_round{run_id=\"t\"} 3\n"));
    free(r);

    /* Garbage: 400 and closed; the next client is served as before. */
    r = exchange(port, "GARBAGE\r\n\r\n", 11, 5000);
    CHECK(strncmp(r, "HTTP/1.1 400 Bad Request\r\n", 26) == 0);
    CHECK(strstr(r, "Connection: close"));
    free(r);
    r = exchange(port, get, sizeof get - 1, 5000);
    CHECK(strstr(r, "elrun_round{run_id=\"t\"} 3\n"));
    free(r);

    /* Bigger than the 8 KiB limit: 431 as soon as the limit is passed,
     * not when (if ever) the request ends. */
    size_t big = 20000;
    char *req = malloc(big + 64);
    int hl = sprintf(req, "GET /metrics HTTP/1.1\r\nX: ");
    memset(req + hl, 'a', big);
    r = exchange(port, req, (size_t)hl + big, 5000);
    CHECK(strncmp(r, "HTTP/1.1 431 ", 13) == 0);
    free(r);
    free(req);

    /* A client that half-closes after its request still gets the answer. */
    int fd = el_tcp_connect("127.0.0.1", port, 5000);
    CHECK(fd >= 0);
    CHECK(send(fd, get, sizeof get - 1, 0) == (ssize_t)(sizeof get - 1));
    shutdown(fd, SHUT_WR);
    char buf[256];
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    CHECK_EQ(poll(&pf, 1, 5000), 1);
    CHECK(read(fd, buf, 17) == 17);
    CHECK(strncmp(buf, "HTTP/1.1 200 OK\r\n", 17) == 0);
    close(fd);

    r = exchange(port, "GET /other HTTP/1.0\r\n\r\n", 23, 5000);
    CHECK(strncmp(r, "HTTP/1.1 404 Not Found\r\n", 24) == 0);
    free(r);
    r = exchange(port, "DELETE /metrics HTTP/1.0\r\n\r\n", 28, 5000);
    CHECK(strncmp(r, "HTTP/1.1 405 ", 13) == 0);
    free(r);
    r = exchange(port, "HEAD /metrics HTTP/1.0\r\n\r\n", 26, 5000);
    CHECK(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
    CHECK(!strstr(r, "elrun_round"));
    free(r);

    /* Keep-alive, pipelined: three answers in order on one connection. */
    const char three[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
                         "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
                         "GET /metrics HTTP/1.1\r\nHost: x\r\n"
                         "Connection: close\r\n\r\n";
    r = exchange(port, three, sizeof three - 1, 5000);
    CHECK_EQ(count(r, "HTTP/1.1 200 OK"), 2);
    CHECK_EQ(count(r, "HTTP/1.1 404"), 1);
    CHECK(strstr(r, "404") < strrchr(r, '#'));
    free(r);
    el_metrics_server_close(s);
    el_metrics_free(reg);
}

struct loop_thread {
    uv_loop_t loop;
    uv_async_t stop;
    struct el_http *h;
    pthread_t th;
};

/* "ok\n", or 16 MiB of 'x' for /big. */
static void lt_handle(void *arg, const struct el_http_request *rq,
                      struct el_http_response *rs)
{
    if (strcmp(rq->path, "/big") == 0) {
        rs->len = 16u << 20;
        rs->body = malloc(rs->len);
        memset(rs->body, 'x', rs->len);
        return;
    }
    rs->body = strdup("ok\n");
    rs->len = 3;
}

static void lt_stop(uv_async_t *a)
{
    struct loop_thread *lt = a->data;
    el_http_close(lt->h);
    uv_close((uv_handle_t *)a, NULL);
}

static void *lt_run(void *arg)
{
    struct loop_thread *lt = arg;
    uv_run(&lt->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* Start an el_http with lim on a loop thread of its own; returns its port. */
static int lt_start(struct loop_thread *lt, const struct el_http_limits *lim)
{
    char err[256];
    CHECK_EQ(uv_loop_init(&lt->loop), 0);
    CHECK_EQ(el_http_open(&lt->h, &lt->loop, "127.0.0.1", 0, lim, lt_handle,
                          NULL, err, sizeof err),
             0);
    uv_async_init(&lt->loop, &lt->stop, lt_stop);
    lt->stop.data = lt;
    pthread_create(&lt->th, NULL, lt_run, lt);
    return el_http_port(lt->h);
}

static void lt_end(struct loop_thread *lt)
{
    uv_async_send(&lt->stop);
    pthread_join(lt->th, NULL);
    CHECK_EQ(uv_loop_close(&lt->loop), 0);
}

TEST(http_slow_client_dropped_others_served)
{
    struct loop_thread lt;
    struct el_http_limits lim = {.timeout_ms = 300};
    int port = lt_start(&lt, &lim);

    /* Half a request, then nothing: closed after the timeout, unanswered. */
    int slow = el_tcp_connect("127.0.0.1", port, 5000);
    CHECK(slow >= 0);
    CHECK(send(slow, "GET /m", 6, 0) == 6);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* Meanwhile another client is served. */
    char *r = exchange(port, "GET / HTTP/1.0\r\n\r\n", 18, 5000);
    CHECK(strstr(r, "\r\n\r\nok\n"));
    free(r);
    char c;
    struct pollfd p = {.fd = slow, .events = POLLIN};
    CHECK_EQ(poll(&p, 1, 5000), 1);
    CHECK_EQ(read(slow, &c, 1), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) +
               (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(s >= 0.25);
    close(slow);
    lt_end(&lt);
}

TEST(http_clients_over_the_cap_closed)
{
    struct loop_thread lt;
    struct el_http_limits lim = {.timeout_ms = 60000, .max_conns = 4};
    int port = lt_start(&lt, &lim);
    /* 6 clients, 4 allowed: 2 are closed at once, the 4 stay open. */
    int fds[6], gone[6] = {0}, closed = 0;
    char c;
    for (int i = 0; i < 6; i++)
        CHECK((fds[i] = el_tcp_connect("127.0.0.1", port, 5000)) >= 0);
    for (int round = 0; round < 500 && closed < 2; round++) {
        struct pollfd q[6];
        for (int i = 0; i < 6; i++)
            q[i] =
                (struct pollfd){.fd = gone[i] ? -1 : fds[i], .events = POLLIN};
        poll(q, 6, 10);
        for (int i = 0; i < 6; i++)
            if (q[i].revents && read(fds[i], &c, 1) == 0) {
                gone[i] = 1;
                closed++;
            }
    }
    CHECK_EQ(closed, 2);
    /* The others are still served. */
    const char get[] = "GET / HTTP/1.0\r\n\r\n";
    for (int i = 0; i < 6; i++) {
        if (gone[i])
            continue;
        CHECK(send(fds[i], get, sizeof get - 1, 0) ==
              (ssize_t)(sizeof get - 1));
        char *out = read_all(fds[i], 4096, 5000, NULL);
        CHECK(strstr(out, "\r\n\r\nok\n"));
        free(out);
    }
    for (int i = 0; i < 6; i++)
        if (gone[i])
            close(fds[i]);
    lt_end(&lt);
}

TEST(http_listen_errors)
{
    struct el_metrics *reg;
    CHECK_EQ(el_metrics_new(&reg, NULL), 0);
    struct el_metrics_server *s, *s2;
    char err[256];
    CHECK(el_metrics_serve(&s, reg, "not-an-ip", 0, err, sizeof err) < 0);
    CHECK(strstr(err, "not an IP address"));
    CHECK_EQ(el_metrics_serve(&s, reg, "127.0.0.1", 0, err, sizeof err), 0);
    CHECK(el_metrics_serve(&s2, reg, "127.0.0.1", el_metrics_server_port(s),
                           err, sizeof err) < 0);
    CHECK(strstr(err, "choose another port"));
    el_metrics_server_close(s);
    el_metrics_free(reg);
}

/* An answer bigger than the socket buffers, to a client that half-closes
 * after its request and reads late: the whole body arrives. */
TEST(http_big_answer_to_half_closed_client)
{
    struct loop_thread lt;
    int port = lt_start(&lt, NULL);
    int fd = el_tcp_connect("127.0.0.1", port, 5000);
    CHECK(fd >= 0);
    const char get[] = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(send(fd, get, sizeof get - 1, 0) == (ssize_t)(sizeof get - 1));
    shutdown(fd, SHUT_WR);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    size_t len;
    char *out = read_all(fd, 32 << 20, 5000, &len);
    const char *body = strstr(out, "\r\n\r\n");
    CHECK(body && strstr(out, "Content-Length: 16777216\r\n"));
    CHECK_EQ(len - (size_t)(body + 4 - out), 16u << 20);
    free(out);
    lt_end(&lt);
}
