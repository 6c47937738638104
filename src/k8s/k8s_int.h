/* k8s_int.h -- internals of the ElasticJob controller (`elrun k8s-controller`,
 * docs/KUBERNETES.md): a Kubernetes REST client (client.c: configuration
 * from a kubeconfig or the in-cluster service account, blocking requests,
 * watch streams), the pure reconcile planner (plan.c: what a job needs,
 * given its pods; unit-tested) and the controller loop (controller.c:
 * leader election, list+watch caches, applying plans, events).
 *
 * Everything returns 0 or a negative code (-errno or EL_E*) and keeps a
 * message in the object; nothing here prints except controller.c, which is
 * the binary's loop and logs one line per decision.
 */
#ifndef ELRUN_K8S_INT_H
#define ELRUN_K8S_INT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/curl_dl.h"

#define EL_K8S_GROUP "elastic.pytorch.org"
#define EL_K8S_VERSION "v1alpha1"
#define EL_K8S_API EL_K8S_GROUP "/" EL_K8S_VERSION
#define EL_K8S_WORKER_CONTAINER "elasticjob-worker"
#define EL_K8S_COMPONENT "elastic-job-controller"

/* ---- client.c ---- */

struct el__k8s {
    char server[512]; /* https://host:port, no trailing slash */
    char *token;      /* bearer token (or NULL) */
    char *token_file; /* re-read before each request when set */
    char *cafile;     /* CA bundle path, or */
    char *ca_data;    /* PEM CA in memory (certificate-authority-data) */
    size_t ca_len;
    char *cert_file, *key_file; /* client certificate, or in memory: */
    char *cert_data, *key_data;
    size_t cert_len, key_len;
    int insecure;         /* insecure-skip-tls-verify */
    char namespace_[254]; /* the context's (or the pod's) namespace */
    CURL *h;              /* the request handle (keep-alive) */
    long timeout_ms;      /* per request; 0 = 30 s */
    char err[512];
};

/* Configure k from a kubeconfig: path, else $KUBECONFIG, else the in-cluster
 * service account (KUBERNETES_SERVICE_HOST/PORT, the token, ca.crt and
 * namespace under /var/run/secrets/kubernetes.io/serviceaccount, or
 * $EL_K8S_SA_DIR), else ~/.kube/config.  Loads libcurl (and libyaml for a
 * kubeconfig).  Returns 0 or a negative code with k->err set; release with
 * el__k8s_close() in either case. */
int el__k8s_open(struct el__k8s *k, const char *kubeconfig);
void el__k8s_close(struct el__k8s *k);

/* Parse a kubeconfig document (YAML or JSON) into k (no I/O but reading the
 * files it names: tokenFile).  dir resolves relative paths. */
int el__k8s_kubeconfig_text(struct el__k8s *k, const char *text,
                            const char *dir);
/* YAML (1.1, via a dlopen()ed libyaml) to JSON: mappings become objects,
 * sequences arrays, every scalar a string.  NULL with err set on error. */
json_t *el__k8s_yaml_to_json(const char *text, char *err, size_t errlen);

/* One blocking request: METHOD path (starting with /) with an optional JSON
 * body; *http gets the status code and *resp the parsed reply (NULL if the
 * body was not JSON).  0 once an HTTP answer came (any status), negative
 * (EL_EIO, EL_ETIMEDOUT...) when none did, k->err set. */
int el__k8s_req(struct el__k8s *k, const char *method, const char *path,
                const json_t *body, long *http, json_t **resp);
/* el__k8s_req with the reply's body as it came (a pod's log): *out gets
 * the bytes (out->p malloc()ed, NUL-terminated, NULL if empty; the caller
 * frees it).  Return codes as el__k8s_req's. */
struct el__k8s_buf;
int el__k8s_req_text(struct el__k8s *k, const char *method, const char *path,
                     const json_t *body, long *http, struct el__k8s_buf *out);
/* The message of a metav1.Status reply, or "HTTP CODE". */
const char *el__k8s_status_msg(const json_t *resp, long http, char *buf,
                               size_t n);
/* Apply the connection options of k (TLS, auth header list into *hdrs,
 * which the caller frees with el__curl.slist_free_all) to handle h, for
 * the watch streams that controller.c runs on a curl multi. */
int el__k8s_setup(struct el__k8s *k, CURL *h, struct curl_slist **hdrs);

/* A growing NUL-terminated byte buffer (p is malloc()ed; the owner frees
 * it).  el__k8s_buf_add appends n bytes: 0 or -ENOMEM. */
