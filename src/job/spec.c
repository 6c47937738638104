/* spec.c -- the words of the job layer: TorchX's -j sizes, job handles and
 * ids, job states (TorchX's AppState and Slurm's states mapped onto it),
 * --cfg checks, shell quoting, and whether a program can run.  Pure
 * functions; see include/elrun/job.h for the contracts.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elrun/err.h"
#include "elrun/job.h"
#include "elrun/job_aws.h"

#define SIZE_LIMIT 100000

/* A positive decimal below SIZE_LIMIT at *p, ending at one of stop (or the
 * string's end).  Advances *p.  -1 if there is none. */
static int number(const char **p, const char *stop)
{
    const char *s = *p;
    long v = 0;
    if (!isdigit((unsigned char)*s))
        return -1;
    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (*s - '0');
        if (v >= SIZE_LIMIT)
            return -1;
        s++;
    }
    if (*s && !strchr(stop, *s))
        return -1;
    *p = s;
    return v >= 1 ? (int)v : -1;
}

int el_job_parse_size(const char *spec, struct el_job_size *out, char *err,
                      size_t errlen)
{
    const char *p = spec ? spec : "";
    int a, b = -1, c = -1;
    a = number(&p, ":x");
    if (a > 0 && *p == ':') {
        p++;
        b = number(&p, "x");
        if (b > 0 && *p == 'x') {
            p++;
            c = number(&p, "");
        }
        if (b < 0 || c < 0 || *p)
            goto bad;
        out->min_nodes = a;
        out->max_nodes = b;
        out->nproc = c;
    } else if (a > 0 && *p == 'x') {
        p++;
        c = number(&p, "");
        if (c < 0 || *p)
            goto bad;
        out->min_nodes = out->max_nodes = a;
        out->nproc = c;
    } else if (a > 0 && !*p) {
        out->min_nodes = out->max_nodes = 1;
        out->nproc = a;
    } else {
        goto bad;
    }
    if (out->min_nodes > out->max_nodes) {
        snprintf(err, errlen,
                 "-j %s: the minimum node count %d is above the "
                 "maximum %d; write MIN:MAXxNPROC with MIN <= MAX",
                 spec, out->min_nodes, out->max_nodes);
        return EL_EUSAGE;
    }
    return 0;
bad:
    snprintf(err, errlen,
             "-j '%s' is not a job size; write NODESxNPROC "
             "(2x4), MIN:MAXxNPROC (2:5x8) or NPROC (4), positive numbers",
             spec ? spec : "");
    return EL_EUSAGE;
}

int el_job_check_sched(const char *name, char *err, size_t errlen)
{
    if (name &&
        (strcmp(name, "local") == 0 || strcmp(name, "slurm") == 0 ||
         strcmp(name, "aws_batch") == 0 || strcmp(name, "kubernetes") == 0))
        return 0;
    snprintf(err, errlen,
             "unknown scheduler '%s'; use -s local, slurm, aws_batch or "
             "kubernetes",
             name ? name : "");
    return EL_EUSAGE;
}

int el_job_id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n >= EL_JOB_ID_MAX || strcmp(id, ".") == 0 ||
        strcmp(id, "..") == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && !strchr("._-", id[i]))
            return 0;
    return 1;
}

int el_job_parse_role_replica(const char *text, char *role, size_t rolecap,
                              int *replica, char *err, size_t errlen)
{
    const char *slash = strchr(text, '/');
    size_t rl = slash ? (size_t)(slash - text) : strlen(text);
    *replica = -1;
    if (rl == 0 || rl >= rolecap)
        goto bad;
    for (size_t i = 0; i < rl; i++)
        if (!isalnum((unsigned char)text[i]) && !strchr("._-", text[i]))
            goto bad;
    if (slash) {
        const char *p = slash + 1;
        if (!*p || strlen(p) > 5)
            goto bad;
        for (const char *q = p; *q; q++)
            if (!isdigit((unsigned char)*q))
                goto bad;
        *replica = atoi(p);
    }
    memcpy(role, text, rl);
    role[rl] = 0;
    return 0;
bad:
    snprintf(err, errlen, "'%s' is not ROLE/REPLICA (e.g. train/0) or ROLE",
             text);
    return EL_EUSAGE;
}

/* A Kubernetes job's id: NAMESPACE:NAME, both DNS labels (lower-case
 * letters, digits and '-'; NAME may have '.'). */
static int k8s_id_valid(const char *id)
{
    const char *c = strchr(id, ':');
    if (!c || c == id || !c[1] || c - id > 63 || strlen(c + 1) > 253)
        return 0;
    for (const char *q = id; *q; q++)
        if (q != c && !islower((unsigned char)*q) &&
            !isdigit((unsigned char)*q) && *q != '-' && (*q != '.' || q < c))
            return 0;
    return id[0] != '-' && c[-1] != '-' && c[1] != '-';
}

