/* test_opts.c -- the launcher's flag parser: torchrun's spellings, prefixes,
 * PET_* fallbacks, value checks and the messages of usage errors.
 * src/cli is not part of libelrun, so the parser (opts.c, rdzv_conf.c) is
 * compiled in here.
 */
#include "cli/opts.c"
#include "cli/rdzv_conf.c"
#include "test.h"

#include <signal.h>

static char *empty_env[] = {NULL};

/* Parse a NULL-terminated list of words (argv[0] added) with env. */
static int parse(struct el_opts *o, char **env, char *err, size_t errlen,
                 const char *const *words)
{
    static char *argv[64];
    int argc = 0;
    argv[argc++] = "elrun";
    for (; *words; words++)
        argv[argc++] = (char *)*words;
    argv[argc] = NULL;
    return el_opts_parse(o, argc, argv, env ? env : empty_env, err, errlen);
}

#define PARSE(o, ...) \
    parse((o), NULL, err, sizeof err, (const char *[]){__VA_ARGS__, NULL})
#define PARSE_ENV(o, env, ...) \
    parse((o), (env), err, sizeof err, (const char *[]){__VA_ARGS__, NULL})

TEST(opts_defaults)
{
    struct el_opts o;
    char err[512];
    CHECK_OK(PARSE(&o, "train.py"));
    CHECK_EQ(o.min_nodes, 1);
    CHECK_EQ(o.max_nodes, 1);
    CHECK_EQ(o.nproc, 1);
    CHECK_STR(o.rdzv_backend, "static");
    CHECK_STR(o.rdzv_id, "none");
    CHECK_STR(o.role, "default");
    CHECK_STR(o.master_addr, "127.0.0.1");
    CHECK_EQ(o.master_port, 29500);
    CHECK_EQ(o.max_restarts, 0);
    CHECK_STR(o.redirects, "0");
    CHECK_STR(o.tee, "0");
    CHECK_STR(o.script, "train.py");
    CHECK_EQ(o.script_argc, 0);
    CHECK(o.log_dir == NULL);
}

TEST(opts_dash_and_underscore_spellings)
{
    struct el_opts o;
    char err[512];
    CHECK_OK(PARSE(&o, "--nproc-per-node=3", "--max_restarts", "2",
                   "--rdzv_backend=static", "--no_python", "--log-dir", "/x",
                   "prog"));
    CHECK_EQ(o.nproc, 3);
    CHECK_EQ(o.max_restarts, 2);
    CHECK(o.no_python);
    CHECK_STR(o.log_dir, "/x");
    CHECK_OK(PARSE(&o, "--nproc_per_node", "4", "--monitor_interval=0.1",
                   "--master_port=1234", "--node_rank=0", "prog"));
    CHECK_EQ(o.nproc, 4);
    CHECK_EQ(o.master_port, 1234);
}

TEST(opts_unique_prefixes)
{
    struct el_opts o;
    char err[512];
    CHECK_OK(PARSE(&o, "--nproc=2", "--stand", "--max-r", "1", "x.py"));
    CHECK_EQ(o.nproc, 2);
    CHECK(o.standalone);
    CHECK_EQ(o.max_restarts, 1);
    /* --rdzv could be any --rdzv-* flag. */
    CHECK_EQ(PARSE(&o, "--rdzv=x", "x.py"), EL_EUSAGE);
    CHECK(strstr(err, "ambiguous") != NULL);
    CHECK(strstr(err, "--rdzv-backend") != NULL);
    /* --no could be --no-python or --node-rank; --no-py cannot. */
    CHECK_EQ(PARSE(&o, "--no", "prog"), EL_EUSAGE);
    CHECK_OK(PARSE(&o, "--no_py", "prog"));
    CHECK(o.no_python);
}

TEST(opts_short_flags)
{
    struct el_opts o;
    char err[512];
    CHECK_OK(PARSE(&o, "-r3", "-t", "1", "-m", "pkg.mod"));
    CHECK_STR(o.redirects, "3");
    CHECK_STR(o.tee, "1");
    CHECK(o.module);
    CHECK_OK(PARSE(&o, "-r=2", "x.py"));
    CHECK_STR(o.redirects, "2");
    CHECK_EQ(PARSE(&o, "-x", "x.py"), EL_EUSAGE);
}

