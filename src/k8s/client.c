/* client.c -- a small Kubernetes REST client for the controller: where the
 * API server is and how to authenticate (a kubeconfig, or the in-cluster
 * service account), and one blocking JSON request at a time over a
 * keep-alive libcurl handle.  libcurl is dlopen()ed (common/curl_dl.c) and
 * so is libyaml, which reads kubeconfigs (a kubeconfig is YAML; JSON is
 * YAML too), so nothing here is loaded by an agent.
 *
 * Ownership: every string in struct el__k8s is malloc()ed and freed by
 * el__k8s_close().  Requests are not thread-safe (one handle).
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

#include "common/errfmt.h"
#include "elrun/err.h"
#include "k8s/k8s_int.h"

/* ---- libyaml, loaded at run time ---- */

#define EL_YAML_SYMS(X)                                      \
    X(parser_initialize, yaml_parser_initialize)             \
    X(parser_set_input_string, yaml_parser_set_input_string) \
    X(parser_load, yaml_parser_load)                         \
    X(parser_delete, yaml_parser_delete)                     \
    X(document_get_root_node, yaml_document_get_root_node)   \
    X(document_get_node, yaml_document_get_node)             \
    X(document_delete, yaml_document_delete)

static struct {
#define EL_YAML_FIELD_(field, fn) __typeof__(fn) *field;
    EL_YAML_SYMS(EL_YAML_FIELD_)
#undef EL_YAML_FIELD_
} yl;
static pthread_once_t yaml_once = PTHREAD_ONCE_INIT;
static char yaml_err[256];

static void yaml_load(void)
{
    const char *name = getenv("ELRUN_LIBYAML");
    if (!name || !*name)
        name = "libyaml-0.so.2";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(yaml_err, sizeof yaml_err,
                 "cannot load %s to read the kubeconfig: install libyaml "
                 "(Debian: apt-get install libyaml-0-2)",
                 name);
        return;
    }
#define EL_YAML_SYM_(field, fn)                                             \
    {                                                                       \
        void *p_ = dlsym(lib, #fn);                                         \
        if (!p_) {                                                          \
            snprintf(yaml_err, sizeof yaml_err, "%s has no %s", name, #fn); \
            return;                                                         \
        }                                                                   \
        memcpy(&yl.field, &p_, sizeof p_);                                  \
    }
    EL_YAML_SYMS(EL_YAML_SYM_)
#undef EL_YAML_SYM_
}

static json_t *yaml_node(yaml_document_t *d, yaml_node_t *n, int depth)
{
    if (!n || depth > 64)
        return NULL;
    if (n->type == YAML_SCALAR_NODE)
        return json_stringn((const char *)n->data.scalar.value,
                            n->data.scalar.length);
    if (n->type == YAML_SEQUENCE_NODE) {
        json_t *a = json_array();
        for (yaml_node_item_t *i = n->data.sequence.items.start;
             a && i < n->data.sequence.items.top; i++) {
            json_t *v = yaml_node(d, yl.document_get_node(d, *i), depth + 1);
            if (!v || json_array_append_new(a, v)) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    if (n->type == YAML_MAPPING_NODE) {
        json_t *o = json_object();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
             o && p < n->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yl.document_get_node(d, p->key);
            if (!k || k->type != YAML_SCALAR_NODE) {
                json_decref(o);
                return NULL;
            }
            json_t *v =
                yaml_node(d, yl.document_get_node(d, p->value), depth + 1);
            if (!v) {
                json_decref(o);
                return NULL;
            }
            json_object_setn_new(o, (const char *)k->data.scalar.value,
                                 k->data.scalar.length, v);
        }
        return o;
    }
    return NULL;
}

json_t *el__k8s_yaml_to_json(const char *text, char *err, size_t errlen)
{
    pthread_once(&yaml_once, yaml_load);
    if (yaml_err[0]) {
        el__errf(err, errlen, 0, "%s", yaml_err);
        return NULL;
    }
    yaml_parser_t p;
    yaml_document_t d;
    if (!yl.parser_initialize(&p)) {
        el__errf(err, errlen, 0, "out of memory");
        return NULL;
    }
    yl.parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
    if (!yl.parser_load(&p, &d)) {
        el__errf(err, errlen, 0, "YAML error at line %zu: %s",
                 p.problem_mark.line + 1, p.problem ? p.problem : "?");
        yl.parser_delete(&p);
        return NULL;
    }
    json_t *j = yaml_node(&d, yl.document_get_root_node(&d), 0);
    if (!j)
        el__errf(err, errlen, 0, "empty or unsupported YAML document");
    yl.document_delete(&d);
    yl.parser_delete(&p);
    return j;
}

/* ---- configuration ---- */

static int fail(struct el__k8s *k, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct el__k8s *k, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    el__verrf(k->err, sizeof k->err, rc, fmt, ap);
    va_end(ap);
    return rc;
}

/* The whole file at path (NUL-terminated; getdelim() to a NUL reads it
 * all), or NULL with errno set. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = NULL;
    size_t cap = 0;
    errno = 0;
    ssize_t n = getdelim(&b, &cap, '\0', f);
    int e = errno, eof = feof(f);
    fclose(f);
    if (n < 0) {
        free(b);
        if (eof && e == 0) /* an empty file */
            return strdup("");
        errno = e ? e : EIO;
        return NULL;
    }
    if (len)
        *len = (size_t)n;
    return b;
}

