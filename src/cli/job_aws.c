/* job_aws.c -- the aws_batch scheduler of the job verbs, and `elrun aws`.
 *
 * Every AWS request goes through the user's `aws` CLI (found in PATH), so
 * profiles, SSO and regions work as everywhere else; ELRUN_AWS_ENDPOINT_URL
 * adds --endpoint-url to each call (the tests' local recorder).  A job's
 * record is $ELRUN_HOME/jobs/aws_batch/ID/job.json with the Batch job id;
 * status, logs and cancel ask Batch (describe-jobs, CloudWatch Logs
 * get-log-events, terminate-job) each time.  A missing or failing aws gives
 * one line: what failed and aws's own first line of stderr.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/job_cli.h"
#include "elrun/err.h"
#include "elrun/job_aws.h"
#include "elrun/log.h"

extern char **environ;

#define OUTCAP (4 << 20)

/* Run `aws SERVICE OP ARGS... --output json` and parse stdout.  NULL with
 * err on failure. */
static json_t *aws_call(const char *const *args, char *err, size_t errlen)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = "aws";
    const char *ep = getenv("ELRUN_AWS_ENDPOINT_URL");
    if (ep && *ep) {
        argv[n++] = "--endpoint-url";
        argv[n++] = ep;
    }
    for (; *args && n < 58; args++)
        argv[n++] = *args;
    argv[n++] = "--output";
    argv[n++] = "json";
    argv[n] = NULL;
    char *out = malloc(OUTCAP), e[600];
    if (!out) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int rc = cjob_run((char *const *)argv, out, OUTCAP, e, sizeof e);
    if (rc == 127) {
        snprintf(err, errlen,
                 "cannot run the aws CLI (%s); install it "
                 "(Debian: apt-get install awscli) and put it in PATH",
                 e);
        free(out);
        return NULL;
    }
    if (rc) {
        /* The command words, for the message. */
        int k = ep && *ep ? 3 : 1;
        snprintf(err, errlen, "aws %s %s failed (exit %d): %s", argv[k],
                 argv[k + 1], rc, *e ? e : "(no message)");
        free(out);
        return NULL;
    }
    json_error_t je;
    json_t *o = *out ? json_loads(out, 0, &je) : json_object();
    if (!o)
        snprintf(err, errlen, "aws %s: its output is not JSON: %s",
                 args[1] ? args[1] : "", je.text);
    free(out);
    return o;
}

