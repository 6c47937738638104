/* agent_impl.h -- what the agent's files share (private to src/agent): the
 * agent and worker records, the epoll tags, and the entry points of
 * spawn.c (directories, environment, fork/exec), pump.c (teed output) and
 * report.c (failure records, small file utilities).
 *
 * Everything runs on the agent's one thread; nothing here locks.
 */
#ifndef ELRUN_AGENT_IMPL_H
#define ELRUN_AGENT_IMPL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "elrun/agent.h"

struct el_rdzv_info;

#define EL__MAX_WORKERS_STACK 256

/* epoll tags (data.u64) of the agent's event sources. */
#define EL__TAG_SIG 1
#define EL__TAG_RDZV 2
#define EL__TAG_TIMER 3
#define EL__TAG_STREAM 4 /* + 2 * worker index + stream (0 out, 1 err) */
#define EL__TAG_PROGRESS (1ULL << 40)     /* + worker index (observe.c)       */
#define EL__TAG_WATCH (UINT64_C(1) << 62) /* watch.c's tick timer */
#define EL__TAG_FTIMER (UINT64_C(1) << 61) /* filetimer.c: FIFO, +1 clock */

#define EL__LINE_MAX 65536 /* a teed line longer than this is cut */

struct el__stream {
    int fd;      /* read end of the pipe, -1 when closed */
    int file;    /* log file, -1 if none */
    int console; /* console fd to prefix lines onto, -1 if none */
    char *buf;   /* EL__LINE_MAX bytes while fd is open */
    size_t len;
};

struct el__worker {
    int local_rank, global_rank;
    pid_t pid;
    int alive;
    int status; /* waitpid status once reaped */
    int failed; /* exited non-zero while the group was healthy */
    int64_t fail_time;
    int64_t fail_ns; /* el_now_ns() when the failure was seen */
    int exec_errno;
    char prefix[128];
    char dir[4096];
    struct el__stream st[2];
};

/* The worker group's state, after torch's WorkerState, plus the states
 * elrun's agent passes through between rounds.  agent.c changes it in one
 * function (set_state). */
enum el__group_state {
    EL__GS_INIT,       /* no round yet                                  */
    EL__GS_RENDEZVOUS, /* waiting in el_rdzv_next for the next round     */
    EL__GS_HEALTHY,    /* workers running, none failed                  */
    EL__GS_UNHEALTHY,  /* a worker failed: the group is to be stopped    */
    EL__GS_STOPPING,   /* signals sent, waiting for every worker to go   */
    EL__GS_BACKOFF,    /* stopped after a failure, waiting to restart    */
    EL__GS_STOPPED,    /* ended by a signal or a rendezvous/exec error   */
    EL__GS_SUCCEEDED,  /* every worker of the last round exited 0        */
    EL__GS_FAILED,     /* failed with no restart left                    */
    EL__GS_UNKNOWN
};

/* Why the group is being stopped: what comes after the stop. */
enum el__stop_cause {
    EL__STOP_FAILURE,    /* a worker failed: restart or FAILED            */
    EL__STOP_MEMBERSHIP, /* other nodes wait: next round, not counted     */
    EL__STOP_SIGNAL,     /* the agent got a handled signal: SIGNALED      */
    EL__STOP_LOST,       /* the rendezvous is gone: RDZV_ERROR            */
    EL__STOP_EXEC,       /* a program could not be run: EXEC_ERROR        */
    EL__STOP_SUCCESS     /* every worker exited 0: exit barrier           */
};

struct el_rdzv;
struct el__agent_obs;
struct el__agent_ev;

