/* json.c -- the pure parts of the etcd client: base64 (the gateway carries
 * keys and values as base64 strings), the int64-as-string fields, key-value
 * objects, error replies and the lines of a watch stream.  No I/O here, so
 * tests/unit/test_etcd.c checks all of it against sample replies.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "elrun/err.h"
#include "etcd/etcd_int.h"

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t el__etcd_b64_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

size_t el__etcd_b64_encode(const void *in, size_t n, char *out)
{
    const unsigned char *p = in;
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[o++] = b64_alphabet[v >> 18];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = b64_alphabet[(v >> 6) & 63];
        out[o++] = b64_alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        out[o++] = b64_alphabet[v >> 18];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}

static int b64_val(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || ch == '-')
        return 62;
    if (ch == '/' || ch == '_')
        return 63;
    return -1;
}

int el__etcd_b64_decode(const char *in, size_t n, void **out, size_t *outlen)
{
    while (n > 0 && in[n - 1] == '=')
        n--;
    if (n % 4 == 1)
        return EL_EPROTO;
    unsigned char *o = malloc(n / 4 * 3 + 3);
    if (!o)
        return -ENOMEM;
    size_t len = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val((unsigned char)in[i]);
        if (v < 0) {
            free(o);
            return EL_EPROTO;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[len++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    o[len] = '\0';
    *out = o;
    *outlen = len;
    return 0;
}

json_t *el__etcd_json_b64(const void *p, size_t n)
{
    char *s = malloc(el__etcd_b64_len(n) + 1);
    if (!s)
        return NULL;
    size_t len = el__etcd_b64_encode(p, n, s);
    json_t *j = json_stringn(s, len);
    free(s);
    return j;
}

size_t el__etcd_prefix_end(const char *prefix, char *end)
{
    size_t n = strlen(prefix);
    memcpy(end, prefix, n);
    while (n > 0) {
        unsigned char last = (unsigned char)end[n - 1];
        if (last < 0xff) {
            end[n - 1] = (char)(last + 1);
            end[n] = '\0';
            return n;
        }
        n--;
    }
    end[0] = '\0';
    return 1; /* the single byte "\0": every key >= key */
}

int64_t el__etcd_json_int(const json_t *obj, const char *name)
{
    json_t *v = json_object_get(obj, name);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    return 0;
}

static int b64_field(const json_t *obj, const char *name, char **out,
                     size_t *len)
{
    json_t *v = json_object_get(obj, name);
    void *p;
    int rc;
    if (!v) { /* omitted = empty */
        p = calloc(1, 1);
        if (!p)
            return -ENOMEM;
        *out = p;
        *len = 0;
        return 0;
    }
    if (!json_is_string(v))
        return EL_EPROTO;
    rc = el__etcd_b64_decode(json_string_value(v), json_string_length(v), &p,
                             len);
    if (rc == 0)
        *out = p;
    return rc;
}

void el_etcd_kv_clear(struct el_etcd_kv *kv)
{
    if (!kv)
        return;
    free(kv->key);
    free(kv->value);
    memset(kv, 0, sizeof *kv);
}

void el_etcd_kvs_free(struct el_etcd_kv *kvs, size_t n)
{
    for (size_t i = 0; kvs && i < n; i++)
        el_etcd_kv_clear(&kvs[i]);
    free(kvs);
}

void el_etcd_events_free(struct el_etcd_event *evs, size_t n)
{
    for (size_t i = 0; evs && i < n; i++)
        el_etcd_kv_clear(&evs[i].kv);
    free(evs);
}

int el__etcd_kv_from_json(const json_t *obj, struct el_etcd_kv *kv)
{
    char *v = NULL;
    int rc;
    memset(kv, 0, sizeof *kv);
    if (!json_is_object(obj))
        return EL_EPROTO;
    rc = b64_field(obj, "key", &kv->key, &kv->key_len);
    if (rc == 0)
        rc = b64_field(obj, "value", &v, &kv->value_len);
    if (rc) {
        el_etcd_kv_clear(kv);
        return rc;
    }
    kv->value = v;
    kv->create_revision = el__etcd_json_int(obj, "create_revision");
    kv->mod_revision = el__etcd_json_int(obj, "mod_revision");
    kv->version = el__etcd_json_int(obj, "version");
    kv->lease = el__etcd_json_int(obj, "lease");
    return 0;
}

