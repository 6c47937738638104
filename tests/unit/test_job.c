/* test_job.c -- the job layer's pure parts: TorchX's -j sizes, handles and
 * ROLE/REPLICA, states and Slurm's state words, --cfg checks, job ids and
 * shell quoting, Slurm hostlists, the launcher defaults inside a Slurm step,
 * and the sbatch script.  Every usage error has its case and its message.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elrun/err.h"
#include "elrun/job.h"
#include "test.h"

static char err[600];

TEST(job_size_forms)
{
    struct el_job_size z;
    CHECK_OK(el_job_parse_size("2x4", &z, err, sizeof err));
    CHECK_EQ(z.min_nodes, 2);
    CHECK_EQ(z.max_nodes, 2);
    CHECK_EQ(z.nproc, 4);
    CHECK_OK(el_job_parse_size("2:5x8", &z, err, sizeof err));
    CHECK_EQ(z.min_nodes, 2);
    CHECK_EQ(z.max_nodes, 5);
    CHECK_EQ(z.nproc, 8);
    CHECK_OK(el_job_parse_size("4", &z, err, sizeof err));
    CHECK_EQ(z.min_nodes, 1);
    CHECK_EQ(z.max_nodes, 1);
    CHECK_EQ(z.nproc, 4);
    CHECK_OK(el_job_parse_size("1:3x1", &z, err, sizeof err));
    CHECK_EQ(z.min_nodes, 1);
    CHECK_EQ(z.max_nodes, 3);
}

TEST(job_size_errors)
{
    static const char *const bad[] = {
        "",     "x",       "2x",  "x4",   "0x4",      "2x0",   "0",
        "2:x4", ":5x8",    "2:5", "2:5x", "2x4x",     "-2x4",  "2 x4",
        "2x4 ", "1:2:3x4", "a",   "2X4",  "100000x1", "2x1.5", NULL,
    };
    struct el_job_size z;
    for (int i = 0; bad[i]; i++) {
        err[0] = 0;
        if (el_job_parse_size(bad[i], &z, err, sizeof err) != EL_EUSAGE)
            TEST_FAIL_("-j '%s' was accepted", bad[i]);
        CHECK(strstr(err, "NODESxNPROC") != NULL);
    }
    CHECK_EQ(el_job_parse_size("5:2x8", &z, err, sizeof err), EL_EUSAGE);
    CHECK(strstr(err, "minimum node count 5 is above the maximum 2"));
    CHECK_EQ(el_job_parse_size(NULL, &z, err, sizeof err), EL_EUSAGE);
}

TEST(job_handle_parse)
{
    struct el_job_handle h;
    CHECK_OK(
        el_job_parse_handle("local://elrun/train-bcd0", &h, err, sizeof err));
    CHECK_STR(h.sched, "local");
    CHECK_STR(h.session, "elrun");
    CHECK_STR(h.id, "train-bcd0");
    CHECK_STR(h.role, "");
    CHECK_EQ(h.replica, -1);
    CHECK_OK(el_job_parse_handle("slurm://elrun/1234", &h, err, sizeof err));
    CHECK_STR(h.sched, "slurm");
    CHECK_STR(h.id, "1234");
    /* TorchX: an empty session is allowed; the log identifier suffix too */
    CHECK_OK(el_job_parse_handle("slurm:///77/train/1", &h, err, sizeof err));
    CHECK_STR(h.session, "");
    CHECK_STR(h.id, "77");
    CHECK_STR(h.role, "train");
    CHECK_EQ(h.replica, 1);
    CHECK_OK(el_job_parse_handle("local://elrun/x/train", &h, err, sizeof err));
    CHECK_STR(h.role, "train");
    CHECK_EQ(h.replica, -1);
}

