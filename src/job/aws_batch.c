/* aws_batch.c -- what `elrun submit -s aws_batch` hands to AWS Batch: a
 * multi-node parallel job definition (one node group 0: running elrun with
 * the job's flags; the main node hosts the rendezvous store unless it is on
 * etcd), the submit-job input, Batch's states, and the launcher's defaults
 * inside a Batch node.  The field names are those of Batch's API
 * (RegisterJobDefinition, SubmitJob), so `aws batch register-job-definition
 * --cli-input-json` takes the output as it is.  Pure; see job_aws.h.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elrun/err.h"
#include "elrun/job.h"
#include "elrun/job_aws.h"
#include "job/job_int.h"

const char *const el_job_aws_cfg_keys[] = {
    "queue",    "image",          "vcpus",    "memory",   "gpus",
    "job-role", "execution-role", "efs",      "efs-path", "tags",
    "elrun",    "privileged",     "share-id", NULL,
};

static int positive(const char *s, long max)
{
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v > 0 && v <= max;
}

int el_job_aws_check_cfg(const char *cfg, char *err, size_t errlen)
{
    int rc = el_job_check_cfg("aws_batch", cfg, err, errlen);
    if (rc)
        return rc;
    char v[1024];
    if (!el_job_cfg_get(cfg, "queue", v, sizeof v) ||
        !el_job_cfg_get(cfg, "image", v, sizeof v)) {
        snprintf(err, errlen,
                 "-s aws_batch needs --cfg queue=JOB_QUEUE,"
                 "image=IMAGE (an image with elrun and the script in it)");
        return EL_EUSAGE;
    }
    static const struct {
        const char *key;
        long max;
    } nums[] = {{"vcpus", 4096}, {"memory", 16777216}, {"gpus", 64}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (el_job_cfg_get(cfg, nums[i].key, v, sizeof v) &&
            !positive(v, nums[i].max)) {
            snprintf(err, errlen,
                     "--cfg %s=%s: a positive whole number "
                     "(%s)",
                     nums[i].key, v,
                     strcmp(nums[i].key, "memory") == 0 ? "MiB" : "count");
            return EL_EUSAGE;
        }
    if (el_job_cfg_get(cfg, "privileged", v, sizeof v) && strcmp(v, "true") &&
        strcmp(v, "false")) {
        snprintf(err, errlen, "--cfg privileged=%s: true or false", v);
        return EL_EUSAGE;
    }
    if (el_job_cfg_get(cfg, "efs", v, sizeof v) && strncmp(v, "fs-", 3)) {
        snprintf(err, errlen, "--cfg efs=%s: an EFS file system id, fs-...", v);
        return EL_EUSAGE;
    }
    if (el_job_cfg_get(cfg, "efs-path", v, sizeof v) && v[0] != '/') {
        snprintf(err, errlen,
                 "--cfg efs_path=%s: an absolute path in the "
                 "container",
                 v);
        return EL_EUSAGE;
    }
    if (el_job_cfg_get(cfg, "tags", v, sizeof v)) {
        for (char *t = v; *t;) {
            size_t n = strcspn(t, ";");
            char *colon = memchr(t, ':', n);
            if (!colon || colon == t) {
                snprintf(err, errlen,
                         "--cfg tags=%s: write KEY:VALUE;"
                         "KEY:VALUE",
                         v);
                return EL_EUSAGE;
            }
            t += n + (t[n] == ';');
        }
    }
    return 0;
}

int el_job_state_from_aws(const char *s)
{
    static const struct {
        const char *aws;
        int st;
    } map[] = {
        {"SUBMITTED", EL_JOB_SUBMITTED}, {"PENDING", EL_JOB_PENDING},
        {"RUNNABLE", EL_JOB_PENDING},    {"STARTING", EL_JOB_PENDING},
        {"RUNNING", EL_JOB_RUNNING},     {"SUCCEEDED", EL_JOB_SUCCEEDED},
        {"FAILED", EL_JOB_FAILED},
    };
    for (size_t i = 0; s && i < sizeof map / sizeof map[0]; i++)
        if (strcmp(s, map[i].aws) == 0)
            return map[i].st;
    return EL_JOB_UNKNOWN;
}

/* Batch's job definition names: letters, digits, '-' and '_', 1..128. */
static void batch_name(const char *in, char *out, size_t cap)
{
    size_t k = 0;
    for (const char *p = in; *p && k + 1 < cap && k < 128; p++)
        out[k++] =
            isalnum((unsigned char)*p) || *p == '-' || *p == '_' ? *p : '_';
    if (k == 0 && cap > 1)
        out[k++] = 'j';
    out[k] = 0;
}

