/* client.c -- the blocking store client (see include/elrun/store.h).
 *
 * Speaks the 2.3+ dialect (it opens with VALIDATE and PING) plus elrun's own
 * operations.  Calls that wait for keys use the X_* operations, whose timeout
 * the server enforces, so a timed-out wait leaves the connection in a known
 * state; the client's own deadline (the wait plus the I/O timeout) only
 * catches a server that stopped answering, and then breaks the connection.
 * el_store_auth() runs the job-secret challenge (auth.c has the HMAC).
 */
#include <errno.h>
#include <nettle/memops.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/errfmt.h"
#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/store.h"
#include "store/proto.h"

struct el_store {
    int fd; /* -1 once broken                              */
    int cancel_fd;
    int io_timeout_ms;
    uint8_t *req; /* request being built                         */
    size_t req_len, req_cap;
    char errmsg[256];
};

static int fail(struct el_store *s, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct el_store *s, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    el__verrf(s->errmsg, sizeof s->errmsg, rc, fmt, ap);
    va_end(ap);
    return rc;
}

/* The connection's byte stream is in an unknown state: close it. */
static int broken(struct el_store *s, int rc, const char *what)
{
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    return fail(s, rc, "store connection lost while %s: %s", what,
                el_strerror(rc));
}

/* ---- request building ---- */

static int put(struct el_store *s, const void *p, size_t n)
{
    if (s->req_len + n > s->req_cap) {
        size_t cap = s->req_cap ? s->req_cap : 256;
        while (cap < s->req_len + n)
            cap *= 2;
        uint8_t *q = realloc(s->req, cap);
        if (!q)
            return -ENOMEM;
        s->req = q;
        s->req_cap = cap;
    }
    if (n)
        memcpy(s->req + s->req_len, p, n);
    s->req_len += n;
    return 0;
}

static int put_u8(struct el_store *s, uint8_t v)
{
    return put(s, &v, 1);
}
static int put_i64(struct el_store *s, int64_t v)
{
    return put(s, &v, 8);
}

static int put_str(struct el_store *s, const void *p, size_t n)
{
    uint64_t n64 = n;
    int rc = put(s, &n64, 8);
    return rc ? rc : put(s, p, n);
}

static int put_key(struct el_store *s, const char *k)
{
    return put_str(s, k, strlen(k));
}

static int begin(struct el_store *s, uint8_t code)
{
    s->req_len = 0;
    if (s->fd < 0)
        return fail(s, -EPIPE,
                    "store connection is closed (a previous "
                    "call failed); connect again");
    return put_u8(s, code);
}

/* ---- I/O with deadlines ---- */

/* Wait until fd is ready for 'events' or the deadline (ms, -1 none). */
static int wait_fd(struct el_store *s, short events, long long deadline)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = s->fd, .events = events},
                              {.fd = s->cancel_fd, .events = POLLIN}};
        int timeout = -1;
        if (deadline >= 0) {
            long long left = deadline - el_now_ms();
            if (left <= 0)
                return -ETIMEDOUT;
            timeout = left > 1000000 ? 1000000 : (int)left;
        }
        int rc = poll(p, s->cancel_fd >= 0 ? 2 : 1, timeout);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            return -errno;
        if (rc == 0)
            continue; /* re-check the deadline */
        if (s->cancel_fd >= 0 && (p[1].revents & POLLIN))
            return -ECANCELED;
        return 0;
    }
}

