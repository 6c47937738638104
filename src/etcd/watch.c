/* watch.c -- etcd watches over the gateway: a streaming POST to /v3/watch
 * whose reply is chunked, one JSON object per line, for as long as the
 * connection stays open.  Each watch owns a curl multi handle with one easy
 * handle; el_etcd_watch_next() drives it with curl_multi_poll() (the
 * client's cancel fd is one of the polled fds), so a caller blocks without
 * polling etcd.  Chunk boundaries are not message boundaries: bytes are
 * buffered and split on '\n'.
 *
 * If the stream ends (its member died or closed it), the watch is created
 * again on the next member, from the revision after the last event handed
 * out (or received), so events are neither lost nor repeated.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elrun/err.h"
#include "etcd/etcd_int.h"

struct el_etcd_watch {
    struct el_etcd *c;
    CURLM *multi;
    CURL *easy;      /* in multi while 'running'                 */
    int running;     /* the stream is open                       */
    CURLcode end_rc; /* how it ended                             */
    char *key;
    int prefix;
    int filter;       /* EL_ETCD_WATCH_* (etcd's watch filters)   */
    int64_t next_rev; /* where a re-created watch starts (0: now) */
    int64_t compact_rev;
    size_t member;             /* index of the member streaming to us      */
    struct el_etcd_buf line;   /* bytes of an unfinished line              */
    struct el_etcd_event *evs; /* received, not yet handed out             */
    size_t n, cap;
    int created, canceled;
    char err[512]; /* an error line from the gateway           */
    char *body;
    char curl_err[CURL_ERROR_SIZE];
    struct curl_slist *hdrs; /* el__etcd_headers() at the stream's start  */
    int64_t last_data;       /* when the stream last sent bytes          */
    CURL *probe;             /* checks a silent member (lazily made)     */
};

/* A silent stream is normal (nothing changes); but a hung member is silent
 * too.  After this long without a byte, the member is asked for its status;
 * if it does not answer within request_timeout_ms, the watch moves. */
#define PROBE_AFTER_MS 3000

static void on_line(struct el_etcd_watch *w, const char *p, size_t len)
{
    const char *err = NULL;
    json_t *hold = NULL;
    size_t before = w->n;
    int64_t rev = 0;
    while (len && (p[len - 1] == '\r' || p[len - 1] == ' '))
        len--;
    if (len == 0)
        return;
    int rc =
        el__etcd_watch_parse(p, len, &w->evs, &w->n, &w->cap, &w->created,
                             &w->canceled, &w->compact_rev, &rev, &err, &hold);
    if ((rc || err) && !w->err[0])
        snprintf(w->err, sizeof w->err, "%s",
                 err ? err : "malformed watch message");
    json_decref(hold);
    if (w->created && w->next_rev == 0 && rev > 0)
        w->next_rev = rev + 1; /* "from now on" = after the created header */
    for (size_t i = before; i < w->n; i++)
        if (w->evs[i].kv.mod_revision + 1 > w->next_rev)
            w->next_rev = w->evs[i].kv.mod_revision + 1;
}

static size_t on_data(char *p, size_t sz, size_t nm, void *arg)
{
    struct el_etcd_watch *w = arg;
    size_t n = sz * nm;
    struct el_etcd_buf *b = &w->line;
    w->last_data = el__etcd_now_ms();
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return 0;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    size_t start = 0;
    for (size_t i = 0; i < b->len; i++) {
        if (b->p[i] == '\n') {
            on_line(w, b->p + start, i - start);
            start = i + 1;
        }
    }
    memmove(b->p, b->p + start, b->len - start);
    b->len -= start;
    return n;
}

static void stop_stream(struct el_etcd_watch *w)
{
    if (w->running) {
        el__curl.multi_remove_handle(w->multi, w->easy);
        w->running = 0;
    }
    w->line.len = 0;
}

