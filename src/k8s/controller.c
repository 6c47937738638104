/* controller.c -- the ElasticJob controller's loop: leader election on a
 * coordination.k8s.io/v1 Lease, three list+watch caches (ElasticJobs, and
 * the pods and services labelled group-name=elastic.pytorch.org), and for
 * every change a reconcile of each job (plan.c) whose plan is applied with
 * plain REST calls.
 *
 * One thread.  The watch streams run on a curl multi handle polled together
 * with a signalfd (SIGTERM/SIGINT end the loop within one poll); requests
 * are blocking on the client's own handle.  A watch resumes from the last
 * resourceVersion it saw when the stream ends or drops, and re-lists on
 * 410 Gone.  Writes: status through /status with the object's
 * resourceVersion (a 409 re-reads the job and plans again), pods deleted
 * with a uid precondition (never a newer pod of the same name), creates
 * that find the object there (409) are fine.  What this process did is
 * written into its caches at once, so the next pass does not repeat it
 * before the watch reports it.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "common/errfmt.h"
#include "elrun/err.h"
#include "elrun/log.h"
#include "k8s/k8s_int.h"

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static const char *md(const json_t *o, const char *k)
{
    return jstr(json_object_get(o, "metadata"), k);
}

/* ---- informers: list, then watch from the list's resourceVersion ---- */

struct inf {
    const char *kind; /* for logs */
    char path[512];   /* collection path */
    char query[256];  /* labelSelector=... or "" */
    json_t *cache;    /* "ns/name" -> object */
    char rv[64];
    CURL *h; /* the watch transfer, NULL when none */
    struct curl_slist *hdrs;
    struct el__k8s_buf line; /* the partial line of the stream */
    int need_list;
    int gone; /* 410 seen in the stream */
    double retry_at;
    unsigned long relists, rewatches;
};

struct ctl {
    const struct el__k8s_ctl_opts *o;
    struct el__k8s k;
    CURLM *multi;
    struct inf jobs, pods, svcs;
    int dirty;       /* something changed: reconcile */
    int all;         /* ... every job (after a list), else: */
    json_t *touched; /* "ns/job" -> true: the jobs whose objects changed */
    double resync_at, requeue_at;
    /* leader election */
    int leader;
    char identity[256], lease_ns[254], lease_name[254];
    char obs_holder[256], obs_renew[64];
    double obs_at, renewed_at, next_lease;
    unsigned long ev_seq;
    struct el__k8s_metrics m;
    char err[512];
};

static void key_of(const json_t *o, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", md(o, "namespace") ? md(o, "namespace") : "",
             md(o, "name") ? md(o, "name") : "");
}

static void cache_put(struct inf *f, json_t *o)
{
    char key[600];
    key_of(o, key, sizeof key);
    json_object_set(f->cache, key, o);
}

static void on_line(struct ctl *c, struct inf *f, const char *l, size_t n)
{
    json_t *e = json_loadb(l, n, 0, NULL);
    if (!e)
        return;
    const char *t = jstr(e, "type");
    json_t *o = json_object_get(e, "object");
    if (t && strcmp(t, "ERROR") == 0) {
        json_int_t code = json_integer_value(json_object_get(o, "code"));
        el_log(EL_LOG_INFO, "watch %s: %lld %s%s", f->kind, (long long)code,
               jstr(o, "message") ? jstr(o, "message") : "",
               code == 410 ? ": listing again" : "");
        if (code == 410)
            f->gone = 1;
    } else if (t && o) {
        const char *rv = md(o, "resourceVersion");
        if (rv)
            snprintf(f->rv, sizeof f->rv, "%s", rv);
        if (strcmp(t, "BOOKMARK") != 0) {
            char key[600];
            key_of(o, key, sizeof key);
            /* the job this event concerns: itself, or its pod's/service's */
            char jk[600];
            if (f == &c->jobs) {
                snprintf(jk, sizeof jk, "%s", key);
            } else {
                json_t *m = json_object_get(o, "metadata");
                snprintf(jk, sizeof jk, "%s/%s",
                         jstr(m, "namespace") ? jstr(m, "namespace") : "",
                         jstr(json_object_get(m, "labels"), "job-name")
                             ? jstr(json_object_get(m, "labels"), "job-name")
                             : "");
            }
            json_object_set_new(c->touched, jk, json_true());
            if (strcmp(t, "DELETED") == 0)
                json_object_del(f->cache, key);
            else
                json_object_set(f->cache, key, o);
            c->dirty = 1;
        }
    }
    json_decref(e);
}