static int send_req(struct el_store *s, const char *what)
{
    long long deadline = el_now_ms() + s->io_timeout_ms;
    size_t off = 0;
    while (off < s->req_len) {
        ssize_t n = send(s->fd, s->req + off, s->req_len - off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return broken(s, -errno, what);
        int rc = wait_fd(s, POLLOUT, deadline);
        if (rc < 0)
            return broken(s, rc, what);
    }
    return 0;
}

static int recv_all(struct el_store *s, void *buf, size_t len,
                    long long deadline, const char *what)
{
    uint8_t *p = buf;
    size_t off = 0;
    while (off < len) {
        ssize_t n = recv(s->fd, p + off, len - off, MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n == 0)
            return broken(s, -ECONNRESET, what);
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return broken(s, -errno, what);
        int rc = wait_fd(s, POLLIN, deadline);
        if (rc < 0)
            return broken(s, rc, what);
    }
    return 0;
}

static long long io_deadline(struct el_store *s)
{
    return el_now_ms() + s->io_timeout_ms;
}

/* Deadline for a reply that may be held back for timeout_ms by the server. */
static long long wait_deadline(struct el_store *s, int timeout_ms)
{
    return timeout_ms < 0 ? -1 : el_now_ms() + timeout_ms + s->io_timeout_ms;
}

static int recv_u8(struct el_store *s, uint8_t *v, long long dl,
                   const char *what)
{
    return recv_all(s, v, 1, dl, what);
}

static int recv_i64(struct el_store *s, int64_t *v, long long dl,
                    const char *what)
{
    return recv_all(s, v, 8, dl, what);
}

/* Read a length-prefixed value into a new NUL-terminated buffer. */
static int recv_bytes(struct el_store *s, void **val, size_t *len, long long dl,
                      const char *what)
{
    uint64_t n;
    int rc = recv_all(s, &n, 8, dl, what);
    if (rc < 0)
        return rc;
    if (n > ((uint64_t)1 << 40))
        return broken(s, EL_EPROTO, what);
    uint8_t *p = malloc(n + 1);
    if (!p)
        return broken(s, -ENOMEM, what);
    rc = recv_all(s, p, n, dl, what);
    if (rc < 0) {
        free(p);
        return rc;
    }
    p[n] = '\0';
    if (val)
        *val = p;
    else
        free(p);
    if (len)
        *len = n;
    return 0;
}

/* ---- connection ---- */

int el_store_connect(struct el_store **out, const char *host, int port,
                     int timeout_ms, int io_timeout_ms)
{
    struct el_store *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->cancel_fd = -1;
    s->io_timeout_ms = io_timeout_ms > 0 ? io_timeout_ms : 60000;
    s->fd = el_tcp_connect(host, port, timeout_ms);
    if (s->fd < 0) {
        int rc = s->fd;
        free(s);
        return rc;
    }
    /* VALIDATE (0, magic) then PING: proves the peer is a store. */
    uint32_t magic = EL_PROTO_MAGIC, nonce = (uint32_t)getpid(), echo = 0;
    int rc = begin(s, EL_CODE_V2_VALIDATE);
    if (!rc)
        rc = put(s, &magic, 4);
    if (!rc)
        rc = put_u8(s, EL_CODE_V2_PING);
    if (!rc)
        rc = put(s, &nonce, 4);
    if (!rc)
        rc = send_req(s, "connecting");
    /* A store echoes at once; a peer that answers something else, or
     * nothing within the connect timeout (at least 1 s, at most the I/O
     * timeout), is some other service: EL_ENOTSTORE, not worth a retry. */
    long long hs = timeout_ms > 1000 ? timeout_ms : 1000;
    if (hs > s->io_timeout_ms)
        hs = s->io_timeout_ms;
    if (!rc)
        rc = recv_all(s, &echo, 4, el_now_ms() + hs, "connecting");
    if (rc == -ETIMEDOUT || (!rc && echo != nonce))
        rc = EL_ENOTSTORE;
    if (rc) {
        el_store_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void el_store_close(struct el_store *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    free(s->req);
    free(s);
}

const char *el_store_errmsg(const struct el_store *s)
{
    return s->errmsg[0] ? s->errmsg : "no error";
}

void el_store_set_cancel_fd(struct el_store *s, int fd)
{
    s->cancel_fd = fd;
}

/* ---- operations ---- */

#define TRY(expr)         \
    do {                  \
        int rc_ = (expr); \
        if (rc_ < 0)      \
            return rc_;   \
    } while (0)

static int put_keys(struct el_store *s, const char *const keys[], size_t n)
{
    TRY(put_i64(s, (int64_t)n));
    for (size_t i = 0; i < n; i++)
        TRY(put_key(s, keys[i]));
    return 0;
}

static int timed_out(struct el_store *s, const char *what, const char *key,
                     int timeout_ms)
{
    return fail(s, -ETIMEDOUT, "%s timed out after %d ms (key '%s')", what,
                timeout_ms, key);
}

/* Start an X_* request that the server may hold for up to timeout_ms. */
static int begin_wait(struct el_store *s, uint8_t code, int timeout_ms)
{
    TRY(begin(s, code));
    return put_i64(s, timeout_ms < 0 ? -1 : timeout_ms);
}

/* Send it and read its status byte: 0 when the keys are there, -ETIMEDOUT
 * when the server's timeout passed (the connection stays usable). */
static int await_status(struct el_store *s, const char *what, const char *key,
                        int timeout_ms)
{
    uint8_t st;
    long long dl = wait_deadline(s, timeout_ms);
    TRY(send_req(s, what));
    TRY(recv_u8(s, &st, dl, what));
    return st == EL_X_TIMEOUT ? timed_out(s, what, key, timeout_ms) : 0;
}

int el_store_set(struct el_store *s, const char *key, const void *val,
                 size_t len)
{
    TRY(begin(s, EL_CODE_V2_SET));
    TRY(put_key(s, key));
    TRY(put_str(s, val, len));
    return send_req(s, "SET");
}

int el_store_get(struct el_store *s, const char *key, void **val, size_t *len,
                 int timeout_ms)
{
    TRY(begin_wait(s, EL_CODE_X_GET, timeout_ms));
    TRY(put_key(s, key));
    TRY(await_status(s, "GET", key, timeout_ms));
    return recv_bytes(s, val, len, io_deadline(s), "GET");
}

int el_store_try_get(struct el_store *s, const char *key, void **val,
                     size_t *len)
{
    uint8_t present;
    TRY(begin(s, EL_CODE_X_TRY_GET));
    TRY(put_key(s, key));
    TRY(send_req(s, "TRY_GET"));
    TRY(recv_u8(s, &present, io_deadline(s), "TRY_GET"));
    if (!present)
        return fail(s, EL_ENOTFOUND, "no key '%s'", key);
    return recv_bytes(s, val, len, io_deadline(s), "TRY_GET");
}

int el_store_add(struct el_store *s, const char *key, int64_t delta,
                 int64_t *result)
{
    int64_t r;
    TRY(begin(s, EL_CODE_V2_ADD));
    TRY(put_key(s, key));
    TRY(put_i64(s, delta));
    TRY(send_req(s, "ADD"));
    TRY(recv_i64(s, &r, io_deadline(s), "ADD"));
    if (result)
        *result = r;
    return 0;
}

int el_store_compare_set(struct el_store *s, const char *key,
                         const void *expected, size_t elen, const void *desired,
                         size_t dlen, void **cur, size_t *curlen)
{
    void *v = NULL;
    size_t n = 0;
    TRY(begin(s, EL_CODE_V2_COMPARE_SET));
    TRY(put_key(s, key));
    TRY(put_str(s, expected, elen));
    TRY(put_str(s, desired, dlen));
    TRY(send_req(s, "COMPARE_SET"));
    TRY(recv_bytes(s, &v, &n, io_deadline(s), "COMPARE_SET"));
    int same = n == dlen && (n == 0 || memcmp(v, desired, n) == 0);
    if (cur) {
        *cur = v;
        if (curlen)
            *curlen = n;
    } else {
        free(v);
    }
    return same ? 0
                : fail(s, EL_EMISMATCH,
                       "compare-and-set of '%s': value did not match", key);
}

int el_store_check(struct el_store *s, const char *const keys[], size_t n,
                   int *all_exist)
{
    uint8_t r;
    TRY(begin(s, EL_CODE_V2_CHECK));
    TRY(put_keys(s, keys, n));
    TRY(send_req(s, "CHECK"));
    TRY(recv_u8(s, &r, io_deadline(s), "CHECK"));
    *all_exist = r == EL_CHECK_READY;
    return 0;
}

int el_store_wait(struct el_store *s, const char *const keys[], size_t n,
                  int timeout_ms)
{
    TRY(begin_wait(s, EL_CODE_X_WAIT, timeout_ms));
    TRY(put_keys(s, keys, n));
    return await_status(s, "WAIT", n ? keys[0] : "", timeout_ms);
}

static int key_op_i64(struct el_store *s, uint8_t code, const char *key,
                      int64_t *out, const char *what)
{
    int64_t r;
    TRY(begin(s, code));
    TRY(put_key(s, key));
    TRY(send_req(s, what));
    TRY(recv_i64(s, &r, io_deadline(s), what));
    *out = r;
    return 0;
}

int el_store_delete(struct el_store *s, const char *key, int *deleted)
{
    int64_t r;
    TRY(key_op_i64(s, EL_CODE_V2_DELETE, key, &r, "DELETE_KEY"));
    if (deleted)
        *deleted = r != 0;
    return 0;
}

int el_store_delete_prefix(struct el_store *s, const char *prefix,
                           int64_t *count)
{
    int64_t r;
    TRY(key_op_i64(s, EL_CODE_X_DELETE_PREFIX, prefix, &r, "DELETE_PREFIX"));
    if (count)
        *count = r;
    return 0;
}

int el_store_num_keys(struct el_store *s, int64_t *n)
{
    TRY(begin(s, EL_CODE_V2_NUM_KEYS));
    TRY(send_req(s, "GETNUMKEYS"));
    return recv_i64(s, n, io_deadline(s), "GETNUMKEYS");
}

int el_store_append(struct el_store *s, const char *key, const void *val,
                    size_t len)
{
    TRY(begin(s, EL_CODE_V2_APPEND));
    TRY(put_key(s, key));
    TRY(put_str(s, val, len));
    return send_req(s, "APPEND");
}

int el_store_multi_get(struct el_store *s, const char *const keys[], size_t n,
                       void *vals[], size_t lens[], int timeout_ms)
{
    TRY(begin_wait(s, EL_CODE_X_MULTI_GET, timeout_ms));
    TRY(put_keys(s, keys, n));
    TRY(await_status(s, "MULTI_GET", n ? keys[0] : "", timeout_ms));
    for (size_t i = 0; i < n; i++) {
        int rc = recv_bytes(s, &vals[i], &lens[i], io_deadline(s), "MULTI_GET");
        if (rc < 0) {
            while (i > 0)
                free(vals[--i]);
            return rc;
        }
    }
    return 0;
}

int el_store_multi_set(struct el_store *s, const char *const keys[],
                       const void *const vals[], const size_t lens[], size_t n)
{
    TRY(begin(s, EL_CODE_V2_MULTI_SET));
    TRY(put_i64(s, (int64_t)n));
    for (size_t i = 0; i < n; i++) {
        TRY(put_key(s, keys[i]));
        TRY(put_str(s, vals[i], lens[i]));
    }
    return send_req(s, "MULTI_SET");
}

int el_store_watch(struct el_store *s, const char *key, int expect_present,
                   const void *expected, size_t elen, int *present, void **val,
                   size_t *len, int timeout_ms)
{
    uint8_t pr;
    TRY(begin_wait(s, EL_CODE_X_WATCH, timeout_ms));
    TRY(put_key(s, key));
    TRY(put_u8(s, expect_present ? 1 : 0));
    TRY(put_str(s, expected, expect_present ? elen : 0));
    TRY(await_status(s, "WATCH", key, timeout_ms));
    TRY(recv_u8(s, &pr, io_deadline(s), "WATCH"));
    void *v = NULL;
    size_t n = 0;
    TRY(recv_bytes(s, &v, &n, io_deadline(s), "WATCH"));
    if (present)
        *present = pr;
    if (val && pr) {
        *val = v;
        if (len)
            *len = n;
    } else {
        free(v);
    }
    return 0;
}

int el_store_on_close_set(struct el_store *s, const char *key, const void *val,
                          size_t len)
{
    uint8_t st;
    TRY(begin(s, EL_CODE_X_ON_CLOSE_SET));
    TRY(put_key(s, key));
    TRY(put_str(s, val, len));
    TRY(send_req(s, "ON_CLOSE_SET"));
    return recv_u8(s, &st, io_deadline(s), "ON_CLOSE_SET");
}

int el_store_on_close_append(struct el_store *s, const char *key,
                             const void *val, size_t len)
{
    uint8_t st;
    TRY(begin(s, EL_CODE_X_ON_CLOSE_APPEND));
    TRY(put_key(s, key));
    TRY(put_str(s, val, len));
    TRY(send_req(s, "ON_CLOSE_APPEND"));
    return recv_u8(s, &st, io_deadline(s), "ON_CLOSE_APPEND");
}

int el_store_set_idle_timeout(struct el_store *s, int idle_ms)
{
    uint8_t st;
    TRY(begin(s, EL_CODE_X_IDLE_TIMEOUT));
    TRY(put_i64(s, idle_ms > 0 ? idle_ms : 0));
    TRY(send_req(s, "IDLE_TIMEOUT"));
    return recv_u8(s, &st, io_deadline(s), "IDLE_TIMEOUT");
}

int el_store_ping(struct el_store *s)
{
    uint32_t nonce = 0x454c5255, echo = 0;
    TRY(begin(s, EL_CODE_V2_PING));
    TRY(put(s, &nonce, 4));
    TRY(send_req(s, "PING"));
    TRY(recv_all(s, &echo, 4, io_deadline(s), "PING"));
    return echo == nonce ? 0 : broken(s, EL_EPROTO, "PING");
}

int el_store_auth(struct el_store *s, const void *secret, size_t len)
{
    void *nonce = NULL, *proof = NULL;
    size_t nlen = 0, plen = 0;
    uint8_t st, mac[EL_AUTH_MAC], mine[EL_AUTH_NONCE], want[EL_AUTH_MAC];
    TRY(begin(s, EL_CODE_X_AUTH_CHALLENGE));
    TRY(send_req(s, "AUTH"));
    int rc = recv_bytes(s, &nonce, &nlen, io_deadline(s), "AUTH");
    if (rc == -ECONNRESET || rc == -EPIPE)
        return fail(s, EL_EPROTO,
                    "the store closed the connection when "
                    "asked to authenticate: it knows no job secrets (an "
                    "older elrun?)");
    if (rc)
        return rc;
    if (nlen == 0) {
        free(nonce);
        return fail(s, -EACCES,
                    "the store has no job secret but this side "
                    "has one: start the store with the same secret "
                    "(elrun store --secret-file PATH), otherwise anyone who "
                    "reaches it can write the job's keys");
    }
    if (nlen != EL_AUTH_NONCE) {
        free(nonce);
        return broken(s, EL_EPROTO, "AUTH");
    }
    el__auth_mac(secret, len, EL_AUTH_CLIENT_TAG, nonce, nlen, NULL, 0, mac);
    rc = el__auth_nonce(mine);
    if (!rc)
        el__auth_mac(secret, len, EL_AUTH_SERVER_TAG, nonce, nlen, mine,
                     sizeof mine, want);
    free(nonce);
    if (rc)
        return fail(s, rc, "no random bytes for a nonce: %s", el_strerror(rc));
    TRY(begin(s, EL_CODE_X_AUTH));
    TRY(put_str(s, mac, sizeof mac));
    TRY(put_str(s, mine, sizeof mine));
    TRY(send_req(s, "AUTH"));
    rc = recv_u8(s, &st, io_deadline(s), "AUTH");
    if (rc == 0 && st == 0)
        rc = recv_bytes(s, &proof, &plen, io_deadline(s), "AUTH");
    if (rc == -ECONNRESET || rc == -EPIPE || (rc == 0 && st != 0)) {
        broken(s, -EACCES, "AUTH");
        return fail(s, -EACCES,
                    "the store refused this side's job secret: "
                    "the secret files differ");
    }
    if (rc)
        return rc;
    int ok = plen == EL_AUTH_MAC && memeql_sec(proof, want, EL_AUTH_MAC);
    free(proof);
    if (!ok) {
        broken(s, -EACCES, "AUTH");
        return fail(s, -EACCES,
                    "the store's answer does not prove it knows "
                    "the job secret: it is not the job's store");
    }
    return 0;
}
