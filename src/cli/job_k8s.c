/* job_k8s.c -- the kubernetes scheduler of the job verbs: an `elrun submit
 * -s kubernetes` job is an ElasticJob (deploy/kubernetes/crd.yaml) that
 * `elrun k8s-controller` runs; every verb asks the API server (src/k8s's
 * client: a kubeconfig, $KUBECONFIG or the pod's service account, as the
 * controller), nothing is kept on this machine.
 *
 *   handle      kubernetes://elrun/NAMESPACE:NAME (TorchX's
 *               kubernetes://session/namespace:name)
 *   submit      POST the ElasticJob (labelled app.kubernetes.io/managed-by=
 *               elrun); with no etcd given, then an etcd Pod and Service
 *               NAME-etcd owned by the job (the rendezvous never lives on a
 *               worker pod); --dryrun prints them as one JSON document that
 *               `kubectl apply -f -` takes
 *   status      the job's .status and its pods (replica-index labels)
 *   logs        each worker pod's log through /log (polled once a second
 *               with -f)
 *   cancel      DELETE with propagationPolicy Foreground: returns once the
 *               job and everything it owns (pods, services, etcd) is gone
 *   list        the ElasticJobs labelled managed-by=elrun, in every
 *               namespace (or the context's when that is forbidden)
 *
 * Errors are one line: what was asked of the API server and its answer
 * (or why it could not be reached), exit 2 as the other schedulers' usage
 * errors.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/job_cli.h"
#include "elrun/err.h"
#include "elrun/log.h"
#include "k8s/k8s_int.h"

#define MANAGED_BY "app.kubernetes.io/managed-by"
#define JOBS_PATH "/apis/" EL_K8S_API
#define ETCD_IMAGE "quay.io/coreos/etcd:v3.5.9"
/* <name>-worker-<i> and its Service are DNS-1035 labels (63 at most). */
#define NAME_MAX_LEN 48

