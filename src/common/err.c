/* err.c -- descriptions of elrun's error codes (see include/elrun/err.h),
 * and el__errf(), which every module uses to keep an error message
 * (common/errfmt.h). */
#include <stdio.h>
#include <string.h>

#include "common/errfmt.h"
#include "elrun/err.h"

const char *el_strerror(int err)
{
    switch (err) {
    case EL_OK:
        return "success";
#define EL_ERR_CASE_(name, val, msg) \
    case val:                        \
        return msg;
        EL_ERRMAP(EL_ERR_CASE_)
#undef EL_ERR_CASE_
    default:
        break;
    }
    if (err < 0 && err > -4096)
        return strerror(-err);
    return "unknown error";
}

int el__verrf(char *buf, size_t cap, int rc, const char *fmt, va_list ap)
{
    if (buf && cap)
        vsnprintf(buf, cap, fmt, ap);
    return rc;
}

int el__errf(char *buf, size_t cap, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    el__verrf(buf, cap, rc, fmt, ap);
    va_end(ap);
    return rc;
}
