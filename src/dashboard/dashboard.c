/* dashboard.c -- the dashboard's record and its HTTP routes: events in a
 * ring of EL_DASH_MAX_EVENTS, the world-size timeline in a ring of
 * EL_DASH_MAX_POINTS, the current round's members, the workers' last
 * progress and local rank 0's loss over the whole job (MAX_LOSS points at
 * least LOSS_EVERY_MS apart; when full, every other point goes and the
 * spacing doubles); rendered as JSON with jansson.
 *
 * Threads: the agent's thread writes (el__dash_event, el__dash_progress),
 * the metrics server's thread reads (el_dash_handle); one mutex guards it
 * all, held for a copy into the rings or for one render.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dashboard/dash_int.h"
#include "elrun/http.h"
#include "elrun/rdzv.h"

#define MAX_MEMBERS 256
#define MAX_LOSS 512
#define LOSS_EVERY_MS 250

struct member {
    char id[200];
    int workers;
    int64_t since_ms; /* first seen in a round */
};

struct worker {
    int rank, local_rank; /* rank -1: no row */
    int64_t step, samples, last_ms;
    double rate, loss; /* rate < 0: not yet; loss NaN: none */
    int exited, code, sig, failed;
};

struct loss_pt {
    int64_t t_ms, step;
    double loss;
};

struct el_dash {
    pthread_mutex_t mu;
    char *run_id, *node, *role;
    int min_nodes, max_nodes, nproc, max_restarts;
    int64_t started_ms;
    /* now */
    char state[32];
    int64_t round;
    int nodes, world, node_rank, restarts;
    int membership_pending; /* a MEMBERSHIP event since the last round */
    char dead[16][200];     /* ids MEMBERSHIP events named, a ring      */
    int hdead;
    int nmembers;
    struct member members[MAX_MEMBERS];
    struct worker workers[EL_DASH_MAX_RANKS];
    /* rings: n items kept, head = next slot, dropped = overwritten */
    struct el__dash_event ev[EL_DASH_MAX_EVENTS];
    int nev, hev;
    long dropped_ev;
    struct {
        int64_t t_ms, round;
        int nodes, world;
    } pt[EL_DASH_MAX_POINTS];
    int npt, hpt;
    long dropped_pt;
    struct loss_pt loss[MAX_LOSS]; /* oldest first */
    int nloss;
    int64_t loss_every_ms;
};

static const char *const kinds[] = {
    [EL__DASH_ROUND] = "round",           [EL__DASH_JOIN] = "join",
    [EL__DASH_LEAVE] = "leave",           [EL__DASH_DEATH] = "death",
    [EL__DASH_FAILURE] = "failure",       [EL__DASH_EXIT] = "exit",
    [EL__DASH_MEMBERSHIP] = "membership", [EL__DASH_RESTART] = "restart",
    [EL__DASH_RECOVERY] = "recovery",     [EL__DASH_STATE] = "state",
};

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int el_dash_new(struct el_dash **out, const struct el_dash_job *job)
{
    *out = NULL;
    struct el_dash *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->run_id = strdup(job->run_id ? job->run_id : "");
    d->node = strdup(job->node ? job->node : "");
    d->role = strdup(job->role ? job->role : "");
    if (!d->run_id || !d->node || !d->role) {
        el_dash_free(d);
        return -ENOMEM;
    }
    d->min_nodes = job->min_nodes;
    d->max_nodes = job->max_nodes;
    d->nproc = job->nproc;
    d->max_restarts = job->max_restarts;
    d->started_ms = wall_ms();
    d->loss_every_ms = LOSS_EVERY_MS;
    d->round = -1;
    d->node_rank = -1;
    snprintf(d->state, sizeof d->state, "init");
    for (int i = 0; i < EL_DASH_MAX_RANKS; i++)
        d->workers[i].rank = -1;
    pthread_mutex_init(&d->mu, NULL);
    *out = d;
    return 0;
}

void el_dash_free(struct el_dash *d)
{
    if (!d)
        return;
    pthread_mutex_destroy(&d->mu);
    free(d->run_id);
    free(d->node);
    free(d->role);
    free(d);
}

/* ---- recording (under d->mu) ---- */

static void push_event(struct el_dash *d, const struct el__dash_event *ev)
{
    d->ev[d->hev] = *ev;
    d->ev[d->hev].members = NULL; /* not kept: the members table is */
    d->hev = (d->hev + 1) % EL_DASH_MAX_EVENTS;
    if (d->nev < EL_DASH_MAX_EVENTS)
        d->nev++;
    else
        d->dropped_ev++;
}

