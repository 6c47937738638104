/* errfmt.h -- the one helper that formats an error message into an
 * object's buffer (r->errmsg, s->errmsg, a caller's err/errlen ...) and hands
 * the code back, so that "return fail(obj, rc, fmt, ...)" is one line in
 * every module.  Internal to libelrun.
 */
#ifndef ELRUN_ERRFMT_H
#define ELRUN_ERRFMT_H

#include <stdarg.h>
#include <stddef.h>

/* Format fmt into buf (cap bytes, always NUL-terminated, truncated to fit);
 * a NULL buf or a cap of 0 writes nothing.  Returns rc unchanged. */
int el__errf(char *buf, size_t cap, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with a va_list, for modules' own variadic fail() wrappers. */
int el__verrf(char *buf, size_t cap, int rc, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

#endif
