/* job.h -- the pure parts of elrun's job layer (`elrun submit/status/...`):
 * TorchX's -j size, job handles, job states, Slurm's hostlist syntax, the
 * launcher defaults taken from a Slurm allocation, the --cfg options and the
 * sbatch script.  Nothing here starts a process, prints or exits; the
 * commands are in src/cli/job_cmd.c and docs/JOBS.md says how they fit.
 *
 * Errors: functions return 0 or EL_EUSAGE (include/elrun/err.h) with a one
 * line message in the caller's err buffer saying what was wrong and what to
 * write instead; -ENOMEM when memory runs out.
 */
#ifndef ELRUN_JOB_H
#define ELRUN_JOB_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- sizes: TorchX's -j [MIN:]MAXxNPROC | N ---------------------------- */

struct el_job_size {
    int min_nodes, max_nodes; /* 1 <= min <= max                         */
    int nproc;                /* workers per node, >= 1                   */
};

/* "2x4" = 2 nodes of 4 workers, "2:5x8" = 2 to 5 nodes of 8, "4" = one node
 * of 4.  Spaces are not allowed; every number is a positive decimal below
 * 100000.  0 or EL_EUSAGE. */
int el_job_parse_size(const char *spec, struct el_job_size *out, char *err,
                      size_t errlen);

/* ---- handles: SCHED://SESSION/ID[/ROLE[/REPLICA]] ---------------------- */

#define EL_JOB_ID_MAX 128

struct el_job_handle {
    char sched[16];         /* "local" or "slurm"                    */
    char session[32];       /* "elrun" when printed; any is accepted */
    char id[EL_JOB_ID_MAX]; /* [A-Za-z0-9._-]+, not "." or ".."     */
    char role[64];          /* "" unless the handle names a role     */
    int replica;            /* -1 unless it names a replica          */
};

/* Known schedulers: 0 if name is one ("local", "slurm"), else EL_EUSAGE. */
int el_job_check_sched(const char *name, char *err, size_t errlen);

/* Parse a handle as `elrun submit` prints it (TorchX's form, with TorchX's
 * log identifier suffix /ROLE/REPLICA accepted).  0 or EL_EUSAGE. */
int el_job_parse_handle(const char *text, struct el_job_handle *h, char *err,
                        size_t errlen);

/* "ROLE/REPLICA" or "ROLE" (replica -1) as `elrun logs` takes it. */
int el_job_parse_role_replica(const char *text, char *role, size_t rolecap,
                              int *replica, char *err, size_t errlen);

/* A job id is safe as a file name: [A-Za-z0-9._-]{1,127}, not . or .. */
int el_job_id_valid(const char *id);

/* ---- states (TorchX's AppState, same numbers) -------------------------- */

enum el_job_state {
    EL_JOB_UNSUBMITTED = 0,
    EL_JOB_SUBMITTED = 1,
    EL_JOB_PENDING = 2,
    EL_JOB_RUNNING = 3,
    EL_JOB_SUCCEEDED = 4,
    EL_JOB_FAILED = 5,
    EL_JOB_CANCELLED = 6,
    EL_JOB_UNKNOWN = 7,
};

/* "RUNNING" ...; "UNKNOWN" for a value out of range. */
const char *el_job_state_name(int state);
/* The state named name (as el_job_state_name prints it), or -1. */
int el_job_state_parse(const char *name);
/* SUCCEEDED, FAILED or CANCELLED. */
int el_job_state_final(int state);
/* A Slurm job state (squeue %T / scontrol JobState, "CANCELLED+" and
 * "CANCELLED by 0" too) as TorchX maps it: COMPLETED -> SUCCEEDED, PENDING
 * REQUEUED RESIZING SUSPENDED (and CONFIGURING, COMPLETING) -> PENDING or
 * RUNNING, the failure states -> FAILED, anything else UNKNOWN. */
int el_job_state_from_slurm(const char *slurm_state);

/* ---- Slurm hostlists ---------------------------------------------------- */

/* Expand Slurm's hostlist syntax ("node[01-04,07],gpu1", "r[1-2]n[3-4]")
 * into *hosts (an array of n malloc'd strings in order; free with
 * el_job_hosts_free).  Zero padding follows the range's first bound.  At
 * most max hosts (EL_EUSAGE beyond).  0, EL_EUSAGE or -ENOMEM. */
int el_job_hostlist_expand(const char *list, int max, char ***hosts, int *n,
                           char *err, size_t errlen);
void el_job_hosts_free(char **hosts, int n);