struct el_agent {
    struct el_agent_config cfg;
    sigset_t oldmask, mask;
    int handled[64];
    int nhandled;
    int sigfd, epfd, tfd;
    char run_dir[4096];
    int auto_dir;
    pid_t self;
    struct el__worker *w;
    int nalive;
    /* el_agent_run's state; changed only by agent.c's set_state. */
    enum el__group_state state;
    enum el__stop_cause cause; /* STOPPING: why                           */
    int stop_sig;       /* STOPPING: the signal the stop began with        */
    int killed;         /* STOPPING: SIGKILL sent                          */
    int pending_signal; /* the first handled signal the agent got          */
    int restarts_left;  /* the agent's own budget (backends without one)   */
    int streak;         /* restarts since the group last ran well          */
    int64_t healthy_ns; /* when the round's workers started (el_now_ns)    */
    int64_t ran_ms;     /* how long the failed round ran                   */
    int rdzv_fd;        /* the rendezvous notify fd in the set, or -1      */
    struct el_rdzv *r;
    struct el_agent_result *res;
    char *outbuf; /* pump.c's prefixed-lines buffer */
    size_t outcap;
    struct el__agent_obs *obs; /* observe.c's metrics; NULL when off      */
    struct el__agent_ev *ev;   /* events.c's state; NULL without events   */
    int64_t woke_ns; /* when epoll_wait last returned (el_now_ns)      */
    struct el__watch *watch;   /* watch.c's state, NULL when nothing to watch */
    struct el__ftimer *ftimer; /* filetimer.c's server, NULL when off */
};

/* spawn.c.  Create <log_dir>/<run_id>_<rand> (a new /tmp/torchelastic_*
 * when cfg.log_dir is NULL).  Returns 0 or -errno. */
int el__agent_make_run_dir(struct el_agent *a);

/* spawn.c.  Start the round's cfg.nproc workers into a->w (alive, in
 * a->nalive).  Returns 0; 1 when a worker's program could not be executed
 * (res->errmsg says which; the others run and must be stopped); or -errno
 * when starting failed (every worker started is already killed and reaped,
 * res->errmsg says why). */
int el__agent_start_workers(struct el_agent *a, const struct el_rdzv_info *info,
                            struct el_agent_result *res);

/* agent.c.  The wait before restart number streak of a streak of failures
 * (1 = the first): none for the first, then base_ms, doubling, at most
 * max_ms. */
int el__agent_backoff_ms(int streak, int base_ms, int max_ms);

/* pump.c.  Read what teed stream s of w has (non-blocking); at EOF flush a
 * last partial line and close the pipe. */
void el__agent_pump(struct el_agent *a, struct el__worker *w, int s);

/* pump.c.  Take what every open tee pipe still holds. */
void el__agent_drain_all(struct el_agent *a);

/* pump.c.  Flush and close w's pipes and log files, free the buffers. */
void el__agent_close_streams(struct el_agent *a, struct el__worker *w);

/* report.c.  Fill f->error_file / error_json / message / timestamp from the
 * worker's error file at path (torch's ProcessFailure rules); without a
 * file, the message says which signal killed the worker or how to get a
 * traceback.  f->exitcode, pid and timestamp (= detection time) must be
 * set. */
void el__agent_read_error_file(struct el_agent_failure *f, const char *path);

/* report.c.  Set f->import_error from f's error file, or else from the
 * last part of dir/stderr.log, when either names an import error. */
void el__agent_find_import_error(struct el_agent_failure *f, const char *dir);

/* report.c.  Free res->failures and their strings. */
void el__agent_free_failures(struct el_agent_result *res);

/* observe.c: metrics hooks, each a no-op when cfg.metrics is NULL.  from,
 * to: enum el__group_state.  cause: "worker_failure" or "membership". */
int el__obs_open(struct el_agent *a);
void el__obs_close(struct el_agent *a);
void el__obs_state(struct el_agent *a, int from, int to);
void el__obs_round(struct el_agent *a, const struct el_rdzv_info *info);
void el__obs_workers(struct el_agent *a);
void el__obs_exit(struct el_agent *a, const struct el__worker *w);
void el__obs_failure(struct el_agent *a, const char *cause);
void el__obs_restarts(struct el_agent *a);
/* The failed round's failures were collected into res (error files read). */
void el__obs_failures(struct el_agent *a, const struct el_agent_result *res);

/* events.c: the agent's events (cfg.events, cfg.torch_events_console),
 * fed by the el__obs_* hooks above (observe.c calls them whether metrics
 * are on or not); each is a no-op without events. */
int el__ev_open(struct el_agent *a);
void el__ev_close(struct el_agent *a);
void el__ev_state(struct el_agent *a, int from, int to);
void el__ev_round(struct el_agent *a, const struct el_rdzv_info *info);
void el__ev_failure(struct el_agent *a, const char *cause);
void el__ev_failures(struct el_agent *a, const struct el_agent_result *res);
void el__ev_restarts(struct el_agent *a);
/* A progress line came: the node's slowest rank's step and step rate (-1:
 * not measured yet) over nranks reporting ranks; published into the job's
 * state at most every few seconds, when the step changed. */
