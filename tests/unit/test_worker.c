/* test_worker.c -- the worker context: parsing the agent's environment,
 * clear errors outside elrun, the single-process fallback, real processes
 * meeting in store barriers through the agent's store or a store served by
 * rank 0, and the error file for the agent's failure report.
 */
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elrun/ckpt.h"
#include "elrun/err.h"
#include "elrun/store.h"
#include "elrun/worker.h"
#include "test.h"

static const char *const vars[] = {"RANK",
                                   "LOCAL_RANK",
                                   "WORLD_SIZE",
                                   "LOCAL_WORLD_SIZE",
                                   "GROUP_RANK",
                                   "GROUP_WORLD_SIZE",
                                   "TORCHELASTIC_RESTART_COUNT",
                                   "TORCHELASTIC_MAX_RESTARTS",
                                   "TORCHELASTIC_RUN_ID",
                                   "MASTER_ADDR",
                                   "MASTER_PORT",
                                   "TORCHELASTIC_USE_AGENT_STORE",
                                   "ELRUN_STANDALONE"};

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

static void setenv_int(const char *k, int v)
{
    char b[32];
    snprintf(b, sizeof b, "%d", v);
    setenv(k, b, 1);
}

/* The environment elrun gives rank 'rank' of 'world' on one node. */
static void set_worker_env(int rank, int world, int port, const char *agent)
{
    clear_env();
    setenv_int("RANK", rank);
    setenv_int("LOCAL_RANK", rank);
    setenv_int("WORLD_SIZE", world);
    setenv_int("LOCAL_WORLD_SIZE", world);
    setenv("GROUP_RANK", "0", 1);
    setenv("GROUP_WORLD_SIZE", "1", 1);
    setenv("TORCHELASTIC_RESTART_COUNT", "2", 1);
    setenv("TORCHELASTIC_MAX_RESTARTS", "3", 1);
    setenv("TORCHELASTIC_RUN_ID", "job-42", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv_int("MASTER_PORT", port);
    setenv("TORCHELASTIC_USE_AGENT_STORE", agent, 1);
}

TEST(worker_env_parse)
{
    set_worker_env(1, 4, 29500, "True");
    setenv("LOCAL_RANK", "0", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("GROUP_RANK", "1", 1); /* second node of two */
    setenv("GROUP_WORLD_SIZE", "2", 1);
    struct el_worker_info in;
    char err[256];
    CHECK_OK(el_worker_parse_env(&in, 0, err, sizeof err));
    CHECK_EQ(in.rank, 1);
    CHECK_EQ(in.local_rank, 0);
    CHECK_EQ(in.world_size, 4);
    CHECK_EQ(in.local_world_size, 2);
    CHECK_EQ(in.group_rank, 1);
    CHECK_EQ(in.group_world_size, 2);
    CHECK_EQ(in.restart_count, 2);
    CHECK_EQ(in.max_restarts, 3);
    CHECK_EQ(in.use_agent_store, 1);
    CHECK_EQ(in.standalone, 0);
    CHECK_EQ(in.master_port, 29500);
    CHECK_STR(in.master_addr, "127.0.0.1");
    CHECK_STR(in.run_id, "job-42");

    /* Only the five required variables: single-node defaults. */
    clear_env();
    setenv("RANK", "0", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("WORLD_SIZE", "3", 1);
    setenv("MASTER_ADDR", "node1", 1);
    setenv("MASTER_PORT", "1234", 1);
    CHECK_OK(el_worker_parse_env(&in, 0, err, sizeof err));
    CHECK_EQ(in.local_world_size, 3);
    CHECK_EQ(in.group_world_size, 1);
    CHECK_EQ(in.restart_count, 0);
    CHECK_EQ(in.use_agent_store, 0);
    CHECK_STR(in.run_id, "none");
}

TEST(worker_not_under_elrun)
{
    clear_env();
    struct el_worker_info in;
    char err[256];
    CHECK_EQ(el_worker_parse_env(&in, 0, err, sizeof err), EL_ENOTELASTIC);
    CHECK(strstr(err, "RANK is not set") != NULL);
    CHECK(strstr(err, "ELRUN_STANDALONE=1") != NULL);
    struct el_worker *w = (struct el_worker *)&in;
    CHECK_EQ(el_worker_open(&w, NULL, err, sizeof err), EL_ENOTELASTIC);
    CHECK(w == (struct el_worker *)&in); /* untouched on failure */
    CHECK(strstr(err, "RANK") != NULL);

    /* Each missing required variable is named, even when a fallback is
     * allowed: a partial environment is a broken launcher, not "alone". */
    static const char *const req[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE",
                                      "MASTER_ADDR", "MASTER_PORT"};
    for (size_t i = 0; i < 5; i++) {
        set_worker_env(0, 2, 29500, "True");
        unsetenv(req[i]);
        unsigned flags = i == 0 ? 0 : EL_WORKER_STANDALONE;
        CHECK_EQ(el_worker_parse_env(&in, flags, err, sizeof err),
                 EL_ENOTELASTIC);
        char want[64];
        snprintf(want, sizeof want, "%s is not set", req[i]);
        CHECK(strstr(err, want) != NULL);
    }
    /* A NULL/0 error buffer is fine. */
    clear_env();
    CHECK_EQ(el_worker_parse_env(&in, 0, NULL, 0), EL_ENOTELASTIC);
}

TEST(worker_bad_values)
{
    static const struct {
        const char *var, *val, *msg;
    } cases[] = {
        {"RANK", "abc", "RANK=\"abc\" is not an integer"},
        {"RANK", "1x", "RANK=\"1x\""},
        {"RANK", "-1", "RANK=\"-1\""},
        {"RANK", "2", "RANK=2 is not below WORLD_SIZE=2"},
        {"WORLD_SIZE", "0", "WORLD_SIZE=\"0\""},
        {"MASTER_PORT", "70000", "MASTER_PORT=\"70000\""},
        {"MASTER_PORT", "", "MASTER_PORT=\"\""},
        {"MASTER_ADDR", "", "MASTER_ADDR is empty"},
        {"LOCAL_RANK", "5", "LOCAL_RANK=5 is not below LOCAL_WORLD_SIZE=2"},
        {"LOCAL_WORLD_SIZE", "3", "LOCAL_WORLD_SIZE=3 is above WORLD_SIZE=2"},
        {"GROUP_RANK", "1", "GROUP_RANK=1 is not below GROUP_WORLD_SIZE=1"},
        {"TORCHELASTIC_RESTART_COUNT", "x", "TORCHELASTIC_RESTART_COUNT"},
        {"TORCHELASTIC_USE_AGENT_STORE", "yes", "is not True or False"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_worker_env(1, 2, 29500, "True");
        setenv(cases[i].var, cases[i].val, 1);
        struct el_worker_info in;
        char err[256];
        CHECK_EQ(el_worker_parse_env(&in, 0, err, sizeof err), EL_EUSAGE);
        if (!strstr(err, cases[i].msg))
            TEST_FAIL_("%s=%s: got \"%s\"", cases[i].var, cases[i].val, err);
    }
}

static void check_standalone(struct el_worker *w)
{
    const struct el_worker_info *in = el_worker_info(w);
    CHECK_EQ(in->standalone, 1);
    CHECK_EQ(in->rank, 0);
    CHECK_EQ(in->world_size, 1);
    CHECK_EQ(in->local_world_size, 1);
    CHECK_STR(el_worker_prefix(w), "/worker/attempt_0");
    /* A private store works, and so does a barrier of one. */
    struct el_store *s = el_worker_store(w);
    CHECK(s != NULL);
    CHECK_OK(el_store_set(s, "/k", "v", 1));
    CHECK_OK(el_worker_barrier(w, "start", 1000));
    CHECK_OK(el_worker_barrier_cb(w));
}

TEST(worker_standalone_fallback)
{
    clear_env();
    struct el_worker *w;
    char err[256];
    struct el_worker_opts o = {.flags = EL_WORKER_STANDALONE};
    CHECK_OK(el_worker_open(&w, &o, err, sizeof err));
    check_standalone(w);
    el_worker_close(w);

    setenv("ELRUN_STANDALONE", "1", 1);
    CHECK_OK(el_worker_open(&w, NULL, err, sizeof err));
    check_standalone(w);
    char key[64];
    CHECK_OK(el_worker_key(w, "x/y", key, sizeof key));
    CHECK_STR(key, "/worker/attempt_0/x/y");
    CHECK_EQ(el_worker_key(w, "x/y", key, 10), EL_ELIMIT);
    el_worker_close(w);

    setenv("ELRUN_STANDALONE", "0", 1);
    CHECK_EQ(el_worker_open(&w, NULL, err, sizeof err), EL_ENOTELASTIC);

    /* Under elrun the environment wins over the fallback. */
    set_worker_env(0, 1, 29500, "True");
    setenv("ELRUN_STANDALONE", "1", 1);
    o.flags |= EL_WORKER_NO_STORE;
    CHECK_OK(el_worker_open(&w, &o, err, sizeof err));
    CHECK_EQ(el_worker_info(w)->standalone, 0);
    CHECK(el_worker_store(w) == NULL);
    CHECK_STR(el_worker_prefix(w), "/worker/attempt_2");
    CHECK_EQ(el_worker_barrier(w, "b", 100), EL_EUSAGE);
    el_worker_close(w);
    el_worker_close(NULL);
}

/* A free TCP port (racy in theory: nothing else here grabs ports). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t l = sizeof a;
    CHECK_EQ(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Each rank: open, count itself in, barrier, check everyone counted, a
 * second barrier with the same name, then (rank 0 last) close. */
static int rank_main(int rank, int world, int port, const char *agent,
                     int attempt)
{
    set_worker_env(rank, world, port, agent);
    setenv_int("TORCHELASTIC_RESTART_COUNT", attempt);
    struct el_worker *w;
    char err[256];
    struct el_worker_opts o = {.connect_timeout_ms = 10000};
    if (el_worker_open(&w, &o, err, sizeof err) != 0) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        return 1;
    }
    struct el_store *s = el_worker_store(w);
    char key[128];
    int64_t n;
    el_worker_key(w, "arrived", key, sizeof key);
    if (el_store_add(s, key, 1, &n) != 0)
        return 2;
    for (int round = 0; round < 3; round++)
        if (el_worker_barrier(w, "sync", 10000) != 0) {
            fprintf(stderr, "rank %d: %s\n", rank, el_worker_errmsg(w));
            return 3;
        }
    if (el_store_add(s, key, 0, &n) != 0 || n != world)
        return 4;
    /* Rank 0 may serve the store: it leaves after everyone else. */
    if (el_worker_barrier(w, "exit", 10000) != 0)
        return 5;
    if (rank == 0) {
        el_worker_key(w, "all_left", key, sizeof key);
        const char *k = key;
        if (world > 1 && el_store_wait(s, &k, 1, 10000) != 0)
            return 7;
    } else {
        el_worker_key(w, "left", key, sizeof key);
        if (el_store_add(s, key, 1, &n) != 0)
            return 8;
        el_worker_key(w, "all_left", key, sizeof key);
        if (n == world - 1 && el_store_set(s, key, "1", 1) != 0)
            return 9;
    }
    el_worker_close(w);
    return 0;
}

/* Run one round (attempt) of 'world' ranks; rounds share nothing but the
 * store, the attempt number keeping their keys apart. */
static void run_ranks(int world, int port, const char *agent, int attempt)
{
    pid_t pids[8];
    fflush(NULL);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0);
        if (pids[r] == 0)
            _exit(rank_main(r, world, port, agent, attempt));
    }
    for (int r = 0; r < world; r++) {
        int st;
        CHECK_EQ(waitpid(pids[r], &st, 0), pids[r]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            TEST_FAIL_("rank %d: status 0x%x", r, st);
    }
}

/* A store server in a process of its own (so that no server thread lives
 * in the test process, which forks ranks).  Returns its port; the server
 * exits when *stop_fd is closed (or the test ends). */
static int start_store_proc(pid_t *pid, int *stop_fd)
{
    int portp[2], stopp[2];
    CHECK_EQ(pipe(portp), 0);
    CHECK_EQ(pipe(stopp), 0);
    fflush(NULL);
    *pid = fork();
    CHECK(*pid >= 0);
    if (*pid == 0) {
        close(portp[0]);
        close(stopp[1]);
        struct el_store_server *srv;
        struct el_store_server_opts so = {.host = "127.0.0.1"};
        int port = -1;
        if (el_store_server_start(&srv, &so) == 0)
            port = el_store_server_port(srv);
        if (write(portp[1], &port, sizeof port) != sizeof port)
            _exit(1);
        char c;
        while (read(stopp[0], &c, 1) < 0 && errno == EINTR)
            ;
        _exit(0);
    }
    close(portp[1]);
    close(stopp[0]);
    int port = -1;
    CHECK_EQ(read(portp[0], &port, sizeof port), (long)sizeof port);
    CHECK(port > 0);
    close(portp[0]);
    *stop_fd = stopp[1];
    return port;
}

static void stop_store_proc(pid_t pid, int stop_fd)
{
    close(stop_fd);
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
}

TEST(worker_agent_store_barrier)
{
    pid_t srv;
    int stop;
    int port = start_store_proc(&srv, &stop);
    for (int world = 1; world <= 5; world += 2)
        run_ranks(world, port, "True", world);
    /* The keys went under the round's prefix. */
    struct el_store *s;
    CHECK_OK(el_store_connect(&s, "127.0.0.1", port, 1000, 1000));
    void *v;
    size_t len;
    CHECK_OK(
        el_store_try_get(s, "/worker/attempt_5/barrier/sync/3/done", &v, &len));
    free(v);
    el_store_close(s);
    stop_store_proc(srv, stop);
}

TEST(worker_rank0_serves_store)
{
    /* TORCHELASTIC_USE_AGENT_STORE=False: rank 0 serves on MASTER_PORT and
     * the others wait for it to appear. */
    run_ranks(3, free_port(), "False", 0);
}

TEST(worker_barrier_timeout)
{
    pid_t srv;
    int stop;
    set_worker_env(1, 2, start_store_proc(&srv, &stop), "True");
    struct el_worker *w;
    char err[256];
    CHECK_OK(el_worker_open(&w, NULL, err, sizeof err));
    CHECK_EQ(el_worker_barrier(w, "lonely", 100), -ETIMEDOUT);
    CHECK(strstr(el_worker_errmsg(w), "1 of 2 ranks") != NULL);
    el_worker_close(w);
    stop_store_proc(srv, stop);
}

TEST(worker_store_unreachable)
{
    set_worker_env(1, 2, free_port(), "True");
    struct el_worker *w;
    char err[256];
    struct el_worker_opts o = {.connect_timeout_ms = 200};
    int rc = el_worker_open(&w, &o, err, sizeof err);
    CHECK(rc < 0);
    CHECK(strstr(err, "cannot reach the job's store at 127.0.0.1:") != NULL);
}

TEST(worker_record_error)
{
    char dir[] = "/tmp/elrun-errfile-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/error.json", dir);
    unsetenv("TORCHELASTIC_ERROR_FILE");
    CHECK_EQ(el_worker_record_error("x"), -ENOENT);
    setenv("TORCHELASTIC_ERROR_FILE", "", 1);
    CHECK_EQ(el_worker_record_error("x"), -ENOENT);
    setenv("TORCHELASTIC_ERROR_FILE", path, 1);
    CHECK_OK(el_worker_record_error("first"));
    /* A second call replaces the first; quotes, backslashes, newlines and
     * control bytes are escaped. */
    CHECK_OK(el_worker_record_error("allreduce failed: rank %d \"died\"\n"
                                    "\tC:\\path \x01",
                                    1));
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        TEST_FAIL_("bad JSON: %s", je.text);
    json_t *msg = json_object_get(root, "message");
    CHECK(json_is_object(msg));
    const char *want = "allreduce failed: rank 1 \"died\"\n\tC:\\path \x01";
    CHECK_STR(json_string_value(json_object_get(msg, "message")), want);
    json_t *extra = json_object_get(msg, "extraInfo");
    CHECK_STR(json_string_value(json_object_get(extra, "py_callstack")), want);
    const char *ts = json_string_value(json_object_get(extra, "timestamp"));
    CHECK(ts != NULL);
    long long t = strtoll(ts, NULL, 10);
    CHECK(t > 1700000000LL && t <= (long long)time(NULL));
    json_decref(root);
    /* Nothing else was left in the directory. */
    CHECK_EQ(unlink(path), 0);
    CHECK_EQ(rmdir(dir), 0);
}

/* Sharded checkpoints with the store barrier: three ranks of one round each
 * save their shard of two steps; the newest is complete and every shard
 * reads back. */
TEST(worker_barrier_for_sharded_ckpt)
{
    char dir[] = "/tmp/elrun-wckpt-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    pid_t srv;
    int stop;
    int port = start_store_proc(&srv, &stop);
    enum { WORLD = 3 };
    pid_t pids[WORLD];
    fflush(NULL);
    for (int r = 0; r < WORLD; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0);
        if (pids[r] != 0)
            continue;
        set_worker_env(r, WORLD, port, "True");
        struct el_worker *w;
        char err[256];
        if (el_worker_open(&w, NULL, err, sizeof err) != 0)
            _exit(1);
        struct el_ckpt_opts o = {.dir = dir,
                                 .rank = r,
                                 .world = WORLD,
                                 .sharded = 1,
                                 .keep = 1,
                                 .barrier = el_worker_barrier_cb,
                                 .barrier_arg = w};
        for (int64_t step = 1; step <= 2; step++) {
            char buf[64];
            int n = snprintf(buf, sizeof buf, "step %lld rank %d",
                             (long long)step, r);
            if (el_ckpt_save(&o, step, buf, (size_t)n) != 0)
                _exit(2);
        }
        el_worker_close(w);
        _exit(0);
    }
    for (int r = 0; r < WORLD; r++) {
        int st;
        CHECK_EQ(waitpid(pids[r], &st, 0), pids[r]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            TEST_FAIL_("rank %d: status 0x%x", r, st);
    }
    struct el_ckpt_info info;
    CHECK_OK(el_ckpt_latest(dir, &info, NULL));
    CHECK_EQ(info.step, 2);
    CHECK_EQ(info.world, WORLD);
    CHECK_EQ(info.sharded, 1);
    for (int r = 0; r < WORLD; r++) {
        void *p;
        size_t len;
        char want[64];
        int n = snprintf(want, sizeof want, "step 2 rank %d", r);
        CHECK_OK(el_ckpt_load(dir, 2, r, &p, &len, NULL));
        CHECK_MEM(p, len, want, (size_t)n);
        free(p);
    }
    stop_store_proc(srv, stop);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ(system(cmd), 0);
}
