/* spawn.c -- the workers of one round: the run's log directory, each
 * worker's directory, environment (torchrun's variables), argv and line
 * prefix, and starting them.
 *
 * el__agent_start_workers forks every worker (own process group,
 * PR_SET_PDEATHSIG SIGKILL), wires its stdout/stderr to a log file, a tee
 * pipe (registered in the agent's epoll set) or /dev/null, and only then
 * learns from a close-on-exec pipe per worker which exec calls failed, so a
 * bad program costs one round trip, not one per worker.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent_impl.h"
#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/rdzv.h"

extern char **environ;

/* ---- files ---- */

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
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

int el__agent_make_run_dir(struct el_agent *a)
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
    if (snprintf(a->run_dir, sizeof a->run_dir, "%s/%s_%s", base, a->cfg.run_id,
                 sfx) >= (int)sizeof a->run_dir)
        return -ENAMETOOLONG;
    return el__mkdir_p(a->run_dir);
}

/* ---- the worker environment ---- */

static const char *const env_set_names[] = {
    "LOCAL_RANK",
    "RANK",
    "GROUP_RANK",
    "ROLE_RANK",
    "ROLE_NAME",
    "LOCAL_WORLD_SIZE",
    "WORLD_SIZE",
    "GROUP_WORLD_SIZE",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_ERROR_FILE",
    "NCCL_ASYNC_ERROR_HANDLING",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "ELRUN_HEARTBEAT_FILE",
    "ELRUN_PREEMPT_SIGNAL",    /* watch.c's */
    "TORCHELASTIC_TIMER_FILE", /* filetimer.c's; this and the last: */
    "ELRUN_PROGRESS_FD",       /* left out when empty (observe.c's) */
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
static char **build_env(const struct el_agent *a, const struct el__worker *w,
                        const struct el_rdzv_info *info, int progress_fd)
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
    el__watch_env(a, w, vals[18], sizeof vals[18], vals[19], sizeof vals[19]);
    snprintf(vals[20], sizeof vals[20], "%s", el__ftimer_path(a));
    vals[21][0] = 0;
    if (progress_fd >= 0)
        snprintf(vals[21], sizeof vals[21], "%d", progress_fd);
    int skip[N_ENV_SET] = {0};
    skip[N_ENV_SET - 2] = !vals[N_ENV_SET - 2][0];
    skip[N_ENV_SET - 1] = !vals[N_ENV_SET - 1][0];

    size_t n = 0, bytes = 0;
    for (char **e = environ; *e; e++) {
        if (env_is_set_name(*e))
            continue;
        n++;
        bytes += strlen(*e) + 1;
    }
    for (size_t i = 0; i < N_ENV_SET; i++)
        if (!skip[i]) {
            bytes += strlen(env_set_names[i]) + strlen(vals[i]) + 2;
            n++;
        }
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
        if (skip[i])
            continue;
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
        bytes += strlen(*p) * 2 + 16; /* "$local_rank" shrinks; ample */
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

static void make_prefix(const struct el_agent *a, struct el__worker *w)
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
        struct el__worker *w = &a->w[i];
        if (w->pid > 0)
            kill(-w->pid, SIGKILL);
        if (w->alive) {
            int st;
            while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR) {
            }
            w->alive = 0;
            w->status = st;
        }
        el__agent_close_streams(a, w);
    }
    a->nalive = 0;
}

int el__agent_start_workers(struct el_agent *a, const struct el_rdzv_info *info,
                            struct el_agent_result *res)
{
    char attempt[4200];
    int nproc = a->cfg.nproc, rc;
    int xpipe[EL__MAX_WORKERS_STACK];
    int *xp = nproc <= EL__MAX_WORKERS_STACK
                  ? xpipe
                  : malloc(sizeof(int) * (size_t)nproc);
    if (!xp)
        return -ENOMEM;

    snprintf(attempt, sizeof attempt, "%s/attempt_%" PRId64, a->run_dir,
             info->round);
    el__rm_rf(attempt);
    memset(a->w, 0, sizeof *a->w * (size_t)nproc);
    for (int i = 0; i < nproc; i++) {
        struct el__worker *w = &a->w[i];
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
    a->killed = 0;
    for (int i = 0; i < nproc; i++) {
        struct el__worker *w = &a->w[i];
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
                w->st[s].console =
                    show ? (s ? a->cfg.err_fd : a->cfg.out_fd) : -1;
                w->st[s].buf = malloc(EL__LINE_MAX);
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
        int pfd = el__obs_progress_pipe(a, i);
        char **envp = build_env(a, w, info, pfd);
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
            if (pfd >= 0)
                fcntl(pfd, F_SETFD, 0);
            execvpe(argv[0], argv, envp);
            int e = errno;
            ssize_t wr = write(ep[1], &e, sizeof e);
            (void)wr;
            _exit(127);
        }
        int fork_errno = errno;
        el__obs_progress_forked(a, i);
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
                                     .data.u64 = EL__TAG_STREAM +
                                                 2 * (uint64_t)i + (uint64_t)s};
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
