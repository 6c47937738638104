/* store_link.c -- what every store-based rendezvous backend (static,
 * standalone, c10d) does with its store: build keys under the job's prefix,
 * connect with retries and cancellation, and turn a failed call into one
 * clear message (see struct el__rdzv_link in rdzv_impl.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/store.h"
#include "rendezvous/rdzv_impl.h"

void el__rdzv_key(const struct el__rdzv_link *l, char *buf, size_t cap,
                  const char *fmt, ...)
{
    int n = snprintf(buf, cap, "%s", l->prefix);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - (size_t)n, fmt, ap);
    va_end(ap);
}

int el__rdzv_link_secret(struct el__rdzv_link *l,
                         const struct el_rdzv_config *cfg, char *err,
                         size_t errlen)
{
    l->secret_len = 0;
    if (!cfg->secret)
        return 0;
    if (cfg->secret_len < EL_STORE_SECRET_MIN ||
        cfg->secret_len > EL_STORE_SECRET_MAX) {
        snprintf(err, errlen, "the job secret has %zu bytes; it needs %d to "
                 "%d", cfg->secret_len, EL_STORE_SECRET_MIN,
                 EL_STORE_SECRET_MAX);
        return EL_EUSAGE;
    }
    memcpy(l->secret, cfg->secret, cfg->secret_len);
    l->secret_len = cfg->secret_len;
    return 0;
}

/* Prove the job secret on a new connection; closes it on failure. */
static int authenticate(struct el_rdzv *r, const struct el__rdzv_link *l,
                        struct el_store **cl)
{
    int rc = el_store_auth(*cl, l->secret, l->secret_len);
    if (rc == 0)
        return 0;
    el__rdzv_fail(r, rc, "rendezvous store %s:%d: %s", l->host, l->port,
                  el_store_errmsg(*cl));
    el_store_close(*cl);
    *cl = NULL;
    return rc;
}

int el__rdzv_connect(struct el_rdzv *r, const struct el__rdzv_link *l,
                     struct el_store **out, int io_timeout_ms, int cancel_fd,
                     long long deadline)
{
    int rc = 0;
    for (;;) {
        long long left = deadline - el_now_ms();
        if (left <= 0)
            return el__rdzv_fail(r, rc ? rc : -ETIMEDOUT,
                                 "cannot reach the rendezvous store at %s:%d "
                                 "(%s); %s", l->host, l->port,
                                 el_strerror(rc ? rc : -ETIMEDOUT), l->hint);
        if (cancel_fd >= 0) {
            struct pollfd p = {.fd = cancel_fd, .events = POLLIN};
            if (poll(&p, 1, 0) > 0)
                return -ECANCELED;
        }
        rc = el_store_connect(out, l->host, l->port,
                              left < 200 ? (int)left : 200, io_timeout_ms);
        if (rc == 0)
            return l->secret_len ? authenticate(r, l, out) : 0;
        if (rc == EL_EUSAGE)
            return el__rdzv_fail(r, rc, "rendezvous host '%s' does not "
                                 "resolve", l->host);
        /* Not up yet, or its backlog overflowed: try again.  Anything else
         * will not get better. */
        if (rc != -ECONNREFUSED && rc != -ETIMEDOUT && rc != -EPIPE &&
            rc != -ECONNRESET && rc != -EHOSTUNREACH && rc != -ENETUNREACH &&
            rc != EL_EPROTO)
            return el__rdzv_fail(r, rc, "cannot reach the rendezvous store "
                                 "at %s:%d: %s", l->host, l->port,
                                 el_strerror(rc));
    }
}

int el__rdzv_ensure(struct el_rdzv *r, struct el__rdzv_link *l, int cancel_fd,
                    long long deadline)
{
    if (l->cl)
        return 0;
    return el__rdzv_connect(r, l, &l->cl, l->io_timeout_ms, cancel_fd,
                            deadline);
}

int el__rdzv_store_fail(struct el_rdzv *r, struct el__rdzv_link *l, int rc,
                        const char *what)
{
    if (rc == -ECANCELED) { /* the client closed it already */
        el_store_close(l->cl);
        l->cl = NULL;
        return rc;
    }
    el__rdzv_fail(r, rc, "rendezvous store %s:%d: %s: %s", l->host, l->port,
                  what, l->cl ? el_store_errmsg(l->cl) : el_strerror(rc));
    if (rc != -ETIMEDOUT && rc != EL_EMISMATCH && rc != EL_ENOTFOUND) {
        el_store_close(l->cl);
        l->cl = NULL;
    }
    return rc;
}