static char *path_in(const char *dir, const char *p)
{
    char buf[PATH_MAX];
    if (p[0] == '/' || !dir)
        return strdup(p);
    snprintf(buf, sizeof buf, "%s/%s", dir, p);
    return strdup(buf);
}

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* The element of a kubeconfig list (clusters, contexts, users) named name. */
static const json_t *named(const json_t *list, const char *name,
                           const char *inner)
{
    size_t i;
    const json_t *e;
    json_array_foreach(list, i, e)
    {
        const char *n = jstr(e, "name");
        if (n && name && strcmp(n, name) == 0)
            return json_object_get(e, inner);
    }
    return NULL;
}

/* Decode base64 (standard alphabet) into a new buffer. */
static char *b64dec(const char *s, size_t *outlen)
{
    static const char al[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(s);
    char *o = malloc(n / 4 * 3 + 4);
    if (!o)
        return NULL;
    size_t w = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '=' || s[i] == '\n' || s[i] == '\r' || s[i] == ' ')
            continue;
        const char *p = strchr(al, s[i]);
        if (!p || !s[i]) {
            free(o);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)(p - al);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[w++] = (char)((acc >> bits) & 0xff);
        }
    }
    o[w] = '\0';
    *outlen = w;
    return o;
}

int el__k8s_kubeconfig_text(struct el__k8s *k, const char *text,
                            const char *dir)
{
    char e[256];
    json_t *kc = el__k8s_yaml_to_json(text, e, sizeof e);
    if (!kc)
        return fail(k, EL_EUSAGE, "kubeconfig: %s", e);
    int rc = 0;
    const char *cur = jstr(kc, "current-context");
    const json_t *ctx = named(json_object_get(kc, "contexts"), cur, "context");
    if (!cur || !ctx) {
        rc = fail(k, EL_EUSAGE,
                  "kubeconfig: no current-context%s%s%s (set one with "
                  "kubectl config use-context)",
                  cur ? " named \"" : "", cur ? cur : "", cur ? "\"" : "");
        goto out;
    }
    const char *cn = jstr(ctx, "cluster"), *un = jstr(ctx, "user");
    const json_t *cl = named(json_object_get(kc, "clusters"), cn, "cluster");
    const json_t *us = named(json_object_get(kc, "users"), un, "user");
    if (!cl || !jstr(cl, "server")) {
        rc = fail(k, EL_EUSAGE,
                  "kubeconfig: context \"%s\" names cluster \"%s\", which "
                  "has no server",
                  cur, cn ? cn : "");
        goto out;
    }
    snprintf(k->server, sizeof k->server, "%s", jstr(cl, "server"));
    size_t sl = strlen(k->server);
    while (sl && k->server[sl - 1] == '/')
        k->server[--sl] = '\0';
    const char *ns = jstr(ctx, "namespace");
    snprintf(k->namespace_, sizeof k->namespace_, "%s", ns ? ns : "default");
    const char *v;
    if ((v = jstr(cl, "certificate-authority-data")) &&
        !(k->ca_data = b64dec(v, &k->ca_len))) {
        rc = fail(k, EL_EUSAGE,
                  "kubeconfig: cluster \"%s\": certificate-authority-data "
                  "is not base64",
                  cn);
        goto out;
    }
    if ((v = jstr(cl, "certificate-authority")))
        k->cafile = path_in(dir, v);
    v = jstr(cl, "insecure-skip-tls-verify");
    k->insecure = v && strcmp(v, "true") == 0;
    if (us) {
        if ((v = jstr(us, "token")))
            k->token = strdup(v);
        if ((v = jstr(us, "tokenFile")))
            k->token_file = path_in(dir, v);
        if ((v = jstr(us, "client-certificate")))
            k->cert_file = path_in(dir, v);
        if ((v = jstr(us, "client-key")))
            k->key_file = path_in(dir, v);
        if ((v = jstr(us, "client-certificate-data")))
            k->cert_data = b64dec(v, &k->cert_len);
        if ((v = jstr(us, "client-key-data")))
            k->key_data = b64dec(v, &k->key_len);
        if (json_object_get(us, "exec") || json_object_get(us, "auth-provider"))
            rc = fail(k, EL_EUSAGE,
                      "kubeconfig: user \"%s\" authenticates with an exec or "
                      "auth-provider plugin, which elrun does not run; use a "
                      "token or a client certificate",
                      un ? un : "");
    }
out:
    json_decref(kc);
    return rc;
}

