/* metrics.c -- the registry of include/elrun/metrics.h and its rendering in
 * the Prometheus text format 0.0.4.
 *
 * A family keeps its series in an array searched linearly by their joined
 * label values: families here hold a few series to a few hundred (one per
 * rank at most), where a scan beats hashing.  One mutex per registry
 * guards every family; collect hooks run before it is taken.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sbuf.h"
#include "elrun/metrics.h"

struct series {
    char *key;     /* label values joined by '\x1f'            */
    char **values; /* nlabels strings, into vbuf              */
    char *vbuf;    /* a copy of key cut at each '\x1f'        */
    double value;  /* counter, gauge                           */
    double sum;    /* histogram                                */
    unsigned long long count;
    unsigned long long *buckets; /* nbuckets, not cumulative            */
};

struct el_metric {
    struct el_metrics *reg;
    enum el_metric_type type;
    char *name, *help;
    char *labels[EL_METRICS_MAX_LABELS];
    int nlabels;
    double bounds[EL_METRICS_MAX_BUCKETS];
    int nbuckets;
    struct series *s;
    int ns, caps;
};

struct hook {
    void (*fn)(void *);
    void *arg;
};

struct el_metrics {
    pthread_mutex_t mu;
    pthread_mutex_t hook_mu; /* held while hooks run (off_collect waits) */
    char **consts;           /* name, value, ... */
    int nconsts;
    struct el_metric **fam;
    int nfam, capfam;
    struct hook hooks[8];
    int nhooks;
};

/* ---- names ---- */

static int valid_name(const char *s, int label)
{
    if (!s || !*s)
        return 0;
    if (label && s[0] == '_' && s[1] == '_')
        return 0;
    for (const char *p = s; *p; p++) {
        char c = *p;
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '_' || (!label && c == ':');
        if (!alpha && !(p > s && c >= '0' && c <= '9'))
            return 0;
    }
    return 1;
}

int el_metrics_new(struct el_metrics **out, const char *const *consts)
{
    struct el_metrics *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->hook_mu, NULL);
    int n = 0;
    while (consts && consts[n] && consts[n + 1])
        n += 2;
    r->consts = calloc((size_t)n + 1, sizeof *r->consts);
    if (!r->consts) {
        el_metrics_free(r);
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        if (i % 2 == 0 && !valid_name(consts[i], 1)) {
            el_metrics_free(r);
            return -EINVAL;
        }
        if (!(r->consts[i] = strdup(consts[i]))) {
            el_metrics_free(r);
            return -ENOMEM;
        }
    }
    r->nconsts = n / 2;
    *out = r;
    return 0;
}

static void free_series(struct series *s)
{
    free(s->key);
    free(s->vbuf);
    free(s->values);
    free(s->buckets);
}

static void free_family(struct el_metric *m)
{
    for (int i = 0; i < m->ns; i++)
        free_series(&m->s[i]);
    free(m->s);
    for (int i = 0; i < m->nlabels; i++)
        free(m->labels[i]);
    free(m->name);
    free(m->help);
    free(m);
}

void el_metrics_free(struct el_metrics *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nfam; i++)
        free_family(r->fam[i]);
    free(r->fam);
    for (int i = 0; r->consts && r->consts[i]; i++)
        free(r->consts[i]);
    free(r->consts);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->hook_mu);
    free(r);
}

/* ---- series ---- */

/* The series for values (created when missing), or NULL with *err set.
 * Called with the lock held. */
