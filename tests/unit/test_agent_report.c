/* test_agent_report.c -- the agent's failure report: reading @record error
 * files and printing torchrun's ChildFailedError table byte for byte (the
 * expected text is torchrun 1.13's output for two failed ranks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_impl.h"
#include "elrun/agent.h"
#include "elrun/err.h"
#include "test.h"

static const char *const callstack_fmt =
    "Traceback (most recent call last):\\n  File \\\"/usr/lib/python3/"
    "dist-packages/torch/distributed/elastic/multiprocessing/errors/"
    "__init__.py\\\", line 346, in wrapper\\n    return f(*args, **kwargs)"
    "\\n           ^^^^^^^^^^^^^^^^^^\\n  File \\\"/opt/bench/lib/raiser.py"
    "\\\", line 16, in main\\n    raise RuntimeError(f\\\"boom from rank "
    "{rank}\\\")\\nRuntimeError: boom from rank %d\\n";

static void write_error_file(const char *path, int rank)
{
    char cs[1024];
    FILE *f = fopen(path, "w");
    snprintf(cs, sizeof cs, callstack_fmt, rank);
    fprintf(f,
            "{\"message\": {\"message\": \"RuntimeError: boom from rank "
            "%d\", \"extraInfo\": {\"py_callstack\": \"%s\", "
            "\"timestamp\": \"1795989802\"}}}",
            rank, cs);
    fclose(f);
}

static const char *const expected_7_3 =
    "============================================================\n"
    "/opt/bench/lib/raiser.py FAILED\n"
    "------------------------------------------------------------\n"
    "Failures:\n"
    "[1]:\n"
    "  time      : 2026-11-29_22:03:22\n"
    "  host      : localhost\n"
    "  rank      : 1 (local_rank: 1)\n"
    "  exitcode  : 1 (pid: 4743)\n"
    "  error_file: DIR/attempt_0/1/error.json\n"
    "  traceback : Traceback (most recent call last):\n"
    "    File \"/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py\", line 346, in wrapper\n"
    "      return f(*args, **kwargs)\n"
    "             ^^^^^^^^^^^^^^^^^^\n"
    "    File \"/opt/bench/lib/raiser.py\", line 16, in main\n"
    "      raise RuntimeError(f\"boom from rank {rank}\")\n"
    "  RuntimeError: boom from rank 1\n"
    "  \n"
    "------------------------------------------------------------\n"
    "Root Cause (first observed failure):\n"
    "[0]:\n"
    "  time      : 2026-11-29_22:03:22\n"
    "  host      : localhost\n"
    "  rank      : 0 (local_rank: 0)\n"
    "  exitcode  : 1 (pid: 4742)\n"
    "  error_file: DIR/attempt_0/0/error.json\n"
    "  traceback : Traceback (most recent call last):\n"
    "    File \"/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py\", line 346, in wrapper\n"
    "      return f(*args, **kwargs)\n"
    "             ^^^^^^^^^^^^^^^^^^\n"
    "    File \"/opt/bench/lib/raiser.py\", line 16, in main\n"
    "      raise RuntimeError(f\"boom from rank {rank}\")\n"
    "  RuntimeError: boom from rank 0\n"
    "  \n"
    "============================================================\n";

TEST(agent_report_two_failures_as_torchrun)
{
    char dir[] = "/tmp/elrun-report-XXXXXX", path[2][300], want[8192];
    CHECK(mkdtemp(dir) != NULL);
    setenv("TZ", "UTC", 1);
    tzset();
    struct el_agent_failure f[2];
    memset(f, 0, sizeof f);
    for (int r = 0; r < 2; r++) {
        char sub[256];
        snprintf(sub, sizeof sub, "%s/attempt_0", dir);
        mkdir(sub, 0755);
        snprintf(sub, sizeof sub, "%s/attempt_0/%d", dir, r);
        mkdir(sub, 0755);
        snprintf(path[r], sizeof path[r], "%s/error.json", sub);
        write_error_file(path[r], r);
        f[r].local_rank = f[r].global_rank = r;
        f[r].pid = 4742 + r;
        f[r].exitcode = 1;
        f[r].timestamp = 12345; /* replaced by the file's */
        el__agent_read_error_file(&f[r], path[r]);
        CHECK_EQ(f[r].timestamp, 1795989802);
        CHECK_STR(f[r].error_file, path[r]);
    }
    struct el_agent_result res = {0};
    res.outcome = EL_AGENT_FAILED;
    res.failures = f;
    res.nfailures = 2;
    res.root = 0;
    char *box =
        el_agent_format_failures(&res, "/opt/bench/lib/raiser.py", "localhost");
    CHECK(box != NULL);
    /* DIR stands for the temp dir in the expected text. */
    size_t o = 0;
    for (const char *p = expected_7_3; *p; p++) {
        if (strncmp(p, "DIR", 3) == 0) {
            o += (size_t)snprintf(want + o, sizeof want - o, "%s", dir);
            p += 2;
        } else {
            want[o++] = *p;
        }
    }
    want[o] = 0;
    CHECK_STR(box, want);
    free(box);

    /* The agent's error file copies the root cause with errorCode. */
    char agent_ef[300];
    snprintf(agent_ef, sizeof agent_ef, "%s/agent.json", dir);
    CHECK_OK(el_agent_write_error_file(&res, agent_ef));
    FILE *fp = fopen(agent_ef, "r");
    char buf[4096] = {0};
    CHECK(fread(buf, 1, sizeof buf - 1, fp) > 0);
    fclose(fp);
    CHECK(strstr(buf, "\"message\": \"RuntimeError: boom from rank 0\"") !=
          NULL);
    CHECK(strstr(buf, "\"errorCode\": 1") != NULL);
    for (int r = 0; r < 2; r++) {
        free(f[r].error_file);
        free(f[r].error_json);
        free(f[r].message);
    }
    el__rm_rf(dir);
}

