/* job_local.c -- the local scheduler: one supervisor process per job.
 *
 * `elrun submit -s local` forks, the child calls setsid() (no terminal, its
 * own session: it survives the submitting shell) and execs
 * `elrun __supervise DIR`.  The supervisor hosts the job's rendezvous store
 * on a thread (127.0.0.1, a free port; unless the job uses etcd), starts
 * MAX agents (`elrun run --nnodes=MIN:MAX ... --rdzv-conf=is_host=0`), each
 * with its output in DIR/replicas/K/combined.log and its error file beside
 * it, tells the submitter over a pipe that the job is accepted, then waits
 * for its children and records each agent's exit code.  When they are all
 * gone it decides the job's state (SUCCEEDED when an agent succeeded: an
 * elastic job goes on without a lost replica), retries the whole job while
 * --max-retries allows, and writes DIR/end.  SIGTERM (elrun cancel) is
 * forwarded to the agents, which stop their workers; the supervisor waits
 * for them and records CANCELLED.  Agents have PDEATHSIG=SIGKILL, so a
 * killed supervisor leaves no process behind either.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/job_cli.h"
#include "elrun/err.h"
#include "elrun/log.h"
#include "elrun/store.h"

extern char **environ;

#define READY_FD_ENV "ELRUN_JOB_READY_FD"

int cjob_local_start(const char *elrun, const char *dir, char *err,
                     size_t errlen)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    char log[4200], fdv[16];
    snprintf(log, sizeof log, "%s/supervisor.log", dir);
    snprintf(fdv, sizeof fdv, "%d", p[1]);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        setsid();
        int in = open("/dev/null", O_RDONLY);
        int out = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (in >= 0)
            dup2(in, 0);
        if (out >= 0) {
            dup2(out, 1);
            dup2(out, 2);
        }
        fcntl(p[1], F_SETFD, 0); /* the ready pipe survives exec */
        setenv(READY_FD_ENV, fdv, 1);
        execl(elrun, elrun, "__supervise", dir, (char *)NULL);
        dprintf(p[1], "error: cannot run %s: %s\n", elrun, strerror(errno));
        _exit(127);
    }
    close(p[1]);
    char buf[1024];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof buf - 1 && !memchr(buf, '\n', len) &&
           ((n = read(p[0], buf + len, sizeof buf - 1 - len)) > 0 ||
            (n < 0 && errno == EINTR)))
        if (n > 0)
            len += (size_t)n;
    close(p[0]);
    buf[len] = 0;
    if (strncmp(buf, "ok", 2) == 0)
        return 0;
    buf[strcspn(buf, "\n")] = 0;
    snprintf(err, errlen, "%s",
             *buf ? buf + (strncmp(buf, "error: ", 7) ? 0 : 7)
                  : "the job's supervisor exited at once "
                    "(see supervisor.log in the job "
                    "directory)");
    waitpid(pid, NULL, WNOHANG);
    return -1;
}

/* ---- the supervisor ------------------------------------------------------ */

struct sup {
    const char *dir;
    json_t *spec;
    int nrep;
    pid_t *pid;
    int *alive;
    int port;   /* the store's, 0 with etcd or one node   */
    int single; /* one node on c10d: endpoint :0          */
    int ready_fd;
};