static int in_cluster(struct el__k8s *k)
{
    const char *h = getenv("KUBERNETES_SERVICE_HOST");
    const char *p = getenv("KUBERNETES_SERVICE_PORT");
    const char *dir = getenv("EL_K8S_SA_DIR");
    if (!dir || !*dir)
        dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/token", dir);
    if (!h || !*h || access(path, R_OK) != 0)
        return fail(k, EL_EUSAGE,
                    "no Kubernetes configuration: give --kubeconfig, set "
                    "KUBECONFIG, or run in a pod (KUBERNETES_SERVICE_HOST "
                    "and %s)",
                    path);
    if (strchr(h, ':'))
        snprintf(k->server, sizeof k->server, "https://[%s]:%s", h,
                 p && *p ? p : "443");
    else
        snprintf(k->server, sizeof k->server, "https://%s:%s", h,
                 p && *p ? p : "443");
    k->token_file = strdup(path);
    snprintf(path, sizeof path, "%s/ca.crt", dir);
    k->cafile = strdup(path);
    snprintf(path, sizeof path, "%s/namespace", dir);
    char *ns = slurp(path, NULL);
    snprintf(k->namespace_, sizeof k->namespace_, "%s",
             ns ? strtok(ns, " \n") ? ns : "default" : "default");
    free(ns);
    return 0;
}

int el__k8s_open(struct el__k8s *k, const char *kubeconfig)
{
    memset(k, 0, sizeof *k);
    char lerr[512];
    int rc = el__curl_load(lerr, sizeof lerr);
    if (rc)
        return fail(k, rc, "k8s: %s", lerr);
    if (!kubeconfig || !*kubeconfig) {
        kubeconfig = getenv("KUBECONFIG");
        if (kubeconfig && strchr(kubeconfig, ':')) /* first of a list */
            kubeconfig = NULL;
    }
    char home[PATH_MAX];
    if (!kubeconfig || !*kubeconfig) {
        rc = in_cluster(k);
        if (rc == 0)
            goto handle;
        const char *hd = getenv("HOME");
        snprintf(home, sizeof home, "%s/.kube/config", hd ? hd : "/root");
        if (access(home, R_OK) != 0)
            return rc;
        kubeconfig = home;
        k->err[0] = '\0';
    }
    char *text = slurp(kubeconfig, NULL);
    if (!text)
        return fail(k, -errno, "cannot read kubeconfig %s: %s", kubeconfig,
                    strerror(errno));
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", kubeconfig);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    rc = el__k8s_kubeconfig_text(k, text, dir);
    free(text);
    if (rc)
        return rc;
handle:
    k->h = el__curl.easy_init();
    if (!k->h)
        return fail(k, -ENOMEM, "curl_easy_init failed");
    return 0;
}

void el__k8s_close(struct el__k8s *k)
{
    if (k->h)
        el__curl.easy_cleanup(k->h);
    free(k->token);
    free(k->token_file);
    free(k->cafile);
    free(k->ca_data);
    free(k->cert_file);
    free(k->key_file);
    free(k->cert_data);
    free(k->key_data);
    memset(k, 0, sizeof *k);
}

/* ---- requests ---- */

char *el__k8s_escape(const char *s, char *buf, size_t n)
{
    size_t w = 0;
    for (; *s && w + 4 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
            c == '~')
            buf[w++] = (char)c;
        else
            w += (size_t)snprintf(buf + w, n - w, "%%%02X", c);
    }
    buf[w] = '\0';
    return buf;
}

