/* test_k8s.c -- the ElasticJob controller's pure parts: the reconcile
 * planner (src/k8s/plan.c: pods created at the free indices, scale-down
 * from the top, ExitCode restarts and backoffLimit, Failed only below
 * minReplicas, Succeeded, the launcher args), the kubeconfig reader and the
 * YAML loader (src/k8s/client.c).
 */
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "elrun/err.h"

#include "k8s/k8s_int.h"
#include "test.h"

static json_t *mkjob(int replicas, int min, int max, const char *policy)
{
    json_t *j = json_loads(
        "{\"apiVersion\":\"elastic.pytorch.org/v1alpha1\",\"kind\":\"ElasticJob\","
        "\"metadata\":{\"name\":\"j\",\"namespace\":\"ns\",\"uid\":\"U\","
        "\"resourceVersion\":\"5\"},"
        "\"spec\":{\"rdzvEndpoint\":\"etcd:2379\",\"replicaSpecs\":{\"Worker\":{"
        "\"template\":{\"metadata\":{\"labels\":{\"app\":\"x\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"side\",\"image\":\"s\"},"
        "{\"name\":\"elasticjob-worker\",\"image\":\"i\",\"args\":[\"a1\",\"a2\"]}]}}}}}}",
        0, NULL);
    json_t *w = json_object_get(
        json_object_get(json_object_get(j, "spec"), "replicaSpecs"), "Worker");
    if (replicas >= 0)
        json_object_set_new(w, "replicas", json_integer(replicas));
    if (policy)
        json_object_set_new(w, "restartPolicy", json_string(policy));
    json_t *spec = json_object_get(j, "spec");
    if (min >= 0)
        json_object_set_new(spec, "minReplicas", json_integer(min));
    if (max >= 0)
        json_object_set_new(spec, "maxReplicas", json_integer(max));
    return j;
}

/* A pod of job j at index i in phase ph; exit code for Failed pods. */
static json_t *mkpod(int i, const char *ph, int code, const char *reason)
{
    char name[32], idx[8], uid[16];
    snprintf(name, sizeof name, "j-worker-%d", i);
    snprintf(idx, sizeof idx, "%d", i);
    snprintf(uid, sizeof uid, "pod-%d", i);
    json_t *p =
        json_pack("{s:{s:s,s:s,s:s,s:{s:s,s:s}},s:{s:s}}", "metadata", "name",
                  name, "namespace", "ns", "uid", uid, "labels", "job-name",
                  "j", "replica-index", idx, "status", "phase", ph);
    json_t *st = json_object_get(p, "status");
    if (code >= 0)
        json_object_set_new(st, "containerStatuses",
                            json_pack("[{s:s,s:i,s:{s:{s:i,s:s}}}]", "name",
                                      "elasticjob-worker", "restartCount", 0,
                                      "state", "terminated", "exitCode", code,
                                      "reason", "Error"));
    if (reason)
        json_object_set_new(st, "reason", json_string(reason));
    return p;
}

static struct el__k8s_plan_opts opts = {.now = 1.8e9, .unschedulable_s = 60};

static const char *cond_status(const json_t *st, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
            return json_string_value(json_object_get(c, "status"));
    }
    return "";
}

static const char *cond_field(const json_t *st, const char *type, const char *f)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
            return json_string_value(json_object_get(c, f));
    }
    return "";
}

static int has_event(const struct el__k8s_plan *p, const char *reason)
{
    size_t i;
    json_t *e;
    json_array_foreach(
        p->events, i,
        e) if (strcmp(json_string_value(json_object_get(e, "reason")),
                      reason) == 0) return 1;
    return 0;
}