TEST(agent_report_signal_and_no_file)
{
    struct el_agent_failure f;
    memset(&f, 0, sizeof f);
    f.pid = 4767;
    f.exitcode = -9;
    el__agent_read_error_file(&f, "/nonexistent/error.json");
    CHECK(f.error_file == NULL);
    CHECK_STR(f.message, "Signal 9 (SIGKILL) received by PID 4767");
    free(f.message);
    memset(&f, 0, sizeof f);
    f.exitcode = 3;
    el__agent_read_error_file(&f, "/nonexistent/error.json");
    CHECK_STR(f.message, "To enable traceback see: "
                         "https://pytorch.org/docs/stable/elastic/errors.html");
    free(f.message);
}

TEST(agent_report_width_follows_the_longest_line)
{
    /* The signal case of torchrun-baseline 7.4: 53 columns. */
    struct el_agent_failure f;
    memset(&f, 0, sizeof f);
    f.local_rank = f.global_rank = 1;
    f.pid = 4767;
    f.exitcode = -9;
    f.timestamp = 1795989813;
    el__agent_read_error_file(&f, "/nonexistent/error.json");
    struct el_agent_result res = {0};
    res.failures = &f;
    res.nfailures = 1;
    char *box =
        el_agent_format_failures(&res, "/opt/bench/lib/failer.sh", "localhost");
    CHECK(box != NULL);
    CHECK(strncmp(box,
                  "=====================================================\n"
                  "/opt/bench/lib/failer.sh FAILED\n",
                  86) == 0);
    CHECK(strstr(box,
                 "  traceback : Signal 9 (SIGKILL) received by PID 4767\n"
                 "=====================================================\n"));
    free(box);
    free(f.message);
}

/* The import error the launcher names the interpreter for: from the error
 * file's traceback, else the end of stderr.log; nothing for other errors. */
TEST(agent_report_finds_import_errors)
{
    char dir[] = "/tmp/elrun-test-imp.XXXXXX";
    char path[256];
    CHECK(mkdtemp(dir) != NULL);
    struct el_agent_failure f = {.exitcode = 1, .pid = 7};

    /* stderr.log (redirected): the last ModuleNotFoundError line. */
    snprintf(path, sizeof path, "%s/stderr.log", dir);
    FILE *e = fopen(path, "w");
    CHECK(e != NULL);
    for (int i = 0; i < 2000; i++)
        fprintf(e, "some noise line %d\n", i);
    fprintf(e, "Traceback (most recent call last):\n  File \"t.py\", line 1, "
               "in <module>\n    import torch\nModuleNotFoundError: No module "
               "named 'torch'\n");
    fclose(e);
    el__agent_find_import_error(&f, dir);
    CHECK_STR(f.import_error, "ModuleNotFoundError: No module named 'torch'");
    free(f.import_error);
    f.import_error = NULL;

    /* An error file wins over stderr.log: a RuntimeError is no import error. */
    snprintf(path, sizeof path, "%s/error.json", dir);
    write_error_file(path, 1);
    el__agent_read_error_file(&f, path);
    el__agent_find_import_error(&f, dir);
    CHECK(f.import_error == NULL);
    free(f.error_file);
    free(f.error_json);
    free(f.message);

    /* An ImportError in the error file's traceback (indented as printed). */
    FILE *j = fopen(path, "w");
    CHECK(j != NULL);
    fprintf(j, "{\"message\": {\"message\": \"ImportError: cannot import name "
               "'x'\", \"extraInfo\": {\"py_callstack\": \"Traceback (most "
               "recent call last):\\n  File \\\"t.py\\\"\\nImportError: cannot "
               "import name 'x' from 'y'\\n\", \"timestamp\": \"1\"}}}");
    fclose(j);
    struct el_agent_failure g = {.exitcode = 1, .pid = 8};
    el__agent_read_error_file(&g, path);
    el__agent_find_import_error(&g, dir);
    CHECK_STR(g.import_error, "ImportError: cannot import name 'x' from 'y'");
    free(g.import_error);
    free(g.error_file);
    free(g.error_json);
    free(g.message);

    unlink(path);
    snprintf(path, sizeof path, "%s/stderr.log", dir);
    unlink(path);
    rmdir(dir);
}
