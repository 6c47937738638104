/* client.c -- the etcd client object and its request engine: endpoint
 * parsing, one reusable curl handle (keep-alive connection to the current
 * member), TLS options, and el__etcd_call(), which POSTs a JSON body to one
 * member after another until one answers or the call's deadline passes.
 *
 * Failover rules.  A member that cannot be reached (refused, reset, timeout,
 * TLS failure) or that answers "unavailable" (no leader, request timed out,
 * leader changed) is left for the next one in the list; the client sticks to
 * the member that answered last.  After a whole pass over the members fails,
 * the engine backs off (50 ms doubling to 1 s) and tries again until
 * op_timeout_ms.  A request that was sent and then lost is "ambiguous": it
 * may have been applied.  Idempotent requests are simply retried;
 * transactions say how they want ambiguity handled (etcd_int.h).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/errfmt.h"
#include "elrun/err.h"
#include "etcd/etcd_int.h"

int64_t el__etcd_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int el__etcd_fd_ready(int fd)
{
    if (fd < 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

int el__etcd_fail(struct el_etcd *c, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    el__verrf(c->errmsg, sizeof c->errmsg, rc, fmt, ap);
    va_end(ap);
    return rc;
}

const char *el_etcd_errmsg(const struct el_etcd *c)
{
    return c ? c->errmsg : "no client";
}

const char *el_etcd_endpoint(const struct el_etcd *c)
{
    return c->m[c->cur].url;
}

uint64_t el_etcd_failovers(const struct el_etcd *c)
{
    return c->failovers;
}

void el_etcd_set_cancel_fd(struct el_etcd *c, int fd)
{
    c->cancel_fd = fd;
}

/* ---- open / close ---- */