static struct series *find_series(struct el_metric *m,
                                  const char *const *values, int *err)
{
    char key[1024];
    size_t len = 0;
    for (int i = 0; i < m->nlabels; i++) {
        const char *v = values && values[i] ? values[i] : "";
        size_t l = strlen(v);
        if (len + l + 1 >= sizeof key) {
            *err = -EINVAL;
            return NULL;
        }
        memcpy(key + len, v, l);
        len += l;
        key[len++] = '\x1f';
    }
    key[len] = 0;
    for (int i = 0; i < m->ns; i++)
        if (strcmp(m->s[i].key, key) == 0)
            return &m->s[i];
    if (m->ns >= EL_METRICS_MAX_SERIES) {
        *err = -ENOSPC;
        return NULL;
    }
    if (m->ns == m->caps) {
        int cap = m->caps ? m->caps * 2 : 4;
        struct series *ns = realloc(m->s, sizeof *ns * (size_t)cap);
        if (!ns) {
            *err = -ENOMEM;
            return NULL;
        }
        m->s = ns;
        m->caps = cap;
    }
    struct series s = {0};
    s.key = strdup(key);
    s.vbuf = strdup(key);
    s.values = calloc((size_t)m->nlabels + 1, sizeof *s.values);
    if (m->type == EL_METRIC_HISTOGRAM)
        s.buckets = calloc((size_t)m->nbuckets + 1, sizeof *s.buckets);
    if (!s.key || !s.vbuf || !s.values ||
        (m->type == EL_METRIC_HISTOGRAM && !s.buckets)) {
        free_series(&s);
        *err = -ENOMEM;
        return NULL;
    }
    char *p = s.vbuf;
    for (int i = 0; i < m->nlabels; i++) {
        s.values[i] = p;
        p = strchr(p, '\x1f');
        *p++ = 0;
    }
    m->s[m->ns] = s;
    return &m->s[m->ns++];
}

int el_metrics_register(struct el_metrics *r, struct el_metric **out,
                        enum el_metric_type type, const char *name,
                        const char *help, const char *labels,
                        const double *buckets, int nbuckets)
{
    if (!valid_name(name, 0) || type < EL_METRIC_COUNTER ||
        type > EL_METRIC_HISTOGRAM)
        return -EINVAL;
    if (type == EL_METRIC_HISTOGRAM) {
        if (nbuckets < 0 || nbuckets > EL_METRICS_MAX_BUCKETS ||
            (nbuckets && !buckets))
            return -EINVAL;
        for (int i = 0; i < nbuckets; i++)
            if (!isfinite(buckets[i]) || (i && buckets[i] <= buckets[i - 1]))
                return -EINVAL;
    }
    struct el_metric *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->reg = r;
    m->type = type;
    m->name = strdup(name);
    m->help = strdup(help ? help : "");
    int rc = -ENOMEM;
    if (!m->name || !m->help)
        goto fail;
    rc = -EINVAL;
    for (const char *p = labels; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t l = comma ? (size_t)(comma - p) : strlen(p);
        if (m->nlabels == EL_METRICS_MAX_LABELS)
            goto fail;
        if (!(m->labels[m->nlabels] = strndup(p, l))) {
            rc = -ENOMEM;
            goto fail;
        }
        const char *ln = m->labels[m->nlabels++];
        if (!valid_name(ln, 1) ||
            (type == EL_METRIC_HISTOGRAM && strcmp(ln, "le") == 0))
            goto fail;
        for (int i = 0; i < r->nconsts; i++)
            if (strcmp(r->consts[2 * i], ln) == 0)
                goto fail;
        for (int i = 0; i + 1 < m->nlabels; i++)
            if (strcmp(m->labels[i], ln) == 0)
                goto fail;
        p = comma ? comma + 1 : p + l;
    }
    if (type == EL_METRIC_HISTOGRAM) {
        memcpy(m->bounds, buckets, sizeof *buckets * (size_t)nbuckets);
        m->nbuckets = nbuckets;
    }
    pthread_mutex_lock(&r->mu);
    rc = 0;
    for (int i = 0; i < r->nfam; i++)
        if (strcmp(r->fam[i]->name, name) == 0)
            rc = -EEXIST;
    if (!rc && r->nfam == r->capfam) {
        int cap = r->capfam ? r->capfam * 2 : 16;
        struct el_metric **nf = realloc(r->fam, sizeof *nf * (size_t)cap);
        if (nf) {
            r->fam = nf;
            r->capfam = cap;
        } else {
            rc = -ENOMEM;
        }
    }
    if (!rc && m->nlabels == 0 && !find_series(m, NULL, &rc))
        rc = rc ? rc : -ENOMEM;
    if (!rc)
        r->fam[r->nfam++] = m;
    pthread_mutex_unlock(&r->mu);
    if (rc)
        goto fail;
    *out = m;
    return 0;
fail:
    free_family(m);
    return rc;
}