static void ready(struct sup *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void ready(struct sup *s, const char *fmt, ...)
{
    if (s->ready_fd < 0)
        return;
    char m[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    dprintf(s->ready_fd, "%s\n", m);
    close(s->ready_fd);
    s->ready_fd = -1;
}

static const char *jstr(json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

/* argv for replica k's agent in attempt a (malloc'd strings). */
static char **agent_argv(struct sup *s, int attempt)
{
    json_t *l = json_object_get(s->spec, "launcher");
    int nl = (int)json_array_size(l);
    int nf =
        (int)json_integer_value(json_object_get(s->spec, "n_launcher_flags"));
    char **v = calloc((size_t)nl + 16, sizeof *v);
    int n = 0;
    char b[4200];
    if (!v)
        return NULL;
    v[n++] = strdup(jstr(s->spec, "elrun"));
    v[n++] = strdup("run");
    for (int i = 0; i < nf && i < nl; i++)
        v[n++] = strdup(json_string_value(json_array_get(l, (size_t)i)));
    snprintf(b, sizeof b, "--nnodes=%d:%d",
             (int)json_integer_value(json_object_get(s->spec, "min_nodes")),
             (int)json_integer_value(json_object_get(s->spec, "max_nodes")));
    v[n++] = strdup(b);
    snprintf(b, sizeof b, "--nproc-per-node=%d",
             (int)json_integer_value(json_object_get(s->spec, "nproc")));
    v[n++] = strdup(b);
    const char *conf = jstr(s->spec, "rdzv_conf");
    if (s->single) {
        v[n++] = strdup("--rdzv-backend=c10d");
        v[n++] = strdup("--rdzv-endpoint=127.0.0.1:0");
        if (*conf) {
            snprintf(b, sizeof b, "--rdzv-conf=%s", conf);
            v[n++] = strdup(b);
        }
    } else if (s->port) {
        v[n++] = strdup("--rdzv-backend=c10d");
        snprintf(b, sizeof b, "--rdzv-endpoint=127.0.0.1:%d", s->port);
        v[n++] = strdup(b);
        snprintf(b, sizeof b, "--rdzv-conf=%s%sis_host=0", conf,
                 *conf ? "," : "");
        v[n++] = strdup(b);
    } else {
        v[n++] = strdup("--rdzv-backend=etcd");
        snprintf(b, sizeof b, "--rdzv-endpoint=%s",
                 jstr(s->spec, "rdzv_endpoint"));
        v[n++] = strdup(b);
        if (*conf) {
            snprintf(b, sizeof b, "--rdzv-conf=%s", conf);
            v[n++] = strdup(b);
        }
    }
    snprintf(b, sizeof b, "--rdzv-id=%s-%d", jstr(s->spec, "id"), attempt);
    v[n++] = strdup(b);
    for (int i = nf; i < nl; i++)
        v[n++] = strdup(json_string_value(json_array_get(l, (size_t)i)));
    v[n] = NULL;
    return v;
}

static void free_argv(char **v)
{
    for (int i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* environ plus the job's --env and the replica's own variables. */
static char **agent_env(struct sup *s, int k)
{
    size_t ne = 0;
    while (environ[ne])
        ne++;
    json_t *env = json_object_get(s->spec, "env");
    char **v = calloc(ne + json_array_size(env) + 8, sizeof *v);
    size_t n = 0;
    char b[4300];
    if (!v)
        return NULL;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(environ[i], READY_FD_ENV "=", sizeof READY_FD_ENV) &&
            strncmp(environ[i], "TORCHELASTIC_ERROR_FILE=", 24))
            v[n++] = strdup(environ[i]);
    for (size_t i = 0; i < json_array_size(env); i++)
        v[n++] = strdup(json_string_value(json_array_get(env, i)));
    snprintf(b, sizeof b, "TORCHELASTIC_ERROR_FILE=%s/replicas/%d/error.json",
             s->dir, k);
    v[n++] = strdup(b);
    snprintf(b, sizeof b, "ELRUN_JOB_DIR=%s", s->dir);
    v[n++] = strdup(b);
    snprintf(b, sizeof b, "ELRUN_REPLICA_ID=%d", k);
    v[n++] = strdup(b);
    v[n] = NULL;
    return v;
}

static int spawn(struct sup *s, int k, int attempt)
{
    char rdir[4200], logf[4300], b[4300];
    snprintf(rdir, sizeof rdir, "%s/replicas/%d", s->dir, k);
    mkdir(rdir, 0755);
    snprintf(logf, sizeof logf, "%s/combined.log", rdir);
    char **argv = agent_argv(s, attempt), **envp = agent_env(s, k);
    if (!argv || !envp)
        return -ENOMEM;
    snprintf(b, sizeof b, "%s/exitcode", rdir);
    unlink(b);
    char ef[4300];
    snprintf(ef, sizeof ef, "%s/error.json", rdir);
    unlink(ef);
    int out = open(logf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out < 0)
        return -errno;
    pid_t ppid = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != ppid)
            _exit(1);
        int in = open("/dev/null", O_RDONLY);
        if (in >= 0)
            dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        execve(argv[0], argv, envp);
        dprintf(2, "elrun job: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int e = errno;
    close(out);
    free_argv(argv);
    free_argv(envp);
    if (pid < 0)
        return -e;
    s->pid[k] = pid;
    s->alive[k] = 1;
    snprintf(b, sizeof b, "%d\n", (int)pid);
    cjob_write(rdir, "pid", b);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    strcat(host, "\n");
    cjob_write(rdir, "host", host);
    return 0;
}

static int store_restarts(struct sup *s, int attempt)
{
    struct el_store *st;
    void *val = NULL;
    size_t len;
    char key[300];
    int n = 0;
    if (!s->port || el_store_connect(&st, "127.0.0.1", s->port, 500, 500))
        return 0;
    snprintf(key, sizeof key, "/elrun/%s-%d/restarts", jstr(s->spec, "id"),
             attempt);
    if (el_store_try_get(st, key, &val, &len) == 0 && val)
        n = atoi(val);
    free(val);
    el_store_close(st);
    int max = (int)json_integer_value(json_object_get(s->spec, "max_restarts"));
    return n > max ? max : n;
}

static int read_spec(const char *dir, json_t **spec, char *err, size_t cap)
{
    char p[4200];
    json_error_t je;
    snprintf(p, sizeof p, "%s/job.json", dir);
    *spec = json_load_file(p, 0, &je);
    if (!*spec) {
        snprintf(err, cap, "cannot read %.300s: %s", p, je.text);
        return -1;
    }
    return 0;
}

int cjob_local_supervise(int argc, char **argv)
{
    struct sup s = {0};
    char err[600], b[128];
    const char *rfd = getenv(READY_FD_ENV);
    s.ready_fd = rfd ? atoi(rfd) : -1;
    if (s.ready_fd >= 0 && fcntl(s.ready_fd, F_SETFD, FD_CLOEXEC) < 0)
        s.ready_fd = -1; /* the agents must not hold the submitter's pipe */
    unsetenv(READY_FD_ENV);
    el_log_init("elrun job", EL_LOG_INFO);
    if (argc != 2) {
        ready(&s, "error: usage: elrun __supervise DIR");
        return 2;
    }
    s.dir = argv[1];
    if (read_spec(s.dir, &s.spec, err, sizeof err)) {
        ready(&s, "error: %s", err);
        return 1;
    }
    s.nrep = (int)json_integer_value(json_object_get(s.spec, "max_nodes"));
    int retries =
        (int)json_integer_value(json_object_get(s.spec, "max_retries"));
    s.pid = calloc((size_t)s.nrep, sizeof *s.pid);
    s.alive = calloc((size_t)s.nrep, sizeof *s.alive);
    if (!s.pid || !s.alive)
        return 1;

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL); /* before the store's thread */

    snprintf(b, sizeof b, "%d\n", (int)getpid());
    cjob_write(s.dir, "supervisor.pid", b);
    struct el_store_server *srv = NULL;
    /* One node: the agent runs c10d's single-node path, hosting its store
     * on a free port itself (TorchX's localhost:0). */
    int single = s.nrep == 1;
    if (strncmp(jstr(s.spec, "rdzv_backend"), "etcd", 4) != 0 && !single) {
        struct el_store_server_opts so = {0};
        so.host = "127.0.0.1";
        so.port = 0;
        int rc = el_store_server_start(&srv, &so);
        if (rc) {
            ready(&s, "error: cannot start the job's store: %s",
                  el_strerror(rc));
            return 1;
        }
        s.port = el_store_server_port(srv);
        snprintf(b, sizeof b, "127.0.0.1:%d\n", s.port);
        cjob_write(s.dir, "store.addr", b);
    }
    el_log(EL_LOG_INFO, "job %s: %d replicas, store %s", jstr(s.spec, "id"),
           s.nrep,
           s.port   ? b
           : single ? "the agent's"
                    : "etcd");
    s.single = single && strncmp(jstr(s.spec, "rdzv_backend"), "etcd", 4);

    int cancelled = 0, restarts = 0, attempt = 0, final, first_exit = 0;
    for (;; attempt++) {
        snprintf(b, sizeof b, "%d\n", attempt + restarts);
        cjob_write(s.dir, "restarts", b);
        int running = 0;
        for (int k = 0; k < s.nrep; k++) {
            int rc = spawn(&s, k, attempt);
            if (rc) {
                el_log(EL_LOG_ERROR, "cannot start replica %d: %s", k,
                       el_strerror(rc));
                continue;
            }
            running++;
        }
        if (!running) {
            ready(&s,
                  "error: no agent could be started (see %s/"
                  "supervisor.log)",
                  s.dir);
            final = EL_JOB_FAILED;
            first_exit = 127;
            break;
        }
        ready(&s, "ok");
        struct timespec deadline = {0};
        while (running) {
            siginfo_t si;
            int sig;
            if (deadline.tv_sec) {
                struct timespec now, left;
                clock_gettime(CLOCK_MONOTONIC, &now);
                left.tv_sec = deadline.tv_sec - now.tv_sec;
                left.tv_nsec = deadline.tv_nsec - now.tv_nsec;
                if (left.tv_nsec < 0) {
                    left.tv_nsec += 1000000000L;
                    left.tv_sec--;
                }
                if (left.tv_sec < 0)
                    left.tv_sec = left.tv_nsec = 0;
                sig = sigtimedwait(&set, &si, &left);
                if (sig < 0 && errno == EAGAIN) {
                    el_log(EL_LOG_WARN, "agents ignored SIGTERM; SIGKILL");
                    for (int k = 0; k < s.nrep; k++)
                        if (s.alive[k])
                            kill(s.pid[k], SIGKILL);
                    deadline.tv_sec = 0;
                    continue;
                }
            } else {
                sig = sigwaitinfo(&set, &si);
            }
            if (sig < 0)
                continue;
            if (sig != SIGCHLD) {
                if (!cancelled)
                    el_log(EL_LOG_WARN, "%s: stopping the job", strsignal(sig));
                cancelled = 1;
                for (int k = 0; k < s.nrep; k++)
                    if (s.alive[k])
                        kill(s.pid[k], SIGTERM);
                if (!deadline.tv_sec) {
                    clock_gettime(CLOCK_MONOTONIC, &deadline);
                    deadline.tv_sec += 45; /* the agents' stop grace + */
                }
                continue;
            }
            int status;
            pid_t p;
            while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
                for (int k = 0; k < s.nrep; k++) {
                    if (!s.alive[k] || s.pid[k] != p)
                        continue;
                    int code = WIFEXITED(status) ? WEXITSTATUS(status)
                                                 : 128 + WTERMSIG(status);
                    char rdir[4200];
                    snprintf(rdir, sizeof rdir, "%s/replicas/%d", s.dir, k);
                    snprintf(b, sizeof b, "%d\n", code);
                    cjob_write(rdir, "exitcode", b);
                    el_log(EL_LOG_INFO, "replica %d (pid %d) exited: %d", k,
                           (int)p, code);
                    s.alive[k] = 0;
                    running--;
                }
            }
        }
        restarts += store_restarts(&s, attempt);
        int ok = 0;
        first_exit = 0;
        for (int k = 0; k < s.nrep; k++) {
            char rdir[4200], line[32];
            snprintf(rdir, sizeof rdir, "%s/replicas/%d", s.dir, k);
            if (cjob_read_line(rdir, "exitcode", line, sizeof line) == 0) {
                int c = atoi(line);
                ok |= c == 0;
                if (c && !first_exit)
                    first_exit = c;
            }
        }
        if (cancelled) {
            final = EL_JOB_CANCELLED;
            break;
        }
        if (ok) {
            final = EL_JOB_SUCCEEDED;
            first_exit = 0;
            break;
        }
        if (attempt >= retries) {
            final = EL_JOB_FAILED;
            break;
        }
        el_log(EL_LOG_WARN,
               "attempt %d failed; retrying the job (%d of %d "
               "retries)",
               attempt, attempt + 1, retries);
    }
    el_store_server_close(srv);
    snprintf(b, sizeof b, "%s %d %d\n", el_job_state_name(final), first_exit,
             attempt + restarts);
    cjob_write(s.dir, "end", b);
    el_log(EL_LOG_INFO, "job %s: %s", jstr(s.spec, "id"),
           el_job_state_name(final));
    json_decref(s.spec);
    free(s.pid);
    free(s.alive);
    return 0;
}

int cjob_local_live_restarts(const struct cjob *j)
{
    char addr[300], line[32];
    if (cjob_read_line(j->dir, "store.addr", addr, sizeof addr))
        return -1;
    char *colon = strrchr(addr, ':');
    if (!colon)
        return -1;
    *colon = 0;
    struct sup s = {0};
    s.spec = j->spec;
    s.port = atoi(colon + 1);
    int attempt =
        cjob_read_line(j->dir, "restarts", line, sizeof line) ? 0 : atoi(line);
    return attempt + store_restarts(&s, attempt);
}

static int wait_gone(int pid, const char *word, int timeout_ms)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (!cjob_pid_alive(pid, word))
            break;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long el =
            (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (el >= timeout_ms) {
            if (fd >= 0)
                close(fd);
            return -1;
        }
        if (fd >= 0) {
            /* Readable when the process exits (even if not our child). */
            struct pollfd pf = {fd, POLLIN, 0};
            poll(&pf, 1, (int)(timeout_ms - el < 200 ? timeout_ms - el : 200));
        } else {
            usleep(10000);
        }
    }
    if (fd >= 0)
        close(fd);
    return 0;
}

int cjob_local_cancel(const struct cjob *j, char *err, size_t errlen)
{
    char line[64];
    if (cjob_read_line(j->dir, "supervisor.pid", line, sizeof line)) {
        snprintf(err, errlen,
                 "job %s has no supervisor.pid; it never "
                 "started",
                 j->id);
        return -1;
    }
    int pid = atoi(line);
    if (cjob_pid_alive(pid, "__supervise") && kill(pid, SIGTERM) == 0 &&
        wait_gone(pid, "__supervise", 60000)) {
        kill(pid, SIGKILL); /* its agents die with it (PDEATHSIG) */
        wait_gone(pid, "__supervise", 5000);
    }
    /* The agents were its children; make sure none is left. */
    int nrep = (int)json_integer_value(json_object_get(j->spec, "max_nodes"));
    for (int k = 0; k < nrep; k++) {
        char rdir[4200];
        snprintf(rdir, sizeof rdir, "%s/replicas/%d", j->dir, k);
        if (cjob_read_line(rdir, "pid", line, sizeof line) == 0 &&
            wait_gone(atoi(line), " run ", 10000)) {
            snprintf(err, errlen, "replica %d (pid %s) is still running", k,
                     line);
            return -1;
        }
    }
    return 0;
}

/* ---- the local scheduler's ops ------------------------------------------- */

static int local_check_cfg(const char *cfg, char *err, size_t errlen)
{
    return el_job_check_cfg("local", cfg, err, errlen);
}

/* The job directory, job.json, then the supervisor; --dryrun prints the
 * agents' command lines instead. */
static int local_submit(const struct el_job_spec *js, json_t *job, char *id,
                        size_t idcap, int dryrun)
{
    char dir[4200], err[1600];
    int rc;
    const struct el_job_size z = js->size;
    const char *backend = js->rdzv_backend;
    snprintf(dir, sizeof dir, "%s/jobs/local/%s", js->home, id);
    if (dryrun) {
        printf("# elrun submit -s local --dryrun: %d agents on this "
               "machine, one supervisor, the store on 127.0.0.1:<port>\n"
               "# job directory %s\n",
               z.max_nodes, dir);
        for (int k = 0; k < z.max_nodes; k++) {
            printf("TORCHELASTIC_ERROR_FILE=%s/replicas/%d/error.json %s "
                   "run",
                   dir, k, js->elrun);
            for (int i = 0; i < js->n_launcher_flags; i++)
                printf(" %s", js->launcher[i]);
            printf(" --nnodes=%d:%d --nproc-per-node=%d --rdzv-backend=%s"
                   " --rdzv-endpoint=%s --rdzv-id=%s-0",
                   z.min_nodes, z.max_nodes, z.nproc, backend,
                   strcmp(backend, "etcd")
                       ? z.max_nodes == 1 ? "127.0.0.1:0" : "127.0.0.1:<port>"
                       : js->rdzv_endpoint,
                   id);
            for (int i = js->n_launcher_flags; i < js->n_launcher; i++)
                printf(" %s", js->launcher[i]);
            printf(" >>%s/replicas/%d/combined.log 2>&1\n", dir, k);
        }
        return 0;
    }
    char rd[4300];
    snprintf(rd, sizeof rd, "%s/replicas", dir);
    if ((rc = cjob_mkdirs(rd)))
        return cjob_usage("submit",
                          "cannot make the job directory %s: "
                          "%s (set ELRUN_HOME)",
                          dir, strerror(-rc));
    char p[4400];
    snprintf(p, sizeof p, "%s/job.json", dir);
    if (json_dump_file(job, p, JSON_INDENT(2) | JSON_PRESERVE_ORDER))
        return cjob_usage("submit", "cannot write %s", p);
    if (cjob_local_start(js->elrun, dir, err, sizeof err)) {
        el_log(EL_LOG_ERROR, "job %s was not started: %s", id, err);
        return 1;
    }
    (void)idcap;
    return 0;
}

static int local_cancel(struct cjob *j)
{
    char err[700];
    if (cjob_local_cancel(j, err, sizeof err)) {
        el_log(EL_LOG_ERROR, "cancel %s: %s", j->id, err);
        return 1;
    }
    return 0;
}

static int local_list(struct cjob_list *l, int asked)
{
    return cjob_dir_list("local", l);
}

const struct cjob_sched cjob_sched_local = {
    .name = "local",
    .local_program = 1,
    .check_cfg = local_check_cfg,
    .submit = local_submit,
    .open = cjob_dir_open,
    .status = cjob_dir_status,
    .logs = cjob_dir_logs,
    .cancel = local_cancel,
    .list = local_list,
    .ui_url = cjob_dir_url,
};
