/* job_cmd.c -- the job verbs, TorchX's CLI on elrun:
 *
 *   elrun submit [-s local|slurm|aws_batch|kubernetes] [-j [MIN:]MAXxNPROC | -j N] [--name NAME]
 *                [--max-retries N] [--env K=V]... [--cfg k=v,...] [--dryrun]
 *                [--wait] [--log] [launcher flags] SCRIPT [ARGS...]
 *   elrun submit -s slurm dist.ddp -j 2x1 --script train.py -- --epochs 3
 *   elrun status HANDLE [--json]     elrun logs HANDLE [ROLE/REPLICA] [-f]
 *   elrun cancel HANDLE              [--tail N] [--regex RE]
 *   elrun list [-s SCHED]            elrun describe HANDLE
 *
 * A job lives in $ELRUN_HOME/jobs/SCHED/ID (docs/JOBS.md): its spec
 * (job.json), per-replica logs, pids, hosts and exit codes, and the final
 * state (end).  Every verb reads that directory (and asks squeue for a Slurm
 * job that has not ended), so each works from any shell at any time.
 * Output follows TorchX (handle alone on stdout; `role/replica ` log
 * prefixes; the AppStatus template); usage errors are one line and exit 2.
 * Each verb parses its words here and calls the job's scheduler through
 * its ops (struct cjob_sched, one per scheduler file: job_local.c,
 * job_slurm.c, job_aws.c, job_k8s.c); what the schedulers with a job directory share
 * (cjob_dir_*) is here too.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/job_cli.h"
#include "cli/opts.h"
#include "elrun/err.h"
#include "elrun/log.h"

extern char **environ;

/* ---- small helpers (shared through job_cli.h) ---------------------------- */

void cjob_home(char *out, size_t cap)
{
    const char *h = getenv("ELRUN_HOME");
    char cwd[2048];
    if (h && *h) {
        if (h[0] == '/' || !getcwd(cwd, sizeof cwd))
            snprintf(out, cap, "%s", h);
        else
            snprintf(out, cap, "%s/%s", cwd, h);
    } else {
        const char *home = getenv("HOME");
        snprintf(out, cap, "%s/.elrun", home && *home ? home : "/tmp");
    }
}

int cjob_usage(const char *verb, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "elrun %s: error: ", verb);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

int cjob_write(const char *dir, const char *name, const char *text)
{
    char tmp[4400], path[4400];
    snprintf(tmp, sizeof tmp, "%s/.%s.%d", dir, name, (int)getpid());
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int e = w == (ssize_t)n ? 0 : -EIO;
    if (close(fd) < 0 && !e)
        e = -errno;
    if (!e && rename(tmp, path) < 0)
        e = -errno;
    if (e)
        unlink(tmp);
    return e;
}

int cjob_read_line(const char *dir, const char *name, char *out, size_t cap)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int ok = fgets(out, (int)cap, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    out[strcspn(out, "\n")] = 0;
    return 0;
}

int cjob_pid_alive(int pid, const char *word)
{
    char p[64], buf[4096];
    if (pid <= 0)
        return 0;
    snprintf(p, sizeof p, "/proc/%d/stat", pid);
    FILE *f = fopen(p, "re");
    if (!f)
        return 0;
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    char *rp = ok ? strrchr(buf, ')') : NULL;
    if (!rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X')
        return 0;
    if (!word)
        return 1;
    snprintf(p, sizeof p, "/proc/%d/cmdline", pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    for (ssize_t i = 0; i < n; i++)
        if (!buf[i])
            buf[i] = ' ';
    buf[n] = 0;
    return strstr(buf, word) != NULL;
}

int cjob_run(char *const argv[], char *out, size_t outcap, char *err,
             size_t errcap)
{
    int po[2], pe[2];
    out[0] = err[0] = 0;
    if (pipe2(po, O_CLOEXEC) < 0)
        goto fail;
    if (pipe2(pe, O_CLOEXEC) < 0) {
        close(po[0]);
        close(po[1]);
        goto fail;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    close(pe[1]);
    if (rc) {
        close(po[0]);
        close(pe[0]);
        snprintf(err, errcap, "cannot run %s: %s", argv[0], strerror(rc));
        return 127;
    }
    size_t lo = 0, le = 0;
    struct pollfd pf[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    char sink[4096];
    int open_n = 2;
    while (open_n) {
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP)))
                continue;
            char *dst = i ? err : out;
            size_t *l = i ? &le : &lo, cap = i ? errcap : outcap;
            ssize_t n = *l + 1 < cap ? read(pf[i].fd, dst + *l, cap - 1 - *l)
                                     : read(pf[i].fd, sink, sizeof sink);
            if (n <= 0) {
                close(pf[i].fd);
                pf[i].fd = -1;
                open_n--;
            } else if (*l + 1 < cap) {
                *l += (size_t)n;
                dst[*l] = 0;
            }
        }
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    size_t blank = strspn(err, "\r\n"); /* the aws CLI starts with one */
    memmove(err, err + blank, strlen(err + blank) + 1);
    err[strcspn(err, "\n")] = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
fail:
    snprintf(err, errcap, "pipe: %s", strerror(errno));
    return 127;
}

double cjob_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

int cjob_mkdirs(const char *path)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    return mkdir(p, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

static const char *jstr(json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

static int jint(json_t *o, const char *k)
{
    return (int)json_integer_value(json_object_get(o, k));
}

/* ---- finding a job --------------------------------------------------------- */

/* The ops of every scheduler, in the order `elrun list` shows them. */
static const struct cjob_sched *const scheds[] = {
    &cjob_sched_local, &cjob_sched_slurm, &cjob_sched_aws, &cjob_sched_k8s,
    NULL};

const struct cjob_sched *cjob_sched_find(const char *name)
{
    for (int i = 0; name && scheds[i]; i++)
        if (strcmp(scheds[i]->name, name) == 0)
            return scheds[i];
    return NULL;
}

static const struct cjob_sched *sched_of(const struct cjob *j)
{
    return cjob_sched_find(j->sched);
}

/* The job a handle names: 0, or 2 after a usage error line. */
static int open_job(const char *verb, const char *handle, struct cjob *j,
                    struct el_job_handle *h)
{
    char err[600];
    memset(j, 0, sizeof *j);
    if (el_job_parse_handle(handle, h, err, sizeof err))
        return cjob_usage(verb, "%s", err);
    snprintf(j->sched, sizeof j->sched, "%s", h->sched);
    snprintf(j->id, sizeof j->id, "%s", h->id);
    return sched_of(j)->open(verb, handle, h, j);
}

int cjob_dir_open(const char *verb, const char *handle,
                  const struct el_job_handle *h, struct cjob *j)
{
    char home[3800], p[4200];
    cjob_home(home, sizeof home);
    snprintf(j->dir, sizeof j->dir, "%s/jobs/%s/%s", home, h->sched, h->id);
    snprintf(p, sizeof p, "%s/job.json", j->dir);
    json_error_t je;
    j->spec = json_load_file(p, 0, &je);
    if (!j->spec) {
        if (access(p, F_OK) != 0)
            return cjob_usage(verb,
                              "no job %s: nothing at %s (elrun list "
                              "shows the jobs; ELRUN_HOME=%s)",
                              handle, j->dir, home);
        return cjob_usage(verb, "job %s: %s is damaged: %s", handle, p,
                          je.text);
    }
    return 0;
}

static void close_job(struct cjob *j)
{
    json_decref(j->spec);
    j->spec = NULL;
}

/* ---- status ---------------------------------------------------------------- */

void cjob_status_free(struct cjob_status *st)
{
    free(st->root_msg);
    free(st->root_json);
    st->root_msg = st->root_json = NULL;
}

static char *slurp(const char *path, size_t max)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *b = malloc(max + 1);
    size_t n = b ? fread(b, 1, max, f) : 0;
    fclose(f);
    if (b)
        b[n] = 0;
    return b;
}

/* The last failure table's root cause in an agent's log: rank, host, exit
 * code, time and traceback (torchrun's "Root Cause" block). */
static void root_from_log(const char *rdir, struct cjob_status *st)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/combined.log", rdir);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char line[2048];
    int in = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (strstr(line, "Root Cause (first observed failure):")) {
            in = 1;
            continue;
        }
        if (!in)
            continue;
        int a, b;
        if (sscanf(line, "  rank      : %d (local_rank: %d)", &a, &b) == 2)
            st->root_rank = a;
        else if (sscanf(line, "  exitcode  : %d", &a) == 1)
            st->root_exit = a;
        else if (strncmp(line, "  host      : ", 14) == 0 && !*st->root_host)
            snprintf(st->root_host, sizeof st->root_host, "%.200s", line + 14);
        else if (strncmp(line, "  time      : ", 14) == 0)
            snprintf(st->root_time, sizeof st->root_time, "%.40s", line + 14);
        else if (strncmp(line, "  traceback : ", 14) == 0 && !st->root_msg)
            st->root_msg = strdup(line + 14);
        else if (strncmp(line, "=====", 5) == 0 && st->root_rank >= 0)
            in = 0;
    }
    fclose(f);
}