static const char *jstr(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

/* ---- the API server (one connection per command) ------------------------ */

static struct el__k8s api;
static int api_open_rc = 1; /* 1: not tried yet */

/* 0 with the client ready (configured once per command), else nonzero
 * with api.err saying why. */
static int api_try(long timeout_ms)
{
    if (api_open_rc == 1) {
        api_open_rc = el__k8s_open(&api, NULL);
        api.timeout_ms = timeout_ms;
    }
    return api_open_rc;
}

/* 0 with the client ready, or a usage line (2) saying why not. */
static int api_get(const char *verb)
{
    if (api_try(15000))
        return cjob_usage(verb, "kubernetes: %s", api.err);
    return 0;
}

/* One request; 0 with *http and *resp, or a usage line (2) when the API
 * server could not be reached. */
static int req(const char *verb, const char *method, const char *path,
               const json_t *body, long *http, json_t **resp)
{
    int rc = api_get(verb);
    if (rc)
        return rc;
    if (el__k8s_req(&api, method, path, body, http, resp))
        return cjob_usage(verb,
                          "cannot reach the Kubernetes API server %s: %s "
                          "(check KUBECONFIG and that the cluster is up)",
                          api.server, api.err);
    return 0;
}

static int api_fail(const char *verb, const char *what, long http,
                    const json_t *resp)
{
    char m[600];
    return cjob_usage(verb, "%s: %s (HTTP %ld)", what,
                      el__k8s_status_msg(resp, http, m, sizeof m), http);
}

/* ---- --cfg ---------------------------------------------------------------- */

/* 1 with the value of key in out when --cfg gives it (not empty), else 0. */
static int cfg(const char *cfgs, const char *key, char *out, size_t cap)
{
    char k[64];
    snprintf(k, sizeof k, "%s", key);
    for (char *q = k; *q; q++)
        if (*q == '_')
            *q = '-';
    return el_job_cfg_get(cfgs, k, out, cap) && *out;
}

static int k8s_check_cfg(const char *cfgs, char *err, size_t errlen)
{
    if (el_job_check_cfg("kubernetes", cfgs, err, errlen))
        return EL_EUSAGE;
    char img[512];
    if (!cfg(cfgs, "image", img, sizeof img)) {
        snprintf(err, errlen,
                 "-s kubernetes needs --cfg image=IMAGE: the workers' image, "
                 "whose entrypoint is elrun (deploy/kubernetes/Dockerfile)");
        return EL_EUSAGE;
    }
    char ns[300];
    if (cfg(cfgs, "namespace", ns, sizeof ns)) {
        size_t l = strlen(ns), ok = l > 0 && l <= 63;
        for (size_t i = 0; i < l; i++)
            ok &= islower((unsigned char)ns[i]) ||
                  isdigit((unsigned char)ns[i]) || ns[i] == '-';
        if (!ok || ns[0] == '-' || ns[l - 1] == '-') {
            snprintf(err, errlen,
                     "--cfg namespace='%s' is not a Kubernetes namespace "
                     "name (lower-case letters, digits and '-', 63 at most)",
                     ns);
            return EL_EUSAGE;
        }
    }
    char ep[300];
    if (cfg(cfgs, "rdzv_endpoint", ep, sizeof ep)) {
        const char *c = strrchr(ep, ':');
        if (!c || c == ep || !c[1] || c[1 + strspn(c + 1, "0123456789")]) {
            snprintf(err, errlen,
                     "--cfg rdzv_endpoint='%s' is not HOST:PORT of an etcd "
                     "the pods reach (e.g. etcd-service:2379)",
                     ep);
            return EL_EUSAGE;
        }
    }
    return 0;
}

/* ---- submit --------------------------------------------------------------- */

/* A DNS-1035 label from the job id: lower case, [a-z0-9-], a letter first,
 * short enough for <name>-worker-<i>; the id's random suffix is kept. */
static void k8s_name(const char *id, char *out, size_t cap)
{
    char t[EL_JOB_ID_MAX + 2];
    size_t n = 0;
    if (!isalpha((unsigned char)id[0]))
        t[n++] = 'j';
    for (size_t i = 0; id[i] && n < sizeof t - 1; i++) {
        char c = (char)tolower((unsigned char)id[i]);
        t[n++] = isalnum((unsigned char)c) ? c : '-';
    }
    t[n] = 0;
    const char *dash = strrchr(t, '-'); /* the random suffix */
    if (n > NAME_MAX_LEN && dash) {
        size_t sl = strlen(dash), keep = NAME_MAX_LEN - sl;
        memmove(t + keep, dash, sl + 1);
    }
    t[NAME_MAX_LEN] = 0;
    size_t l = strlen(t);
    while (l && t[l - 1] == '-')
        t[--l] = 0;
    snprintf(out, cap, "%.*s", NAME_MAX_LEN, t);
}

static json_t *kv_labels(const char *name)
{
    return json_pack("{s:s, s:s}", MANAGED_BY, "elrun", "elrun/job", name);
}

static json_t *resources(const char *cfgs)
{
    char v[128];
    json_t *req = json_object(), *lim = json_object();
    if (cfg(cfgs, "cpu", v, sizeof v))
        json_object_set_new(req, "cpu", json_string(v));
    if (cfg(cfgs, "memory", v, sizeof v)) {
        json_object_set_new(req, "memory", json_string(v));
        json_object_set_new(lim, "memory", json_string(v));
    }
    if (cfg(cfgs, "gpu", v, sizeof v))
        json_object_set_new(lim, "nvidia.com/gpu", json_string(v));
    json_t *r = json_object();
    if (json_object_size(req))
        json_object_set(r, "requests", req);
    if (json_object_size(lim))
        json_object_set(r, "limits", lim);
    json_decref(req);
    json_decref(lim);
    return r;
}

/* The ElasticJob: the controller puts --rdzv_backend=etcd,
 * --rdzv_endpoint, --rdzv_id=NAME and --nnodes=MIN:MAX before args. */
static json_t *elastic_job(const struct el_job_spec *js, const char *name,
                           const char *ns, const char *endpoint)
{
    char img[512], sa[256], v[64];
    cfg(js->cfg, "image", img, sizeof img);
    json_t *args = json_array(), *env = json_array();
    snprintf(v, sizeof v, "--nproc-per-node=%d", js->size.nproc);
    json_array_append_new(args, json_string(v));
    for (int i = 0; i < js->n_launcher; i++)
        json_array_append_new(args, json_string(js->launcher[i]));
    for (int i = 0; i < js->n_env; i++) {
        const char *eq = strchr(js->env[i], '=');
        json_array_append_new(env, json_pack("{s:s%, s:s}", "name", js->env[i],
                                             (size_t)(eq - js->env[i]), "value",
                                             eq + 1));
    }
    json_t *ctr = json_pack("{s:s, s:s, s:o, s:o, s:o}", "name",
                            EL_K8S_WORKER_CONTAINER, "image", img, "args", args,
                            "env", env, "resources", resources(js->cfg));
    json_t *pod = json_pack("{s:[o]}", "containers", ctr);
    if (cfg(js->cfg, "service_account", sa, sizeof sa))
        json_object_set_new(pod, "serviceAccountName", json_string(sa));
    json_t *worker =
        json_pack("{s:i, s:s, s:{s:{s:o}, s:o}}", "replicas",
                  js->size.max_nodes, "restartPolicy", "ExitCode", "template",
                  "metadata", "labels", kv_labels(name), "spec", pod);
    json_t *spec =
        json_pack("{s:s, s:i, s:i, s:{s:o}}", "rdzvEndpoint", endpoint,
                  "minReplicas", js->size.min_nodes, "maxReplicas",
                  js->size.max_nodes, "replicaSpecs", "Worker", worker);
    if (js->max_retries > 0)
        json_object_set_new(spec, "backoffLimit",
                            json_integer(js->max_retries));
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:o, s:{s:s}}, s:o}",
                     "apiVersion", EL_K8S_API, "kind", "ElasticJob", "metadata",
                     "name", name, "namespace", ns, "labels", kv_labels(name),
                     "annotations", "elrun/name", js->name, "spec", spec);
}

