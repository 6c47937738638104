/* hostlist.c -- Slurm's hostlist syntax ("node[01-04,07],gpu1") and the
 * launcher defaults `srun elrun ...` takes from a Slurm job step's
 * environment.  See include/elrun/job.h.
 *
 * Grammar: LIST = ITEM {"," ITEM}; ITEM = {TEXT | "[" RANGES "]"}; RANGES =
 * RANGE {"," RANGE}; RANGE = NUM ["-" NUM].  Commas inside brackets belong to
 * the brackets; an item with several bracket groups is their product, in
 * Slurm's order (the last group varies fastest).  A range keeps the width
 * of its first bound when that one is zero-padded ("01-10" -> 01 ... 10).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elrun/err.h"
#include "elrun/job.h"
#include "job/job_int.h"

struct hosts {
    char **v;
    int n, cap, max;
};

static int push(struct hosts *h, char *s)
{
    if (!s)
        return -ENOMEM;
    if (h->n >= h->max) {
        free(s);
        return EL_ELIMIT;
    }
    if (h->n == h->cap) {
        int nc = h->cap ? h->cap * 2 : 16;
        char **nv = realloc(h->v, (size_t)nc * sizeof *nv);
        if (!nv) {
            free(s);
            return -ENOMEM;
        }
        h->v = nv;
        h->cap = nc;
    }
    h->v[h->n++] = s;
    return 0;
}

/* Expand item[0..len) after the already built prefix into h. */
static int expand(struct hosts *h, const char *prefix, const char *item,
                  size_t len)
{
    const char *lb = memchr(item, '[', len);
    if (!lb) {
        size_t pl = strlen(prefix);
        char *s = malloc(pl + len + 1);
        if (!s)
            return push(h, NULL);
        memcpy(s, prefix, pl);
        memcpy(s + pl, item, len);
        s[pl + len] = 0;
        return push(h, s);
    }
    const char *rb = memchr(lb, ']', len - (size_t)(lb - item));
    if (!rb || rb == lb + 1)
        return EL_EUSAGE;
    size_t pl = strlen(prefix), tl = (size_t)(lb - item);
    char *base = malloc(pl + tl + 32);
    if (!base)
        return -ENOMEM;
    memcpy(base, prefix, pl);
    memcpy(base + pl, item, tl);
    const char *after = rb + 1;
    size_t alen = len - (size_t)(after - item);
    int rc = 0;
    for (const char *p = lb + 1; p < rb && rc == 0;) {
        const char *q = p;
        unsigned long a, b;
        int width;
        while (q < rb && isdigit((unsigned char)*q))
            q++;
        if (q == p || q - p > 9) {
            rc = EL_EUSAGE;
            break;
        }
        width = (int)(q - p);
        a = strtoul(p, NULL, 10);
        b = a;
        if (q < rb && *q == '-') {
            const char *r = ++q;
            while (q < rb && isdigit((unsigned char)*q))
                q++;
            if (q == r || q - r > 9) {
                rc = EL_EUSAGE;
                break;
            }
            b = strtoul(r, NULL, 10);
        }
        if (b < a || (q < rb && *q != ',')) {
            rc = EL_EUSAGE;
            break;
        }
        if (p[0] != '0' || width == 1)
            width = 0;
        for (unsigned long k = a; k <= b && rc == 0; k++) {
            snprintf(base + pl + tl, 32, "%0*lu", width, k);
            rc = expand(h, base, after, alen);
        }
        p = q < rb ? q + 1 : q;
        if (p == rb && q < rb)
            rc = EL_EUSAGE; /* trailing comma */
    }
    free(base);
    return rc;
}

void el_job_hosts_free(char **hosts, int n)
{
    for (int i = 0; i < n; i++)
        free(hosts[i]);
    free(hosts);
}

int el_job_hostlist_expand(const char *list, int max, char ***hosts, int *n,
                           char *err, size_t errlen)
{
    struct hosts h = {NULL, 0, 0, max};
    int rc = 0, depth = 0;
    const char *start = list;
    *hosts = NULL;
    *n = 0;
    for (const char *p = list;; p++) {
        if (*p == '[' && ++depth > 1)
            rc = EL_EUSAGE;
        if (*p == ']' && --depth < 0)
            rc = EL_EUSAGE;
        if (rc)
            break;
        if ((*p == ',' && depth == 0) || !*p) {
            if (p == start || depth) {
                rc = EL_EUSAGE;
                break;
            }
            for (const char *c = start; c < p; c++)
                if (isspace((unsigned char)*c))
                    rc = EL_EUSAGE;
            if (rc || (rc = expand(&h, "", start, (size_t)(p - start))))
                break;
            start = p + 1;
        }
        if (!*p)
            break;
    }
    if (rc) {
        el_job_hosts_free(h.v, h.n);
        if (rc == EL_ELIMIT)
            snprintf(err, errlen, "hostlist '%s' names more than %d hosts",
                     list, max);
        else if (rc == EL_EUSAGE)
            snprintf(err, errlen,
                     "'%s' is not a Slurm hostlist (like "
                     "node[01-04,07],gpu1)",
                     list);
        else
            snprintf(err, errlen, "out of memory");
        return rc == -ENOMEM ? rc : EL_EUSAGE;
    }
    *hosts = h.v;
    *n = h.n;
    return 0;
}

