/* buf.h -- a growing text buffer for the job layer's generators (the sbatch
 * script, the AWS templates' user data); private to src/job.  Start from
 * {0}; on allocation failure oom is set and later puts do nothing, so a
 * generator checks once at the end and frees s either way.
 */
#ifndef ELRUN_JOB_BUF_H
#define ELRUN_JOB_BUF_H

#include <stddef.h>

struct el__buf {
    char *s; /* NUL-terminated, malloc'd; NULL at first */
    size_t len, cap;
    int oom;
};

void el__buf_put(struct el__buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
