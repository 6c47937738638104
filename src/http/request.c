/* request.c -- requests out of a byte stream with http-parser: the URL
 * collected (bounded), the per-request size counted, one callback per
 * complete request.  The parser is paused in on_message_complete so that
 * each request is handed on with its own byte count and the next one
 * starts a fresh count.
 */
#include <string.h>

#include "http/http_int.h"

static int on_begin(http_parser *p)
{
    struct el__http_req *r = p->data;
    r->urllen = 0;
    r->url_too_long = 0;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    struct el__http_req *r = p->data;
    if (len > EL__HTTP_URL_MAX - r->urllen) {
        r->url_too_long = 1;
        return 1;
    }
    memcpy(r->url + r->urllen, at, len);
    r->urllen += len;
    r->url[r->urllen] = 0;
    return 0;
}

static int on_complete(http_parser *p)
{
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_begin,
    .on_url = on_url,
    .on_message_complete = on_complete,
};

void el__http_req_init(struct el__http_req *r, size_t max_request,
                       el__http_on_request fn, void *arg)
{
    memset(r, 0, sizeof *r);
    http_parser_init(&r->p, HTTP_REQUEST);
    r->p.data = r;
    r->max = max_request;
    r->fn = fn;
    r->arg = arg;
}

void el__http_req_stop(struct el__http_req *r)
{
    r->stop = 1;
}

/* Hand the complete request on: path and query split by http-parser's own
 * URL parser (origin-form "/p?q" or absolute-form "http://h/p?q"). */
static int deliver(struct el__http_req *r)
{
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (http_parser_parse_url(r->url, r->urllen, r->p.method == HTTP_CONNECT,
                              &u) != 0)
        return 400;
    char path[EL__HTTP_URL_MAX + 1] = "/", query[EL__HTTP_URL_MAX + 1] = "";
    if (u.field_set & (1 << UF_PATH)) {
        memcpy(path, r->url + u.field_data[UF_PATH].off,
               u.field_data[UF_PATH].len);
        path[u.field_data[UF_PATH].len] = 0;
    }
    if (path[0] != '/')
        return 400; /* "*" (asterisk-form): nothing here is served so */
    if (u.field_set & (1 << UF_QUERY)) {
        memcpy(query, r->url + u.field_data[UF_QUERY].off,
               u.field_data[UF_QUERY].len);
        query[u.field_data[UF_QUERY].len] = 0;
    }
    struct el_http_request rq = {
        .method = http_method_str((enum http_method)r->p.method),
        .path = path,
        .query = query,
    };
    r->fn(r->arg, &rq, http_should_keep_alive(&r->p));
    return 0;
}

int el__http_req_feed(struct el__http_req *r, const char *data, size_t len)
{
    while (len > 0 && !r->stop) {
        size_t n = http_parser_execute(&r->p, &settings, data, len);
        r->seen += n;
        enum http_errno e = HTTP_PARSER_ERRNO(&r->p);
        if (e == HPE_PAUSED) {
            http_parser_pause(&r->p, 0);
            if (r->seen > r->max)
                return 431;
            if (r->p.upgrade)
                return 400; /* CONNECT or Upgrade: never served */
            r->seen = 0;
            int rc = deliver(r);
            if (rc)
                return rc;
            data += n;
            len -= n;
            continue;
        }
        if (e != HPE_OK)
            return r->url_too_long ? 414 : e == HPE_HEADER_OVERFLOW ? 431 : 400;
        if (r->seen > r->max)
            return 431;
        if (r->p.upgrade || n != len)
            return 400; /* no upgrades, no CONNECT tunnels */
        break;
    }
    return 0;
}
