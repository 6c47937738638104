/* agent.c -- the per-node agent's event loop: rounds, spawning workers,
 * supervising them, stopping them, restarting (see include/elrun/agent.h).
 *
 * One thread, one epoll set: the signalfd (SIGCHLD and the handled
 * signals), the rendezvous notify fd, a timerfd for the stop grace, and the
 * read ends of teed worker streams.  Workers are reaped with
 * waitpid(WNOHANG) whenever SIGCHLD is read, so an exit is handled as soon
 * as the kernel reports it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_impl.h"
#include "elrun/agent.h"
#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/rdzv.h"

extern char **environ;

#define TAG_SIG    1
#define TAG_RDZV   2
#define TAG_TIMER  3
#define TAG_STREAM 4   /* + 2 * worker index + stream (0 out, 1 err) */

#define LINE_MAX_BYTES 65536

struct stream {
    int fd;              /* read end of the pipe, -1 when closed */
    int file;            /* log file, -1 if none */
    int console;         /* console fd to prefix lines onto, -1 if none */
    char *buf;
    size_t len;
};

struct worker {
    int local_rank, global_rank;
    pid_t pid;
    int alive;
    int status;          /* waitpid status once reaped */
    int failed;          /* exited non-zero before the stop began */
    int64_t fail_time;
    int exec_errno;
    char prefix[128];
    char dir[4096];
    struct stream st[2];
};

struct el_agent {
    struct el_agent_config cfg;
    sigset_t oldmask, mask;
    int handled[64];
    int nhandled;
    int sigfd, epfd, tfd;
    char run_dir[4096];
    int auto_dir;
    pid_t self;
    struct worker *w;
    int nalive;
    int pending_signal;  /* a handled signal arrived */
    int stopping;
    int killed;          /* SIGKILL sent */
    char *outbuf;
    size_t outcap;
};

static void event(struct el_agent *a, enum el_agent_event_level lvl,
                  const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void event(struct el_agent *a, enum el_agent_event_level lvl,
                  const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    if (!a->cfg.on_event)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    a->cfg.on_event(a->cfg.event_arg, lvl, msg);
}

/* ---- files ---- */

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

int el__rm_rf(const char *path)
{
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int el__mkdir_p(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static void rand_suffix(char *buf, int n)
{
    static const char al[] = "abcdefghijklmnopqrstuvwxyz0123456789_";
    unsigned char r[32];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, r, (size_t)n) : -1;
    if (fd >= 0)
        close(fd);
    for (int i = 0; i < n; i++) {
        unsigned v = got == n ? r[i] : (unsigned)(el_now_ns() >> (i % 8));
        buf[i] = al[v % (sizeof al - 1)];
    }
    buf[n] = 0;
}

/* ---- open / close ---- */

int el_agent_open(struct el_agent **out, const struct el_agent_config *cfg)
{
    struct el_agent *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->cfg = *cfg;
    if (!a->cfg.role)
        a->cfg.role = "default";
    if (!a->cfg.run_id)
        a->cfg.run_id = "none";
    if (a->cfg.stop_grace_ms < 0)
        a->cfg.stop_grace_ms = 30000;
    if (a->cfg.exit_barrier_ms <= 0)
        a->cfg.exit_barrier_ms = 300000;
    if (!a->cfg.out_fd && !a->cfg.err_fd) {
        a->cfg.out_fd = 1;
        a->cfg.err_fd = 2;
    }
    static const int defsigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
    const int *sigs = cfg->nsignals ? cfg->signals : defsigs;
    int nsigs = cfg->nsignals ? cfg->nsignals : 4;
    sigemptyset(&a->mask);
    sigaddset(&a->mask, SIGCHLD);
    for (int i = 0; i < nsigs && a->nhandled < 64; i++) {
        sigaddset(&a->mask, sigs[i]);
        a->handled[a->nhandled++] = sigs[i];
    }
    a->sigfd = a->epfd = a->tfd = -1;
    a->self = getpid();
    if (pthread_sigmask(SIG_BLOCK, &a->mask, &a->oldmask) != 0)
        goto fail;
    a->sigfd = signalfd(-1, &a->mask, SFD_CLOEXEC | SFD_NONBLOCK);
    a->epfd = epoll_create1(EPOLL_CLOEXEC);
    a->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (a->sigfd < 0 || a->epfd < 0 || a->tfd < 0)
        goto fail;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG_SIG};
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->sigfd, &ev) < 0)
        goto fail;
    ev.data.u64 = TAG_TIMER;
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->tfd, &ev) < 0)
        goto fail;
    *out = a;
    return 0;
