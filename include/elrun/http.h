/* http.h -- a small HTTP/1.1 server on a libuv loop, for the read-only
 * endpoints elrun serves (GET /metrics).  Requests are parsed by Debian's
 * http-parser (libhttp-parser); nothing here parses HTTP by hand.
 *
 * What it guarantees: a request that does not parse, or breaks a limit,
 * gets a 4xx answer and its connection closed, and never affects the other
 * clients; a client that does not finish a request within timeout_ms (or
 * stays idle that long between requests) is dropped; at most max_conns
 * clients are served at once (more are closed on accept).  Keep-alive and
 * pipelined requests are answered in order.
 *
 * Threads: not thread-safe; everything runs on the loop's thread, the
 * handler too.
 */
#ifndef ELRUN_HTTP_H
#define ELRUN_HTTP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct uv_loop_s;

struct el_http_request {
    const char *method; /* "GET", "HEAD", ...                        */
    const char *path;   /* the URL's path, NUL-terminated ("/metrics") */
    const char *query;  /* after '?', or "" */
};

struct el_http_response {
    int status;               /* [200]                                     */
    const char *content_type; /* ["text/plain; charset=utf-8"]             */
    char *body;               /* malloc'd by the handler, freed by the server */
    size_t len;
};

/* Fills rs for rq, on the loop's thread.  It must not block: a scrape waits
 * for it. */
typedef void (*el_http_handler)(void *arg, const struct el_http_request *rq,
                                struct el_http_response *rs);

/* A zero field takes the default in brackets. */
struct el_http_limits {
    size_t max_request; /* bytes of one request, head and body [8 KiB] */
    int timeout_ms;     /* to send one whole request [10000]         */
    int max_conns;      /* clients at once [64]                      */
};

struct el_http;

/* Listen on host:port (port 0 picks one) on loop.  Returns 0, or -errno
 * (-EADDRINUSE ...) with a one-line reason in err. */
int el_http_open(struct el_http **out, struct uv_loop_s *loop, const char *host,
                 int port, const struct el_http_limits *limits,
                 el_http_handler fn, void *arg, char *err, size_t errlen);

/* The port it listens on. */
int el_http_port(const struct el_http *h);

/* Drop every client and stop listening.  Memory is released by close
 * callbacks: run the loop until it returns.  NULL is a no-op. */
void el_http_close(struct el_http *h);

#ifdef __cplusplus
}
#endif
#endif
