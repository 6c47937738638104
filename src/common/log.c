/* log.c -- the binaries' one-line-per-event logger (see include/elrun/log.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "elrun/log.h"

enum el_log_level el_log_max_ = EL_LOG_INFO;
static char component_[32] = "elrun";

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG"};

void el_log_init(const char *component, enum el_log_level max)
{
    const char *env = getenv("ELRUN_LOG_LEVEL");
    if (component)
        snprintf(component_, sizeof component_, "%s", component);
    el_log_max_ = max;
    if (env && *env) {
        for (int i = 0; i < 4; i++)
            if (strcasecmp(env, level_names[i]) == 0)
                el_log_max_ = (enum el_log_level)i;
    }
}

void el_log_(enum el_log_level lvl, const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line,
                     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s[%d] ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                     level_names[lvl], component_, (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
