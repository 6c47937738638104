/* http_int.h -- the request parser of src/http, apart from the sockets so
 * that the fuzz target (tests/fuzz/fuzz_http.c) drives exactly the code
 * the server runs.  Private to src/http and its tests.
 */
#ifndef ELRUN_HTTP_INT_H
#define ELRUN_HTTP_INT_H

#include <http_parser.h>
#include <stddef.h>

#include "elrun/http.h"

#define EL__HTTP_URL_MAX 2048

/* Called once per complete request, in order; keep_alive = 0: answer with
 * "Connection: close" and close. */
typedef void (*el__http_on_request)(void *arg, const struct el_http_request *rq,
                                    int keep_alive);

struct el__http_req {
    http_parser p;
    size_t max;  /* bytes of one request                      */
    size_t seen; /* bytes of the current request so far       */
    char url[EL__HTTP_URL_MAX + 1];
    size_t urllen;
    int url_too_long;
    int stop; /* the callback asked to stop                */
    el__http_on_request fn;
    void *arg;
};

void el__http_req_init(struct el__http_req *r, size_t max_request,
                       el__http_on_request fn, void *arg);

/* Parse len more bytes, calling fn for each request they complete.
 * Returns 0 (need more, or all parsed), or the HTTP status to answer
 * before closing: 400 (does not parse), 414 (URL too long), 431 (request
 * larger than max_request). */
int el__http_req_feed(struct el__http_req *r, const char *data, size_t len);

/* Stop parsing (from fn): the rest of the data is dropped. */
void el__http_req_stop(struct el__http_req *r);

#endif
