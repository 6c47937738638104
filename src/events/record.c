/* record.c -- the event record (include/elrun/events.h): one JSON object
 * per event, encoded and decoded with jansson, and its one human line.
 * Pure functions, no I/O; tests/unit/test_events.c checks them.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/errfmt.h"
#include "elrun/err.h"
#include "elrun/events.h"

int64_t el_events_slot(int64_t seq)
{
    return (seq - 1) % EL_EVENTS_KEEP;
}

static void iso_time(int64_t ms, char *buf, size_t cap, int date)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    char t[24];
    strftime(t, sizeof t, date ? "%Y-%m-%dT%H:%M:%S" : "%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%03d%s", t, (int)(ms % 1000), date ? "Z" : "");
}

char *el_event_encode(const struct el_event *ev)
{
    json_t *fields =
        json_loads(ev->fields && *ev->fields ? ev->fields : "{}", 0, NULL);
    if (!fields || !json_is_object(fields)) {
        json_decref(fields);
        return NULL;
    }
    char when[48];
    iso_time(ev->time_ms, when, sizeof when, 1);
    json_t *o = json_object();
    json_object_set_new(o, "seq", json_integer(ev->seq));
    json_object_set_new(o, "time", json_string(when));
    json_object_set_new(o, "time_ms", json_integer(ev->time_ms));
    json_object_set_new(o, "kind", json_string(ev->kind));
    json_object_set_new(o, "node", json_string(ev->node));
    if (ev->label[0])
        json_object_set_new(o, "label", json_string(ev->label));
    json_object_set_new(o, "round",
                        ev->round >= 0 ? json_integer(ev->round) : json_null());
    json_object_set_new(o, "fields", fields);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

int el_event_decode(const char *text, size_t len, struct el_event *ev,
                    char *err, size_t errlen)
{
    memset(ev, 0, sizeof *ev);
    ev->round = -1;
    json_error_t je;
    json_t *o = json_loadb(text, len, 0, &je);
    if (!o)
        return el__errf(err, errlen, EL_EFORMAT, "not JSON: %s", je.text);
    int rc = EL_EFORMAT;
    json_t *seq = json_object_get(o, "seq"), *t = json_object_get(o, "time_ms"),
           *k = json_object_get(o, "kind"), *n = json_object_get(o, "node"),
           *r = json_object_get(o, "round"), *f = json_object_get(o, "fields"),
           *l = json_object_get(o, "label");
    if (!json_is_object(o) || !json_is_integer(seq) || !json_is_integer(t) ||
        !json_is_string(k) || !json_is_string(n) ||
        !(json_is_integer(r) || json_is_null(r)) || !json_is_object(f) ||
        (l && !json_is_string(l))) {
        el__errf(err, errlen, rc,
                 "not an event: seq, time_ms, kind, node, round and fields "
                 "are required (and label, if any, is a string)");
        goto out;
    }
    ev->seq = json_integer_value(seq);
    ev->time_ms = json_integer_value(t);
    snprintf(ev->kind, sizeof ev->kind, "%s", json_string_value(k));
    snprintf(ev->node, sizeof ev->node, "%s", json_string_value(n));
    if (l)
        snprintf(ev->label, sizeof ev->label, "%s", json_string_value(l));
    ev->round = json_is_integer(r) ? json_integer_value(r) : -1;
    ev->fields = json_dumps(f, JSON_COMPACT | JSON_PRESERVE_ORDER);
    rc = ev->fields ? 0 : -ENOMEM;
out:
    json_decref(o);
    return rc;
}

void el_event_clear(struct el_event *ev)
{
    free(ev->fields);
    ev->fields = NULL;
}

void el_events_free(struct el_event *evs, int n)
{
    for (int i = 0; i < n; i++)
        el_event_clear(&evs[i]);
    free(evs);
}

/* ---- the human line ---- */

static const char *str(json_t *f, const char *k)
{
    const char *s = json_string_value(json_object_get(f, k));
    return s ? s : "";
}

