/* store_link.c -- what every store-based rendezvous backend (static,
 * standalone, c10d) does with its store: build keys under the job's prefix,
 * connect with retries and cancellation, turn a failed call into one
 * clear message (see struct el__rdzv_link in rdzv_impl.h), and start and
 * stop their helper threads.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
        snprintf(err, errlen,
                 "the job secret has %zu bytes; it needs %d to "
                 "%d",
                 cfg->secret_len, EL_STORE_SECRET_MIN, EL_STORE_SECRET_MAX);
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

int el__rdzv_connect(struct el_rdzv *r, struct el__rdzv_link *l,
                     struct el_store **out, int io_timeout_ms, int cancel_fd,
                     long long deadline)
{
    int rc = 0, pause = 0;
    long long start = el_now_ms(), told = 0;
    for (;;) {
        long long now = el_now_ms(), left = deadline - now;
        if (left <= 0 && rc == EL_ENOTSTORE)
            return el__rdzv_fail(r, -ETIMEDOUT,
                                 "the rendezvous store at "
                                 "%s:%d accepts connections but does not "
                                 "answer (its host stopped or overloaded?); "
                                 "%s",
                                 l->host, l->port, l->hint);
        if (left <= 0)
            return el__rdzv_fail(r, rc ? rc : -ETIMEDOUT,
                                 "cannot reach the rendezvous store at %s:%d "
                                 "(%s); %s",
                                 l->host, l->port,
                                 el_strerror(rc ? rc : -ETIMEDOUT), l->hint);
        /* Between attempts (a refusal comes back at once): 5 ms doubling
         * to 200 ms, watching cancel_fd. */
        struct pollfd p = {.fd = cancel_fd, .events = POLLIN};
        int ms = pause < left ? pause : (int)left;
        if (poll(&p, cancel_fd >= 0 ? 1 : 0, ms) > 0)
            return -ECANCELED;
        pause = pause ? (pause < 100 ? pause * 2 : 200) : 5;
        rc = el_store_connect(out, l->host, l->port,
                              left < 200 ? (int)left : 200, io_timeout_ms);
        if (rc == 0) {
            l->seen_store = 1;
            return l->secret_len ? authenticate(r, l, out) : 0;
        }
        if (rc == EL_EUSAGE)
            return el__rdzv_fail(r, rc,
                                 "rendezvous host '%s' does not "
                                 "resolve",
                                 l->host);
        /* Not up yet, or its backlog overflowed: try again.  Anything else
         * will not get better. */
        if (rc != -ECONNREFUSED && rc != -ETIMEDOUT && rc != -EPIPE &&
            rc != -ECONNRESET && rc != -EHOSTUNREACH && rc != -ENETUNREACH &&
            rc != EL_EPROTO && !(rc == EL_ENOTSTORE && l->seen_store))
            return el__rdzv_fail(r, rc,
                                 "cannot reach the rendezvous store "
                                 "at %s:%d: %s",
                                 l->host, l->port, el_strerror(rc));
        if (l->on_event && (told ? now - told >= 10000 : now - start >= 1000)) {
            char msg[EL_HOST_MAX + 200];
            snprintf(msg, sizeof msg,
                     "waiting for the rendezvous store at "
                     "%s:%d (%s) for %lld s; giving up in %lld s",
                     l->host, l->port, el_strerror(rc), (now - start) / 1000,
                     left / 1000);
            l->on_event(l->event_arg, msg);
            told = now;
        }
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

int el__rdzv_thread_start(struct el_rdzv *r, pthread_t *th, int *running,
                          void *(*fn)(void *), void *arg, const char *what)
{
    int rc = pthread_create(th, NULL, fn, arg);
    if (rc)
        return el__rdzv_fail(r, -rc, "cannot start the rendezvous %s: %s", what,
                             strerror(rc));
    *running = 1;
    return 0;
}

void el__rdzv_thread_stop(pthread_t th, int *running, const int stop[2])
{
    if (!*running)
        return;
    char c = 1;
    if (write(stop[1], &c, 1) < 0) {
        /* the pipe is ours and empty */
    }
    pthread_join(th, NULL);
    *running = 0;
    /* Take the byte back: the next thread starts with an empty pipe (the
     * pipe is non-blocking: nothing else reads it). */
    if (read(stop[0], &c, 1) < 0) {
        /* cannot fail: the byte was written above */
    }
}