TEST(job_handle_errors)
{
    static const char *const bad[] = {
        "",
        "train-1",
        "local:/elrun/x",
        "local//elrun/x",
        "://elrun/x",
        "local://elrun",
        "local://elrun/",
        "local://elrun/..",
        "local://elrun/a b",
        "local://elrun/x/train/1x",
        "local://elrun/x/tr ain/1",
        "local://elrun/x/train/",
        NULL,
    };
    struct el_job_handle h;
    for (int i = 0; bad[i]; i++) {
        err[0] = 0;
        if (el_job_parse_handle(bad[i], &h, err, sizeof err) != EL_EUSAGE)
            TEST_FAIL_("handle '%s' was accepted", bad[i]);
        CHECK(strstr(err, "not a job handle") || strstr(err, "ROLE/REPLICA"));
    }
    CHECK_EQ(el_job_parse_handle("lsf://elrun/x", &h, err, sizeof err),
             EL_EUSAGE);
    CHECK(strstr(err, "unknown scheduler 'lsf'"));
    CHECK(strstr(err, "-s local, slurm, aws_batch or kubernetes"));
    /* kubernetes: NAMESPACE:NAME, TorchX's namespace:name */
    CHECK_OK(el_job_parse_handle("kubernetes://elrun/elastic-job:train-x1", &h,
                                 err, sizeof err));
    CHECK_STR(h.sched, "kubernetes");
    CHECK_STR(h.id, "elastic-job:train-x1");
    CHECK_OK(el_job_parse_handle("kubernetes://session/default:a.b/worker/1",
                                 &h, err, sizeof err));
    CHECK_STR(h.id, "default:a.b");
    CHECK_EQ(h.replica, 1);
    static const char *const kbad[] = {
        "kubernetes://elrun/train",      "kubernetes://elrun/:train",
        "kubernetes://elrun/ns:",        "kubernetes://elrun/NS:train",
        "kubernetes://elrun/ns:Train_1", "kubernetes://elrun/n.s:train",
        "kubernetes://elrun/-ns:train"};
    for (size_t i = 0; i < sizeof kbad / sizeof kbad[0]; i++)
        if (el_job_parse_handle(kbad[i], &h, err, sizeof err) != EL_EUSAGE)
            TEST_FAIL_("handle '%s' was accepted", kbad[i]);
}

TEST(job_role_replica)
{
    char role[64];
    int r;
    CHECK_OK(el_job_parse_role_replica("train/3", role, sizeof role, &r, err,
                                       sizeof err));
    CHECK_STR(role, "train");
    CHECK_EQ(r, 3);
    CHECK_OK(el_job_parse_role_replica("train", role, sizeof role, &r, err,
                                       sizeof err));
    CHECK_EQ(r, -1);
    static const char *const bad[] = {
        "/1", "train/", "train/x", "a b/1", "train/1/2", "train/123456", NULL};
    for (int i = 0; bad[i]; i++)
        if (el_job_parse_role_replica(bad[i], role, sizeof role, &r, err,
                                      sizeof err) != EL_EUSAGE)
            TEST_FAIL_("'%s' was accepted", bad[i]);
    CHECK(strstr(err, "is not ROLE/REPLICA"));
}

TEST(job_sched_and_ids)
{
    CHECK_OK(el_job_check_sched("local", err, sizeof err));
    CHECK_OK(el_job_check_sched("slurm", err, sizeof err));
    CHECK_OK(el_job_check_sched("aws_batch", err, sizeof err));
    CHECK_EQ(el_job_check_sched("local_cwd", err, sizeof err), EL_EUSAGE);
    CHECK_STR(err, "unknown scheduler 'local_cwd'; use -s local, slurm, "
                   "aws_batch or kubernetes");
    CHECK_OK(el_job_check_sched("kubernetes", err, sizeof err));
    CHECK(el_job_id_valid("a-b.c_9"));
    CHECK(!el_job_id_valid(""));
    CHECK(!el_job_id_valid(".."));
    CHECK(!el_job_id_valid("a/b"));
    char id[EL_JOB_ID_MAX], id2[EL_JOB_ID_MAX];
    el_job_make_id("my train!", id, sizeof id);
    CHECK(strncmp(id, "my_train_-", 10) == 0);
    CHECK_EQ(strlen(id), 10 + 12);
    CHECK(strchr(id + 10, '8') == NULL); /* TorchX's alphabet has no 8 */
    CHECK(strchr("bcdfghjklmnpqrstvwxz", id[10]) != NULL);
    CHECK(el_job_id_valid(id));
    el_job_make_id("my train!", id2, sizeof id2);
    CHECK(strcmp(id, id2) != 0);
    el_job_make_id("", id, sizeof id);
    CHECK(strncmp(id, "job-", 4) == 0);
}