TEST(opts_script_args_are_not_flags)
{
    struct el_opts o;
    char err[512];
    CHECK_OK(PARSE(&o, "--nproc-per-node=2", "train.py", "--nproc-per-node",
                   "7", "--lr=${local_rank}"));
    CHECK_EQ(o.nproc, 2);
    CHECK_STR(o.script, "train.py");
    CHECK_EQ(o.script_argc, 3);
    CHECK_STR(o.script_args[0], "--nproc-per-node");
    CHECK_STR(o.script_args[2], "--lr=${local_rank}");
    CHECK_OK(PARSE(&o, "--", "-weird-name", "a"));
    CHECK_STR(o.script, "-weird-name");
    CHECK_EQ(o.script_argc, 1);
}

TEST(opts_pet_fallback)
{
    struct el_opts o;
    char err[512];
    char *env[] = {"PET_NPROC_PER_NODE=3", "PET_NNODES=1",
                   "PET_MAX_RESTARTS=4",   "PET_STANDALONE=1",
                   "PET_NO_PYTHON=0",      "PET_ROLE=trainer",
                   "PET_REDIRECTS=2",      NULL};
    CHECK_OK(PARSE_ENV(&o, env, "x.py"));
    CHECK_EQ(o.nproc, 3);
    CHECK_EQ(o.max_restarts, 4);
    CHECK(o.standalone);
    CHECK(!o.no_python);
    CHECK_STR(o.role, "trainer");
    CHECK_STR(o.redirects, "2");
    /* The command line wins over PET_*. */
    CHECK_OK(PARSE_ENV(&o, env, "--nproc-per-node=5", "x.py"));
    CHECK_EQ(o.nproc, 5);
    /* A bad PET_ value names the variable. */
    char *bad[] = {"PET_NPROC_PER_NODE=lots", NULL};
    CHECK_EQ(PARSE_ENV(&o, bad, "x.py"), EL_EUSAGE);
    CHECK(strstr(err, "PET_NPROC_PER_NODE") != NULL);
    char *badbool[] = {"PET_STANDALONE=yes", NULL};
    CHECK_EQ(PARSE_ENV(&o, badbool, "x.py"), EL_EUSAGE);
    CHECK(strstr(err, "PET_STANDALONE") != NULL);
}

TEST(opts_nnodes_and_nproc_values)
{
    struct el_opts o;
    char err[512];
    CHECK_OK(PARSE(&o, "--nnodes=2", "x.py"));
    CHECK_EQ(o.min_nodes, 2);
    CHECK_EQ(o.max_nodes, 2);
    CHECK_OK(PARSE(&o, "--nnodes=1:4", "--rdzv-backend=c10d", "x.py"));
    CHECK_EQ(o.min_nodes, 1);
    CHECK_EQ(o.max_nodes, 4);
    CHECK_EQ(PARSE(&o, "--nnodes=3:2", "x.py"), EL_EUSAGE);
    CHECK(strstr(err, "--nnodes") != NULL);
    CHECK_EQ(PARSE(&o, "--nnodes=0", "x.py"), EL_EUSAGE);
    CHECK_EQ(PARSE(&o, "--nnodes=1:2:3", "x.py"), EL_EUSAGE);
    /* static needs a fixed size */
    CHECK_EQ(PARSE(&o, "--nnodes=1:2", "x.py"), EL_EUSAGE);
    CHECK(strstr(err, "static") != NULL);
    CHECK_OK(PARSE(&o, "--nproc-per-node=cpu", "x.py"));
    CHECK(o.nproc >= 1);
    CHECK_OK(PARSE(&o, "--nproc-per-node=auto", "x.py"));
    CHECK(o.nproc >= 1);
    CHECK_EQ(PARSE(&o, "--nproc-per-node=0", "x.py"), EL_EUSAGE);
    CHECK_EQ(PARSE(&o, "--nproc-per-node=gpu", "x.py"), EL_EUSAGE);
    CHECK(strstr(err, "CUDA") != NULL);
}