static void push_point(struct el_dash *d, int64_t t_ms)
{
    d->pt[d->hpt].t_ms = t_ms;
    d->pt[d->hpt].round = d->round;
    d->pt[d->hpt].nodes = d->nodes;
    d->pt[d->hpt].world = d->world;
    d->hpt = (d->hpt + 1) % EL_DASH_MAX_POINTS;
    if (d->npt < EL_DASH_MAX_POINTS)
        d->npt++;
    else
        d->dropped_pt++;
}

static void member_event(struct el_dash *d, enum el__dash_kind kind,
                         const char *id, int64_t t_ms, int64_t round)
{
    struct el__dash_event e = {
        .kind = kind, .t_ms = t_ms, .round = round, .rank = -1};
    snprintf(e.node, sizeof e.node, "%s", id);
    /* The text names it as the logs do: two agents of one host differ. */
    char label[EL_HOST_MAX + 8];
    el_rdzv_label(id, label, sizeof label);
    if (kind == EL__DASH_JOIN)
        snprintf(e.text, sizeof e.text, "node %.200s joined (round %lld)",
                 label, (long long)round);
    else if (kind == EL__DASH_DEATH)
        snprintf(e.text, sizeof e.text,
                 "node %.150s died: gone from the rendezvous while its round "
                 "ran (missing in round %lld)",
                 label, (long long)round);
    else
        snprintf(e.text, sizeof e.text,
                 "node %.200s left (missing in round %lld)", label,
                 (long long)round);
    push_event(d, &e);
}

/* "id workers\n"... into the members table; the diff with the old one
 * becomes JOIN / LEAVE / DEATH events. */
static void take_members(struct el_dash *d, const char *text, int64_t t_ms,
                         int64_t round)
{
    struct member *old = malloc(sizeof d->members);
    if (!old)
        return;
    int nold = d->nmembers;
    memcpy(old, d->members, sizeof d->members);
    int first = d->round < 0 || nold == 0;
    d->nmembers = 0;
    const char *p = text;
    while (*p && d->nmembers < MAX_MEMBERS) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        p += len + (nl ? 1 : 0);
        struct member m = {.workers = 0};
        char *sp = strrchr(line, ' ');
        if (sp) {
            *sp = 0;
            m.workers = atoi(sp + 1);
        }
        if (!*line)
            continue;
        snprintf(m.id, sizeof m.id, "%.199s", line);
        m.since_ms = t_ms;
        for (int i = 0; i < nold; i++)
            if (strcmp(old[i].id, m.id) == 0)
                m.since_ms = old[i].since_ms;
        d->members[d->nmembers++] = m;
        int known = 0;
        for (int i = 0; i < nold && !known; i++)
            known = strcmp(old[i].id, m.id) == 0;
        if (!known && !first)
            member_event(d, EL__DASH_JOIN, m.id, t_ms, round);
    }
    for (int i = 0; i < nold; i++) {
        int still = 0;
        for (int j = 0; j < d->nmembers && !still; j++)
            still = strcmp(old[i].id, d->members[j].id) == 0;
        int dead = d->membership_pending;
        for (int k = 0; k < 16 && !dead; k++)
            dead = strcmp(d->dead[k], old[i].id) == 0;
        if (!still)
            member_event(d, dead ? EL__DASH_DEATH : EL__DASH_LEAVE, old[i].id,
                         t_ms, round);
    }
    free(old);
}

static void describe(struct el__dash_event *e, const struct el_dash *d)
{
    if (e->text[0])
        return;
    char how[48];
    if (e->sig > 0) {
        const char *abbrev = sigabbrev_np(e->sig);
        snprintf(how, sizeof how, "signal %d, SIG%s", e->sig,
                 abbrev ? abbrev : "?");
    } else
        snprintf(how, sizeof how, "exit code %d", e->code);
    switch (e->kind) {
    case EL__DASH_ROUND:
        if (e->node_rank >= 0)
            snprintf(e->text, sizeof e->text,
                     "round %lld: %d nodes, %d workers; this node is rank %d",
                     (long long)e->round, e->nodes, e->world, e->node_rank);
        else
            snprintf(e->text, sizeof e->text,
                     "round %lld: %d nodes, %d workers", (long long)e->round,
                     e->nodes, e->world);
        break;
    case EL__DASH_FAILURE:
        snprintf(e->text, sizeof e->text, "worker rank %d failed (%s)", e->rank,
                 how);
        break;
    case EL__DASH_EXIT:
        snprintf(e->text, sizeof e->text, "worker rank %d exited (%s)", e->rank,
                 how);
        break;
    case EL__DASH_MEMBERSHIP:
        snprintf(e->text, sizeof e->text,
                 "other nodes wait for a new round (a node arrived or died); "
                 "stopping this node's workers");
        break;
    case EL__DASH_RESTART:
        if (d->max_restarts >= 0)
            snprintf(e->text, sizeof e->text, "restart %d of %d", e->restarts,
                     d->max_restarts);
        else
            snprintf(e->text, sizeof e->text, "restart %d", e->restarts);
        break;
    case EL__DASH_RECOVERY:
        snprintf(e->text, sizeof e->text,
                 "recovered: every worker of the new round runs, %.3f s "
                 "after the failure",
                 e->seconds);
        break;
    default:
        snprintf(e->text, sizeof e->text, "%s", kinds[e->kind]);
    }
}

