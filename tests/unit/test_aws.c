/* test_aws.c -- the AWS generators: the Batch job definition and submit-job
 * input of `elrun submit -s aws_batch` (every field the issue names, --cfg
 * checks), Batch's states, the launcher's defaults inside a Batch node (main
 * node hosts the store, the others join it), and the CloudFormation template
 * of `elrun aws template` (resources, sizes, spot, existing VPC/EFS, usage
 * errors).  That AWS accepts them is checked by real tools in t0820 (the aws
 * CLI's parameter validation, cfn-lint).
 */
#include <stdlib.h>
#include <string.h>

#include "elrun/err.h"
#include "elrun/job.h"
#include "elrun/job_aws.h"
#include "test.h"

static char err[1024];

static char *words[] = {"--max-restarts=3", "train.py", "--epochs", "3"};

static struct el_job_spec spec(const char *cfg)
{
    struct el_job_spec s = {0};
    static char *env[] = {"FOO=bar=baz"};
    s.name = "my job";
    s.size = (struct el_job_size){2, 4, 8};
    s.max_retries = 2;
    s.home = "/h";
    s.elrun = "/usr/bin/elrun";
    s.rdzv_backend = "c10d";
    s.env = env;
    s.n_env = 1;
    s.cfg = cfg;
    s.launcher = words;
    s.n_launcher = 4;
    s.n_launcher_flags = 1;
    return s;
}

/* The value at path a.b.0.c in o, or NULL. */
static json_t *jat(json_t *o, const char *path)
{
    char p[256], *save = NULL;
    snprintf(p, sizeof p, "%s", path);
    for (char *t = strtok_r(p, ".", &save); t && o;
         t = strtok_r(NULL, ".", &save))
        o = json_is_array(o) ? json_array_get(o, (size_t)atoi(t))
                             : json_object_get(o, t);
    return o;
}

/* The string there ("" if none). */
static const char *at(json_t *o, const char *path)
{
    const char *s = json_string_value(jat(o, path));
    return s ? s : "";
}