static char *dup_opt(const char *s, int *bad)
{
    if (!s || !*s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *bad = 1;
    return d;
}

static int parse_endpoints(struct el_etcd *c, char *errbuf, size_t errlen)
{
    const char *proto = c->s_protocol ? c->s_protocol : "http";
    if (strcmp(proto, "http") != 0 && strcmp(proto, "https") != 0) {
        snprintf(errbuf, errlen,
                 "etcd: protocol must be http or https, not '%s'", proto);
        return EL_EUSAGE;
    }
    size_t cap = 1;
    for (const char *p = c->s_endpoints; *p; p++)
        cap += *p == ',';
    c->m = calloc(cap, sizeof *c->m);
    if (!c->m)
        return -ENOMEM;
    /* Tokenize a copy: s_endpoints stays whole, for clients made from these
     * options (the keeper's). */
    char *list = strdup(c->s_endpoints), *save = NULL;
    if (!list)
        return -ENOMEM;
    int rc = 0;
    for (char *tok = strtok_r(list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ' || *tok == '\t')
            tok++;
        size_t n = strlen(tok);
        while (n > 0 &&
               (tok[n - 1] == ' ' || tok[n - 1] == '/' || tok[n - 1] == '\t'))
            tok[--n] = '\0';
        if (n == 0)
            continue;
        const char *scheme = proto, *hostport = tok;
        if (strncmp(tok, "http://", 7) == 0) {
            scheme = "http";
            hostport = tok + 7;
        } else if (strncmp(tok, "https://", 8) == 0) {
            scheme = "https";
            hostport = tok + 8;
        } else if (strstr(tok, "://")) {
            snprintf(errbuf, errlen,
                     "etcd: endpoint '%s': only http:// and "
                     "https:// are supported",
                     tok);
            rc = EL_EUSAGE;
            break;
        }
        const char *colon = strrchr(hostport, ':');
        if (!*hostport || !colon || colon == hostport || !colon[1] ||
            strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
            strchr(hostport, '/')) {
            snprintf(errbuf, errlen, "etcd: endpoint '%s' is not host:port",
                     tok);
            rc = EL_EUSAGE;
            break;
        }
        size_t ulen = strlen(scheme) + 3 + strlen(hostport) + 1;
        char *url = malloc(ulen);
        if (!url) {
            rc = -ENOMEM;
            break;
        }
        snprintf(url, ulen, "%s://%s", scheme, hostport);
        c->m[c->nm++].url = url;
    }
    free(list);
    if (rc)
        return rc;
    if (c->nm == 0) {
        snprintf(errbuf, errlen, "etcd: no endpoint given");
        return EL_EUSAGE;
    }
    return 0;
}

int el_etcd_open(struct el_etcd **out, const struct el_etcd_opts *opts,
                 char *errbuf, size_t errlen)
{
    char dummy[8];
    if (!errbuf) {
        errbuf = dummy;
        errlen = sizeof dummy;
    }
    errbuf[0] = '\0';
    *out = NULL;
    if (!opts || !opts->endpoints) {
        snprintf(errbuf, errlen, "etcd: no endpoint given");
        return EL_EUSAGE;
    }
    char lerr[512];
    int rc = el__curl_load(lerr, sizeof lerr);
    if (rc) {
        snprintf(errbuf, errlen, "etcd: %s", lerr);
        return rc;
    }
    struct el_etcd *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    int bad = 0;
    c->opts = *opts;
    c->cancel_fd = -1;
    c->s_endpoints = dup_opt(opts->endpoints, &bad);
    c->s_protocol = dup_opt(opts->protocol, &bad);
    c->s_cacert = dup_opt(opts->cacert, &bad);
    c->s_cert = dup_opt(opts->cert, &bad);
    c->s_key = dup_opt(opts->key, &bad);
    c->s_user = dup_opt(opts->user, &bad);
    c->s_password = dup_opt(opts->password, &bad);
    c->opts.endpoints = c->s_endpoints;
    c->opts.protocol = c->s_protocol;
    c->opts.cacert = c->s_cacert;
    c->opts.cert = c->s_cert;
    c->opts.key = c->s_key;
    c->opts.user = c->s_user;
    c->opts.password = c->s_password;
    if (c->opts.connect_timeout_ms <= 0)
        c->opts.connect_timeout_ms = 1000;
    if (c->opts.request_timeout_ms <= 0)
        c->opts.request_timeout_ms = 2000;
    if (c->opts.op_timeout_ms <= 0)
        c->opts.op_timeout_ms = 15000;
    if (bad) {
        el_etcd_close(c);
        return -ENOMEM;
    }
    if (!c->s_endpoints) {
        snprintf(errbuf, errlen, "etcd: no endpoint given");
        el_etcd_close(c);
        return EL_EUSAGE;
    }
    rc = parse_endpoints(c, errbuf, errlen);
    if (rc == 0 && (c->s_cert != NULL) != (c->s_key != NULL)) {
        snprintf(errbuf, errlen,
                 "etcd: a client certificate needs both cert "
                 "and key");
        rc = EL_EUSAGE;
    }
    if (rc == 0 && (c->s_cacert || c->s_cert)) {
        int any_tls = 0;
        for (size_t i = 0; i < c->nm; i++)
            any_tls |= strncmp(c->m[i].url, "https://", 8) == 0;
        if (!any_tls) {
            snprintf(errbuf, errlen,
                     "etcd: cacert/cert/key given but no "
                     "endpoint uses https (set protocol=https or write "
                     "https://host:port)");
            rc = EL_EUSAGE;
        }
    }
    if (rc == 0 && c->s_password && !c->s_user) {
        snprintf(errbuf, errlen, "etcd: a password needs a user");
        rc = EL_EUSAGE;
    }
    if (rc == 0) {
        c->easy = el__curl.easy_init();
        c->hdrs = el__etcd_headers(c);
        if (!c->easy || !c->hdrs)
            rc = -ENOMEM;
    }
    if (rc) {
        el_etcd_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

void el_etcd_close(struct el_etcd *c)
{
    if (!c)
        return;
    if (c->easy)
        el__curl.easy_cleanup(c->easy);
    if (c->hdrs)
        el__curl.slist_free_all(c->hdrs);
    for (size_t i = 0; i < c->nm; i++)
        free(c->m[i].url);
    free(c->m);
    free(c->resp.p);
    free(c->s_endpoints);
    free(c->s_protocol);
    free(c->s_cacert);
    free(c->s_cert);
    free(c->s_key);
    free(c->s_user);
    if (c->s_password) {
        memset(c->s_password, 0, strlen(c->s_password));
        free(c->s_password);
    }
    free(c->token);
    free(c);
}

/* ---- curl plumbing ---- */

struct curl_slist *el__etcd_headers(const struct el_etcd *c)
{
    struct curl_slist *h =
        el__curl.slist_append(NULL, "Content-Type: application/json");
    if (h)
        h = el__curl.slist_append(h, "Expect:");
    /* etcd's "require leader" (gRPC metadata through the gateway): a member
     * that has lost its leader says so at once instead of holding the
     * request, and cancels watches, so the client moves on. */
    if (h)
        h = el__curl.slist_append(h, "Grpc-Metadata-hasleader: true");
    if (h && c->token) {
        size_t n = strlen(c->token) + 32;
        char *line = malloc(n);
        if (!line) {
            el__curl.slist_free_all(h);
            return NULL;
        }
        snprintf(line, n, "Authorization: %s", c->token);
        struct curl_slist *h2 = el__curl.slist_append(h, line);
        free(line);
        if (!h2)
            el__curl.slist_free_all(h);
        h = h2;
    }
    return h;
}

static int set_token(struct el_etcd *c, const char *token)
{
    char *t = token ? strdup(token) : NULL;
    if (token && !t)
        return -ENOMEM;
    free(c->token);
    c->token = t;
    struct curl_slist *h = el__etcd_headers(c);
    if (!h)
        return -ENOMEM;
    el__curl.slist_free_all(c->hdrs);
    c->hdrs = h;
    return 0;
}

int el__etcd_auth_renew(struct el_etcd *c)
{
    int rc = set_token(c, NULL);
    return rc ? rc : el__etcd_auth(c);
}

int el__etcd_auth(struct el_etcd *c)
{
    if (!c->s_user || c->token)
        return 0;
    json_t *b = json_pack("{s:s,s:s}", "name", c->s_user, "password",
                          c->s_password ? c->s_password : ""),
           *r;
    if (!b)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    int rc = el__etcd_call(c, "/v3/auth/authenticate", b, EL_ETCD_RETRY_ALWAYS,
                           &r, NULL);
    if (rc) {
        if (strstr(c->errmsg, "authentication is not enabled"))
            return 0; /* nothing to do: requests go without a token */
        if (rc == EL_EUSAGE || rc == -EACCES) {
            char why[sizeof c->errmsg];
            snprintf(why, sizeof why, "%s", c->errmsg);
            rc = el__etcd_fail(c, -EACCES,
                               "etcd: user %s cannot log in: "
                               "%.900s",
                               c->s_user, why);
        }
        return rc;
    }
    const char *tok = json_string_value(json_object_get(r, "token"));
    rc = tok ? set_token(c, tok)
             : el__etcd_fail(c, EL_EPROTO, "etcd authenticate: no token");
    json_decref(r);
    return rc;
}

static size_t on_body(char *p, size_t sz, size_t nm, void *arg)
{
    struct el_etcd_buf *b = arg;
    size_t n = sz * nm;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return 0; /* curl fails the transfer with CURLE_WRITE_ERROR */
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

/* The request body is handed to curl through a read callback, not
 * POSTFIELDS, so that the engine knows whether any of it left: curl may
 * resend a request on a fresh connection after a reused one died, and then
 * report only the fresh connection's failure (e.g. "cannot connect"). */
struct upload {
    const char *p;
    size_t len, off;
    int handed; /* some of the body was given to curl       */
};

static size_t on_read(char *buf, size_t sz, size_t nm, void *arg)
{
    struct upload *u = arg;
    size_t n = sz * nm;
    if (n > u->len - u->off)
        n = u->len - u->off;
    memcpy(buf, u->p + u->off, n);
    u->off += n;
    if (n)
        u->handed = 1;
    return n;
}

static int on_seek(void *arg, curl_off_t offset, int origin)
{
    struct upload *u = arg;
    if (origin != SEEK_SET || offset < 0 || (size_t)offset > u->len)
        return CURL_SEEKFUNC_CANTSEEK;
    u->off = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut,
                       curl_off_t un)
{
    struct el_etcd *c = arg;
    return el__etcd_fd_ready(c->cancel_fd); /* non-zero aborts */
}

void el__etcd_setup_easy(struct el_etcd *c, CURL *h)
{
    el__curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    el__curl.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                         (long)c->opts.connect_timeout_ms);
    el__curl.easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    el__curl.easy_setopt(h, CURLOPT_HTTPHEADER, c->hdrs);
    el__curl.easy_setopt(h, CURLOPT_PROXY, ""); /* no environment proxy */
    el__curl.easy_setopt(h, CURLOPT_NOPROXY, "*");
    if (c->s_cacert)
        el__curl.easy_setopt(h, CURLOPT_CAINFO, c->s_cacert);
    if (c->s_cert) {
        el__curl.easy_setopt(h, CURLOPT_SSLCERT, c->s_cert);
        el__curl.easy_setopt(h, CURLOPT_SSLKEY, c->s_key);
    }
}

int el__etcd_describe_curl(CURLcode rc, const char *errbuf, char *buf,
                           size_t len)
{
    const char *detail =
        errbuf && errbuf[0] ? errbuf : el__curl.easy_strerror(rc);
    int tls = 0;
    switch (rc) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_USE_SSL_FAILED:
        tls = 1;
        snprintf(buf, len, "TLS failure: %s", detail);
        break;
    case CURLE_COULDNT_CONNECT:
        snprintf(buf, len, "cannot connect: %s", detail);
        break;
    case CURLE_OPERATION_TIMEDOUT:
        snprintf(buf, len, "timed out: %s", detail);
        break;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        /* TLS 1.3 reports a rejected client certificate as the server's
         * alert on the first read after the handshake, often after curl
         * sent the request: the server refused the connection before it
         * read a byte of it. A reset or an EOF in mid-reply is no TLS
         * failure (the request may have been applied). */
        if (errbuf && strstr(errbuf, "alert")) {
            tls = 1;
            snprintf(buf, len, "TLS failure: %s", detail);
            break;
        }
        snprintf(buf, len, "%s", detail);
        break;
    default:
        snprintf(buf, len, "%s", detail);
        break;
    }
    return tls;
}

/* Is a member's "unavailable" reply certainly not applied? */
static int unavailable_unapplied(const char *msg)
{
    return msg && (strstr(msg, "no leader") || strstr(msg, "not capable") ||
                   strstr(msg, "too many requests") ||
                   strstr(msg, "not started") || strstr(msg, "stopped"));
}

enum attempt {
    ATT_OK,     /* a reply (maybe an etcd error), parsed              */
    ATT_UNSENT, /* member failed, request certainly not applied       */
    ATT_LOST,   /* member failed, request may have been applied       */
    ATT_TLS,    /* TLS failure with this member                       */
    ATT_CANCELED,
};

/* One POST of body to member i within timeout_ms. */
static enum attempt attempt(struct el_etcd *c, size_t i, const char *path,
                            const char *body, size_t blen, int timeout_ms,
                            json_t **reply)
{
    struct el_etcd_member *m = &c->m[i];
    char url[512];
    snprintf(url, sizeof url, "%s%s", m->url, path);
    CURL *h = c->easy;
    el__curl.easy_reset(h);
    el__etcd_setup_easy(c, h);
    el__curl.easy_setopt(h, CURLOPT_URL, url);
    struct upload up = {.p = body, .len = blen};
    el__curl.easy_setopt(h, CURLOPT_POST, 1L);
    el__curl.easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    el__curl.easy_setopt(h, CURLOPT_READDATA, &up);
    el__curl.easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
    el__curl.easy_setopt(h, CURLOPT_SEEKDATA, &up);
    el__curl.easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    el__curl.easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    el__curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    el__curl.easy_setopt(h, CURLOPT_WRITEDATA, &c->resp);
    el__curl.easy_setopt(h, CURLOPT_ERRORBUFFER, c->curl_err);
    if (c->cancel_fd >= 0) {
        el__curl.easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        el__curl.easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        el__curl.easy_setopt(h, CURLOPT_XFERINFODATA, c);
    }
    c->curl_err[0] = '\0';
    c->resp.len = 0;
    CURLcode rc = el__curl.easy_perform(h);
    if (rc == CURLE_ABORTED_BY_CALLBACK)
        return ATT_CANCELED;
    if (rc != CURLE_OK) {
        int tls = el__etcd_describe_curl(rc, c->curl_err, m->last_err,
                                         sizeof m->last_err);
        /* A TLS failure: the member refused the connection before reading
         * the request. Nothing of the body left: it never saw it. */
        if (tls)
            return ATT_TLS;
        if (!up.handed)
            return ATT_UNSENT;
        return ATT_LOST;
    }
    long status = 0;
    el__curl.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    json_error_t jerr;
    json_t *root =
        c->resp.len ? json_loadb(c->resp.p, c->resp.len, 0, &jerr) : NULL;
    if (!root || !json_is_object(root)) {
        json_decref(root);
        snprintf(m->last_err, sizeof m->last_err,
                 "HTTP %ld with %s (not etcd's v3 gateway?)", status,
                 c->resp.len ? "a reply that is not JSON" : "an empty reply");
        return ATT_LOST;
    }
    int code;
    const char *msg;
    if (el__etcd_json_error(root, &code, &msg) && (code == 14 || code == 4)) {
        snprintf(m->last_err, sizeof m->last_err, "unavailable: %.120s%s", msg,
                 strncmp(m->url, "https", 5) == 0 &&
                         (strstr(msg, "broken pipe") ||
                          strstr(msg, "closed network connection") ||
                          strstr(msg, "connection closed"))
                     ? " (etcd's gateway cannot reach its own gRPC server: "
                       "with --client-cert-auth the server certificate must "
                       "also allow client auth)"
                     : "");
        int unapplied = unavailable_unapplied(msg);
        json_decref(root);
        return unapplied ? ATT_UNSENT : ATT_LOST;
    }
    *reply = root;
    return ATT_OK;
}

static int wait_backoff(struct el_etcd *c, int ms)
{
    struct pollfd p = {.fd = c->cancel_fd, .events = POLLIN};
    if (ms <= 0)
        return 0;
    int r = poll(&p, c->cancel_fd >= 0 ? 1 : 0, ms);
    return r > 0 ? -ECANCELED : 0;
}

static void list_tried(struct el_etcd *c, const char *what, int *tried, int rc)
{
    size_t off = (size_t)snprintf(c->errmsg, sizeof c->errmsg, "%s", what);
    for (size_t i = 0; i < c->nm && off < sizeof c->errmsg; i++) {
        if (!tried[i])
            continue;
        off += (size_t)snprintf(c->errmsg + off, sizeof c->errmsg - off,
                                "%s %s (%s)", off > strlen(what) ? ";" : "",
                                c->m[i].url, c->m[i].last_err);
    }
    (void)rc;
}

static int call_once(struct el_etcd *c, const char *path, json_t *body,
                     enum el_etcd_retry retry, json_t **reply, int *ambiguous);

/* How long after a member failure requests get the short per-member
 * timeout (long enough to cover an election). */
#define SUSPECT_MS 5000

int el__etcd_call(struct el_etcd *c, const char *path, json_t *body,
                  enum el_etcd_retry retry, json_t **reply, int *ambiguous)
{
    int is_auth = strcmp(path, "/v3/auth/authenticate") == 0, rc;
    if (!is_auth && c->s_user && !c->token && (rc = el__etcd_auth(c))) {
        json_decref(body);
        *reply = NULL;
        return rc;
    }
    if (is_auth || !c->token)
        return call_once(c, path, body, retry, reply, ambiguous);
    /* With a token: an expired one ("invalid auth token") is renewed and the
     * request sent again (it was refused, so it was not applied). */
    json_incref(body);
    rc = call_once(c, path, body, retry, reply, ambiguous);
    if (rc == -EACCES && strstr(c->errmsg, "invalid auth token")) {
        rc = el__etcd_auth_renew(c);
        if (rc == 0) {
            rc = call_once(c, path, body, retry, reply, ambiguous);
            body = NULL;
        }
    }
    json_decref(body);
    return rc;
}

static int call_once(struct el_etcd *c, const char *path, json_t *body,
                     enum el_etcd_retry retry, json_t **reply, int *ambiguous)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    *reply = NULL;
    if (ambiguous)
        *ambiguous = 0;
    if (!text)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    size_t blen = strlen(text);
    int64_t deadline = el__etcd_now_ms() + c->opts.op_timeout_ms;
    int *tried = calloc(c->nm, sizeof *tried);
    if (!tried) {
        free(text);
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    }
    int rc = 0, backoff = 50, all_tls, pass = 0;
    int suspect = el__etcd_now_ms() < c->suspect_until;
    size_t start = c->cur;
    for (;;) {
        all_tls = 1;
        for (size_t k = 0; k < c->nm; k++) {
            size_t i = (start + k) % c->nm;
            int64_t left = deadline - el__etcd_now_ms();
            if (left <= 0)
                goto out_of_time;
            int tmo = left < c->opts.request_timeout_ms
                          ? (int)left
                          : c->opts.request_timeout_ms;
            /* For a while after a member failed, the cluster may be
             * electing a leader, and a member holds what it forwarded to
             * the dead one until we give up: give retryable requests a
             * shorter time per member (500 ms, doubling each pass). */
            if (suspect && retry != EL_ETCD_RETRY_NEVER) {
                int quick = pass < 4 ? 500 << pass : INT32_MAX;
                if (tmo > quick)
                    tmo = quick;
            }
            json_t *r = NULL;
            enum attempt a = attempt(c, i, path, text, blen, tmo, &r);
            tried[i] = 1;
            if (a == ATT_OK) {
                c->cur = i;
                *reply = r;
                int code;
                const char *msg;
                if (el__etcd_json_error(r, &code, &msg)) {
                    int err = el__etcd_grpc_to_err(code, msg);
                    rc = el__etcd_fail(
                        c, err, "etcd %s: %s (%s)%s", c->m[i].url, msg, path,
                        strstr(msg, "user name is empty")
                            ? ": etcd has auth enabled, give a user and "
                              "password"
                            : "");
                    json_decref(r);
                    *reply = NULL;
                } else {
                    c->errmsg[0] = '\0';
                    rc = 0;
                }
                goto done;
            }
            if (a == ATT_CANCELED) {
                rc = el__etcd_fail(c, -ECANCELED, "etcd: canceled (%s)", path);
                goto done;
            }
            if (a != ATT_TLS)
                all_tls = 0;
            suspect = 1;
            c->suspect_until = el__etcd_now_ms() + SUSPECT_MS;
            /* The next call starts with the next member, not this one. */
            if (i == c->cur) {
                c->cur = (i + 1) % c->nm;
                c->failovers++;
            }
            if (a == ATT_LOST) {
                if (retry == EL_ETCD_RETRY_NEVER) {
                    rc = el__etcd_fail(
                        c, -ECONNABORTED,
                        "etcd %s failed with %s in flight (%s): it may or "
                        "may not have been applied",
                        c->m[i].url, path, c->m[i].last_err);
                    goto done;
                }
                if (ambiguous)
                    *ambiguous = 1;
            }
        }
        start = c->cur;
        if (all_tls) {
            list_tried(c, "etcd: TLS failure with every member:", tried, 0);
            rc = EL_ETLS;
            goto done;
        }
        int64_t left = deadline - el__etcd_now_ms();
        if (left <= 0)
            goto out_of_time;
        if (wait_backoff(c, backoff < left ? backoff : (int)left)) {
            rc = el__etcd_fail(c, -ECANCELED, "etcd: canceled (%s)", path);
            goto done;
        }
        backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
        pass++;
    }
out_of_time:
    list_tried(c, "etcd unreachable, members tried:", tried, 0);
    rc = -EHOSTUNREACH;
done:
    free(tried);
    free(text);
    return rc;
}

int el__etcd_context(struct el_etcd *c, int rc, const char *op, const char *key)
{
    char was[sizeof c->errmsg];
    if (rc == 0 || rc == EL_ENOTFOUND)
        return rc;
    snprintf(was, sizeof was, "%s", c->errmsg);
    return el__etcd_fail(c, rc, "%s %s: %.900s", op, key, was);
}

int el_etcd_status(struct el_etcd *c, uint64_t *member, uint64_t *leader)
{
    json_t *r;
    int rc = el__etcd_call(c, "/v3/maintenance/status", json_object(),
                           EL_ETCD_RETRY_ALWAYS, &r, NULL);
    if (rc)
        return rc;
    /* Member ids are uint64: parse them unsigned. */
    const char *l = json_string_value(json_object_get(r, "leader"));
    const char *m = json_string_value(
        json_object_get(json_object_get(r, "header"), "member_id"));
    if (leader)
        *leader = l ? strtoull(l, NULL, 10) : 0;
    if (member)
        *member = m ? strtoull(m, NULL, 10) : 0;
    json_decref(r);
    return 0;
}
