/* test_proto.c -- the store's request parser: every op of both dialects,
 * incremental input, dialect detection and every limit. */
#include <stdint.h>
#include <string.h>

#include "elrun/err.h"
#include "store/proto.h"
#include "test.h"

struct frame {
    uint8_t b[4096];
    size_t n;
};

static void u8(struct frame *f, uint8_t v)
{
    f->b[f->n++] = v;
}
static void u64(struct frame *f, uint64_t v)
{
    memcpy(f->b + f->n, &v, 8);
    f->n += 8;
}
static void str(struct frame *f, const char *s)
{
    u64(f, strlen(s));
    memcpy(f->b + f->n, s, strlen(s));
    f->n += strlen(s);
}

static struct el_store_limits limits(void)
{
    struct el_store_limits l = {0};
    el__proto_limits_fill(&l);
    return l;
}

static int parse(const struct frame *f, enum el_dialect d, struct el_req *rq)
{
    struct el_store_limits l = limits();
    char err[160];
    return el__proto_parse(f->b, f->n, d, &l, rq, err, sizeof err);
}

TEST(proto_v1_set_is_parsed_and_needs_every_byte)
{
    struct frame f = {.n = 0};
    struct el_req rq;
    u8(&f, 0);
    str(&f, "/k1");
    str(&f, "v1");
    CHECK_EQ(parse(&f, EL_DIALECT_UNKNOWN, &rq), (int)f.n);
    CHECK_EQ(rq.op, EL_OP_SET);
    CHECK_EQ(rq.dialect, EL_DIALECT_V1);
    CHECK_MEM(rq.str[0], rq.len[0], "/k1", 3);
    CHECK_MEM(rq.str[1], rq.len[1], "v1", 2);
    /* Every strict prefix needs more bytes. */
    struct el_store_limits l = limits();
    char err[160];
    for (size_t cut = 0; cut < f.n; cut++)
        CHECK_EQ(el__proto_parse(f.b, cut, EL_DIALECT_UNKNOWN, &l, &rq, err,
                                 sizeof err),
                 0);
}

TEST(proto_validate_switches_to_v2_codes)
{
    struct frame f = {.n = 0};
    struct el_req rq;
    uint8_t v[] = {0, 0xCE, 0xF7, 0x85, 0x3C};
    memcpy(f.b, v, 5);
    f.n = 5;
    CHECK_EQ(parse(&f, EL_DIALECT_UNKNOWN, &rq), 5);
    CHECK_EQ(rq.op, EL_OP_VALIDATE);
    CHECK_EQ(rq.dialect, EL_DIALECT_V2);
    /* In V2, 1 is SET and 3 is GET; in V1, 1 is COMPARE_SET, 3 is ADD. */
    struct frame g = {.n = 0};
    u8(&g, 3);
    str(&g, "/k");
    CHECK_EQ(parse(&g, EL_DIALECT_V2, &rq), (int)g.n);
    CHECK_EQ(rq.op, EL_OP_GET);
    struct frame h = {.n = 0};
    u8(&h, 3);
    str(&h, "/k");
    u64(&h, 5);
    CHECK_EQ(parse(&h, EL_DIALECT_V1, &rq), (int)h.n);
    CHECK_EQ(rq.op, EL_OP_ADD);
    CHECK_EQ(rq.num, 5);
    /* V2-only ops. */
    struct frame p = {.n = 0};
    u8(&p, 13);
    uint32_t nonce = 77;
    memcpy(p.b + 1, &nonce, 4);
    p.n = 5;
    CHECK_EQ(parse(&p, EL_DIALECT_V2, &rq), 5);
    CHECK_EQ(rq.op, EL_OP_PING);
    CHECK_EQ(rq.u32, 77);
}

TEST(proto_partial_validate_waits_then_decides)
{
    uint8_t v[] = {0, 0xCE, 0xF7};
    struct el_store_limits l = limits();
    struct el_req rq;
    char err[160];
    CHECK_EQ(
        el__proto_parse(v, 3, EL_DIALECT_UNKNOWN, &l, &rq, err, sizeof err), 0);
    uint8_t bad[] = {0, 0xCE, 0xF7, 0x85, 0x3D};
    CHECK_EQ(el__proto_parse(bad, 5, EL_DIALECT_V2, &l, &rq, err, sizeof err),
             EL_EBADFRAME);
    CHECK(strstr(err, "magic") != NULL);
}

