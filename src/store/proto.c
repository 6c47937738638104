/* proto.c -- incremental parser for the store's requests (see proto.h).
 *
 * Every request is an op byte followed by fields described by a small format
 * string: k = key string, v = value string (u64 length + bytes), i = int64,
 * u = uint32, b = byte, L = u64 count + that many keys, P = int64 count +
 * that many key/value pairs.  All integers are little-endian, as PyTorch
 * sends them on every platform it supports.
 */
#include <stdio.h>
#include <string.h>

#include "elrun/err.h"
#include "store/proto.h"

struct op_desc {
    enum el_op op;
    const char *fmt;
};

/* 1.13: SET=0 CAS=1 GET=2 ADD=3 CHECK=4 WAIT=5 NUMKEYS=6 WATCH_KEY=7 DEL=8 */
static const struct op_desc v1_ops[] = {
    {EL_OP_SET, "kv"},    {EL_OP_COMPARE_SET, "kvv"}, {EL_OP_GET, "k"},
    {EL_OP_ADD, "ki"},    {EL_OP_CHECK, "L"},         {EL_OP_WAIT, "L"},
    {EL_OP_NUM_KEYS, ""}, {EL_OP_NONE, NULL},         {EL_OP_DELETE, "k"},
};

/* 2.3+: VALIDATE=0 SET=1 ... PING=13 (QUEUE_* 14..16 are not served). */
static const struct op_desc v2_ops[] = {
    {EL_OP_VALIDATE, "u"},   {EL_OP_SET, "kv"},      {EL_OP_COMPARE_SET, "kvv"},
    {EL_OP_GET, "k"},        {EL_OP_ADD, "ki"},      {EL_OP_CHECK, "L"},
    {EL_OP_WAIT, "L"},       {EL_OP_NUM_KEYS, ""},   {EL_OP_DELETE, "k"},
    {EL_OP_APPEND, "kv"},    {EL_OP_MULTI_GET, "L"}, {EL_OP_MULTI_SET, "P"},
    {EL_OP_CANCEL_WAIT, ""}, {EL_OP_PING, "u"},
};

