/* http.c -- the server of include/elrun/http.h: a libuv TCP listener, one
 * record per client with its parser (request.c) and a timer, responses
 * queued with uv_write in request order.
 *
 * A client's timer runs from its accept, and again from each answered
 * request: a request not complete when it fires (slow client, idle
 * keep-alive) closes the connection.  A client that sends requests while
 * more than 4 MiB of earlier answers wait unread is closed too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "elrun/http.h"
#include "elrun/net.h"
#include "http/http_int.h"

#define WRITE_QUEUE_MAX (4u << 20)

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    struct el_http *srv;
    struct conn *prev, *next;
    struct el__http_req rq;
    int open_handles;
    int closing;
    int close_after_write;
    int writes;
    char rbuf[4096];
};

struct el_http {
    uv_loop_t *loop;
    uv_tcp_t listener;
    struct el_http_limits lim;
    el_http_handler fn;
    void *arg;
    struct conn *conns;
    int nconns;
    int port;
};

struct wreq {
    uv_write_t req;
    struct conn *c;
    char *data;
};

static void on_listener_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_conn_handle_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    if (--c->open_handles == 0)
        free(c);
}

static void conn_close(struct conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    struct el_http *s = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
}

static void on_written(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    struct conn *c = w->c;
    free(w->data);
    free(w);
    c->writes--;
    if (status < 0 || (c->close_after_write && c->writes == 0))
        conn_close(c);
}

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return "Error";
    }
}

/* Queue one response; the body is taken (freed here). */
static void respond(struct conn *c, int status, const char *ctype, char *body,
                    size_t len, int head_only, int keep_alive)
{
    if (c->closing) {
        free(body);
        return;
    }
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) >
        WRITE_QUEUE_MAX) {
        /* Earlier answers still unread: a pipelining client that does not
         * read.  (One answer of any size is queued whole.) */
        free(body);
        conn_close(c);
        return;
    }
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
                      "Content-Length: %zu\r\nConnection: %s\r\n\r\n",
                      status, reason(status),
                      ctype ? ctype : "text/plain; charset=utf-8", len,
                      keep_alive ? "keep-alive" : "close");
    size_t blen = head_only ? 0 : len;
    struct wreq *w = malloc(sizeof *w);
    char *data = malloc((size_t)hl + blen + 1);
    if (!w || !data) {
        free(w);
        free(data);
        free(body);
        conn_close(c);
        return;
    }
    memcpy(data, head, (size_t)hl);
    if (blen)
        memcpy(data + hl, body, blen);
    free(body);
    w->c = c;
    w->data = data;
    uv_buf_t b = uv_buf_init(data, (unsigned)((size_t)hl + blen));
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0) {
        free(data);
        free(w);
        conn_close(c);
        return;
    }
    c->writes++;
    if (!keep_alive)
        c->close_after_write = 1;
}

static void respond_text(struct conn *c, int status, const char *msg,
                         int keep_alive)
{
    char *body = strdup(msg);
    respond(c, status, NULL, body, body ? strlen(body) : 0, 0, keep_alive);
}

static void on_request(void *arg, const struct el_http_request *rq,
                       int keep_alive)
{
    struct conn *c = arg;
    struct el_http *s = c->srv;
    int head = strcmp(rq->method, "HEAD") == 0;
    uv_timer_again(&c->timer);
    if (!head && strcmp(rq->method, "GET") != 0) {
        respond_text(c, 405, "only GET and HEAD are served\n", keep_alive);
        return;
    }
    struct el_http_response rs = {.status = 200};
    s->fn(s->arg, rq, &rs);
    respond(c, rs.status ? rs.status : 200, rs.content_type, rs.body, rs.len,
            head, keep_alive);
    if (!keep_alive)
        el__http_req_stop(&c->rq);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct conn *c = h->data;
    *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct conn *c = st->data;
    if (n == UV_EOF && c->writes > 0) {
        /* Half-closed after its request: answer, then close. */
        c->close_after_write = 1;
        uv_read_stop(st);
        return;
    }
    if (n < 0) {
        conn_close(c);
        return;
    }
    if (n == 0 || c->closing || c->close_after_write)
        return;
    int status = el__http_req_feed(&c->rq, buf->base, (size_t)n);
    if (status) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s\n", reason(status));
        respond_text(c, status, msg, 0);
        uv_read_stop(st);
    } else if (c->close_after_write) {
        uv_read_stop(st);
    }
}

static void on_timeout(uv_timer_t *t)
{
    struct conn *c = t->data;
    conn_close(c);
}

static void on_connection(uv_stream_t *ls, int status)
{
    struct el_http *s = ls->data;
    if (status < 0)
        return;
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->srv = s;
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0 ||
        s->nconns > s->lim.max_conns) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    el__http_req_init(&c->rq, s->lim.max_request, on_request, c);
    uv_timer_start(&c->timer, on_timeout, (uint64_t)s->lim.timeout_ms,
                   (uint64_t)s->lim.timeout_ms);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int el_http_open(struct el_http **out, uv_loop_t *loop, const char *host,
                 int port, const struct el_http_limits *limits,
                 el_http_handler fn, void *arg, char *err, size_t errlen)
{
    struct el_http *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->loop = loop;
    s->fn = fn;
    s->arg = arg;
    if (limits)
        s->lim = *limits;
    if (!s->lim.max_request)
        s->lim.max_request = 8192;
    if (s->lim.timeout_ms <= 0)
        s->lim.timeout_ms = 10000;
    if (s->lim.max_conns <= 0)
        s->lim.max_conns = 64;

    struct sockaddr_storage ss;
    int rc = uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
    if (rc < 0)
        rc = uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss);
    if (rc < 0) {
        snprintf(err, errlen,
                 "'%s' is not an IP address (give one, for "
                 "example 127.0.0.1 or 0.0.0.0)",
                 host);
        free(s);
        return rc;
    }
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, 128, on_connection);
    if (rc < 0) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s%s", host, port,
                 uv_strerror(rc),
                 rc == UV_EADDRINUSE ? " (choose another port, or port 0)"
                                     : "");
        uv_close((uv_handle_t *)&s->listener, on_listener_closed);
        return rc;
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen);
    s->port = bound.ss_family == AF_INET6
                  ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                  : ntohs(((struct sockaddr_in *)&bound)->sin_port);
    *out = s;
    return 0;
}

int el_http_port(const struct el_http *s)
{
    return s->port;
}

void el_http_close(struct el_http *s)
{
    if (!s)
        return;
    while (s->conns)
        conn_close(s->conns);
    uv_close((uv_handle_t *)&s->listener, on_listener_closed);
}