TEST(opts_usage_errors_say_how_to_fix)
{
    struct el_opts o;
    char err[512];
    CHECK_EQ(PARSE(&o, "--bogus", "x.py"), EL_EUSAGE);
    CHECK(strstr(err, "--bogus") && strstr(err, "--help"));
    CHECK_EQ(PARSE(&o, "--nproc-per-node"), EL_EUSAGE);
    CHECK(strstr(err, "needs a value") != NULL);
    CHECK_EQ(PARSE(&o, "--nproc-per-node=2"), EL_EUSAGE);
    CHECK(strstr(err, "missing the training script") != NULL);
    CHECK_EQ(PARSE(&o, "--no-python", "-m", "x"), EL_EUSAGE);
    CHECK(strstr(err, "cannot be used together") != NULL);
    CHECK_EQ(PARSE(&o, "--standalone", "--nnodes=2", "x.py"), EL_EUSAGE);
    CHECK_EQ(PARSE(&o, "--nnodes=2", "--node-rank=2", "x.py"), EL_EUSAGE);
    CHECK(strstr(err, "0 to 1") != NULL);
    CHECK_EQ(PARSE(&o, "--master-port=70000", "x.py"), EL_EUSAGE);
    CHECK_EQ(PARSE(&o, "--max-restarts=-1", "x.py"), EL_EUSAGE);
    CHECK_EQ(PARSE(&o, "--rdzv-backend=zk", "x.py"), EL_EUSAGE);
    CHECK_EQ(PARSE(&o, "--rdzv-conf=timeout", "x.py"), EL_EUSAGE);
    CHECK_EQ(PARSE(&o, "--rdzv-conf=a=1,=2", "x.py"), EL_EUSAGE);
    CHECK_OK(PARSE(&o, "--rdzv-conf= timeout = 5 ,join_timeout=6", "x.py"));
    CHECK_EQ(PARSE(&o, "--standalone=1", "x.py"), EL_EUSAGE);
    CHECK_EQ(PARSE(&o, "--start-method=thread", "x.py"), EL_EUSAGE);
    CHECK_EQ(PARSE(&o, "--tee=4", "x.py"), EL_EUSAGE);
    CHECK_EQ(PARSE(&o, "--signals-to-handle=SIGKILL", "x.py"), EL_EUSAGE);
}

/* What --help prints, malloc'd. */
static char *help_text(void)
{
    char *help = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&help, &len);
    if (!f)
        return NULL;
    el_opts_print_help(f);
    fclose(f);
    return help;
}

TEST(opts_help_needs_no_script)
{
    struct el_opts o;
    char err[512];
    CHECK_OK(PARSE(&o, "--help"));
    CHECK(o.help);
    CHECK_OK(PARSE(&o, "-h"));
    CHECK(o.help);
    char *help = help_text();
    CHECK(help && strstr(help, "--nproc-per-node") != NULL);
    free(help);
}

/* --help lists every --rdzv-conf key of rdzv_conf.c's table, the backends
 * as they are, and the flags accepted but ignored, which warn when given
 * (and only then). */