TEST(k8s_plan_new_job_creates_pods_with_launcher_args)
{
    json_t *job = mkjob(2, 1, 3, NULL);
    json_t *pods = json_array(), *svcs = json_array();
    struct el__k8s_plan p;
    CHECK_EQ(el__k8s_plan(job, pods, svcs, &opts, &p), 0);
    CHECK_EQ(json_array_size(p.create), 2);
    json_t *pod = json_array_get(p.create, 1);
    CHECK_STR(json_string_value(
                  json_object_get(json_object_get(pod, "metadata"), "name")),
              "j-worker-1");
    json_t *md = json_object_get(pod, "metadata");
    json_t *l = json_object_get(md, "labels");
    CHECK_STR(json_string_value(json_object_get(l, "replica-index")), "1");
    CHECK_STR(json_string_value(json_object_get(l, "app")), "x");
    CHECK_STR(json_string_value(json_object_get(l, "group-name")),
              "elastic.pytorch.org");
    json_t * or = json_array_get(json_object_get(md, "ownerReferences"), 0);
    CHECK_STR(json_string_value(json_object_get(or, "uid")), "U");
    CHECK(json_is_true(json_object_get(or, "controller")));
    json_t *spec = json_object_get(pod, "spec");
    CHECK_STR(json_string_value(json_object_get(spec, "restartPolicy")),
              "Never");
    /* the worker container (not the first) gets the args, before its own */
    json_t *c0 = json_array_get(json_object_get(spec, "containers"), 0);
    CHECK(json_object_get(c0, "args") == NULL);
    json_t *a = json_object_get(
        json_array_get(json_object_get(spec, "containers"), 1), "args");
    CHECK_EQ(json_array_size(a), 6);
    CHECK_STR(json_string_value(json_array_get(a, 0)), "--rdzv_backend=etcd");
    CHECK_STR(json_string_value(json_array_get(a, 1)),
              "--rdzv_endpoint=etcd:2379");
    CHECK_STR(json_string_value(json_array_get(a, 2)), "--rdzv_id=j");
    CHECK_STR(json_string_value(json_array_get(a, 3)), "--nnodes=1:3");
    CHECK_STR(json_string_value(json_array_get(a, 4)), "a1");
    CHECK_STR(cond_status(p.status, "Created"), "True");
    CHECK(json_object_get(p.status, "startTime") != NULL);
    CHECK_STR(json_string_value(json_object_get(p.status, "selector")),
              "group-name=elastic.pytorch.org,job-name=j,replica-type=worker");
    /* the headless Service of a pod */
    json_t *svc = el__k8s_service_for(job, pod);
    CHECK_STR(json_string_value(
                  json_object_get(json_object_get(svc, "spec"), "clusterIP")),
              "None");
    CHECK_STR(json_string_value(json_object_get(
                  json_object_get(json_object_get(svc, "spec"), "selector"),
                  "replica-index")),
              "1");
    json_decref(svc);
    el__k8s_plan_free(&p);
    json_decref(job);
    json_decref(pods);
    json_decref(svcs);
}

TEST(k8s_plan_min_max_default_to_replicas)
{
    json_t *job = mkjob(3, -1, -1, NULL);
    json_t *pods = json_array();
    struct el__k8s_plan p;
    el__k8s_plan(job, pods, NULL, &opts, &p);
    json_t *a = json_object_get(
        json_array_get(json_object_get(
                           json_object_get(json_array_get(p.create, 0), "spec"),
                           "containers"),
                       1),
        "args");
    CHECK_STR(json_string_value(json_array_get(a, 3)), "--nnodes=3:3");
    CHECK_EQ(json_array_size(p.create), 3);
    el__k8s_plan_free(&p);
    json_decref(job);
    json_decref(pods);
}