int el_job_parse_handle(const char *text, struct el_job_handle *h, char *err,
                        size_t errlen)
{
    memset(h, 0, sizeof *h);
    h->replica = -1;
    const char *sep = strstr(text, "://");
    const char *p, *slash;
    size_t n;
    if (!sep || sep == text || (size_t)(sep - text) >= sizeof h->sched)
        goto bad;
    memcpy(h->sched, text, (size_t)(sep - text));
    p = sep + 3;
    slash = strchr(p, '/');
    if (!slash || (size_t)(slash - p) >= sizeof h->session)
        goto bad;
    memcpy(h->session, p, (size_t)(slash - p));
    p = slash + 1;
    n = strcspn(p, "/");
    if (n == 0 || n >= sizeof h->id)
        goto bad;
    memcpy(h->id, p, n);
    if (strcmp(h->sched, "kubernetes") == 0 ? !k8s_id_valid(h->id)
                                            : !el_job_id_valid(h->id))
        goto bad;
    p += n;
    if (*p == '/' && p[1] &&
        el_job_parse_role_replica(p + 1, h->role, sizeof h->role, &h->replica,
                                  err, errlen))
        goto bad;
    if (el_job_check_sched(h->sched, err, errlen)) {
        char why[160];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, errlen, "handle '%s': %s", text, why);
        return EL_EUSAGE;
    }
    return 0;
bad:
    snprintf(err, errlen,
             "'%s' is not a job handle; write SCHED://elrun/ID "
             "as elrun submit printed it (elrun list shows them)",
             text);
    return EL_EUSAGE;
}

static const char *const state_names[] = {
    "UNSUBMITTED", "SUBMITTED", "PENDING",   "RUNNING",
    "SUCCEEDED",   "FAILED",    "CANCELLED", "UNKNOWN",
};

const char *el_job_state_name(int state)
{
    return state >= 0 && state <= EL_JOB_UNKNOWN ? state_names[state]
                                                 : "UNKNOWN";
}

int el_job_state_parse(const char *name)
{
    for (int i = 0; i <= EL_JOB_UNKNOWN; i++)
        if (strcmp(name, state_names[i]) == 0)
            return i;
    return -1;
}

int el_job_state_final(int state)
{
    return state == EL_JOB_SUCCEEDED || state == EL_JOB_FAILED ||
           state == EL_JOB_CANCELLED;
}

int el_job_state_from_slurm(const char *s)
{
    static const struct {
        const char *slurm;
        int state;
    } map[] = {
        {"COMPLETED", EL_JOB_SUCCEEDED},  {"CANCELLED", EL_JOB_CANCELLED},
        {"BOOT_FAIL", EL_JOB_FAILED},     {"DEADLINE", EL_JOB_FAILED},
        {"FAILED", EL_JOB_FAILED},        {"NODE_FAIL", EL_JOB_FAILED},
        {"OUT_OF_MEMORY", EL_JOB_FAILED}, {"PREEMPTED", EL_JOB_FAILED},
        {"REVOKED", EL_JOB_FAILED},       {"TIMEOUT", EL_JOB_FAILED},
        {"PENDING", EL_JOB_PENDING},      {"REQUEUED", EL_JOB_PENDING},
        {"REQUEUE_HOLD", EL_JOB_PENDING}, {"REQUEUE_FED", EL_JOB_PENDING},
        {"RESIZING", EL_JOB_PENDING},     {"SUSPENDED", EL_JOB_PENDING},
        {"CONFIGURING", EL_JOB_PENDING},  {"RUNNING", EL_JOB_RUNNING},
        {"COMPLETING", EL_JOB_RUNNING},   {"STAGE_OUT", EL_JOB_RUNNING},
    };
    size_t n = strcspn(s, "+ \t\n");
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strlen(map[i].slurm) == n && strncmp(s, map[i].slurm, n) == 0)
            return map[i].state;
    return EL_JOB_UNKNOWN;
}

const char *const el_job_slurm_cfg_keys[] = {
    "partition",     "time", "account",       "qos", "constraint",
    "cpus-per-task", "mem",  "gpus-per-node", NULL,
};

const char *const el_job_k8s_cfg_keys[] = {
    "namespace", "image",  "rdzv-endpoint", "etcd-image", "service-account",
    "cpu",       "memory", "gpu",           NULL,
};

