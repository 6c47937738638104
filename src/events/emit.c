/* emit.c -- the emitter (include/elrun/events.h): el_events_emit queues an
 * event and returns; one thread of the emitter's own stores it in the
 * job's history (log.c), appends it to the JSON-lines file and calls the
 * listeners, in emission order.
 *
 * Never blocking its caller is the contract: the queue is bounded
 * (EL_EVENTS_QUEUE; a full queue drops the event, counted), and a history
 * that fails (a store slow past its 2 s request timeout, or gone) makes
 * the thread drop the events of the next 5 s without trying, then try
 * again; one note when the outage starts and one when it ends, with the
 * count dropped.  The file and the listeners get every event that was
 * queued, stored or not.
 *
 * A node's progress record (el_events_progress) is one slot, not a queue:
 * a newer record replaces the one not yet written, and the thread writes
 * it when no event is queued, so it never delays an event.
 *
 * Threads: emit, progress and listen/unlisten from any thread (one mutex, held for
 * a copy); the I/O runs only on the emitter's thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/errfmt.h"
#include "elrun/err.h"
#include "elrun/events.h"
#include "elrun/net.h"
#include "elrun/rdzv.h"

#define OUTAGE_MS 5000
#define MAX_LISTENERS 16

struct listener {
    el_events_listener fn;
    void *arg;
};

struct el_events {
    struct el_events_log *log; /* NULL: not stored                    */
    char node[256];
    char label[272]; /* guarded by mu                                 */
    int fd;          /* the JSON-lines file, -1: none    */
    void (*on_note)(void *arg, const char *msg);
    void *note_arg;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv, idle;
    struct el_event q[EL_EVENTS_QUEUE]; /* guarded by mu                */
    int head, count;
    int busy; /* the thread holds an event       */
    int stop;
    struct listener ls[MAX_LISTENERS]; /* guarded by mu                */
    int nls;
    int64_t emitted, stored, dropped; /* guarded by mu                */
    /* the progress record not yet written (guarded by mu): p_pending set,
     * p_text NULL for a delete */
    int p_pending;
    char *p_id, *p_text;
    /* the thread's own */
    long long down_until; /* el_now_ms: skip the store till then  */
    int64_t dropped_in_outage;
};