void el__dash_event(struct el_dash *d, const struct el__dash_event *ev)
{
    if (!d || !ev || ev->kind < 0 || ev->kind >= EL__DASH_NKINDS)
        return;
    struct el__dash_event e = *ev;
    if (!e.t_ms)
        e.t_ms = wall_ms();
    pthread_mutex_lock(&d->mu);
    if (e.round < 0 && e.kind != EL__DASH_ROUND)
        e.round = d->round;
    describe(&e, d);
    switch (e.kind) {
    case EL__DASH_STATE:
        snprintf(d->state, sizeof d->state, "%.31s", e.text);
        pthread_mutex_unlock(&d->mu);
        return; /* the state is shown, not listed: it changes too often */
    case EL__DASH_ROUND:
        push_event(d, &e);
        if (e.members)
            take_members(d, e.members, e.t_ms, e.round);
        d->round = e.round;
        d->nodes = e.nodes;
        d->world = e.world;
        d->node_rank = e.node_rank;
        d->membership_pending = 0;
        for (int i = 0; i < EL_DASH_MAX_RANKS; i++)
            d->workers[i].rank = -1;
        push_point(d, e.t_ms);
        break;
    case EL__DASH_MEMBERSHIP:
        if (e.node[0]) { /* that node is gone: its absence is a death */
            snprintf(d->dead[d->hdead], sizeof d->dead[0], "%s", e.node);
            d->hdead = (d->hdead + 1) % 16;
        } else {
            d->membership_pending = 1;
        }
        push_event(d, &e);
        break;
    case EL__DASH_RESTART:
        d->restarts = e.restarts;
        push_event(d, &e);
        break;
    case EL__DASH_FAILURE:
    case EL__DASH_EXIT:
        for (int i = 0; i < EL_DASH_MAX_RANKS; i++) {
            struct worker *w = &d->workers[i];
            if (w->rank == e.rank && e.rank >= 0) {
                w->exited = 1;
                w->code = e.code;
                w->sig = e.sig;
                w->failed = e.kind == EL__DASH_FAILURE;
            }
        }
        push_event(d, &e);
        break;
    default:
        push_event(d, &e);
    }
    pthread_mutex_unlock(&d->mu);
}

void el__dash_job_sizes(struct el_dash *d, int min_nodes, int max_nodes,
                        int nproc, int max_restarts)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    if (min_nodes >= 0)
        d->min_nodes = min_nodes;
    if (max_nodes >= 0)
        d->max_nodes = max_nodes;
    if (nproc >= 0)
        d->nproc = nproc;
    if (max_restarts >= 0)
        d->max_restarts = max_restarts;
    pthread_mutex_unlock(&d->mu);
}

void el__dash_progress(struct el_dash *d, int rank, int local_rank,
                       int64_t step, int64_t samples, double rate, double loss)
{
    if (!d || local_rank < 0 || local_rank >= EL_DASH_MAX_RANKS)
        return;
    int64_t now = wall_ms();
    pthread_mutex_lock(&d->mu);
    struct worker *w = &d->workers[local_rank];
    if (w->rank != rank)
        *w = (struct worker){
            .rank = rank, .local_rank = local_rank, .rate = -1, .loss = NAN};
    w->step = step;
    if (samples >= 0)
        w->samples = samples;
    if (rate >= 0)
        w->rate = rate;
    if (!isnan(loss)) {
        w->loss = loss;
        if (local_rank == 0 && (!d->nloss || now - d->loss[d->nloss - 1].t_ms >=
                                                 d->loss_every_ms)) {
            if (d->nloss == MAX_LOSS) { /* half the points, twice apart */
                for (int i = 0; i < MAX_LOSS / 2; i++)
                    d->loss[i] = d->loss[2 * i + 1];
                d->nloss = MAX_LOSS / 2;
                d->loss_every_ms *= 2;
            }
            d->loss[d->nloss++] = (struct loss_pt){now, step, loss};
        }
    }
    w->last_ms = now;
    pthread_mutex_unlock(&d->mu);
}