static void root_cause(const struct cjob *j, struct cjob_status *st)
{
    double best = 0;
    int pick = -1;
    for (int k = 0; k < st->nrep; k++) {
        char p[4400];
        struct stat sb;
        snprintf(p, sizeof p, "%s/replicas/%d/error.json", j->dir, k);
        if (stat(p, &sb) == 0) {
            double t = (double)sb.st_mtim.tv_sec + sb.st_mtim.tv_nsec / 1e9;
            if (pick < 0 || t < best) {
                best = t;
                pick = k;
            }
        }
    }
    if (pick < 0)
        for (int k = 0; k < st->nrep && pick < 0; k++)
            if (st->rep[k].state == EL_JOB_FAILED)
                pick = k;
    if (pick < 0)
        return;
    st->root = pick;
    st->root_rank = -1;
    st->root_exit = st->rep[pick].exitcode;
    snprintf(st->root_host, sizeof st->root_host, "%s", st->rep[pick].host);
    char rdir[4300], p[4400];
    snprintf(rdir, sizeof rdir, "%s/replicas/%d", j->dir, pick);
    snprintf(p, sizeof p, "%s/error.json", rdir);
    st->root_json = slurp(p, 1 << 16);
    json_t *root = st->root_json ? json_loads(st->root_json, 0, NULL) : NULL;
    json_t *m = root ? json_object_get(root, "message") : NULL;
    root_from_log(rdir, st);
    if (json_is_object(m)) {
        const char *msg = json_string_value(json_object_get(m, "message"));
        if (msg) {
            free(st->root_msg);
            st->root_msg = strdup(msg);
        }
        json_t *ec = json_object_get(m, "errorCode");
        if (json_is_integer(ec))
            st->root_exit = (int)json_integer_value(ec);
        const char *ts = json_string_value(
            json_object_get(json_object_get(m, "extraInfo"), "timestamp"));
        if (ts && !*st->root_time) {
            time_t t = (time_t)atoll(ts);
            struct tm tm;
            localtime_r(&t, &tm);
            strftime(st->root_time, sizeof st->root_time, "%Y-%m-%d %H:%M:%S",
                     &tm);
        }
    } else if (st->root_json && !st->root_msg) {
        st->root_msg = strdup(st->root_json);
    }
    json_decref(root);
}

static int count_replica_dirs(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/replicas", dir);
    DIR *d = opendir(p);
    int n = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (isdigit((unsigned char)e->d_name[0]) && atoi(e->d_name) + 1 > n)
            n = atoi(e->d_name) + 1;
    closedir(d);
    return n;
}

int cjob_status(const struct cjob *j, struct cjob_status *st, char *err,
                size_t errlen)
{
    return sched_of(j)->status(j, st, err, errlen);
}

/* Local and Slurm: the end file, else the supervisor's pid (local) or
 * squeue (Slurm), then each replica's files. */
