/* fuzz_ftimer.c -- libFuzzer target for the file timer's request parser
 * (src/agent/filetimer.c), which reads whatever any local process of the
 * user writes into the agent's FIFO: whatever the bytes, it answers 0 with
 * a request that holds (a pid above 0, a finite time, a signal up to 64, a
 * terminated scope) or EL_EFORMAT with a message, without crashing.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent_impl.h"
#include "elrun/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct el__ftimer_req r;
    char err[256] = "";
    int rc = el__ftimer_parse((const char *)data, size, &r, err, sizeof err);
    if (rc == 0) {
        if (r.pid <= 0 || !isfinite(r.expires) || r.sig > 64 ||
            memchr(r.scope, 0, sizeof r.scope) == NULL)
            abort();
    } else if (rc != EL_EFORMAT || !err[0]) {
        abort();
    }
    return 0;
}
