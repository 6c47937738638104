/* agent.h -- the per-node agent: runs one node's group of workers through
 * rounds of a rendezvous, supervises them, restarts them, reports failures.
 *
 * The agent is single-threaded around epoll: worker exits (signalfd
 * SIGCHLD + waitpid), signals to the agent, the rendezvous' notify fd, the
 * grace timer and the workers' output pipes (--tee) are all events, so a
 * worker's exit is seen at once; nothing polls.
 *
 * Life of a run (el_agent_run):
 *   round = el_rdzv_next()  -> ranks, world size, the workers' store
 *   start nproc workers: fork; setpgid (each worker leads its own process
 *     group); PR_SET_PDEATHSIG SIGKILL (the agent's death kills them);
 *     exec errors come back over a close-on-exec pipe
 *   wait for events:
 *     all workers exit 0         -> exit barrier, SUCCEEDED
 *     a worker fails             -> stop the others (SIGTERM to each process
 *       group, then SIGCONT; stop_grace_ms, SIGKILL), record the
 *       failures; restart (after the back-off) while max_restarts allows,
 *       else FAILED
 *     other nodes wait (rdzv)    -> stop, next round (not counted)
 *     a handled signal           -> forward it to every worker group, stop,
 *       SIGNALED
 * Workers get torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, ...,
 * TORCHELASTIC_RESTART_COUNT = the global round) and, under
 * <log_dir>/<run_id>_<rand>/attempt_<round>/<local_rank>/, their
 * error.json and redirected stdout.log / stderr.log.
 *
 * The library never prints: notable events go to cfg.on_event as one-line
 * messages, teed worker output goes to cfg.out_fd / cfg.err_fd.
 */
#ifndef ELRUN_AGENT_H
#define ELRUN_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct el_rdzv;
struct el_events;

/* elrun's exit status for EL_AGENT_PREEMPTED: EX_TEMPFAIL (sysexits.h),
 * "try again later"; not 0 (a scheduler must not count it a success) and
 * not torchrun's 1 (it is no failure of the job). */
#define EL_EXIT_PREEMPTED 75

enum el_agent_event_level {
    EL_AGENT_ERROR,
    EL_AGENT_WARN,
    EL_AGENT_INFO,
    EL_AGENT_DEBUG
};

struct el_agent_config {
    /* Worker command: argv[0] is run with execvp; "${local_rank}" and
     * "$local_rank" in any argument become the local rank. */
    char *const *argv;
    int nproc;           /* workers on this node (LOCAL_WORLD_SIZE) */
    const char *role;    /* ROLE_NAME ["default"]                   */
    const char *run_id;  /* TORCHELASTIC_RUN_ID ["none"]            */
    int max_restarts;    /* failures this node may recover from     */
    const char *log_dir; /* base dir; NULL = a new /tmp/torchelastic_*,
                                   removed again after a success           */
    /* Per local rank (arrays of nproc), bits 1 = stdout, 2 = stderr:
     * redirect = to <attempt>/<rank>/std{out,err}.log; tee = also to the
     * console, each line prefixed.  NULL = none. */
    const unsigned char *redirect, *tee;
    /* Per local rank: 1 = the rank's output may reach the console.  A rank
     * filtered out writes to its log file if redirected, else /dev/null.
     * NULL = every rank. */
    const unsigned char *console;
    /* Line prefix template for teed lines: ${role_name}, ${rank},
     * ${local_rank} [NULL: "[${role_name}${local_rank}]:"]. */
    const char *prefix_template;
    int stop_grace_ms; /* SIGTERM -> SIGKILL [30000]              */
    /* Back-off between restarts after failures in a row: none before the
     * first restart, then restart_backoff_ms, doubling up to
     * restart_backoff_max_ms.  A round that ran at least the cap starts a
     * new streak.  A handled signal ends the wait at once. */
    int restart_backoff_ms;     /* [0 = restart at once]                   */
    int restart_backoff_max_ms; /* [30000 when <= 0]                       */
    int exit_barrier_ms;        /* [300000]                                */
    const int *signals;         /* signals forwarded then fatal            */
    int nsignals;               /* [TERM, INT, HUP, QUIT when 0]           */
    int out_fd, err_fd;         /* console streams [1, 2]                  */
    /* While el_rdzv_next blocks, the agent says so: at once (INFO), after
     * 1 s if still waiting and then every rdzv_report_ms (WARN): the
     * endpoint, the nodes needed and the time left of the join timeout.
     * NULL endpoint: nothing is said (a single node does not wait). */
    const char *rdzv_endpoint;
    int rdzv_min_nodes, rdzv_max_nodes;
    int rdzv_join_timeout_ms; /* [600000 when <= 0]                      */
    int rdzv_report_ms;       /* [30000 when <= 0]                       */
    /* Called on the agent's thread, and while a rendezvous is being
     * joined also on a helper thread (the join lines): keep it
     * thread-safe, e.g. one write() per message. */
    void (*on_event)(void *arg, enum el_agent_event_level lvl, const char *msg);
    void *event_arg;
    /* Where the agent records its metrics (docs/METRICS.md) and reads its
     * workers' progress (ELRUN_PROGRESS_FD); NULL: neither.  Must outlive
     * the agent. */
    struct el_metrics *metrics;
    /* Where the agent emits its events (docs/EVENTS.md): rounds, failures,
     * restarts, recoveries, the end; NULL: none.  Must outlive the agent. */
    struct el_events *events;
    /* --event-log-handler console: torchrun's own status event JSON
     * (torchelastic.worker.status.SUCCEEDED|FAILED) on err_fd at the end. */
    int torch_events_console;
    /* The live dashboard's record (include/elrun/dashboard.h), fed by the
     * same hooks; used only with metrics (NULL: off).  Must outlive the
     * agent. */
    struct el_dash *dashboard;
    /* Goodput (src/agent/watch.c, docs/AGENT.md "Preemption notices" and
     * "Hung workers").  A preemption notice is the file preempt_notice_file
     * appearing, or the command preempt_notice_cmd (run with /bin/sh -c
     * every second, one at a time) exiting 0.  On a notice every worker
     * that catches preempt_signal gets it, and preempt_notice_ms later (or
     * the number of seconds written in the file) the agent leaves the job
     * as for a SIGTERM; the outcome is EL_AGENT_PREEMPTED.  NULL: none. */
    const char *preempt_notice_file;
    const char *preempt_notice_cmd;
    int preempt_notice_ms; /* notice -> departure [30000 when <= 0]   */
    int preempt_signal;    /* sent to the workers [SIGUSR1 when 0]    */
    /* A worker that wrote its heartbeat file (ELRUN_HEARTBEAT_FILE,
     * el_worker_heartbeat()) and then did not for this long is killed and
     * counted as failed (hung).  0 = off. */
    int worker_stall_ms;
};