int cjob_dir_status(const struct cjob *j, struct cjob_status *st, char *err,
                    size_t errlen)
{
    char line[256];
    int slurm = strcmp(j->sched, "slurm") == 0;
    memset(st, 0, sizeof *st);
    st->root = -1;
    st->state = EL_JOB_UNKNOWN;
    int ended = 0, live = 0, cancelled = 0;
    if (cjob_read_line(j->dir, "end", line, sizeof line) == 0) {
        char word[32];
        int ex = 0, rs = -1;
        if (sscanf(line, "%31s %d %d", word, &ex, &rs) >= 1 &&
            el_job_state_parse(word) >= 0)
            st->state = el_job_state_parse(word);
        if (rs >= 0)
            st->restarts = rs;
        ended = 1;
    }
    if (!ended || slurm) {
        if (cjob_read_line(j->dir, "restarts", line, sizeof line) == 0 &&
            (!ended || slurm))
            st->restarts = atoi(line);
    }
    cancelled = access(j->dir, F_OK) == 0 &&
                cjob_read_line(j->dir, "cancelled", line, sizeof line) == 0;
    if (!ended && !slurm) {
        if (cjob_read_line(j->dir, "supervisor.pid", line, sizeof line) == 0 &&
            cjob_pid_alive(atoi(line), "__supervise")) {
            st->state = EL_JOB_SUBMITTED;
            live = 1;
            int r = cjob_local_live_restarts(j);
            if (r >= 0)
                st->restarts = r;
        } else {
            snprintf(st->msg, sizeof st->msg,
                     "the job's supervisor is gone "
                     "and left no final state (killed?)");
        }
    } else if (!ended) {
        char raw[128];
        int s, rc = cjob_slurm_state(jstr(j->spec, "slurm_job_id"), &s, raw,
                                     sizeof raw, err, errlen);
        if (rc < 0)
            return -1;
        if (rc == 1) {
            st->state = cancelled ? EL_JOB_CANCELLED : EL_JOB_UNKNOWN;
            if (!cancelled)
                snprintf(st->msg, sizeof st->msg,
                         "Slurm no longer knows "
                         "job %s and its batch script left no final state",
                         jstr(j->spec, "slurm_job_id"));
        } else {
            st->state =
                cancelled && !el_job_state_final(s) && s != EL_JOB_PENDING
                    ? EL_JOB_RUNNING
                    : s;
            if (cancelled && (s == EL_JOB_CANCELLED || s == EL_JOB_FAILED))
                st->state = EL_JOB_CANCELLED;
            live = s == EL_JOB_RUNNING;
            snprintf(st->msg, sizeof st->msg, "slurm: %s", raw);
        }
    }

    st->nrep = slurm ? count_replica_dirs(j->dir) : jint(j->spec, "max_nodes");
    if (st->nrep == 0)
        st->nrep = jint(j->spec, "max_nodes");
    if (st->nrep > (int)(sizeof st->rep / sizeof st->rep[0]))
        st->nrep = (int)(sizeof st->rep / sizeof st->rep[0]);
    int any_alive = 0;
    for (int k = 0; k < st->nrep; k++) {
        struct cjob_replica *r = &st->rep[k];
        char rdir[4300];
        snprintf(rdir, sizeof rdir, "%s/replicas/%d", j->dir, k);
        r->exitcode = -1000;
        if (cjob_read_line(rdir, "host", r->host, sizeof r->host))
            r->host[0] = 0;
        if (cjob_read_line(rdir, "pid", line, sizeof line) == 0)
            r->pid = atoi(line);
        if (cjob_read_line(rdir, "exitcode", line, sizeof line) == 0)
            r->exitcode = atoi(line);
        int fin = el_job_state_final(st->state);
        if (r->exitcode == 0)
            r->state = EL_JOB_SUCCEEDED;
        else if (r->exitcode != -1000)
            r->state = st->state == EL_JOB_CANCELLED ? EL_JOB_CANCELLED
                                                     : EL_JOB_FAILED;
        else if (st->state == EL_JOB_CANCELLED)
            r->state = EL_JOB_CANCELLED;
        else if (fin)
            r->state = *r->host ? EL_JOB_FAILED : EL_JOB_UNKNOWN;
        else if (!live)
            r->state = EL_JOB_PENDING;
        else if (slurm)
            r->state = *r->host ? EL_JOB_RUNNING : EL_JOB_PENDING;
        else
            r->state =
                cjob_pid_alive(r->pid, NULL) ? EL_JOB_RUNNING : EL_JOB_PENDING;
        any_alive |= r->state == EL_JOB_RUNNING;
    }
    if (!slurm && live && any_alive)
        st->state = EL_JOB_RUNNING;
    if (st->state == EL_JOB_FAILED || st->state == EL_JOB_RUNNING)
        root_cause(j, st);
    if (st->root >= 0 && st->state == EL_JOB_FAILED) {
        snprintf(st->msg, sizeof st->msg,
                 "root cause: replica %d, rank %d "
                 "on %s exited with %d: %.300s",
                 st->root, st->root_rank, st->root_host, st->root_exit,
                 st->root_msg ? st->root_msg : "(no message)");
        st->msg[strcspn(st->msg, "\n")] = 0;
    }
    return 0;
}

static const char *role_of(const struct cjob *j)
{
    const char *r = jstr(j->spec, "role");
    return *r ? r : "worker";
}

/* Where a person looks at a job with a directory: the directory. */
void cjob_dir_url(const struct cjob *j, char *out, size_t cap)
{
    snprintf(out, cap, "file://%s", j->dir);
}

static void print_status_text(const struct cjob *j, struct cjob_status *st)
{
    const char *role = role_of(j);
    printf("AppStatus:\n    State: %s\n    Num Restarts: %d\n    Roles:\n",
           el_job_state_name(st->state), st->restarts);
    for (int k = 0; k < st->nrep; k++) {
        struct cjob_replica *r = &st->rep[k];
        printf(" %c%s[%d]:%s", k == 0 ? '*' : ' ', role, k,
               el_job_state_name(r->state));
        if (r->exitcode != -1000 && r->exitcode != 0)
            printf(" (exitcode: %d)", r->exitcode);
        if (*r->host)
            printf(" on %s", r->host);
        putchar('\n');
        if (k == st->root) {
            printf("        timestamp: %s\n        hostname: %s\n",
                   *st->root_time ? st->root_time : "<N/A>", st->root_host);
            if (st->root_rank >= 0)
                printf("        rank: %d\n", st->root_rank);
            printf("    error_msg: %s\n",
                   st->root_msg ? st->root_msg : "<N/A>");
        }
    }
    char url[4300];
    sched_of(j)->ui_url(j, url, sizeof url);
    printf("    Msg: %s\n    Structured Error Msg: %s\n    UI URL: %s\n",
           st->msg, st->root_json ? st->root_json : "<NONE>", url);
}

static void print_status_json(const struct cjob *j, struct cjob_status *st,
                              const char *handle)
{
    json_t *reps = json_array();
    for (int k = 0; k < st->nrep; k++) {
        struct cjob_replica *r = &st->rep[k];
        json_array_append_new(
            reps,
            json_pack(
                "{s:i, s:i, s:s, s:s, s:s, s:o, s:s}", "id", k, "state",
                r->state, "state_name", el_job_state_name(r->state), "role",
                role_of(j), "hostname", r->host, "exitcode",
                r->exitcode == -1000 ? json_null() : json_integer(r->exitcode),
                "structured_error_msg",
                k == st->root && st->root_json ? st->root_json : "<NONE>"));
    }
    json_t *root_cause = json_null();
    if (st->root >= 0)
        root_cause =
            json_pack("{s:i, s:i, s:s, s:i, s:s, s:s}", "replica", st->root,
                      "rank", st->root_rank, "hostname", st->root_host,
                      "exitcode", st->root_exit, "timestamp", st->root_time,
                      "message", st->root_msg ? st->root_msg : "");
    char url[4300];
    sched_of(j)->ui_url(j, url, sizeof url);
    json_t *o =
        json_pack("{s:s, s:s, s:i, s:[{s:s, s:o}], s:s, s:s, s:s, "
                  "s:o}",
                  "handle", handle, "state", el_job_state_name(st->state),
                  "num_restarts", st->restarts, "roles", "role", role_of(j),
                  "replicas", reps, "msg", st->msg, "structured_error_msg",
                  st->root_json ? st->root_json : "<NONE>", "url", url,
                  "root_cause", root_cause);
    char *s = json_dumps(o, JSON_PRESERVE_ORDER);
    puts(s ? s : "{}");
    free(s);
    json_decref(o);
}

static int cmd_status(int argc, char **argv)
{
    const char *handle = NULL;
    int as_json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else if (argv[i][0] == '-')
            return cjob_usage("status",
                              "unknown option '%s'; usage: elrun "
                              "status HANDLE [--json]",
                              argv[i]);
        else if (!handle)
            handle = argv[i];
        else
            return cjob_usage("status", "one handle only (got '%s' too)",
                              argv[i]);
    }
    if (!handle)
        return cjob_usage("status", "which job? usage: elrun status HANDLE "
                                    "[--json] (elrun list shows the handles)");
    struct cjob j;
    struct el_job_handle h;
    int rc = open_job("status", handle, &j, &h);
    if (rc)
        return rc;
    struct cjob_status st;
    char err[700];
    if (cjob_status(&j, &st, err, sizeof err)) {
        close_job(&j);
        return cjob_usage("status", "%s", err);
    }
    char hd[300];
    snprintf(hd, sizeof hd, "%s://elrun/%s", j.sched, j.id);
    if (as_json)
        print_status_json(&j, &st, hd);
    else
        print_status_text(&j, &st);
    cjob_status_free(&st);
    close_job(&j);
    return 0;
}

