/* plan.c -- the controller's decisions for one ElasticJob, as a pure
 * function of the job and its pods: which pods to create (next free
 * indices), which to delete (scale-down from the highest index, failed
 * pods to replace), the job's new status and conditions, and the events
 * that explain them.  No I/O, so every rule is unit-tested
 * (tests/unit/test_k8s.c); controller.c applies the plan.
 *
 * Rules (docs/KUBERNETES.md has the user's view):
 *  - minReplicas and maxReplicas default to replicaSpecs.Worker.replicas;
 *    the desired size is replicas clamped to [min, max].
 *  - A failed pod is replaced unless restartPolicy is Never.  With ExitCode
 *    (the default) an exit code >= 129 (a signal) or a lost node is
 *    retryable and free; anything else counts against backoffLimit
 *    (default 6).  Counted pods are remembered by uid in
 *    status.handledFailures, so a controller restarted between the status
 *    write and the delete does not count one twice.
 *  - The job is Failed only when the backoff is spent, the active deadline
 *    passed, or fewer than minReplicas can run (pods failed for good under
 *    Never at once; Pending pods the scheduler cannot place after
 *    unschedulable_s).  Pending pods otherwise never hold the job: the
 *    workers' --nnodes=MIN:MAX lets it run at the size it has.
 *  - Succeeded when a worker succeeded and none still runs; from the first
 *    success on no pod is created, and Pending ones are deleted.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "k8s/k8s_int.h"

#define MAX_INDEX 10000

char *el__k8s_time(double t, char *buf)
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

double el__k8s_parse_time(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (!s)
        return -1;
    const char *e = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!e)
        return -1;
    return (double)timegm(&tm);
}

int el__k8s_retryable(int exit_code, const char *reason)
{
    static const char *const lost[] = {
        "NodeLost",   "Evicted",      "Shutdown",
        "Terminated", "NodeShutdown", "UnexpectedAdmissionError",
        NULL};
    for (int i = 0; reason && lost[i]; i++)
        if (strcmp(reason, lost[i]) == 0)
            return 1;
    return exit_code >= 129 && exit_code <= 255;
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static json_t *path(const json_t *o, const char *p)
{
    char key[64];
    json_t *cur = (json_t *)o;
    while (cur && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof key)
            return NULL;
        memcpy(key, p, n);
        key[n] = '\0';
        cur = json_object_get(cur, key);
        p += n + (dot ? 1 : 0);
    }
    return cur;
}

/* An integer field, or def when absent. */
static long long jint(const json_t *o, const char *p, long long def)
{
    json_t *v = path(o, p);
    return json_is_integer(v) ? json_integer_value(v) : def;
}

static void event(struct el__k8s_plan *pl, const char *type, const char *reason,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void event(struct el__k8s_plan *pl, const char *type, const char *reason,
                  const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_array_append_new(pl->events,
                          json_pack("{s:s,s:s,s:s}", "type", type, "reason",
                                    reason, "message", msg));
}

/* The condition of type t in status, or NULL. */
static json_t *cond(json_t *st, const char *t)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c)
    {
        const char *ct = jstr(c, "type");
        if (ct && strcmp(ct, t) == 0)
            return c;
    }
    return NULL;
}

static int cond_true(json_t *st, const char *t)
{
    json_t *c = cond(st, t);
    return c && jstr(c, "status") && strcmp(jstr(c, "status"), "True") == 0;
}

/* Set condition t to status s (moving it to the end when it turns True, so
 * the list reads in order); keeps lastTransitionTime unless s changes. */
