/* job_cli.h -- what the job commands' files share (private to src/cli):
 * job_cmd.c (the verbs, and what the schedulers with a job directory share),
 * and one file per scheduler, each defining its struct cjob_sched (the ops
 * the verbs call): job_local.c (the local scheduler's supervisor),
 * job_slurm.c (sbatch, squeue, scancel), job_aws.c (AWS Batch),
 * job_k8s.c (ElasticJobs through the Kubernetes API).
 * docs/JOBS.md describes the job directory these read and write.
 */
#ifndef ELRUN_CLI_JOB_CLI_H
#define ELRUN_CLI_JOB_CLI_H

#include <jansson.h>
#include <regex.h>
#include <stddef.h>

#include "elrun/job.h"

/* A job as the commands see it: its directory and its spec (job.json). */
struct cjob {
    char sched[16], id[EL_JOB_ID_MAX];
    char dir[4096];
    json_t *spec; /* job.json, owned                        */
};

/* What `elrun status` reports. */
struct cjob_replica {
    int state; /* enum el_job_state                      */
    char host[256];
    int pid;      /* 0 if unknown                           */
    int exitcode; /* -1000 if none recorded                 */
};

struct cjob_status {
    int state;
    int restarts;
    char msg[1024]; /* a line for people; may be ""          */
    int nrep;
    struct cjob_replica rep[256];
    /* The root cause of a failure (root >= 0): replica, and from its error
     * file and failure table the rank, exit code, time and message. */
    int root, root_rank, root_exit;
    char root_host[256], root_time[64];
    char *root_msg;  /* malloc'd or NULL                       */
    char *root_json; /* the error file as written, or NULL     */
};

/* $ELRUN_HOME (default ~/.elrun), absolute, into out. */
void cjob_home(char *out, size_t cap);