int el_metrics_register_table(struct el_metrics *reg, void *base,
                              const struct el_metric_def *defs, size_t n,
                              const double *buckets, int nbuckets)
{
    for (size_t i = 0; i < n; i++) {
        int rc = el_metrics_register(
            reg, (struct el_metric **)((char *)base + defs[i].off),
            defs[i].type, defs[i].name, defs[i].help, defs[i].labels, buckets,
            nbuckets);
        if (rc < 0)
            return rc;
    }
    return 0;
}

enum op { OP_ADD, OP_SET, OP_OBSERVE };

static int update(struct el_metric *m, const char *const *values, double v,
                  enum op op)
{
    if (!m)
        return 0;
    if ((op == OP_OBSERVE) != (m->type == EL_METRIC_HISTOGRAM) ||
        (op == OP_ADD && m->type == EL_METRIC_COUNTER && !(v >= 0)))
        return -EINVAL;
    int err = 0;
    pthread_mutex_lock(&m->reg->mu);
    struct series *s = find_series(m, values, &err);
    if (s) {
        if (op == OP_ADD) {
            s->value += v;
        } else if (op == OP_SET) {
            s->value = v;
        } else {
            int b = 0;
            while (b < m->nbuckets && v > m->bounds[b])
                b++;
            s->buckets[b]++;
            s->sum += v;
            s->count++;
        }
    }
    pthread_mutex_unlock(&m->reg->mu);
    return err;
}

int el_metric_add(struct el_metric *m, const char *const *values, double v)
{
    return update(m, values, v, OP_ADD);
}

int el_metric_set(struct el_metric *m, const char *const *values, double v)
{
    return update(m, values, v, OP_SET);
}

int el_metric_observe(struct el_metric *m, const char *const *values, double v)
{
    return update(m, values, v, OP_OBSERVE);
}

void el_metric_clear(struct el_metric *m)
{
    if (!m || m->nlabels == 0)
        return;
    pthread_mutex_lock(&m->reg->mu);
    for (int i = 0; i < m->ns; i++)
        free_series(&m->s[i]);
    m->ns = 0;
    pthread_mutex_unlock(&m->reg->mu);
}

int el_metrics_on_collect(struct el_metrics *r, void (*fn)(void *arg),
                          void *arg)
{
    int rc = 0;
    pthread_mutex_lock(&r->mu);
    if (r->nhooks == 8)
        rc = -ENOSPC;
    else
        r->hooks[r->nhooks++] = (struct hook){fn, arg};
    pthread_mutex_unlock(&r->mu);
    return rc;
}