TEST(job_states)
{
    CHECK_STR(el_job_state_name(EL_JOB_RUNNING), "RUNNING");
    CHECK_STR(el_job_state_name(99), "UNKNOWN");
    CHECK_EQ(EL_JOB_SUCCEEDED, 4); /* TorchX's AppState numbers */
    CHECK_EQ(EL_JOB_UNKNOWN, 7);
    for (int s = 0; s <= 7; s++)
        CHECK_EQ(el_job_state_parse(el_job_state_name(s)), s);
    CHECK_EQ(el_job_state_parse("running"), -1);
    CHECK(el_job_state_final(EL_JOB_CANCELLED));
    CHECK(!el_job_state_final(EL_JOB_PENDING));
    CHECK_EQ(el_job_state_from_slurm("COMPLETED"), EL_JOB_SUCCEEDED);
    CHECK_EQ(el_job_state_from_slurm("CANCELLED+"), EL_JOB_CANCELLED);
    CHECK_EQ(el_job_state_from_slurm("CANCELLED by 0"), EL_JOB_CANCELLED);
    CHECK_EQ(el_job_state_from_slurm("PREEMPTED"), EL_JOB_FAILED);
    CHECK_EQ(el_job_state_from_slurm("NODE_FAIL"), EL_JOB_FAILED);
    CHECK_EQ(el_job_state_from_slurm("TIMEOUT"), EL_JOB_FAILED);
    CHECK_EQ(el_job_state_from_slurm("REQUEUED"), EL_JOB_PENDING);
    CHECK_EQ(el_job_state_from_slurm("PENDING\n"), EL_JOB_PENDING);
    CHECK_EQ(el_job_state_from_slurm("RUNNING"), EL_JOB_RUNNING);
    CHECK_EQ(el_job_state_from_slurm("COMPLETING"), EL_JOB_RUNNING);
    CHECK_EQ(el_job_state_from_slurm("RUN"), EL_JOB_UNKNOWN);
    CHECK_EQ(el_job_state_from_slurm(""), EL_JOB_UNKNOWN);
}

TEST(job_cfg)
{
    CHECK_OK(el_job_check_cfg("slurm", "partition=debug,time=10,qos=hi", err,
                              sizeof err));
    CHECK_OK(el_job_check_cfg("slurm",
                              "cpus_per_task=4,gpus-per-node=2,"
                              "mem=4G,account=a,constraint=x",
                              err, sizeof err));
    CHECK_OK(el_job_check_cfg("slurm", NULL, err, sizeof err));
    CHECK_OK(el_job_check_cfg("local", "", err, sizeof err));
    CHECK_EQ(el_job_check_cfg("slurm", "nodes=3", err, sizeof err), EL_EUSAGE);
    CHECK(strstr(err, "--cfg nodes: not an option of the slurm scheduler"));
    CHECK(strstr(err, "gpus-per-node"));
    CHECK_EQ(el_job_check_cfg("slurm", "partition", err, sizeof err),
             EL_EUSAGE);
    CHECK(strstr(err, "is not key=value"));
    CHECK_EQ(el_job_check_cfg("slurm", "time=", err, sizeof err), EL_EUSAGE);
    CHECK_EQ(el_job_check_cfg("slurm", "=5", err, sizeof err), EL_EUSAGE);
    CHECK_EQ(el_job_check_cfg("local", "log_dir=/x", err, sizeof err),
             EL_EUSAGE);
    CHECK(strstr(err, "the local scheduler has no options"));
    /* kubernetes: TorchX's names with _ or - alike */
    CHECK_OK(el_job_check_cfg("kubernetes",
                              "image=r/elrun:1,namespace=ns,rdzv_endpoint=e:1,"
                              "etcd-image=q/etcd:3,service_account=sa,cpu=2,"
                              "memory=4Gi,gpu=1",
                              err, sizeof err));
    CHECK_EQ(el_job_check_cfg("kubernetes", "image=x,queue=default", err,
                              sizeof err),
             EL_EUSAGE);
    CHECK(strstr(err, "--cfg queue: not an option of the kubernetes "
                      "scheduler; it knows image, namespace"));
}

TEST(job_shell_quote)
{
    char *q = el_job_shell_quote("it's a $x");
    CHECK_STR(q, "'it'\\''s a $x'");
    free(q);
    q = el_job_shell_quote("");
    CHECK_STR(q, "''");
    free(q);
}