struct wctx {
    struct ctl *c;
    struct inf *f;
};
static struct wctx wctx[3];

static size_t on_watch(char *d, size_t sz, size_t nm, void *u)
{
    struct wctx *w = u;
    struct inf *f = w->f;
    size_t n = sz * nm;
    struct el__k8s_buf *b = &f->line;
    if (el__k8s_buf_add(b, d, n))
        return 0;
    size_t start = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (b->p[i] != '\n')
            continue;
        if (i > start)
            on_line(w->c, f, b->p + start, i - start);
        start = i + 1;
    }
    memmove(b->p, b->p + start, b->n - start + 1);
    b->n -= start;
    return f->gone ? 0 : n; /* 0 ends the transfer: re-list */
}

static int list(struct ctl *c, struct inf *f)
{
    char p[1024];
    snprintf(p, sizeof p, "%s%s%s", f->path, f->query[0] ? "?" : "", f->query);
    long http;
    json_t *r;
    int rc = el__k8s_req(&c->k, "GET", p, NULL, &http, &r);
    if (rc)
        return el__errf(c->err, sizeof c->err, rc, "list %s: %s", f->kind,
                        c->k.err);
    if (http != 200) {
        char m[300];
        el__errf(c->err, sizeof c->err, EL_EPROTO, "list %s: %s", f->kind,
                 el__k8s_status_msg(r, http, m, sizeof m));
        json_decref(r);
        return EL_EPROTO;
    }
    json_object_clear(f->cache);
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(r, "items"), i, o) cache_put(f, o);
    const char *rv = jstr(json_object_get(r, "metadata"), "resourceVersion");
    snprintf(f->rv, sizeof f->rv, "%s", rv ? rv : "");
    json_decref(r);
    f->need_list = 0;
    f->gone = 0;
    f->relists++;
    c->m.relists++;
    c->dirty = 1;
    c->all = 1;
    el_log(EL_LOG_DEBUG, "listed %zu %s at resourceVersion %s",
           json_object_size(f->cache), f->kind, f->rv);
    return 0;
}

static void unwatch(struct ctl *c, struct inf *f)
{
    if (!f->h)
        return;
    el__curl.multi_remove_handle(c->multi, f->h);
    el__curl.easy_cleanup(f->h);
    el__curl.slist_free_all(f->hdrs);
    f->h = NULL;
    f->hdrs = NULL;
    f->line.n = 0;
}