static const char *js(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* ---- submit ------------------------------------------------------------- */

int cjob_aws_submit(const struct el_job_spec *sp, json_t *spec, const char *id,
                    int dryrun, const char *home)
{
    char err[1600];
    const char *user = getenv("USER");
    json_t *def, *sub;
    int rc = el_job_aws_batch_inputs(sp, id, user ? user : "", &def, &sub, err,
                                     sizeof err);
    if (rc)
        return rc == EL_EUSAGE ? cjob_usage("submit", "%s", err) : 1;
    if (dryrun) {
        char *a = json_dumps(def, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        char *b = json_dumps(sub, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n%s\n", a ? a : "{}", b ? b : "{}");
        fprintf(stderr,
                "elrun submit: dry run: would run aws batch "
                "register-job-definition --cli-input-json with the first "
                "document, then aws batch submit-job with the second\n");
        free(a);
        free(b);
        json_decref(def);
        json_decref(sub);
        return 0;
    }
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/jobs/aws_batch/%s", home, id);
    char *a = json_dumps(def, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    char *b = json_dumps(sub, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    char fa[4600], fb[4600];
    rc = a && b ? 0 : -ENOMEM;
    if (!rc)
        rc = cjob_mkdirs(dir);
    if (!rc)
        rc = cjob_write(dir, "job-definition.json", a);
    if (!rc)
        rc = cjob_write(dir, "submit-job.json", b);
    free(a);
    free(b);
    if (rc) {
        json_decref(def);
        json_decref(sub);
        return cjob_usage("submit",
                          "cannot write the job's record in %s: %s "
                          "(set ELRUN_HOME)",
                          dir, strerror(-rc));
    }
    snprintf(fa, sizeof fa, "file://%s/job-definition.json", dir);
    const char *reg[] = {"batch", "register-job-definition", "--cli-input-json",
                         fa, NULL};
    json_t *r = aws_call(reg, err, sizeof err);
    if (!r) {
        json_decref(def);
        json_decref(sub);
        el_log(EL_LOG_ERROR, "job %s was not submitted: %s", id, err);
        return 1;
    }
    /* Submit the revision just registered. */
    if (*js(r, "jobDefinitionArn"))
        json_object_set_new(sub, "jobDefinition",
                            json_string(js(r, "jobDefinitionArn")));
    json_decref(r);
    b = json_dumps(sub, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    rc = b ? cjob_write(dir, "submit-job.json", b) : -ENOMEM;
    free(b);
    snprintf(fb, sizeof fb, "file://%s/submit-job.json", dir);
    const char *sj[] = {"batch", "submit-job", "--cli-input-json", fb, NULL};
    r = rc ? NULL : aws_call(sj, err, sizeof err);
    if (!r || !*js(r, "jobId")) {
        if (r)
            snprintf(err, sizeof err, "aws batch submit-job gave no jobId");
        json_decref(r);
        json_decref(def);
        json_decref(sub);
        el_log(EL_LOG_ERROR, "job %s was not submitted: %s", id, err);
        return 1;
    }
    json_object_set_new(spec, "aws_job_id", json_string(js(r, "jobId")));
    json_object_set_new(spec, "aws_job_queue",
                        json_string(js(sub, "jobQueue")));
    json_object_set_new(spec, "aws_job_definition",
                        json_string(js(sub, "jobDefinition")));
    json_decref(r);
    json_decref(def);
    json_decref(sub);
    char *txt = json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!txt || cjob_write(dir, "job.json", txt))
        el_log(EL_LOG_ERROR, "cannot write %s/job.json", dir);
    free(txt);
    return 0;
}

/* ---- status ------------------------------------------------------------- */

static json_t *describe(const char *const *ids, int n, char *err, size_t errlen)
{
    const char *args[60] = {"batch", "describe-jobs", "--jobs"};
    int k = 3;
    for (int i = 0; i < n && k < 57; i++)
        args[k++] = ids[i];
    args[k] = NULL;
    json_t *r = aws_call(args, err, errlen);
    return r;
}

static int attempts_of(json_t *job)
{
    return (int)json_array_size(json_object_get(job, "attempts"));
}

int cjob_aws_status(const struct cjob *j, struct cjob_status *st, char *err,
                    size_t errlen)
{
    memset(st, 0, sizeof *st);
    st->root = -1;
    st->state = EL_JOB_UNKNOWN;
    const char *jid = js(j->spec, "aws_job_id");
    if (!*jid) {
        snprintf(err, errlen, "job %s has no aws_job_id in its record", j->id);
        return -1;
    }
    const char *one[] = {jid};
    json_t *r = describe(one, 1, err, errlen);
    if (!r)
        return -1;
    json_t *job = json_array_get(json_object_get(r, "jobs"), 0);
    if (!job) {
        json_decref(r);
        snprintf(st->msg, sizeof st->msg,
                 "AWS Batch does not know job %s "
                 "(any more)",
                 jid);
        return 0;
    }
    st->state = el_job_state_from_aws(js(job, "status"));
    int cancelled = access(j->dir, F_OK) == 0 &&
                    cjob_read_line(j->dir, "cancelled", st->root_time,
                                   sizeof st->root_time) == 0;
    st->root_time[0] = 0;
    if (cancelled && st->state == EL_JOB_FAILED)
        st->state = EL_JOB_CANCELLED;
    int a = attempts_of(job);
    st->restarts = a > 0 ? a - 1 : 0;
    snprintf(st->msg, sizeof st->msg, "aws_batch: %s%s%s", js(job, "status"),
             *js(job, "statusReason") ? ": " : "", js(job, "statusReason"));
    json_t *np = json_object_get(job, "nodeProperties");
    int nn = (int)json_integer_value(json_object_get(np, "numNodes"));
    if (nn <= 0)
        nn = (int)json_integer_value(json_object_get(j->spec, "max_nodes"));
    if (nn > 50)
        nn = 50;
    char ids[50][160];
    const char *idp[50];
    for (int k = 0; k < nn; k++) {
        snprintf(ids[k], sizeof ids[k], "%s#%d", jid, k);
        idp[k] = ids[k];
    }
    json_t *nr = nn ? describe(idp, nn, err, errlen) : NULL;
    json_decref(r);
    if (nn && !nr)
        return -1;
    st->nrep = nn;
    for (int k = 0; k < nn; k++) {
        struct cjob_replica *rp = &st->rep[k];
        rp->exitcode = -1000;
        rp->state =
            st->state == EL_JOB_CANCELLED ? EL_JOB_CANCELLED : EL_JOB_PENDING;
        json_t *node = NULL, *e;
        size_t i;
        json_array_foreach(json_object_get(nr, "jobs"), i,
                           e) if (strcmp(js(e, "jobId"), ids[k]) == 0) node = e;
        if (!node)
            continue;
        int s = el_job_state_from_aws(js(node, "status"));
        if (st->state != EL_JOB_CANCELLED)
            rp->state = s;
        json_t *c = json_object_get(node, "container");
        json_t *ex = json_object_get(c, "exitCode");
        if (json_is_integer(ex))
            rp->exitcode = (int)json_integer_value(ex);
        json_t *ni = json_array_get(json_object_get(c, "networkInterfaces"), 0);
        if (ni)
            snprintf(rp->host, sizeof rp->host, "%s",
                     js(ni, "privateIpv4Address"));
        /* The root cause: the first node that failed, with the reason
         * Batch and the agent's exit recorded. */
        if (st->root < 0 && s == EL_JOB_FAILED && rp->exitcode != 0) {
            st->root = k;
            st->root_rank = -1;
            st->root_exit = rp->exitcode == -1000 ? -1 : rp->exitcode;
            snprintf(st->root_host, sizeof st->root_host, "%s", rp->host);
            json_t *sa = json_object_get(node, "stoppedAt");
            if (json_is_integer(sa)) { /* ms since the epoch */
                time_t ts = (time_t)(json_integer_value(sa) / 1000);
                struct tm tm;
                gmtime_r(&ts, &tm);
                strftime(st->root_time, sizeof st->root_time,
                         "%Y-%m-%dT%H:%M:%SZ", &tm);
            }
            char m[1200];
            snprintf(m, sizeof m, "%s%s%s", js(c, "reason"),
                     *js(c, "reason") && *js(node, "statusReason") ? "; " : "",
                     js(node, "statusReason"));
            st->root_msg = strdup(*m ? m : "(no reason recorded)");
            st->root_json = json_dumps(node, JSON_COMPACT);
        }
    }
    json_decref(nr);
    if (st->root >= 0 && st->state == EL_JOB_FAILED)
        snprintf(st->msg, sizeof st->msg,
                 "root cause: node %d on %s exited "
                 "with %d: %.300s",
                 st->root, st->root_host, st->root_exit,
                 st->root_msg ? st->root_msg : "");
    return 0;
}

/* ---- logs --------------------------------------------------------------- */

/* Print the CloudWatch log of node k (a stream of /aws/batch/job); *token
 * carries where to go on (NULL at first).  0, or -1 with err. */
static int node_log(const struct cjob *j, int k, const char *stream,
                    char **token, long tail, int (*keep)(const char *, void *),
                    void *arg, char *err, size_t errlen)
{
    const char *args[16] = {
        "logs",           "get-log-events",    "--log-group-name",
        "/aws/batch/job", "--log-stream-name", stream};
    int n = 6;
    char lim[32];
    if (*token) {
        args[n++] = "--next-token";
        args[n++] = *token;
    } else if (tail > 0) {
        snprintf(lim, sizeof lim, "%ld", tail);
        args[n++] = "--limit";
        args[n++] = lim;
    } else {
        args[n++] = "--start-from-head";
    }
    args[n] = NULL;
    json_t *r = aws_call(args, err, errlen);
    if (!r)
        return -1;
    json_t *e;
    size_t i;
    const char *role = js(j->spec, "role");
    json_array_foreach(json_object_get(r, "events"), i, e)
    {
        const char *m = js(e, "message");
        if (keep(m, arg))
            printf("%s/%d %s\n", *role ? role : "worker", k, m);
    }
    free(*token);
    *token = strdup(js(r, "nextForwardToken"));
    json_decref(r);
    fflush(stdout);
    return 0;
}

int cjob_aws_logs(const struct cjob *j, int replica, int follow, long tail,
                  int (*keep)(const char *, void *), void *arg)
{
    char err[1600];
    const char *jid = js(j->spec, "aws_job_id");
    char *tokens[50] = {0};
    int rc = 0;
    for (int round = 0;; round++) {
        int nn = (int)json_integer_value(json_object_get(j->spec, "max_nodes"));
        if (nn > 50)
            nn = 50;
        char ids[50][160];
        const char *idp[50];
        int m = 0;
        for (int k = 0; k < nn; k++)
            if (replica < 0 || replica == k) {
                snprintf(ids[m], sizeof ids[m], "%s#%d", jid, k);
                idp[m] = ids[m];
                m++;
            }
        json_t *r = describe(idp, m, err, sizeof err);
        if (!r) {
            el_log(EL_LOG_ERROR, "logs: %s", err);
            rc = 1;
            break;
        }
        int done = 1;
        for (int q = 0; q < m; q++) {
            int k = atoi(strchr(ids[q], '#') + 1);
            json_t *e, *node = NULL;
            size_t i;
            json_array_foreach(json_object_get(r, "jobs"), i,
                               e) if (strcmp(js(e, "jobId"), ids[q]) == 0)
                node = e;
            const char *stream =
                js(json_object_get(node, "container"), "logStreamName");
            int s = el_job_state_from_aws(js(node, "status"));
            done &= el_job_state_final(s);
            if (!*stream)
                continue;
            if (node_log(j, k, stream, &tokens[k], round ? 0 : tail, keep, arg,
                         err, sizeof err)) {
                el_log(EL_LOG_ERROR, "logs: %s", err);
                rc = 1;
            }
        }
        json_decref(r);
        if (!follow || done || rc)
            break;
        sleep(2); /* CloudWatch has no push: poll, as the aws CLI does */
    }
    for (int k = 0; k < 50; k++)
        free(tokens[k]);
    return rc;
}

/* ---- cancel ------------------------------------------------------------- */

int cjob_aws_cancel(const struct cjob *j, char *err, size_t errlen)
{
    const char *jid = js(j->spec, "aws_job_id");
    const char *args[] = {"batch", "terminate-job", "--job-id",
                          jid,     "--reason",      "cancelled by elrun cancel",
                          NULL};
    json_t *r = aws_call(args, err, errlen);
    if (!r)
        return -1;
    json_decref(r);
    char t[64];
    snprintf(t, sizeof t, "%ld\n", (long)time(NULL));
    cjob_write(j->dir, "cancelled", t);
    return 0;
}

/* ---- the launcher inside a Batch node ---------------------------------- */

int cli_job_aws_env(int argc, char **argv)
{
    const char *off = getenv("ELRUN_NO_AWS_BATCH");
    if (off && *off && strcmp(off, "0"))
        return 0;
    int has_ep = 0;
    for (int i = 1; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strncmp(argv[i], "--standalone", 12) == 0)
            return 0;
        has_ep |= strncmp(argv[i], "--rdzv-endpoint", 15) == 0 ||
                  strncmp(argv[i], "--rdzv_endpoint", 15) == 0;
    }
    struct el_job_env_defaults d;
    char err[700];
    int rc = el_job_aws_batch_defaults(environ, has_ep, &d, err, sizeof err);
    return cjob_apply_env(rc, &d, err, "AWS Batch", getenv("AWS_BATCH_JOB_ID"));
}

/* ---- elrun aws: EC2 fleets with CloudFormation ------------------------- */

static const char aws_help[] =
    "usage: elrun aws template [--name NAME] [-j MIN:MAXxNPROC] [--desired N]\n"
    "                          [--etcd 1|3] [--instance-type T] "
    "[--etcd-instance-type T]\n"
    "                          [--spot] [--spot-price USD] [--vpc VPC "
    "--subnets A,B]\n"
    "                          [--efs fs-ID] --elrun-url URL [--key-name K]\n"
    "                          [-o FILE] [launcher flags] SCRIPT [ARGS...]\n"
    "       elrun aws up --name NAME --template FILE\n"
    "       elrun aws scale --name NAME --desired N\n"
    "       elrun aws status --name NAME\n"
    "       elrun aws down --name NAME\n"
    "A CloudFormation stack of one elastic job on EC2 (docs/AWS.md); every\n"
    "call goes through the aws CLI.\n";

static int aws_usage(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int aws_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("elrun aws: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

static int aws_fail(const char *err)
{
    fprintf(stderr, "elrun aws: %s\n", err);
    return 1;
}

static const char *opt(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] == 0 && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

static int aws_template(int argc, char **argv)
{
    struct el_aws_template t = {0};
    const char *j = "1:4x1", *out = NULL, *v;
    char err[800];
    t.name = "elrun";
    t.etcd_nodes = 1;
    t.desired = -1;
    int i = 1, spot = 0;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if ((v = opt(argc, argv, &i, "--name")))
            t.name = v;
        else if ((v = opt(argc, argv, &i, "-j")))
            j = v;
        else if ((v = opt(argc, argv, &i, "--desired")))
            t.desired = atoi(v) > 0 ? atoi(v) : 0;
        else if ((v = opt(argc, argv, &i, "--etcd")))
            t.etcd_nodes = atoi(v);
        else if ((v = opt(argc, argv, &i, "--instance-type")))
            t.instance_type = v;
        else if ((v = opt(argc, argv, &i, "--etcd-instance-type")))
            t.etcd_instance_type = v;
        else if ((v = opt(argc, argv, &i, "--spot-price")))
            t.spot_price = v, spot = 1;
        else if (strcmp(argv[i], "--spot") == 0)
            spot = 1;
        else if ((v = opt(argc, argv, &i, "--vpc")))
            t.vpc_id = v;
        else if ((v = opt(argc, argv, &i, "--subnets")))
            t.subnets = v;
        else if ((v = opt(argc, argv, &i, "--efs")))
            t.efs_id = v;
        else if ((v = opt(argc, argv, &i, "--elrun-url")))
            t.elrun_url = v;
        else if ((v = opt(argc, argv, &i, "--key-name")))
            t.key_name = v;
        else if ((v = opt(argc, argv, &i, "-o")))
            out = v;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return fputs(aws_help, stdout), 0;
        else
            break; /* the launcher's flags */
    }
    if (spot && !t.spot_price)
        t.spot_price = ""; /* spot at the on-demand price cap */
    if (el_job_parse_size(j, &t.size, err, sizeof err))
        return aws_usage("%s", err);
    if (t.desired < 0)
        t.desired = t.size.max_nodes;
    t.launcher = argv + i;
    t.n_launcher = argc - i;
    json_t *tpl;
    int rc = el_aws_template(&t, &tpl, err, sizeof err);
    if (rc)
        return rc == EL_EUSAGE ? aws_usage("template: %s", err) : 1;
    char *s = json_dumps(tpl, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(tpl);
    if (!s)
        return 1;
    if (out) {
        FILE *f = fopen(out, "w");
        if (!f || fprintf(f, "%s\n", s) < 0 || fclose(f)) {
            free(s);
            return aws_usage("template: cannot write %s: %s", out,
                             strerror(errno));
        }
    } else {
        printf("%s\n", s);
    }
    free(s);
    return 0;
}

static json_t *worker_group(const char *stack, char *name, size_t cap,
                            char *err, size_t errlen)
{
    const char *a[] = {"cloudformation",
                       "describe-stack-resource",
                       "--stack-name",
                       stack,
                       "--logical-resource-id",
                       "WorkerGroup",
                       NULL};
    json_t *r = aws_call(a, err, errlen);
    if (!r)
        return NULL;
    snprintf(
        name, cap, "%s",
        js(json_object_get(r, "StackResourceDetail"), "PhysicalResourceId"));
    if (!*name) {
        snprintf(err, errlen, "stack %s has no worker group (yet)", stack);
        json_decref(r);
        return NULL;
    }
    return r;
}

int cli_aws_main(int argc, char **argv)
{
    el_log_init("elrun", EL_LOG_WARN);
    if (argc < 2 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "--help") == 0) {
        fputs(aws_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *verb = argv[1];
    if (strcmp(verb, "template") == 0)
        return aws_template(argc - 1, argv + 1);
    const char *name = NULL, *tpl = NULL, *desired = NULL, *v;
    for (int i = 2; i < argc; i++) {
        if ((v = opt(argc, argv, &i, "--name")))
            name = v;
        else if ((v = opt(argc, argv, &i, "--template")))
            tpl = v;
        else if ((v = opt(argc, argv, &i, "--desired")))
            desired = v;
        else
            return aws_usage("%s: unknown argument '%s' (elrun aws --help)",
                             verb, argv[i]);
    }
    if (!name)
        return aws_usage("%s needs --name STACK", verb);
    char err[1600], arg[4200];
    json_t *r = NULL;
    if (strcmp(verb, "up") == 0) {
        if (!tpl || access(tpl, R_OK))
            return aws_usage("up needs --template FILE (elrun aws template "
                             "-o FILE), readable");
        snprintf(arg, sizeof arg, "file://%s", tpl);
        const char *a[] = {"cloudformation",
                           "create-stack",
                           "--stack-name",
                           name,
                           "--template-body",
                           arg,
                           "--capabilities",
                           "CAPABILITY_IAM",
                           NULL};
        if (!(r = aws_call(a, err, sizeof err)))
            return aws_fail(err);
        printf("%s\n", js(r, "StackId"));
    } else if (strcmp(verb, "scale") == 0) {
        char *end;
        long n = desired ? strtol(desired, &end, 10) : -1;
        if (!desired || *end || n < 0 || n > 100000)
            return aws_usage("scale needs --desired N, a count of workers");
        char g[512];
        if (!(r = worker_group(name, g, sizeof g, err, sizeof err)))
            return aws_fail(err);
        const char *a[] = {"autoscaling",
                           "set-desired-capacity",
                           "--auto-scaling-group-name",
                           g,
                           "--desired-capacity",
                           desired,
                           NULL};
        json_decref(r);
        if (!(r = aws_call(a, err, sizeof err)))
            return aws_fail(err);
        printf("%s: desired %s workers\n", g, desired);
    } else if (strcmp(verb, "status") == 0) {
        const char *a[] = {"cloudformation", "describe-stacks", "--stack-name",
                           name, NULL};
        if (!(r = aws_call(a, err, sizeof err)))
            return aws_fail(err);
        json_t *s = json_array_get(json_object_get(r, "Stacks"), 0);
        printf("stack %s: %s\n", name, js(s, "StackStatus"));
        json_decref(r);
        char g[512];
        if (!(r = worker_group(name, g, sizeof g, err, sizeof err)))
            return aws_fail(err);
        json_decref(r);
        const char *b[] = {"autoscaling", "describe-auto-scaling-groups",
                           "--auto-scaling-group-names", g, NULL};
        if (!(r = aws_call(b, err, sizeof err)))
            return aws_fail(err);
        json_t *grp =
                   json_array_get(json_object_get(r, "AutoScalingGroups"), 0),
               *e;
        printf("workers %s: min %lld max %lld desired %lld\n", g,
               json_integer_value(json_object_get(grp, "MinSize")),
               json_integer_value(json_object_get(grp, "MaxSize")),
               json_integer_value(json_object_get(grp, "DesiredCapacity")));
        size_t k;
        json_array_foreach(json_object_get(grp, "Instances"), k, e)
            printf("  %s %s %s\n", js(e, "InstanceId"),
                   js(e, "AvailabilityZone"), js(e, "LifecycleState"));
    } else if (strcmp(verb, "down") == 0) {
        const char *a[] = {"cloudformation", "delete-stack", "--stack-name",
                           name, NULL};
        if (!(r = aws_call(a, err, sizeof err)))
            return aws_fail(err);
        printf("stack %s: deleting (the EFS file system is kept)\n", name);
    } else {
        return aws_usage("unknown command '%s'; template, up, scale, status "
                         "or down",
                         verb);
    }
    json_decref(r);
    return 0;
}

/* ---- the aws_batch scheduler's ops --------------------------------------- */

static int aws_submit_op(const struct el_job_spec *js, json_t *job, char *id,
                         size_t idcap, int dryrun)
{
    (void)idcap;
    return cjob_aws_submit(js, job, id, dryrun, js->home);
}

static int aws_logs_op(struct cjob *j, int replica, int follow, long tail,
                       const struct cjob_logsel *ls)
{
    return cjob_aws_logs(j, replica, follow, tail, cjob_log_keep, (void *)ls);
}

static int aws_cancel_op(struct cjob *j)
{
    char err[700];
    if (cjob_aws_cancel(j, err, sizeof err))
        return cjob_usage("cancel", "%s", err);
    return 0;
}

static int aws_list_op(struct cjob_list *l, int asked)
{
    return cjob_dir_list("aws_batch", l);
}

/* Batch's console (TorchX's URL; the region from AWS_REGION or
 * AWS_DEFAULT_REGION). */
static void aws_url(const struct cjob *j, char *out, size_t cap)
{
    const char *r = getenv("AWS_REGION");
    if (!r || !*r)
        r = getenv("AWS_DEFAULT_REGION");
    if (r && *r)
        snprintf(out, cap,
                 "https://%s.console.aws.amazon.com/batch/home?"
                 "region=%s#jobs/mnp-job/%s",
                 r, r, js(j->spec, "aws_job_id"));
    else
        snprintf(out, cap,
                 "https://console.aws.amazon.com/batch/home#jobs/"
                 "mnp-job/%s",
                 js(j->spec, "aws_job_id"));
}

const struct cjob_sched cjob_sched_aws = {
    .name = "aws_batch",
    .local_program = 0,
    .check_cfg = el_job_aws_check_cfg,
    .submit = aws_submit_op,
    .open = cjob_dir_open,
    .status = cjob_aws_status,
    .logs = aws_logs_op,
    .cancel = aws_cancel_op,
    .list = aws_list_op,
    .ui_url = aws_url,
};
