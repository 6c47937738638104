/* report.c -- failures as torchrun reports them: reading a worker's
 * TORCHELASTIC_ERROR_FILE (the JSON that PyTorch's @record writes), the
 * ChildFailedError box with the root cause, and the agent's own error file.
 * The formats follow torch/distributed/elastic/multiprocessing/errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_impl.h"
#include "common/sbuf.h"
#include "elrun/agent.h"

#define NO_TRACEBACK \
    "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"

/* s with every "\n" replaced by "\n  " (torch indents tracebacks so). */
static char *indent(const char *s)
{
    size_t n = strlen(s), nl = 0;
    for (size_t i = 0; i < n; i++)
        nl += s[i] == '\n';
    char *o = malloc(n + 2 * nl + 1), *p = o;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        *p++ = s[i];
        if (s[i] == '\n') {
            *p++ = ' ';
            *p++ = ' ';
        }
    }
    *p = 0;
    return o;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = 0;
    return buf;
}

void el__agent_read_error_file(struct el_agent_failure *f, const char *path)
{
    char *text = slurp(path);
    json_t *root = text ? json_loads(text, 0, NULL) : NULL;
    json_t *msg = root ? json_object_get(root, "message") : NULL;
    if (msg && json_is_object(msg)) {
        json_t *extra = json_object_get(msg, "extraInfo");
        json_t *cs = extra ? json_object_get(extra, "py_callstack") : NULL;
        json_t *ts = extra ? json_object_get(extra, "timestamp") : NULL;
        json_t *m = json_object_get(msg, "message");
        const char *show = json_is_string(cs)  ? json_string_value(cs)
                           : json_is_string(m) ? json_string_value(m)
                                               : "<N/A>";
        f->message = indent(show);
        if (json_is_string(ts))
            f->timestamp = strtoll(json_string_value(ts), NULL, 10);
        else if (json_is_integer(ts))
            f->timestamp = json_integer_value(ts);
    } else if (msg && json_is_string(msg)) {
        json_t *ts = json_object_get(root, "timestamp");
        f->message = strdup(json_string_value(msg));
        f->timestamp = json_is_integer(ts) ? json_integer_value(ts)
                       : json_is_string(ts)
                           ? strtoll(json_string_value(ts), NULL, 10)
                           : 0;
    }
    if (f->message) {
        f->error_file = strdup(path);
        f->error_json = text;
        text = NULL;
    } else {
        char buf[256];
        if (f->exitcode < 0) {
            const char *nm = sigabbrev_np(-f->exitcode);
            snprintf(buf, sizeof buf, "Signal %d (SIG%s) received by PID %d",
                     -f->exitcode, nm ? nm : "UNKNOWN", (int)f->pid);
        } else {
            snprintf(buf, sizeof buf, "%s", NO_TRACEBACK);
        }
        f->message = strdup(buf);
    }
    json_decref(root);
    free(text);
}

/* The first line of text that starts an import error's message, copied
 * without its newline, or NULL. */
static char *import_line(const char *text)
{
    static const char *const kinds[] = {"ModuleNotFoundError: ",
                                        "ImportError: "};
    for (const char *p = text; p && *p;
         p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        while (*p == ' ')
            p++;
        for (size_t k = 0; k < 2; k++)
            if (strncmp(p, kinds[k], strlen(kinds[k])) == 0)
                return strndup(p, strcspn(p, "\n"));
    }
    return NULL;
}

void el__agent_find_import_error(struct el_agent_failure *f, const char *dir)
{
    if (f->error_json) {
        f->import_error = import_line(f->message);
        return;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/stderr.log", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    /* A traceback ends the file: its last 8 KiB are enough. */
    char buf[8193];
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > 8192 ? end - 8192 : 0;
    ssize_t n = pread(fd, buf, 8192, from);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = 0;
    f->import_error = import_line(buf);
}

void el__agent_free_failures(struct el_agent_result *res)
{
    for (int i = 0; i < res->nfailures; i++) {
        free(res->failures[i].import_error);
        free(res->failures[i].error_file);
        free(res->failures[i].error_json);
        free(res->failures[i].message);
    }
    free(res->failures);
    res->failures = NULL;
    res->nfailures = 0;
    res->root = 0;
}

void el_agent_result_free(struct el_agent_result *res)
{
    el__agent_free_failures(res);
}

void el_agent_fqdn(char *buf, size_t cap)
{
    char host[256] = "localhost";
    struct addrinfo hints = {0}, *ai = NULL;
    gethostname(host, sizeof host - 1);
    snprintf(buf, cap, "%s", host);
    hints.ai_family = AF_UNSPEC;
    hints.ai_flags = AI_CANONNAME;
    if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai)
        return;
    char name[NI_MAXHOST];
    if (getnameinfo(ai->ai_addr, ai->ai_addrlen, name, sizeof name, NULL, 0,
                    NI_NAMEREQD) == 0)
        snprintf(buf, cap, "%s", name);
    else if (ai->ai_canonname && strchr(ai->ai_canonname, '.'))
        snprintf(buf, cap, "%s", ai->ai_canonname);
    freeaddrinfo(ai);
}