static void set_cond(json_t *st, const char *t, const char *s,
                     const char *reason, const char *msg, const char *now)
{
    json_t *cs = json_object_get(st, "conditions");
    if (!json_is_array(cs)) {
        cs = json_array();
        json_object_set_new(st, "conditions", cs);
    }
    json_t *c = cond(st, t);
    if (c && jstr(c, "status") && strcmp(jstr(c, "status"), s) == 0) {
        if (strcmp(jstr(c, "reason") ? jstr(c, "reason") : "", reason) ||
            strcmp(jstr(c, "message") ? jstr(c, "message") : "", msg)) {
            json_object_set_new(c, "reason", json_string(reason));
            json_object_set_new(c, "message", json_string(msg));
            json_object_set_new(c, "lastUpdateTime", json_string(now));
        }
        return;
    }
    if (!c && strcmp(s, "False") == 0)
        return; /* never was: nothing to say */
    json_t *n = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", t, "status", s,
                          "reason", reason, "message", msg, "lastUpdateTime",
                          now, "lastTransitionTime", now);
    if (c) {
        size_t i;
        json_t *x;
        json_array_foreach(cs, i, x) if (x == c)
        {
            json_array_remove(cs, i);
            break;
        }
    }
    json_array_append_new(cs, n);
}

static int has_uid(const json_t *arr, const char *uid)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i,
                       v) if (uid && json_string_value(v) &&
                              strcmp(json_string_value(v), uid) == 0) return 1;
    return 0;
}

/* The worker container of a pod spec (named elasticjob-worker, else the
 * first). */
static json_t *worker_container(json_t *spec)
{
    json_t *cs = json_object_get(spec, "containers");
    size_t i;
    json_t *c;
    json_array_foreach(cs, i, c)
    {
        const char *n = jstr(c, "name");
        if (n && strcmp(n, EL_K8S_WORKER_CONTAINER) == 0)
            return c;
    }
    return json_array_get(cs, 0);
}

/* Exit code of the worker container's last termination, or -1. */
static int exit_code(const json_t *pod, const char **msg)
{
    json_t *cs = path(pod, "status.containerStatuses");
    size_t i;
    json_t *c, *pick = NULL;
    json_array_foreach(cs, i, c)
    {
        const char *n = jstr(c, "name");
        if (!pick || (n && strcmp(n, EL_K8S_WORKER_CONTAINER) == 0))
            pick = c;
    }
    json_t *t = path(pick, "state.terminated");
    if (!t)
        t = path(pick, "lastState.terminated");
    if (msg)
        *msg = t ? jstr(t, "reason") : NULL;
    return t ? (int)jint(t, "exitCode", -1) : -1;
}

static long long restarts_in_place(const json_t *pod)
{
    long long n = 0;
    size_t i;
    json_t *c;
    json_array_foreach(path(pod, "status.containerStatuses"), i, c) n +=
        jint(c, "restartCount", 0);
    return n;
}

/* The scheduler's message if the pod is Pending and cannot be placed. */
static const char *unschedulable(const json_t *pod)
{
    size_t i;
    json_t *c;
    json_array_foreach(path(pod, "status.conditions"), i, c)
    {
        const char *t = jstr(c, "type"), *s = jstr(c, "status"),
                   *r = jstr(c, "reason");
        if (t && s && r && strcmp(t, "PodScheduled") == 0 &&
            strcmp(s, "False") == 0 && strcmp(r, "Unschedulable") == 0)
            return jstr(c, "message") ? jstr(c, "message") : "Unschedulable";
    }
    return NULL;
}

static int pod_index(const json_t *pod)
{
    const char *s =
        json_string_value(path(pod, "metadata.labels.replica-index"));
    if (!s || !*s)
        return -1;
    char *e;
    long v = strtol(s, &e, 10);
    return (*e || v < 0 || v >= MAX_INDEX) ? -1 : (int)v;
}

static json_t *owner_ref(const json_t *job)
{
    return json_pack("[{s:s,s:s,s:s,s:s,s:b,s:b}]", "apiVersion", EL_K8S_API,
                     "kind", "ElasticJob", "name",
                     json_string_value(path(job, "metadata.name")), "uid",
                     json_string_value(path(job, "metadata.uid")), "controller",
                     1, "blockOwnerDeletion", 1);
}

static json_t *labels_for(const json_t *job, int idx)
{
    char is[16];
    snprintf(is, sizeof is, "%d", idx);
    return json_pack("{s:s,s:s,s:s,s:s}", "group-name", EL_K8S_GROUP,
                     "job-name", json_string_value(path(job, "metadata.name")),
                     "replica-type", "worker", "replica-index", is);
}