int el_job_hostlist_first(const char *list, char *out, size_t cap, char *err,
                          size_t errlen)
{
    /* Only the first item matters: cut at the first top-level comma, and
     * keep the first range of every bracket group. */
    char **hosts;
    int n, depth = 0;
    size_t len = 0;
    for (; list[len] && !(list[len] == ',' && depth == 0); len++)
        depth += list[len] == '[' ? 1 : list[len] == ']' ? -1 : 0;
    /* "n[0001-9999,x]y" -> "n[0001]y": the first host without the rest. */
    char *first = malloc(len + 1), *w = first;
    int inside = 0, skip = 0;
    if (!first)
        return -ENOMEM;
    for (size_t i = 0; i < len; i++) {
        char c = list[i];
        if (c == '[' || c == ']') {
            inside = c == '[';
            skip = 0;
        } else if (inside && (c == '-' || c == ',')) {
            skip = 1;
        }
        if (!skip || c == ']')
            *w++ = c;
    }
    *w = 0;
    int rc = el_job_hostlist_expand(first, 1 << 20, &hosts, &n, err, errlen);
    free(first);
    if (rc) {
        snprintf(err, errlen,
                 "'%s' is not a Slurm hostlist (like "
                 "node[01-04,07],gpu1)",
                 list);
        return rc;
    }
    if (strlen(hosts[0]) >= cap) {
        snprintf(err, errlen, "host name '%s' is too long", hosts[0]);
        el_job_hosts_free(hosts, n);
        return EL_EUSAGE;
    }
    snprintf(out, cap, "%s", hosts[0]);
    el_job_hosts_free(hosts, n);
    return 0;
}

static int nonneg(const char *s)
{
    if (!s || !*s || strlen(s) > 9)
        return -1;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p))
            return -1;
    return atoi(s);
}

int el_job_slurm_defaults(char **env, struct el_job_env_defaults *out,
                          char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *job = el__job_env_get(env, "SLURM_JOB_ID");
    if (!job || !el__job_env_get(env, "SLURM_STEP_ID"))
        return 0;
    const char *nn_from = "SLURM_STEP_NUM_NODES",
               *nl_from = "SLURM_STEP_NODELIST";
    const char *nn = el__job_env_get(env, nn_from),
               *nl = el__job_env_get(env, nl_from);
    if (!nn) {
        nn_from = "SLURM_JOB_NUM_NODES";
        nn = el__job_env_get(env, nn_from);
    }
    if (!nl) {
        nl_from = "SLURM_JOB_NODELIST";
        nl = el__job_env_get(env, nl_from);
    }
    const char *rank = el__job_env_get(env, "SLURM_NODEID");
    int jobid = nonneg(job), nodes = nonneg(nn), r = nonneg(rank);
    char head[256], v[32];
    if (jobid < 0 || nodes < 1 || r < 0 || r >= nodes || !nl) {
        snprintf(err, errlen,
                 "inside a Slurm step, but SLURM_JOB_ID=%s, "
                 "%s=%s, SLURM_NODEID=%s, %s=%s do not describe one; give "
                 "--nnodes, --node-rank and --master-addr",
                 job, nn_from, nn ? nn : "(unset)", rank ? rank : "(unset)",
                 nl_from, nl ? nl : "(unset)");
        return EL_EUSAGE;
    }
    char herr[300];
    if (el_job_hostlist_first(nl, head, sizeof head, herr, sizeof herr)) {
        snprintf(err, errlen, "%s: %s", nl_from, herr);
        return EL_EUSAGE;
    }
    snprintf(v, sizeof v, "%d", nodes);
    el__job_env_add(out, env, "PET_NNODES", v, nn_from, 0);
    snprintf(v, sizeof v, "%d", r);
    el__job_env_add(out, env, "PET_NODE_RANK", v, "SLURM_NODEID", 0);
    el__job_env_add(out, env, "PET_MASTER_ADDR", head, nl_from, 0);
    snprintf(v, sizeof v, "%d", 29500 + jobid % 1000);
    el__job_env_add(out, env, "PET_MASTER_PORT", v, "SLURM_JOB_ID", 0);
    el__job_env_add(out, env, "PET_RDZV_ID", job, "SLURM_JOB_ID", 0);
    return 1;
}
