/* worker.c -- the worker context: parse the environment the agent sets,
 * reach the job's store (or serve it, or serve a private one when running
 * alone), name the round's keys, and a store-based barrier.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/errfmt.h"
#include "elrun/err.h"
#include "elrun/store.h"
#include "elrun/worker.h"

#define DEFAULT_CONNECT_MS 60000
#define DEFAULT_IO_MS 60000
#define CKPT_BARRIER_MS 600000

struct el_worker {
    struct el_worker_info info;
    struct el_store *store;         /* NULL with EL_WORKER_NO_STORE      */
    struct el_store_server *server; /* the store this process serves     */
    char prefix[64];
    uint64_t barriers; /* barriers entered so far           */
    char errmsg[256];
};

static int say(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int say(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    el__verrf(err, errlen, rc, fmt, ap);
    va_end(ap);
    return rc;
}

/* ------------------------------------------------------------------------
 * The environment.
 */

/* Parse integer variable 'name' into *v, within [lo, hi].  A missing
 * variable gives EL_ENOTELASTIC if required, else *v = def. */
static int env_int(const char *name, int required, int def, int lo, int hi,
                   int *v, char *err, size_t errlen)
{
    const char *s = getenv(name);
    if (!s) {
        if (required)
            return say(err, errlen, EL_ENOTELASTIC,
                       "%s is not set: not started by elrun (run it as "
                       "`elrun ... PROGRAM`, or set ELRUN_STANDALONE=1 to "
                       "run alone as a world of 1)",
                       name);
        *v = def;
        return 0;
    }
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || x < lo || x > hi)
        return say(err, errlen, EL_EUSAGE,
                   "%s=\"%s\" is not an integer in %d..%d", name, s, lo, hi);
    *v = (int)x;
    return 0;
}