TEST(proto_lists_and_pairs)
{
    struct frame f = {.n = 0};
    struct el_req rq;
    u8(&f, 11); /* V2 MULTI_SET */
    u64(&f, 2);
    str(&f, "a");
    str(&f, "1");
    str(&f, "bb");
    str(&f, "22");
    CHECK_EQ(parse(&f, EL_DIALECT_V2, &rq), (int)f.n);
    CHECK_EQ(rq.op, EL_OP_MULTI_SET);
    CHECK_EQ(rq.count, 2);
    const uint8_t *cur = rq.list;
    uint64_t n;
    const uint8_t *k = el__proto_next_str(&cur, &n);
    CHECK_MEM(k, n, "a", 1);
    el__proto_next_str(&cur, &n);
    k = el__proto_next_str(&cur, &n);
    CHECK_MEM(k, n, "bb", 2);
    struct frame w = {.n = 0};
    u8(&w, 5); /* V1 WAIT */
    u64(&w, 3);
    str(&w, "x");
    str(&w, "y");
    str(&w, "z");
    CHECK_EQ(parse(&w, EL_DIALECT_V1, &rq), (int)w.n);
    CHECK_EQ(rq.op, EL_OP_WAIT);
    CHECK_EQ(rq.count, 3);
}

TEST(proto_limits_reject_before_the_body_arrives)
{
    struct el_store_limits l = {
        .max_key_len = 16, .max_value_len = 32, .max_keys_per_req = 4};
    el__proto_limits_fill(&l);
    struct el_req rq;
    char err[160];
    struct frame f = {.n = 0};
    u8(&f, 2); /* V1 GET with a 2^62-byte key: only the header is here */
    u64(&f, (uint64_t)1 << 62);
    CHECK_EQ(el__proto_parse(f.b, f.n, EL_DIALECT_V1, &l, &rq, err, sizeof err),
             EL_EBADFRAME);
    CHECK(strstr(err, "key") && strstr(err, "limit"));
    struct frame v = {.n = 0};
    u8(&v, 0); /* V1 SET with a 33-byte value */
    str(&v, "k");
    u64(&v, 33);
    CHECK_EQ(el__proto_parse(v.b, v.n, EL_DIALECT_V1, &l, &rq, err, sizeof err),
             EL_EBADFRAME);
    CHECK(strstr(err, "value"));
    struct frame c = {.n = 0};
    u8(&c, 4); /* V1 CHECK of 5 keys */
    u64(&c, 5);
    CHECK_EQ(el__proto_parse(c.b, c.n, EL_DIALECT_V1, &l, &rq, err, sizeof err),
             EL_EBADFRAME);
    CHECK(strstr(err, "5 keys"));
    struct frame m = {.n = 0};
    u8(&m, 11); /* V2 MULTI_SET with a negative count */
    u64(&m, (uint64_t)-1);
    CHECK_EQ(el__proto_parse(m.b, m.n, EL_DIALECT_V2, &l, &rq, err, sizeof err),
             EL_EBADFRAME);
}

TEST(proto_unknown_and_unsupported_ops_are_named)
{
    struct el_store_limits l = limits();
    struct el_req rq;
    char err[160];
    uint8_t watch[] = {7};
    CHECK_EQ(el__proto_parse(watch, 1, EL_DIALECT_V1, &l, &rq, err, sizeof err),
             EL_EBADFRAME);
    CHECK(strstr(err, "WATCH_KEY"));
    uint8_t queue[] = {14};
    CHECK_EQ(el__proto_parse(queue, 1, EL_DIALECT_V2, &l, &rq, err, sizeof err),
             EL_EBADFRAME);
    CHECK(strstr(err, "QUEUE"));
    uint8_t junk[] = {200, 1, 2};
    CHECK_EQ(el__proto_parse(junk, 3, EL_DIALECT_V1, &l, &rq, err, sizeof err),
             EL_EBADFRAME);
    CHECK(strstr(err, "unknown op code 200"));
}

TEST(proto_elrun_ops_parse_in_every_dialect)
{
    struct frame f = {.n = 0};
    struct el_req rq;
    u8(&f, EL_CODE_X_WATCH);
    u64(&f, 250);
    str(&f, "key");
    u8(&f, 1);
    str(&f, "old");
    for (int d = EL_DIALECT_UNKNOWN; d <= EL_DIALECT_V2; d++) {
        CHECK_EQ(parse(&f, (enum el_dialect)d, &rq), (int)f.n);
        CHECK_EQ(rq.op, EL_OP_X_WATCH);
        CHECK_EQ(rq.num, 250);
        CHECK_EQ(rq.flag, 1);
        CHECK_MEM(rq.str[1], rq.len[1], "old", 3);
    }
}
