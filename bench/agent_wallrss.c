/* agent_wallrss.c -- measuring helper for bench/agent_*.sh (launcher
 * benchmarks, elrun against torchrun).
 *
 *   agent_wallrss run CMD ARGS...   run CMD (posix_spawn + wait4) and print
 *                                   "wall_s=S maxrss_kib=K status=N start_ns=T"
 *                                   (start_ns = CLOCK_REALTIME before spawn)
 *   agent_wallrss stamp DIR         a worker: write DIR/start.<attempt>.<rank>
 *                                   with its CLOCK_REALTIME in ns, then exit 0
 *   agent_wallrss failer DIR MS     a worker: attempt 0 rank 1 sleeps MS ms,
 *                                   writes DIR/kill, SIGKILLs itself; attempt
 *                                   0 others wait for SIGTERM, stamp its
 *                                   arrival in DIR/term.<rank> and exit at
 *                                   once; later attempts stamp their start
 *   agent_wallrss hwm DIR           a worker: write its parent's (the agent's)
 *                                   VmHWM in KiB to DIR/hwm.<rank>
 * Workers read RANK and TORCHELASTIC_RESTART_COUNT from the environment.
 */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long long realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v ? v : dflt;
}

static int term_fd = -1;

/* SIGTERM in a failer: stamp the arrival (async-signal-safe) and exit. */
static void on_term(int sig)
{
    char buf[32], *p = buf + sizeof buf;
    long long t = realtime_ns();
    (void)sig;
    *--p = '\n';
    do {
        *--p = (char)('0' + t % 10);
        t /= 10;
    } while (t > 0);
    if (write(term_fd, p, (size_t)(buf + sizeof buf - p)) < 0)
        _exit(1);
    _exit(0);
}

static int stamp(const char *dir, const char *name)
{
    char path[4096];
    long long t = realtime_ns();
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "%lld\n", t);
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "run") == 0) {
        pid_t pid;
        int st;
        struct rusage ru;
        long long t0 = realtime_ns(), m0 = mono_ns();
        if (posix_spawnp(&pid, argv[2], NULL, NULL, argv + 2, environ) != 0) {
            perror("posix_spawnp");
            return 127;
        }
        if (wait4(pid, &st, 0, &ru) < 0) {
            perror("wait4");
            return 1;
        }
        long long m1 = mono_ns();
        printf("wall_s=%.6f maxrss_kib=%ld status=%d start_ns=%lld\n",
               (double)(m1 - m0) / 1e9, ru.ru_maxrss,
               WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), t0);
        return 0;
    }
    if (argc >= 3) {
        const char *dir = argv[2];
        const char *rank = env_or("RANK", "0");
        const char *att = env_or("TORCHELASTIC_RESTART_COUNT", "0");
        char name[256];
        if (strcmp(argv[1], "stamp") == 0) {
            snprintf(name, sizeof name, "start.%s.%s", att, rank);
            return stamp(dir, name);
        }
        if (strcmp(argv[1], "failer") == 0) {
            int ms = argc >= 4 ? atoi(argv[3]) : 200;
            if (strcmp(att, "0") == 0) {
                if (strcmp(rank, "1") == 0) {
                    usleep((useconds_t)ms * 1000);
                    stamp(dir, "kill");
                    kill(getpid(), SIGKILL);
                }
                char path[4096];
                snprintf(path, sizeof path, "%s/term.%s", dir, rank);
                term_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                signal(SIGTERM, on_term);
                for (;;)
                    pause();
            }
            snprintf(name, sizeof name, "start.%s.%s", att, rank);
            return stamp(dir, name);
        }
        if (strcmp(argv[1], "hwm") == 0) {
            char path[256], line[256], out[4096];
            snprintf(path, sizeof path, "/proc/%d/status", (int)getppid());
            FILE *f = fopen(path, "r");
            long kib = -1;
            while (f && fgets(line, sizeof line, f))
                if (strncmp(line, "VmHWM:", 6) == 0)
                    kib = atol(line + 6);
            if (f)
                fclose(f);
            snprintf(out, sizeof out, "%s/hwm.%s", dir, rank);
            f = fopen(out, "w");
            if (!f)
                return 1;
            fprintf(f, "%ld\n", kib);
            fclose(f);
            return 0;
        }
    }
    fprintf(stderr, "usage: agent_wallrss run CMD... | stamp DIR | "
                    "failer DIR MS | hwm DIR\n");
    return 2;
}