TEST(k8s_plan_scale_up_fills_free_indices_and_down_removes_the_highest)
{
    json_t *job = mkjob(4, 1, 4, NULL);
    json_t *pods = json_pack("[o,o]", mkpod(0, "Running", -1, NULL),
                             mkpod(2, "Running", -1, NULL));
    struct el__k8s_plan p;
    el__k8s_plan(job, pods, NULL, &opts, &p);
    CHECK_EQ(json_array_size(p.create), 2);
    CHECK_STR(
        json_string_value(json_object_get(
            json_object_get(json_array_get(p.create, 0), "metadata"), "name")),
        "j-worker-1");
    CHECK_STR(
        json_string_value(json_object_get(
            json_object_get(json_array_get(p.create, 1), "metadata"), "name")),
        "j-worker-3");
    CHECK_EQ(json_array_size(p.remove), 0);
    el__k8s_plan_free(&p);
    json_decref(job);
    /* down to 1: the pods above index 0 go, index 0 stays */
    job = mkjob(1, 1, 4, NULL);
    json_object_set_new(job, "status", json_pack("{s:i}", "desired", 3));
    json_array_append_new(pods, mkpod(1, "Pending", -1, NULL));
    el__k8s_plan(job, pods,
                 json_pack("[s,s,s]", "j-worker-0", "j-worker-1", "j-worker-3"),
                 &opts, &p);
    CHECK_EQ(json_array_size(p.create), 0);
    CHECK_EQ(json_array_size(p.remove), 2);
    for (size_t i = 0; i < 2; i++) {
        const char *n = json_string_value(
            json_object_get(json_array_get(p.remove, i), "name"));
        CHECK(strcmp(n, "j-worker-0") != 0);
        CHECK(json_object_get(json_array_get(p.remove, i), "grace") ==
              NULL); /* graceful */
    }
    /* the service of index 3 (no pod) goes at once; 1's waits for its pod */
    CHECK_EQ(json_array_size(p.services), 1);
    CHECK_STR(json_string_value(json_array_get(p.services, 0)), "j-worker-3");
    CHECK(has_event(&p, "ScaledDown"));
    el__k8s_plan_free(&p);
    json_decref(job);
    json_decref(pods);
}

TEST(k8s_plan_exitcode_signal_is_replaced_free_exit1_counts)
{
    json_t *job = mkjob(2, 1, 2, "ExitCode");
    json_t *pods = json_pack("[o,o]", mkpod(0, "Running", -1, NULL),
                             mkpod(1, "Failed", 137, NULL));
    struct el__k8s_plan p;
    el__k8s_plan(job, pods, NULL, &opts, &p);
    CHECK_EQ(json_array_size(p.remove), 1);
    CHECK_STR(
        json_string_value(json_object_get(json_array_get(p.remove, 0), "uid")),
        "pod-1");
    CHECK_EQ(json_array_size(p.create),
             0); /* the name is free only once it is gone */
    CHECK_EQ(json_integer_value(json_object_get(
                 json_object_get(json_object_get(p.status, "replicaStatuses"),
                                 "Worker"),
                 "failed")),
             0);
    CHECK_STR(cond_status(p.status, "Restarting"), "True");
    CHECK(has_event(&p, "ExitedWithCode"));
    /* handled by uid: planning again with the new status counts nothing */
    json_object_set(job, "status", p.status);
    el__k8s_plan_free(&p);
    json_decref(pods);
    pods = json_pack("[o,o]", mkpod(0, "Running", -1, NULL),
                     mkpod(1, "Failed", 1, NULL));
    json_object_set_new(json_object_get(job, "status"), "handledFailures",
                        json_array());
    el__k8s_plan(job, pods, NULL, &opts, &p);
    CHECK_EQ(json_integer_value(json_object_get(
                 json_object_get(json_object_get(p.status, "replicaStatuses"),
                                 "Worker"),
                 "failed")),
             1);
    json_object_set(job, "status", p.status);
    el__k8s_plan_free(&p);
    el__k8s_plan(job, pods, NULL, &opts, &p); /* the same failed pod again */
    CHECK_EQ(json_integer_value(json_object_get(
                 json_object_get(json_object_get(p.status, "replicaStatuses"),
                                 "Worker"),
                 "failed")),
             1);
    CHECK_EQ(json_array_size(p.remove), 1);
    CHECK(!has_event(&p, "ExitedWithCode"));
    el__k8s_plan_free(&p);
    json_decref(job);
    json_decref(pods);
}