int el_job_check_cfg(const char *sched, const char *cfg, char *err,
                     size_t errlen)
{
    int slurm = strcmp(sched, "slurm") == 0;
    int k8s = strcmp(sched, "kubernetes") == 0;
    const char *const *keys = slurm ? el_job_slurm_cfg_keys
                              : k8s ? el_job_k8s_cfg_keys
                              : strcmp(sched, "aws_batch") == 0
                                  ? el_job_aws_cfg_keys
                                  : NULL;
    for (const char *p = cfg ? cfg : ""; *p;) {
        size_t n = strcspn(p, ",");
        const char *eq = memchr(p, '=', n);
        char key[64];
        size_t kl = eq ? (size_t)(eq - p) : n;
        if (n == 0) {
            p++;
            continue;
        }
        if (!eq || kl == 0 || kl >= sizeof key || eq + 1 == p + n) {
            snprintf(err, errlen,
                     "--cfg '%.*s' is not key=value; write "
                     "--cfg partition=debug,time=10",
                     (int)n, p);
            return EL_EUSAGE;
        }
        for (size_t i = 0; i < kl; i++)
            key[i] = p[i] == '_' ? '-' : p[i];
        key[kl] = 0;
        int known = 0;
        for (int i = 0; keys && keys[i]; i++)
            known |= strcmp(key, keys[i]) == 0;
        if (!known) {
            if (k8s)
                snprintf(err, errlen,
                         "--cfg %s: not an option of the kubernetes "
                         "scheduler; it knows image, namespace, "
                         "rdzv_endpoint, etcd_image, service_account, cpu, "
                         "memory, gpu",
                         key);
            else if (keys && !slurm)
                snprintf(err, errlen,
                         "--cfg %s: not an option of the %s "
                         "scheduler; it knows queue, image, vcpus, memory, "
                         "gpus, job_role, execution_role, efs, efs_path, "
                         "tags, elrun, privileged, share_id",
                         key, sched);
            else if (slurm)
                snprintf(err, errlen,
                         "--cfg %s: not an option of the slurm "
                         "scheduler; it knows partition, time, account, qos, "
                         "constraint, cpus-per-task, mem, gpus-per-node",
                         key);
            else
                snprintf(err, errlen,
                         "--cfg %s: the %s scheduler has no "
                         "options; drop --cfg",
                         key, sched);
            return EL_EUSAGE;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

int el_job_cfg_get(const char *cfg, const char *key, char *out, size_t cap)
{
    out[0] = 0;
    for (const char *p = cfg ? cfg : ""; *p;) {
        size_t n = strcspn(p, ",");
        const char *eq = memchr(p, '=', n);
        if (eq && (size_t)(eq - p) == strlen(key)) {
            int same = 1;
            for (size_t i = 0; i < strlen(key); i++)
                same &= (p[i] == '_' ? '-' : p[i]) == key[i];
            if (same) {
                snprintf(out, cap, "%.*s", (int)(p + n - eq - 1), eq + 1);
                return 1;
            }
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

char *el_job_shell_quote(const char *s)
{
    size_t n = 2;
    for (const char *p = s; *p; p++)
        n += *p == '\'' ? 4 : 1;
    char *o = malloc(n + 1), *q = o;
    if (!o)
        return NULL;
    *q++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(q, "'\\''", 4);
            q += 4;
        } else {
            *q++ = *p;
        }
    }
    *q++ = '\'';
    *q = 0;
    return o;
}

void el_job_make_id(const char *name, char *out, size_t cap)
{
    static const char first[] = "bcdfghjklmnpqrstvwxz";
    static const char rest[] = "bcdfghjklmnpqrstvwxz012345679";
    uint64_t r = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &r, sizeof r) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = (uint64_t)ts.tv_nsec * 6364136223846793005ULL ^
            (uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_sec;
    }
    if (fd >= 0)
        close(fd);
    char suffix[16];
    int k = 0;
    suffix[k++] = first[r % 20];
    r /= 20;
    while (k < 12) {
        suffix[k++] = rest[r % 29];
        r /= 29;
    }
    suffix[k] = 0;
    char nm[61];
    size_t i = 0;
    for (; name && name[i] && i < 60; i++)
        nm[i] = isalnum((unsigned char)name[i]) || strchr("._-", name[i])
                    ? name[i]
                    : '_';
    nm[i] = 0;
    if (i == 0)
        snprintf(nm, sizeof nm, "job");
    snprintf(out, cap, "%s-%s", nm, suffix);
}

int el_job_find_program(const char *prog, char *why, size_t cap)
{
    struct stat st;
    if (strchr(prog, '/')) {
        if (stat(prog, &st) == 0 && !S_ISDIR(st.st_mode) &&
            access(prog, X_OK) == 0)
            return 0;
        snprintf(why, cap, "program '%s' %s; check the path", prog,
                 stat(prog, &st) ? "does not exist" : "is not executable");
        return -1;
    }
    const char *path = getenv("PATH");
    for (const char *p = path && *path ? path : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        char full[4096];
        snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? p : ".", prog);
        if (stat(full, &st) == 0 && !S_ISDIR(st.st_mode) &&
            access(full, X_OK) == 0)
            return 0;
        p += n + (p[n] == ':');
    }
    snprintf(why, cap, "program '%s' was not found in PATH; give its path",
             prog);
    return -1;
}
