/* metrics.c -- the controller's Prometheus endpoint: a listening socket the
 * controller loop polls with its watches, answering every connection with
 * the text exposition format (version 0.0.4) of the counters in struct
 * el__k8s_metrics and the job states the loop passes in.  One request per
 * connection (HTTP/1.0 style, "Connection: close"); a client that sends
 * nothing within 200 ms is answered anyway.  Any path is /metrics.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/errfmt.h"
#include "elrun/err.h"
#include "elrun/net.h"
#include "k8s/k8s_int.h"

int el__k8s_metrics_listen(struct el__k8s_metrics *m, const char *addr,
                           char *err, size_t errlen)
{
    char host[EL_HOST_MAX];
    int port;
    m->fd = -1;
    if (el_addr_parse(addr, -1, host, &port) != 0 || port < 0)
        return el__errf(err, errlen, EL_EUSAGE,
                        "--metrics-addr %s: want HOST:PORT (port 0 picks one)",
                        addr);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host[0] ? host : NULL, ps, &hints, &ai);
    if (rc)
        return el__errf(err, errlen, EL_EUSAGE, "--metrics-addr %s: %s", addr,
                        gai_strerror(rc));
    int fd =
        socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 16)) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return el__errf(err, errlen, -e, "--metrics-addr %s: %s", addr,
                        strerror(e));
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    m->port =
        ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                       : ((struct sockaddr_in *)&ss)->sin_port);
    m->fd = fd;
    return 0;
}

void el__k8s_metrics_close(struct el__k8s_metrics *m)
{
    if (m->fd >= 0)
        close(m->fd);
    m->fd = -1;
}

static void put(struct el__k8s_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(struct el__k8s_buf *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0)
        el__k8s_buf_add(b, line,
                        (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

char *el__k8s_metrics_text(const struct el__k8s_metrics *m, const json_t *jobs,
                           int leader)
{
    static const char *const states[] = {"Created", "Running", "Restarting",
                                         "Succeeded", "Failed"};
    long n[5] = {0};
    const char *k;
    json_t *o;
    json_object_foreach((json_t *)jobs, k, o)
    {
        const char *s = json_string_value(
            json_object_get(json_object_get(o, "status"), "state"));
        for (int i = 0; i < 5; i++)
            if (strcmp(s ? s : "Created", states[i]) == 0)
                n[i]++;
    }
    struct el__k8s_buf b = {0};
    put(&b,
        "# HELP elrun_k8s_leader 1 when this controller holds the lease.\n"
        "# TYPE elrun_k8s_leader gauge\nelrun_k8s_leader %d\n",
        leader);
    put(&b,
        "# HELP elrun_k8s_jobs ElasticJobs by state (as the leader sees them).\n"
        "# TYPE elrun_k8s_jobs gauge\n");
    for (int i = 0; i < 5; i++)
        put(&b, "elrun_k8s_jobs{state=\"%s\"} %ld\n", states[i], n[i]);
    put(&b,
        "# HELP elrun_k8s_pods_created_total Worker pods created.\n"
        "# TYPE elrun_k8s_pods_created_total counter\n"
        "elrun_k8s_pods_created_total %lu\n",
        m->pods_created);
    put(&b,
        "# HELP elrun_k8s_pods_replaced_total Failed worker pods deleted to be replaced.\n"
        "# TYPE elrun_k8s_pods_replaced_total counter\n"
        "elrun_k8s_pods_replaced_total %lu\n",
        m->pods_replaced);
    put(&b,
        "# HELP elrun_k8s_pods_deleted_total Worker pods deleted (scale-down, cleanup, replacement).\n"
        "# TYPE elrun_k8s_pods_deleted_total counter\n"
        "elrun_k8s_pods_deleted_total %lu\n",
        m->pods_deleted);
    put(&b,
        "# HELP elrun_k8s_conflicts_total Status writes that met a newer resourceVersion (409).\n"
        "# TYPE elrun_k8s_conflicts_total counter\n"
        "elrun_k8s_conflicts_total %lu\n",
        m->conflicts);
    put(&b,
        "# HELP elrun_k8s_relists_total Lists (at start, after 410 Gone).\n"
        "# TYPE elrun_k8s_relists_total counter\n"
        "elrun_k8s_relists_total %lu\n",
        m->relists);
    put(&b,
        "# HELP elrun_k8s_reconcile_seconds Time of one reconcile of one job, with its API calls.\n"
        "# TYPE elrun_k8s_reconcile_seconds summary\n"
        "elrun_k8s_reconcile_seconds_sum %.6f\n"
        "elrun_k8s_reconcile_seconds_count %lu\n",
        m->rec_sum, m->rec_count);
    put(&b,
        "# HELP elrun_k8s_reconcile_seconds_max The longest reconcile so far.\n"
        "# TYPE elrun_k8s_reconcile_seconds_max gauge\n"
        "elrun_k8s_reconcile_seconds_max %.6f\n",
        m->rec_max);
    return b.p;
}

void el__k8s_metrics_serve(struct el__k8s_metrics *m, const char *body)
{
    for (;;) {
        int c = accept4(m->fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            return; /* EAGAIN: nothing more waiting */
        char req[2048];
        struct pollfd p = {.fd = c, .events = POLLIN};
        if (poll(&p, 1, 200) > 0) {
            ssize_t r = read(c, req, sizeof req); /* the request: ignored */
            (void)r;
        }
        char hdr[200];
        size_t bl = body ? strlen(body) : 0;
        int hl = snprintf(hdr, sizeof hdr,
                          "HTTP/1.1 200 OK\r\nContent-Type: text/plain; "
                          "version=0.0.4\r\nContent-Length: %zu\r\n"
                          "Connection: close\r\n\r\n",
                          bl);
        if (write(c, hdr, (size_t)hl) == hl && bl) {
            ssize_t w = write(c, body, bl);
            (void)w;
        }
        close(c);
    }
}