TEST(k8s_plan_backoff_limit_fails_the_job)
{
    json_t *job = mkjob(2, 1, 2, "ExitCode");
    json_object_set_new(json_object_get(job, "spec"), "backoffLimit",
                        json_integer(1));
    json_object_set_new(
        job, "status",
        json_pack("{s:{s:{s:i}}}", "replicaStatuses", "Worker", "failed", 1));
    json_t *pods = json_pack("[o,o]", mkpod(0, "Running", -1, NULL),
                             mkpod(1, "Failed", 2, NULL));
    struct el__k8s_plan p;
    el__k8s_plan(job, pods, NULL, &opts, &p);
    CHECK_STR(cond_status(p.status, "Failed"), "True");
    CHECK_STR(cond_field(p.status, "Failed", "reason"), "BackoffLimitExceeded");
    CHECK_STR(json_string_value(json_object_get(p.status, "state")), "Failed");
    CHECK(json_object_get(p.status, "completionTime") != NULL);
    CHECK_EQ(json_array_size(p.create), 0);
    el__k8s_plan_free(&p);
    json_decref(job);
    json_decref(pods);
}

TEST(k8s_plan_pending_does_not_hold_the_job_but_below_min_fails)
{
    json_t *job = mkjob(3, 2, 3, NULL);
    json_t *pend = mkpod(2, "Pending", -1, NULL);
    json_object_set_new(
        json_object_get(pend, "status"), "conditions",
        json_pack("[{s:s,s:s,s:s,s:s}]", "type", "PodScheduled", "status",
                  "False", "reason", "Unschedulable", "message",
                  "0/3 nodes are available: 3 Insufficient cpu."));
    json_t *pods = json_pack("[o,o,O]", mkpod(0, "Running", -1, NULL),
                             mkpod(1, "Running", -1, NULL), pend);
    struct el__k8s_plan p;
    el__k8s_plan(job, pods, NULL, &opts, &p);
    CHECK_STR(cond_status(p.status, "Running"),
              "True"); /* 2 of 3 run: Running */
    CHECK_EQ(json_integer_value(json_object_get(p.status, "replicas")), 2);
    el__k8s_plan_free(&p);
    json_decref(pods);
    /* two cannot be scheduled: 1 of min 2 can run; Failed after the grace */
    json_t *pend1 = json_deep_copy(pend);
    json_object_set_new(
        json_object_get(json_object_get(pend1, "metadata"), "labels"),
        "replica-index", json_string("1"));
    json_object_set_new(json_object_get(pend1, "metadata"), "uid",
                        json_string("p1"));
    pods = json_pack("[o,o,o]", mkpod(0, "Running", -1, NULL), pend1, pend);
    el__k8s_plan(job, pods, NULL, &opts, &p);
    CHECK_STR(cond_status(p.status, "Failed"), "");
    CHECK(p.requeue_s > 59 && p.requeue_s < 61);
    json_object_set(job, "status", p.status);
    el__k8s_plan_free(&p);
    struct el__k8s_plan_opts later = opts;
    later.now += 61;
    el__k8s_plan(job, pods, NULL, &later, &p);
    CHECK_STR(cond_status(p.status, "Failed"), "True");
    CHECK_STR(cond_field(p.status, "Failed", "reason"), "BelowMinReplicas");
    CHECK(strstr(cond_field(p.status, "Failed", "message"),
                 "only 1 of minReplicas 2") != NULL);
    CHECK(strstr(cond_field(p.status, "Failed", "message"),
                 "3 Insufficient cpu") != NULL);
    el__k8s_plan_free(&p);
    json_decref(job);
    json_decref(pods);
}

TEST(k8s_plan_never_policy_fails_only_below_min)
{
    json_t *job = mkjob(3, 2, 3, "Never");
    json_t *pods =
        json_pack("[o,o,o]", mkpod(0, "Running", -1, NULL),
                  mkpod(1, "Running", -1, NULL), mkpod(2, "Failed", 1, NULL));
    struct el__k8s_plan p;
    el__k8s_plan(job, pods, NULL, &opts, &p);
    CHECK_STR(cond_status(p.status, "Failed"), ""); /* 2 >= min 2 */
    CHECK_EQ(json_array_size(p.remove), 0);
    CHECK_EQ(json_array_size(p.create), 0);
    el__k8s_plan_free(&p);
    json_decref(pods);
    pods = json_pack("[o,o,o]", mkpod(0, "Running", -1, NULL),
                     mkpod(1, "Failed", 1, NULL), mkpod(2, "Failed", 1, NULL));
    el__k8s_plan(job, pods, NULL, &opts, &p);
    CHECK_STR(cond_field(p.status, "Failed", "reason"), "BelowMinReplicas");
    el__k8s_plan_free(&p);
    json_decref(job);
    json_decref(pods);
}