static int start_stream(struct el_etcd_watch *w, size_t i)
{
    struct el_etcd *c = w->c;
    char url[512], rev[32];
    json_t *req = json_object();
    json_object_set_new(req, "key", el__etcd_json_b64(w->key, strlen(w->key)));
    if (w->prefix) {
        char *end = malloc(strlen(w->key) + 2);
        if (end) {
            size_t n = el__etcd_prefix_end(w->key, end);
            json_object_set_new(req, "range_end", el__etcd_json_b64(end, n));
            free(end);
        }
    }
    if (w->next_rev > 0) {
        snprintf(rev, sizeof rev, "%" PRId64, w->next_rev);
        json_object_set_new(req, "start_revision", json_string(rev));
    }
    if (w->filter & (EL_ETCD_WATCH_NO_PUT | EL_ETCD_WATCH_NO_DELETE)) {
        json_t *f = json_array();
        if (w->filter & EL_ETCD_WATCH_NO_PUT)
            json_array_append_new(f, json_string("NOPUT"));
        if (w->filter & EL_ETCD_WATCH_NO_DELETE)
            json_array_append_new(f, json_string("NODELETE"));
        json_object_set_new(req, "filters", f);
    }
    json_t *b = json_pack("{s:o}", "create_request", req);
    free(w->body);
    w->body = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    if (!w->body)
        return -ENOMEM;
    snprintf(url, sizeof url, "%s/v3/watch", c->m[i].url);
    el__curl.easy_reset(w->easy);
    el__etcd_setup_easy(c, w->easy);
    el__curl.easy_setopt(w->easy, CURLOPT_URL, url);
    el__curl.easy_setopt(w->easy, CURLOPT_POST, 1L);
    el__curl.easy_setopt(w->easy, CURLOPT_POSTFIELDS, w->body);
    el__curl.easy_setopt(w->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(w->body));
    el__curl.easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, on_data);
    el__curl.easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
    el__curl.easy_setopt(w->easy, CURLOPT_ERRORBUFFER, w->curl_err);
    el__curl.easy_setopt(w->easy, CURLOPT_TCP_KEEPALIVE, 1L);
    w->last_data = el__etcd_now_ms();
    w->curl_err[0] = '\0';
    w->created = 0;
    w->canceled = 0;
    w->err[0] = '\0';
    w->line.len = 0;
    w->member = i;
    /* The client's headers (with the current auth token) include "require
     * leader": a member cut off from the leader cancels the watch (etcd's
     * WithRequireLeader, as gRPC metadata through the gateway), so that it
     * moves to a member that still sees writes. */
    struct curl_slist *h = el__etcd_headers(c);
    if (!h)
        return -ENOMEM;
    el__curl.slist_free_all(w->hdrs);
    w->hdrs = h;
    el__curl.easy_setopt(w->easy, CURLOPT_HTTPHEADER, w->hdrs);
    if (el__curl.multi_add_handle(w->multi, w->easy) != CURLM_OK)
        return -ENOMEM;
    w->running = 1;
    return 0;
}

/* Run the transfer for up to timeout_ms (0: only what is ready). */
static int pump(struct el_etcd_watch *w, int timeout_ms)
{
    struct curl_waitfd extra = {.fd = w->c->cancel_fd,
                                .events = CURL_WAIT_POLLIN};
    int still = 0, numfds = 0;
    el__curl.multi_perform(w->multi, &still);
    if (still && timeout_ms > 0) {
        el__curl.multi_poll(w->multi, w->c->cancel_fd >= 0 ? &extra : NULL,
                            w->c->cancel_fd >= 0 ? 1 : 0, timeout_ms, &numfds);
        if (extra.revents)
            return -ECANCELED;
        el__curl.multi_perform(w->multi, &still);
    }
    int q;
    CURLMsg *m;
    while ((m = el__curl.multi_info_read(w->multi, &q))) {
        if (m->msg == CURLMSG_DONE && m->easy_handle == w->easy) {
            w->end_rc = m->data.result;
            el__curl.multi_remove_handle(w->multi, w->easy);
            w->running = 0;
        }
    }
    return 0;
}

/* Why the stream on member i ended, into the member's last_err. */
static void note_end(struct el_etcd_watch *w, size_t i)
{
    struct el_etcd_member *m = &w->c->m[i];
    if (w->err[0])
        snprintf(m->last_err, sizeof m->last_err, "watch: %.180s", w->err);
    else if (w->end_rc != CURLE_OK)
        el__etcd_describe_curl(w->end_rc, w->curl_err, m->last_err,
                               sizeof m->last_err);
    else
        snprintf(m->last_err, sizeof m->last_err,
                 "watch stream closed by the member");
}

/* Create the watch on some member, starting with 'first', and wait until
 * etcd confirms it. */