int el__etcd_json_error(const json_t *obj, int *code, const char **msg)
{
    json_t *e = json_object_get(obj, "error");
    if (!e)
        return 0;
    if (json_is_object(e)) { /* streaming form */
        json_t *m = json_object_get(e, "message");
        *code = (int)el__etcd_json_int(e, "grpc_code");
        *msg = json_is_string(m) ? json_string_value(m) : "unknown error";
        return 1;
    }
    json_t *m = json_object_get(obj, "message");
    *code = (int)el__etcd_json_int(obj, "code");
    if (json_is_string(m))
        *msg = json_string_value(m);
    else if (json_is_string(e))
        *msg = json_string_value(e);
    else
        *msg = "unknown error";
    return 1;
}

int el__etcd_grpc_to_err(int grpc_code, const char *msg)
{
    switch (grpc_code) {
    case 3: /* InvalidArgument; auth failures come as this too */
        if (msg && (strstr(msg, "user name is empty") ||
                    strstr(msg, "authentication failed")))
            return -EACCES;
        return EL_EUSAGE;
    case 5: /* NotFound: a lease */
        return EL_ENOTFOUND;
    case 6: /* AlreadyExists */
        return -EEXIST;
    case 7:  /* PermissionDenied */
    case 16: /* Unauthenticated */
        return -EACCES;
    case 11: /* OutOfRange: compacted revision */
        return -ESTALE;
    case 8: /* ResourceExhausted: too many requests, quota */
        return -ENOSPC;
    case 9: /* FailedPrecondition */
        if (msg && strstr(msg, "lease already exists"))
            return -EEXIST;
        return EL_EUSAGE;
    case 4:  /* DeadlineExceeded */
    case 14: /* Unavailable */
        return -EHOSTUNREACH;
    default:
        return EL_EPROTO;
    }
}

int el__etcd_watch_parse(const char *line, size_t len,
                         struct el_etcd_event **evs, size_t *n, size_t *cap,
                         int *created, int *canceled, int64_t *compact_rev,
                         int64_t *revision, const char **err, json_t **hold)
{
    json_error_t jerr;
    json_t *root = json_loadb(line, len, 0, &jerr);
    int code, rc = 0;
    *err = NULL;
    if (!root)
        return EL_EPROTO;
    if (el__etcd_json_error(root, &code, err)) {
        *hold = root; /* *err points into it */
        return EL_EPROTO;
    }
    json_t *res = json_object_get(root, "result");
    if (!json_is_object(res)) {
        json_decref(root);
        return EL_EPROTO;
    }
    json_t *hdr = json_object_get(res, "header");
    if (hdr && revision)
        *revision = el__etcd_json_int(hdr, "revision");
    if (json_is_true(json_object_get(res, "created")))
        *created = 1;
    if (json_is_true(json_object_get(res, "canceled"))) {
        json_t *why = json_object_get(res, "cancel_reason");
        *canceled = 1;
        *compact_rev = el__etcd_json_int(res, "compact_revision");
        if (json_is_string(why)) { /* "etcdserver: permission denied" */
            *err = json_string_value(why);
            *hold = root;
            return 0;
        }
    }
    json_t *events = json_object_get(res, "events");
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 16;
            struct el_etcd_event *p = realloc(*evs, nc * sizeof *p);
            if (!p) {
                rc = -ENOMEM;
                break;
            }
            *evs = p;
            *cap = nc;
        }
        struct el_etcd_event *e = &(*evs)[*n];
        json_t *type = json_object_get(ev, "type");
        e->type = json_is_string(type) &&
                          strcmp(json_string_value(type), "DELETE") == 0
                      ? EL_ETCD_DELETE
                      : EL_ETCD_PUT;
        rc = el__etcd_kv_from_json(json_object_get(ev, "kv"), &e->kv);
        if (rc)
            break;
        (*n)++;
    }
    json_decref(root);
    return rc;
}