TEST(opts_help_tells_the_truth)
{
    struct el_opts o;
    char err[512], line[128];
    char *help = help_text();
    CHECK(help != NULL);
    if (!help)
        return;
    size_t nkeys = 0;
    for (const char *k; (k = el__opts_rdzv_conf_key(nkeys)); nkeys++) {
        snprintf(line, sizeof line, "\n    %s=", k);
        CHECK(strstr(help, line) != NULL);
    }
    CHECK(nkeys >= 16);
    for (const char *p = help; *p;
         p += strcspn(p, "\n") + (p[strcspn(p, "\n")] != 0))
        CHECK(strcspn(p, "\n") <= 79);
    CHECK(strstr(help, "heartbeat_timeout=S") != NULL);
    CHECK(strstr(help, "c10d: elastic across nodes") != NULL);
    CHECK(strstr(help, "etcd (or etcd-v2)") != NULL);
    const char *ign = strstr(help, "Accepted for compatibility and ignored");
    CHECK(ign != NULL);
    CHECK(ign &&
          strstr(ign, "--logs-specs NAME, --numa-binding MODE\n") != NULL);
    CHECK(strstr(help, "--event-log-handler NAME   console") != NULL);
    free(help);

    CHECK_OK(PARSE(&o, "x.py"));
    CHECK_EQ(o.nignored, 0);
    CHECK_OK(PARSE(&o, "--logs-specs=mine", "--numa_binding", "node",
                   "--event-log-handler=console", "x.py"));
    CHECK_EQ(o.nignored, 2);
    CHECK_STR(o.ignored[0], "--logs-specs=mine");
    CHECK_STR(o.ignored[1], "--numa-binding=node");
    CHECK_STR(o.event_log_handler, "console");
    CHECK_OK(PARSE(&o, "--event-log-handler=null", "x.py"));
    CHECK_EQ(o.nignored, 0);
    CHECK_STR(o.event_log_handler, "null");
    /* torch raises KeyError for an unknown handler: a usage error here. */
    CHECK(PARSE(&o, "--event-log-handler=file", "x.py") != 0);
}

TEST(opts_std_masks)
{
    unsigned char m[4];
    CHECK_OK(el_opts_std_mask("3", m, 4));
    CHECK(m[0] == 3 && m[3] == 3);
    CHECK_OK(el_opts_std_mask("0:1,2:2", m, 4));
    CHECK(m[0] == 1 && m[1] == 0 && m[2] == 2 && m[3] == 0);
    CHECK_OK(el_opts_std_mask("12:3", m, 4)); /* beyond nproc: ignored */
    CHECK(m[0] == 0);
    CHECK_EQ(el_opts_std_mask("0:1,", m, 4), EL_EUSAGE);
    CHECK_EQ(el_opts_std_mask("0=1", m, 4), EL_EUSAGE);
    CHECK_EQ(el_opts_std_mask("", m, 4), EL_EUSAGE);
    CHECK_EQ(el_opts_std_mask("0:4", m, 4), EL_EUSAGE);
}

TEST(opts_ranks_filter)
{
    unsigned char s[4];
    CHECK_OK(el_opts_ranks_filter("", s, 4));
    CHECK(s[0] && s[1] && s[2] && s[3]);
    CHECK_OK(el_opts_ranks_filter("0,2", s, 4));
    CHECK(s[0] && !s[1] && s[2] && !s[3]);
    CHECK_EQ(el_opts_ranks_filter("a", s, 4), EL_EUSAGE);
}

TEST(opts_signals)
{
    int sigs[8], n;
    CHECK_OK(el_opts_signals("SIGTERM,SIGUSR1, int ,10", sigs, 8, &n));
    CHECK_EQ(n, 3); /* 10 is SIGUSR1 again */
    CHECK_EQ(sigs[0], SIGTERM);
    CHECK_EQ(sigs[1], SIGUSR1);
    CHECK_EQ(sigs[2], SIGINT);
    CHECK_EQ(el_opts_signals("SIGFOO", sigs, 8, &n), EL_EUSAGE);
    CHECK_EQ(el_opts_signals("SIGCHLD", sigs, 8, &n), EL_EUSAGE);
}

TEST(opts_torchx_ddp_command_line)
{
    /* What TorchX dist.ddp generates for one node of 2 workers. */
    struct el_opts o;
    char err[512];
    CHECK_OK(PARSE(&o, "--rdzv_backend", "c10d", "--rdzv_endpoint",
                   "localhost:0", "--rdzv_id", "app-123", "--nnodes", "1",
                   "--nproc_per_node", "2", "--tee", "3", "--role", "",
                   "train.py", "--epochs", "1"));
    CHECK_STR(o.rdzv_backend, "c10d");
    CHECK_STR(o.rdzv_endpoint, "localhost:0");
    CHECK_STR(o.rdzv_id, "app-123");
    CHECK_STR(o.role, "");
    CHECK_STR(o.tee, "3");
    CHECK_EQ(o.script_argc, 2);
}