/* 2 after printing "elrun VERB: error: MSG" on stderr. */
int cjob_usage(const char *verb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Write text to dir/name atomically (temporary file + rename).  0 or -errno. */
int cjob_write(const char *dir, const char *name, const char *text);
/* mkdir -p path (0755).  0 or -errno. */
int cjob_mkdirs(const char *path);
/* The first line of dir/name (trailing newline removed), or -1. */
int cjob_read_line(const char *dir, const char *name, char *out, size_t cap);

/* Is pid alive (not a zombie) with word in its command line? */
int cjob_pid_alive(int pid, const char *word);

/* Run argv (searched in PATH), capturing stdout into out and the first line
 * of stderr into err.  Returns the exit status, 127 if it could not run
 * (err says why), 128+N for signal N. */
int cjob_run(char *const argv[], char *out, size_t outcap, char *err,
             size_t errcap);

/* The local scheduler: start the supervisor for the job in dir and wait
 * until it accepted the job (its agents started).  0, or -1 with err. */
int cjob_local_start(const char *elrun, const char *dir, char *err,
                     size_t errlen);
/* `elrun __supervise DIR`: the supervisor's main. */
int cjob_local_supervise(int argc, char **argv);
/* SIGTERM the supervisor and wait for it and its agents to be gone.  0, or
 * -1 with err. */
int cjob_local_cancel(const struct cjob *j, char *err, size_t errlen);
/* Live restarts from the job's store (-1 if unreachable). */
int cjob_local_live_restarts(const struct cjob *j);

/* Slurm: sbatch the script, squeue a job's state, scancel it. */
int cjob_slurm_submit(const char *script_path, char *jobid, size_t cap,
                      char *err, size_t errlen);
/* 0 with *state (enum el_job_state) and the Slurm word in raw, 1 if Slurm
 * does not know the job (any more), -1 with err if squeue failed. */
int cjob_slurm_state(const char *jobid, int *state, char *raw, size_t rawcap,
                     char *err, size_t errlen);
int cjob_slurm_cancel(const char *jobid, char *err, size_t errlen);

/* AWS Batch (job_aws.c): submit (or print the two inputs with dryrun) and
 * record the job in HOME/jobs/aws_batch/ID; status from describe-jobs;
 * logs from CloudWatch (keep(line, arg) filters); cancel by terminate-job.
 * Return codes as the verbs' (0, 1, 2 after a usage line); status and
 * cancel 0 or -1 with err. */
int cjob_aws_submit(const struct el_job_spec *sp, json_t *spec, const char *id,
                    int dryrun, const char *home);
int cjob_aws_status(const struct cjob *j, struct cjob_status *st, char *err,
                    size_t errlen);
int cjob_aws_logs(const struct cjob *j, int replica, int follow, long tail,
                  int (*keep)(const char *, void *), void *arg);
int cjob_aws_cancel(const struct cjob *j, char *err, size_t errlen);

/* The job's status, from its scheduler's ops.  0, or -1 with err (the
 * scheduler could not be asked).  Free with cjob_status_free. */
int cjob_status(const struct cjob *j, struct cjob_status *st, char *err,
                size_t errlen);
void cjob_status_free(struct cjob_status *st);

/* ---- the schedulers' ops (one struct per scheduler file) ---- */

/* What `logs` selects and how it prints: TorchX's `ROLE/REPLICA ` prefix
 * (green on a terminal), lines kept by the regex when has_re. */
struct cjob_logsel {
    const char *role;
    regex_t re;
    int has_re;
    int color;
};
/* Print line as replica k's if ls keeps it. */
void cjob_log_emit(const struct cjob_logsel *ls, int k, const char *line);
/* Does ls keep line? */
int cjob_log_keep(const char *line, void *ls);

/* The rows of `elrun list`. */
struct cjob_listed {
    double t;
    char handle[300], name[200], state[32];
};
struct cjob_list {
    struct cjob_listed *v;
    size_t n, cap;
};
/* Append a row (copies the strings).  0 or -ENOMEM. */
int cjob_list_add(struct cjob_list *l, double t, const char *handle,
                  const char *name, const char *state);

/* A scheduler.  Every verb finds the ops of the job's (or -s's) scheduler
 * and calls them; return codes are the verbs' (0; 2 after a usage line; 1
 * after an error line) unless said otherwise.
 *   check_cfg  0 if --cfg is fine, else EL_EUSAGE with err.
 *   local_program  the program must be runnable on this machine at submit.
 *   submit     start (or with dryrun print) the job of spec js; job is
 *              job.json's content (the caller owns it); id holds the id
 *              made from the name and gets the scheduler's (Slurm's job id).
 *   open       find the job of handle h into j (the spec read or fetched).
 *   status     as cjob_status.
 *   logs       print replica's (all when < 0) lines; follow until the end.
 *   cancel     stop the job, wait until it stopped.
 *   list       add the scheduler's jobs to l; asked: -s named this
 *              scheduler (else a scheduler that cannot be asked is left
 *              out quietly).  A half-written job is never an error.
 *   ui_url     where a person looks at the job. */
struct cjob_sched {
    const char *name;
    int local_program;
    int (*check_cfg)(const char *cfg, char *err, size_t errlen);
    int (*submit)(const struct el_job_spec *js, json_t *job, char *id,
                  size_t idcap, int dryrun);
    int (*open)(const char *verb, const char *handle,
                const struct el_job_handle *h, struct cjob *j);
    int (*status)(const struct cjob *j, struct cjob_status *st, char *err,
                  size_t errlen);
    int (*logs)(struct cjob *j, int replica, int follow, long tail,
                const struct cjob_logsel *ls);
    int (*cancel)(struct cjob *j);
    int (*list)(struct cjob_list *l, int asked);
    void (*ui_url)(const struct cjob *j, char *out, size_t cap);
};

extern const struct cjob_sched cjob_sched_local, cjob_sched_slurm,
    cjob_sched_aws, cjob_sched_k8s;
/* The ops of scheduler name, or NULL. */
const struct cjob_sched *cjob_sched_find(const char *name);

/* What the schedulers with a job directory ($ELRUN_HOME/jobs/SCHED/ID)
 * share (job_cmd.c): open reads job.json; status reads the directory (and
 * squeue for Slurm); logs print and follow replicas/K/combined.log; list
 * reads the jobs of the directory; ui_url is file://DIR. */
int cjob_dir_open(const char *verb, const char *handle,
                  const struct el_job_handle *h, struct cjob *j);
int cjob_dir_status(const struct cjob *j, struct cjob_status *st, char *err,
                    size_t errlen);
int cjob_dir_logs(struct cjob *j, int replica, int follow, long tail,
                  const struct cjob_logsel *ls);
int cjob_dir_list(const char *sched, struct cjob_list *l);
void cjob_dir_url(const struct cjob *j, char *out, size_t cap);
/* Seconds since the epoch, with fractions. */
double cjob_now(void);

/* Apply what a scheduler's environment gives the launcher (rc, d, err from
 * el_job_slurm_defaults or el_job_aws_batch_defaults): set the PET_*
 * variables and log one line saying what came from where ("inside WHERE
 * job ID: ..."). Returns 0, or 2 after printing a usage error. */
int cjob_apply_env(int rc, const struct el_job_env_defaults *d, const char *err,
                   const char *where, const char *id);

#endif