/* ---- logs ------------------------------------------------------------------ */

struct tailer {
    int k;
    char path[4400];
    off_t off;
    char *part; /* an unfinished last line                 */
    size_t plen;
};

void cjob_log_emit(const struct cjob_logsel *ls, int k, const char *line)
{
    if (ls->has_re && regexec(&ls->re, line, 0, NULL, 0) != 0)
        return;
    if (ls->color)
        printf("\033[32m%s/%d\033[0m %s\n", ls->role, k, line);
    else
        printf("%s/%d %s\n", ls->role, k, line);
}

/* Print what was appended to t's file since last time (whole lines only,
 * unless flush).  Returns the bytes read. */
static size_t drain(const struct cjob_logsel *ls, struct tailer *t, int flush)
{
    int fd = open(t->path, O_RDONLY | O_CLOEXEC);
    size_t total = 0;
    if (fd < 0)
        return 0;
    char buf[65536];
    ssize_t n;
    while ((n = pread(fd, buf, sizeof buf, t->off)) > 0) {
        t->off += n;
        total += (size_t)n;
        char *nb = realloc(t->part, t->plen + (size_t)n + 1);
        if (!nb)
            break;
        t->part = nb;
        memcpy(t->part + t->plen, buf, (size_t)n);
        t->plen += (size_t)n;
        t->part[t->plen] = 0;
        char *s = t->part, *nl;
        while ((nl = memchr(s, '\n', t->plen - (size_t)(s - t->part)))) {
            *nl = 0;
            char *cr = strrchr(s, '\r');
            cjob_log_emit(ls, t->k, cr ? cr + 1 : s);
            s = nl + 1;
        }
        t->plen -= (size_t)(s - t->part);
        memmove(t->part, s, t->plen);
    }
    close(fd);
    if (flush && t->plen) {
        t->part[t->plen] = 0;
        cjob_log_emit(ls, t->k, t->part);
        t->plen = 0;
    }
    fflush(stdout);
    return total;
}

/* The last n lines of a file (that match ls), printed. */
static void tail_file(const struct cjob_logsel *ls, struct tailer *t, long n)
{
    FILE *f = fopen(t->path, "re");
    if (!f)
        return;
    char **ring = calloc((size_t)n, sizeof *ring);
    long cnt = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while (ring && (len = getline(&line, &cap, f)) >= 0) {
        t->off += len;
        if (len && line[len - 1] == '\n')
            line[len - 1] = 0;
        else if (len) { /* unfinished: keep for -f */
            t->off -= len;
            break;
        }
        if (ls->has_re && regexec(&ls->re, line, 0, NULL, 0) != 0)
            continue;
        free(ring[cnt % n]);
        ring[cnt % n] = strdup(line);
        cnt++;
    }
    for (long i = cnt > n ? cnt - n : 0; ring && i < cnt; i++) {
        char *cr = strrchr(ring[i % n], '\r');
        cjob_log_emit(ls, t->k, cr ? cr + 1 : ring[i % n]);
    }
    for (long i = 0; ring && i < n; i++)
        free(ring[i]);
    free(ring);
    free(line);
    fclose(f);
    fflush(stdout);
}

static int job_final(const struct cjob *j)
{
    char line[128];
    if (*j->dir && cjob_read_line(j->dir, "end", line, sizeof line) == 0)
        return 1;
    struct cjob_status st;
    char err[600];
    if (cjob_status(j, &st, err, sizeof err))
        return 0;
    int f = el_job_state_final(st.state) || st.state == EL_JOB_UNKNOWN;
    cjob_status_free(&st);
    return f;
}

int cjob_log_keep(const char *line, void *arg)
{
    const struct cjob_logsel *ls = arg;
    return !ls->has_re || regexec(&ls->re, line, 0, NULL, 0) == 0;
}

/* Print the logs of replicas (all when replica < 0); follow until the job
 * ended when follow.  0, or 2 after a usage error. */
static int show_logs(struct cjob *j, int replica, int follow, long tail,
                     const char *regex)
{
    struct cjob_logsel ls = {role_of(j), {0}, 0, isatty(1)};
    if (regex) {
        int rc = regcomp(&ls.re, regex, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char m[200];
            regerror(rc, &ls.re, m, sizeof m);
            return cjob_usage("logs", "--regex '%s': %s", regex, m);
        }
        ls.has_re = 1;
    }
    int rc = sched_of(j)->logs(j, replica, follow, tail, &ls);
    if (ls.has_re)
        regfree(&ls.re);
    return rc;
}

/* Local and Slurm: replicas/K/combined.log, followed with inotify. */
int cjob_dir_logs(struct cjob *j, int replica, int follow, long tail,
                  const struct cjob_logsel *ls)
{
    int n = strcmp(j->sched, "slurm") == 0 ? count_replica_dirs(j->dir)
                                           : jint(j->spec, "max_nodes");
    if (follow && n < jint(j->spec, "max_nodes")) /* more may come */
        n = jint(j->spec, "max_nodes");
    if (replica >= 0 && replica >= jint(j->spec, "max_nodes"))
        return cjob_usage("logs",
                          "job %s has replicas 0 to %d; there is "
                          "no %s/%d",
                          j->id, jint(j->spec, "max_nodes") - 1, ls->role,
                          replica);
    struct tailer *t = calloc((size_t)(n > 0 ? n : 1), sizeof *t);
    int nt = 0;
    for (int k = 0; k < n; k++) {
        if (replica >= 0 && k != replica)
            continue;
        t[nt].k = k;
        snprintf(t[nt].path, sizeof t[nt].path, "%s/replicas/%d/combined.log",
                 j->dir, k);
        if (tail > 0)
            tail_file(ls, &t[nt], tail);
        else
            drain(ls, &t[nt], !follow);
        nt++;
    }
    if (follow) {
        int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        char rd[4200];
        snprintf(rd, sizeof rd, "%s/replicas", j->dir);
        if (in >= 0) {
            inotify_add_watch(in, j->dir, IN_CREATE | IN_MOVED_TO);
            inotify_add_watch(in, rd, IN_CREATE);
        }
        int watched = 0;
        for (;;) {
            int fin = job_final(j);
            if (in >= 0 && watched < nt)
                for (int i = 0; i < nt; i++) {
                    char d[4400];
                    snprintf(d, sizeof d, "%s/replicas/%d", j->dir, t[i].k);
                    if (inotify_add_watch(in, d, IN_MODIFY | IN_CREATE) >= 0)
                        watched++;
                }
            size_t got = 0;
            for (int i = 0; i < nt; i++)
                got += drain(ls, &t[i], 0);
            if (fin && !got)
                break;
            if (in >= 0) {
                struct pollfd pf = {in, POLLIN, 0};
                poll(&pf, 1, 1000); /* also notices a job Slurm ended */
                char ev[4096];
                while (read(in, ev, sizeof ev) > 0)
                    ;
            } else {
                usleep(100000);
            }
        }
        for (int i = 0; i < nt; i++)
            drain(ls, &t[i], 1);
        if (in >= 0)
            close(in);
    }
    for (int i = 0; i < nt; i++)
        free(t[i].part);
    free(t);
    return 0;
}