TEST(opts_restart_backoff)
{
    struct el_opts o;
    char err[512];
    CHECK_OK(PARSE(&o, "x.py"));
    CHECK(o.restart_backoff == 1);
    CHECK(o.restart_backoff_max == 30);
    CHECK_OK(PARSE(&o, "--restart-backoff=0.25", "--restart_backoff_max", "4",
                   "x.py"));
    CHECK(o.restart_backoff == 0.25);
    CHECK(o.restart_backoff_max == 4);
    char *env[] = {"PET_RESTART_BACKOFF=0", "PET_RESTART_BACKOFF_MAX=9", NULL};
    CHECK_OK(PARSE_ENV(&o, env, "x.py"));
    CHECK(o.restart_backoff == 0);
    CHECK(o.restart_backoff_max == 9);
    CHECK_EQ(PARSE(&o, "--restart-backoff=-1", "x.py"), EL_EUSAGE);
    CHECK(strstr(err, "--restart-backoff=-1: expected seconds >= 0") != NULL);
    CHECK_EQ(PARSE(&o, "--restart-backoff-max=0", "x.py"), EL_EUSAGE);
    CHECK(strstr(err, "--restart-backoff=0 to restart at once") != NULL);
    /* --restart could be either. */
    CHECK_EQ(PARSE(&o, "--restart=1", "x.py"), EL_EUSAGE);
    CHECK(strstr(err, "ambiguous") != NULL);
}

/* Every usage error el_opts_parse can give: the words, the environment,
 * and a piece of the one-line message (what was wrong, how to fix it). */