fail:;
    int e = -errno;
    el_agent_close(a);
    return e ? e : -ENOMEM;
}

void el_agent_close(struct el_agent *a)
{
    if (!a)
        return;
    if (a->sigfd >= 0)
        close(a->sigfd);
    if (a->epfd >= 0)
        close(a->epfd);
    if (a->tfd >= 0)
        close(a->tfd);
    pthread_sigmask(SIG_SETMASK, &a->oldmask, NULL);
    free(a->w);
    free(a->outbuf);
    free(a);
}

const char *el_agent_run_dir(const struct el_agent *a)
{
    return a->run_dir;
}

static int make_run_dir(struct el_agent *a)
{
    char base[4096], sfx[16];
    if (a->cfg.log_dir) {
        snprintf(base, sizeof base, "%s", a->cfg.log_dir);
        int rc = el__mkdir_p(base);
        if (rc)
            return rc;
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(base, sizeof base, "%s/torchelastic_XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(base))
            return -errno;
        a->auto_dir = 1;
    }
    rand_suffix(sfx, 8);
    if (snprintf(a->run_dir, sizeof a->run_dir, "%s/%s_%s", base,
                 a->cfg.run_id, sfx) >= (int)sizeof a->run_dir)
        return -ENAMETOOLONG;
    return el__mkdir_p(a->run_dir);
}

/* ---- the worker environment ---- */

static const char *const env_set_names[] = {
    "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME",
    "LOCAL_WORLD_SIZE", "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE",
    "NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
};
#define N_ENV_SET (sizeof env_set_names / sizeof env_set_names[0])

static int env_is_set_name(const char *kv)
{
    for (size_t i = 0; i < N_ENV_SET; i++) {
        size_t n = strlen(env_set_names[i]);
        if (strncmp(kv, env_set_names[i], n) == 0 && kv[n] == '=')
            return 1;
    }
    return 0;
}

/* A NULL-terminated envp in one allocation: pointers, then strings. */
static char **build_env(const struct el_agent *a, const struct worker *w,
                        const struct el_rdzv_info *info)
{
    char vals[N_ENV_SET][4200];
    const char *nccl = getenv("NCCL_ASYNC_ERROR_HANDLING");
    const char *tnccl = getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING");
    snprintf(vals[0], sizeof vals[0], "%d", w->local_rank);
    snprintf(vals[1], sizeof vals[1], "%d", w->global_rank);
    snprintf(vals[2], sizeof vals[2], "%d", info->node_rank);
    snprintf(vals[3], sizeof vals[3], "%d", w->global_rank);
    snprintf(vals[4], sizeof vals[4], "%s", a->cfg.role);
    snprintf(vals[5], sizeof vals[5], "%d", a->cfg.nproc);
    snprintf(vals[6], sizeof vals[6], "%d", info->world_size);
    snprintf(vals[7], sizeof vals[7], "%d", info->num_nodes);
    snprintf(vals[8], sizeof vals[8], "%d", info->world_size);
    snprintf(vals[9], sizeof vals[9], "%s", info->store_host);
    snprintf(vals[10], sizeof vals[10], "%d", info->store_port);
    snprintf(vals[11], sizeof vals[11], "%" PRId64, info->round);
    snprintf(vals[12], sizeof vals[12], "%d", a->cfg.max_restarts);
    snprintf(vals[13], sizeof vals[13], "%s", a->cfg.run_id);
    snprintf(vals[14], sizeof vals[14], "%s",
             info->use_agent_store ? "True" : "False");
    snprintf(vals[15], sizeof vals[15], "%s/error.json", w->dir);
    snprintf(vals[16], sizeof vals[16], "%s", nccl ? nccl : "1");
    snprintf(vals[17], sizeof vals[17], "%s", tnccl ? tnccl : "1");

    size_t n = 0, bytes = 0;
    for (char **e = environ; *e; e++) {
        if (env_is_set_name(*e))
            continue;
        n++;
        bytes += strlen(*e) + 1;
    }
    for (size_t i = 0; i < N_ENV_SET; i++)
        bytes += strlen(env_set_names[i]) + strlen(vals[i]) + 2;
    n += N_ENV_SET;
    char **envp = malloc((n + 1) * sizeof *envp + bytes);
    if (!envp)
        return NULL;
    char *s = (char *)(envp + n + 1);
    size_t j = 0;
    for (char **e = environ; *e; e++) {
        if (env_is_set_name(*e))
            continue;
        size_t l = strlen(*e) + 1;
        memcpy(s, *e, l);
        envp[j++] = s;
        s += l;
    }
    for (size_t i = 0; i < N_ENV_SET; i++) {
        int l = sprintf(s, "%s=%s", env_set_names[i], vals[i]);
        envp[j++] = s;
        s += l + 1;
    }
    envp[j] = NULL;
    return envp;
}

/* argv with ${local_rank} / $local_rank replaced; one allocation. */
static char **build_argv(const struct el_agent *a, int local_rank)
{
    char num[16];
    int nl = snprintf(num, sizeof num, "%d", local_rank);
    size_t n = 0, bytes = 0;
    for (char *const *p = a->cfg.argv; *p; p++, n++)
        bytes += strlen(*p) * 2 + 16;  /* "$local_rank" shrinks; ample */
    char **argv = malloc((n + 1) * sizeof *argv + bytes + (size_t)nl * n);
    if (!argv)
        return NULL;
    char *s = (char *)(argv + n + 1);
    for (size_t i = 0; i < n; i++) {
        const char *src = a->cfg.argv[i];
        argv[i] = s;
        while (*src) {
            if (strncmp(src, "${local_rank}", 13) == 0) {
                memcpy(s, num, (size_t)nl);
                s += nl;
                src += 13;
            } else if (strncmp(src, "$local_rank", 11) == 0) {
                memcpy(s, num, (size_t)nl);
                s += nl;
                src += 11;
            } else {
                *s++ = *src++;
            }
        }
        *s++ = 0;
    }
    argv[n] = NULL;
    return argv;
}

static void make_prefix(const struct el_agent *a, struct worker *w)
{
    const char *t = a->cfg.prefix_template ? a->cfg.prefix_template
                                           : "[${role_name}${local_rank}]:";
    size_t j = 0;
    char *o = w->prefix;
    size_t cap = sizeof w->prefix - 1;
    while (*t && j < cap) {
        char v[64];
        const char *sub = NULL;
        size_t skip = 0;
        if (strncmp(t, "${role_name}", 12) == 0) {
            sub = a->cfg.role;
            skip = 12;
        } else if (strncmp(t, "${local_rank}", 13) == 0) {
            snprintf(v, sizeof v, "%d", w->local_rank);
            sub = v;
            skip = 13;
        } else if (strncmp(t, "${rank}", 7) == 0) {
            snprintf(v, sizeof v, "%d", w->global_rank);
            sub = v;
            skip = 7;
        }
        if (sub) {
            while (*sub && j < cap)
                o[j++] = *sub++;
            t += skip;
        } else {
            o[j++] = *t++;
        }
    }
    o[j] = 0;
}

/* ---- starting workers ---- */

static void emit_lines(struct el_agent *a, struct worker *w, int fd,
                       const char *buf, size_t n);

static void close_streams(struct el_agent *a, struct worker *w)
{
    for (int s = 0; s < 2; s++) {
        struct stream *st = &w->st[s];
        if (st->len && st->console >= 0 && st->buf) {
            st->buf[st->len] = '\n';  /* the buffer has room for it */
            emit_lines(a, w, st->console, st->buf, st->len + 1);
        }
        if (st->fd >= 0) {
            epoll_ctl(a->epfd, EPOLL_CTL_DEL, st->fd, NULL);
            close(st->fd);
            st->fd = -1;
        }
        if (st->file >= 0) {
            close(st->file);
            st->file = -1;
        }
        free(st->buf);
        st->buf = NULL;
        st->len = 0;
    }
}

static int open_log(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

/* Kill every still-running worker's process group with SIGKILL and reap
 * them (used when a start fails half-way). */
static void kill_all_now(struct el_agent *a)
{
    for (int i = 0; i < a->cfg.nproc; i++) {
        struct worker *w = &a->w[i];
        if (w->pid > 0)
            kill(-w->pid, SIGKILL);
        if (w->alive) {
            int st;
            while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR) {
            }
            w->alive = 0;
            w->status = st;
        }
        close_streams(a, w);
    }
    a->nalive = 0;
}

static int start_workers(struct el_agent *a, const struct el_rdzv_info *info,
                         struct el_agent_result *res)
{
    char attempt[4200];
    int nproc = a->cfg.nproc, rc;
    int xpipe[EL__MAX_WORKERS_STACK];
    int *xp = nproc <= EL__MAX_WORKERS_STACK ? xpipe
                                             : malloc(sizeof(int) * (size_t)nproc);
    if (!xp)
        return -ENOMEM;

    snprintf(attempt, sizeof attempt, "%s/attempt_%" PRId64, a->run_dir,
             info->round);
    el__rm_rf(attempt);
    memset(a->w, 0, sizeof *a->w * (size_t)nproc);
    for (int i = 0; i < nproc; i++) {
        struct worker *w = &a->w[i];
        w->local_rank = i;
        w->global_rank = info->base_rank + i;
        w->st[0].fd = w->st[1].fd = w->st[0].file = w->st[1].file = -1;
        w->st[0].console = w->st[1].console = -1;
        xp[i] = -1;
        if (snprintf(w->dir, sizeof w->dir, "%s/%d", attempt, i) >=
            (int)sizeof w->dir) {
            rc = -ENAMETOOLONG;
            goto fail_early;
        }
        if ((rc = el__mkdir_p(w->dir)))
            goto fail_early;
        make_prefix(a, w);
    }
    a->nalive = 0;
    a->stopping = a->killed = 0;
    for (int i = 0; i < nproc; i++) {
        struct worker *w = &a->w[i];
        int child_fd[2] = {-1, -1};
        int pipes[2][2] = {{-1, -1}, {-1, -1}};
        int show = !a->cfg.console || a->cfg.console[i];
        int redir = a->cfg.redirect ? a->cfg.redirect[i] : 0;
        int tee = a->cfg.tee ? a->cfg.tee[i] : 0;
        for (int s = 0; s < 2; s++) {
            int bit = 1 << s;
            const char *name = s ? "stderr.log" : "stdout.log";
            if (tee & bit) {
                if (pipe2(pipes[s], O_CLOEXEC) < 0) {
                    rc = -errno;
                    goto fail;
                }
                w->st[s].fd = pipes[s][0];
                w->st[s].file = open_log(w->dir, name);
                w->st[s].console = show ? (s ? a->cfg.err_fd : a->cfg.out_fd)
                                        : -1;
                w->st[s].buf = malloc(LINE_MAX_BYTES);
                if (!w->st[s].buf) {
                    rc = -ENOMEM;
                    goto fail;
                }
                fcntl(pipes[s][0], F_SETFL, O_NONBLOCK);
                child_fd[s] = pipes[s][1];
            } else if (redir & bit) {
                child_fd[s] = open_log(w->dir, name);
                if (child_fd[s] < 0) {
                    rc = -errno;
                    goto fail;
                }
            } else if (!show) {
                child_fd[s] = open("/dev/null", O_WRONLY | O_CLOEXEC);
            }
        }
        char **argv = build_argv(a, i);
        char **envp = build_env(a, w, info);
        int ep[2];
        if (!argv || !envp || pipe2(ep, O_CLOEXEC) < 0) {
            rc = !argv || !envp ? -ENOMEM : -errno;
            free(argv);
            free(envp);
            for (int s = 0; s < 2; s++)
                if (child_fd[s] >= 0)
                    close(child_fd[s]);
            goto fail;
        }
        pid_t pid = fork();
        if (pid == 0) {
            /* Child: only async-signal-safe calls from here on. */
            struct sigaction dfl = {.sa_handler = SIG_DFL};
            for (int s = 1; s < 65; s++)
                if (s != SIGKILL && s != SIGSTOP)
                    sigaction(s, &dfl, NULL);
            sigprocmask(SIG_SETMASK, &a->oldmask, NULL);
            setpgid(0, 0);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != a->self)
                _exit(127);
            for (int s = 0; s < 2; s++)
                if (child_fd[s] >= 0)
                    dup2(child_fd[s], s + 1);
            execvpe(argv[0], argv, envp);
            int e = errno;
            ssize_t wr = write(ep[1], &e, sizeof e);
            (void)wr;
            _exit(127);
        }
        int fork_errno = errno;
        free(argv);
        free(envp);
        close(ep[1]);
        for (int s = 0; s < 2; s++)
            if (child_fd[s] >= 0)
                close(child_fd[s]);
        if (pid < 0) {
            close(ep[0]);
            rc = -fork_errno;
            goto fail;
        }
        setpgid(pid, pid);
        w->pid = pid;
        w->alive = 1;
        a->nalive++;
        xp[i] = ep[0];
        for (int s = 0; s < 2; s++) {
            if (w->st[s].fd < 0)
                continue;
            struct epoll_event ev = {.events = EPOLLIN,
                                     .data.u64 = TAG_STREAM + 2 * (uint64_t)i +
                                                 (uint64_t)s};
            epoll_ctl(a->epfd, EPOLL_CTL_ADD, w->st[s].fd, &ev);
        }
    }
    /* Every worker is forked; now learn which exec calls failed. */
    rc = 0;
    for (int i = 0; i < nproc; i++) {
        int e = 0;
        ssize_t n;
        while ((n = read(xp[i], &e, sizeof e)) < 0 && errno == EINTR) {
        }
        close(xp[i]);
        xp[i] = -1;
        if (n == (ssize_t)sizeof e) {
            a->w[i].exec_errno = e;
            rc = 1;
        }
    }
    if (xp != xpipe)
        free(xp);
    if (rc == 1) {
        for (int i = 0; i < nproc; i++) {
            if (a->w[i].exec_errno) {
                snprintf(res->errmsg, sizeof res->errmsg,
                         "cannot run '%s' for local rank %d: %s",
                         a->cfg.argv[0], i, strerror(a->w[i].exec_errno));
                break;
            }
        }
        return 1;
    }
    return 0;
fail_early:
    for (int i = 0; i < nproc; i++)
        xp[i] = -1;
fail:
    for (int i = 0; i < nproc; i++)
        if (xp[i] >= 0)
            close(xp[i]);
    if (xp != xpipe)
        free(xp);
    kill_all_now(a);
    snprintf(res->errmsg, sizeof res->errmsg, "cannot start the workers: %s",
             el_strerror(rc));
    return rc;
}