static void note(struct el_events *em, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(struct el_events *em, const char *fmt, ...)
{
    if (!em->on_note)
        return;
    char msg[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    em->on_note(em->note_arg, msg);
}

static void drop(struct el_events *em)
{
    pthread_mutex_lock(&em->mu);
    em->dropped++;
    pthread_mutex_unlock(&em->mu);
    em->dropped_in_outage++;
}

/* The history failed: skip it for OUTAGE_MS, one note when it starts. */
static void outage(struct el_events *em, const char *what)
{
    if (!em->down_until)
        note(em,
             "events: cannot store %s (%s); dropping them for %d s at a "
             "time until it answers",
             what, el_events_log_errmsg(em->log), OUTAGE_MS / 1000);
    em->down_until = el_now_ms() + OUTAGE_MS;
}

static void store(struct el_events *em, struct el_event *ev)
{
    if (!em->log)
        return;
    long long now = el_now_ms();
    if (now < em->down_until) {
        drop(em);
        return;
    }
    int rc = el_events_log_append(em->log, ev);
    if (rc) {
        ev->seq = 0;
        outage(em, "the job's events");
        drop(em);
        return;
    }
    if (em->down_until) {
        note(em, "events: storing the job's events again (%lld dropped)",
             (long long)em->dropped_in_outage);
        em->down_until = 0;
        em->dropped_in_outage = 0;
    }
    pthread_mutex_lock(&em->mu);
    em->stored++;
    pthread_mutex_unlock(&em->mu);
}

static void deliver(struct el_events *em, struct el_event *ev)
{
    store(em, ev);
    char *json = el_event_encode(ev);
    if (!json)
        return;
    if (em->fd >= 0) {
        size_t n = strlen(json);
        json[n] = '\n'; /* one write: lines of several agents never mix */
        if (write(em->fd, json, n + 1) < 0) {
            /* a full disk loses the line; the history still has it */
        }
        json[n] = 0;
    }
    struct listener ls[MAX_LISTENERS];
    pthread_mutex_lock(&em->mu);
    int nls = em->nls;
    memcpy(ls, em->ls, sizeof ls);
    pthread_mutex_unlock(&em->mu);
    for (int i = 0; i < nls; i++)
        ls[i].fn(ls[i].arg, ev, json);
    free(json);
}

/* Write the progress record taken from the slot (frees id and text). */
static void put_progress(struct el_events *em, char *id, char *text)
{
    if (em->log && id && el_now_ms() >= em->down_until &&
        el_events_log_put_progress(em->log, id, text))
        outage(em, "the node's progress");
    free(id);
    free(text);
}

static void *thread_main(void *arg)
{
    struct el_events *em = arg;
    pthread_mutex_lock(&em->mu);
    for (;;) {
        while (!em->count && !em->p_pending && !em->stop)
            pthread_cond_wait(&em->cv, &em->mu);
        if (!em->count && em->p_pending) {
            char *id = em->p_id, *text = em->p_text;
            em->p_id = em->p_text = NULL;
            em->p_pending = 0;
            em->busy = 1;
            pthread_mutex_unlock(&em->mu);
            put_progress(em, id, text);
            pthread_mutex_lock(&em->mu);
            em->busy = 0;
            pthread_cond_broadcast(&em->idle);
            continue;
        }
        if (!em->count)
            break;
        struct el_event ev = em->q[em->head];
        em->head = (em->head + 1) % EL_EVENTS_QUEUE;
        em->count--;
        em->busy = 1;
        pthread_mutex_unlock(&em->mu);
        deliver(em, &ev);
        el_event_clear(&ev);
        pthread_mutex_lock(&em->mu);
        em->busy = 0;
        pthread_cond_broadcast(&em->idle);
    }
    pthread_mutex_unlock(&em->mu);
    return NULL;
}

int el_events_open(struct el_events **out, const struct el_events_config *cfg,
                   char *err, size_t errlen)
{
    struct el_events *em = calloc(1, sizeof *em);
    if (!em)
        return -ENOMEM;
    em->fd = -1;
    snprintf(em->node, sizeof em->node, "%s", cfg->node ? cfg->node : "");
    em->on_note = cfg->on_note;
    em->note_arg = cfg->note_arg;
    int rc = 0;
    if (cfg->rdzv) {
        struct el_rdzv_config rc_cfg = *cfg->rdzv;
        /* The agent's events must never wait long for the store. */
        rc_cfg.io_timeout_ms = 2000;
        rc = el_events_log_open(&em->log, &rc_cfg, err, errlen);
    }
    if (rc == 0 && cfg->jsonl_path) {
        em->fd = open(cfg->jsonl_path,
                      O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (em->fd < 0)
            rc = el__errf(err, errlen, -errno, "cannot open %s: %s",
                          cfg->jsonl_path, strerror(errno));
    }
    if (rc) {
        el_events_log_close(em->log);
        if (em->fd >= 0)
            close(em->fd);
        free(em);
        return rc;
    }
    pthread_mutex_init(&em->mu, NULL);
    pthread_cond_init(&em->cv, NULL);
    pthread_cond_init(&em->idle, NULL);
    /* The thread must not take the caller's signals (the agent reads them
     * from a signalfd). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = pthread_create(&em->th, NULL, thread_main, em);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        el_events_log_close(em->log);
        if (em->fd >= 0)
            close(em->fd);
        free(em);
        return el__errf(err, errlen, -rc, "cannot start the events thread: %s",
                        strerror(rc));
    }
    *out = em;
    return 0;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int el_events_emit(struct el_events *em, const char *kind, int64_t round,
                   const char *fields)
{
    if (!em)
        return 1;
    struct el_event ev = {.time_ms = wall_ms(),
                          .round = round < 0 ? -1 : round};
    snprintf(ev.kind, sizeof ev.kind, "%s", kind);
    snprintf(ev.node, sizeof ev.node, "%s", em->node);
    ev.fields = strdup(fields ? fields : "{}");
    pthread_mutex_lock(&em->mu);
    memcpy(ev.label, em->label, sizeof ev.label);
    em->emitted++;
    if (!ev.fields || em->count == EL_EVENTS_QUEUE || em->stop) {
        em->dropped++;
        pthread_mutex_unlock(&em->mu);
        free(ev.fields);
        return 1;
    }
    em->q[(em->head + em->count) % EL_EVENTS_QUEUE] = ev;
    em->count++;
    pthread_cond_signal(&em->cv);
    pthread_mutex_unlock(&em->mu);
    return 0;
}

void el_events_set_label(struct el_events *em, const char *label)
{
    if (!em)
        return;
    pthread_mutex_lock(&em->mu);
    snprintf(em->label, sizeof em->label, "%s", label ? label : "");
    pthread_mutex_unlock(&em->mu);
}

int el_events_progress(struct el_events *em, const char *id, const char *text)
{
    if (!em || !em->log || !id)
        return 1;
    char *i = strdup(id), *t = text ? strdup(text) : NULL;
    if (!i || (text && !t)) {
        free(i);
        free(t);
        return 1;
    }
    pthread_mutex_lock(&em->mu);
    if (em->stop) {
        pthread_mutex_unlock(&em->mu);
        free(i);
        free(t);
        return 1;
    }
    free(em->p_id);
    free(em->p_text);
    em->p_id = i;
    em->p_text = t;
    em->p_pending = 1;
    pthread_cond_signal(&em->cv);
    pthread_mutex_unlock(&em->mu);
    return 0;
}

int el_events_listen(struct el_events *em, el_events_listener fn, void *arg)
{
    pthread_mutex_lock(&em->mu);
    int rc = -ENOMEM;
    if (em->nls < MAX_LISTENERS) {
        em->ls[em->nls++] = (struct listener){fn, arg};
        rc = 0;
    }
    pthread_mutex_unlock(&em->mu);
    return rc;
}

void el_events_unlisten(struct el_events *em, el_events_listener fn, void *arg)
{
    pthread_mutex_lock(&em->mu);
    for (int i = 0; i < em->nls; i++)
        if (em->ls[i].fn == fn && em->ls[i].arg == arg) {
            memmove(&em->ls[i], &em->ls[i + 1],
                    (size_t)(em->nls - i - 1) * sizeof em->ls[0]);
            em->nls--;
            break;
        }
    pthread_mutex_unlock(&em->mu);
}

void el_events_counts(struct el_events *em, int64_t *emitted, int64_t *stored,
                      int64_t *dropped)
{
    pthread_mutex_lock(&em->mu);
    if (emitted)
        *emitted = em->emitted;
    if (stored)
        *stored = em->stored;
    if (dropped)
        *dropped = em->dropped;
    pthread_mutex_unlock(&em->mu);
}

/* With mu held: wait (at most wait_ms) until the thread has delivered
 * every queued event, and the progress record too if progress is set. */
static void drain(struct el_events *em, int wait_ms, int progress)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += wait_ms / 1000;
    dl.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    while ((em->count || em->busy || (progress && em->p_pending)) &&
           pthread_cond_timedwait(&em->idle, &em->mu, &dl) == 0)
        ;
}

void el_events_flush(struct el_events *em, int wait_ms)
{
    if (!em)
        return;
    pthread_mutex_lock(&em->mu);
    drain(em, wait_ms, 0);
    pthread_mutex_unlock(&em->mu);
}

void el_events_close(struct el_events *em, int wait_ms)
{
    if (!em)
        return;
    /* Let the queue drain for at most wait_ms, then drop the rest. */
    pthread_mutex_lock(&em->mu);
    drain(em, wait_ms, 1);
    while (em->count) {
        el_event_clear(&em->q[em->head]);
        em->head = (em->head + 1) % EL_EVENTS_QUEUE;
        em->count--;
        em->dropped++;
    }
    free(em->p_id);
    free(em->p_text);
    em->p_id = em->p_text = NULL;
    em->p_pending = 0;
    em->stop = 1;
    pthread_cond_signal(&em->cv);
    pthread_mutex_unlock(&em->mu);
    pthread_join(em->th, NULL);
    el_events_log_close(em->log);
    if (em->fd >= 0)
        close(em->fd);
    pthread_cond_destroy(&em->cv);
    pthread_cond_destroy(&em->idle);
    pthread_mutex_destroy(&em->mu);
    free(em);
}