static int cmd_logs(int argc, char **argv)
{
    const char *handle = NULL, *sel = NULL, *regex = NULL;
    int follow = 0;
    long tail = 0;
    char err[600];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-f") == 0 || strcmp(a, "--follow") == 0) {
            follow = 1;
        } else if (strcmp(a, "--tail") == 0 || strcmp(a, "-t") == 0 ||
                   strncmp(a, "--tail=", 7) == 0) {
            const char *v = a[1] == '-' && a[6] == '=' ? a + 7
                            : i + 1 < argc             ? argv[++i]
                                                       : NULL;
            char *end;
            tail = v ? strtol(v, &end, 10) : 0;
            if (!v || !*v || *end || tail <= 0 || tail > 10000000)
                return cjob_usage("logs",
                                  "--tail needs a positive number "
                                  "of lines, got '%s'",
                                  v ? v : "");
        } else if (strcmp(a, "--regex") == 0 ||
                   strncmp(a, "--regex=", 8) == 0) {
            regex = a[7] == '=' ? a + 8 : i + 1 < argc ? argv[++i] : NULL;
            if (!regex)
                return cjob_usage("logs", "--regex needs a pattern");
        } else if (a[0] == '-') {
            return cjob_usage("logs",
                              "unknown option '%s'; usage: elrun logs "
                              "HANDLE [ROLE/REPLICA] [-f] [--tail N] "
                              "[--regex RE]",
                              a);
        } else if (!handle) {
            handle = a;
        } else if (!sel) {
            sel = a;
        } else {
            return cjob_usage("logs", "too many arguments ('%s')", a);
        }
    }
    if (!handle)
        return cjob_usage("logs",
                          "which job? usage: elrun logs HANDLE "
                          "[ROLE/REPLICA] [-f] [--tail N] [--regex RE]");
    struct cjob j;
    struct el_job_handle h;
    int rc = open_job("logs", handle, &j, &h);
    if (rc)
        return rc;
    char role[64];
    int replica = h.replica;
    snprintf(role, sizeof role, "%s", h.role);
    if (sel && sel[strspn(sel, "0123456789")] == 0 && strlen(sel) < 6) {
        replica = atoi(sel); /* a bare replica number */
    } else if (sel && el_job_parse_role_replica(sel, role, sizeof role,
                                                &replica, err, sizeof err)) {
        close_job(&j);
        return cjob_usage("logs", "%s", err);
    }
    if (*role && strcmp(role, role_of(&j)) != 0) {
        rc = cjob_usage("logs",
                        "no role '%s' in job %s; its role is '%s' "
                        "(try %s/0)",
                        role, j.id, role_of(&j), role_of(&j));
        close_job(&j);
        return rc;
    }
    rc = show_logs(&j, replica, follow, tail, regex);
    close_job(&j);
    return rc;
}

/* ---- cancel, list, describe -------------------------------------------------- */

static int cmd_cancel(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-')
        return cjob_usage("cancel", "usage: elrun cancel HANDLE");
    struct cjob j;
    struct el_job_handle h;
    int rc = open_job("cancel", argv[1], &j, &h);
    if (rc)
        return rc;
    char line[128];
    if (*j.dir && cjob_read_line(j.dir, "end", line, sizeof line) == 0) {
        line[strcspn(line, " ")] = 0;
        el_log(EL_LOG_WARN, "job %s already ended: %s", j.id, line);
    } else {
        rc = sched_of(&j)->cancel(&j);
    }
    close_job(&j);
    return rc;
}

int cjob_list_add(struct cjob_list *l, double t, const char *handle,
                  const char *name, const char *state)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        struct cjob_listed *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        l->v = nv;
        l->cap = cap;
    }
    struct cjob_listed *e = &l->v[l->n++];
    e->t = t;
    snprintf(e->handle, sizeof e->handle, "%s", handle);
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->state, sizeof e->state, "%s", state);
    return 0;
}

/* The jobs in $ELRUN_HOME/jobs/SCHED (local, slurm, aws_batch). */
int cjob_dir_list(const char *sched, struct cjob_list *l)
{
    char err[600], home[4000], d[4200];
    cjob_home(home, sizeof home);
    snprintf(d, sizeof d, "%s/jobs/%s", home, sched);
    DIR *dir = opendir(d);
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
        if (!el_job_id_valid(e->d_name) || e->d_name[0] == '.')
            continue;
        char hd[300];
        snprintf(hd, sizeof hd, "%s://elrun/%s", sched, e->d_name);
        struct cjob j;
        struct el_job_handle h;
        int saved = dup(2), nul = open("/dev/null", O_WRONLY);
        dup2(nul, 2); /* a half-written job is not an error here */
        int rc = open_job("list", hd, &j, &h);
        dup2(saved, 2);
        close(saved);
        close(nul);
        if (rc)
            continue;
        struct cjob_status st;
        const char *state = "UNKNOWN";
        int got = cjob_status(&j, &st, err, sizeof err) == 0;
        if (got)
            state = el_job_state_name(st.state);
        rc = cjob_list_add(
            l, json_real_value(json_object_get(j.spec, "submitted")), hd,
            jstr(j.spec, "name"), state);
        if (got)
            cjob_status_free(&st);
        close_job(&j);
        if (rc)
            break;
    }
    if (dir)
        closedir(dir);
    return 0;
}

static int by_time(const void *a, const void *b)
{
    double x = ((const struct cjob_listed *)a)->t,
           y = ((const struct cjob_listed *)b)->t;
    return x < y ? -1 : x > y;
}

static int cmd_list(int argc, char **argv)
{
    const char *only = NULL;
    char err[600];
    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "-s") == 0 ||
             strcmp(argv[i], "--scheduler") == 0) &&
            i + 1 < argc)
            only = argv[++i];
        else if (strncmp(argv[i], "--scheduler=", 12) == 0)
            only = argv[i] + 12;
        else
            return cjob_usage("list",
                              "unknown argument '%s'; usage: elrun "
                              "list [-s local|slurm|aws_batch|kubernetes]",
                              argv[i]);
    }
    if (only && el_job_check_sched(only, err, sizeof err))
        return cjob_usage("list", "%s", err);
    struct cjob_list l = {0};
    for (int i = 0; scheds[i]; i++)
        if (!only || strcmp(only, scheds[i]->name) == 0) {
            int rc = scheds[i]->list(&l, only != NULL);
            if (rc) {
                free(l.v);
                return rc;
            }
        }
    struct cjob_listed *v = l.v;
    size_t n = l.n;
    if (n)
        qsort(v, n, sizeof *v, by_time);
    int wh = 10, wn = 8;
    for (size_t i = 0; i < n; i++) {
        if ((int)strlen(v[i].handle) > wh)
            wh = (int)strlen(v[i].handle);
        if ((int)strlen(v[i].name) > wn)
            wn = (int)strlen(v[i].name);
    }
    printf("%-*s  %-*s  %s\n", wh, "APP HANDLE", wn, "APP NAME", "APP STATUS");
    for (size_t i = 0; i < n; i++)
        printf("%-*s  %-*s  %s\n", wh, v[i].handle, wn, v[i].name, v[i].state);
    free(v);
    return 0;
}