/* elrun's own, codes 64.. in every dialect. */
static const struct op_desc x_ops[] = {
    {EL_OP_X_GET, "ik"},
    {EL_OP_X_WAIT, "iL"},
    {EL_OP_X_MULTI_GET, "iL"},
    {EL_OP_X_WATCH, "ikbv"},
    {EL_OP_X_DELETE_PREFIX, "k"},
    {EL_OP_X_ON_CLOSE_SET, "kv"},
    {EL_OP_X_TRY_GET, "k"},
    {EL_OP_X_IDLE_TIMEOUT, "i"},
    {EL_OP_X_ON_CLOSE_APPEND, "kv"},
    {EL_OP_X_AUTH_CHALLENGE, ""},
    {EL_OP_X_AUTH, "kk"},
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

void el__proto_limits_fill(struct el_store_limits *l)
{
    if (!l->max_key_len)
        l->max_key_len = 8 * 1024;
    if (!l->max_value_len)
        l->max_value_len = 64u * 1024 * 1024;
    if (!l->max_keys_per_req)
        l->max_keys_per_req = 128 * 1024;
    if (!l->max_conn_buffer)
        l->max_conn_buffer = l->max_value_len + 1024 * 1024;
    if (!l->max_total_buffer)
        l->max_total_buffer = 512u * 1024 * 1024;
    if (!l->max_total_data)
        l->max_total_data = 1024u * 1024 * 1024;
    if (!l->stall_timeout_ms)
        l->stall_timeout_ms = 60000;
    if (!l->max_conns_per_peer)
        l->max_conns_per_peer = 512;
    if (!l->fd_reserve)
        l->fd_reserve = 32;
}

const char *el__proto_op_name(enum el_op op)
{
    static const char *const names[] = {"NONE",
                                        "VALIDATE",
                                        "SET",
                                        "COMPARE_SET",
                                        "GET",
                                        "ADD",
                                        "CHECK",
                                        "WAIT",
                                        "GETNUMKEYS",
                                        "DELETE_KEY",
                                        "APPEND",
                                        "MULTI_GET",
                                        "MULTI_SET",
                                        "CANCEL_WAIT",
                                        "PING",
                                        "X_GET",
                                        "X_WAIT",
                                        "X_MULTI_GET",
                                        "X_WATCH",
                                        "X_DELETE_PREFIX",
                                        "X_ON_CLOSE_SET",
                                        "X_TRY_GET",
                                        "X_IDLE_TIMEOUT",
                                        "X_ON_CLOSE_APPEND",
                                        "X_AUTH_CHALLENGE",
                                        "X_AUTH"};
    return (unsigned)op < NELEM(names) ? names[op] : "?";
}

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

#define BAD(...)                                \
    do {                                        \
        if (errlen)                             \
            snprintf(err, errlen, __VA_ARGS__); \
        return EL_EBADFRAME;                    \
    } while (0)

/* Parse one string at *pos; 1 = done, 0 = need more, <0 = bad. */
static int take_str(const uint8_t *buf, size_t len, size_t *pos, uint64_t max,
                    const char *what, const uint8_t **s, uint64_t *slen,
                    char *err, size_t errlen)
{
    if (len - *pos < 8)
        return 0;
    uint64_t n = rd64(buf + *pos);
    if (n > max)
        BAD("%s of %llu bytes exceeds the limit of %llu", what,
            (unsigned long long)n, (unsigned long long)max);
    if (len - *pos - 8 < n)
        return 0;
    if (s) {
        *s = buf + *pos + 8;
        *slen = n;
    }
    *pos += 8 + n;
    return 1;
}

int el__proto_parse(const uint8_t *buf, size_t len, enum el_dialect dialect,
                    const struct el_store_limits *lim, struct el_req *req,
                    char *err, size_t errlen)
{
    static const uint8_t magic[4] = {0xCE, 0xF7, 0x85, 0x3C};
    const struct op_desc *d = NULL;
    if (len == 0)
        return 0;
    memset(req, 0, sizeof *req);
    uint8_t code = buf[0];
    req->code = code;
    req->frame = buf;

    if (dialect == EL_DIALECT_UNKNOWN && code == 0) {
        /* VALIDATE (2.3+) or a 1.13 SET?  A SET is at least 17 bytes and
         * its key length cannot begin with the magic, so 5 bytes decide. */
        size_t have = len - 1 < 4 ? len - 1 : 4;
        if (memcmp(buf + 1, magic, have) == 0) {
            if (have < 4)
                return 0;
            dialect = EL_DIALECT_V2;
        } else {
            dialect = EL_DIALECT_V1;
        }
    }
    if (code >= EL_CODE_X_GET && code < EL_CODE_X_GET + NELEM(x_ops)) {
        d = &x_ops[code - EL_CODE_X_GET];
    } else {
        if (dialect == EL_DIALECT_UNKNOWN)
            dialect = EL_DIALECT_V1;
        if (dialect == EL_DIALECT_V1 && code < NELEM(v1_ops))
            d = &v1_ops[code];
        else if (dialect == EL_DIALECT_V2 && code < NELEM(v2_ops))
            d = &v2_ops[code];
        if (!d || !d->fmt) {
            if (dialect == EL_DIALECT_V1 && code == 7)
                BAD("op 7 (WATCH_KEY of torch 1.13) is not supported");
            if (dialect == EL_DIALECT_V2 && code >= 14 && code <= 16)
                BAD("op %u (QUEUE_PUSH/POP/LEN) is not supported", code);
            BAD("unknown op code %u for a %s client", code,
                dialect == EL_DIALECT_V2 ? "torch 2.3+" : "torch 1.13");
        }
    }
    req->op = d->op;
    req->dialect = dialect;

    size_t pos = 1;
    int rc;
    for (const char *f = d->fmt; *f; f++) {
        switch (*f) {
        case 'k':
        case 'v': {
            const uint8_t *s;
            uint64_t n;
            rc = take_str(buf, len, &pos,
                          *f == 'k' ? lim->max_key_len : lim->max_value_len,
                          *f == 'k' ? "key" : "value", &s, &n, err, errlen);
            if (rc <= 0)
                return rc;
            req->str[req->nstr] = s;
            req->len[req->nstr] = n;
            req->nstr++;
            break;
        }
        case 'i':
            if (len - pos < 8)
                return 0;
            req->num = (int64_t)rd64(buf + pos);
            pos += 8;
            break;
        case 'u':
            if (len - pos < 4)
                return 0;
            memcpy(&req->u32, buf + pos, 4);
            pos += 4;
            break;
        case 'b':
            if (len - pos < 1)
                return 0;
            req->flag = buf[pos];
            pos += 1;
            break;
        case 'L':
        case 'P': {
            if (len - pos < 8)
                return 0;
            uint64_t n = rd64(buf + pos);
            if (*f == 'P' && (int64_t)n < 0)
                BAD("negative pair count %lld", (long long)n);
            if (n > lim->max_keys_per_req)
                BAD("%llu keys in one request exceed the limit of %llu",
                    (unsigned long long)n,
                    (unsigned long long)lim->max_keys_per_req);
            pos += 8;
            req->count = n;
            req->list = buf + pos;
            for (uint64_t i = 0; i < n; i++) {
                rc = take_str(buf, len, &pos, lim->max_key_len, "key", NULL,
                              NULL, err, errlen);
                if (rc <= 0)
                    return rc;
                if (*f == 'P') {
                    rc = take_str(buf, len, &pos, lim->max_value_len, "value",
                                  NULL, NULL, err, errlen);
                    if (rc <= 0)
                        return rc;
                }
            }
            break;
        }
        }
    }
    if (req->op == EL_OP_VALIDATE && req->u32 != EL_PROTO_MAGIC)
        BAD("VALIDATE with wrong magic 0x%08x", req->u32);
    req->frame_len = pos;
    return (int)(pos > (size_t)0x7fffffff ? EL_EBADFRAME : (int)pos);
}