TEST(aws_batch_job_definition)
{
    struct el_job_spec s = spec(
        "queue=gpu-q,image=acct.dkr.ecr/train:1,vcpus=8,memory=30000,gpus=1,"
        "job_role=arn:aws:iam::1:role/j,execution_role=arn:aws:iam::1:role/x,"
        "efs=fs-0abc,efs_path=/ckpt,tags=team:ml;cost:42,share_id=s1");
    json_t *def, *sub;
    CHECK_OK(el_job_aws_batch_inputs(&s, "my_job-abc", "ann", &def, &sub, err,
                                     sizeof err));
    CHECK_STR(at(def, "jobDefinitionName"), "my_job");
    CHECK_STR(at(def, "type"), "multinode");
    CHECK_EQ(json_integer_value(jat(def, "nodeProperties.numNodes")), 4);
    CHECK_EQ(json_integer_value(jat(def, "nodeProperties.mainNode")), 0);
    json_t *nr = jat(def, "nodeProperties.nodeRangeProperties");
    CHECK_EQ(json_array_size(nr), 1);
    CHECK_STR(at(nr, "0.targetNodes"), "0:3");
    json_t *c = jat(nr, "0.container");
    CHECK_STR(at(c, "image"), "acct.dkr.ecr/train:1");
    static const char *const cmd[] = {"elrun",
                                      "--nnodes=2:4",
                                      "--nproc-per-node=8",
                                      "--max-restarts=3",
                                      "train.py",
                                      "--epochs",
                                      "3"};
    CHECK_EQ(json_array_size(jat(c, "command")), 7);
    for (int i = 0; i < 7; i++)
        CHECK_STR(
            json_string_value(json_array_get(jat(c, "command"), (size_t)i)),
            cmd[i]);
    int foo = 0, ck = 0;
    json_t *e;
    size_t i;
    json_array_foreach(jat(c, "environment"), i, e)
    {
        foo |= strcmp(at(e, "name"), "FOO") == 0 &&
               strcmp(at(e, "value"), "bar=baz") == 0;
        ck |= strcmp(at(e, "name"), "ELRUN_CKPT_DIR") == 0 &&
              strcmp(at(e, "value"), "/ckpt") == 0;
    }
    CHECK(foo && ck);
    CHECK_STR(at(c, "resourceRequirements.0.type"), "VCPU");
    CHECK_STR(at(c, "resourceRequirements.0.value"), "8");
    CHECK_STR(at(c, "resourceRequirements.1.type"), "MEMORY");
    CHECK_STR(at(c, "resourceRequirements.1.value"), "30000");
    CHECK_STR(at(c, "resourceRequirements.2.type"), "GPU");
    CHECK_STR(at(c, "resourceRequirements.2.value"), "1");
    CHECK_STR(at(c, "jobRoleArn"), "arn:aws:iam::1:role/j");
    CHECK_STR(at(c, "executionRoleArn"), "arn:aws:iam::1:role/x");
    CHECK_STR(at(c, "logConfiguration.logDriver"), "awslogs");
    CHECK_STR(at(c, "volumes.0.efsVolumeConfiguration.fileSystemId"),
              "fs-0abc");
    CHECK_STR(at(c, "mountPoints.0.sourceVolume"), "efs");
    CHECK_STR(at(c, "mountPoints.0.containerPath"), "/ckpt");
    CHECK_EQ(json_integer_value(jat(def, "retryStrategy.attempts")), 3);
    CHECK_STR(at(def, "tags.elrun:id"), "my_job-abc");
    CHECK_STR(at(def, "tags.elrun:user"), "ann");
    CHECK_STR(at(def, "tags.team"), "ml");
    CHECK_STR(at(def, "tags.cost"), "42");
    CHECK_STR(at(sub, "jobQueue"), "gpu-q");
    CHECK_STR(at(sub, "jobDefinition"), "my_job");
    CHECK_STR(at(sub, "shareIdentifier"), "s1");
    CHECK_STR(at(sub, "tags.elrun:id"), "my_job-abc");
    json_decref(def);
    json_decref(sub);

    /* etcd: the endpoint goes on the command line; defaults otherwise. */
    s = spec("queue=q,image=i");
    s.rdzv_backend = "etcd";
    s.rdzv_endpoint = "10.0.0.5:2379";
    s.max_retries = 0;
    CHECK_OK(
        el_job_aws_batch_inputs(&s, "x", NULL, &def, &sub, err, sizeof err));
    c = jat(def, "nodeProperties.nodeRangeProperties.0.container");
    CHECK_STR(at(c, "command.3"), "--rdzv-backend=etcd");
    CHECK_STR(at(c, "command.4"), "--rdzv-endpoint=10.0.0.5:2379");
    CHECK_STR(at(c, "resourceRequirements.0.value"), "1");
    CHECK_STR(at(c, "resourceRequirements.1.value"), "2048");
    CHECK(!jat(c, "resourceRequirements.2"));
    CHECK(!jat(c, "volumes") && !jat(c, "jobRoleArn"));
    CHECK_EQ(json_integer_value(jat(def, "retryStrategy.attempts")), 1);
    json_decref(def);
    json_decref(sub);
}