static int watch(struct ctl *c, struct inf *f, struct wctx *w)
{
    f->h = el__curl.easy_init();
    if (!f->h)
        return -ENOMEM;
    int rc = el__k8s_setup(&c->k, f->h, &f->hdrs);
    if (rc) {
        el__curl.easy_cleanup(f->h);
        f->h = NULL;
        return el__errf(c->err, sizeof c->err, rc, "%s", c->k.err);
    }
    char url[2048];
    snprintf(url, sizeof url,
             "%s%s?watch=1&allowWatchBookmarks=true&timeoutSeconds=%d&"
             "resourceVersion=%s%s%s",
             c->k.server, f->path,
             c->o->watch_timeout_s > 0 ? c->o->watch_timeout_s : 300, f->rv,
             f->query[0] ? "&" : "", f->query);
    w->c = c;
    w->f = f;
    el__curl.easy_setopt(f->h, CURLOPT_URL, url);
    el__curl.easy_setopt(f->h, CURLOPT_HTTPHEADER, f->hdrs);
    el__curl.easy_setopt(f->h, CURLOPT_WRITEFUNCTION, on_watch);
    el__curl.easy_setopt(f->h, CURLOPT_WRITEDATA, w);
    el__curl.easy_setopt(f->h, CURLOPT_PRIVATE, w);
    /* a dead connection that stays silent: TCP keep-alive, and no byte for
     * longer than the server's own timeout */
    el__curl.easy_setopt(f->h, CURLOPT_TCP_KEEPALIVE, 1L);
    el__curl.easy_setopt(f->h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    el__curl.easy_setopt(
        f->h, CURLOPT_LOW_SPEED_TIME,
        (long)(c->o->watch_timeout_s > 0 ? c->o->watch_timeout_s : 300) + 30L);
    el__curl.multi_add_handle(c->multi, f->h);
    f->rewatches++;
    return 0;
}

/* Start what each informer needs: a list, or a watch. */
static int informers_step(struct ctl *c)
{
    struct inf *fs[3] = {&c->jobs, &c->pods, &c->svcs};
    for (int i = 0; i < 3; i++) {
        struct inf *f = fs[i];
        if (f->h || mono() < f->retry_at)
            continue;
        if (f->need_list || !f->rv[0]) {
            int rc = list(c, f);
            if (rc) {
                el_log(EL_LOG_WARN, "%s; retrying in 1 s", c->err);
                f->retry_at = mono() + 1;
                continue;
            }
        }
        if (watch(c, f, &wctx[i]))
            f->retry_at = mono() + 1;
    }
    return 0;
}

/* A watch transfer ended: resume (or re-list after a 410). */
static void watch_done(struct ctl *c, CURL *h, CURLcode rc)
{
    struct wctx *w = NULL;
    el__curl.easy_getinfo(h, CURLINFO_PRIVATE, (char **)&w);
    if (!w)
        return;
    struct inf *f = w->f;
    long http = 0;
    el__curl.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
    int gone = f->gone || http == 410;
    unwatch(c, f);
    if (gone) {
        if (!f->gone)
            el_log(EL_LOG_INFO,
                   "watch %s: 410 Gone from resourceVersion "
                   "%s: listing again",
                   f->kind, f->rv);
        f->need_list = 1;
        f->gone = 0;
        f->retry_at = 0;
    } else if (rc != CURLE_OK || http != 200) {
        el_log(EL_LOG_INFO,
               "watch %s ended (%s, HTTP %ld): resuming in 1 s "
               "from resourceVersion %s",
               f->kind, el__curl.easy_strerror(rc), http, f->rv);
        f->retry_at = mono() + 1;
    } else {
        f->retry_at = 0; /* timeoutSeconds: resume at once */
    }
}

/* ---- events ---- */

static void post_event(struct ctl *c, const json_t *job, const json_t *ev)
{
    char now[32], name[400], p[600];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    el__k8s_time(wall(), now);
    snprintf(name, sizeof name, "%s.%llx%04lx", md(job, "name"),
             (unsigned long long)ts.tv_sec * 1000000000ull +
                 (unsigned long long)ts.tv_nsec,
             c->ev_seq++ & 0xffff);
    const char *ns = md(job, "namespace");
    json_t *b = json_pack(
        "{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s,s:s,s:s},s:s,s:s,s:s,"
        "s:{s:s},s:s,s:s,s:i,s:s,s:s}",
        "apiVersion", "v1", "kind", "Event", "metadata", "name", name,
        "namespace", ns, "involvedObject", "apiVersion", EL_K8S_API, "kind",
        "ElasticJob", "name", md(job, "name"), "namespace", ns, "uid",
        md(job, "uid") ? md(job, "uid") : "", "resourceVersion",
        md(job, "resourceVersion") ? md(job, "resourceVersion") : "", "reason",
        jstr(ev, "reason"), "message", jstr(ev, "message"), "type",
        jstr(ev, "type"), "source", "component", EL_K8S_COMPONENT,
        "firstTimestamp", now, "lastTimestamp", now, "count", 1,
        "reportingComponent", EL_K8S_COMPONENT, "reportingInstance",
        c->identity);
    if (!b)
        return;
    snprintf(p, sizeof p, "/api/v1/namespaces/%s/events", ns);
    long http;
    json_t *r = NULL;
    if (el__k8s_req(&c->k, "POST", p, b, &http, &r) == 0 && http >= 300)
        el_log(EL_LOG_WARN, "event %s for %s/%s: HTTP %ld", jstr(ev, "reason"),
               ns, md(job, "name"), http);
    json_decref(r);
    json_decref(b);
}

/* ---- applying a plan ---- */

static json_t *children(struct inf *f, const json_t *job, int names)
{
    json_t *out = json_array();
    const char *ns = md(job, "namespace"), *name = md(job, "name"),
               *uid = md(job, "uid");
    const char *k;
    json_t *o;
    json_object_foreach(f->cache, k, o)
    {
        json_t *m = json_object_get(o, "metadata");
        const char *jn = jstr(json_object_get(m, "labels"), "job-name");
        if (!jn || strcmp(jn, name) || !jstr(m, "namespace") ||
            strcmp(jstr(m, "namespace"), ns))
            continue;
        /* owned by this job (not an older one of the same name) */
        json_t *ors = json_object_get(m, "ownerReferences");
        size_t i;
        json_t *r;
        int mine = 0;
        json_array_foreach(ors, i, r) if (jstr(r, "uid") && uid &&
                                          strcmp(jstr(r, "uid"), uid) == 0)
            mine = 1;
        if (!mine)
            continue;
        json_array_append_new(out, names ? json_string(jstr(m, "name"))
                                         : json_incref(o));
    }
    return out;
}

static int lease_valid(struct ctl *c)
{
    return !c->o->leader_elect ||
           (c->leader && mono() - c->renewed_at < c->o->lease_s);
}

static void job_path(char *p, size_t n, const json_t *job, const char *sub)
{
    snprintf(p, n, "/apis/" EL_K8S_API "/namespaces/%s/elasticjobs/%s%s",
             md(job, "namespace"), md(job, "name"), sub);
}

/* Reconcile one job; returns 1 when it must be planned again (409). */
static int reconcile(struct ctl *c, const char *key, json_t *job)
{
    json_t *pods = children(&c->pods, job, 0);
    json_t *svcs = children(&c->svcs, job, 1);
    struct el__k8s_plan_opts po = {.now = wall(),
                                   .unschedulable_s = c->o->unschedulable_s};
    struct el__k8s_plan pl;
    el__k8s_plan(job, pods, svcs, &po, &pl);
    json_decref(pods);
    json_decref(svcs);
    const char *ns = md(job, "namespace"), *name = md(job, "name");
    char p[1024], m[400];
    long http;
    json_t *r = NULL;
    int again = 0;
    if (pl.requeue_s > 0 &&
        (c->requeue_at == 0 || mono() + pl.requeue_s < c->requeue_at))
        c->requeue_at = mono() + pl.requeue_s;
    if (pl.delete_job) {
        job_path(p, sizeof p, job, "");
        if (el__k8s_req(&c->k, "DELETE", p, NULL, &http, &r) == 0 &&
            (http < 300 || http == 404))
            el_log(EL_LOG_INFO, "%s/%s: deleted (ttlSecondsAfterFinished)", ns,
                   name);
        json_decref(r);
        goto out;
    }
    /* 1. status first: a failure counted is on record before its pod goes */
    if (!json_equal(pl.status, json_object_get(job, "status"))) {
        json_t *b = json_deep_copy(job);
        json_object_set(b, "status", pl.status);
        job_path(p, sizeof p, job, "/status");
        int rc = el__k8s_req(&c->k, "PUT", p, b, &http, &r);
        json_decref(b);
        if (rc) {
            el_log(EL_LOG_WARN, "%s/%s: status: %s", ns, name, c->k.err);
            goto out;
        }
        if (http == 409) {
            c->m.conflicts++;
            json_decref(r);
            r = NULL;
            job_path(p, sizeof p, job, "");
            if (el__k8s_req(&c->k, "GET", p, NULL, &http, &r) == 0) {
                if (http == 200)
                    json_object_set(c->jobs.cache, key, r);
                else if (http == 404)
                    json_object_del(c->jobs.cache, key);
                again = http == 200;
            }
            goto out;
        }
        if (http == 404)
            goto out; /* deleted meanwhile */
        if (http >= 300) {
            el_log(EL_LOG_WARN, "%s/%s: status: %s", ns, name,
                   el__k8s_status_msg(r, http, m, sizeof m));
            goto out;
        }
        json_object_set(c->jobs.cache, key, r);
        const char *s0 = jstr(json_object_get(job, "status"), "state");
        const char *s1 = jstr(pl.status, "state");
        if (s1 && (!s0 || strcmp(s0, s1)))
            el_log(EL_LOG_INFO, "%s/%s: %s", ns, name, s1);
        json_decref(r);
        r = NULL;
    }
    /* 2. deletes (graceful; the uid precondition spares a newer pod) */
    size_t i;
    json_t *d;
    json_array_foreach(pl.remove, i, d)
    {
        if (!lease_valid(c))
            break;
        snprintf(p, sizeof p, "/api/v1/namespaces/%s/pods/%s", ns,
                 jstr(d, "name"));
        json_t *b = json_pack("{s:s,s:s,s:{s:s}}", "kind", "DeleteOptions",
                              "apiVersion", "v1", "preconditions", "uid",
                              jstr(d, "uid") ? jstr(d, "uid") : "");
        int rc = el__k8s_req(&c->k, "DELETE", p, b, &http, &r);
        json_decref(b);
        if (rc == 0 && http < 300) {
            el_log(EL_LOG_INFO, "%s/%s: deleted pod %s (%s)", ns, name,
                   jstr(d, "name"), jstr(d, "reason"));
            c->m.pods_deleted++;
            if (strcmp(jstr(d, "reason"), "replace failed pod") == 0)
                c->m.pods_replaced++;
            char k2[600], now[32];
            snprintf(k2, sizeof k2, "%s/%s", ns, jstr(d, "name"));
            json_t *cp = json_object_get(c->pods.cache, k2);
            if (cp)
                json_object_set_new(json_object_get(cp, "metadata"),
                                    "deletionTimestamp",
                                    json_string(el__k8s_time(wall(), now)));
            json_t *ev = json_pack("{s:s,s:s,s:s+}", "type", "Normal", "reason",
                                   "SuccessfulDeletePod", "message",
                                   "Deleted pod: ", jstr(d, "name"));
            post_event(c, job, ev);
            json_decref(ev);
        } else if (rc == 0 && http != 404 && http != 409) {
            el_log(EL_LOG_WARN, "%s/%s: delete pod %s: %s", ns, name,
                   jstr(d, "name"), el__k8s_status_msg(r, http, m, sizeof m));
        }
        json_decref(r);
        r = NULL;
    }
    /* 3. creates: the headless Service, then the pod */
    json_t *pod;
    json_array_foreach(pl.create, i, pod)
    {
        if (!lease_valid(c))
            break;
        const char *pn = md(pod, "name");
        char k2[600];
        snprintf(k2, sizeof k2, "%s/%s", ns, pn);
        if (!json_object_get(c->svcs.cache, k2)) {
            json_t *svc = el__k8s_service_for(job, pod);
            snprintf(p, sizeof p, "/api/v1/namespaces/%s/services", ns);
            if (el__k8s_req(&c->k, "POST", p, svc, &http, &r) == 0) {
                if (http < 300 && r)
                    cache_put(&c->svcs, r);
                else if (http != 409)
                    el_log(EL_LOG_WARN, "%s/%s: create service %s: %s", ns,
                           name, pn, el__k8s_status_msg(r, http, m, sizeof m));
            }
            json_decref(svc);
            json_decref(r);
            r = NULL;
        }
        snprintf(p, sizeof p, "/api/v1/namespaces/%s/pods", ns);
        int rc = el__k8s_req(&c->k, "POST", p, pod, &http, &r);
        if (rc == 0 && http < 300) {
            if (r)
                cache_put(&c->pods, r);
            c->m.pods_created++;
            el_log(EL_LOG_INFO, "%s/%s: created pod %s", ns, name, pn);
            json_t *ev = json_pack("{s:s,s:s,s:s+}", "type", "Normal", "reason",
                                   "SuccessfulCreatePod", "message",
                                   "Created pod: ", pn);
            post_event(c, job, ev);
            json_decref(ev);
        } else if (rc == 0 && http != 409) {
            el__k8s_status_msg(r, http, m, sizeof m);
            el_log(EL_LOG_WARN, "%s/%s: create pod %s: %s", ns, name, pn, m);
            json_t *ev = json_pack("{s:s,s:s,s:s}", "type", "Warning", "reason",
                                   "FailedCreatePod", "message", m);
            post_event(c, job, ev);
            json_decref(ev);
        } else if (rc) {
            el_log(EL_LOG_WARN, "%s/%s: create pod %s: %s", ns, name, pn,
                   c->k.err);
        }
        json_decref(r);
        r = NULL;
    }
    /* 4. services whose pod is gone for good */
    json_t *s;
    json_array_foreach(pl.services, i, s)
    {
        snprintf(p, sizeof p, "/api/v1/namespaces/%s/services/%s", ns,
                 json_string_value(s));
        if (el__k8s_req(&c->k, "DELETE", p, NULL, &http, &r) == 0 &&
            (http < 300 || http == 404)) {
            char k2[600];
            snprintf(k2, sizeof k2, "%s/%s", ns, json_string_value(s));
            json_object_del(c->svcs.cache, k2);
        }
        json_decref(r);
        r = NULL;
    }
    /* 5. events */
    json_t *ev;
    json_array_foreach(pl.events, i, ev)
    {
        el_log(EL_LOG_INFO, "%s/%s: %s: %s", ns, name, jstr(ev, "reason"),
               jstr(ev, "message"));
        post_event(c, job, ev);
    }
out:
    el__k8s_plan_free(&pl);
    return again;
}

/* Reconcile every job (full: after a list, at a resync or a requeue) or
 * those whose objects changed since the last pass. */
static void reconcile_all(struct ctl *c, int full)
{
    full = full || c->all;
    c->dirty = 0;
    c->all = 0;
    if (full)
        c->requeue_at = 0;
    /* a snapshot of the keys: reconcile() may replace cache entries */
    json_t *keys = json_array();
    const char *k;
    json_t *o;
    json_object_foreach(c->jobs.cache, k,
                        o) if (full || json_object_get(c->touched, k))
        json_array_append_new(keys, json_string(k));
    json_object_clear(c->touched);
    size_t i;
    json_t *kv;
    json_array_foreach(keys, i, kv)
    {
        for (int tries = 0; tries < 3; tries++) {
            if (!lease_valid(c))
                break;
            json_t *job = json_object_get(c->jobs.cache, json_string_value(kv));
            if (!job || md(job, "deletionTimestamp"))
                break;
            json_incref(job);
            double t0 = mono();
            int again = reconcile(c, json_string_value(kv), job);
            double dt = mono() - t0;
            c->m.rec_sum += dt;
            c->m.rec_count++;
            if (dt > c->m.rec_max)
                c->m.rec_max = dt;
            json_decref(job);
            if (!again)
                break;
        }
    }
    json_decref(keys);
}

/* ---- leader election ---- */

static char *micro_time(char *buf)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, 40 - n, ".%06ldZ", ts.tv_nsec / 1000);
    return buf;
}