static void check_hosts(const char *list, const char *want)
{
    char **h;
    int n;
    if (el_job_hostlist_expand(list, 1000, &h, &n, err, sizeof err))
        TEST_FAIL_("'%s' rejected: %s", list, err);
    char got[4096] = "";
    for (int i = 0; i < n; i++) {
        if (i)
            strcat(got, " ");
        strcat(got, h[i]);
    }
    el_job_hosts_free(h, n);
    if (strcmp(got, want))
        TEST_FAIL_("'%s' -> '%s', want '%s'", list, got, want);
}

TEST(job_hostlist_expand)
{
    check_hosts("node[01-04,07],gpu1",
                "node01 node02 node03 node04 node07 gpu1");
    check_hosts("elnode[1-2]", "elnode1 elnode2");
    check_hosts("a", "a");
    check_hosts("a,b,c", "a b c");
    check_hosts("n[8-11]", "n8 n9 n10 n11");
    check_hosts("n[098-101]", "n098 n099 n100 n101");
    check_hosts("r[1-2]n[3-4]", "r1n3 r1n4 r2n3 r2n4");
    check_hosts("n[5]x", "n5x");
    check_hosts("gpu-[0-1].ib", "gpu-0.ib gpu-1.ib");
}

TEST(job_hostlist_errors)
{
    static const char *const bad[] = {
        "",       ",",     "a,",     ",a",      "n[",   "n[]",
        "n[1-]",  "n[-2]", "n[3-1]", "n[1,]",   "n[a]", "n]1[",
        "n[[1]]", "n[1-2", "a b",    "n[1-2]]", NULL,
    };
    char **h;
    int n;
    for (int i = 0; bad[i]; i++) {
        err[0] = 0;
        if (el_job_hostlist_expand(bad[i], 1000, &h, &n, err, sizeof err) !=
            EL_EUSAGE)
            TEST_FAIL_("hostlist '%s' was accepted", bad[i]);
        CHECK(strstr(err, "is not a Slurm hostlist"));
    }
    CHECK_EQ(el_job_hostlist_expand("n[1-2000]", 1000, &h, &n, err, sizeof err),
             EL_EUSAGE);
    CHECK(strstr(err, "more than 1000 hosts"));
}

TEST(job_hostlist_first)
{
    char h[64];
    CHECK_OK(el_job_hostlist_first("node[01-04,07],gpu1", h, sizeof h, err,
                                   sizeof err));
    CHECK_STR(h, "node01");
    CHECK_OK(el_job_hostlist_first("gpu1,node[01-04]", h, sizeof h, err,
                                   sizeof err));
    CHECK_STR(h, "gpu1");
    /* a huge range costs nothing for the first host */
    CHECK_OK(el_job_hostlist_first("n[000001-999999]", h, sizeof h, err,
                                   sizeof err));
    CHECK_STR(h, "n000001");
    CHECK_EQ(el_job_hostlist_first("n[", h, sizeof h, err, sizeof err),
             EL_EUSAGE);
}

static const char *var(const struct el_job_env_defaults *d, const char *name,
                       const char **from)
{
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->var[i].name, name) == 0) {
            if (from)
                *from = d->var[i].from;
            return d->var[i].value;
        }
    return NULL;
}

TEST(job_slurm_defaults)
{
    struct el_job_env_defaults d;
    const char *from;
    char *outside[] = {"SLURM_JOB_ID=5", "SLURM_JOB_NUM_NODES=2", NULL};
    CHECK_EQ(el_job_slurm_defaults(outside, &d, err, sizeof err), 0);
    CHECK_EQ(d.n, 0);
    char *step[] = {"SLURM_JOB_ID=1234",
                    "SLURM_STEP_ID=0",
                    "SLURM_JOB_NUM_NODES=4",
                    "SLURM_STEP_NUM_NODES=3",
                    "SLURM_NODEID=2",
                    "SLURM_JOB_NODELIST=node[01-04]",
                    "SLURM_STEP_NODELIST=node[02-04]",
                    NULL};
    CHECK_EQ(el_job_slurm_defaults(step, &d, err, sizeof err), 1);
    CHECK_STR(var(&d, "PET_NNODES", &from), "3");
    CHECK_STR(from, "SLURM_STEP_NUM_NODES");
    CHECK_STR(var(&d, "PET_NODE_RANK", &from), "2");
    CHECK_STR(from, "SLURM_NODEID");
    CHECK_STR(var(&d, "PET_MASTER_ADDR", &from), "node02");
    CHECK_STR(from, "SLURM_STEP_NODELIST");
    CHECK_STR(var(&d, "PET_MASTER_PORT", NULL), "29734");
    CHECK_STR(var(&d, "PET_RDZV_ID", NULL), "1234");
    /* the job's values when the step's are missing; the user's PET_* win */
    char *job[] = {"SLURM_JOB_ID=7",
                   "SLURM_STEP_ID=1",
                   "SLURM_JOB_NUM_NODES=2",
                   "SLURM_NODEID=0",
                   "SLURM_JOB_NODELIST=gpu1,gpu2",
                   "PET_MASTER_PORT=4000",
                   NULL};
    CHECK_EQ(el_job_slurm_defaults(job, &d, err, sizeof err), 1);
    CHECK_STR(var(&d, "PET_NNODES", &from), "2");
    CHECK_STR(from, "SLURM_JOB_NUM_NODES");
    CHECK_STR(var(&d, "PET_MASTER_ADDR", NULL), "gpu1");
    CHECK(var(&d, "PET_MASTER_PORT", NULL) == NULL);
}

