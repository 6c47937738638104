/* rdzv_worker.c -- the worker of bench/rdzv.sh: appends
 * "<round> <rank> <CLOCK_REALTIME ns>" to DIR/starts in one write, then
 * exits ("go") or stays until DIR/finish exists or it gets SIGTERM ("stay").
 * A C program rather than a shell script, so that starting 1,024 workers
 * measures the launcher, not sh and date.
 *
 *   rdzv_worker DIR go|stay
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const char *round = getenv("TORCHELASTIC_RESTART_COUNT");
    const char *rank = getenv("RANK");
    char path[4096], line[128];
    snprintf(path, sizeof path, "%s/starts", argv[1]);
    int n = snprintf(line, sizeof line, "%s %s %lld\n", round ? round : "?",
                     rank ? rank : "?",
                     (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, line, (size_t)n) != n)
        return 1;
    close(fd);
    if (strcmp(argv[2], "stay") != 0)
        return 0;
    /* Wait for DIR/finish without polling. */
    int in = inotify_init1(IN_CLOEXEC);
    if (in < 0 || inotify_add_watch(in, argv[1], IN_CREATE) < 0)
        return 1;
    snprintf(path, sizeof path, "%s/finish", argv[1]);
    char buf[4096];
    while (access(path, F_OK) != 0)
        if (read(in, buf, sizeof buf) < 0)
            return 1;
    return 0;
}
