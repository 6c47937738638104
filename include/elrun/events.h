/* events.h -- the job-wide event history (docs/EVENTS.md).
 *
 * An event is one JSON object on one line:
 *   {"seq":7,"time":"2026-12-01T12:00:03.250Z","time_ms":1796126403250,
 *    "kind":"failure","node":"elh2","label":"elh2/3f2a","round":2,
 *    "fields":{...}}
 * seq is job-wide (1, 2, 3 ...; 0 when the event was not stored), time_ms
 * the emitting host's wall clock, node its name in the rendezvous, label
 * the emitting agent's member label (el_rdzv_label: two agents of one host
 * differ; absent before the agent's first round), round -1 when there is
 * none, and fields an object whose keys depend on the kind (docs/EVENTS.md
 * lists them).
 *
 * Three parts:
 *  - the record (pure functions): el_event_encode/decode/human;
 *  - the log (struct el_events_log): the history kept where every agent can
 *    read it, in the rendezvous' store (c10d) or in etcd, under the job's
 *    prefix: "ev/n" a counter (the last seq) and "ev/<slot>" one event, slot
 *    = (seq - 1) % EL_EVENTS_KEEP, so the newest EL_EVENTS_KEEP events are
 *    kept and an older one is overwritten by the event 10,000 later.
 *    Blocking calls, one thread at a time, for readers (elrun events,
 *    elrun status) and for the emitter's thread;
 *  - the emitter (struct el_events): el_events_emit never blocks and never
 *    fails its caller: it queues the event (a full queue drops it, counted)
 *    and a thread of its own stores it, appends it to a JSON-lines file and
 *    calls the listeners.  A store that is slow or gone drops events, each
 *    drop counted, with one note per outage through on_note.
 * Libraries never print: notes go to the caller's callback.
 */
#ifndef ELRUN_EVENTS_H
#define ELRUN_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct el_rdzv_config;

/* Events the history keeps (the newest; one store key or etcd key each). */
#define EL_EVENTS_KEEP 10000
/* Events the emitter holds while its thread stores them; more are dropped. */
#define EL_EVENTS_QUEUE 1024

struct el_event {
    int64_t seq;     /* job-wide, from 1; 0 = not stored               */
    int64_t time_ms; /* wall clock, ms since the epoch                 */
    char kind[32];   /* "round", "failure", "restart", ...             */
    char node[256];  /* the emitting agent's host name                 */
    char label[272]; /* its member label ("node/3f2a"), "": not known  */
    int64_t round;   /* -1: none                                       */
    char *fields;    /* a JSON object's text (malloc'd), never NULL after
                        decode                                         */
};

/* The one-line JSON text of ev (malloc'd, no newline), or NULL when out of
 * memory or ev->fields is not a JSON object. */
char *el_event_encode(const struct el_event *ev);

/* Parse one record; ev->fields is malloc'd (el_event_clear frees it).
 * Returns 0, or EL_EFORMAT with what was wrong in err. */
int el_event_decode(const char *text, size_t len, struct el_event *ev,
                    char *err, size_t errlen);
void el_event_clear(struct el_event *ev);

/* One human line, no newline:
 *   "12:00:03.250  #7  round 2  elh2/3f2a  failure: rank 3 (local 1)
 *    exited 1: ValueError: boom" -- time in UTC; the node by its label (its
 *    name when the event has none), and so the members a round event names.
 *    Truncated to cap. */
void el_event_human(const struct el_event *ev, char *buf, size_t cap);

/* The slot of seq in the history (seq >= 1). */
int64_t el_events_slot(int64_t seq);

/* ---- the log ---- */

struct el_events_log;

/* Where the history of a job is: cfg->backend "c10d" (cfg->host, port,
 * secret: the rendezvous store) or "etcd"/"etcd-v2" (cfg->endpoints, or
 * host:port, and cfg->etcd), cfg->run_id, cfg->io_timeout_ms (one request
 * [5 s]).  Other backends: EL_EUSAGE.  Nothing is connected yet (the first
 * call does); strings are copied.  Returns 0 or an error with a message in
 * err. */
int el_events_log_open(struct el_events_log **out,
                       const struct el_rdzv_config *cfg, char *err,
                       size_t errlen);
void el_events_log_close(struct el_events_log *lg);
const char *el_events_log_errmsg(const struct el_events_log *lg);

/* Store ev: take the next seq (set in ev->seq) and write its slot.  One or
 * two requests; 0 or an error (the message says which endpoint). */
int el_events_log_append(struct el_events_log *lg, struct el_event *ev);

/* The last seq stored (0: none yet). */
int el_events_log_last(struct el_events_log *lg, int64_t *last);