/* ---- rendering ---- */

static json_t *event_json(const struct el__dash_event *e)
{
    json_t *o = json_pack("{s:I, s:s, s:I, s:s}", "t_ms", (json_int_t)e->t_ms,
                          "kind", kinds[e->kind], "round", (json_int_t)e->round,
                          "text", e->text);
    if (!o)
        return NULL;
    switch (e->kind) {
    case EL__DASH_ROUND:
        json_object_set_new(o, "nodes", json_integer(e->nodes));
        json_object_set_new(o, "world", json_integer(e->world));
        break;
    case EL__DASH_JOIN:
    case EL__DASH_LEAVE:
    case EL__DASH_DEATH: {
        char label[EL_HOST_MAX + 8];
        el_rdzv_label(e->node, label, sizeof label);
        json_object_set_new(o, "node", json_string(e->node));
        json_object_set_new(o, "label", json_string(label));
        break;
    }
    case EL__DASH_FAILURE:
    case EL__DASH_EXIT:
        json_object_set_new(o, "rank", json_integer(e->rank));
        if (e->sig > 0)
            json_object_set_new(o, "signal", json_integer(e->sig));
        else
            json_object_set_new(o, "exit_code", json_integer(e->code));
        break;
    case EL__DASH_RESTART:
        json_object_set_new(o, "restarts", json_integer(e->restarts));
        break;
    case EL__DASH_RECOVERY:
        json_object_set_new(o, "seconds", json_real(e->seconds));
        break;
    default:
        break;
    }
    return o;
}

static json_t *render(struct el_dash *d)
{
    json_t *root = json_object();
    json_t *members = json_array(), *workers = json_array(),
           *timeline = json_array(), *events = json_array(),
           *loss = json_array();
    if (!root || !members || !workers || !timeline || !events || !loss) {
        json_decref(root);
        json_decref(members);
        json_decref(workers);
        json_decref(timeline);
        json_decref(events);
        json_decref(loss);
        return NULL;
    }
    int left = d->max_restarts - d->restarts;
    /* Negative: not known (elrun dashboard, without its flags): null. */
    json_t *job = json_pack("{s:s, s:s, s:s}", "run_id", d->run_id, "node",
                            d->node, "role", d->role);
    const struct {
        const char *name;
        int v;
    } nums[] = {{"min_nodes", d->min_nodes},
                {"max_nodes", d->max_nodes},
                {"nproc_per_node", d->nproc},
                {"max_restarts", d->max_restarts}};
    for (size_t i = 0; job && i < sizeof nums / sizeof nums[0]; i++)
        json_object_set_new(job, nums[i].name,
                            nums[i].v >= 0 ? json_integer(nums[i].v)
                                           : json_null());
    json_object_set_new(root, "job", job);
    json_object_set_new(root, "now_ms", json_integer(wall_ms()));
    json_object_set_new(root, "started_ms", json_integer(d->started_ms));
    json_object_set_new(root, "state", json_string(d->state));
    json_object_set_new(root, "round", json_integer(d->round));
    json_object_set_new(root, "nodes", json_integer(d->nodes));
    json_object_set_new(root, "world", json_integer(d->world));
    json_object_set_new(root, "node_rank", json_integer(d->node_rank));
    json_object_set_new(root, "restarts", json_integer(d->restarts));
    json_object_set_new(
        root, "restarts_left",
        d->max_restarts < 0 ? json_null() : json_integer(left > 0 ? left : 0));
    for (int i = 0; i < d->nmembers; i++) {
        const struct member *m = &d->members[i];
        char host[200], label[EL_HOST_MAX + 8];
        snprintf(host, sizeof host, "%s", m->id);
        host[strcspn(host, "#/")] = 0; /* of an id, or of a label */
        el_rdzv_label(m->id, label, sizeof label);
        json_array_append_new(
            members,
            json_pack("{s:s, s:s, s:s, s:i, s:i, s:I, s:b}", "id", m->id,
                      "host", host, "label", label, "node_rank", i, "workers",
                      m->workers, "since_ms", (json_int_t)m->since_ms, "self",
                      i == d->node_rank));
    }
    json_object_set_new(root, "members", members);
    for (int i = 0; i < EL_DASH_MAX_RANKS; i++) {
        const struct worker *w = &d->workers[i];
        if (w->rank < 0)
            continue;
        json_t *o = json_pack(
            "{s:i, s:i, s:I, s:I, s:I}", "rank", w->rank, "local_rank",
            w->local_rank, "step", (json_int_t)w->step, "samples",
            (json_int_t)w->samples, "last_ms", (json_int_t)w->last_ms);
        if (!o)
            continue;
        json_object_set_new(o, "steps_per_second",
                            w->rate >= 0 ? json_real(w->rate) : json_null());
        json_object_set_new(o, "loss",
                            isnan(w->loss) ? json_null() : json_real(w->loss));
        json_object_set_new(o, "state",
                            json_string(!w->exited  ? "running"
                                        : w->failed ? "failed"
                                                    : "exited"));
        json_array_append_new(workers, o);
    }
    json_object_set_new(root, "workers", workers);
    for (int k = 0; k < d->npt; k++) {
        int i = (d->hpt - d->npt + k + EL_DASH_MAX_POINTS) % EL_DASH_MAX_POINTS;
        json_array_append_new(
            timeline,
            json_pack("{s:I, s:I, s:i, s:i}", "t_ms", (json_int_t)d->pt[i].t_ms,
                      "round", (json_int_t)d->pt[i].round, "nodes",
                      d->pt[i].nodes, "world", d->pt[i].world));
    }
    json_object_set_new(root, "timeline", timeline);
    for (int k = 0; k < d->nev; k++) {
        int i = (d->hev - d->nev + k + EL_DASH_MAX_EVENTS) % EL_DASH_MAX_EVENTS;
        json_t *o = event_json(&d->ev[i]);
        if (o)
            json_array_append_new(events, o);
    }
    json_object_set_new(root, "events", events);
    for (int i = 0; i < d->nloss; i++)
        json_array_append_new(
            loss, json_pack("[I, I, f]", (json_int_t)d->loss[i].t_ms,
                            (json_int_t)d->loss[i].step, d->loss[i].loss));
    json_object_set_new(root, "loss", loss);
    json_object_set_new(root, "dropped",
                        json_pack("{s:i, s:i}", "events", (int)d->dropped_ev,
                                  "timeline", (int)d->dropped_pt));
    return root;
}