/* NAME-etcd: a Service and a Pod running one etcd, as
 * deploy/kubernetes/etcd.yaml; owned by the job once it exists. */
static json_t *etcd_service(const char *name, const char *ns)
{
    char en[128];
    snprintf(en, sizeof en, "%s-etcd", name);
    return json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:o}, s:{s:[{s:s, s:i, s:i}], s:{s:s}}}",
        "apiVersion", "v1", "kind", "Service", "metadata", "name", en,
        "namespace", ns, "labels", kv_labels(name), "spec", "ports", "name",
        "etcd-client", "port", 2379, "targetPort", 2379, "selector",
        "elrun/etcd", en);
}

static json_t *etcd_pod(const char *name, const char *ns, const char *cfgs)
{
    char en[128], img[512];
    snprintf(en, sizeof en, "%s-etcd", name);
    if (!cfg(cfgs, "etcd_image", img, sizeof img))
        snprintf(img, sizeof img, "%s", ETCD_IMAGE);
    json_t *labels = kv_labels(name);
    json_object_set_new(labels, "elrun/etcd", json_string(en));
    return json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:o}, s:{s:s, s:[{s:s, s:s, s:[s,s,s,s,s,"
        "s,s,s,s,s,s], s:[{s:i}], s:[{s:s, s:s}]}], s:[{s:s, s:{}}]}}",
        "apiVersion", "v1", "kind", "Pod", "metadata", "name", en, "namespace",
        ns, "labels", labels, "spec", "restartPolicy", "Always", "containers",
        "name", "etcd", "image", img, "command", "/usr/local/bin/etcd",
        "--data-dir", "/var/lib/etcd", "--listen-client-urls",
        "http://0.0.0.0:2379", "--advertise-client-urls", "http://0.0.0.0:2379",
        "--listen-peer-urls", "http://127.0.0.1:2380",
        "--initial-cluster-state", "new", "ports", "containerPort", 2379,
        "volumeMounts", "name", "data", "mountPath", "/var/lib/etcd", "volumes",
        "name", "data", "emptyDir");
}

static void own(json_t *obj, const json_t *job)
{
    const json_t *md = json_object_get(job, "metadata");
    json_object_set_new(
        json_object_get(obj, "metadata"), "ownerReferences",
        json_pack("[{s:s, s:s, s:s, s:s, s:b, s:b}]", "apiVersion", EL_K8S_API,
                  "kind", "ElasticJob", "name", jstr(md, "name"), "uid",
                  jstr(md, "uid"), "controller", 1, "blockOwnerDeletion", 1));
}

static int create(const char *ns, const char *res, const char *api_base,
                  const json_t *obj, json_t **made)
{
    char path[512], what[400];
    long http;
    json_t *r = NULL;
    snprintf(path, sizeof path, "%s/namespaces/%s/%s", api_base, ns, res);
    int rc = req("submit", "POST", path, obj, &http, &r);
    if (rc)
        return rc;
    if (http != 201 && http != 200) {
        snprintf(what, sizeof what, "kubernetes: creating %s %s/%s failed", res,
                 ns, jstr(json_object_get(obj, "metadata"), "name"));
        rc = api_fail("submit", what, http, r);
        json_decref(r);
        return rc;
    }
    if (made)
        *made = r;
    else
        json_decref(r);
    return 0;
}

static int k8s_submit(const struct el_job_spec *js, json_t *job, char *id,
                      size_t idcap, int dryrun)
{
    char name[64], ns[300], ep[300];
    (void)job;
    k8s_name(id, name, sizeof name);
    int own_etcd = 0;
    if (cfg(js->cfg, "rdzv_endpoint", ep, sizeof ep)) {
    } else if (strcmp(js->rdzv_backend, "etcd") == 0) {
        snprintf(ep, sizeof ep, "%s", js->rdzv_endpoint);
    } else {
        snprintf(ep, sizeof ep, "%s-etcd:2379", name);
        own_etcd = 1;
    }
    if (!cfg(js->cfg, "namespace", ns, sizeof ns)) {
        if (dryrun && api_try(15000))
            snprintf(ns, sizeof ns, "default");
        else if (api_get("submit"))
            return 2;
        else
            snprintf(ns, sizeof ns, "%s",
                     *api.namespace_ ? api.namespace_ : "default");
    }
    json_t *ej = elastic_job(js, name, ns, ep);
    json_t *svc = own_etcd ? etcd_service(name, ns) : NULL;
    json_t *pod = own_etcd ? etcd_pod(name, ns, js->cfg) : NULL;
    int rc = 0;
    if (dryrun) {
        json_t *doc =
            own_etcd ? json_pack("{s:s, s:s, s:[O, O, O]}", "apiVersion", "v1",
                                 "kind", "List", "items", ej, svc, pod)
                     : json_incref(ej);
        char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", s ? s : "{}");
        free(s);
        json_decref(doc);
        fprintf(stderr,
                "elrun submit: dry run: would create ElasticJob %s/%s%s "
                "(kubectl apply -f - takes this)\n",
                ns, name,
                own_etcd ? " and, owned by it, the etcd Service and Pod it "
                           "rendezvous on"
                         : "");
        goto out;
    }
    json_t *made = NULL;
    if ((rc = create(ns, "elasticjobs", JOBS_PATH, ej, &made)))
        goto out;
    if (own_etcd) {
        own(svc, made);
        own(pod, made);
        if ((rc = create(ns, "services", "/api/v1", svc, NULL)) == 0)
            rc = create(ns, "pods", "/api/v1", pod, NULL);
        if (rc) { /* no job without its rendezvous */
            char path[512];
            long http;
            snprintf(path, sizeof path, "%s/namespaces/%s/elasticjobs/%s",
                     JOBS_PATH, ns, name);
            json_t *r = NULL;
            el__k8s_req(&api, "DELETE", path, NULL, &http, &r);
            json_decref(r);
        }
    }
    json_decref(made);
    if (rc == 0)
        snprintf(id, idcap, "%s:%s", ns, name);
out:
    json_decref(ej);
    json_decref(svc);
    json_decref(pod);
    return rc;
}

/* ---- open, status --------------------------------------------------------- */

/* NS and NAME of an id NS:NAME. */
static void split_id(const char *id, char *ns, size_t nscap, char *name,
                     size_t namecap)
{
    const char *c = strchr(id, ':');
    snprintf(ns, nscap, "%.*s", c ? (int)(c - id) : 0, id);
    snprintf(name, namecap, "%s", c ? c + 1 : id);
}

/* The job as the API server has it now (open, and a waiting verb asks
 * again and again); NULL with err (and *http, 0 if there was no answer) if
 * it cannot be read. */
static json_t *fetch_job(const struct cjob *j, char *err, size_t errlen,
                         long *http)
{
    char ns[256], name[256], path[700], m[600];
    split_id(j->id, ns, sizeof ns, name, sizeof name);
    snprintf(path, sizeof path, "%s/namespaces/%s/elasticjobs/%s", JOBS_PATH,
             ns, name);
    json_t *r = NULL;
    if (el__k8s_req(&api, "GET", path, NULL, http, &r)) {
        snprintf(err, errlen,
                 "cannot reach the Kubernetes API server %s: %s (check "
                 "KUBECONFIG and that the cluster is up)",
                 api.server, api.err);
        return NULL;
    }
    if (*http != 200 || !json_is_object(r)) {
        snprintf(err, errlen,
                 "kubernetes: reading ElasticJob %s/%s: %s (HTTP %ld)", ns,
                 name, el__k8s_status_msg(r, *http, m, sizeof m), *http);
        json_decref(r);
        return NULL;
    }
    return r;
}

static int k8s_open(const char *verb, const char *handle,
                    const struct el_job_handle *h, struct cjob *j)
{
    char ns[256], name[256], err[1600];
    long http;
    int rc = api_get(verb);
    if (rc)
        return rc;
    split_id(j->id, ns, sizeof ns, name, sizeof name);
    json_t *r = fetch_job(j, err, sizeof err, &http);
    if (!r && http == 404)
        return cjob_usage(verb,
                          "no job %s: the API server %s has no ElasticJob "
                          "%s/%s (elrun list -s kubernetes shows the jobs)",
                          handle, api.server, ns, name);
    if (!r)
        return cjob_usage(verb, "%s", err);
    j->spec = r;
    j->dir[0] = 0;
    (void)h;
    return 0;
}

/* The ElasticJob's state (its .status.state) as a job state. */
static int job_state(const json_t *ej)
{
    const char *s = jstr(json_object_get(ej, "status"), "state");
    if (!*s)
        return EL_JOB_SUBMITTED;
    if (strcmp(s, "Created") == 0)
        return EL_JOB_PENDING;
    if (strcmp(s, "Running") == 0 || strcmp(s, "Restarting") == 0)
        return EL_JOB_RUNNING;
    if (strcmp(s, "Succeeded") == 0)
        return EL_JOB_SUCCEEDED;
    if (strcmp(s, "Failed") == 0)
        return EL_JOB_FAILED;
    return EL_JOB_UNKNOWN;
}

/* The job's worker pods (0 with *pods, or -1 with err). */
static int job_pods(const struct cjob *j, json_t **pods, char *err,
                    size_t errlen)
{
    char ns[256], name[256], sel[600], esc[900], path[1400];
    split_id(j->id, ns, sizeof ns, name, sizeof name);
    snprintf(sel, sizeof sel, "group-name=%s,job-name=%s", EL_K8S_GROUP, name);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods?labelSelector=%s",
             ns, el__k8s_escape(sel, esc, sizeof esc));
    long http;
    json_t *r = NULL;
    char m[600];
    *pods = NULL;
    if (el__k8s_req(&api, "GET", path, NULL, &http, &r)) {
        snprintf(err, errlen, "cannot reach the Kubernetes API server %s: %s",
                 api.server, api.err);
        return -1;
    }
    if (http != 200) {
        snprintf(err, errlen, "kubernetes: listing the pods of %s/%s: %s", ns,
                 name, el__k8s_status_msg(r, http, m, sizeof m));
        json_decref(r);
        return -1;
    }
    *pods = json_incref(json_object_get(r, "items"));
    json_decref(r);
    return 0;
}

static int pod_index(const json_t *pod)
{
    const char *ix =
        jstr(json_object_get(json_object_get(pod, "metadata"), "labels"),
             "replica-index");
    return *ix ? atoi(ix) : -1;
}

/* The worker container's last termination, or NULL. */
static const json_t *terminated(const json_t *pod)
{
    const json_t *cs;
    size_t i;
    json_array_foreach(
        json_object_get(json_object_get(pod, "status"), "containerStatuses"), i,
        cs)
    {
        const json_t *t =
            json_object_get(json_object_get(cs, "state"), "terminated");
        if (t)
            return t;
    }
    return NULL;
}

static int k8s_status(const struct cjob *j, struct cjob_status *st, char *err,
                      size_t errlen)
{
    memset(st, 0, sizeof *st);
    long http;
    json_t *ej = fetch_job(j, err, errlen, &http);
    if (!ej)
        return -1;
    const json_t *status = json_object_get(ej, "status");
    st->root = -1;
    st->state = job_state(ej);
    st->restarts = (int)json_integer_value(json_object_get(status, "restarts"));
    /* the message of the latest condition (the Failed one says why) */
    const json_t *c, *last = NULL;
    size_t i;
    json_array_foreach(json_object_get(status, "conditions"), i, c) last = c;
    if (last)
        snprintf(st->msg, sizeof st->msg, "%s: %s", jstr(last, "type"),
                 jstr(last, "message"));
    json_t *pods;
    if (job_pods(j, &pods, err, errlen)) {
        json_decref(ej);
        return -1;
    }
    const json_t *w = json_object_get(
        json_object_get(json_object_get(ej, "spec"), "replicaSpecs"), "Worker");
    st->nrep = (int)json_integer_value(json_object_get(w, "replicas"));
    const json_t *p;
    json_array_foreach(pods, i, p) if (pod_index(p) + 1 > st->nrep) st->nrep =
        pod_index(p) + 1;
    int cap = (int)(sizeof st->rep / sizeof st->rep[0]);
    if (st->nrep > cap)
        st->nrep = cap;
    for (int k = 0; k < st->nrep; k++) {
        st->rep[k].exitcode = -1000;
        st->rep[k].state =
            el_job_state_final(st->state) ? EL_JOB_UNKNOWN : EL_JOB_PENDING;
    }
    json_array_foreach(pods, i, p)
    {
        int k = pod_index(p);
        if (k < 0 || k >= st->nrep)
            continue;
        struct cjob_replica *r = &st->rep[k];
        const char *phase = jstr(json_object_get(p, "status"), "phase");
        snprintf(r->host, sizeof r->host, "%s",
                 jstr(json_object_get(p, "spec"), "nodeName"));
        const json_t *t = terminated(p);
        if (t)
            r->exitcode =
                (int)json_integer_value(json_object_get(t, "exitCode"));
        r->state = strcmp(phase, "Running") == 0     ? EL_JOB_RUNNING
                   : strcmp(phase, "Succeeded") == 0 ? EL_JOB_SUCCEEDED
                   : strcmp(phase, "Failed") == 0    ? EL_JOB_FAILED
                                                     : EL_JOB_PENDING;
        if (r->state == EL_JOB_FAILED && st->root < 0 &&
            st->state == EL_JOB_FAILED) {
            st->root = k;
            st->root_rank = -1;
            st->root_exit = r->exitcode;
            snprintf(st->root_host, sizeof st->root_host, "%s", r->host);
            snprintf(st->root_time, sizeof st->root_time, "%s",
                     jstr(t, "finishedAt"));
            const char *why = jstr(t, "message");
            st->root_msg = strdup(*why ? why : jstr(t, "reason"));
        }
    }
    json_decref(pods);
    json_decref(ej);
    return 0;
}

/* ---- logs ----------------------------------------------------------------- */

struct podlog {
    char uid[64];
    size_t printed; /* lines of this pod's log printed so far */
};

/* Print pod k's log lines after the first pl->printed (the last tail ones
 * on the first call when tail > 0).  0, 1 if the pod has no log yet, or -1
 * with err. */
static int pod_log(const char *ns, const char *name, int k, long tail,
                   struct podlog *pl, const struct cjob_logsel *ls, char *err,
                   size_t errlen)
{
    char path[800], m[600];
    snprintf(path, sizeof path,
             "/api/v1/namespaces/%s/pods/%s-worker-%d/log?container=%s", ns,
             name, k, EL_K8S_WORKER_CONTAINER);
    long http;
    struct el__k8s_buf b = {0};
    if (el__k8s_req_text(&api, "GET", path, NULL, &http, &b)) {
        snprintf(err, errlen, "cannot reach the Kubernetes API server %s: %s",
                 api.server, api.err);
        return -1;
    }
    if (http != 200) { /* not there yet, or still being created */
        json_t *r = b.p ? json_loads(b.p, 0, NULL) : NULL;
        snprintf(err, errlen, "%s", el__k8s_status_msg(r, http, m, sizeof m));
        json_decref(r);
        free(b.p);
        return 1;
    }
    /* the lines (a \r progress line shows its last state), kept by ls */
    size_t nl = 0, capl = 0, all = 0;
    char **lines = NULL;
    for (char *s = b.p, *e; s && *s; s = e ? e + 1 : NULL) {
        e = strchr(s, '\n');
        if (!e)
            break; /* unfinished: next time */
        *e = 0;
        all++;
        if (all <= pl->printed)
            continue;
        char *cr = strrchr(s, '\r');
        if (!cjob_log_keep(cr ? cr + 1 : s, (void *)ls))
            continue;
        if (nl == capl) {
            capl = capl ? capl * 2 : 256;
            char **nv = realloc(lines, capl * sizeof *nv);
            if (!nv)
                break;
            lines = nv;
        }
        lines[nl++] = cr ? cr + 1 : s;
    }
    size_t from = tail > 0 && (size_t)tail < nl ? nl - (size_t)tail : 0;
    for (size_t i = from; i < nl; i++)
        cjob_log_emit(ls, k, lines[i]);
    fflush(stdout);
    pl->printed = all;
    free(lines);
    free(b.p);
    return 0;
}

static int k8s_logs(struct cjob *j, int replica, int follow, long tail,
                    const struct cjob_logsel *ls)
{
    char ns[256], name[256], err[1600];
    split_id(j->id, ns, sizeof ns, name, sizeof name);
    struct cjob_status st;
    if (k8s_status(j, &st, err, sizeof err))
        return cjob_usage("logs", "%s", err);
    int n = st.nrep;
    cjob_status_free(&st);
    if (replica >= 0 && replica >= n)
        return cjob_usage("logs",
                          "job %s has replicas 0 to %d; there is no %s/%d",
                          j->id, n - 1, ls->role, replica);
    struct podlog *pl = calloc((size_t)(n > 0 ? n : 1), sizeof *pl);
    if (!pl)
        return 1;
    int rc = 0, last = 0;
    for (int round = 0;; round++) {
        json_t *pods = NULL;
        if (job_pods(j, &pods, err, sizeof err)) {
            rc = cjob_usage("logs", "%s", err);
            break;
        }
        const json_t *p;
        size_t i;
        json_array_foreach(pods, i, p)
        {
            int k = pod_index(p);
            if (k < 0 || k >= n || (replica >= 0 && k != replica))
                continue;
            const char *uid = jstr(json_object_get(p, "metadata"), "uid");
            if (strcmp(uid, pl[k].uid) != 0) { /* a new pod: its own log */
                snprintf(pl[k].uid, sizeof pl[k].uid, "%s", uid);
                pl[k].printed = 0;
            }
            if (pod_log(ns, name, k, round ? 0 : tail, &pl[k], ls, err,
                        sizeof err) < 0) {
                rc = cjob_usage("logs", "%s", err);
                break;
            }
        }
        json_decref(pods);
        if (!follow || rc || last)
            break;
        /* ended: one more pass drains what came before the end */
        long http;
        json_t *r = fetch_job(j, err, sizeof err, &http);
        if (!r)
            break; /* deleted (cancelled): nothing more comes */
        last = el_job_state_final(job_state(r));
        json_decref(r);
        if (!last)
            sleep(1); /* /log?follow is one stream per pod: poll instead */
    }
    free(pl);
    return rc;
}

/* ---- cancel, list, url ------------------------------------------------------ */

static int k8s_cancel(struct cjob *j)
{
    char ns[256], name[256], path[700], what[800];
    split_id(j->id, ns, sizeof ns, name, sizeof name);
    snprintf(path, sizeof path, "%s/namespaces/%s/elasticjobs/%s", JOBS_PATH,
             ns, name);
    json_t *opts =
        json_pack("{s:s, s:s, s:s}", "kind", "DeleteOptions", "apiVersion",
                  "v1", "propagationPolicy", "Foreground");
    long http;
    json_t *r = NULL;
    int rc = req("cancel", "DELETE", path, opts, &http, &r);
    json_decref(opts);
    if (rc)
        return rc;
    if (http != 200 && http != 202 && http != 404) {
        snprintf(what, sizeof what, "kubernetes: deleting ElasticJob %s/%s", ns,
                 name);
        rc = api_fail("cancel", what, http, r);
        json_decref(r);
        return rc;
    }
    json_decref(r);
    /* Foreground: the job stays (deletionTimestamp set) until the garbage
     * collector deleted what it owns; wait for that, as the other
     * schedulers' cancel waits for the processes. */
    for (int i = 0; i < 1200; i++) {
        r = NULL;
        if (el__k8s_req(&api, "GET", path, NULL, &http, &r)) {
            el_log(EL_LOG_ERROR, "cancel %s: %s", j->id, api.err);
            return 1;
        }
        json_decref(r);
        if (http == 404)
            return 0;
        usleep(100000);
    }
    el_log(EL_LOG_ERROR,
           "cancel %s: the ElasticJob is still there after 120 s (its pods "
           "are still terminating?)",
           j->id);
    return 1;
}

static int k8s_list(struct cjob_list *l, int asked)
{
    if (!asked && !getenv("KUBECONFIG") && !getenv("KUBERNETES_SERVICE_HOST"))
        return 0; /* no cluster configured: nothing to list */
    char sel[200], path[600];
    el__k8s_escape(MANAGED_BY "=elrun", sel, sizeof sel);
    if (!asked) {
        if (api_try(5000))
            return 0;
    } else if (api_get("list")) {
        return 2;
    }
    long http;
    json_t *r = NULL;
    snprintf(path, sizeof path, "%s/elasticjobs?labelSelector=%s", JOBS_PATH,
             sel);
    int rc = el__k8s_req(&api, "GET", path, NULL, &http, &r);
    if (rc == 0 && http == 403) { /* no cluster-wide list: the context's */
        json_decref(r);
        r = NULL;
        snprintf(path, sizeof path,
                 "%s/namespaces/%s/elasticjobs?labelSelector=%s", JOBS_PATH,
                 *api.namespace_ ? api.namespace_ : "default", sel);
        rc = el__k8s_req(&api, "GET", path, NULL, &http, &r);
    }
    if (rc || http != 200) {
        char m[1200];
        if (rc)
            snprintf(m, sizeof m,
                     "cannot reach the Kubernetes API server %s: %s",
                     api.server, api.err);
        else
            el__k8s_status_msg(r, http, m, sizeof m);
        json_decref(r);
        if (!asked) {
            el_log(EL_LOG_WARN, "list: kubernetes jobs left out: %s", m);
            return 0;
        }
        return cjob_usage("list", "kubernetes: %s", m);
    }
    const json_t *ej;
    size_t i;
    json_array_foreach(json_object_get(r, "items"), i, ej)
    {
        const json_t *md = json_object_get(ej, "metadata");
        char hd[300];
        snprintf(hd, sizeof hd, "kubernetes://elrun/%s:%s",
                 jstr(md, "namespace"), jstr(md, "name"));
        const char *nm = jstr(json_object_get(md, "annotations"), "elrun/name");
        if (cjob_list_add(l, el__k8s_parse_time(jstr(md, "creationTimestamp")),
                          hd, *nm ? nm : jstr(md, "name"),
                          el_job_state_name(job_state(ej))))
            break;
    }
    json_decref(r);
    return 0;
}

static void k8s_url(const struct cjob *j, char *out, size_t cap)
{
    char ns[256], name[256];
    split_id(j->id, ns, sizeof ns, name, sizeof name);
    snprintf(out, cap, "%s%s/namespaces/%s/elasticjobs/%s", api.server,
             JOBS_PATH, ns, name);
}

const struct cjob_sched cjob_sched_k8s = {
    .name = "kubernetes",
    .local_program = 0,
    .check_cfg = k8s_check_cfg,
    .submit = k8s_submit,
    .open = k8s_open,
    .status = k8s_status,
    .logs = k8s_logs,
    .cancel = k8s_cancel,
    .list = k8s_list,
    .ui_url = k8s_url,
};
