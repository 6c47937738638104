/* runner.c -- runs the registered unit tests, each in a forked process with
 * a time limit, and prints TAP (the plan "1..N" first, then one line per
 * test) and a closing "N passed, N failed".
 *
 *   build/unit_tests            run all
 *   build/unit_tests store_     run the tests whose name starts with store_
 *   build/unit_tests -l         list the tests
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#define MAX_TESTS 1024

static struct {
    const char *name;
    test_fn fn;
} tests[MAX_TESTS];
static int ntests;

void test_register_(const char *name, test_fn fn)
{
    if (ntests < MAX_TESTS) {
        tests[ntests].name = name;
        tests[ntests].fn = fn;
        ntests++;
    }
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Runs test IDX in a child; 0 if it passed.  A failure to fork or to wait
 * for the child is reported and counts as a failed test. */
static int run_one(int idx, int timeout_s)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "  %s: fork: %s\n", tests[idx].name, strerror(errno));
        return 1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        alarm((unsigned)timeout_s);
        tests[idx].fn();
        fflush(NULL);
        _exit(0);
    }
    int st = 0;
    pid_t r;
    while ((r = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        ; /* a signal interrupted the wait: the child may still run */
    int wait_errno = errno;
    if (r < 0)
        kill(pid, SIGKILL); /* before its setpgid, the group is not its own */
    kill(-pid, SIGKILL);    /* whatever the test forked and left behind */
    if (r < 0) {
        fprintf(stderr, "  %s: waitpid: %s\n", tests[idx].name,
                strerror(wait_errno));
        return 1;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    if (WIFSIGNALED(st))
        fprintf(stderr, "  %s: %s\n", tests[idx].name,
                WTERMSIG(st) == SIGALRM ? "timed out"
                                        : strsignal(WTERMSIG(st)));
    return 1;
}

int main(int argc, char **argv)
{
    const char *prefix = NULL;
    int list = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-l") == 0)
            list = 1;
        else
            prefix = argv[i];
    }
    qsort(tests, (size_t)ntests, sizeof tests[0], by_name);
    const char *t = getenv("ELRUN_TEST_TIMEOUT");
    int timeout_s = t ? atoi(t) : 60;
    signal(SIGPIPE, SIG_IGN);
    int passed = 0, failed = 0, n = 0;
    if (!list) {
        int plan = 0;
        for (int i = 0; i < ntests; i++)
            if (!prefix || strncmp(tests[i].name, prefix, strlen(prefix)) == 0)
                plan++;
        printf("1..%d\n", plan);
    }
    for (int i = 0; i < ntests; i++) {
        if (prefix && strncmp(tests[i].name, prefix, strlen(prefix)) != 0)
            continue;
        if (list) {
            puts(tests[i].name);
            continue;
        }
        n++;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int bad = run_one(i, timeout_s);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 +
                    (double)(b.tv_nsec - a.tv_nsec) / 1e6;
        printf("%sok %d - %s (%.0f ms)\n", bad ? "not " : "", n, tests[i].name,
               ms);
        fflush(stdout);
        if (bad)
            failed++;
        else
            passed++;
    }
    if (list)
        return 0;
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
