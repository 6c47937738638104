/* serve.c -- el_metrics_serve: GET /metrics for a registry, on a thread of
 * its own running its own libuv loop (src/http).
 *
 * Why a thread: the agent's loop is a plain epoll set and blocks in the
 * rendezvous and the exit barrier; a scrape must be answered in those
 * states too, and must never delay the agent's handling of a worker's
 * exit.  The thread only renders the registry (under its mutex) and
 * writes sockets; it blocks every signal so that the agent's signalfd
 * keeps receiving them.  Nothing of this exists unless asked for.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "elrun/err.h"
#include "elrun/http.h"
#include "elrun/metrics.h"
#include "elrun/net.h"

struct el_metrics_server {
    struct el_metrics *reg;
    uv_loop_t loop;
    uv_async_t stop;
    struct el_http *http;
    el_http_handler other; /* every path but /metrics, or NULL */
    void *other_arg;
    pthread_t th;
};

static void handle(void *arg, const struct el_http_request *rq,
                   struct el_http_response *rs)
{
    struct el_metrics_server *s = arg;
    if (strcmp(rq->path, "/metrics") != 0 && s->other) {
        s->other(s->other_arg, rq, rs);
        return;
    }
    if (strcmp(rq->path, "/metrics") != 0) {
        rs->status = 404;
        rs->body = strdup("not found: elrun serves /metrics\n");
        rs->len = rs->body ? strlen(rs->body) : 0;
        return;
    }
    if (el_metrics_render(s->reg, &rs->body, &rs->len) < 0) {
        rs->status = 503;
        rs->body = NULL;
        rs->len = 0;
        return;
    }
    rs->content_type = EL_METRICS_CONTENT_TYPE;
}

static void on_stop(uv_async_t *a)
{
    struct el_metrics_server *s = a->data;
    el_http_close(s->http);
    uv_close((uv_handle_t *)&s->stop, NULL);
}

static void *run(void *arg)
{
    struct el_metrics_server *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return NULL;
}

int el_metrics_serve(struct el_metrics_server **out, struct el_metrics *reg,
                     const char *host, int port, char *err, size_t errlen)
{
    return el_metrics_serve_routes(out, reg, host, port, NULL, NULL, err,
                                   errlen);
}

int el_metrics_serve_routes(struct el_metrics_server **out,
                            struct el_metrics *reg, const char *host, int port,
                            el_http_handler other, void *other_arg, char *err,
                            size_t errlen)
{
    struct el_metrics_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->reg = reg;
    s->other = other;
    s->other_arg = other_arg;
    int rc = uv_loop_init(&s->loop);
    if (rc < 0) {
        snprintf(err, errlen, "cannot start an event loop: %s",
                 uv_strerror(rc));
        free(s);
        return rc;
    }
    rc = el_http_open(&s->http, &s->loop, host, port, NULL, handle, s, err,
                      errlen);
    if (rc < 0) {
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        free(s);
        return rc;
    }
    uv_async_init(&s->loop, &s->stop, on_stop);
    s->stop.data = s;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = pthread_create(&s->th, NULL, run, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        snprintf(err, errlen, "cannot start the metrics thread: %s",
                 strerror(rc));
        on_stop(&s->stop);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        free(s);
        return -rc;
    }
    *out = s;
    return 0;
}

int el_metrics_start(const char *addr, const char *const *consts,
                     struct el_metrics **reg, struct el_metrics_server **srv,
                     char *err, size_t errlen)
{
    char host[EL_HOST_MAX];
    int port;
    *reg = NULL;
    *srv = NULL;
    if (el_addr_parse(addr, -1, host, &port) < 0) {
        snprintf(err, errlen,
                 "--metrics-addr needs HOST:PORT (for example "
                 "127.0.0.1:9400, or port 0 for a free one), got '%s'",
                 addr);
        return EL_EUSAGE;
    }
    int rc = el_metrics_new(reg, consts);
    if (rc < 0) {
        snprintf(err, errlen, "metrics: %s", el_strerror(rc));
        return rc;
    }
    if ((rc = el_metrics_serve(srv, *reg, host, port, err, errlen)) < 0) {
        el_metrics_free(*reg);
        *reg = NULL;
    }
    return rc;
}

int el_metrics_server_port(const struct el_metrics_server *s)
{
    return el_http_port(s->http);
}

void el_metrics_server_close(struct el_metrics_server *s)
{
    if (!s)
        return;
    uv_async_send(&s->stop);
    pthread_join(s->th, NULL);
    uv_loop_close(&s->loop);
    free(s);
}