/* ---- output pumping ---- */

static void console_write(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* Emit buf[0..n) (whole lines) to the console, each line prefixed, in one
 * write so lines of different workers never mix. */
static void emit_lines(struct el_agent *a, struct worker *w, int fd,
                       const char *buf, size_t n)
{
    size_t plen = strlen(w->prefix), lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += buf[i] == '\n';
    size_t need = n + lines * plen + 1;
    if (need > a->outcap) {
        char *nb = realloc(a->outbuf, need);
        if (!nb)
            return;
        a->outbuf = nb;
        a->outcap = need;
    }
    size_t o = 0, start = 0;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n')
            continue;
        memcpy(a->outbuf + o, w->prefix, plen);
        o += plen;
        memcpy(a->outbuf + o, buf + start, i + 1 - start);
        o += i + 1 - start;
        start = i + 1;
    }
    console_write(fd, a->outbuf, o);
}

/* Read what a teed stream has; eof = drain to the end and close. */
static void pump(struct el_agent *a, struct worker *w, int s)
{
    struct stream *st = &w->st[s];
    while (st->fd >= 0) {
        ssize_t n = read(st->fd, st->buf + st->len,
                         LINE_MAX_BYTES - 1 - st->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            /* EOF: flush a last partial line with a newline. */
            if (st->len && st->console >= 0) {
                st->buf[st->len] = '\n';
                emit_lines(a, w, st->console, st->buf, st->len + 1);
            }
            st->len = 0;
            epoll_ctl(a->epfd, EPOLL_CTL_DEL, st->fd, NULL);
            close(st->fd);
            st->fd = -1;
            return;
        }
        if (st->file >= 0)
            console_write(st->file, st->buf + st->len, (size_t)n);
        st->len += (size_t)n;
        size_t last = st->len;
        while (last > 0 && st->buf[last - 1] != '\n')
            last--;
        if (last == 0 && st->len >= LINE_MAX_BYTES - 1) {
            /* A line longer than the buffer: cut it here. */
            st->buf[st->len] = '\n';
            last = st->len + 1;
            if (st->console >= 0)
                emit_lines(a, w, st->console, st->buf, last);
            st->len = 0;
            continue;
        }
        if (last > 0) {
            if (st->console >= 0)
                emit_lines(a, w, st->console, st->buf, last);
            memmove(st->buf, st->buf + last, st->len - last);
            st->len -= last;
        }
    }
}