TEST(aws_batch_usage_errors)
{
    json_t *def, *sub;
    static const struct {
        const char *cfg, *msg;
    } bad[] = {
        {"image=i", "needs --cfg queue=JOB_QUEUE,image=IMAGE"},
        {"queue=q", "needs --cfg queue=JOB_QUEUE,image=IMAGE"},
        {"queue=q,image=i,partition=x", "--cfg partition: not an option of "
                                        "the aws_batch scheduler"},
        {"queue=q,image=i,vcpus=0", "--cfg vcpus=0: a positive whole number"},
        {"queue=q,image=i,memory=1g", "--cfg memory=1g: a positive whole "
                                      "number (MiB)"},
        {"queue=q,image=i,efs=nfs1", "--cfg efs=nfs1: an EFS file system id"},
        {"queue=q,image=i,efs_path=ckpt", "an absolute path"},
        {"queue=q,image=i,tags=a", "--cfg tags=a: write KEY:VALUE"},
        {"queue=q,image=i,privileged=yes", "true or false"},
        {"queue", "is not key=value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct el_job_spec s = spec(bad[i].cfg);
        if (el_job_aws_batch_inputs(&s, "x", "u", &def, &sub, err,
                                    sizeof err) != EL_EUSAGE)
            TEST_FAIL_("--cfg %s was accepted", bad[i].cfg);
        if (!strstr(err, bad[i].msg))
            TEST_FAIL_("--cfg %s: '%s'", bad[i].cfg, err);
        CHECK(def == NULL && sub == NULL);
    }
    struct el_job_spec s = spec("queue=q,image=i");
    s.max_retries = 10;
    CHECK_EQ(el_job_aws_batch_inputs(&s, "x", "u", &def, &sub, err, sizeof err),
             EL_EUSAGE);
    CHECK(strstr(err, "at most 10 attempts"));
    char *env[] = {"AWS_BATCH_JOB_ID=1"};
    s = spec("queue=q,image=i");
    s.env = env;
    CHECK_EQ(el_job_aws_batch_inputs(&s, "x", "u", &def, &sub, err, sizeof err),
             EL_EUSAGE);
}

TEST(aws_batch_states)
{
    CHECK_EQ(el_job_state_from_aws("SUBMITTED"), EL_JOB_SUBMITTED);
    CHECK_EQ(el_job_state_from_aws("RUNNABLE"), EL_JOB_PENDING);
    CHECK_EQ(el_job_state_from_aws("STARTING"), EL_JOB_PENDING);
    CHECK_EQ(el_job_state_from_aws("RUNNING"), EL_JOB_RUNNING);
    CHECK_EQ(el_job_state_from_aws("SUCCEEDED"), EL_JOB_SUCCEEDED);
    CHECK_EQ(el_job_state_from_aws("FAILED"), EL_JOB_FAILED);
    CHECK_EQ(el_job_state_from_aws("NOPE"), EL_JOB_UNKNOWN);
    CHECK_EQ(el_job_state_from_aws(NULL), EL_JOB_UNKNOWN);
}

static const char *var(const struct el_job_env_defaults *d, const char *n)
{
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->var[i].name, n) == 0)
            return d->var[i].value;
    return NULL;
}

TEST(aws_batch_node_defaults)
{
    struct el_job_env_defaults d;
    char *none[] = {"HOME=/", NULL};
    CHECK_EQ(el_job_aws_batch_defaults(none, 0, &d, err, sizeof err), 0);
    /* The main node: no MAIN_NODE_PRIVATE_IPV4_ADDRESS, hosts the store. */
    char *main_env[] = {"AWS_BATCH_JOB_ID=abc#0", "AWS_BATCH_JOB_NODE_INDEX=0",
                        "AWS_BATCH_JOB_MAIN_NODE_INDEX=0",
                        "AWS_BATCH_JOB_NUM_NODES=3", NULL};
    CHECK_EQ(el_job_aws_batch_defaults(main_env, 0, &d, err, sizeof err), 1);
    CHECK_STR(var(&d, "PET_NODE_RANK"), "0");
    CHECK_STR(var(&d, "PET_RDZV_ID"), "abc");
    CHECK_STR(var(&d, "PET_RDZV_BACKEND"), "c10d");
    CHECK_STR(var(&d, "PET_RDZV_ENDPOINT"), "0.0.0.0:29500");
    CHECK_STR(var(&d, "PET_RDZV_CONF"), "is_host=1");
    char *other[] = {"AWS_BATCH_JOB_ID=abc#2",
                     "AWS_BATCH_JOB_NODE_INDEX=2",
                     "AWS_BATCH_JOB_MAIN_NODE_INDEX=0",
                     "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS=10.1.2.3",
                     "PET_RDZV_CONF=timeout=60",
                     NULL};
    CHECK_EQ(el_job_aws_batch_defaults(other, 0, &d, err, sizeof err), 1);
    CHECK_STR(var(&d, "PET_NODE_RANK"), "2");
    CHECK_STR(var(&d, "PET_RDZV_ENDPOINT"), "10.1.2.3:29500");
    CHECK_STR(var(&d, "PET_RDZV_CONF"), "timeout=60,is_host=0");
    /* An endpoint given (etcd): only the rank and the id. */
    CHECK_EQ(el_job_aws_batch_defaults(other, 1, &d, err, sizeof err), 1);
    CHECK(!var(&d, "PET_RDZV_ENDPOINT") && !var(&d, "PET_RDZV_CONF"));
    CHECK_STR(var(&d, "PET_RDZV_ID"), "abc");
    char *lost[] = {"AWS_BATCH_JOB_ID=abc#2", "AWS_BATCH_JOB_NODE_INDEX=2",
                    "AWS_BATCH_JOB_MAIN_NODE_INDEX=0", NULL};
    CHECK_EQ(el_job_aws_batch_defaults(lost, 0, &d, err, sizeof err),
             EL_EUSAGE);
    CHECK(strstr(err, "no AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"));
    char *bad[] = {"AWS_BATCH_JOB_ID=abc", "AWS_BATCH_JOB_NODE_INDEX=x", NULL};
    CHECK_EQ(el_job_aws_batch_defaults(bad, 0, &d, err, sizeof err), EL_EUSAGE);
    CHECK(strstr(err, "is not a node index"));
}