static const struct {
    const char *words[8];
    const char *env[3];
    const char *want;
} usage_errors[] = {
    {{"--rdzv=x", "x.py"}, {0}, "ambiguous option --rdzv: it could be"},
    {{"--bogus", "x.py"},
     {0},
     "unrecognized option '--bogus'; see 'elrun --help'"},
    {{"-x", "x.py"}, {0}, "unrecognized option '-x'; see 'elrun --help'"},
    {{"-m1", "x.py"}, {0}, "option -m takes no value (got '-m1')"},
    {{"--standalone=1", "x.py"},
     {0},
     "option --standalone takes no value; drop '=1'"},
    {{"--nproc-per-node"},
     {0},
     "option --nproc-per-node needs a value, as in --nproc-per-node=VALUE"},
    {{"--role", "--tee=1", "x.py"}, {0}, "option --role needs a value"},
    {{"x.py"},
     {"PET_STANDALONE=yes"},
     "PET_STANDALONE=yes is not an integer; set it to 1 (on) or 0 (off)"},
    {{"--nnodes=3:2", "x.py"},
     {0},
     "--nnodes=3:2: expected N or MIN:MAX with 0 < MIN <= MAX"},
    {{"--nnodes=0", "x.py"}, {0}, "--nnodes=0: expected N or MIN:MAX"},
    {{"--nnodes=1:2:3", "x.py"}, {0}, "--nnodes=1:2:3: expected N or MIN:MAX"},
    {{"x.py"}, {"PET_NNODES=two"}, "PET_NNODES=two: expected N or MIN:MAX"},
    {{"--nproc-per-node=gpu", "x.py"},
     {0},
     "--nproc-per-node=gpu: no CUDA devices are visible to elrun"},
    {{"--nproc-per-node=xpu", "x.py"}, {0}, "no XPU devices"},
    {{"--nproc-per-node=0", "x.py"},
     {0},
     "--nproc-per-node=0: expected a number of workers from 1 to 4096, 'cpu' or 'auto'"},
    {{"--nproc-per-node=4097", "x.py"},
     {0},
     "expected a number of workers from 1 to 4096"},
    {{"x.py"},
     {"PET_NPROC_PER_NODE=lots"},
     "PET_NPROC_PER_NODE=lots: expected a number of workers"},
    {{"--rdzv-backend=zk", "x.py"},
     {0},
     "--rdzv-backend=zk: unknown rendezvous backend; use one of: static, c10d, etcd, etcd-v2"},
    {{"--rdzv-id=", "x.py"},
     {0},
     "--rdzv-id is empty; give a job id such as --rdzv-id=job42"},
    {{"--rdzv-conf=timeout", "x.py"},
     {0},
     "--rdzv-conf=timeout: expected KEY=VALUE pairs separated by commas"},
    {{"--rdzv-conf=a=1,=2", "x.py"},
     {0},
     "--rdzv-conf=a=1,=2: expected KEY=VALUE pairs"},
    {{"--rdzv-conf=a=", "x.py"},
     {0},
     "--rdzv-conf=a=: expected KEY=VALUE pairs"},
    {{"x.py"},
     {"PET_RDZV_CONF=,,x"},
     "PET_RDZV_CONF=,,x: expected KEY=VALUE pairs"},
    {{"--rdzv-conf=timeout=soon", "x.py"},
     {0},
     "--rdzv-conf timeout=soon: expected seconds"},
    {{"--rdzv-conf=join_timeout=-1", "x.py"},
     {0},
     "--rdzv-conf join_timeout=-1: expected seconds"},
    {{"--rdzv-conf=read_timeout=9e9", "x.py"},
     {0},
     "--rdzv-conf read_timeout=9e9: expected seconds"},
    {{"--rdzv-conf=last_call_timeout=x", "x.py"},
     {0},
     "--rdzv-conf last_call_timeout=x: expected seconds"},
    {{"--rdzv-conf=heartbeat_timeout=x", "x.py"},
     {0},
     "--rdzv-conf heartbeat_timeout=x: expected seconds"},
    {{"--rdzv-conf=close_timeout=x", "x.py"},
     {0},
     "--rdzv-conf close_timeout=x: expected seconds"},
    {{"--rdzv-conf=keep_alive_interval=0", "x.py"},
     {0},
     "--rdzv-conf keep_alive_interval must be more than 0 seconds"},
    {{"--rdzv-conf=keep_alive_max_attempt=0", "x.py"},
     {0},
     "--rdzv-conf keep_alive_max_attempt=0: expected a whole number >= 1"},
    {{"--rdzv-conf=keep_alive_max_attempt=1.5", "x.py"},
     {0},
     "keep_alive_max_attempt=1.5: expected a whole number >= 1"},
    {{"--rdzv-conf=is_host=maybe", "x.py"},
     {0},
     "--rdzv-conf is_host=maybe: expected true or false"},
    {{"--max-restarts=-1", "x.py"},
     {0},
     "--max-restarts=-1: expected a whole number >= 0"},
    {{"x.py"},
     {"PET_MAX_RESTARTS=many"},
     "PET_MAX_RESTARTS=many: expected a whole number >= 0"},
    {{"--monitor-interval=-1", "x.py"},
     {0},
     "--monitor-interval=-1: expected seconds >= 0 (it is accepted and not needed"},
    {{"--start-method=thread", "x.py"},
     {0},
     "--start-method=thread: expected spawn, fork or forkserver"},
    {{"--redirects=4", "x.py"},
     {0},
     "--redirects=4: expected 0 (none), 1 (stdout), 2 (stderr), 3 (both), or a per-rank map such as 0:1,1:2"},
    {{"--tee=0:1,", "x.py"}, {0}, "--tee=0:1,: expected 0 (none)"},
    {{"--local-ranks-filter=a", "x.py"},
     {0},
     "--local-ranks-filter=a: expected local ranks separated by commas"},
    {{"--node-rank=-1", "x.py"},
     {0},
     "--node-rank=-1: expected a node rank >= 0"},
    {{"--master-port=70000", "x.py"},
     {0},
     "--master-port=70000: expected a TCP port from 0 to 65535"},
    {{"--signals-to-handle=SIGKILL", "x.py"},
     {0},
     "--signals-to-handle=SIGKILL: expected signal names or numbers"},
    {{"--signals-to-handle=SIGFOO", "x.py"},
     {0},
     "--signals-to-handle=SIGFOO: expected signal names"},
    {{"--stop-timeout=-2", "x.py"},
     {0},
     "--stop-timeout=-2: expected seconds >= 0"},
    {{"--stop-timeout=5e6", "x.py"},
     {0},
     "--stop-timeout=5e6: at most 2147483 seconds"},
    {{"--exit-barrier-timeout=x", "x.py"},
     {0},
     "--exit-barrier-timeout=x: expected seconds >= 0"},
    {{"--restart-backoff=-1", "x.py"},
     {0},
     "--restart-backoff=-1: expected seconds >= 0 (0 restarts at once)"},
    {{"x.py"},
     {"PET_RESTART_BACKOFF_MAX=0"},
     "PET_RESTART_BACKOFF_MAX=0: expected seconds > 0 (use --restart-backoff=0 to restart at once)"},
    {{"--no-python", "-m", "x"},
     {0},
     "--no-python and -m/--module cannot be used together; drop one of them"},
    {{"--nproc-per-node=2"},
     {0},
     "missing the training script; usage: elrun [options] SCRIPT [ARGS...]"},
    {{""}, {0}, "the training script is an empty string"},
    {{"--standalone", "--nnodes=2", "x.py"},
     {0},
     "--standalone runs a single node but --nnodes asks for 2"},
    {{"--nnodes=1:2", "x.py"},
     {0},
     "--nnodes=1:2: the static rendezvous needs a fixed number of nodes; use --nnodes=2"},
    {{"--nnodes=2", "--node-rank=2", "x.py"},
     {0},
     "--node-rank=2 but there are only 2 node(s); node ranks go from 0 to 1"},
    {{"x.py"},
     {"PET_NNODES=2", "PET_NODE_RANK=3"},
     "PET_NODE_RANK=3 but there are only 2 node(s)"},
};