json_t *el__k8s_service_for(const json_t *job, const json_t *pod)
{
    json_t *l = json_deep_copy(path(pod, "metadata.labels"));
    json_t *sel = json_object();
    static const char *const keys[] = {"group-name", "job-name", "replica-type",
                                       "replica-index"};
    for (int i = 0; i < 4; i++)
        json_object_set(sel, keys[i], json_object_get(l, keys[i]));
    json_t *svc = json_pack(
        "{s:s,s:s,s:{s:s,s:s,s:o,s:o},s:{s:s,s:o,s:b,s:[{s:s,s:i,s:i}]}}",
        "apiVersion", "v1", "kind", "Service", "metadata", "name",
        json_string_value(path(pod, "metadata.name")), "namespace",
        json_string_value(path(job, "metadata.namespace")), "labels", sel,
        "ownerReferences", owner_ref(job), "spec", "clusterIP", "None",
        "selector", json_deep_copy(sel), "publishNotReadyAddresses", 1, "ports",
        "name", "elasticjob-port", "port", 10291, "targetPort", 10291);
    json_decref(l);
    return svc;
}

static json_t *pod_for(const json_t *job, int idx, int min, int max,
                       const char *policy)
{
    const char *name = json_string_value(path(job, "metadata.name"));
    json_t *tmpl = path(job, "spec.replicaSpecs.Worker.template");
    json_t *pod = json_object();
    json_t *md = json_deep_copy(json_object_get(tmpl, "metadata"));
    if (!json_is_object(md)) {
        json_decref(md);
        md = json_object();
    }
    json_t *spec = json_deep_copy(json_object_get(tmpl, "spec"));
    char pn[300];
    snprintf(pn, sizeof pn, "%s-worker-%d", name, idx);
    json_object_del(md, "generateName");
    json_object_del(md, "creationTimestamp");
    json_object_set_new(md, "name", json_string(pn));
    json_object_set_new(
        md, "namespace",
        json_string(json_string_value(path(job, "metadata.namespace"))));
    json_t *l = json_object_get(md, "labels");
    if (!json_is_object(l)) {
        l = json_object();
        json_object_set_new(md, "labels", l);
    }
    json_t *own = labels_for(job, idx);
    json_object_update(l, own);
    json_decref(own);
    json_object_set_new(md, "ownerReferences", owner_ref(job));
    json_object_set_new(pod, "apiVersion", json_string("v1"));
    json_object_set_new(pod, "kind", json_string("Pod"));
    json_object_set_new(pod, "metadata", md);
    const char *rp = strcmp(policy, "OnFailure") == 0 ? "OnFailure"
                     : strcmp(policy, "Always") == 0  ? "Always"
                                                      : "Never";
    json_object_set_new(spec, "restartPolicy", json_string(rp));
    json_t *c = worker_container(spec);
    json_t *args = json_array();
    char a[600];
    json_array_append_new(args, json_string("--rdzv_backend=etcd"));
    snprintf(a, sizeof a, "--rdzv_endpoint=%s",
             json_string_value(path(job, "spec.rdzvEndpoint")));
    json_array_append_new(args, json_string(a));
    snprintf(a, sizeof a, "--rdzv_id=%s", name);
    json_array_append_new(args, json_string(a));
    snprintf(a, sizeof a, "--nnodes=%d:%d", min, max);
    json_array_append_new(args, json_string(a));
    json_array_extend(args, json_object_get(c, "args"));
    json_object_set_new(c, "args", args);
    json_object_set_new(pod, "spec", spec);
    return pod;
}

static void remove_pod(struct el__k8s_plan *pl, const json_t *pod,
                       const char *reason, int grace)
{
    json_t *r = json_pack(
        "{s:s,s:s,s:s}", "name", json_string_value(path(pod, "metadata.name")),
        "uid", json_string_value(path(pod, "metadata.uid")), "reason", reason);
    if (grace >= 0)
        json_object_set_new(r, "grace", json_integer(grace));
    json_array_append_new(pl->remove, r);
}

