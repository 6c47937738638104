/* etcd_int.h -- internals of the etcd v3 client (include/elrun/etcd.h),
 * shared by the files of src/etcd and by the unit tests: base64, the JSON
 * shapes of the gateway's replies, and the request engine with failover
 * between members (client.c).
 */
#ifndef ELRUN_ETCD_INT_H
#define ELRUN_ETCD_INT_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/curl_dl.h"
#include "elrun/etcd.h"

/* libcurl is loaded at run time: every curl call goes through el__curl
 * (common/curl_dl.h), which el__curl_load() fills on the first el_etcd_open(). */

/* ---- base64 (standard alphabet, '=' padding), as the gateway wants ---- */

/* Encoded length of n bytes, without the NUL. */
size_t el__etcd_b64_len(size_t n);
/* Encode n bytes into out (room for el__etcd_b64_len(n) + 1); NUL-terminates
 * and returns the length. */
size_t el__etcd_b64_encode(const void *in, size_t n, char *out);
/* Decode a base64 string of length n (padding optional, no whitespace) into
 * a malloc'd buffer with a NUL after the data.  Returns 0, EL_EPROTO for a
 * bad character or length, -ENOMEM. */
int el__etcd_b64_decode(const char *in, size_t n, void **out, size_t *outlen);

/* ---- JSON shapes of the gateway ---- */

/* A JSON string holding base64 of p[0..n) (new reference, NULL on ENOMEM). */
json_t *el__etcd_json_b64(const void *p, size_t n);
/* The range_end that makes [prefix, end) "every key starting with prefix":
 * the prefix with its last byte (that is not 0xff) incremented; "\0" (every
 * key) for an empty or all-0xff prefix.  Writes end (room for strlen(prefix)
 * + 1 bytes) and returns its length. */
size_t el__etcd_prefix_end(const char *prefix, char *end);
/* An int64 field that the gateway sends as a string (or a number); a
 * missing field is 0, as protobuf's JSON omits defaults. */
int64_t el__etcd_json_int(const json_t *obj, const char *name);
/* Fill kv from one of the gateway's "kv" objects.  Returns 0, EL_EPROTO,
 * -ENOMEM (kv is cleared on error). */
int el__etcd_kv_from_json(const json_t *obj, struct el_etcd_kv *kv);
/* An error reply: {"error":"...","message":"...","code":N} (unary) or
 * {"error":{"grpc_code":N,"message":"..."}} (streaming).  Returns 1 and sets
 * *code / *msg (borrowed) if obj is one, else 0. */
int el__etcd_json_error(const json_t *obj, int *code, const char **msg);
/* The elrun code for a gRPC status code that etcd returned (not for
 * Unavailable, which the engine handles by failing over). */
int el__etcd_grpc_to_err(int grpc_code, const char *msg);
/* Parse one line of a watch stream into events appended to *evs (capacity
 * *cap, count *n).  Sets *created / *canceled / *compact_rev / *revision
 * (the header's revision) when the message says so.  Returns 0, EL_EPROTO
 * (with the gateway's message in *err if it was an error object), -ENOMEM.
 * A cancel with a reason returns 0 with the reason in *err.  Whenever *err
 * is set, it points into *hold, which the caller json_decref's. */
int el__etcd_watch_parse(const char *line, size_t len,
                         struct el_etcd_event **evs, size_t *n, size_t *cap,
                         int *created, int *canceled, int64_t *compact_rev,
                         int64_t *revision, const char **err, json_t **hold);

/* ---- the client and its request engine ---- */

struct el_etcd_member {
    char *url;          /* "http://127.0.0.1:2379", no trailing '/' */
    char last_err[320]; /* why the last attempt on it failed        */
};

struct el_etcd_buf {
    char *p;
    size_t len, cap;
};

struct el_etcd {
    struct el_etcd_opts opts; /* strings point into the copies below      */
    char *s_endpoints, *s_protocol, *s_cacert, *s_cert, *s_key;
    char *s_user, *s_password;
    char *token; /* auth token, NULL until authenticated     */
    struct el_etcd_member *m;
    size_t nm, cur;
    CURL *easy;
    struct curl_slist *hdrs;
    struct el_etcd_buf resp;
    int cancel_fd;
    uint64_t failovers;
    int64_t suspect_until; /* a member failed recently (client.c)      */
    char curl_err[CURL_ERROR_SIZE];
    char errmsg[1024];
};

/* How a request may be retried on another member after it was sent and the
 * member failed before answering. */
enum el_etcd_retry {
    EL_ETCD_RETRY_ALWAYS, /* idempotent: reads, puts, deletes, leases  */
    EL_ETCD_RETRY_FLAG,   /* retry, but tell the caller (*ambiguous)   */
    EL_ETCD_RETRY_NEVER,  /* return -ECONNABORTED                      */
};

/* POST body (consumed: the reference is stolen) to path on a member, moving
 * to the next member on transport failures and on "unavailable" replies,
 * until op_timeout_ms.  On 0, *reply is the parsed reply object (caller
 * json_decref's it).  On an etcd error reply, the mapped code and message.
 * *ambiguous (may be NULL) is set to 1 if an earlier attempt may have been
 * applied (EL_ETCD_RETRY_FLAG). */
int el__etcd_call(struct el_etcd *c, const char *path, json_t *body,
                  enum el_etcd_retry retry, json_t **reply, int *ambiguous);

/* Put "op key: " before the message of a failed call (not for
 * EL_ENOTFOUND, whose messages say it already); returns rc. */
int el__etcd_context(struct el_etcd *c, int rc, const char *op,
                     const char *key);
/* Set c->errmsg; returns rc. */
int el__etcd_fail(struct el_etcd *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Apply the TLS and timeout options of c to a curl handle (watch.c). */
void el__etcd_setup_easy(struct el_etcd *c, CURL *h);
/* The request headers: JSON, require-leader, and the auth token if any.
 * A new list (caller frees with curl_slist_free_all), NULL on ENOMEM. */
struct curl_slist *el__etcd_headers(const struct el_etcd *c);
/* Get an auth token if the client has a user and none yet (0 if no auth
 * is needed). */
int el__etcd_auth(struct el_etcd *c);
/* Drop the token and authenticate again (after "invalid auth token"). */
int el__etcd_auth_renew(struct el_etcd *c);

/* Milliseconds on CLOCK_MONOTONIC. */
int64_t el__etcd_now_ms(void);
/* 1 if fd >= 0 is readable now. */
int el__etcd_fd_ready(int fd);
/* Describe a failed curl transfer into buf ("connection refused", curl's
 * TLS message ...); returns 1 if it was a TLS failure (the handshake or a
 * TLS alert from the peer: the request was certainly not processed). */
int el__etcd_describe_curl(CURLcode rc, const char *errbuf, char *buf,
                           size_t len);

#endif