int el__k8s_setup(struct el__k8s *k, CURL *h, struct curl_slist **hdrs)
{
    el__curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    el__curl.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    if (k->insecure) {
        el__curl.easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        el__curl.easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (k->cafile)
        el__curl.easy_setopt(h, CURLOPT_CAINFO, k->cafile);
    if (k->ca_data) {
        struct curl_blob b = {k->ca_data, k->ca_len, CURL_BLOB_COPY};
        el__curl.easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
    }
    if (k->cert_file)
        el__curl.easy_setopt(h, CURLOPT_SSLCERT, k->cert_file);
    if (k->key_file)
        el__curl.easy_setopt(h, CURLOPT_SSLKEY, k->key_file);
    if (k->cert_data) {
        struct curl_blob b = {k->cert_data, k->cert_len, CURL_BLOB_COPY};
        el__curl.easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
    }
    if (k->key_data) {
        struct curl_blob b = {k->key_data, k->key_len, CURL_BLOB_COPY};
        el__curl.easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
    }
    struct curl_slist *l =
        el__curl.slist_append(NULL, "Accept: application/json");
    char *tok = k->token;
    char *ftok = NULL;
    if (k->token_file) { /* projected tokens rotate: read it each time */
        ftok = slurp(k->token_file, NULL);
        if (!ftok) {
            el__curl.slist_free_all(l);
            return fail(k, -errno, "cannot read token %s: %s", k->token_file,
                        strerror(errno));
        }
        tok = strtok(ftok, " \r\n");
    }
    if (tok) {
        size_t n = strlen(tok) + 32;
        char *hb = malloc(n);
        if (hb) {
            snprintf(hb, n, "Authorization: Bearer %s", tok);
            l = el__curl.slist_append(l, hb);
            free(hb);
        }
    }
    free(ftok);
    *hdrs = l;
    return l ? 0 : fail(k, -ENOMEM, "out of memory");
}

static size_t on_body(char *d, size_t sz, size_t nm, void *u)
{
    return el__k8s_buf_add(u, d, sz * nm) ? 0 : sz * nm;
}

int el__k8s_buf_add(struct el__k8s_buf *b, const char *d, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16384;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np)
            return -ENOMEM;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

int el__k8s_req(struct el__k8s *k, const char *method, const char *path,
                const json_t *body, long *http, json_t **resp)
{
    struct el__k8s_buf b = {0};
    if (resp)
        *resp = NULL;
    int rc = el__k8s_req_text(k, method, path, body, http, &b);
    if (rc == 0 && resp && b.p)
        *resp = json_loadb(b.p, b.n, 0, NULL);
    free(b.p);
    return rc;
}

int el__k8s_req_text(struct el__k8s *k, const char *method, const char *path,
                     const json_t *body, long *http, struct el__k8s_buf *out)
{
    *http = 0;
    CURL *h = k->h;
    el__curl.easy_reset(h);
    struct curl_slist *hdrs = NULL;
    int rc = el__k8s_setup(k, h, &hdrs);
    if (rc)
        return rc;
    char *js = NULL;
    if (body) {
        js = json_dumps(body, JSON_COMPACT);
        hdrs = el__curl.slist_append(hdrs, "Content-Type: application/json");
        el__curl.easy_setopt(h, CURLOPT_POSTFIELDS, js ? js : "");
    }
    char url[2048];
    snprintf(url, sizeof url, "%s%s", k->server, path);
    struct el__k8s_buf b = {0};
    char cerr[CURL_ERROR_SIZE] = "";
    el__curl.easy_setopt(h, CURLOPT_URL, url);
    el__curl.easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    el__curl.easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    el__curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    el__curl.easy_setopt(h, CURLOPT_WRITEDATA, &b);
    el__curl.easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    el__curl.easy_setopt(h, CURLOPT_TIMEOUT_MS,
                         k->timeout_ms > 0 ? k->timeout_ms : 30000L);
    CURLcode cr = el__curl.easy_perform(h);
    el__curl.easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    el__curl.slist_free_all(hdrs);
    free(js);
    if (cr != CURLE_OK) {
        free(b.p);
        int code =
            cr == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
            : (cr == CURLE_SSL_CACERT || cr == CURLE_PEER_FAILED_VERIFICATION ||
               cr == CURLE_SSL_CONNECT_ERROR)
                ? EL_ETLS
                : -ECONNREFUSED;
        return fail(k, code, "%s %s: %s", method, url,
                    cerr[0] ? cerr : el__curl.easy_strerror(cr));
    }
    el__curl.easy_getinfo(h, CURLINFO_RESPONSE_CODE, http);
    *out = b;
    return 0;
}

const char *el__k8s_status_msg(const json_t *resp, long http, char *buf,
                               size_t n)
{
    const char *m = jstr(resp, "message");
    if (m)
        snprintf(buf, n, "%s", m);
    else
        snprintf(buf, n, "HTTP %ld", http);
    return buf;
}