static int has_flag(char **w, int n, const char *a, const char *b)
{
    for (int i = 0; i < n; i++) {
        size_t la = strlen(a), lb = strlen(b);
        if ((strncmp(w[i], a, la) == 0 && (!w[i][la] || w[i][la] == '=')) ||
            (strncmp(w[i], b, lb) == 0 && (!w[i][lb] || w[i][lb] == '=')))
            return 1;
    }
    return 0;
}

int el_job_aws_batch_inputs(const struct el_job_spec *sp, const char *id,
                            const char *user, json_t **def, json_t **sub,
                            char *err, size_t errlen)
{
    *def = *sub = NULL;
    int rc = el_job_aws_check_cfg(sp->cfg, err, errlen);
    if (rc)
        return rc;
    if (sp->max_retries > 9) {
        snprintf(err, errlen,
                 "--max-retries %d: AWS Batch allows at most 10 "
                 "attempts, so 9 retries",
                 sp->max_retries);
        return EL_EUSAGE;
    }
    for (int i = 0; i < sp->n_env; i++) {
        const char *eq = strchr(sp->env[i], '=');
        if (!eq || eq == sp->env[i] ||
            strncmp(sp->env[i], "AWS_BATCH", 9) == 0) {
            snprintf(err, errlen,
                     "--env '%s' is not NAME=VALUE (and "
                     "AWS_BATCH* names are Batch's)",
                     sp->env[i]);
            return EL_EUSAGE;
        }
    }
    char queue[512], image[1024], v[1024], name[129];
    el_job_cfg_get(sp->cfg, "queue", queue, sizeof queue);
    el_job_cfg_get(sp->cfg, "image", image, sizeof image);
    batch_name(sp->name, name, sizeof name);
    const struct el_job_size *z = &sp->size;
    int etcd = sp->rdzv_backend && strcmp(sp->rdzv_backend, "etcd") == 0;

    json_t *cmd = json_array();
    char b[256];
    el_job_cfg_get(sp->cfg, "elrun", v, sizeof v);
    json_array_append_new(cmd, json_string(*v ? v : "elrun"));
    snprintf(b, sizeof b, "--nnodes=%d:%d", z->min_nodes, z->max_nodes);
    json_array_append_new(cmd, json_string(b));
    snprintf(b, sizeof b, "--nproc-per-node=%d", z->nproc);
    json_array_append_new(cmd, json_string(b));
    if (etcd && !has_flag(sp->launcher, sp->n_launcher_flags, "--rdzv-backend",
                          "--rdzv_backend"))
        json_array_append_new(cmd, json_string("--rdzv-backend=etcd"));
    if (etcd && sp->rdzv_endpoint &&
        !has_flag(sp->launcher, sp->n_launcher_flags, "--rdzv-endpoint",
                  "--rdzv_endpoint")) {
        char e[1200];
        snprintf(e, sizeof e, "--rdzv-endpoint=%s", sp->rdzv_endpoint);
        json_array_append_new(cmd, json_string(e));
    }
    for (int i = 0; i < sp->n_launcher; i++)
        json_array_append_new(cmd, json_string(sp->launcher[i]));

    json_t *env = json_array();
    json_array_append_new(
        env, json_pack("{s:s, s:s}", "name", "PYTHONUNBUFFERED", "value", "1"));
    json_array_append_new(
        env, json_pack("{s:s, s:s}", "name", "ELRUN_JOB_ID", "value", id));
    for (int i = 0; i < sp->n_env; i++) {
        const char *eq = strchr(sp->env[i], '=');
        json_array_append_new(env, json_pack("{s:s%, s:s}", "name", sp->env[i],
                                             (size_t)(eq - sp->env[i]), "value",
                                             eq + 1));
    }

    json_t *res = json_array();
    el_job_cfg_get(sp->cfg, "vcpus", v, sizeof v);
    json_array_append_new(
        res, json_pack("{s:s, s:s}", "type", "VCPU", "value", *v ? v : "1"));
    el_job_cfg_get(sp->cfg, "memory", v, sizeof v);
    json_array_append_new(res, json_pack("{s:s, s:s}", "type", "MEMORY",
                                         "value", *v ? v : "2048"));
    if (el_job_cfg_get(sp->cfg, "gpus", v, sizeof v))
        json_array_append_new(
            res, json_pack("{s:s, s:s}", "type", "GPU", "value", v));

    json_t *ctr =
        json_pack("{s:s, s:o, s:o, s:o, s:{s:s}}", "image", image, "command",
                  cmd, "environment", env, "resourceRequirements", res,
                  "logConfiguration", "logDriver", "awslogs");
    if (el_job_cfg_get(sp->cfg, "job-role", v, sizeof v))
        json_object_set_new(ctr, "jobRoleArn", json_string(v));
    if (el_job_cfg_get(sp->cfg, "execution-role", v, sizeof v))
        json_object_set_new(ctr, "executionRoleArn", json_string(v));
    if (el_job_cfg_get(sp->cfg, "privileged", v, sizeof v))
        json_object_set_new(ctr, "privileged",
                            json_boolean(strcmp(v, "true") == 0));
    if (el_job_cfg_get(sp->cfg, "efs", v, sizeof v)) {
        char path[1024];
        if (!el_job_cfg_get(sp->cfg, "efs-path", path, sizeof path))
            snprintf(path, sizeof path, "/mnt/efs");
        json_object_set_new(ctr, "volumes",
                            json_pack("[{s:s, s:{s:s, s:s, s:s}}]", "name",
                                      "efs", "efsVolumeConfiguration",
                                      "fileSystemId", v, "rootDirectory", "/",
                                      "transitEncryption", "ENABLED"));
        json_object_set_new(ctr, "mountPoints",
                            json_pack("[{s:s, s:s, s:b}]", "sourceVolume",
                                      "efs", "containerPath", path, "readOnly",
                                      0));
        /* The checkpoints' directory, for the script (docs/AWS.md). */
        json_array_append_new(env, json_pack("{s:s, s:s}", "name",
                                             "ELRUN_CKPT_DIR", "value", path));
    }
    /* Linux containers in multi-node jobs share the host's network: the
     * store's port must be reachable between nodes (docs/AWS.md). */

    json_t *tags = json_pack("{s:s, s:s, s:s}", "elrun:id", id, "elrun:name",
                             sp->name, "elrun:user", user ? user : "");
    if (el_job_cfg_get(sp->cfg, "tags", v, sizeof v))
        for (char *t = v; *t;) {
            size_t n = strcspn(t, ";");
            char *colon = memchr(t, ':', n);
            char k[256];
            snprintf(k, sizeof k, "%.*s", (int)(colon - t), t);
            json_object_set_new(
                tags, k, json_stringn(colon + 1, (size_t)(t + n - colon - 1)));
            t += n + (t[n] == ';');
        }

    char target[32];
    snprintf(target, sizeof target, "0:%d", z->max_nodes - 1);
    *def = json_pack(
        "{s:s, s:s, s:{s:i, s:i, s:[{s:s, s:o}]}, s:{s:i, s:[{s:s, s:s}]}, "
        "s:b, s:O, s:[s]}",
        "jobDefinitionName", name, "type", "multinode", "nodeProperties",
        "numNodes", z->max_nodes, "mainNode", 0, "nodeRangeProperties",
        "targetNodes", target, "container", ctr, "retryStrategy", "attempts",
        sp->max_retries + 1, "evaluateOnExit", "onExitCode", "0", "action",
        "EXIT", "propagateTags", 1, "tags", tags, "platformCapabilities",
        "EC2");
    *sub = json_pack("{s:s, s:s, s:s, s:o, s:b}", "jobName", name, "jobQueue",
                     queue, "jobDefinition", name, "tags", tags,
                     "propagateTags", 1);
    if (*sub && el_job_cfg_get(sp->cfg, "share-id", v, sizeof v))
        json_object_set_new(*sub, "shareIdentifier", json_string(v));
    if (!*def || !*sub) {
        json_decref(*def);
        json_decref(*sub);
        *def = *sub = NULL;
        return -ENOMEM;
    }
    return 0;
}