static int cmd_describe(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-')
        return cjob_usage("describe", "usage: elrun describe HANDLE");
    struct cjob j;
    struct el_job_handle h;
    int rc = open_job("describe", argv[1], &j, &h);
    if (rc)
        return rc;
    char *s = json_dumps(j.spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    printf("%s\n", s ? s : "{}");
    free(s);
    close_job(&j);
    return 0;
}

/* ---- submit ----------------------------------------------------------------- */

struct submit {
    const char *sched, *j, *name, *cfg;
    int max_retries, dryrun, wait, log;
    const char *env[256];
    int n_env;
    /* launcher words (flags, then the script and its arguments) */
    char **words;
    int n_words;
    /* dist.ddp */
    int ddp;
    const char *script, *module, *ddp_conf, *ddp_backend;
};

/* Does a[i] match flag (--x=V or --x V)?  Sets *val and advances *i. */
static int flag_val(int argc, char **argv, int *i, const char *const *names,
                    const char **val, int *missing)
{
    const char *a = argv[*i];
    for (; *names; names++) {
        size_t n = strlen(*names);
        if (strncmp(a, *names, n) != 0)
            continue;
        if (a[n] == '=') {
            *val = a + n + 1;
            return 1;
        }
        if (a[n] == 0) {
            if (*i + 1 >= argc) {
                *missing = 1;
                return 1;
            }
            *val = argv[++*i];
            return 1;
        }
    }
    return 0;
}

static int is_submit_flag(const char *a)
{
    static const char *const f[] = {"-s",
                                    "--scheduler",
                                    "-j",
                                    "--name",
                                    "--max-retries",
                                    "--max_retries",
                                    "--env",
                                    "--cfg",
                                    "-cfg",
                                    "--scheduler_args",
                                    "--dryrun",
                                    "--wait",
                                    "--log",
                                    NULL};
    for (int i = 0; f[i]; i++) {
        size_t n = strlen(f[i]);
        if (strncmp(a, f[i], n) == 0 && (a[n] == 0 || a[n] == '='))
            return 1;
    }
    return 0;
}

static int parse_submit(int argc, char **argv, struct submit *s)
{
    int i = 1, missing = 0;
    const char *v;
    static const char *const f_s[] = {"-s", "--scheduler", NULL};
    static const char *const f_j[] = {"-j", "--j", NULL};
    static const char *const f_name[] = {"--name", NULL};
    static const char *const f_retry[] = {"--max-retries", "--max_retries",
                                          NULL};
    static const char *const f_env[] = {"--env", NULL};
    static const char *const f_cfg[] = {"--cfg", "-cfg", "--scheduler_args",
                                        NULL};
    static const char *const f_script[] = {"--script", NULL};
    static const char *const f_m[] = {"-m", "--m", NULL};
    static const char *const f_conf[] = {"--rdzv_conf", "--rdzv-conf", NULL};
    static const char *const f_back[] = {"--rdzv_backend", "--rdzv-backend",
                                         NULL};
    static const char *const f_ign[] = {
        "--tee", "--rdzv_port", "--cpu", "--gpu", "--memMB", "--image", NULL};
    s->sched = "local";
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *retry = NULL;
        if (flag_val(argc, argv, &i, f_s, &s->sched, &missing) ||
            flag_val(argc, argv, &i, f_j, &s->j, &missing) ||
            flag_val(argc, argv, &i, f_name, &s->name, &missing) ||
            flag_val(argc, argv, &i, f_cfg, &s->cfg, &missing)) {
        } else if (flag_val(argc, argv, &i, f_retry, &retry, &missing)) {
            char *end;
            long r = retry ? strtol(retry, &end, 10) : -1;
            if (!missing && (!*retry || *end || r < 0 || r > 1000))
                return cjob_usage("submit",
                                  "--max-retries needs a number "
                                  "from 0 to 1000, got '%s'",
                                  retry);
            s->max_retries = (int)r;
        } else if (flag_val(argc, argv, &i, f_env, &v, &missing)) {
            if (missing)
                break;
            /* dist.ddp's dict form FOO=1,BAR=2 too */
            char *copy = strdup(v), *save = NULL;
            int all_kv = 1;
            for (char *p = copy; p && *p;
                 p += strcspn(p, ",") + (p[strcspn(p, ",")] != 0))
                all_kv &= memchr(p, '=', strcspn(p, ",")) != NULL;
            if (!strchr(v, '=')) {
                free(copy);
                return cjob_usage("submit", "--env '%s' is not NAME=VALUE", v);
            }
            if (s->ddp && all_kv) {
                for (char *t = strtok_r(copy, ",", &save); t;
                     t = strtok_r(NULL, ",", &save))
                    if (s->n_env < 256)
                        s->env[s->n_env++] = strdup(t);
                free(copy);
            } else {
                free(copy);
                if (s->n_env < 256)
                    s->env[s->n_env++] = v;
            }
        } else if (strcmp(a, "--dryrun") == 0 || strcmp(a, "--dry-run") == 0) {
            s->dryrun = 1;
        } else if (strcmp(a, "--wait") == 0) {
            s->wait = 1;
        } else if (strcmp(a, "--log") == 0) {
            s->log = s->wait = 1;
        } else if (strcmp(a, "-h") == 0 && !s->ddp) {
            return -1;
        } else if (strcmp(a, "--help") == 0) {
            return -1;
        } else if (!s->ddp && strcmp(a, "dist.ddp") == 0) {
            s->ddp = 1;
        } else if (s->ddp &&
                   (flag_val(argc, argv, &i, f_script, &s->script, &missing) ||
                    flag_val(argc, argv, &i, f_m, &s->module, &missing) ||
                    flag_val(argc, argv, &i, f_conf, &s->ddp_conf, &missing) ||
                    flag_val(argc, argv, &i, f_back, &s->ddp_backend,
                             &missing) ||
                    flag_val(argc, argv, &i, f_ign, &v, &missing))) {
        } else if (s->ddp && strcmp(a, "--debug") == 0) {
        } else if (s->ddp && a[0] == '-' && strcmp(a, "--") != 0) {
            return cjob_usage("submit",
                              "dist.ddp has no option '%s'; it "
                              "takes -j, --script, -m, --name, --env, "
                              "--max_retries, --rdzv_backend, --rdzv_conf",
                              a);
        } else {
            break;
        }
        if (missing)
            return cjob_usage("submit", "%s needs a value", a);
    }
    if (missing)
        return cjob_usage("submit", "%s needs a value", argv[i]);
    if (s->ddp) {
        if (!!s->script == !!s->module)
            return cjob_usage("submit", "dist.ddp: exactly one of --script "
                                        "and -m must be specified");
        if (i < argc && strcmp(argv[i], "--") == 0)
            i++;
        s->words = calloc((size_t)(argc - i) + 8, sizeof *s->words);
        if (!s->words)
            return 1;
        if (s->ddp_backend) {
            static char b[200];
            snprintf(b, sizeof b, "--rdzv-backend=%s", s->ddp_backend);
            s->words[s->n_words++] = b;
        }
        if (s->ddp_conf) {
            static char c[1200];
            snprintf(c, sizeof c, "--rdzv-conf=%s", s->ddp_conf);
            s->words[s->n_words++] = c;
        }
        if (s->module)
            s->words[s->n_words++] = "-m";
        s->words[s->n_words++] = (char *)(s->script ? s->script : s->module);
        for (; i < argc; i++)
            s->words[s->n_words++] = argv[i];
        if (!s->j)
            s->j = "1x2"; /* TorchX's default for dist.ddp */
    } else {
        s->words = argv + i;
        s->n_words = argc - i;
    }
    return 0;
}