static void lease_path(const struct ctl *c, char *p, size_t n, int item)
{
    snprintf(p, n, "/apis/coordination.k8s.io/v1/namespaces/%s/leases%s%s",
             c->lease_ns, item ? "/" : "", item ? c->lease_name : "");
}

/* One try to take or renew the Lease; updates c->leader. */
static void lease_step(struct ctl *c)
{
    char p[700], now[40];
    lease_path(c, p, sizeof p, 1);
    long http;
    json_t *r = NULL;
    int dur = (int)(c->o->lease_s + 0.5);
    if (dur < 1)
        dur = 1;
    if (el__k8s_req(&c->k, "GET", p, NULL, &http, &r)) {
        el_log(EL_LOG_WARN, "lease: %s", c->k.err);
        return;
    }
    json_t *b = NULL;
    const char *method = "PUT";
    int was = c->leader;
    if (http == 404) {
        b = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:i,s:s,s:s,s:i}}",
                      "apiVersion", "coordination.k8s.io/v1", "kind", "Lease",
                      "metadata", "name", c->lease_name, "namespace",
                      c->lease_ns, "spec", "holderIdentity", c->identity,
                      "leaseDurationSeconds", dur, "acquireTime",
                      micro_time(now), "renewTime", now, "leaseTransitions", 0);
        method = "POST";
        lease_path(c, p, sizeof p, 0);
    } else if (http == 200) {
        json_t *sp = json_object_get(r, "spec");
        const char *holder = jstr(sp, "holderIdentity");
        const char *renew = jstr(sp, "renewTime");
        if (!holder)
            holder = "";
        if (!renew)
            renew = "";
        if (strcmp(holder, c->identity) != 0) {
            /* someone else's: wait until it has not changed for its
             * duration, measured on our own clock (as client-go does) */
            if (strcmp(holder, c->obs_holder) || strcmp(renew, c->obs_renew)) {
                snprintf(c->obs_holder, sizeof c->obs_holder, "%s", holder);
                snprintf(c->obs_renew, sizeof c->obs_renew, "%s", renew);
                c->obs_at = mono();
            }
            json_int_t d =
                json_integer_value(json_object_get(sp, "leaseDurationSeconds"));
            if (holder[0] && mono() - c->obs_at < (double)(d > 0 ? d : dur)) {
                c->leader = 0;
                goto out;
            }
            json_int_t tr =
                json_integer_value(json_object_get(sp, "leaseTransitions"));
            json_object_set_new(sp, "leaseTransitions", json_integer(tr + 1));
            json_object_set_new(sp, "acquireTime",
                                json_string(micro_time(now)));
            el_log(EL_LOG_INFO, "lease %s/%s: taking over from \"%s\"",
                   c->lease_ns, c->lease_name, holder);
        }
        json_object_set_new(sp, "holderIdentity", json_string(c->identity));
        json_object_set_new(sp, "leaseDurationSeconds", json_integer(dur));
        json_object_set_new(sp, "renewTime", json_string(micro_time(now)));
        b = json_incref(r);
    } else {
        char m[300];
        el_log(EL_LOG_WARN, "lease: %s",
               el__k8s_status_msg(r, http, m, sizeof m));
        goto out;
    }
    json_decref(r);
    r = NULL;
    double t0 = mono();
    if (el__k8s_req(&c->k, method, p, b, &http, &r) == 0 && http < 300) {
        c->leader = 1;
        c->renewed_at = t0;
    } else if (http == 409) {
        c->leader = 0; /* another took it (or renewed) first */
    }