static int env_str(const char *name, int required, const char *def, char *dst,
                   size_t cap, char *err, size_t errlen)
{
    const char *s = getenv(name);
    if (!s) {
        if (required)
            return say(err, errlen, EL_ENOTELASTIC,
                       "%s is not set: not started by elrun", name);
        s = def;
    }
    if (strlen(s) >= cap)
        return say(err, errlen, EL_EUSAGE, "%s is longer than %zu bytes", name,
                   cap - 1);
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

static int want_standalone(unsigned flags)
{
    const char *s = getenv("ELRUN_STANDALONE");
    return (flags & EL_WORKER_STANDALONE) ||
           (s && strcmp(s, "") != 0 && strcmp(s, "0") != 0);
}

int el_worker_parse_env(struct el_worker_info *info, unsigned flags, char *err,
                        size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    memset(info, 0, sizeof *info);
    if (!getenv("RANK") && want_standalone(flags)) {
        info->world_size = info->local_world_size = 1;
        info->group_world_size = 1;
        info->standalone = 1;
        snprintf(info->run_id, sizeof info->run_id, "standalone");
        return 0;
    }
    const int big = 1 << 24;
    int rc = env_int("RANK", 1, 0, 0, big, &info->rank, err, errlen);
    if (rc == 0)
        rc =
            env_int("LOCAL_RANK", 1, 0, 0, big, &info->local_rank, err, errlen);
    if (rc == 0)
        rc =
            env_int("WORLD_SIZE", 1, 0, 1, big, &info->world_size, err, errlen);
    if (rc == 0)
        rc = env_str("MASTER_ADDR", 1, "", info->master_addr,
                     sizeof info->master_addr, err, errlen);
    if (rc == 0)
        rc = env_int("MASTER_PORT", 1, 0, 1, 65535, &info->master_port, err,
                     errlen);
    if (rc == 0)
        rc = env_int("LOCAL_WORLD_SIZE", 0, info->world_size, 1, big,
                     &info->local_world_size, err, errlen);
    if (rc == 0)
        rc =
            env_int("GROUP_RANK", 0, 0, 0, big, &info->group_rank, err, errlen);
    if (rc == 0)
        rc = env_int("GROUP_WORLD_SIZE", 0, 1, 1, big, &info->group_world_size,
                     err, errlen);
    if (rc == 0)
        rc = env_int("TORCHELASTIC_RESTART_COUNT", 0, 0, 0, INT32_MAX,
                     &info->restart_count, err, errlen);
    if (rc == 0)
        rc = env_int("TORCHELASTIC_MAX_RESTARTS", 0, 0, 0, INT32_MAX,
                     &info->max_restarts, err, errlen);
    if (rc == 0)
        rc = env_str("TORCHELASTIC_RUN_ID", 0, "none", info->run_id,
                     sizeof info->run_id, err, errlen);
    if (rc != 0)
        return rc;
    if (info->master_addr[0] == '\0')
        return say(err, errlen, EL_EUSAGE, "MASTER_ADDR is empty");
    if (info->rank >= info->world_size)
        return say(err, errlen, EL_EUSAGE, "RANK=%d is not below WORLD_SIZE=%d",
                   info->rank, info->world_size);
    if (info->local_rank >= info->local_world_size)
        return say(err, errlen, EL_EUSAGE,
                   "LOCAL_RANK=%d is not below LOCAL_WORLD_SIZE=%d",
                   info->local_rank, info->local_world_size);
    if (info->local_world_size > info->world_size)
        return say(err, errlen, EL_EUSAGE,
                   "LOCAL_WORLD_SIZE=%d is above WORLD_SIZE=%d",
                   info->local_world_size, info->world_size);
    if (info->group_rank >= info->group_world_size)
        return say(err, errlen, EL_EUSAGE,
                   "GROUP_RANK=%d is not below GROUP_WORLD_SIZE=%d",
                   info->group_rank, info->group_world_size);
    /* Python's str(bool), as torchrun writes it; accept 1 as well. */
    const char *u = getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (u && strcmp(u, "True") != 0 && strcmp(u, "False") != 0 &&
        strcmp(u, "1") != 0 && strcmp(u, "0") != 0)
        return say(err, errlen, EL_EUSAGE,
                   "TORCHELASTIC_USE_AGENT_STORE=\"%s\" is not True or False",
                   u);
    info->use_agent_store =
        u && (strcmp(u, "True") == 0 || strcmp(u, "1") == 0);
    return 0;
}

/* ------------------------------------------------------------------------
 * The context.
 */

int el_worker_open(struct el_worker **out, const struct el_worker_opts *opts,
                   char *err, size_t errlen)
{
    struct el_worker_opts o = opts ? *opts : (struct el_worker_opts){0};
    if (!out)
        return say(err, errlen, EL_EUSAGE, "out is NULL");
    int connect_ms =
        o.connect_timeout_ms ? o.connect_timeout_ms : DEFAULT_CONNECT_MS;
    int io_ms = o.io_timeout_ms ? o.io_timeout_ms : DEFAULT_IO_MS;
    struct el_worker *w = calloc(1, sizeof *w);
    if (!w)
        return say(err, errlen, -ENOMEM, "out of memory");
    int rc = el_worker_parse_env(&w->info, o.flags, err, errlen);
    if (rc != 0)
        goto fail;
    /* The agent's store outlives the rounds, so each round's keys live
     * under its own prefix.  A store rank 0 serves (torchrun without the
     * agent store) is new every round, and torchrun's restart counts
     * differ between agents (only the failed node's counts a restart), so
     * a count in the prefix would split the ranks: no count there, as in
     * PyTorch's env:// rendezvous. */
    if (w->info.use_agent_store || w->info.standalone)
        snprintf(w->prefix, sizeof w->prefix, "/worker/attempt_%d",
                 w->info.restart_count);
    else
        snprintf(w->prefix, sizeof w->prefix, "/worker");
    if (o.flags & EL_WORKER_NO_STORE)
        goto done;

    const char *host = w->info.master_addr;
    int port = w->info.master_port;
    if (w->info.standalone || (!w->info.use_agent_store && w->info.rank == 0)) {
        struct el_store_server_opts so = {0};
        so.host = w->info.standalone ? "127.0.0.1" : "0.0.0.0";
        so.port = w->info.standalone ? 0 : port;
        rc = el_store_server_start(&w->server, &so);
        if (rc != 0) {
            say(err, errlen, rc, "cannot serve the job's store on %s:%d: %s",
                so.host, so.port, el_strerror(rc));
            goto fail;
        }
        if (w->info.standalone) {
            host = "127.0.0.1";
            port = el_store_server_port(w->server);
        }
    }
    rc = el_store_connect(&w->store, host, port, connect_ms, io_ms);
    if (rc != 0) {
        say(err, errlen, rc, "cannot reach the job's store at %s:%d: %s", host,
            port, el_strerror(rc));
        goto fail;
    }
done:
    *out = w;
    return 0;
fail:
    el_worker_close(w);
    return rc;
}

void el_worker_close(struct el_worker *w)
{
    if (!w)
        return;
    el_store_close(w->store);
    el_store_server_close(w->server);
    free(w);
}

const struct el_worker_info *el_worker_info(const struct el_worker *w)
{
    return &w->info;
}

struct el_store *el_worker_store(struct el_worker *w)
{
    return w->store;
}

const char *el_worker_prefix(const struct el_worker *w)
{
    return w->prefix;
}

const char *el_worker_errmsg(const struct el_worker *w)
{
    return w->errmsg;
}

int el_worker_key(const struct el_worker *w, const char *name, char *buf,
                  size_t len)
{
    int n = snprintf(buf, len, "%s/%s", w->prefix, name);
    return n < 0 || (size_t)n >= len ? EL_ELIMIT : 0;
}

int el_worker_barrier(struct el_worker *w, const char *name, int timeout_ms)
{
    char base[512], count_key[600], done_key[600];
    if (!w->store)
        return say(w->errmsg, sizeof w->errmsg, EL_EUSAGE,
                   "no store (opened with EL_WORKER_NO_STORE)");
    uint64_t gen = ++w->barriers;
    char sub[400];
    snprintf(sub, sizeof sub, "barrier/%s/%" PRIu64, name ? name : "", gen);
    if (el_worker_key(w, sub, base, sizeof base) != 0)
        return say(w->errmsg, sizeof w->errmsg, EL_ELIMIT,
                   "barrier name too long");
    snprintf(count_key, sizeof count_key, "%s/count", base);
    snprintf(done_key, sizeof done_key, "%s/done", base);
    int64_t n;
    int rc = el_store_add(w->store, count_key, 1, &n);
    if (rc != 0)
        return say(w->errmsg, sizeof w->errmsg, rc, "barrier %s: %s", base,
                   el_store_errmsg(w->store));
    if (n == w->info.world_size) {
        rc = el_store_set(w->store, done_key, "1", 1);
        if (rc != 0)
            return say(w->errmsg, sizeof w->errmsg, rc, "barrier %s: %s", base,
                       el_store_errmsg(w->store));
        return 0;
    }
    void *v;
    size_t len;
    rc = el_store_get(w->store, done_key, &v, &len, timeout_ms);
    if (rc == 0) {
        free(v);
        return 0;
    }
    if (rc == -ETIMEDOUT && el_store_add(w->store, count_key, 0, &n) == 0)
        return say(w->errmsg, sizeof w->errmsg, rc,
                   "barrier %s: %" PRId64 " of %d ranks arrived within %d ms",
                   base, n, w->info.world_size, timeout_ms);
    return say(w->errmsg, sizeof w->errmsg, rc, "barrier %s: %s", base,
               el_store_errmsg(w->store));
}

int el_worker_barrier_cb(void *arg)
{
    return el_worker_barrier(arg, "ckpt", CKPT_BARRIER_MS);
}

/* ------------------------------------------------------------------------
 * The error file.
 */

/* Append s to the JSON string being built in b (cap bytes, always
 * terminated), escaped. */
static void json_escape(char *b, size_t cap, size_t *n, const char *s)
{
    for (; *s && *n + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            b[(*n)++] = '\\';
            b[(*n)++] = (char)c;
        } else if (c == '\n') {
            b[(*n)++] = '\\';
            b[(*n)++] = 'n';
        } else if (c < 0x20) {
            *n += (size_t)snprintf(b + *n, cap - *n, "\\u%04x", c);
        } else {
            b[(*n)++] = (char)c;
        }
    }
    b[*n] = '\0';
}

int el_worker_record_error(const char *fmt, ...)
{
    const char *path = getenv("TORCHELASTIC_ERROR_FILE");
    if (!path || !*path)
        return -ENOENT;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    /* The message doubles as the "callstack" the report prints.  Room for
     * two copies escaped at worst (6 bytes a byte): never truncated. */
    char json[2 * 6 * sizeof msg + 256];
    size_t n = 0;
    n += (size_t)snprintf(json, sizeof json, "{\"message\": {\"message\": \"");
    json_escape(json, sizeof json, &n, msg);
    n += (size_t)snprintf(json + n, sizeof json - n,
                          "\", \"extraInfo\": {\"py_callstack\": \"");
    json_escape(json, sizeof json, &n, msg);
    n += (size_t)snprintf(json + n, sizeof json - n,
                          "\", \"timestamp\": \"%lld\"}}}\n",
                          (long long)time(NULL));

    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >=
        (int)sizeof tmp)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int rc = 0;
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, json + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = -errno;
            break;
        }
        off += (size_t)w;
    }
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc != 0)
        unlink(tmp);
    return rc;
}