int el_dash_json(struct el_dash *d, char **out, size_t *len)
{
    pthread_mutex_lock(&d->mu);
    json_t *root = render(d);
    pthread_mutex_unlock(&d->mu);
    if (!root)
        return -ENOMEM;
    *out = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!*out)
        return -ENOMEM;
    *len = strlen(*out);
    return 0;
}

/* ---- routes ---- */

static const char *type_of(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (dot && strcmp(dot, ".html") == 0)
        return "text/html; charset=utf-8";
    if (dot && strcmp(dot, ".js") == 0)
        return "text/javascript; charset=utf-8";
    if (dot && strcmp(dot, ".css") == 0)
        return "text/css; charset=utf-8";
    if (dot && strcmp(dot, ".svg") == 0)
        return "image/svg+xml";
    return "application/octet-stream";
}

static void text(struct el_http_response *rs, int status, const char *msg)
{
    rs->status = status;
    rs->body = strdup(msg);
    rs->len = rs->body ? strlen(rs->body) : 0;
}

void el_dash_handle(void *arg, const struct el_http_request *rq,
                    struct el_http_response *rs)
{
    struct el_dash *d = arg;
    const char *path = rq->path;
    if (strcmp(path, "/api/job") == 0) {
        if (el_dash_json(d, &rs->body, &rs->len) < 0) {
            text(rs, 503, "out of memory\n");
            return;
        }
        rs->content_type = "application/json";
        return;
    }
    if (strcmp(path, "/") == 0)
        path = "/index.html";
    for (int i = 0; i < el__dash_nassets; i++) {
        const struct el__dash_asset *a = &el__dash_assets[i];
        if (path[0] == '/' && strcmp(path + 1, a->name) == 0) {
            rs->body = malloc(a->len ? a->len : 1);
            if (!rs->body) {
                text(rs, 503, "out of memory\n");
                return;
            }
            memcpy(rs->body, a->data, a->len);
            rs->len = a->len;
            rs->content_type = type_of(a->name);
            return;
        }
    }
    text(rs, 404,
         "not found: elrun serves / (the dashboard), /api/job (its JSON) "
         "and /metrics\n");
}

void el_dash_assets_size(int *files, size_t *bytes)
{
    size_t n = 0;
    for (int i = 0; i < el__dash_nassets; i++)
        n += el__dash_assets[i].len;
    *files = el__dash_nassets;
    *bytes = n;
}
