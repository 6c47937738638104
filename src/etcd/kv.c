/* kv.c -- the key-value calls of the etcd client: put, get, range by
 * prefix, delete (one key or a prefix), compare-and-set as one transaction
 * (POST /v3/kv/txn), and an atomic ADD built on it.  See include/elrun/etcd.h
 * for the contracts and docs/ETCD.md for the gateway's JSON.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elrun/err.h"
#include "etcd/etcd_int.h"

/* {"key": b64(key)} plus, for a prefix, "range_end". */
static json_t *key_obj(const char *key, int prefix)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "key", el__etcd_json_b64(key, strlen(key)));
    if (prefix) {
        char *end = malloc(strlen(key) + 2);
        if (!end) {
            json_decref(o);
            return NULL;
        }
        size_t n = el__etcd_prefix_end(key, end);
        json_object_set_new(o, "range_end", el__etcd_json_b64(end, n));
        free(end);
    }
    return o;
}

static json_t *int_str(int64_t v)
{
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, v);
    return json_string(b);
}

static int64_t header_rev(const json_t *r)
{
    return el__etcd_json_int(json_object_get(r, "header"), "revision");
}

int el_etcd_put(struct el_etcd *c, const char *key, const void *val, size_t len,
                int64_t lease, int64_t *revision)
{
    if (!key || !*key || (!val && len))
        return el__etcd_fail(c, EL_EUSAGE, "etcd put: empty key or no value");
    json_t *b = key_obj(key, 0), *r;
    if (!b)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    json_object_set_new(b, "value", el__etcd_json_b64(val ? val : "", len));
    if (lease)
        json_object_set_new(b, "lease", int_str(lease));
    int rc = el__etcd_call(c, "/v3/kv/put", b, EL_ETCD_RETRY_ALWAYS, &r, NULL);
    if (rc) {
        el__etcd_context(c, rc, "put", key);
        if (rc == EL_ENOTFOUND)
            el__etcd_fail(c, rc,
                          "etcd put %s: lease %" PRId64
                          " not found (expired or revoked)",
                          key, lease);
        return rc;
    }
    if (revision)
        *revision = header_rev(r);
    json_decref(r);
    return 0;
}

int el_etcd_get_kv(struct el_etcd *c, const char *key, struct el_etcd_kv *kv,
                   int64_t *revision)
{
    memset(kv, 0, sizeof *kv);
    if (!key || !*key)
        return el__etcd_fail(c, EL_EUSAGE, "etcd get: empty key");
    json_t *b = key_obj(key, 0), *r;
    if (!b)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    int rc =
        el__etcd_call(c, "/v3/kv/range", b, EL_ETCD_RETRY_ALWAYS, &r, NULL);
    if (rc)
        return el__etcd_context(c, rc, "get", key);
    if (revision)
        *revision = header_rev(r);
    json_t *kvs = json_object_get(r, "kvs");
    if (json_array_size(kvs) == 0)
        rc = el__etcd_fail(c, EL_ENOTFOUND, "etcd get: no key %s", key);
    else if ((rc = el__etcd_kv_from_json(json_array_get(kvs, 0), kv)))
        el__etcd_fail(c, rc, "etcd get %s: malformed reply", key);
    json_decref(r);
    return rc;
}

int el_etcd_get(struct el_etcd *c, const char *key, void **val, size_t *len,
                int64_t *mod_revision)
{
    struct el_etcd_kv kv;
    int rc = el_etcd_get_kv(c, key, &kv, NULL);
    if (rc)
        return rc;
    if (mod_revision)
        *mod_revision = kv.mod_revision;
    if (len)
        *len = kv.value_len;
    if (val) {
        *val = kv.value;
        kv.value = NULL;
    }
    el_etcd_kv_clear(&kv);
    return 0;
}