static long long num(json_t *f, const char *k, long long dflt)
{
    json_t *v = json_object_get(f, k);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

/* "a, b" from a JSON array of strings, "-" when empty. */
static void names(json_t *arr, char *buf, size_t cap)
{
    size_t i, off = 0;
    json_t *v;
    buf[0] = 0;
    json_array_foreach(arr, i, v)
    {
        int w = snprintf(buf + off, cap - off, "%s%s", off ? ", " : "",
                         json_string_value(v) ? json_string_value(v) : "?");
        if (w < 0 || (size_t)w >= cap - off)
            break;
        off += (size_t)w;
    }
    if (!buf[0])
        snprintf(buf, cap, "-");
}

/* A round event's list of members by label (key "<key>_labels"), or by
 * name (key) in an event from before the labels. */
static json_t *members_of(json_t *f, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "%s_labels", key);
    json_t *l = json_object_get(f, k);
    return json_is_array(l) ? l : json_object_get(f, key);
}

static void summary(const char *kind, json_t *f, char *buf, size_t cap)
{
    char a[512], b[512], c[300] = "";
    if (!strcmp(kind, "round")) {
        names(members_of(f, "joined"), a, sizeof a);
        names(members_of(f, "left"), b, sizeof b);
        if (*str(f, "failed_node"))
            snprintf(c, sizeof c, " (%s)", str(f, "failed_node"));
        snprintf(buf, cap,
                 "%lld nodes, world %lld (joined: %s; left: %s)%s%s%s",
                 num(f, "nodes", 0), num(f, "world", 0), a, b,
                 *str(f, "cause") ? "; cause: " : "", str(f, "cause"), c);
    } else if (!strcmp(kind, "failure")) {
        long long sig = num(f, "signal", 0);
        if (sig)
            snprintf(a, sizeof a, "was killed by %s", str(f, "signal_name"));
        else
            snprintf(a, sizeof a, "exited %lld", num(f, "exitcode", 0));
        snprintf(buf, cap, "rank %lld (local %lld, pid %lld) on %s %s%s%s",
                 num(f, "rank", -1), num(f, "local_rank", -1), num(f, "pid", 0),
                 str(f, "host"), a, *str(f, "message") ? ": " : "",
                 str(f, "message"));
    } else if (!strcmp(kind, "restart")) {
        snprintf(buf, cap, "restart %lld of %lld (%lld left)",
                 num(f, "restarts", 0), num(f, "max_restarts", 0),
                 num(f, "left", 0));
    } else if (!strcmp(kind, "recovery")) {
        json_t *s = json_object_get(f, "seconds");
        snprintf(buf, cap, "recovered in %.3f s after a %s",
                 json_is_number(s) ? json_number_value(s) : 0.0,
                 str(f, "cause"));
    } else if (!strcmp(kind, "end") || !strcmp(kind, "leave")) {
        snprintf(buf, cap, "%s%s%s after %lld rounds, %lld restarts",
                 str(f, "outcome"), *str(f, "why") ? ": " : "", str(f, "why"),
                 num(f, "rounds", 0), num(f, "restarts", 0));
    } else {
        char *s = json_dumps(f, JSON_COMPACT | JSON_PRESERVE_ORDER);
        snprintf(buf, cap, "%s", s ? s : "");
        free(s);
    }
}

void el_event_human(const struct el_event *ev, char *buf, size_t cap)
{
    char when[48], what[2048] = "";
    iso_time(ev->time_ms, when, sizeof when, 0);
    json_t *f = json_loads(ev->fields ? ev->fields : "{}", 0, NULL);
    summary(ev->kind, f, what, sizeof what);
    json_decref(f);
    char rnd[32] = "-";
    if (ev->round >= 0)
        snprintf(rnd, sizeof rnd, "%" PRId64, ev->round);
    snprintf(buf, cap, "%s  #%-4" PRId64 " round %-3s %-16s %-8s %s", when,
             ev->seq, rnd, ev->label[0] ? ev->label : ev->node, ev->kind, what);
}