/* The first host of a hostlist, into out.  0 or EL_EUSAGE. */
int el_job_hostlist_first(const char *list, char *out, size_t cap, char *err,
                          size_t errlen);

/* ---- the launcher inside a Slurm allocation ----------------------------- */

/* What the launcher takes from a scheduler's environment (a Slurm step, an
 * AWS Batch node) when rendezvous flags are not given: the variables
 * torchrun reads (PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR, PET_RDZV_ID
 * ...), each with the scheduler variable it came from.  'extends': the
 * value extends one the user set (PET_RDZV_CONF), so it replaces it. */
struct el_job_env_defaults {
    int n; /* entries used                          */
    struct {
        char name[24];   /* "PET_NNODES"                          */
        char value[256]; /* "3"                                   */
        char from[64];   /* "SLURM_STEP_NUM_NODES"                */
        int extends;
    } var[5];
};

/* Inside a Slurm job step (SLURM_STEP_ID and SLURM_JOB_ID set in env, a
 * NULL-terminated "K=V" array): fill *out and return 1.  Outside a step:
 * return 0.  A variable already set in env (PET_NNODES ...) is left out, so
 * flags and PET_* the user gave win.  The node count and node list are the
 * step's (SLURM_STEP_NUM_NODES, SLURM_STEP_NODELIST) when given, else the
 * job's; the master port is 29500 + SLURM_JOB_ID % 1000, so jobs that share a
 * node do not collide.  EL_EUSAGE (with err) when the variables are
 * malformed. */
int el_job_slurm_defaults(char **env, struct el_job_env_defaults *out,
                          char *err, size_t errlen);

/* ---- submission ---------------------------------------------------------- */

/* One job as `elrun submit` understood it. */
struct el_job_spec {
    const char *name; /* job name                              */
    struct el_job_size size;
    int max_retries;           /* scheduler-level retries of the job    */
    const char *home;          /* absolute $ELRUN_HOME                  */
    const char *elrun;         /* absolute path of the elrun binary     */
    const char *rdzv_backend;  /* "c10d" (elrun's store) or "etcd"      */
    const char *rdzv_endpoint; /* etcd's endpoints; NULL for c10d       */
    const char *rdzv_conf;     /* the user's --rdzv-conf, or NULL       */
    char **env;                /* --env K=V, n_env of them              */
    int n_env;
    const char *cfg; /* --cfg k=v,k2=v2 or NULL               */
    char **launcher; /* launcher flags, then SCRIPT ARGS...   */
    int n_launcher;
    int n_launcher_flags; /* how many of them come before SCRIPT   */
};

/* The sbatch options --cfg may set, in the order the script writes them. */
extern const char *const el_job_slurm_cfg_keys[];
/* The --cfg keys of -s kubernetes (docs/KUBERNETES.md). */
extern const char *const el_job_k8s_cfg_keys[];

/* Check a --cfg value for scheduler sched: "k=v,k2=v2" with keys the
 * scheduler knows ("-" and "_" alike); "local" knows none.  0 or EL_EUSAGE
 * naming the key and the known ones. */
int el_job_check_cfg(const char *sched, const char *cfg, char *err,
                     size_t errlen);

/* The sbatch script for spec (malloc'd, the caller frees), as docs/JOBS.md
 * shows it: --nodes=MIN-MAX, one agent per node with srun --no-kill, the
 * rendezvous store on the first node (or etcd), per-node logs and exit codes
 * under HOME/jobs/slurm/$SLURM_JOB_ID, requeue while SLURM_RESTART_COUNT <
 * max_retries.  0, EL_EUSAGE (a bad --cfg) or -ENOMEM. */
int el_job_sbatch_script(const struct el_job_spec *spec, char **out, char *err,
                         size_t errlen);

/* The value of key in --cfg (keys normalised as el_job_check_cfg does: "_"
 * as "-"), the first if given twice, into out; 1 if found, else 0 (out "").
 */
int el_job_cfg_get(const char *cfg, const char *key, char *out, size_t cap);

/* s quoted for a POSIX shell (single quotes; "'" as '\''), malloc'd. */
char *el_job_shell_quote(const char *s);

/* A fresh local job id: NAME-XXXXXXXXXXXX with TorchX's alphabet (no '8'),
 * the name cut to 60 characters and anything outside [A-Za-z0-9._-] made
 * '_'. */
void el_job_make_id(const char *name, char *out, size_t cap);

/* ---- a program that can run ---------------------------------------------- */

/* 0 if prog is an executable file (a path with '/') or is found in PATH;
 * else -1 with the reason and what to do in why. */
int el_job_find_program(const char *prog, char *why, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