static struct el_aws_template tpl(void)
{
    static char *l[] = {"train.py", "--epochs", "3"};
    struct el_aws_template t = {0};
    t.name = "demo";
    t.size = (struct el_job_size){2, 5, 4};
    t.desired = 3;
    t.etcd_nodes = 3;
    t.elrun_url = "https://example.com/elrun";
    t.launcher = l;
    t.n_launcher = 3;
    return t;
}

TEST(aws_template_resources)
{
    struct el_aws_template t = tpl();
    t.spot_price = "0.42";
    json_t *o;
    CHECK_OK(el_aws_template(&t, &o, err, sizeof err));
    json_t *r = json_object_get(o, "Resources");
    static const struct {
        const char *name, *type;
    } want[] = {
        {"VPC", "AWS::EC2::VPC"},
        {"InternetGateway", "AWS::EC2::InternetGateway"},
        {"SubnetA", "AWS::EC2::Subnet"},
        {"SubnetB", "AWS::EC2::Subnet"},
        {"InstanceSecurityGroup", "AWS::EC2::SecurityGroup"},
        {"EfsSecurityGroup", "AWS::EC2::SecurityGroup"},
        {"FileSystem", "AWS::EFS::FileSystem"},
        {"MountTarget0", "AWS::EFS::MountTarget"},
        {"MountTarget1", "AWS::EFS::MountTarget"},
        {"LogGroup", "AWS::Logs::LogGroup"},
        {"WorkerRole", "AWS::IAM::Role"},
        {"EtcdRole", "AWS::IAM::Role"},
        {"EtcdGroup", "AWS::AutoScaling::AutoScalingGroup"},
        {"WorkerGroup", "AWS::AutoScaling::AutoScalingGroup"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (strcmp(at(json_object_get(r, want[i].name), "Type"), want[i].type))
            TEST_FAIL_("%s is not a %s", want[i].name, want[i].type);
    CHECK_STR(at(r, "WorkerGroup.Properties.MinSize"), "2");
    CHECK_STR(at(r, "WorkerGroup.Properties.MaxSize"), "5");
    CHECK_STR(at(r, "WorkerGroup.Properties.DesiredCapacity"), "3");
    CHECK_STR(at(r, "EtcdGroup.Properties.DesiredCapacity"), "3");
    json_t *wd = jat(r, "WorkerLaunchTemplate.Properties.LaunchTemplateData");
    CHECK_STR(at(wd, "InstanceMarketOptions.MarketType"), "spot");
    CHECK_STR(at(wd, "InstanceMarketOptions.SpotOptions.MaxPrice"), "0.42");
    const char *ud = at(wd, "UserData.Fn::Base64.Fn::Sub.0");
    CHECK(strstr(ud, "--nnodes=2:5 --nproc-per-node=4 --rdzv-backend=etcd "
                     "--rdzv-endpoint=$endpoint --rdzv-id=demo "
                     "--preempt-notice-secs 110 --preempt-notice-cmd "
                     "/usr/local/bin/elrun-spot-notice 'train.py' "
                     "'--epochs' '3'"));
    CHECK(strstr(ud, "/mnt/efs nfs4 nfsvers=4.1"));
    /* Spot (above): the agent's notice hook polls EC2's interruption
     * notice, IMDSv2 (a token first, sent with the request). */
    const char *tok = strstr(ud, "http://169.254.169.254/latest/api/token");
    const char *act = strstr(ud, "http://169.254.169.254/latest/meta-data/"
                                 "spot/instance-action");
    CHECK(tok && act && tok < act);
    const char *hdr = strstr(tok, "-H \"X-aws-ec2-metadata-token: $t\"");
    CHECK(hdr && hdr < act);
    CHECK(!jat(r, "EtcdLaunchTemplate.Properties.LaunchTemplateData."
                  "InstanceMarketOptions"));
    json_decref(o);

    /* An existing VPC and EFS: none made. */
    t = tpl();
    t.vpc_id = "vpc-0123";
    t.subnets = "subnet-1,subnet-2,subnet-3";
    t.efs_id = "fs-9";
    CHECK_OK(el_aws_template(&t, &o, err, sizeof err));
    r = json_object_get(o, "Resources");
    CHECK(!json_object_get(r, "VPC") && !json_object_get(r, "FileSystem"));
    CHECK_EQ(json_array_size(jat(r, "WorkerGroup.Properties."
                                    "VPCZoneIdentifier")),
             3);
    CHECK_STR(at(o, "Outputs.FileSystem.Value"), "fs-9");
    CHECK(!jat(r, "WorkerLaunchTemplate.Properties.LaunchTemplateData."
                  "InstanceMarketOptions"));
    /* On demand: no notice to poll. */
    CHECK(!strstr(at(r, "WorkerLaunchTemplate.Properties.LaunchTemplateData."
                        "UserData.Fn::Base64.Fn::Sub.0"),
                  "preempt-notice"));
    json_decref(o);
}

TEST(aws_template_usage_errors)
{
    json_t *o;
    struct el_aws_template t = tpl();
    t.etcd_nodes = 2;
    CHECK_EQ(el_aws_template(&t, &o, err, sizeof err), EL_EUSAGE);
    CHECK(strstr(err, "1 or 3 etcd instances"));
    t = tpl();
    t.desired = 6;
    CHECK_EQ(el_aws_template(&t, &o, err, sizeof err), EL_EUSAGE);
    CHECK(strstr(err, "between the job's MIN 2 and MAX 5"));
    t = tpl();
    t.name = "no spaces";
    CHECK_EQ(el_aws_template(&t, &o, err, sizeof err), EL_EUSAGE);
    t = tpl();
    t.vpc_id = "vpc-1";
    CHECK_EQ(el_aws_template(&t, &o, err, sizeof err), EL_EUSAGE);
    CHECK(strstr(err, "go together"));
    t = tpl();
    t.efs_id = "nfs";
    CHECK_EQ(el_aws_template(&t, &o, err, sizeof err), EL_EUSAGE);
    t = tpl();
    t.elrun_url = NULL;
    CHECK_EQ(el_aws_template(&t, &o, err, sizeof err), EL_EUSAGE);
    CHECK(strstr(err, "--elrun-url"));
    t = tpl();
    t.n_launcher = 0;
    CHECK_EQ(el_aws_template(&t, &o, err, sizeof err), EL_EUSAGE);
    CHECK(o == NULL);
}