static int establish(struct el_etcd_watch *w, size_t first)
{
    struct el_etcd *c = w->c;
    int64_t deadline = el__etcd_now_ms() + c->opts.op_timeout_ms;
    int backoff = 50, tls_all, renewed = 0;
    for (;;) {
        tls_all = 1;
        for (size_t k = 0; k < c->nm; k++) {
            size_t i = (first + k) % c->nm;
            int64_t now = el__etcd_now_ms();
            if (now >= deadline) {
                tls_all = 0; /* out of time, not a TLS verdict */
                goto unreachable;
            }
            int64_t until = now + c->opts.request_timeout_ms;
            if (until > deadline)
                until = deadline;
            int rc = start_stream(w, i);
            if (rc)
                return el__etcd_fail(c, rc, "etcd watch: out of memory");
            while (w->running && !w->created && !w->canceled && !w->err[0]) {
                int64_t left = until - el__etcd_now_ms();
                if (left <= 0)
                    break;
                if (pump(w, left > 200 ? 200 : (int)left) == -ECANCELED) {
                    stop_stream(w);
                    return el__etcd_fail(c, -ECANCELED, "etcd watch: canceled");
                }
            }
            if (w->created || w->canceled) {
                if (i != c->cur)
                    c->failovers++;
                c->cur = i;
                return 0;
            }
            if (w->err[0] && strstr(w->err, "invalid auth token") && !renewed) {
                /* the token expired: log in again, then retry here */
                stop_stream(w);
                renewed = 1;
                if ((rc = el__etcd_auth_renew(c)))
                    return rc;
                k--;
                continue;
            }
            if (w->err[0] && w->running && !strstr(w->err, "no leader")) {
                /* etcd refused the watch itself: not a member failure. */
                stop_stream(w);
                return el__etcd_fail(c, EL_EPROTO, "etcd watch %s on %s: %s",
                                     w->key, c->m[i].url, w->err);
            }
            if (w->running && w->err[0]) {
                stop_stream(w);
                note_end(w, i);
                tls_all = 0;
            } else if (w->running) {
                stop_stream(w);
                snprintf(c->m[i].last_err, sizeof c->m[i].last_err,
                         "watch not confirmed within %d ms",
                         c->opts.request_timeout_ms);
                tls_all = 0;
            } else {
                note_end(w, i);
                if (strncmp(c->m[i].last_err, "TLS failure", 11) != 0)
                    tls_all = 0;
            }
        }
        if (tls_all)
            goto unreachable;
        int64_t left = deadline - el__etcd_now_ms();
        if (left <= 0)
            goto unreachable;
        int ms = backoff < left ? backoff : (int)left;
        if (el__etcd_fd_ready(c->cancel_fd))
            return el__etcd_fail(c, -ECANCELED, "etcd watch: canceled");
        struct curl_waitfd extra = {.fd = c->cancel_fd,
                                    .events = CURL_WAIT_POLLIN};
        el__curl.multi_poll(w->multi, c->cancel_fd >= 0 ? &extra : NULL,
                            c->cancel_fd >= 0 ? 1 : 0, ms, NULL);
        backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
        first = (first + 1) % c->nm;
    }
unreachable : {
    size_t off = (size_t)snprintf(
        c->errmsg, sizeof c->errmsg, "etcd %s: cannot watch %s, members tried:",
        tls_all ? "TLS failure" : "unreachable", w->key);
    for (size_t i = 0; i < c->nm && off < sizeof c->errmsg; i++)
        off += (size_t)snprintf(c->errmsg + off, sizeof c->errmsg - off,
                                "%s %s (%s)", i ? ";" : "", c->m[i].url,
                                c->m[i].last_err);
    return tls_all ? EL_ETLS : -EHOSTUNREACH;
}
}

static size_t discard(char *p, size_t sz, size_t nm, void *arg)
{
    return sz * nm;
}

/* Does the stream's member still answer?  0 yes; else its last_err says. */
static int probe_member(struct el_etcd_watch *w)
{
    struct el_etcd *c = w->c;
    struct el_etcd_member *m = &c->m[w->member];
    char url[512];
    if (!w->probe && !(w->probe = el__curl.easy_init()))
        return 0; /* cannot tell: assume alive */
    snprintf(url, sizeof url, "%s/v3/maintenance/status", m->url);
    el__curl.easy_reset(w->probe);
    el__etcd_setup_easy(c, w->probe);
    el__curl.easy_setopt(w->probe, CURLOPT_URL, url);
    el__curl.easy_setopt(w->probe, CURLOPT_POSTFIELDS, "{}");
    el__curl.easy_setopt(w->probe, CURLOPT_TIMEOUT_MS,
                         (long)c->opts.request_timeout_ms);
    el__curl.easy_setopt(w->probe, CURLOPT_WRITEFUNCTION, discard);
    el__curl.easy_setopt(w->probe, CURLOPT_ERRORBUFFER, w->curl_err);
    w->curl_err[0] = '\0';
    CURLcode rc = el__curl.easy_perform(w->probe);
    if (rc == CURLE_OK)
        return 0;
    char why[160];
    el__etcd_describe_curl(rc, w->curl_err, why, sizeof why);
    snprintf(m->last_err, sizeof m->last_err,
             "watch stream silent and member not answering: %.140s", why);
    return -1;
}