int el_etcd_range_prefix(struct el_etcd *c, const char *prefix,
                         struct el_etcd_kv **kvs, size_t *n, int64_t *revision)
{
    *kvs = NULL;
    *n = 0;
    if (!prefix)
        return el__etcd_fail(c, EL_EUSAGE, "etcd range: no prefix");
    json_t *b = key_obj(prefix, 1), *r;
    if (!b)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    int rc =
        el__etcd_call(c, "/v3/kv/range", b, EL_ETCD_RETRY_ALWAYS, &r, NULL);
    if (rc)
        return el__etcd_context(c, rc, "range", prefix);
    if (revision)
        *revision = header_rev(r);
    json_t *arr = json_object_get(r, "kvs");
    size_t cnt = json_array_size(arr);
    if (cnt) {
        struct el_etcd_kv *out = calloc(cnt, sizeof *out);
        if (!out) {
            json_decref(r);
            return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
        }
        for (size_t i = 0; i < cnt; i++) {
            rc = el__etcd_kv_from_json(json_array_get(arr, i), &out[i]);
            if (rc) {
                el_etcd_kvs_free(out, i);
                json_decref(r);
                return el__etcd_fail(c, rc, "etcd range %s: malformed reply",
                                     prefix);
            }
        }
        *kvs = out;
        *n = cnt;
    }
    json_decref(r);
    return 0;
}

int el_etcd_count_prefix(struct el_etcd *c, const char *prefix, int64_t *count,
                         int64_t *revision)
{
    *count = 0;
    if (!prefix)
        return el__etcd_fail(c, EL_EUSAGE, "etcd count: no prefix");
    json_t *b = key_obj(prefix, 1), *r;
    if (!b)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    json_object_set_new(b, "count_only", json_true());
    int rc =
        el__etcd_call(c, "/v3/kv/range", b, EL_ETCD_RETRY_ALWAYS, &r, NULL);
    if (rc)
        return el__etcd_context(c, rc, "count", prefix);
    if (revision)
        *revision = header_rev(r);
    *count = el__etcd_json_int(r, "count");
    json_decref(r);
    return 0;
}

static int delete_range(struct el_etcd *c, const char *key, int prefix,
                        int64_t *deleted)
{
    json_t *b = key_obj(key, prefix), *r;
    if (!b)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    int rc = el__etcd_call(c, "/v3/kv/deleterange", b, EL_ETCD_RETRY_ALWAYS, &r,
                           NULL);
    if (rc)
        return el__etcd_context(c, rc, prefix ? "delete prefix" : "delete",
                                key);
    if (deleted)
        *deleted = el__etcd_json_int(r, "deleted");
    json_decref(r);
    return 0;
}

int el_etcd_delete(struct el_etcd *c, const char *key, int64_t *deleted)
{
    if (!key || !*key)
        return el__etcd_fail(c, EL_EUSAGE, "etcd delete: empty key");
    return delete_range(c, key, 0, deleted);
}

int el_etcd_delete_prefix(struct el_etcd *c, const char *prefix,
                          int64_t *deleted)
{
    if (!prefix || !*prefix)
        return el__etcd_fail(c, EL_EUSAGE,
                             "etcd delete_prefix: refusing an empty prefix");
    return delete_range(c, prefix, 1, deleted);
}

int el_etcd_compact(struct el_etcd *c, int64_t revision)
{
    json_t *b = json_pack("{s:o}", "revision", int_str(revision)), *r;
    if (!b)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    int rc = el__etcd_call(c, "/v3/kv/compaction", b, EL_ETCD_RETRY_ALWAYS, &r,
                           NULL);
    if (rc == -ESTALE)
        return 0; /* already compacted past it */
    if (rc)
        return rc;
    json_decref(r);
    return 0;
}

/* ---- transactions ---- */

/* ---- general transactions ---- */

static json_t *cmp_json(const struct el_etcd_cmp *m)
{
    json_t *o = key_obj(m->key, 0);
    if (!o)
        return NULL;
    switch (m->cond) {
    case EL_ETCD_IF_ABSENT:
        json_object_set_new(o, "target", json_string("CREATE"));
        json_object_set_new(o, "create_revision", json_string("0"));
        break;
    case EL_ETCD_IF_VALUE:
        json_object_set_new(o, "target", json_string("VALUE"));
        json_object_set_new(
            o, "value",
            el__etcd_json_b64(m->value ? m->value : "", m->value_len));
        break;
    case EL_ETCD_IF_MOD:
        json_object_set_new(o, "target", json_string("MOD"));
        json_object_set_new(o, "mod_revision", int_str(m->mod_revision));
        break;
    }
    json_object_set_new(o, "result", json_string("EQUAL"));
    return o;
}