struct el__k8s_buf {
    char *p;
    size_t n, cap;
};
int el__k8s_buf_add(struct el__k8s_buf *b, const char *d, size_t n);

/* URL-escape s into buf (for selectors); returns buf. */
char *el__k8s_escape(const char *s, char *buf, size_t n);

/* ---- plan.c: what one job needs (pure; no I/O) ---- */

struct el__k8s_plan_opts {
    double now;             /* seconds since the epoch */
    double unschedulable_s; /* below minReplicas this long (Pending pods
                               that cannot be scheduled) -> Failed */
};

/* The plan for one job:
 *   create    array of pod objects to create (the Service of each is made
 *             by el__k8s_service_for())
 *   remove    array of {name, reason, grace} pods to delete
 *   services  array of service names to delete (their pod is gone for good)
 *   status    the job's new .status (written through /status if it differs)
 *   events    array of {type, reason, message}
 *   delete_job 1 when ttlSecondsAfterFinished has run out
 *   requeue_s  reconcile again after this long (0 = only on a change) */
struct el__k8s_plan {
    json_t *create, *remove, *services, *status, *events;
    int delete_job;
    double requeue_s;
};

/* Plan job (an ElasticJob object) given pods (array of its pods, each with
 * the labels this controller sets) and svcs (array of service names that
 * exist for it).  Always fills out (release with el__k8s_plan_free); returns
 * 0.  A spec the schema could not reject (minReplicas > maxReplicas, no
 * containers) makes the job Failed with reason InvalidSpec and the field
 * path in the message. */
int el__k8s_plan(const json_t *job, const json_t *pods, const json_t *svcs,
                 const struct el__k8s_plan_opts *o, struct el__k8s_plan *out);
void el__k8s_plan_free(struct el__k8s_plan *p);

/* The headless Service for worker pod `pod` (owned by the job). */
json_t *el__k8s_service_for(const json_t *job, const json_t *pod);

/* The restartPolicy: ExitCode mapping: 1 if a container exit code (or a pod
 * failure reason such as NodeLost) is retryable (replace, do not count
 * against backoffLimit), 0 if it counts. */
int el__k8s_retryable(int exit_code, const char *reason);

/* RFC 3339 UTC time of t (seconds since the epoch) into buf[32]. */
char *el__k8s_time(double t, char *buf);
/* Parse an RFC 3339 time; -1 if absent or malformed. */
double el__k8s_parse_time(const char *s);

/* ---- metrics.c: the Prometheus endpoint ---- */

struct el__k8s_metrics {
    int fd, port; /* listening socket (-1: none) and its port */
    unsigned long pods_created, pods_deleted, pods_replaced, conflicts, relists;
    double rec_sum, rec_max; /* reconcile seconds */
    unsigned long rec_count;
};

/* Listen on HOST:PORT (port 0 picks one: m->port), non-blocking. */
int el__k8s_metrics_listen(struct el__k8s_metrics *m, const char *addr,
                           char *err, size_t errlen);
void el__k8s_metrics_close(struct el__k8s_metrics *m);
/* The exposition text (malloc()ed) for these counters and the jobs of the
 * cache ("ns/name" -> ElasticJob). */
char *el__k8s_metrics_text(const struct el__k8s_metrics *m, const json_t *jobs,
                           int leader);
/* Answer every connection waiting on m->fd with body; never blocks on
 * accept (a request is waited for at most 200 ms). */
void el__k8s_metrics_serve(struct el__k8s_metrics *m, const char *body);

/* ---- controller.c ---- */

struct el__k8s_ctl_opts {
    const char *kubeconfig; /* NULL: $KUBECONFIG or in-cluster */
    const char *namespace_; /* watch only this one (NULL: all) */
    int leader_elect;
    const char *lease_ns;     /* default: POD_NAMESPACE or the config's */
    const char *lease_name;   /* default elastic-job-controller */
    const char *identity;     /* default POD_NAME or hostname_pid */
    double lease_s;           /* lease duration, default 15 */
    double resync_s;          /* full reconcile every, default 30 */
    double unschedulable_s;   /* default 60 */
    int watch_timeout_s;      /* a watch's timeoutSeconds, default 300 */
    const char *metrics_addr; /* HOST:PORT of /metrics, NULL = none */
};

/* Run the controller until SIGTERM/SIGINT (returns 0) or a fatal error
 * (negative, message in err). */
int el__k8s_controller_run(const struct el__k8s_ctl_opts *o, char *err,
                           size_t errlen);

#endif