int el_etcd_watch_open(struct el_etcd *c, const char *key, int prefix,
                       int64_t start_revision, struct el_etcd_watch **out)
{
    return el_etcd_watch_open_filtered(c, key, prefix, start_revision, 0, out);
}

int el_etcd_watch_open_filtered(struct el_etcd *c, const char *key, int prefix,
                                int64_t start_revision, int filter,
                                struct el_etcd_watch **out)
{
    *out = NULL;
    if (!key || (!*key && !prefix))
        return el__etcd_fail(c, EL_EUSAGE, "etcd watch: empty key");
    struct el_etcd_watch *w = calloc(1, sizeof *w);
    if (!w)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    w->c = c;
    w->prefix = prefix;
    w->filter = filter;
    w->next_rev = start_revision > 0 ? start_revision : 0;
    w->key = strdup(key);
    w->multi = el__curl.multi_init();
    w->easy = el__curl.easy_init();
    if (!w->key || !w->multi || !w->easy) {
        el_etcd_watch_close(w);
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    }
    int rc = el__etcd_auth(c);
    if (rc == 0)
        rc = establish(w, c->cur);
    if (rc) {
        el_etcd_watch_close(w);
        return rc;
    }
    c->errmsg[0] = '\0';
    *out = w;
    return 0;
}

int el_etcd_watch_next(struct el_etcd_watch *w, struct el_etcd_event **evs,
                       size_t *n, int timeout_ms)
{
    struct el_etcd *c = w->c;
    int64_t deadline =
        timeout_ms < 0 ? INT64_MAX : el__etcd_now_ms() + timeout_ms;
    *evs = NULL;
    *n = 0;
    for (;;) {
        if (w->n) {
            *evs = w->evs;
            *n = w->n;
            w->evs = NULL;
            w->n = w->cap = 0;
            c->errmsg[0] = '\0';
            return 0;
        }
        if (w->canceled) {
            stop_stream(w);
            if (w->compact_rev > 0)
                return el__etcd_fail(
                    c, -ESTALE,
                    "etcd watch %s: revision %" PRId64 " was compacted "
                    "(oldest left: %" PRId64 "); read again and re-watch",
                    w->key, w->next_rev, w->compact_rev);
            return el__etcd_fail(
                c, strstr(w->err, "permission denied") ? -EACCES : EL_EPROTO,
                "etcd watch %s: canceled by etcd%s%s", w->key,
                w->err[0] ? ": " : "", w->err);
        }
        if (w->running && !w->err[0] &&
            el__etcd_now_ms() - w->last_data > PROBE_AFTER_MS) {
            if (probe_member(w)) {
                size_t failed = w->member;
                stop_stream(w);
                int rc = establish(w, (failed + 1) % c->nm);
                if (rc)
                    return rc;
                continue;
            }
            w->last_data = el__etcd_now_ms();
        }
        if (!w->running || w->err[0]) {
            size_t failed = w->member;
            if (w->running)
                stop_stream(w);
            note_end(w, failed);
            int rc = establish(w, (failed + 1) % c->nm);
            if (rc)
                return rc;
            continue;
        }
        int64_t left = deadline - el__etcd_now_ms();
        if (left <= 0)
            return el__etcd_fail(c, -ETIMEDOUT,
                                 "etcd watch %s: no event "
                                 "within %d ms",
                                 w->key, timeout_ms);
        if (pump(w, left > 1000 ? 1000 : (int)left) == -ECANCELED)
            return el__etcd_fail(c, -ECANCELED, "etcd watch: canceled");
    }
}

int64_t el_etcd_watch_revision(const struct el_etcd_watch *w)
{
    return w->next_rev;
}

int64_t el_etcd_watch_compact_revision(const struct el_etcd_watch *w)
{
    return w->compact_rev;
}

void el_etcd_watch_close(struct el_etcd_watch *w)
{
    if (!w)
        return;
    stop_stream(w);
    if (w->easy)
        el__curl.easy_cleanup(w->easy);
    if (w->probe)
        el__curl.easy_cleanup(w->probe);
    el__curl.slist_free_all(w->hdrs);
    if (w->multi)
        el__curl.multi_cleanup(w->multi);
    el_etcd_events_free(w->evs, w->n);
    free(w->line.p);
    free(w->body);
    free(w->key);
    free(w);
}
