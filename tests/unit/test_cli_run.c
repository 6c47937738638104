/* test_cli_run.c -- the launcher's own usage errors, the ones el_opts_parse
 * cannot see: a program or script that cannot run (worker_argv) and a
 * rendezvous address that is not one (rdzv_config); and what --rdzv-conf's
 * parsed values become in the rendezvous config.  run_cmd.c is compiled in
 * here (its functions are static); the parser comes from test_opts.c.
 */
#include "cli/run_cmd.c"
#include "test.h"

#include <sys/stat.h>

static char *no_env[] = {NULL};

static int opts(struct el_opts *o, const char *const *words)
{
    static char *argv[32];
    char err[512];
    int argc = 0;
    argv[argc++] = "elrun";
    for (; *words; words++)
        argv[argc++] = (char *)*words;
    argv[argc] = NULL;
    return el_opts_parse(o, argc, argv, no_env, err, sizeof err);
}

#define OPTS(o, ...) opts((o), (const char *const[]){__VA_ARGS__, NULL})

/* worker_argv's usage error (2) and its message. */
static int argv_error(const struct el_opts *o, char *err, size_t cap)
{
    char **wargv = NULL;
    char binary[4096];
    int rc = worker_argv(o, &wargv, binary, sizeof binary, err, cap);
    free(wargv);
    return rc;
}

TEST(cli_run_program_errors)
{
    struct el_opts o;
    char err[1400];
    CHECK_OK(OPTS(&o, "--no-python", "/no/such/prog"));
    CHECK_EQ(argv_error(&o, err, sizeof err), 2);
    CHECK(strstr(err, "program '/no/such/prog' does not exist; check the "
                      "path") != NULL);
    char plain[] = "/tmp/elrun-test-plain.XXXXXX";
    int fd = mkstemp(plain);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(OPTS(&o, "--no-python", plain));
    int rc = argv_error(&o, err, sizeof err);
    unlink(plain);
    CHECK_EQ(rc, 2);
    CHECK(strstr(err, "is not executable; chmod +x it") != NULL);
    CHECK_OK(OPTS(&o, "--no-python", "/tmp"));
    CHECK_EQ(argv_error(&o, err, sizeof err), 2);
    CHECK(strstr(err, "is not executable") != NULL);
    CHECK_OK(OPTS(&o, "--no-python", "no-such-prog-xyz"));
    CHECK_EQ(argv_error(&o, err, sizeof err), 2);
    CHECK(strstr(err, "'no-such-prog-xyz' was not found in PATH") != NULL);
    setenv("PYTHON_EXEC", "/no/python", 1);
    CHECK_OK(OPTS(&o, "x.py"));
    CHECK_EQ(argv_error(&o, err, sizeof err), 2);
    CHECK(strstr(err, "'/no/python' does not exist; check the path (set "
                      "PYTHON_EXEC or use --no-python)") != NULL);
    setenv("PYTHON_EXEC", "/bin/sh", 1);
    CHECK_OK(OPTS(&o, "/no/such/train.py"));
    CHECK_EQ(argv_error(&o, err, sizeof err), 2);
    CHECK(strstr(err, "training script '/no/such/train.py' cannot be read "
                      "(No such file or directory)") != NULL);
    /* Not a Python script: an ELF program, a #! line of another shell. */
    CHECK_OK(OPTS(&o, "/bin/true"));
    CHECK_EQ(argv_error(&o, err, sizeof err), 2);
    CHECK(strstr(err, "'/bin/true' is an ELF executable, not a Python "
                      "script; add --no-python to run it directly") != NULL);
    char sh[] = "/tmp/elrun-test-sh.XXXXXX";
    int sfd = mkstemp(sh);
    CHECK(sfd >= 0);
    CHECK(write(sfd, "#!/bin/bash -e\necho\n", 20) == 20);
    close(sfd);
    CHECK_OK(OPTS(&o, sh));
    rc = argv_error(&o, err, sizeof err);
    CHECK_EQ(rc, 2);
    CHECK(strstr(err, "is not a Python script (its first line is "
                      "'#!/bin/bash -e'); add --no-python") != NULL);
    /* ... but a #! python line is Python. */
    sfd = open(sh, O_WRONLY | O_TRUNC);
    CHECK(write(sfd, "#!/usr/bin/env python3\n", 23) == 23);
    close(sfd);
    CHECK_OK(OPTS(&o, sh));
    rc = argv_error(&o, err, sizeof err);
    unlink(sh);
    CHECK_EQ(rc, 0);
    /* -m names a module, not a file: not checked. */
    CHECK_OK(OPTS(&o, "-m", "pkg.mod"));
    CHECK_EQ(argv_error(&o, err, sizeof err), 0);
    unsetenv("PYTHON_EXEC");
}

TEST(cli_run_worker_command_lines)
{
    struct el_opts o;
    char err[1400], **w;
    char binary[4096];
    setenv("PYTHON_EXEC", "/bin/sh", 1);
    CHECK_OK(OPTS(&o, "-m", "pkg.mod", "--lr=1"));
    CHECK_OK(worker_argv(&o, &w, binary, sizeof binary, err, sizeof err));
    CHECK_STR(w[0], "/bin/sh");
    CHECK_STR(w[1], "-u");
    CHECK_STR(w[2], "-m");
    CHECK_STR(w[3], "pkg.mod");
    CHECK_STR(w[4], "--lr=1");
    CHECK(w[5] == NULL);
    free(w);
    CHECK_OK(OPTS(&o, "--no-python", "/bin/true", "a"));
    CHECK_OK(worker_argv(&o, &w, binary, sizeof binary, err, sizeof err));
    CHECK_STR(binary, "/bin/true");
    CHECK_STR(w[0], "/bin/true");
    CHECK_STR(w[1], "a");
    CHECK(w[2] == NULL);
    free(w);
    unsetenv("PYTHON_EXEC");
}