static json_t *op_json(const struct el_etcd_op *op)
{
    json_t *o = key_obj(op->key, op->type == EL_ETCD_OP_DELETE_PREFIX);
    if (!o)
        return NULL;
    if (op->type == EL_ETCD_OP_PUT) {
        json_object_set_new(
            o, "value",
            el__etcd_json_b64(op->value ? op->value : "", op->value_len));
        if (op->lease)
            json_object_set_new(o, "lease", int_str(op->lease));
        return json_pack("{s:o}", "request_put", o);
    }
    return json_pack("{s:o}", "request_delete_range", o);
}

static int ops_ok(const struct el_etcd_op *ops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!ops[i].key || !*ops[i].key ||
            ops[i].type > EL_ETCD_OP_DELETE_PREFIX)
            return 0;
    return 1;
}

int el_etcd_txn(struct el_etcd *c, const struct el_etcd_cmp *cmps, size_t ncmp,
                const struct el_etcd_op *then, size_t nthen,
                const struct el_etcd_op *otherwise, size_t notherwise,
                int *succeeded, int64_t *revision)
{
    *succeeded = 0;
    for (size_t i = 0; i < ncmp; i++)
        if (!cmps[i].key || !*cmps[i].key)
            return el__etcd_fail(c, EL_EUSAGE, "etcd txn: empty key");
    if (!ops_ok(then, nthen) || !ops_ok(otherwise, notherwise))
        return el__etcd_fail(c, EL_EUSAGE, "etcd txn: bad op (empty key?)");
    json_t *b = json_object(), *jc = json_array(), *js = json_array(),
           *jf = json_array();
    int bad = !b || !jc || !js || !jf;
    for (size_t i = 0; !bad && i < ncmp; i++)
        bad = json_array_append_new(jc, cmp_json(&cmps[i])) != 0;
    for (size_t i = 0; !bad && i < nthen; i++)
        bad = json_array_append_new(js, op_json(&then[i])) != 0;
    for (size_t i = 0; !bad && i < notherwise; i++)
        bad = json_array_append_new(jf, op_json(&otherwise[i])) != 0;
    if (bad) {
        json_decref(b);
        json_decref(jc);
        json_decref(js);
        json_decref(jf);
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    }
    json_object_set_new(b, "compare", jc);
    json_object_set_new(b, "success", js);
    json_object_set_new(b, "failure", jf);
    json_t *r;
    int rc = el__etcd_call(c, "/v3/kv/txn", b, EL_ETCD_RETRY_NEVER, &r, NULL);
    if (rc)
        return el__etcd_context(c, rc, "txn on",
                                ncmp    ? cmps[0].key
                                : nthen ? then[0].key
                                        : "(nothing)");
    *succeeded = json_is_true(json_object_get(r, "succeeded"));
    if (revision)
        *revision = header_rev(r);
    json_decref(r);
    return 0;
}

/* The body of el_etcd_cas: the compare, the write (or delete), and in both
 * branches a read of the key, so the caller learns the revision it wrote
 * or the value that made the compare fail. */
static json_t *txn_body(const char *key, const struct el_etcd_cas *cas)
{
    struct el_etcd_cmp m = {.key = key,
                            .cond = cas->cond,
                            .value = cas->expected,
                            .value_len = cas->expected_len,
                            .mod_revision = cas->mod_revision};
    struct el_etcd_op op = {.type = cas->remove ? EL_ETCD_OP_DELETE
                                                : EL_ETCD_OP_PUT,
                            .key = key,
                            .value = cas->desired,
                            .value_len = cas->desired_len,
                            .lease = cas->lease};
    return json_pack("{s:[o],s:[o,{s:o}],s:[{s:o}]}", "compare", cmp_json(&m),
                     "success", op_json(&op), "request_range", key_obj(key, 0),
                     "failure", "request_range", key_obj(key, 0));
}

/* The kv of the last response_range of a txn reply (cur->key NULL when the
 * key does not exist). */