static const char submit_help[] =
    "usage: elrun submit [-s local|slurm|aws_batch|kubernetes] "
    "[-j [MIN:]MAXxNPROC | -j N] "
    "[--name NAME]\n"
    "                    [--max-retries N] [--env K=V]... [--cfg k=v,...] "
    "[--dryrun]\n"
    "                    [--wait] [--log] [launcher flags] SCRIPT [ARGS...]\n"
    "       elrun submit [-s SCHED] dist.ddp -j 2x1 --script train.py -- "
    "ARGS...\n"
    "\n"
    "Starts SCRIPT as one elastic job of MIN..MAX nodes of NPROC workers and\n"
    "prints its handle (SCHED://elrun/ID).  elrun's own flags come first,\n"
    "then the launcher's (elrun --help), then the script.  --cfg for slurm:\n"
    "partition, time, account, qos, constraint, cpus-per-task, mem,\n"
    "gpus-per-node; for aws_batch: queue, image (both needed), vcpus, memory,\n"
    "gpus, job_role, execution_role, efs, efs_path, tags (docs/AWS.md); for\n"
    "kubernetes: image (needed), namespace, rdzv_endpoint, etcd_image,\n"
    "service_account, cpu, memory, gpu (docs/KUBERNETES.md).\n"
    "See docs/JOBS.md; then elrun status/logs/cancel/list/\n"
    "describe HANDLE.\n";

static int wait_job(struct cjob *j, int log)
{
    if (log) {
        /* As TorchX's run --log: the logs go to stderr, stdout keeps the
         * handle alone. */
        fflush(stdout);
        dup2(2, 1);
        show_logs(j, -1, 1, 0, NULL);
    } else {
        /* A local job ends with its `end` file (inotify wakes us); a Slurm
         * one may end without one, which job_final() asks squeue about
         * once a second. */
        int in = inotify_init1(IN_CLOEXEC);
        if (in >= 0)
            inotify_add_watch(in, j->dir, IN_CREATE | IN_MOVED_TO);
        while (!job_final(j)) {
            struct pollfd pf = {in, POLLIN, 0};
            char ev[4096];
            if (in < 0 || poll(&pf, 1, 1000) < 0)
                usleep(200000);
            else if (pf.revents & POLLIN && read(in, ev, sizeof ev) < 0)
                usleep(200000);
        }
        if (in >= 0)
            close(in);
    }
    struct cjob_status st;
    char err[600];
    if (cjob_status(j, &st, err, sizeof err))
        return cjob_usage("submit", "%s", err);
    fprintf(stderr, "elrun submit: job finished: %s\n",
            el_job_state_name(st.state));
    int ok = st.state == EL_JOB_SUCCEEDED;
    cjob_status_free(&st);
    return ok ? 0 : 1;
}

