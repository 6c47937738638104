/* progress.c -- el_worker_progress(): one line per report on the pipe the
 * agent passes as ELRUN_PROGRESS_FD (docs/METRICS.md).  The pipe is
 * non-blocking on the agent's side of the fork, so a report never stalls
 * training: a full pipe drops the line (-EAGAIN).  A line is far below
 * PIPE_BUF, so reports from threads never interleave.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "elrun/worker.h"

int el_worker_progress(int64_t step, int64_t samples)
{
    return el_worker_progress_loss(step, samples, NAN);
}

int el_worker_progress_loss(int64_t step, int64_t samples, double loss)
{
    const char *v = getenv("ELRUN_PROGRESS_FD");
    char *end;
    if (!v || !*v)
        return -ENOENT;
    long fd = strtol(v, &end, 10);
    if (*end || fd < 0 || fd > 1 << 20)
        return -EBADF;
    char line[128];
    int n = samples >= 0
                ? snprintf(line, sizeof line,
                           "step %" PRId64 " samples %" PRId64, step, samples)
                : snprintf(line, sizeof line, "step %" PRId64, step);
    if (isfinite(loss))
        n += snprintf(line + n, sizeof line - (size_t)n, " loss %.6g", loss);
    line[n++] = '\n';
    ssize_t w;
    while ((w = write((int)fd, line, (size_t)n)) < 0 && errno == EINTR) {
    }
    if (w < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    return 0;
}