void el_metrics_off_collect(struct el_metrics *r, void (*fn)(void *arg),
                            void *arg)
{
    pthread_mutex_lock(&r->hook_mu);
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->nhooks; i++) {
        if (r->hooks[i].fn == fn && r->hooks[i].arg == arg) {
            r->hooks[i] = r->hooks[--r->nhooks];
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_unlock(&r->hook_mu);
}

/* ---- rendering ---- */

/* HELP text escapes \ and newline; label values also ". */
static void put_escaped(struct el__sbuf *b, const char *s, int quote)
{
    const char *run = s;
    for (; *s; s++) {
        const char *rep = *s == '\\'           ? "\\\\"
                          : *s == '\n'         ? "\\n"
                          : quote && *s == '"' ? "\\\""
                                               : NULL;
        if (!rep)
            continue;
        el__sbuf_add(b, run, (size_t)(s - run));
        el__sbuf_str(b, rep);
        run = s + 1;
    }
    el__sbuf_add(b, run, (size_t)(s - run));
}

/* The shortest text that reads back as v; Go's spellings of the specials. */
static void put_double(struct el__sbuf *b, double v)
{
    char t[40];
    if (isnan(v))
        snprintf(t, sizeof t, "NaN");
    else if (isinf(v))
        snprintf(t, sizeof t, "%s", v > 0 ? "+Inf" : "-Inf");
    else {
        for (int prec = 6; prec <= 17; prec++) {
            snprintf(t, sizeof t, "%.*g", prec, v);
            if (strtod(t, NULL) == v)
                break;
        }
    }
    el__sbuf_str(b, t);
}

/* name{consts,labels[,le="x"]} */
static void put_labels(struct el__sbuf *b, const struct el_metrics *r,
                       const struct el_metric *m, const struct series *s,
                       const char *le)
{
    int n = 0;
    for (int i = 0; i < r->nconsts + m->nlabels + (le != NULL); i++) {
        const char *k, *v;
        if (i < r->nconsts) {
            k = r->consts[2 * i];
            v = r->consts[2 * i + 1];
        } else if (i < r->nconsts + m->nlabels) {
            k = m->labels[i - r->nconsts];
            v = s->values[i - r->nconsts];
        } else {
            k = "le";
            v = le;
        }
        el__sbuf_str(b, n++ ? "," : "{");
        el__sbuf_str(b, k);
        el__sbuf_str(b, "=\"");
        put_escaped(b, v, 1);
        el__sbuf_str(b, "\"");
    }
    if (n)
        el__sbuf_str(b, "}");
}

static void put_sample(struct el__sbuf *b, const struct el_metrics *r,
                       const struct el_metric *m, const struct series *s,
                       const char *suffix, const char *le, double v)
{
    el__sbuf_str(b, m->name);
    el__sbuf_str(b, suffix);
    put_labels(b, r, m, s, le);
    el__sbuf_str(b, " ");
    put_double(b, v);
    el__sbuf_str(b, "\n");
}

static void render_family(struct el__sbuf *b, const struct el_metrics *r,
                          const struct el_metric *m)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};
    el__sbuf_str(b, "# HELP ");
    el__sbuf_str(b, m->name);
    el__sbuf_str(b, " ");
    put_escaped(b, m->help, 0);
    el__sbuf_str(b, "\n# TYPE ");
    el__sbuf_str(b, m->name);
    el__sbuf_str(b, " ");
    el__sbuf_str(b, types[m->type]);
    el__sbuf_str(b, "\n");
    for (int i = 0; i < m->ns; i++) {
        const struct series *s = &m->s[i];
        if (m->type != EL_METRIC_HISTOGRAM) {
            put_sample(b, r, m, s, "", NULL, s->value);
            continue;
        }
        unsigned long long cum = 0;
        for (int k = 0; k <= m->nbuckets; k++) {
            char le[40] = "+Inf";
            cum += s->buckets[k];
            if (k < m->nbuckets) {
                struct el__sbuf lb = {0};
                put_double(&lb, m->bounds[k]);
                snprintf(le, sizeof le, "%s", lb.p ? lb.p : "0");
                free(lb.p);
            }
            put_sample(b, r, m, s, "_bucket", le, (double)cum);
        }
        put_sample(b, r, m, s, "_sum", NULL, s->sum);
        put_sample(b, r, m, s, "_count", NULL, (double)s->count);
    }
}

int el_metrics_render(struct el_metrics *r, char **out, size_t *len)
{
    struct hook hooks[8];
    pthread_mutex_lock(&r->hook_mu);
    pthread_mutex_lock(&r->mu);
    int nh = r->nhooks;
    memcpy(hooks, r->hooks, sizeof hooks);
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; i < nh; i++)
        hooks[i].fn(hooks[i].arg);
    pthread_mutex_unlock(&r->hook_mu);

    struct el__sbuf b = {0};
    pthread_mutex_lock(&r->mu);
    el__sbuf_add(&b, "", 0);
    for (int i = 0; i < r->nfam; i++)
        render_family(&b, r, r->fam[i]);
    pthread_mutex_unlock(&r->mu);
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}