static void drain_all(struct el_agent *a)
{
    for (int i = 0; i < a->cfg.nproc; i++)
        for (int s = 0; s < 2; s++)
            if (a->w[i].st[s].fd >= 0) {
                /* Non-blocking: take what is there; the writers are dead. */
                pump(a, &a->w[i], s);
            }
}

/* ---- events ---- */

static int is_handled(const struct el_agent *a, int sig)
{
    for (int i = 0; i < a->nhandled; i++)
        if (a->handled[i] == sig)
            return 1;
    return 0;
}

static void reap(struct el_agent *a)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0)
            return;
        for (int i = 0; i < a->cfg.nproc; i++) {
            struct worker *w = &a->w[i];
            if (w->pid != pid || !w->alive)
                continue;
            w->alive = 0;
            w->status = st;
            a->nalive--;
            int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
            if (!ok && !a->stopping) {
                w->failed = 1;
                w->fail_time = (int64_t)time(NULL);
            }
            if (WIFSIGNALED(st))
                event(a, ok || a->stopping ? EL_AGENT_DEBUG : EL_AGENT_WARN,
                      "worker local_rank %d (rank %d, pid %d) killed by "
                      "signal %d (%s)", w->local_rank, w->global_rank,
                      (int)pid, WTERMSIG(st), sigabbrev_np(WTERMSIG(st))
                      ? sigabbrev_np(WTERMSIG(st)) : "?");
            else
                event(a, ok || a->stopping ? EL_AGENT_DEBUG : EL_AGENT_WARN,
                      "worker local_rank %d (rank %d, pid %d) exited with "
                      "code %d", w->local_rank, w->global_rank, (int)pid,
                      WEXITSTATUS(st));
        }
    }
}

