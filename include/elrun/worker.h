/* worker.h -- the worker context: who this process is in the job, and the
 * job's store.  The first thing a training program linked with libelrun
 * does.
 *
 * elrun's agent (like torchrun) starts each worker with its place in the
 * environment: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
 * GROUP_WORLD_SIZE, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS,
 * TORCHELASTIC_RUN_ID, MASTER_ADDR, MASTER_PORT and
 * TORCHELASTIC_USE_AGENT_STORE.  RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR
 * and MASTER_PORT are required; the others default to a single node (0, 1,
 * 0, 0, "none", False).
 *
 * The store, as torch's env:// initialisation finds it: with
 * TORCHELASTIC_USE_AGENT_STORE=True every rank is a client of the agent's
 * store at MASTER_ADDR:MASTER_PORT; otherwise rank 0 serves a store on
 * MASTER_PORT for the job (as under torchrun 1.13 --standalone) and every
 * rank, rank 0 included, connects to it.  Keys of the current round live
 * under el_worker_prefix(), "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>",
 * so a restarted round never sees the previous round's keys; collectives
 * take this context's store, prefix, rank and world.
 *
 * Outside elrun (no RANK in the environment) opening fails with
 * EL_ENOTELASTIC and a message naming the missing variable, unless the
 * caller asks for the single-process fallback (EL_WORKER_STANDALONE, or
 * ELRUN_STANDALONE=1 in the environment): then the context is rank 0 of a
 * world of 1 with a private in-process store, so the same program runs
 * alone unchanged.
 *
 * Calls block (store I/O) and a context is used by one thread at a time.
 */
#ifndef ELRUN_WORKER_H
#define ELRUN_WORKER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct el_store;
struct el_worker;

/* Where this process stands in the job. */
struct el_worker_info {
    int rank;              /* RANK: 0 .. world_size-1                     */
    int local_rank;        /* LOCAL_RANK: rank on this node               */
    int world_size;        /* WORLD_SIZE: ranks in this round             */
    int local_world_size;  /* LOCAL_WORLD_SIZE: ranks on this node        */
    int group_rank;        /* GROUP_RANK: this node's rank                */
    int group_world_size;  /* GROUP_WORLD_SIZE: nodes in this round       */
    int restart_count;     /* TORCHELASTIC_RESTART_COUNT: 0 on the first  */
    int max_restarts;      /* TORCHELASTIC_MAX_RESTARTS                   */
    int use_agent_store;   /* TORCHELASTIC_USE_AGENT_STORE == "True"      */
    int standalone;        /* 1: no elrun environment; a world of 1       */
    int master_port;       /* MASTER_PORT (0 when standalone)             */
    char master_addr[256]; /* MASTER_ADDR ("" when standalone)            */
    char run_id[128];      /* TORCHELASTIC_RUN_ID                         */
};

/* Flags for el_worker_opts.flags and el_worker_parse_env(). */
#define EL_WORKER_STANDALONE \
    0x1u /* no elrun environment: fall back to a
                                     world of 1 instead of failing        */
#define EL_WORKER_NO_STORE \
    0x2u /* do not connect to (or serve) a store;
                                     el_worker_store() returns NULL and
                                     el_worker_barrier() fails            */

/* A zero field takes the default in brackets. */
struct el_worker_opts {
    unsigned flags;         /* EL_WORKER_*                                 */
    int connect_timeout_ms; /* wait this long for the store [60000]       */
    int io_timeout_ms;      /* bound on one store request [60000]         */
};

/* Read the worker environment into *info without touching the network.
 * Returns 0, or EL_ENOTELASTIC (a required variable is missing) or
 * EL_EUSAGE (a variable has a bad value), and then writes a message naming
 * the variable into err (errlen bytes, may be 0).  With
 * EL_WORKER_STANDALONE in flags or ELRUN_STANDALONE=1 in the environment,
 * a missing RANK gives a world of 1 instead of EL_ENOTELASTIC (a partial
 * elrun environment is still an error). */
int el_worker_parse_env(struct el_worker_info *info, unsigned flags, char *err,
                        size_t errlen);

/* Parse the environment, then serve and/or connect to the store (see the
 * top of this file).  opts may be NULL.  Blocks up to connect_timeout_ms.
 * Returns 0 and sets *out, or EL_ENOTELASTIC / EL_EUSAGE (as above),
 * -ETIMEDOUT / -ECONNREFUSED / -errno (store), -ENOMEM, with a message in
 * err. */