void el__ev_progress(struct el_agent *a, int64_t step, double rate, int nranks);
/* Worker i's progress pipe for the next fork: the write end's fd (to pass
 * as ELRUN_PROGRESS_FD, close-on-exec: clear it in the child), or -1 when
 * off.  el__obs_progress_forked closes the agent's copy after the fork;
 * el__obs_progress reads what came (EL__TAG_PROGRESS + i). */
int el__obs_progress_pipe(struct el_agent *a, int i);
void el__obs_progress_forked(struct el_agent *a, int i);
void el__obs_progress(struct el_agent *a, int i);
/* agent.c.  One line to cfg.on_event (nothing without one). */
void el__agent_event(struct el_agent *a, enum el_agent_event_level lvl,
                     const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* watch.c: preemption notices and hung workers (see agent.h's
 * preempt_notice_* and worker_stall_ms).  el__watch_open adds a tick timer
 * to a->epfd when anything is to be watched; 0 or -errno.  el__watch_close
 * kills and reaps a notice command still running.  el__watch_round: the
 * round's workers were just started.  el__watch_tick: the timer fired;
 * returns a signal the agent must act on as if it had received it (the
 * notice's deadline: SIGTERM), or 0.  el__watch_reaped: 1 when pid was the
 * notice command's (reaped here), else 0.  el__watch_preempted: 1 once a
 * notice came.  el__watch_env: the values of ELRUN_HEARTBEAT_FILE and
 * ELRUN_PREEMPT_SIGNAL for worker w ("" when off). */
struct el__watch;
int el__watch_open(struct el_agent *a);
void el__watch_close(struct el_agent *a);
void el__watch_round(struct el_agent *a);
int el__watch_tick(struct el_agent *a);
int el__watch_reaped(struct el_agent *a, pid_t pid, int status);
int el__watch_preempted(const struct el_agent *a);
void el__watch_env(const struct el_agent *a, const struct el__worker *w,
                   char *hb, size_t hbcap, char *sig, size_t sigcap);

/* watch.c.  Report worker wk hung (one ERROR line naming rank, host and
 * why), mark it failed, and send sig to target (-pid: its process group),
 * followed by SIGCONT unless sig is SIGKILL.  The group's stop and restart
 * follow as for a crash (check_group). */
void el__watch_hung(struct el_agent *a, struct el__worker *wk, pid_t target,
                    int sig, const char *why);

/* filetimer.c: torch's FileTimerServer (TORCHELASTIC_ENABLE_FILE_TIMER=1).
 * el__ftimer_open (once the run directory exists): make the FIFO and add
 * it and its clock to a->epfd; 0 when off or done, else -errno with a
 * one-line message in err.  el__ftimer_close removes the FIFO.
 * el__ftimer_round drops every timer (a new round's workers start).
 * el__ftimer_event handles EL__TAG_FTIMER (+1): reads requests, reaps
 * expired timers through el__watch_hung.  el__ftimer_path: the value of
 * the workers' TORCHELASTIC_TIMER_FILE ("" for none). */
struct el__ftimer;
int el__ftimer_enabled(void);
int el__ftimer_open(struct el_agent *a, char *err, size_t errlen);
void el__ftimer_close(struct el_agent *a);
void el__ftimer_round(struct el_agent *a);
void el__ftimer_event(struct el_agent *a, uint64_t tag);
const char *el__ftimer_path(const struct el_agent *a);

/* filetimer.c.  One request line (not NUL-terminated, len bytes): 0 and
 * *r filled, or EL_EFORMAT with what is wrong in err.  Never crashes on any
 * bytes (tests/fuzz/fuzz_ftimer.c). */
struct el__ftimer_req {
    pid_t pid;
    double expires; /* time.time() seconds; < 0: a release */
    int sig;        /* <= 0: do not kill */
    char scope[4096];
};
int el__ftimer_parse(const char *line, size_t len, struct el__ftimer_req *r,
                     char *err, size_t errlen);

int el__rm_rf(const char *path);
int el__mkdir_p(const char *path);

#endif