/* Read every pending signal; returns 1 if a handled one arrived. */
static int read_signals(struct el_agent *a)
{
    struct signalfd_siginfo si;
    int got = 0;
    while (read(a->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD) {
            reap(a);
        } else if (is_handled(a, (int)si.ssi_signo)) {
            if (!a->pending_signal)
                a->pending_signal = (int)si.ssi_signo;
            got = 1;
        }
    }
    reap(a);  /* SIGCHLDs coalesce; always reap */
    return got;
}

static void arm_timer(struct el_agent *a, int ms)
{
    struct itimerspec its = {0};
    if (ms > 0) {
        its.it_value.tv_sec = ms / 1000;
        its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
    } else if (ms == 0) {
        its.it_value.tv_nsec = 1;
    }
    timerfd_settime(a->tfd, 0, &its, NULL);
}

static void signal_groups(struct el_agent *a, int sig)
{
    for (int i = 0; i < a->cfg.nproc; i++)
        if (a->w[i].alive)
            kill(-a->w[i].pid, sig);
}

/* Dispatch one epoll event that is not the signalfd or the timer. */
static void on_stream_event(struct el_agent *a, uint64_t tag)
{
    uint64_t idx = tag - TAG_STREAM;
    int i = (int)(idx / 2), s = (int)(idx % 2);
    if (i < a->cfg.nproc)
        pump(a, &a->w[i], s);
}