enum el_agent_outcome {
    EL_AGENT_SUCCEEDED,  /* every worker of the last round exited 0 */
    EL_AGENT_FAILED,     /* workers failed, no restart left         */
    EL_AGENT_SIGNALED,   /* the agent got a handled signal          */
    EL_AGENT_RDZV_ERROR, /* the rendezvous failed (message in errmsg) */
    EL_AGENT_EXEC_ERROR, /* a worker's program could not be run     */
    EL_AGENT_PREEMPTED   /* left at a preemption notice's deadline  */
};

/* One failed worker, as torch's ProcessFailure. */
struct el_agent_failure {
    int local_rank, global_rank;
    pid_t pid;
    int exitcode;      /* exit status, or -signal                 */
    char *error_file;  /* path, or NULL when the worker wrote none */
    char *error_json;  /* the file's contents (NULL if none)      */
    char *message;     /* the traceback / message to print        */
    int64_t timestamp; /* seconds since the epoch                 */
    int64_t ran_ms;    /* how long the worker ran before it failed */
    /* The line "ModuleNotFoundError: ..." / "ImportError: ..." found in its
     * error file or its stderr.log (when redirected), else NULL. */
    char *import_error;
};

struct el_agent_result {
    enum el_agent_outcome outcome;
    int signal;     /* SIGNALED: which                         */
    int64_t rounds; /* rounds run                              */
    int restarts;   /* restarts used (failures recovered)      */
    /* FAILED: the last round's failures in local-rank order, and which one
     * is the root cause (smallest timestamp, first on ties). */
    struct el_agent_failure *failures;
    int nfailures, root;
    char errmsg[1400]; /* RDZV_ERROR / EXEC_ERROR                 */
};

struct el_agent;

/* Create an agent.  Blocks the handled signals and SIGCHLD in the calling
 * thread and opens a signalfd for them, so call it before any thread is
 * started (before el_rdzv_open, whose store runs on a thread).  cfg and
 * the strings it points to must outlive the agent.  Returns 0 or -errno. */
int el_agent_open(struct el_agent **out, const struct el_agent_config *cfg);

/* Run rounds until the job ends; fills *res (free it with
 * el_agent_result_free).  Returns 0 when it ran to an outcome (check
 * res->outcome), or -errno on an internal error.  Every worker process
 * group is gone when it returns. */
int el_agent_run(struct el_agent *a, struct el_rdzv *r,
                 struct el_agent_result *res);

/* The base directory of this run's logs: <log_dir>/<run_id>_<rand>. */
const char *el_agent_run_dir(const struct el_agent *a);

/* Restore the signal mask and free; handled signals still pending are
 * discarded (the run is over).  NULL is a no-op. */
void el_agent_close(struct el_agent *a);

void el_agent_result_free(struct el_agent_result *res);

/* torchrun's failure report (ChildFailedError's message): the "====" box
 * with "<title> FAILED", the other failures and the root cause, as
 * torch.distributed.elastic prints it.  host as socket.getfqdn().  Returns
 * a malloc'd string (caller frees) or NULL on ENOMEM. */
char *el_agent_format_failures(const struct el_agent_result *res,
                               const char *title, const char *host);

/* Write the agent's own error file (TORCHELASTIC_ERROR_FILE of the agent):
 * the root cause's error file with "errorCode" set to its exit code, or a
 * message of elrun's own when the worker left none.  Returns 0 or -errno. */
int el_agent_write_error_file(const struct el_agent_result *res,
                              const char *path);

/* The fully qualified host name, as Python's socket.getfqdn(). */
void el_agent_fqdn(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