TEST(opts_every_usage_error)
{
    for (size_t t = 0; t < sizeof usage_errors / sizeof usage_errors[0]; t++) {
        struct el_opts o;
        char err[512] = "";
        int rc = parse(&o, (char **)usage_errors[t].env, err, sizeof err,
                       usage_errors[t].words);
        if (rc != EL_EUSAGE || !strstr(err, usage_errors[t].want) ||
            strchr(err, '\n')) {
            fprintf(stderr,
                    "case %zu (%s ...): rc %d, message '%s', want "
                    "'%s'\n",
                    t, usage_errors[t].words[0], rc, err, usage_errors[t].want);
            CHECK(0);
        }
    }
}

TEST(opts_rdzv_conf_parsed_once)
{
    struct el_opts o;
    char err[512];
    CHECK_OK(PARSE(&o,
                   "--rdzv-conf= timeout = 5 ,join_timeout=6,"
                   "keep_alive_max_attempt=4,is_host=no,cacert=/a b.pem ,"
                   "timeout=99,unknown=1,",
                   "x.py"));
    CHECK(o.conf.timeout == 5); /* the first one wins */
    CHECK(o.conf.join_timeout == 6);
    CHECK(o.conf.read_timeout == -1); /* not given */
    CHECK_EQ(o.conf.keep_alive_max_attempt, 4);
    CHECK_EQ(o.conf.is_host, -1);
    CHECK_STR(o.conf.cacert, "/a b.pem");
    CHECK(o.conf.password == NULL);
    CHECK_STR(o.rdzv_conf,
              " timeout = 5 ,join_timeout=6,"
              "keep_alive_max_attempt=4,is_host=no,cacert=/a b.pem ,"
              "timeout=99,unknown=1,");
    CHECK_OK(PARSE(&o, "x.py"));
    CHECK(o.conf.timeout == -1 && o.conf.is_host == 0 && !o.conf.key);
}

TEST(opts_stop_timeout_falls_back_to_torch_env)
{
    struct el_opts o;
    char err[512];
    char *env[] = {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT=7", NULL};
    CHECK_OK(PARSE_ENV(&o, env, "x.py"));
    CHECK(o.stop_timeout == 7);
    CHECK_OK(PARSE_ENV(&o, env, "--stop-timeout=2", "x.py"));
    CHECK(o.stop_timeout == 2);
    char *bad[] = {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT=soon", NULL};
    CHECK_OK(PARSE_ENV(&o, bad, "x.py")); /* ignored, as before */
    CHECK(o.stop_timeout == 30);
    CHECK_EQ(o.master_port_given, 0);
    CHECK_OK(PARSE(&o, "--master-port=29500", "x.py"));
    CHECK_EQ(o.master_port_given, 1);
}