/* ---- the ChildFailedError box ---- */

static void sb_rep(struct el__sbuf *b, char c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        el__sbuf_add(b, &c, 1);
}

/* Characters (not bytes) in the longest line of s, as Python's len(). */
static size_t widest(const char *s)
{
    size_t w = 0, cur = 0;
    for (; *s; s++) {
        if (*s == '\n') {
            cur = 0;
            continue;
        }
        if (((unsigned char)*s & 0xC0) != 0x80)
            cur++;
        if (cur > w)
            w = cur;
    }
    return w;
}

static char *format_one(int idx, const struct el_agent_failure *f,
                        const char *host)
{
    char t[64], head[1024];
    time_t ts = (time_t)f->timestamp;
    struct tm tm;
    localtime_r(&ts, &tm);
    strftime(t, sizeof t, "%Y-%m-%d_%H:%M:%S", &tm);
    snprintf(head, sizeof head,
             "[%d]:\n"
             "  time      : %s\n"
             "  host      : %s\n"
             "  rank      : %d (local_rank: %d)\n"
             "  exitcode  : %d (pid: %d)\n"
             "  error_file: %s\n"
             "  traceback : ",
             idx, t, host, f->global_rank, f->local_rank, f->exitcode,
             (int)f->pid, f->error_file ? f->error_file : "<N/A>");
    struct el__sbuf b = {0};
    el__sbuf_str(&b, head);
    el__sbuf_str(&b, f->message ? f->message : "<N/A>");
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

char *el_agent_format_failures(const struct el_agent_result *res,
                               const char *title, const char *host)
{
    struct el__sbuf b = {0};
    char *full_title = NULL;
    size_t tl = strlen(title) + 8;
    int n = res->nfailures;
    char **fmt = calloc((size_t)(n ? n : 1), sizeof *fmt);
    full_title = malloc(tl);
    if (!fmt || !full_title) {
        free(fmt);
        free(full_title);
        return NULL;
    }
    snprintf(full_title, tl, "%s FAILED", title);
    size_t width = widest(full_title);
    for (int i = 0; i < n; i++) {
        fmt[i] = format_one(i, &res->failures[i], host);
        if (fmt[i] && widest(fmt[i]) > width)
            width = widest(fmt[i]);
    }
    if (width > 60)
        width = 60;
    sb_rep(&b, '=', width);
    el__sbuf_str(&b, "\n");
    el__sbuf_str(&b, full_title);
    el__sbuf_str(&b, "\n");
    sb_rep(&b, '-', width);
    el__sbuf_str(&b, "\nFailures:\n");
    int others = 0;
    for (int i = 0; i < n; i++) {
        if (i == res->root || !fmt[i])
            continue;
        if (others++)
            el__sbuf_str(&b, "\n");
        el__sbuf_str(&b, fmt[i]);
    }
    if (!others)
        el__sbuf_str(&b, "  <NO_OTHER_FAILURES>");
    el__sbuf_str(&b, "\n");
    sb_rep(&b, '-', width);
    el__sbuf_str(&b, "\nRoot Cause (first observed failure):\n");
    if (n > 0 && fmt[res->root])
        el__sbuf_str(&b, fmt[res->root]);
    el__sbuf_str(&b, "\n");
    sb_rep(&b, '=', width);
    el__sbuf_str(&b, "\n");
    for (int i = 0; i < n; i++)
        free(fmt[i]);
    free(fmt);
    free(full_title);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int el_agent_write_error_file(const struct el_agent_result *res,
                              const char *path)
{
    if (res->nfailures == 0)
        return -EINVAL;
    const struct el_agent_failure *f = &res->failures[res->root];
    json_t *root = f->error_json ? json_loads(f->error_json, 0, NULL) : NULL;
    if (root) {
        json_t *msg = json_object_get(root, "message");
        if (f->exitcode && json_is_object(msg))
            json_object_set_new(msg, "errorCode", json_integer(f->exitcode));
    } else {
        char ts[32], m[600];
        snprintf(ts, sizeof ts, "%" PRId64, f->timestamp);
        snprintf(m, sizeof m,
                 "ChildFailedError: rank %d (local_rank %d, "
                 "pid %d) failed with exitcode %d: %s",
                 f->global_rank, f->local_rank, (int)f->pid, f->exitcode,
                 f->message ? f->message : "");
        root = json_pack("{s:{s:s, s:{s:s, s:s}, s:i}}", "message", "message",
                         m, "extraInfo", "py_callstack", "", "timestamp", ts,
                         "errorCode", f->exitcode);
    }
    if (!root)
        return -ENOMEM;
    unlink(path);
    int rc =
        json_dump_file(root, path, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(root);
    return rc == 0 ? 0 : -EIO;
}