void el__k8s_plan_free(struct el__k8s_plan *p)
{
    json_decref(p->create);
    json_decref(p->remove);
    json_decref(p->services);
    json_decref(p->status);
    json_decref(p->events);
    memset(p, 0, sizeof *p);
}

static void finish(json_t *st, const char *t, const char *reason,
                   const char *msg, const char *now)
{
    set_cond(st, "Running", "False", reason, msg, now);
    set_cond(st, "Restarting", "False", reason, msg, now);
    set_cond(st, t, "True", reason, msg, now);
    if (!json_object_get(st, "completionTime"))
        json_object_set_new(st, "completionTime", json_string(now));
}

int el__k8s_plan(const json_t *job, const json_t *pods, const json_t *svcs,
                 const struct el__k8s_plan_opts *o, struct el__k8s_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->create = json_array();
    pl->remove = json_array();
    pl->services = json_array();
    pl->events = json_array();
    json_t *old = json_object_get(job, "status");
    json_t *st = json_is_object(old) ? json_deep_copy(old) : json_object();
    pl->status = st;
    char now[32], msg[600];
    el__k8s_time(o->now, now);
    const char *name = json_string_value(path(job, "metadata.name"));
    if (!name)
        name = "?";

    /* ---- the spec, with the old controller's defaults ---- */
    json_t *w = path(job, "spec.replicaSpecs.Worker");
    long long reps = jint(w, "replicas", -1);
    long long min = jint(job, "spec.minReplicas", reps >= 0 ? reps : 1);
    long long max = jint(job, "spec.maxReplicas", reps >= 0 ? reps : min);
    if (reps < 0)
        reps = max;
    const char *policy = jstr(w, "restartPolicy");
    if (!policy)
        policy = "ExitCode";
    long long backoff = jint(job, "spec.backoffLimit", 6);
    const char *clean = json_string_value(path(job, "spec.cleanPodPolicy"));
    if (!clean)
        clean = "None";
    char sel[400];
    snprintf(sel, sizeof sel,
             "group-name=" EL_K8S_GROUP ",job-name=%s,replica-type=worker",
             name);
    json_object_set_new(st, "selector", json_string(sel));

    if (!cond(st, "Created")) {
        snprintf(msg, sizeof msg, "ElasticJob %s is created.", name);
        set_cond(st, "Created", "True", "ElasticJobCreated", msg, now);
    }

    /* ---- checks the schema cannot make ---- */
    const char *bad = NULL;
    if (min > max) {
        snprintf(msg, sizeof msg,
                 "spec.minReplicas: Invalid value: %lld: must be less than or "
                 "equal to spec.maxReplicas (%lld)",
                 min, max);
        bad = msg;
    } else if (min < 1) {
        snprintf(msg, sizeof msg,
                 "spec.minReplicas: Invalid value: %lld: must be at least 1 "
                 "(it defaults to spec.replicaSpecs.Worker.replicas)",
                 min);
        bad = msg;
    } else if (max > MAX_INDEX) {
        snprintf(msg, sizeof msg,
                 "spec.maxReplicas: Invalid value: %lld: at most %d", max,
                 MAX_INDEX);
        bad = msg;
    } else if (!json_is_string(path(job, "spec.rdzvEndpoint"))) {
        snprintf(msg, sizeof msg, "spec.rdzvEndpoint: Required value");
        bad = msg;
    } else if (!worker_container(path(w, "template.spec"))) {
        snprintf(msg, sizeof msg,
                 "spec.replicaSpecs.Worker.template.spec.containers: Required "
                 "value");
        bad = msg;
    }
    int finished = cond_true(st, "Succeeded") || cond_true(st, "Failed");
    if (bad && !finished) {
        finish(st, "Failed", "InvalidSpec", bad, now);
        json_object_set_new(st, "state", json_string("Failed"));
        event(pl, "Warning", "InvalidSpec", "%s", bad);
        return 0;
    }
    long long desired = reps < min ? min : reps > max ? max : reps;

    /* ---- the pods ---- */
    int nslot = (int)(max > desired ? max : desired);
    size_t npods = json_array_size(pods);
    int active = 0, pending = 0, succeeded = 0, unsched = 0, never_failed = 0;
    int replaced = 0, counted_now = 0;
    long long inplace = 0;
    const char *unsched_msg = NULL;
    char *taken = calloc((size_t)MAX_INDEX, 1);
    json_t *handled = json_object_get(st, "handledFailures");
    json_t *keep = json_array(); /* handledFailures still present */
    long long failed = jint(st, "replicaStatuses.Worker.failed", 0);
    long long restarts = jint(st, "restarts", 0);
    for (size_t i = 0; i < npods; i++) {
        json_t *p = json_array_get(pods, i);
        int idx = pod_index(p);
        const char *uid = json_string_value(path(p, "metadata.uid"));
        const char *phase = json_string_value(path(p, "status.phase"));
        if (!phase)
            phase = "Pending";
        if (idx >= 0 && taken)
            taken[idx] = 1;
        if (idx >= nslot)
            nslot = idx + 1;
        if (path(p, "metadata.deletionTimestamp"))
            continue; /* going away: its index is not free yet */
        inplace += restarts_in_place(p);
        if (strcmp(phase, "Running") == 0) {
            active++;
        } else if (strcmp(phase, "Pending") == 0) {
            pending++;
            const char *u = unschedulable(p);
            if (u) {
                unsched++;
                unsched_msg = u;
            }
        } else if (strcmp(phase, "Succeeded") == 0) {
            succeeded++;
        } else if (strcmp(phase, "Failed") == 0) {
            const char *treason = NULL;
            int code = exit_code(p, &treason);
            const char *preason = json_string_value(path(p, "status.reason"));
            int seen = has_uid(handled, uid);
            if (seen)
                json_array_append_new(keep, json_string(uid));
            if (strcmp(policy, "Never") == 0) {
                never_failed++;
                if (!seen) {
                    failed++;
                    counted_now++;
                    json_array_append_new(keep, json_string(uid));
                    event(pl, "Warning", "ExitedWithCode",
                          "Pod %s failed (exit code %d%s%s); restartPolicy "
                          "Never: not replaced",
                          json_string_value(path(p, "metadata.name")), code,
                          preason ? ", " : "", preason ? preason : "");
                }
                continue;
            }
            int retry = el__k8s_retryable(code, preason);
            if (!seen) {
                if (!retry && strcmp(policy, "ExitCode") == 0) {
                    failed++;
                    counted_now++;
                }
                restarts++;
                replaced++;
                json_array_append_new(keep, json_string(uid));
                event(pl, retry ? "Normal" : "Warning", "ExitedWithCode",
                      "Pod %s exited with code %d (%s%s%s): %s",
                      json_string_value(path(p, "metadata.name")), code,
                      treason ? treason : "Error", preason ? ", " : "",
                      preason ? preason : "",
                      retry ? "retryable, replaced"
                            : "counts against backoffLimit, replaced");
            }
            /* its index stays taken until the delete is seen */
            remove_pod(pl, p, "replace failed pod", -1);
        }
    }
    json_object_set_new(st, "handledFailures", keep);

    /* ---- status counts ---- */
    json_t *rs = json_object_get(st, "replicaStatuses");
    if (!json_is_object(rs)) {
        rs = json_object();
        json_object_set_new(st, "replicaStatuses", rs);
    }
    json_object_set_new(rs, "Worker",
                        json_pack("{s:i,s:i,s:I}", "active", active,
                                  "succeeded", succeeded, "failed",
                                  (json_int_t)failed));
    json_object_set_new(st, "replicas", json_integer(active));
    json_object_set_new(st, "restarts", json_integer(restarts));

    if (finished) {
        /* cleanPodPolicy, then ttlSecondsAfterFinished */
        for (size_t i = 0; i < npods; i++) {
            json_t *p = json_array_get(pods, i);
            const char *ph = json_string_value(path(p, "status.phase"));
            if (path(p, "metadata.deletionTimestamp"))
                continue;
            int running =
                !ph || strcmp(ph, "Running") == 0 || strcmp(ph, "Pending") == 0;
            if (strcmp(clean, "All") == 0 ||
                (strcmp(clean, "Running") == 0 && running))
                remove_pod(pl, p, "cleanPodPolicy", -1);
        }
        long long ttl = jint(job, "spec.ttlSecondsAfterFinished", -1);
        double done = el__k8s_parse_time(jstr(st, "completionTime"));
        if (ttl >= 0 && done >= 0) {
            if (o->now >= done + (double)ttl)
                pl->delete_job = 1;
            else
                pl->requeue_s = done + (double)ttl - o->now;
        }
        free(taken);
        return 0;
    }

    /* ---- terminal decisions ---- */
    const char *fail_reason = NULL;
    long long ads = jint(job, "spec.activeDeadlineSeconds", -1);
    double start = el__k8s_parse_time(jstr(st, "startTime"));
    long long budget = strcmp(policy, "ExitCode") == 0 ? failed
                       : strcmp(policy, "Never") == 0  ? 0
                                                       : inplace + failed;
    int can_run = (int)desired - unsched - never_failed;
    if (budget > backoff) {
        fail_reason = "BackoffLimitExceeded";
        snprintf(msg, sizeof msg,
                 "ElasticJob %s has failed because %lld Worker failure(s) "
                 "exceed backoffLimit %lld.",
                 name, budget, backoff);
    } else if (ads > 0 && start >= 0 && o->now >= start + (double)ads) {
        fail_reason = "DeadlineExceeded";
        snprintf(msg, sizeof msg,
                 "ElasticJob %s was active longer than activeDeadlineSeconds "
                 "%lld.",
                 name, ads);
    } else if (never_failed && can_run < min) {
        fail_reason = "BelowMinReplicas";
        snprintf(msg, sizeof msg,
                 "ElasticJob %s has failed: only %d of minReplicas %lld "
                 "Worker replicas can run (%d failed with restartPolicy "
                 "Never).",
                 name, can_run, min, never_failed);
    } else if (can_run < min && succeeded == 0) {
        double since = el__k8s_parse_time(jstr(st, "belowMinSince"));
        if (since < 0) {
            json_object_set_new(st, "belowMinSince", json_string(now));
            since = o->now;
        }
        if (o->now - since >= o->unschedulable_s) {
            fail_reason = "BelowMinReplicas";
            snprintf(msg, sizeof msg,
                     "ElasticJob %s has failed: only %d of minReplicas %lld "
                     "Worker replicas can run for %.0f s; %d Pending cannot "
                     "be scheduled: %s",
                     name, can_run, min, o->now - since, unsched,
                     unsched_msg ? unsched_msg : "?");
        } else {
            pl->requeue_s = since + o->unschedulable_s - o->now + 0.1;
        }
    } else {
        json_object_del(st, "belowMinSince");
    }
    if (fail_reason) {
        finish(st, "Failed", fail_reason, msg, now);
        json_object_set_new(st, "state", json_string("Failed"));
        event(pl, "Warning", "ElasticJobFailed", "%s", msg);
        if (strcmp(fail_reason, "DeadlineExceeded") == 0 ||
            strcmp(clean, "None") != 0)
            for (size_t i = 0; i < npods; i++) {
                json_t *p = json_array_get(pods, i);
                const char *ph = json_string_value(path(p, "status.phase"));
                if (!path(p, "metadata.deletionTimestamp") && ph &&
                    (strcmp(ph, "Running") == 0 || strcmp(ph, "Pending") == 0))
                    remove_pod(pl, p, "job failed", -1);
            }
        free(taken);
        return 0;
    }
    if (ads > 0 && start >= 0) {
        double left = start + (double)ads - o->now + 0.1;
        if (pl->requeue_s <= 0 || left < pl->requeue_s)
            pl->requeue_s = left;
    }
    if (succeeded > 0 && active == 0) {
        snprintf(msg, sizeof msg, "ElasticJob %s successfully completed.",
                 name);
        finish(st, "Succeeded", "ElasticJobSucceeded", msg, now);
        json_object_set_new(st, "state", json_string("Succeeded"));
        event(pl, "Normal", "ElasticJobSucceeded", "%s", msg);
        for (size_t i = 0; i < npods; i++) {
            json_t *p = json_array_get(pods, i);
            const char *ph = json_string_value(path(p, "status.phase"));
            if (!path(p, "metadata.deletionTimestamp") && ph &&
                strcmp(ph, "Pending") == 0)
                remove_pod(pl, p, "job succeeded", -1);
        }
        free(taken);
        return 0;
    }

    /* ---- scale: create the free indices below desired, delete above ---- */
    long long prev = jint(st, "desired", desired);
    int lost = 0;
    if (succeeded == 0 && taken) {
        for (int i = 0; i < desired; i++) {
            if (taken[i])
                continue;
            json_array_append_new(pl->create,
                                  pod_for(job, i, (int)min, (int)max, policy));
            if (start >= 0 && i < prev)
                lost++;
        }
    }
    if (start < 0 && json_array_size(pl->create))
        json_object_set_new(st, "startTime", json_string(now));
    if (desired > prev)
        event(pl, "Normal", "ScaledUp",
              "ElasticJob %s scaled up from %lld to %lld Worker replicas", name,
              prev, desired);
    else if (desired < prev)
        event(
            pl, "Normal", "ScaledDown",
            "ElasticJob %s scaled down from %lld to %lld Worker replicas: deleting the highest indices gracefully",
            name, prev, desired);
    for (size_t i = 0; i < npods; i++) {
        json_t *p = json_array_get(pods, i);
        int idx = pod_index(p);
        const char *ph = json_string_value(path(p, "status.phase"));
        if (idx >= desired && !path(p, "metadata.deletionTimestamp") &&
            (!ph || strcmp(ph, "Failed") != 0))
            remove_pod(pl, p, "scale down", -1);
    }
    size_t i;
    json_t *s;
    json_array_foreach(svcs, i, s)
    {
        const char *sn = json_string_value(s);
        const char *dash = sn ? strrchr(sn, '-') : NULL;
        int idx = dash ? atoi(dash + 1) : -1;
        if (idx >= desired && (idx >= MAX_INDEX || !taken || !taken[idx]))
            json_array_append_new(pl->services, json_string(sn));
    }
    json_object_set_new(st, "desired", json_integer(desired));

    /* ---- conditions ---- */
    if (replaced || lost) {
        snprintf(msg, sizeof msg,
                 "ElasticJob %s is restarting because %d Worker replica(s) "
                 "failed.",
                 name, replaced + lost);
        if (replaced || !cond_true(st, "Restarting"))
            event(pl, "Warning", "ElasticJobRestarting", "%s", msg);
        set_cond(st, "Running", "False", "ElasticJobRestarting", msg, now);
        set_cond(st, "Restarting", "True", "ElasticJobRestarting", msg, now);
        json_object_set_new(st, "state", json_string("Restarting"));
    } else if (active >= min) {
        snprintf(msg, sizeof msg, "ElasticJob %s is running.", name);
        if (!cond_true(st, "Running"))
            event(pl, "Normal", "ElasticJobRunning",
                  "ElasticJob %s is running with %d Worker replicas.", name,
                  active);
        set_cond(st, "Restarting", "False", "ElasticJobRunning", msg, now);
        set_cond(st, "Running", "True", "ElasticJobRunning", msg, now);
        json_object_set_new(st, "state", json_string("Running"));
    } else if (!json_object_get(st, "state")) {
        json_object_set_new(st, "state", json_string("Created"));
    }
    (void)counted_now;
    (void)nslot;
    (void)pending;
    free(taken);
    return 0;
}