TEST(k8s_plan_succeeded_when_workers_succeed)
{
    json_t *job = mkjob(3, 1, 3, NULL);
    json_t *pods = json_pack("[o,o]", mkpod(0, "Succeeded", 0, NULL),
                             mkpod(1, "Running", -1, NULL));
    struct el__k8s_plan p;
    el__k8s_plan(job, pods, NULL, &opts, &p);
    CHECK_STR(cond_status(p.status, "Succeeded"), "");
    CHECK_EQ(json_array_size(p.create), 0); /* no new pod once one succeeded */
    el__k8s_plan_free(&p);
    json_decref(pods);
    pods = json_pack("[o,o,o]", mkpod(0, "Succeeded", 0, NULL),
                     mkpod(1, "Succeeded", 0, NULL),
                     mkpod(2, "Pending", -1, NULL));
    el__k8s_plan(job, pods, NULL, &opts, &p);
    CHECK_STR(cond_status(p.status, "Succeeded"), "True");
    CHECK_STR(cond_status(p.status, "Running"), "");
    CHECK_EQ(json_array_size(p.remove),
             1); /* the Pending one would never join */
    CHECK(has_event(&p, "ElasticJobSucceeded"));
    el__k8s_plan_free(&p);
    json_decref(job);
    json_decref(pods);
}

TEST(k8s_plan_invalid_spec_names_the_field)
{
    json_t *job = mkjob(2, 3, 2, NULL);
    json_t *pods = json_array();
    struct el__k8s_plan p;
    el__k8s_plan(job, pods, NULL, &opts, &p);
    CHECK_EQ(json_array_size(p.create), 0);
    CHECK_STR(cond_field(p.status, "Failed", "reason"), "InvalidSpec");
    CHECK_STR(
        cond_field(p.status, "Failed", "message"),
        "spec.minReplicas: Invalid value: 3: must be less than or equal to spec.maxReplicas (2)");
    el__k8s_plan_free(&p);
    json_decref(job);
    json_decref(pods);
}

TEST(k8s_plan_ttl_after_finished_deletes_the_job)
{
    json_t *job = mkjob(1, 1, 1, NULL);
    json_object_set_new(json_object_get(job, "spec"), "ttlSecondsAfterFinished",
                        json_integer(10));
    char t[32];
    json_object_set_new(job, "status",
                        json_pack("{s:s,s:[{s:s,s:s}]}", "completionTime",
                                  el__k8s_time(opts.now - 5, t), "conditions",
                                  "type", "Succeeded", "status", "True"));
    json_t *pods = json_array();
    struct el__k8s_plan p;
    el__k8s_plan(job, pods, NULL, &opts, &p);
    CHECK_EQ(p.delete_job, 0);
    CHECK(p.requeue_s > 4 && p.requeue_s < 6);
    el__k8s_plan_free(&p);
    struct el__k8s_plan_opts later = opts;
    later.now += 6;
    el__k8s_plan(job, pods, NULL, &later, &p);
    CHECK_EQ(p.delete_job, 1);
    el__k8s_plan_free(&p);
    json_decref(job);
    json_decref(pods);
}