out:
    json_decref(b);
    json_decref(r);
    if (c->leader && !was)
        el_log(EL_LOG_INFO, "lease %s/%s: leading as \"%s\"", c->lease_ns,
               c->lease_name, c->identity);
}

static void lease_release(struct ctl *c)
{
    char p[700], now[40];
    lease_path(c, p, sizeof p, 1);
    long http;
    json_t *r = NULL, *r2 = NULL;
    if (el__k8s_req(&c->k, "GET", p, NULL, &http, &r) == 0 && http == 200) {
        json_t *sp = json_object_get(r, "spec");
        if (jstr(sp, "holderIdentity") &&
            strcmp(jstr(sp, "holderIdentity"), c->identity) == 0) {
            json_object_set_new(sp, "holderIdentity", json_string(""));
            json_object_set_new(sp, "leaseDurationSeconds", json_integer(1));
            json_object_set_new(sp, "renewTime", json_string(micro_time(now)));
            el__k8s_req(&c->k, "PUT", p, r, &http, &r2);
            el_log(EL_LOG_INFO, "lease %s/%s: released", c->lease_ns,
                   c->lease_name);
        }
    }
    json_decref(r);
    json_decref(r2);
}

/* ---- the loop ---- */

static void inf_init(struct inf *f, const char *kind, const char *ns,
                     const char *group_path, const char *plural,
                     const char *query)
{
    memset(f, 0, sizeof *f);
    f->kind = kind;
    if (ns)
        snprintf(f->path, sizeof f->path, "%s/namespaces/%s/%s", group_path, ns,
                 plural);
    else
        snprintf(f->path, sizeof f->path, "%s/%s", group_path, plural);
    snprintf(f->query, sizeof f->query, "%s", query);
    f->cache = json_object();
    f->need_list = 1;
}