TEST(job_slurm_defaults_errors)
{
    struct el_job_env_defaults d;
    char *rank_high[] = {"SLURM_JOB_ID=7",         "SLURM_STEP_ID=0",
                         "SLURM_JOB_NUM_NODES=2",  "SLURM_NODEID=2",
                         "SLURM_JOB_NODELIST=a,b", NULL};
    CHECK_EQ(el_job_slurm_defaults(rank_high, &d, err, sizeof err), EL_EUSAGE);
    CHECK(strstr(err, "SLURM_NODEID=2"));
    CHECK(strstr(err, "give --nnodes, --node-rank and --master-addr"));
    char *no_list[] = {"SLURM_JOB_ID=7", "SLURM_STEP_ID=0",
                       "SLURM_JOB_NUM_NODES=2", "SLURM_NODEID=0", NULL};
    CHECK_EQ(el_job_slurm_defaults(no_list, &d, err, sizeof err), EL_EUSAGE);
    CHECK(strstr(err, "SLURM_JOB_NODELIST=(unset)"));
    char *bad_list[] = {"SLURM_JOB_ID=7",          "SLURM_STEP_ID=0",
                        "SLURM_JOB_NUM_NODES=2",   "SLURM_NODEID=0",
                        "SLURM_JOB_NODELIST=n[1-", NULL};
    CHECK_EQ(el_job_slurm_defaults(bad_list, &d, err, sizeof err), EL_EUSAGE);
    CHECK(strstr(err, "SLURM_JOB_NODELIST: 'n[1-' is not a Slurm hostlist"));
    char *bad_num[] = {"SLURM_JOB_ID=x",        "SLURM_STEP_ID=0",
                       "SLURM_JOB_NUM_NODES=2", "SLURM_NODEID=0",
                       "SLURM_JOB_NODELIST=a",  NULL};
    CHECK_EQ(el_job_slurm_defaults(bad_num, &d, err, sizeof err), EL_EUSAGE);
}

static struct el_job_spec spec(void)
{
    static char *launcher[] = {"--no-python", "--max-restarts=2", "/bin/train",
                               "--epochs", "it's 3"};
    static char *env[] = {"FOO=a b"};
    struct el_job_spec s = {0};
    s.name = "train";
    s.size = (struct el_job_size){2, 3, 4};
    s.max_retries = 2;
    s.home = "/h/.elrun";
    s.elrun = "/usr/bin/elrun";
    s.rdzv_backend = "c10d";
    s.env = env;
    s.n_env = 1;
    s.cfg = "time=10,partition=debug,gpus_per_node=1";
    s.launcher = launcher;
    s.n_launcher = 5;
    s.n_launcher_flags = 2;
    return s;
}