static int txn_read_back(const json_t *r, struct el_etcd_kv *cur)
{
    json_t *resps = json_object_get(r, "responses");
    size_t n = json_array_size(resps);
    memset(cur, 0, sizeof *cur);
    if (n == 0)
        return EL_EPROTO;
    json_t *rr =
        json_object_get(json_array_get(resps, n - 1), "response_range");
    if (!rr)
        return EL_EPROTO;
    json_t *kvs = json_object_get(rr, "kvs");
    if (json_array_size(kvs) == 0)
        return 0;
    return el__etcd_kv_from_json(json_array_get(kvs, 0), cur);
}

static int cas_call(struct el_etcd *c, const char *key,
                    const struct el_etcd_cas *cas, enum el_etcd_retry retry,
                    int *succeeded, struct el_etcd_kv *cur)
{
    struct el_etcd_kv tmp;
    int ambiguous = 0, rc;
    json_t *r;
    if (!cur)
        cur = &tmp;
    memset(cur, 0, sizeof *cur);
    *succeeded = 0;
    if (!key || !*key || !cas)
        return el__etcd_fail(c, EL_EUSAGE, "etcd cas: empty key");
    json_t *b = txn_body(key, cas);
    if (!b)
        return el__etcd_fail(c, -ENOMEM, "etcd: out of memory");
    rc = el__etcd_call(c, "/v3/kv/txn", b, retry, &r, &ambiguous);
    if (rc) {
        el__etcd_context(c, rc, "cas", key);
        if (rc == EL_ENOTFOUND)
            el__etcd_fail(c, rc,
                          "etcd cas %s: lease %" PRId64
                          " not found (expired or revoked)",
                          key, cas->lease);
        return rc;
    }
    *succeeded = json_is_true(json_object_get(r, "succeeded"));
    rc = txn_read_back(r, cur);
    json_decref(r);
    if (rc)
        return el__etcd_fail(c, rc, "etcd cas %s: malformed reply", key);
    if (ambiguous && !*succeeded) {
        /* An earlier attempt may have been applied: if the key is exactly
         * what we wanted to write, it was ours (see etcd.h). */
        if (cas->remove)
            *succeeded = cur->key == NULL;
        else
            *succeeded =
                cur->key && cur->value_len == cas->desired_len &&
                (cas->desired_len == 0 ||
                 memcmp(cur->value, cas->desired, cas->desired_len) == 0);
    }
    if (cur == &tmp)
        el_etcd_kv_clear(&tmp);
    return 0;
}

int el_etcd_cas(struct el_etcd *c, const char *key,
                const struct el_etcd_cas *cas, int *succeeded,
                struct el_etcd_kv *cur)
{
    return cas_call(c, key, cas, EL_ETCD_RETRY_FLAG, succeeded, cur);
}

static int parse_counter(const struct el_etcd_kv *kv, int64_t *v)
{
    if (!kv->key || kv->value_len == 0) {
        *v = 0;
        return 0;
    }
    char *end;
    errno = 0;
    long long x = strtoll(kv->value, &end, 10);
    if (errno || end == (char *)kv->value ||
        end != (char *)kv->value + kv->value_len)
        return EL_EPROTO;
    *v = x;
    return 0;
}

int el_etcd_add(struct el_etcd *c, const char *key, int64_t delta,
                int64_t *result)
{
    struct el_etcd_kv cur;
    int rc = el_etcd_get_kv(c, key, &cur, NULL);
    if (rc == EL_ENOTFOUND)
        rc = 0; /* cur is zeroed: absent, mod_revision 0 */
    if (rc)
        return rc;
    for (;;) {
        int64_t v;
        if (parse_counter(&cur, &v)) {
            el_etcd_kv_clear(&cur);
            return el__etcd_fail(c, EL_EPROTO,
                                 "etcd add %s: value is not a decimal integer",
                                 key);
        }
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%" PRId64, v + delta);
        struct el_etcd_cas cas = {
            .cond = EL_ETCD_IF_MOD,
            .mod_revision = cur.mod_revision,
            .desired = buf,
            .desired_len = (size_t)n,
            .lease = cur.lease,
        };
        int ok;
        el_etcd_kv_clear(&cur);
        rc = cas_call(c, key, &cas, EL_ETCD_RETRY_NEVER, &ok, &cur);
        if (rc)
            return rc;
        if (ok) {
            el_etcd_kv_clear(&cur);
            if (result)
                *result = v + delta;
            return 0;
        }
        /* Someone else wrote in between: cur is the value that beat us. */
    }
}