static int cmd_submit(int argc, char **argv)
{
    /* Static: what parse_submit allocates (dist.ddp's words and --env
     * entries) lives until the command exits. */
    static struct submit s;
    char err[1600];
    int rc = parse_submit(argc, argv, &s);
    if (rc < 0) {
        fputs(submit_help, stdout);
        return 0;
    }
    if (rc)
        return rc;
    if (el_job_check_sched(s.sched, err, sizeof err))
        return cjob_usage("submit", "%s", err);
    const struct cjob_sched *ops = cjob_sched_find(s.sched);
    if (ops->check_cfg(s.cfg, err, sizeof err))
        return cjob_usage("submit", "%s", err);
    struct el_job_size z = {1, 1, 1};
    if (s.j && el_job_parse_size(s.j, &z, err, sizeof err))
        return cjob_usage("submit", "%s", err);
    if (s.n_words == 0)
        return cjob_usage("submit",
                          "no training script; usage: elrun submit "
                          "[-s SCHED] [-j 2x4] [launcher flags] SCRIPT "
                          "[ARGS...]");

    /* The launcher's own parser checks the flags and finds the script. */
    char **largv = calloc((size_t)s.n_words + 2, sizeof *largv);
    char *noenv[] = {NULL};
    if (!largv)
        return 1;
    largv[0] = "elrun";
    memcpy(largv + 1, s.words, (size_t)s.n_words * sizeof *largv);
    struct el_opts o;
    rc = el_opts_parse(&o, s.n_words + 1, largv, noenv, err, sizeof err);
    free(largv); /* o's strings point into s.words, not into largv */
    if (rc) {
        for (int i = 0; i < s.n_words && s.words[i][0] == '-'; i++)
            if (is_submit_flag(s.words[i]))
                return cjob_usage("submit",
                                  "%s comes after a launcher flag; "
                                  "put elrun submit's own flags first",
                                  s.words[i]);
        return cjob_usage("submit", "%s", err);
    }
    if (!o.script)
        return cjob_usage("submit", "no training script after the flags");
    int nflags = 0;
    while (nflags < s.n_words && s.words[nflags] != o.script)
        nflags++;
    if (o.standalone || *o.rdzv_endpoint || strcmp(o.rdzv_id, "none") ||
        o.node_rank)
        if (!(strncmp(o.rdzv_backend, "etcd", 4) == 0 && *o.rdzv_endpoint &&
              !o.standalone && !strcmp(o.rdzv_id, "none") && !o.node_rank))
            return cjob_usage("submit",
                              "the job sets the rendezvous itself; "
                              "drop --standalone, --rdzv-endpoint, --rdzv-id "
                              "and --node-rank (an etcd endpoint is fine with "
                              "--rdzv-backend=etcd)");
    const char *backend = "c10d";
    if (strncmp(o.rdzv_backend, "etcd", 4) == 0) {
        if (!*o.rdzv_endpoint)
            return cjob_usage("submit", "--rdzv-backend=etcd needs "
                                        "--rdzv-endpoint=HOST:PORT of etcd");
        backend = "etcd";
    } else if (strcmp(o.rdzv_backend, "static") &&
               strcmp(o.rdzv_backend, "c10d")) {
        return cjob_usage("submit",
                          "--rdzv-backend=%s: a job runs on "
                          "elrun's store (c10d, the default) or etcd",
                          o.rdzv_backend);
    }
    if (!s.j) {
        z.min_nodes = o.min_nodes;
        z.max_nodes = o.max_nodes;
        z.nproc = o.nproc;
    }
    const char *python = getenv("PYTHON_EXEC");
    if (!python || !*python)
        python = "python3";
    int use_python = o.run_path || !o.no_python;
    if (!ops->local_program) {
        /* the script and python are in the job's image */
    } else if (el_job_find_program(use_python ? python : o.script, err,
                                   sizeof err))
        return cjob_usage("submit", "%s%s", err,
                          use_python ? " (set PYTHON_EXEC or use --no-python)"
                                     : "");
    else if (use_python && !o.module && access(o.script, R_OK) != 0)
        return cjob_usage("submit",
                          "training script '%s' cannot be read "
                          "(%s); check the path, or use --no-python for a "
                          "program",
                          o.script, strerror(errno));

    /* The job's spec. */
    char home[4000], base[128], role[128], elrun[4096], cwd[4096];
    cjob_home(home, sizeof home);
    const char *b = strrchr(o.script, o.module ? '.' : '/');
    snprintf(base, sizeof base, "%s", b ? b + 1 : o.script);
    if (!o.module && strchr(base, '.') && base[0] != '.')
        *strrchr(base, '.') = 0;
    for (char *p = base; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
            *p = '_';
    snprintf(role, sizeof role, "%s", *base ? base : "worker");
    const char *name = s.name ? s.name : role;
    ssize_t el = readlink("/proc/self/exe", elrun, sizeof elrun - 1);
    elrun[el > 0 ? el : 0] = 0;
    if (!getcwd(cwd, sizeof cwd))
        cwd[0] = 0;
    /* Paths the agents will use must not depend on their cwd: a relative
     * script path is kept (jobs run in the submit directory). */
    char id[EL_JOB_ID_MAX];
    el_job_make_id(name, id, sizeof id);

    for (int i = 0; i < s.n_env; i++)
        if (!strchr(s.env[i], '=') || s.env[i][0] == '=')
            return cjob_usage("submit", "--env '%s' is not NAME=VALUE",
                              s.env[i]);
    json_t *launcher = json_array(), *env = json_array();
    for (int i = 0; i < s.n_words; i++)
        json_array_append_new(launcher, json_string(s.words[i]));
    for (int i = 0; i < s.n_env; i++)
        json_array_append_new(env, json_string(s.env[i]));
    char size[64];
    if (z.min_nodes == z.max_nodes)
        snprintf(size, sizeof size, "%dx%d", z.max_nodes, z.nproc);
    else
        snprintf(size, sizeof size, "%d:%dx%d", z.min_nodes, z.max_nodes,
                 z.nproc);
    json_t *spec = json_pack(
        "{s:s, s:s, s:s, s:s, s:f, s:s, s:i, s:i, s:i, s:i, s:i, s:o, s:s, "
        "s:s, s:s, s:s, s:s, s:s, s:o, s:i}",
        "id", id, "scheduler", s.sched, "name", name, "role", role, "submitted",
        cjob_now(), "size", size, "min_nodes", z.min_nodes, "max_nodes",
        z.max_nodes, "nproc", z.nproc, "max_retries", s.max_retries,
        "max_restarts", o.max_restarts, "env", env, "cfg", s.cfg ? s.cfg : "",
        "cwd", cwd, "rdzv_backend", backend, "rdzv_endpoint",
        strcmp(backend, "etcd") ? "" : o.rdzv_endpoint, "rdzv_conf",
        o.rdzv_conf ? o.rdzv_conf : "", "elrun", elrun, "launcher", launcher,
        "n_launcher_flags", nflags);
    if (!spec)
        return 1;

    struct el_job_spec js = {0};
    js.name = name;
    js.size = z;
    js.max_retries = s.max_retries;
    js.home = home;
    js.elrun = elrun;
    js.rdzv_backend = backend;
    js.rdzv_endpoint = o.rdzv_endpoint;
    js.rdzv_conf = o.rdzv_conf;
    js.env = (char **)s.env;
    js.n_env = s.n_env;
    js.cfg = s.cfg;
    js.launcher = s.words;
    js.n_launcher = s.n_words;
    js.n_launcher_flags = nflags;
    rc = ops->submit(&js, spec, id, sizeof id, s.dryrun);
    json_decref(spec);
    if (rc || s.dryrun)
        return rc;
    printf("%s://elrun/%s\n", s.sched, id);
    fflush(stdout);
    if (!s.wait)
        return 0;
    struct cjob j;
    struct el_job_handle h;
    char hd[300];
    snprintf(hd, sizeof hd, "%s://elrun/%s", s.sched, id);
    if ((rc = open_job("submit", hd, &j, &h)))
        return rc;
    rc = wait_job(&j, s.log);
    close_job(&j);
    return rc;
}

/* ---- the launcher inside a Slurm step ---------------------------------------- */

int cli_job_slurm_env(int argc, char **argv)
{
    char err[700];
    struct el_job_env_defaults d;
    const char *off = getenv("ELRUN_NO_SLURM");
    if ((off && *off && strcmp(off, "0")) || getenv("ELRUN_JOB_DIR"))
        return 0; /* disabled, or an agent of `elrun submit` (flags given) */
    for (int i = 1; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strncmp(argv[i], "--standalone", 12) == 0)
            return 0;
    }
    int rc = el_job_slurm_defaults(environ, &d, err, sizeof err);
    return cjob_apply_env(rc, &d, err, "Slurm", getenv("SLURM_JOB_ID"));
}

int cjob_apply_env(int rc, const struct el_job_env_defaults *d, const char *err,
                   const char *where, const char *id)
{
    char line[1200];
    if (rc == EL_EUSAGE) {
        fprintf(stderr, "elrun: error: %s\n", err);
        return 2;
    }
    if (rc != 1 || d->n == 0)
        return 0;
    size_t len = 0;
    for (int i = 0; i < d->n; i++) {
        setenv(d->var[i].name, d->var[i].value, d->var[i].extends);
        int w = snprintf(line + len, sizeof line - len, "%s%s=%s from %s",
                         i ? ", " : "", d->var[i].name, d->var[i].value,
                         d->var[i].from);
        if (w > 0 && (size_t)w < sizeof line - len)
            len += (size_t)w;
    }
    el_log(EL_LOG_WARN, "inside %s job %s: %s; flags given win", where,
           id ? id : "?", line);
    return 0;
}

/* ---- dispatch --------------------------------------------------------------- */

int cli_job_verb(const char *word)
{
    static const char *const v[] = {"submit",   "status",      "logs",
                                    "log",      "cancel",      "list",
                                    "describe", "__supervise", NULL};
    for (int i = 0; v[i]; i++)
        if (strcmp(word, v[i]) == 0)
            return 1;
    return 0;
}

int cli_job_main(int argc, char **argv)
{
    el_log_init("elrun", EL_LOG_WARN);
    const char *v = argv[0];
    if (strcmp(v, "submit") == 0)
        return cmd_submit(argc, argv);
    if (strcmp(v, "status") == 0)
        return cmd_status(argc, argv);
    if (strcmp(v, "logs") == 0 || strcmp(v, "log") == 0)
        return cmd_logs(argc, argv);
    if (strcmp(v, "cancel") == 0)
        return cmd_cancel(argc, argv);
    if (strcmp(v, "list") == 0)
        return cmd_list(argc, argv);
    if (strcmp(v, "describe") == 0)
        return cmd_describe(argc, argv);
    return cjob_local_supervise(argc, argv);
}