int el_worker_open(struct el_worker **out, const struct el_worker_opts *opts,
                   char *err, size_t errlen);

/* Close the store connection (and stop the store this rank serves, if it
 * serves one: other ranks lose it, so rank 0 should close last, e.g. after
 * a final el_worker_barrier()).  NULL is a no-op. */
void el_worker_close(struct el_worker *w);

/* Borrowed views, valid until el_worker_close(). */
const struct el_worker_info *el_worker_info(const struct el_worker *w);
struct el_store *el_worker_store(struct el_worker *w);
/* The current round's key prefix, "/worker/attempt_<restart_count>" (no
 * trailing slash); keys are "<prefix>/<name>". */
const char *el_worker_prefix(const struct el_worker *w);

/* Why the last failed call on w failed (names the key or peer); never
 * NULL. */
const char *el_worker_errmsg(const struct el_worker *w);

/* "<prefix>/<name>" into buf.  Returns 0, or EL_ELIMIT if it does not fit
 * in len bytes. */
int el_worker_key(const struct el_worker *w, const char *name, char *buf,
                  size_t len);

/* Store-based barrier: returns once every rank of the round has called
 * el_worker_barrier() with this name as its n-th barrier (every rank must
 * make the same sequence of calls).  timeout_ms < 0 waits forever.
 * Returns 0, -ETIMEDOUT (a rank did not arrive; el_worker_errmsg() says how
 * many did), or a store error.  Slower than el_barrier() of the
 * collectives, but needs no communicator. */
int el_worker_barrier(struct el_worker *w, const char *name, int timeout_ms);

/* el_worker_barrier(arg, "ckpt", 600000) with the signature of
 * el_ckpt_opts.barrier: pass the context as barrier_arg. */
int el_worker_barrier_cb(void *arg);

/* Record why this worker is about to fail, for the agent's failure report:
 * writes $TORCHELASTIC_ERROR_FILE in the format of torch's @record
 * ({"message": {"message": ..., "extraInfo": {"py_callstack": ...,
 * "timestamp": ...}}}), replacing it atomically.  Needs no context (call it
 * even when el_worker_open() failed).  Returns 0, -ENOENT when the variable
 * is unset or empty (not under an agent), or -errno. */
int el_worker_record_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* Report training progress to the agent (its /metrics shows step, samples,
 * step rate and the time since the last report, per rank): writes
 * "step <step> samples <samples>\n" to $ELRUN_PROGRESS_FD, which the agent
 * sets when it serves metrics (--metrics-addr).  samples < 0: not known.
 * Never blocks and needs no context.  Returns 0; -ENOENT when the variable
 * is unset (not under an agent with metrics: nothing to do); -EAGAIN when
 * the agent is behind and this report was dropped; or -errno. */
int el_worker_progress(int64_t step, int64_t samples);

/* The same with the training loss ("step N samples M loss F\n": the
 * dashboard shows it, docs/DASHBOARD.md).  loss NaN or infinite: left out. */
int el_worker_progress_loss(int64_t step, int64_t samples, double loss);

/* Heartbeat (src/worker/health.c): tell the agent this worker still makes
 * progress, once a step: rewrites $ELRUN_HEARTBEAT_FILE with step.  With
 * --worker-stall-timeout S the agent kills a worker that beat once and then
 * not for S seconds, reports it hung (rank, host, last step) and restarts
 * the group as for a crash.  One pwrite; call it from one thread.  Returns
 * 0, -ENOENT when the agent does not watch (variable unset or empty), or
 * -errno.  (el_worker_progress() is the metrics' report; a step written here is a beat.) */
int el_worker_heartbeat(int64_t step);

/* Preemption notice: install a handler for the signal the agent sends on a
 * notice ($ELRUN_PREEMPT_SIGNAL, --preempt-signal, SIGUSR1 by default).
 * Returns the signal, 0 when the agent has no notice hook (nothing
 * installed), or -errno.  The agent only signals workers that catch it. */
int el_worker_watch_preemption(void);

/* 1 once the notice signal came: this node leaves the job soon (the
 * agent's --preempt-notice-secs); checkpoint now and keep training. */
int el_worker_preempted(void);

#ifdef __cplusplus
}
#endif
#endif