static int rdzv_error(const char *const *words, char *err, size_t cap)
{
    struct el_opts o;
    struct el_rdzv_config rc;
    struct rdzv_strings s;
    if (opts(&o, words) != 0)
        return -100;
    return rdzv_config(&o, &rc, &s, err, cap);
}

#define RDZV_ERROR(err, ...) \
    rdzv_error((const char *const[]){__VA_ARGS__, NULL}, (err), sizeof(err))

TEST(cli_run_rendezvous_address_errors)
{
    char err[1400];
    CHECK_EQ(RDZV_ERROR(err, "--rdzv-endpoint=host", "x.py"), -1);
    CHECK(strstr(err, "--rdzv-endpoint=host: the static rendezvous needs "
                      "HOST:PORT") != NULL);
    CHECK_EQ(RDZV_ERROR(err, "--master-addr=a b", "x.py"), -1);
    CHECK(strstr(err, "--master-addr=a b is not a host name or address"));
    CHECK_EQ(RDZV_ERROR(err, "--rdzv-backend=c10d", "--nnodes=1:2",
                        "--rdzv-endpoint=h:99999", "x.py"),
             -1);
    CHECK(strstr(err, "--rdzv-endpoint=h:99999: expected HOST or HOST:PORT"));
    CHECK_EQ(RDZV_ERROR(err, "--standalone", "--local-addr=192.0.2.77", "x.py"),
             -1);
    CHECK(strstr(err, "--local-addr=192.0.2.77 is not an address of this "
                      "host (Cannot assign requested address): the workers are "
                      "told MASTER_ADDR=192.0.2.77 and would find no store"));
    CHECK_EQ(RDZV_ERROR(err, "--standalone", "--local-addr=127.0.0.2", "x.py"),
             0);
    CHECK_EQ(RDZV_ERROR(err, "--rdzv-backend=etcd", "x.py"), -1);
    CHECK(strstr(err, "the etcd rendezvous needs --rdzv-endpoint=HOST:PORT"));
    CHECK_EQ(
        RDZV_ERROR(err, "--rdzv-backend=etcd", "--rdzv-endpoint=h:x", "x.py"),
        -1);
    CHECK(strstr(err, "--rdzv-endpoint: 'h:x' is not HOST[:PORT] or a URL"));
}

TEST(cli_run_rdzv_conf_reaches_the_rendezvous)
{
    struct el_opts o;
    struct el_rdzv_config rc;
    struct rdzv_strings s;
    char err[1400];
    CHECK_OK(OPTS(&o, "--nnodes=2", "x.py"));
    CHECK_OK(rdzv_config(&o, &rc, &s, err, sizeof err));
    CHECK_STR(rc.backend, "static");
    CHECK_EQ(rc.join_timeout_ms, 900000); /* torchrun's static timeout */
    CHECK_EQ(rc.port, 29500);
    CHECK_OK(OPTS(&o, "--rdzv-backend=c10d", "--nnodes=1:3",
                  "--rdzv-conf=join_timeout=7,timeout=5,read_timeout=1.5,"
                  "last_call_timeout=2,keep_alive_interval=0.25,"
                  "keep_alive_max_attempt=9,is_host=1",
                  "x.py"));
    CHECK_OK(rdzv_config(&o, &rc, &s, err, sizeof err));
    CHECK_STR(rc.backend, "c10d");
    CHECK_EQ(rc.port, 29400);
    CHECK_EQ(rc.join_timeout_ms, 7000); /* join_timeout wins */
    CHECK_EQ(rc.io_timeout_ms, 1500);
    CHECK_EQ(rc.last_call_timeout_ms, 2000);
    CHECK_EQ(rc.keep_alive_interval_ms, 250);
    CHECK_EQ(rc.keep_alive_max_attempt, 9);
    CHECK_EQ(rc.is_host, 1);
    CHECK_OK(OPTS(&o, "--rdzv-backend=etcd-v2", "--nnodes=1:3",
                  "--rdzv-endpoint=a:1,http://b:2",
                  "--rdzv-conf=etcd_prefix=/p,protocol=https,cacert=ca,"
                  "cert=c,key=k,username=u,password=pw",
                  "x.py"));
    CHECK_OK(rdzv_config(&o, &rc, &s, err, sizeof err));
    CHECK_STR(rc.backend, "etcd");
    CHECK_STR(rc.endpoints, "a:1,http://b:2");
    CHECK_STR(rc.etcd.prefix, "/p");
    CHECK_STR(rc.etcd.protocol, "https");
    CHECK_STR(rc.etcd.cacert, "ca");
    CHECK_STR(rc.etcd.cert, "c");
    CHECK_STR(rc.etcd.key, "k");
    CHECK_STR(rc.etcd.user, "u");
    CHECK_STR(rc.etcd.password, "pw");
    /* Defaults: torch's elastic knobs. */
    CHECK_OK(OPTS(&o, "--standalone", "x.py"));
    CHECK_OK(rdzv_config(&o, &rc, &s, err, sizeof err));
    CHECK_STR(rc.backend, "standalone");
    CHECK_EQ(rc.join_timeout_ms, 600000);
    CHECK_EQ(rc.last_call_timeout_ms, 30000);
    CHECK_EQ(rc.keep_alive_interval_ms, 5000);
    CHECK_EQ(rc.keep_alive_max_attempt, 3);
    CHECK_EQ(rc.is_host, 0);
    CHECK(rc.etcd.prefix == NULL);
}
