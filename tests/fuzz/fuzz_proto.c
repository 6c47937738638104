/* fuzz_proto.c -- libFuzzer target for the store's request parser.
 *
 * Feeds the input to el__proto_parse() the way the server does: as a stream
 * of requests, in every dialect, with tight limits, and also split at every
 * cut point of the first request (a parse of a prefix must say "need more"
 * or fail the same way, never read past the end).  `make fuzz` builds it
 * with clang; build/fuzz_replay runs the corpus under `make test`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parse_stream(const uint8_t *data, size_t size, enum el_dialect d,
                         const struct el_store_limits *lim)
{
    size_t pos = 0;
    while (pos < size) {
        struct el_req rq;
        char err[160];
        int rc = el__proto_parse(data + pos, size - pos, d, lim, &rq, err,
                                 sizeof err);
        if (rc <= 0)
            return;
        if ((size_t)rc > size - pos || rq.frame_len != (size_t)rc)
            abort();
        /* Walk the key list the way the server does. */
        const uint8_t *cur = rq.list;
        for (uint64_t i = 0; i < rq.count && cur; i++) {
            uint64_t n;
            const uint8_t *k = el__proto_next_str(&cur, &n);
            if (k < data + pos || k + n > data + pos + (size_t)rc)
                abort();
            if (rq.op == EL_OP_MULTI_SET) {
                k = el__proto_next_str(&cur, &n);
                if (k + n > data + pos + (size_t)rc)
                    abort();
            }
        }
        for (int i = 0; i < rq.nstr; i++)
            if (rq.str[i] + rq.len[i] > data + pos + (size_t)rc)
                abort();
        if (rq.dialect != EL_DIALECT_UNKNOWN)
            d = rq.dialect;
        pos += (size_t)rc;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct el_store_limits tight = {.max_key_len = 64,
                                    .max_value_len = 256,
                                    .max_keys_per_req = 8,
                                    .max_conn_buffer = 4096};
    struct el_store_limits dflt = {0};
    el__proto_limits_fill(&dflt);
    for (int d = EL_DIALECT_UNKNOWN; d <= EL_DIALECT_V2; d++) {
        parse_stream(data, size, (enum el_dialect)d, &tight);
        parse_stream(data, size, (enum el_dialect)d, &dflt);
    }
    /* Every prefix of the first request is "need more" or the same error. */
    struct el_req rq;
    char err[160];
    int full = el__proto_parse(data, size, EL_DIALECT_UNKNOWN, &dflt, &rq, err,
                               sizeof err);
    if (full > 0) {
        for (size_t cut = 0; cut < (size_t)full && cut < 4096; cut++) {
            uint8_t *copy = malloc(cut ? cut : 1);
            memcpy(copy, data, cut);
            int rc = el__proto_parse(copy, cut, EL_DIALECT_UNKNOWN, &dflt, &rq,
                                     err, sizeof err);
            free(copy);
            if (rc > 0)
                abort(); /* a prefix of a request cannot be complete */
        }
    }
    return 0;
}