static int index_ok(const char *s)
{
    return s && positive(s, 100000) ? 1 : (s && strcmp(s, "0") == 0);
}

int el_job_aws_batch_defaults(char **env, int has_endpoint,
                              struct el_job_env_defaults *out, char *err,
                              size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *job = el__job_env_get(env, "AWS_BATCH_JOB_ID");
    const char *idx = el__job_env_get(env, "AWS_BATCH_JOB_NODE_INDEX");
    if (!job || !*job || !idx)
        return 0;
    const char *main_idx =
        el__job_env_get(env, "AWS_BATCH_JOB_MAIN_NODE_INDEX");
    const char *main_ip =
        el__job_env_get(env, "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS");
    if (!index_ok(idx) || (main_idx && !index_ok(main_idx))) {
        snprintf(err, errlen,
                 "AWS_BATCH_JOB_NODE_INDEX='%s' or "
                 "AWS_BATCH_JOB_MAIN_NODE_INDEX='%s' is not a node index; "
                 "set ELRUN_NO_AWS_BATCH=1 to ignore them",
                 idx, main_idx ? main_idx : "");
        return EL_EUSAGE;
    }
    char rid[256];
    snprintf(rid, sizeof rid, "%.*s", (int)strcspn(job, "#"), job);
    el__job_env_add(out, env, "PET_NODE_RANK", idx, "AWS_BATCH_JOB_NODE_INDEX",
                    0);
    el__job_env_add(out, env, "PET_RDZV_ID", rid, "AWS_BATCH_JOB_ID", 0);
    if (has_endpoint || el__job_env_get(env, "PET_RDZV_ENDPOINT"))
        return 1;
    int is_main = main_idx ? strcmp(idx, main_idx) == 0 : !main_ip || !*main_ip;
    if (!is_main && (!main_ip || !*main_ip)) {
        snprintf(err, errlen,
                 "node %s of AWS Batch job %s has no "
                 "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS; give "
                 "--rdzv-endpoint",
                 idx, job);
        return EL_EUSAGE;
    }
    const char *port = el__job_env_get(env, "ELRUN_AWS_BATCH_PORT");
    if (port && !positive(port, 65535)) {
        snprintf(err, errlen, "ELRUN_AWS_BATCH_PORT='%s' is not a port", port);
        return EL_EUSAGE;
    }
    char ep[300];
    snprintf(ep, sizeof ep, "%s:%s", is_main ? "0.0.0.0" : main_ip,
             port ? port : "29500");
    el__job_env_add(out, env, "PET_RDZV_BACKEND", "c10d", "AWS_BATCH_JOB_ID",
                    0);
    el__job_env_add(out, env, "PET_RDZV_ENDPOINT", ep,
                    is_main ? "AWS_BATCH_JOB_MAIN_NODE_INDEX"
                            : "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS",
                    0);
    const char *conf = el__job_env_get(env, "PET_RDZV_CONF");
    char c[256];
    snprintf(c, sizeof c, "%s%sis_host=%d", conf ? conf : "",
             conf && *conf ? "," : "", is_main);
    /* PET_RDZV_CONF is extended, not replaced. */
    el__job_env_add(out, env, "PET_RDZV_CONF", c, "AWS_BATCH_JOB_NODE_INDEX",
                    1);
    return 1;
}