/* The events after seq 'after', oldest first, at most 'max' (the newest
 * ones when there are more; max <= 0: all that are kept), in *evs (free with
 * el_events_free) and *n; *last gets the last seq read, which the next call
 * passes as 'after'.  A slot not yet written (its writer between its two
 * requests) ends the read there, unless a later event is already in. */
int el_events_log_read(struct el_events_log *lg, int64_t after, int max,
                       struct el_event **evs, int *n, int64_t *last);

/* Block until an event after seq 'last' exists, at most timeout_ms:
 * 0 (something new, or look again), -ETIMEDOUT, -ECANCELED (cancel_fd, see
 * el_events_log_set_cancel_fd), or an error. */
int el_events_log_wait(struct el_events_log *lg, int64_t last, int timeout_ms);

/* A waiting call returns -ECANCELED when fd becomes readable (-1: none). */
void el_events_log_set_cancel_fd(struct el_events_log *lg, int fd);

/* A node's progress record (docs/EVENTS.md, "progress"), one key per
 * agent's life under the job's prefix, "ev/p/<member id>" (the id of
 * el_rdzv_member_info): text a JSON object, or NULL to delete it.  One
 * request; 0 or an error. */
int el_events_log_put_progress(struct el_events_log *lg, const char *id,
                               const char *text);
/* Read the records of ids[0..n-1]: 0 and texts[i] (malloc'd, NUL-
 * terminated; NULL when that id has none), or an error (nothing
 * allocated).  etcd: one request; the store: one per id. */
int el_events_log_get_progress(struct el_events_log *lg, const char *const *ids,
                               int n, char **texts);

void el_events_free(struct el_event *evs, int n);

/* ---- the emitter ---- */

struct el_events;

/* A listener gets every event after it was stored (ev->seq set, or 0 when
 * it could not be) and json, its encoded line.  Called on the emitter's
 * thread: keep it short and thread-safe. */
typedef void (*el_events_listener)(void *arg, const struct el_event *ev,
                                   const char *json);

struct el_events_config {
    /* The job's history (see el_events_log_open), or NULL: not stored. */
    const struct el_rdzv_config *rdzv;
    const char *node;       /* this host's name (el_agent_fqdn)          */
    const char *jsonl_path; /* append every event here, or NULL          */
    /* Notes worth one log line (a store lost, drops), on the emitter's
     * thread.  May be NULL. */
    void (*on_note)(void *arg, const char *msg);
    void *note_arg;
};

/* Start the emitter's thread.  Strings are copied.  0 or an error with a
 * message in err (the JSON-lines file cannot be opened ...). */
int el_events_open(struct el_events **out, const struct el_events_config *cfg,
                   char *err, size_t errlen);

/* Queue one event of this node: kind, round (-1: none), fields (a JSON
 * object's text; NULL = {}).  Never blocks on I/O, never fails the caller:
 * returns 0, or 1 when the event was dropped (queue full, out of memory). */
int el_events_emit(struct el_events *em, const char *kind, int64_t round,
                   const char *fields);

/* This agent's member label (el_rdzv_label of its id), stamped on the
 * events emitted from now on; it changes when the agent rejoins under a
 * new id.  NULL or "" clears it.  Any thread. */
void el_events_set_label(struct el_events *em, const char *label);

/* Add / remove a listener (any thread).  0, or -ENOMEM. */
int el_events_listen(struct el_events *em, el_events_listener fn, void *arg);
void el_events_unlisten(struct el_events *em, el_events_listener fn, void *arg);

/* Publish this node's progress record under id (see
 * el_events_log_put_progress; text NULL deletes it).  Never blocks: it
 * replaces the record the thread has not written yet, and the thread
 * writes the newest one after the queued events (not during an outage of
 * the store).  0, or 1 when it could not be kept (out of memory, no
 * history). */
int el_events_progress(struct el_events *em, const char *id, const char *text);

/* Events emitted, stored, and dropped (queue full or the store failing). */
void el_events_counts(struct el_events *em, int64_t *emitted, int64_t *stored,
                      int64_t *dropped);

/* Block until every event queued so far is stored (or given up: an outage
 * drops it), at most wait_ms: for a caller whose next step others will see
 * (the agent, before it joins the round its failure opened, so that the
 * failure comes first in the history).  NULL is a no-op.  Any thread but
 * a listener's. */
void el_events_flush(struct el_events *em, int wait_ms);

/* Store what is queued (at most wait_ms more), stop the thread, free.  NULL
 * is a no-op. */
void el_events_close(struct el_events *em, int wait_ms);

#ifdef __cplusplus
}
#endif
#endif