static void stop_acting(struct ctl *c)
{
    struct inf *fs[3] = {&c->jobs, &c->pods, &c->svcs};
    for (int i = 0; i < 3; i++) {
        unwatch(c, fs[i]);
        json_object_clear(fs[i]->cache);
        fs[i]->need_list = 1;
        fs[i]->rv[0] = '\0';
    }
}

int el__k8s_controller_run(const struct el__k8s_ctl_opts *o, char *err,
                           size_t errlen)
{
    static struct ctl c;
    memset(&c, 0, sizeof c);
    c.o = o;
    int rc = el__k8s_open(&c.k, o->kubeconfig);
    if (rc) {
        el__errf(err, errlen, rc, "%s", c.k.err);
        el__k8s_close(&c.k);
        return rc;
    }
    const char *id = o->identity ? o->identity : getenv("POD_NAME");
    if (id && *id) {
        snprintf(c.identity, sizeof c.identity, "%s", id);
    } else {
        char hn[200] = "controller";
        gethostname(hn, sizeof hn - 1);
        snprintf(c.identity, sizeof c.identity, "%s_%ld", hn, (long)getpid());
    }
    const char *lns = o->lease_ns ? o->lease_ns : getenv("POD_NAMESPACE");
    snprintf(c.lease_ns, sizeof c.lease_ns, "%s",
             lns && *lns ? lns : c.k.namespace_);
    snprintf(c.lease_name, sizeof c.lease_name, "%s",
             o->lease_name ? o->lease_name : EL_K8S_COMPONENT);
    char q[200], e[200];
    snprintf(q, sizeof q, "labelSelector=%s",
             el__k8s_escape("group-name=" EL_K8S_GROUP, e, sizeof e));
    inf_init(&c.jobs, "elasticjobs", o->namespace_, "/apis/" EL_K8S_API,
             "elasticjobs", "");
    inf_init(&c.pods, "pods", o->namespace_, "/api/v1", "pods", q);
    inf_init(&c.svcs, "services", o->namespace_, "/api/v1", "services", q);
    c.multi = el__curl.multi_init();
    c.touched = json_object();
    c.m.fd = -1;
    if (o->metrics_addr) {
        rc = el__k8s_metrics_listen(&c.m, o->metrics_addr, err, errlen);
        if (rc) {
            el__curl.multi_cleanup(c.multi);
            json_decref(c.touched);
            el__k8s_close(&c.k);
            return rc;
        }
        el_log(EL_LOG_INFO, "metrics on %s (port %d)", o->metrics_addr,
               c.m.port);
    }

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    el_log(EL_LOG_INFO, "controller %s: API server %s%s%s", c.identity,
           c.k.server, o->leader_elect ? ", leader election on lease " : "",
           o->leader_elect ? c.lease_name : "");
    if (!o->leader_elect)
        c.leader = 1, c.renewed_at = mono();
    rc = 0;
    while (1) {
        double t = mono();
        if (o->leader_elect && t >= c.next_lease) {
            int was = c.leader;
            lease_step(&c);
            c.next_lease =
                mono() + (c.leader ? o->lease_s / 3 : o->lease_s / 5);
            if (was && !lease_valid(&c)) {
                el__errf(err, errlen, EL_EPEERLOST,
                         "lost the lease %s/%s (not renewed within %.0f s): "
                         "stopping",
                         c.lease_ns, c.lease_name, o->lease_s);
                rc = EL_EPEERLOST;
                break;
            }
            if (!c.leader && was)
                stop_acting(&c);
        }
        if (c.leader) {
            informers_step(&c);
            int synced =
                !c.jobs.need_list && !c.pods.need_list && !c.svcs.need_list;
            int full =
                t >= c.resync_at || (c.requeue_at > 0 && t >= c.requeue_at);
            if (synced && (c.dirty || full)) {
                if (t >= c.resync_at)
                    c.resync_at = t + o->resync_s;
                reconcile_all(&c, full);
            }
        }
        int running = 0;
        el__curl.multi_perform(c.multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = el__curl.multi_info_read(c.multi, &left)))
            if (msg->msg == CURLMSG_DONE)
                watch_done(&c, msg->easy_handle, msg->data.result);
        if (c.dirty && c.leader)
            continue;
        double wake = c.leader ? c.resync_at : c.next_lease;
        if (o->leader_elect && c.next_lease < wake)
            wake = c.next_lease;
        if (c.requeue_at > 0 && c.requeue_at < wake)
            wake = c.requeue_at;
        struct inf *fs[3] = {&c.jobs, &c.pods, &c.svcs};
        for (int i = 0; i < 3 && c.leader; i++)
            if (!fs[i]->h && fs[i]->retry_at < wake)
                wake = fs[i]->retry_at;
        int ms = (int)((wake - mono()) * 1000) + 1;
        if (ms < 0)
            ms = 0;
        if (ms > 1000)
            ms = 1000;
        struct curl_waitfd wf[2] = {{.fd = sfd, .events = CURL_WAIT_POLLIN},
                                    {.fd = c.m.fd, .events = CURL_WAIT_POLLIN}};
        el__curl.multi_poll(c.multi, wf, c.m.fd >= 0 ? 2 : 1, ms, NULL);
        if (c.m.fd >= 0 && wf[1].revents) {
            char *body = el__k8s_metrics_text(&c.m, c.jobs.cache, c.leader);
            el__k8s_metrics_serve(&c.m, body);
            free(body);
        }
        if (wf[0].revents) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) > 0) {
                el_log(EL_LOG_INFO, "signal %u: stopping", si.ssi_signo);
                break;
            }
        }
    }
    stop_acting(&c);
    if (o->leader_elect && c.leader && rc == 0)
        lease_release(&c);
    el__curl.multi_cleanup(c.multi);
    el__k8s_metrics_close(&c.m);
    json_decref(c.touched);
    json_decref(c.jobs.cache);
    json_decref(c.pods.cache);
    json_decref(c.svcs.cache);
    free(c.jobs.line.p);
    free(c.pods.line.p);
    free(c.svcs.line.p);
    close(sfd);
    el__k8s_close(&c.k);
    return rc;
}