TEST(k8s_retryable_exit_codes)
{
    CHECK(el__k8s_retryable(137, NULL)); /* SIGKILL */
    CHECK(el__k8s_retryable(143, NULL)); /* SIGTERM */
    CHECK(el__k8s_retryable(1, "NodeLost"));
    CHECK(el__k8s_retryable(-1, "Evicted"));
    CHECK(!el__k8s_retryable(1, NULL));
    CHECK(!el__k8s_retryable(2, NULL));
    CHECK(!el__k8s_retryable(128, NULL)); /* StartError: will fail again */
    CHECK(el__k8s_parse_time("2026-12-01T10:00:00Z") ==
          el__k8s_parse_time("2026-12-01T10:00:00.123456Z"));
    char t[32];
    CHECK_STR(el__k8s_time(el__k8s_parse_time("2026-12-01T10:00:01Z"), t),
              "2026-12-01T10:00:01Z");
}

TEST(k8s_kubeconfig_yaml)
{
    struct el__k8s k;
    memset(&k, 0, sizeof k);
    const char *kc =
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c1\n  cluster:\n"
        "    server: https://10.0.0.1:6443/\n    certificate-authority-data: aGVsbG8=\n"
        "- name: c2\n  cluster:\n    server: https://other\n"
        "contexts:\n- name: x\n  context: {cluster: c1, user: u1, namespace: team}\n"
        "current-context: x\nusers:\n- name: u1\n  user:\n    token: abc.def\n"
        "    client-key: keys/k.pem\n";
    CHECK_EQ(el__k8s_kubeconfig_text(&k, kc, "/etc/kc"), 0);
    CHECK_STR(k.server, "https://10.0.0.1:6443");
    CHECK_STR(k.namespace_, "team");
    CHECK_STR(k.token, "abc.def");
    CHECK_EQ(k.ca_len, 5);
    CHECK(memcmp(k.ca_data, "hello", 5) == 0);
    CHECK_STR(k.key_file, "/etc/kc/keys/k.pem");
    el__k8s_close(&k);
    /* a context that names nothing: the message says what */
    CHECK(el__k8s_kubeconfig_text(&k, "current-context: nope\ncontexts: []\n",
                                  NULL) < 0);
    CHECK(strstr(k.err, "no current-context named \"nope\"") != NULL);
    el__k8s_close(&k);
    char e[200];
    CHECK(el__k8s_yaml_to_json("a: [1, 2\n", e, sizeof e) == NULL);
    CHECK(strstr(e, "YAML error") != NULL);
    json_t *j =
        el__k8s_yaml_to_json("{\"a\": {\"b\": [\"x\", 3]}}", e, sizeof e);
    CHECK(j != NULL);
    CHECK_STR(json_string_value(json_array_get(
                  json_object_get(json_object_get(j, "a"), "b"), 1)),
              "3");
    json_decref(j);
}

TEST(k8s_in_cluster_config)
{
    char dir[] = "/tmp/elrun-k8s-sa.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char p[128];
    const char *files[][2] = {
        {"token", "tok\n"}, {"ca.crt", "x"}, {"namespace", "team-a\n"}};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i][0]);
        FILE *f = fopen(p, "w");
        CHECK(f != NULL);
        fputs(files[i][1], f);
        fclose(f);
    }
    unsetenv("KUBECONFIG");
    setenv("EL_K8S_SA_DIR", dir, 1);
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    struct el__k8s k;
    CHECK_EQ(el__k8s_open(&k, NULL), 0);
    CHECK_STR(k.server, "https://10.96.0.1:443");
    CHECK_STR(k.namespace_, "team-a");
    snprintf(p, sizeof p, "%s/ca.crt", dir);
    CHECK_STR(k.cafile, p);
    el__k8s_close(&k);
    /* outside a pod, with nothing configured: says what to give */
    unsetenv("KUBERNETES_SERVICE_HOST");
    setenv("HOME", dir, 1);
    CHECK_EQ(el__k8s_open(&k, NULL), EL_EUSAGE);
    CHECK(strstr(k.err, "give --kubeconfig, set KUBECONFIG, or run in a pod") !=
          NULL);
    el__k8s_close(&k);
    CHECK(el__k8s_open(&k, "/nonexistent/kubeconfig") < 0);
    CHECK(strstr(k.err, "cannot read kubeconfig /nonexistent/kubeconfig") !=
          NULL);
    el__k8s_close(&k);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i][0]);
        unlink(p);
    }
    rmdir(dir);
}
