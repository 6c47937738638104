/* sbuf.h -- a growable NUL-terminated string buffer (private to libelrun).
 *
 *   struct el__sbuf b = {0};
 *   el__sbuf_str(&b, "x");  ...  if (b.oom) { free(b.p); fail }
 *
 * An allocation failure sets oom and makes every later add a no-op, so a
 * builder checks once at the end.  b.p is malloc'd (the caller frees it);
 * it is NULL until something was added.
 */
#ifndef ELRUN_COMMON_SBUF_H
#define ELRUN_COMMON_SBUF_H

#include <stddef.h>

struct el__sbuf {
    char *p;
    size_t len, cap;
    int oom;
};

void el__sbuf_add(struct el__sbuf *b, const char *s, size_t n);
void el__sbuf_str(struct el__sbuf *b, const char *s);
void el__sbuf_printf(struct el__sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