TEST(job_sbatch_script)
{
    struct el_job_spec s = spec();
    char *out;
    CHECK_OK(el_job_sbatch_script(&s, &out, err, sizeof err));
    CHECK(strncmp(out, "#!/bin/bash\n", 12) == 0);
    static const char *const want[] = {
        "#SBATCH --job-name='train'\n",
        "#SBATCH --nodes=2-3\n",
        "#SBATCH --no-kill\n",
        "--ntasks-per-node=1 \\\n",
        "#SBATCH --requeue\n",
        "#SBATCH --partition='debug'\n",
        "#SBATCH --time='10'\n",
        "#SBATCH --gpus-per-node='1'\n",
        "D='/h/.elrun/jobs/slurm'/\"$SLURM_JOB_ID\"\n",
        "export FOO='a b'\n",
        "\"$ELRUN\" store --listen 0.0.0.0:0",
        "head=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)",
        "srun --nodes=\"$SLURM_JOB_NUM_NODES\"",
        "--no-kill",
        "--kill-on-bad-exit=0",
        "--output=\"$D/replicas/%t/combined.log\"",
        "\"$ELRUN\" run '--no-python' '--max-restarts=2' \\\n",
        "--nnodes=2:\"$SLURM_JOB_NUM_NODES\" --nproc-per-node=4 "
        "--rdzv-backend=c10d --rdzv-endpoint=\"$head:$port\"",
        "--rdzv-conf='is_host=0'",
        "'/bin/train' '--epochs' 'it'\\''s 3' &\n",
        "if [ $state = FAILED ] && [ 2 -gt \"$attempt\" ]; then",
        "scontrol requeue \"$SLURM_JOB_ID\"",
        "echo \"$state $rc\" >\"$D/end\"",
        NULL,
    };
    for (int i = 0; want[i]; i++)
        if (!strstr(out, want[i]))
            TEST_FAIL_("script lacks: %s\n%s", want[i], out);
    /* with --ntasks-per-node on the allocation Slurm grants MIN nodes */
    CHECK(strstr(out, "#SBATCH --ntasks-per-node") == NULL);
    /* --cfg goes out in the documented order: partition before time */
    CHECK(strstr(out, "--partition") < strstr(out, "--time"));
    free(out);

    s.size = (struct el_job_size){2, 2, 1};
    s.max_retries = 0;
    s.rdzv_backend = "etcd";
    s.rdzv_endpoint = "10.0.0.1:2379";
    s.rdzv_conf = "join_timeout=5";
    s.cfg = NULL;
    CHECK_OK(el_job_sbatch_script(&s, &out, err, sizeof err));
    CHECK(strstr(out, "#SBATCH --nodes=2\n"));
    CHECK(strstr(out, "#SBATCH --no-requeue\n"));
    CHECK(strstr(out, "--rdzv-backend=etcd --rdzv-endpoint='10.0.0.1:2379'"));
    CHECK(strstr(out, "--rdzv-conf='join_timeout=5'"));
    CHECK(strstr(out, "store --listen") == NULL);
    CHECK(strstr(out, "is_host") == NULL);
    free(out);

    /* one node: c10d's single-node path, the agent hosts its own store */
    s = spec();
    s.size = (struct el_job_size){1, 1, 2};
    CHECK_OK(el_job_sbatch_script(&s, &out, err, sizeof err));
    CHECK(strstr(out, "#SBATCH --nodes=1\n"));
    CHECK(strstr(out, "--rdzv-endpoint=localhost:0"));
    CHECK(strstr(out, "store --listen") == NULL);
    free(out);
}

TEST(job_sbatch_errors)
{
    struct el_job_spec s = spec();
    char *out = (char *)1;
    s.cfg = "nodelist=a";
    CHECK_EQ(el_job_sbatch_script(&s, &out, err, sizeof err), EL_EUSAGE);
    CHECK(out == NULL);
    CHECK(strstr(err, "--cfg nodelist"));
    s = spec();
    static char *env[] = {"1X=2"};
    s.env = env;
    CHECK_EQ(el_job_sbatch_script(&s, &out, err, sizeof err), EL_EUSAGE);
    CHECK(strstr(err, "--env '1X=2' is not NAME=VALUE"));
}

TEST(job_find_program)
{
    char why[300];
    CHECK_EQ(el_job_find_program("/bin/sh", why, sizeof why), 0);
    CHECK_EQ(el_job_find_program("sh", why, sizeof why), 0);
    CHECK_EQ(el_job_find_program("/no/such/prog", why, sizeof why), -1);
    CHECK_STR(why, "program '/no/such/prog' does not exist; check the path");
    char tmp[] = "/tmp/elrun-test-noexec.XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    close(fd);
    chmod(tmp, 0644);
    CHECK_EQ(el_job_find_program(tmp, why, sizeof why), -1);
    CHECK(strstr(why, "is not executable"));
    unlink(tmp);
    CHECK_EQ(el_job_find_program("no-such-prog-xyz", why, sizeof why), -1);
    CHECK(strstr(why, "was not found in PATH"));
}
