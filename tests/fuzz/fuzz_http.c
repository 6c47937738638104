/* fuzz_http.c -- libFuzzer target for the HTTP request glue of src/http
 * (request.c over http-parser), which any client that reaches a
 * --metrics-addr port feeds: whatever the bytes and however they are cut
 * into reads (the first byte picks the read size), feeding answers 0 or a
 * 4xx status without crashing, every request handed on has a path that
 * starts with '/' and fits the URL limit, and the same bytes fed in one
 * read give the same requests and, for a request that is refused, a
 * refusal too (which limit is hit first, 400 or 431, may depend on the
 * reads).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    unsigned n;
    unsigned long hash;
};

static void on_req(void *arg, const struct el_http_request *rq, int ka)
{
    struct seen *s = arg;
    size_t l = strlen(rq->path);
    if (rq->path[0] != '/' || l > EL__HTTP_URL_MAX || !rq->method ||
        strlen(rq->query) > EL__HTTP_URL_MAX || (ka != 0 && ka != 1))
        abort();
    s->n++;
    for (const char *p = rq->path; *p; p++)
        s->hash = s->hash * 31 + (unsigned char)*p;
    s->hash = s->hash * 31 + (unsigned long)ka;
}

static int feed(const uint8_t *data, size_t size, size_t step, struct seen *s)
{
    struct el__http_req r;
    el__http_req_init(&r, 4096, on_req, s);
    for (size_t off = 0; off < size; off += step) {
        size_t n = size - off < step ? size - off : step;
        int st = el__http_req_feed(&r, (const char *)data + off, n);
        if (st)
            return st;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)(data[0] % 64) + 1;
    struct seen a = {0}, b = {0};
    int ra = feed(data + 1, size - 1, step, &a);
    int rb = feed(data + 1, size - 1, size, &b);
    if ((ra != 0 && ra != 400 && ra != 414 && ra != 431) || !ra != !rb ||
        a.n != b.n || a.hash != b.hash)
        abort();
    return 0;
}
