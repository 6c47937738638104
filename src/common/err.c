/* err.c -- descriptions of elrun's error codes (see include/elrun/err.h). */
#include <string.h>

#include "elrun/err.h"

const char *el_strerror(int err)
{
    switch (err) {
    case EL_OK:
        return "success";
#define EL_ERR_CASE_(name, val, msg) case val: return msg;
        EL_ERRMAP(EL_ERR_CASE_)
#undef EL_ERR_CASE_
    default:
        break;
    }
    if (err < 0 && err > -4096)
        return strerror(-err);
    return "unknown error";
}