/* Stop every running worker: sig to each process group, the grace, then
 * SIGKILL.  Returns once every worker is reaped; then SIGKILLs each group
 * again so no grandchild outlives its worker. */
static void stop_workers(struct el_agent *a, int sig)
{
    struct epoll_event evs[16];
    a->stopping = 1;
    if (a->nalive > 0) {
        event(a, EL_AGENT_INFO, "stopping %d worker(s) with signal %d (%s)",
              a->nalive, sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
        signal_groups(a, sig);
        if (sig == SIGKILL)
            a->killed = 1;
        else
            arm_timer(a, a->cfg.stop_grace_ms);
    }
    while (a->nalive > 0) {
        int n = epoll_wait(a->epfd, evs, 16, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        for (int e = 0; e < n; e++) {
            uint64_t tag = evs[e].data.u64;
            if (tag == TAG_SIG) {
                int prev = a->pending_signal;
                if (read_signals(a) && prev && !a->killed) {
                    /* A second death signal: no more grace. */
                    signal_groups(a, SIGKILL);
                    a->killed = 1;
                }
                if (!prev && a->pending_signal && sig != a->pending_signal &&
                    !a->killed)
                    signal_groups(a, a->pending_signal);
            } else if (tag == TAG_TIMER) {
                uint64_t x;
                if (read(a->tfd, &x, sizeof x) < 0) {
                    /* spurious */
                }
                if (!a->killed && a->nalive > 0) {
                    event(a, EL_AGENT_WARN, "%d worker(s) still running "
                          "after %d ms; sending SIGKILL", a->nalive,
                          a->cfg.stop_grace_ms);
                    signal_groups(a, SIGKILL);
                    a->killed = 1;
                }
            } else if (tag >= TAG_STREAM) {
                on_stream_event(a, tag);
            }
        }
    }
    arm_timer(a, -1);
    for (int i = 0; i < a->cfg.nproc; i++)
        if (a->w[i].pid > 0)
            kill(-a->w[i].pid, SIGKILL);
    drain_all(a);
    for (int i = 0; i < a->cfg.nproc; i++)
        close_streams(a, &a->w[i]);
}

/* ---- failures ---- */

static void collect_failures(struct el_agent *a, struct el_agent_result *res)
{
    el__agent_free_failures(res);
    int n = 0;
    for (int i = 0; i < a->cfg.nproc; i++)
        n += a->w[i].failed;
    res->failures = calloc((size_t)(n ? n : 1), sizeof *res->failures);
    if (!res->failures)
        return;
    for (int i = 0; i < a->cfg.nproc; i++) {
        struct worker *w = &a->w[i];
        if (!w->failed)
            continue;
        struct el_agent_failure *f = &res->failures[res->nfailures++];
        f->local_rank = w->local_rank;
        f->global_rank = w->global_rank;
        f->pid = w->pid;
        f->exitcode = WIFSIGNALED(w->status) ? -WTERMSIG(w->status)
                                             : WEXITSTATUS(w->status);
        f->timestamp = w->fail_time;
        char path[4200];
        snprintf(path, sizeof path, "%s/error.json", w->dir);
        el__agent_read_error_file(f, path);
    }
    res->root = 0;
    for (int i = 1; i < res->nfailures; i++)
        if (res->failures[i].timestamp < res->failures[res->root].timestamp)
            res->root = i;
}

/* ---- the run ---- */

/* Block in the rendezvous; a signal cancels it.  Returns 0, 1 (signaled) or
 * an error. */
static int rendezvous(struct el_agent *a, struct el_rdzv *r,
                      struct el_rdzv_info *info)
{
    for (;;) {
        int rc = el_rdzv_next(r, a->cfg.nproc, a->sigfd, info);
        if (rc != -ECANCELED)
            return rc;
        if (read_signals(a))
            return 1;
    }
}

int el_agent_run(struct el_agent *a, struct el_rdzv *r,
                 struct el_agent_result *res)
{
    int rc, restarts_left = a->cfg.max_restarts;
    memset(res, 0, sizeof *res);
    a->w = calloc((size_t)a->cfg.nproc, sizeof *a->w);
    if (!a->w)
        return -ENOMEM;
    if ((rc = make_run_dir(a))) {
        snprintf(res->errmsg, sizeof res->errmsg, "cannot create the log "
                 "directory under %s: %s", a->cfg.log_dir ? a->cfg.log_dir
                 : "$TMPDIR", strerror(-rc));
        res->outcome = EL_AGENT_EXEC_ERROR;
        return 0;
    }
    int nfd = el_rdzv_notify_fd(r);
    if (nfd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG_RDZV};
        epoll_ctl(a->epfd, EPOLL_CTL_ADD, nfd, &ev);
    }

    for (;;) {
        struct el_rdzv_info info;
        if (a->pending_signal) {
            /* A handled signal arrived while the workers were stopping. */
            res->outcome = EL_AGENT_SIGNALED;
            res->signal = a->pending_signal;
            break;
        }
        rc = rendezvous(a, r, &info);
        if (rc == 1) {
            res->outcome = EL_AGENT_SIGNALED;
            res->signal = a->pending_signal;
            break;
        }
        if (rc) {
            res->outcome = EL_AGENT_RDZV_ERROR;
            snprintf(res->errmsg, sizeof res->errmsg, "rendezvous failed: %s",
                     el_rdzv_errmsg(r));
            break;
        }
        res->rounds++;
        event(a, EL_AGENT_INFO, "round %" PRId64 ": node %d of %d, ranks "
              "%d-%d of %d, store %s:%d; starting %d worker(s)", info.round,
              info.node_rank, info.num_nodes, info.base_rank,
              info.base_rank + a->cfg.nproc - 1, info.world_size,
              info.store_host, info.store_port, a->cfg.nproc);
        rc = start_workers(a, &info, res);
        if (rc == 1) {
            stop_workers(a, SIGKILL);
            el_rdzv_exit_barrier(r, 0, 0, -1);
            res->outcome = EL_AGENT_EXEC_ERROR;
            break;
        }
        if (rc < 0) {
            res->outcome = EL_AGENT_EXEC_ERROR;
            break;
        }
        /* Supervise until something ends the round. */
        int failed = 0, membership = 0, lost = 0;
        struct epoll_event evs[16];
        while (a->nalive > 0 && !failed && !membership && !lost &&
               !a->pending_signal) {
            int n = epoll_wait(a->epfd, evs, 16, -1);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -errno;
            for (int e = 0; e < n; e++) {
                uint64_t tag = evs[e].data.u64;
                if (tag == TAG_SIG) {
                    read_signals(a);
                } else if (tag == TAG_RDZV) {
                    int waiting = 0;
                    el_rdzv_ack_notify(r);
                    if (el_rdzv_num_nodes_waiting(r, &waiting) < 0)
                        lost = 1;
                    else if (waiting > 0)
                        membership = 1;
                } else if (tag == TAG_TIMER) {
                    uint64_t x;
                    if (read(a->tfd, &x, sizeof x) < 0) {
                        /* spurious */
                    }
                } else if (tag >= TAG_STREAM) {
                    on_stream_event(a, tag);
                }
            }
            for (int i = 0; i < a->cfg.nproc; i++)
                failed |= a->w[i].failed;
        }
        if (a->pending_signal) {
            event(a, EL_AGENT_WARN, "received signal %d (%s); forwarding it "
                  "to the workers and shutting down", a->pending_signal,
                  sigabbrev_np(a->pending_signal)
                  ? sigabbrev_np(a->pending_signal) : "?");
            stop_workers(a, a->pending_signal);
            res->outcome = EL_AGENT_SIGNALED;
            res->signal = a->pending_signal;
            break;
        }
        if (lost) {
            stop_workers(a, SIGTERM);
            res->outcome = EL_AGENT_RDZV_ERROR;
            snprintf(res->errmsg, sizeof res->errmsg, "%s",
                     el_rdzv_errmsg(r));
            break;
        }
        if (membership) {
            event(a, EL_AGENT_WARN, "other nodes are waiting for a new "
                  "round; restarting the workers (not counted as a "
                  "restart)");
            stop_workers(a, SIGTERM);
            continue;
        }
        if (failed) {
            stop_workers(a, SIGTERM);
            collect_failures(a, res);
            if (a->pending_signal) {
                /* Told to shut down while the group was stopping. */
                res->outcome = EL_AGENT_SIGNALED;
                res->signal = a->pending_signal;
                break;
            }
            /* A backend with a job-wide restart budget decides for every
             * node at once; otherwise this agent counts its own. */
            int budget = el_rdzv_report_failure(r, "worker group failed");
            if (budget == 0) {
                res->restarts++;
                event(a, EL_AGENT_WARN, "worker group failed; the job "
                      "restarts on every node");
                continue;
            }
            if (budget != -ENOTSUP) {
                event(a, EL_AGENT_WARN, "%s", el_rdzv_errmsg(r));
                el_rdzv_exit_barrier(r, 0, 0, -1);
                res->outcome = EL_AGENT_FAILED;
                break;
            }
            if (restarts_left > 0) {
                restarts_left--;
                res->restarts++;
                event(a, EL_AGENT_WARN, "worker group failed; restarting "
                      "(%d of %d restarts used)", res->restarts,
                      a->cfg.max_restarts);
                continue;
            }
            el_rdzv_exit_barrier(r, 0, 0, -1);
            res->outcome = EL_AGENT_FAILED;
            break;
        }
        /* Every worker exited 0. */
        stop_workers(a, SIGKILL);  /* nothing left but stray grandchildren */
        el__agent_free_failures(res);
        event(a, EL_AGENT_INFO, "all %d worker(s) succeeded; waiting for the "
              "other nodes", a->cfg.nproc);
        rc = el_rdzv_exit_barrier(r, 1, a->cfg.exit_barrier_ms, a->sigfd);
        if (rc == -ECANCELED && read_signals(a)) {
            res->outcome = EL_AGENT_SIGNALED;
            res->signal = a->pending_signal;
            break;
        }
        if (rc)
            event(a, EL_AGENT_WARN, "exit barrier: %s", el_rdzv_errmsg(r));
        res->outcome = EL_AGENT_SUCCEEDED;
        break;
    }
    if (res->outcome == EL_AGENT_SUCCEEDED && a->auto_dir) {
        char base[4096];
        snprintf(base, sizeof base, "%s", a->run_dir);
        char *slash = strrchr(base, '/');
        if (slash)
            *slash = 0;
        el__rm_rf(base);
    }
    return 0;
}
