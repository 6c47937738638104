/* test_etcd.c -- the pure parts of the etcd client (src/etcd/json.c):
 * base64, prefix range ends, the gateway's JSON replies (int64 as strings,
 * omitted defaults, both error shapes) and watch stream lines, checked
 * against replies captured from etcd 3.4.23.  The client against a real
 * etcd is tests/e2e/t0600-etcd-client.sh.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "elrun/err.h"
#include "etcd/etcd_int.h"
#include "test.h"

static void b64_round(const char *in, size_t n, const char *want)
{
    char out[128];
    size_t len = el__etcd_b64_encode(in, n, out);
    CHECK_STR(out, want);
    CHECK_EQ(len, strlen(want));
    CHECK_EQ(len, el__etcd_b64_len(n));
    void *back;
    size_t blen;
    CHECK_EQ(el__etcd_b64_decode(out, len, &back, &blen), 0);
    CHECK_MEM(back, blen, in, n);
    CHECK_EQ(((char *)back)[blen], 0);
    free(back);
}

TEST(etcd_base64_vectors)
{
    /* RFC 4648 section 10 */
    b64_round("", 0, "");
    b64_round("f", 1, "Zg==");
    b64_round("fo", 2, "Zm8=");
    b64_round("foo", 3, "Zm9v");
    b64_round("foob", 4, "Zm9vYg==");
    b64_round("fooba", 5, "Zm9vYmE=");
    b64_round("foobar", 6, "Zm9vYmFy");
    b64_round("/rdzv/foo", 9, "L3JkenYvZm9v"); /* from the gateway */
    b64_round("\0", 1, "AA==");
    b64_round("\xff\xfe\xfd", 3, "//79");
}

TEST(etcd_base64_all_bytes)
{
    unsigned char in[256];
    for (int i = 0; i < 256; i++)
        in[i] = (unsigned char)i;
    for (size_t n = 0; n <= 256; n += 37) {
        char out[400];
        size_t len = el__etcd_b64_encode(in, n, out);
        void *back;
        size_t blen;
        CHECK_EQ(el__etcd_b64_decode(out, len, &back, &blen), 0);
        CHECK_MEM(back, blen, in, n);
        free(back);
    }
}

TEST(etcd_base64_bad_input)
{
    void *p;
    size_t n;
    CHECK_EQ(el__etcd_b64_decode("Zm9v!", 5, &p, &n), EL_EPROTO);
    CHECK_EQ(el__etcd_b64_decode("Z", 1, &p, &n), EL_EPROTO);
    CHECK_EQ(el__etcd_b64_decode("Zm9 v", 5, &p, &n), EL_EPROTO);
    /* padding is optional */
    CHECK_EQ(el__etcd_b64_decode("Zg", 2, &p, &n), 0);
    CHECK_MEM(p, n, "f", 1);
    free(p);
}

TEST(etcd_prefix_end)
{
    char end[16];
    size_t n = el__etcd_prefix_end("/rdzv/", end);
    CHECK_MEM(end, n, "/rdzv0", 6);
    n = el__etcd_prefix_end("a\xff", end);
    CHECK_MEM(end, n, "b", 1);
    n = el__etcd_prefix_end("\xff\xff", end);
    CHECK_MEM(end, n, "\0", 1); /* every key */
    n = el__etcd_prefix_end("", end);
    CHECK_MEM(end, n, "\0", 1);
}

static json_t *parse(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    if (!j)
        TEST_FAIL_("bad test JSON: %s", e.text);
    return j;
}

TEST(etcd_json_int64_strings)
{
    json_t *j = parse("{\"a\":\"9223372036854775807\",\"b\":5,\"c\":\"-1\"}");
    CHECK(el__etcd_json_int(j, "a") == INT64_MAX);
    CHECK_EQ(el__etcd_json_int(j, "b"), 5);
    CHECK_EQ(el__etcd_json_int(j, "c"), -1);
    CHECK_EQ(el__etcd_json_int(j, "missing"), 0); /* omitted default */
    json_decref(j);
}

TEST(etcd_kv_from_range_reply)
{
    json_t *r = parse(
        "{\"header\":{\"cluster_id\":\"324952591200643719\",\"member_id\":"
        "\"3319814642761637952\",\"revision\":\"2\",\"raft_term\":\"2\"},"
        "\"kvs\":[{\"key\":\"L3JkenYvZm9v\",\"create_revision\":\"2\","
        "\"mod_revision\":\"2\",\"version\":\"1\",\"value\":\"YmFy\","
        "\"lease\":\"2324035705602623249\"}],\"count\":\"1\"}");
    struct el_etcd_kv kv;
    CHECK_EQ(el__etcd_kv_from_json(json_array_get(json_object_get(r, "kvs"), 0),
                                   &kv),
             0);
    CHECK_STR(kv.key, "/rdzv/foo");
    CHECK_STR(kv.value, "bar");
    CHECK_EQ(kv.value_len, 3);
    CHECK_EQ(kv.create_revision, 2);
    CHECK_EQ(kv.mod_revision, 2);
    CHECK_EQ(kv.version, 1);
    CHECK(kv.lease == 2324035705602623249LL);
    el_etcd_kv_clear(&kv);
    CHECK(kv.key == NULL && kv.value == NULL);
    json_decref(r);

    /* an empty value is omitted by the gateway */
    r = parse("{\"key\":\"YQ==\",\"create_revision\":\"3\",\"mod_revision\":"
              "\"3\",\"version\":\"1\"}");
    CHECK_EQ(el__etcd_kv_from_json(r, &kv), 0);
    CHECK_STR(kv.key, "a");
    CHECK_EQ(kv.value_len, 0);
    CHECK_STR(kv.value, "");
    el_etcd_kv_clear(&kv);
    json_decref(r);

    r = parse("{\"key\":\"***\"}");
    CHECK_EQ(el__etcd_kv_from_json(r, &kv), EL_EPROTO);
    json_decref(r);
}

TEST(etcd_error_replies)
{
    int code;
    const char *msg;
    json_t *r = parse("{\"error\":\"etcdserver: requested lease not found\","
                      "\"message\":\"etcdserver: requested lease not found\","
                      "\"code\":5}");
    CHECK_EQ(el__etcd_json_error(r, &code, &msg), 1);
    CHECK_EQ(code, 5);
    CHECK_STR(msg, "etcdserver: requested lease not found");
    CHECK_EQ(el__etcd_grpc_to_err(code, msg), EL_ENOTFOUND);
    json_decref(r);

    r = parse("{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":"
              "\"etcdserver: no leader\",\"http_status\":\"Service "
              "Unavailable\"}}");
    CHECK_EQ(el__etcd_json_error(r, &code, &msg), 1);
    CHECK_EQ(code, 14);
    CHECK_STR(msg, "etcdserver: no leader");
    json_decref(r);

    r = parse("{\"header\":{\"revision\":\"3\"},\"succeeded\":true}");
    CHECK_EQ(el__etcd_json_error(r, &code, &msg), 0);
    json_decref(r);

    CHECK_EQ(el__etcd_grpc_to_err(7, "etcdserver: permission denied"), -EACCES);
    CHECK_EQ(el__etcd_grpc_to_err(16, "invalid auth token"), -EACCES);
    CHECK_EQ(el__etcd_grpc_to_err(11, "mvcc: required revision has been "
                                      "compacted"),
             -ESTALE);
    CHECK_EQ(el__etcd_grpc_to_err(3, "bad"), EL_EUSAGE);
    CHECK_EQ(el__etcd_grpc_to_err(9, "etcdserver: lease already exists"),
             -EEXIST);
}

TEST(etcd_watch_lines)
{
    struct el_etcd_event *evs = NULL;
    size_t n = 0, cap = 0;
    int created = 0, canceled = 0;
    int64_t compact = 0, rev = 0;
    const char *err;
    json_t *hold = NULL;
    const char *l1 =
        "{\"result\":{\"header\":{\"cluster_id\":\"1\",\"revision\":"
        "\"7\",\"raft_term\":\"2\"},\"created\":true}}";
    CHECK_EQ(el__etcd_watch_parse(l1, strlen(l1), &evs, &n, &cap, &created,
                                  &canceled, &compact, &rev, &err, &hold),
             0);
    CHECK_EQ(created, 1);
    CHECK_EQ(rev, 7);
    CHECK_EQ(n, 0);

    const char *l2 =
        "{\"result\":{\"header\":{\"revision\":\"9\"},\"events\":[{\"kv\":{"
        "\"key\":\"L3JkenYvdzE=\",\"create_revision\":\"8\",\"mod_revision\":"
        "\"8\",\"version\":\"1\",\"value\":\"aGVsbG8=\"}},{\"type\":\"DELETE\","
        "\"kv\":{\"key\":\"L3JkenYvdzE=\",\"mod_revision\":\"9\"}}]}}";
    CHECK_EQ(el__etcd_watch_parse(l2, strlen(l2), &evs, &n, &cap, &created,
                                  &canceled, &compact, &rev, &err, &hold),
             0);
    CHECK_EQ(n, 2);
    CHECK_EQ(evs[0].type, EL_ETCD_PUT);
    CHECK_STR(evs[0].kv.key, "/rdzv/w1");
    CHECK_STR(evs[0].kv.value, "hello");
    CHECK_EQ(evs[0].kv.mod_revision, 8);
    CHECK_EQ(evs[1].type, EL_ETCD_DELETE);
    CHECK_STR(evs[1].kv.key, "/rdzv/w1");
    CHECK_EQ(evs[1].kv.value_len, 0);
    CHECK_EQ(evs[1].kv.mod_revision, 9);
    CHECK_EQ(rev, 9);
    el_etcd_events_free(evs, n);

    const char *l3 = "{\"result\":{\"header\":{\"revision\":\"9\"},"
                     "\"canceled\":true,\"compact_revision\":\"5\"}}";
    CHECK_EQ(el__etcd_watch_parse(l3, strlen(l3), &evs, &n, &cap, &created,
                                  &canceled, &compact, &rev, &err, &hold),
             0);
    CHECK_EQ(canceled, 1);
    CHECK_EQ(compact, 5);

    const char *l5 = "{\"result\":{\"header\":{\"revision\":\"9\"},"
                     "\"canceled\":true,\"cancel_reason\":\"etcdserver: "
                     "permission denied\"}}";
    canceled = 0;
    CHECK_EQ(el__etcd_watch_parse(l5, strlen(l5), &evs, &n, &cap, &created,
                                  &canceled, &compact, &rev, &err, &hold),
             0);
    CHECK_EQ(canceled, 1);
    CHECK_STR(err, "etcdserver: permission denied");
    json_decref(hold);
    hold = NULL;

    const char *l4 = "{\"error\":{\"grpc_code\":14,\"message\":"
                     "\"etcdserver: no leader\"}}";
    CHECK_EQ(el__etcd_watch_parse(l4, strlen(l4), &evs, &n, &cap, &created,
                                  &canceled, &compact, &rev, &err, &hold),
             EL_EPROTO);
    CHECK_STR(err, "etcdserver: no leader");
    json_decref(hold);

    CHECK_EQ(el__etcd_watch_parse("{\"resu", 6, &evs, &n, &cap, &created,
                                  &canceled, &compact, &rev, &err, &hold),
             EL_EPROTO);
}

TEST(etcd_open_parses_endpoints)
{
    struct el_etcd *c;
    char eb[256];
    struct el_etcd_opts o = {.endpoints = " 10.0.0.1:2379, http://h2:2380/,"
                                          "https://h3:2381"};
    CHECK_EQ(el_etcd_open(&c, &o, eb, sizeof eb), 0);
    CHECK_EQ(c->nm, 3);
    CHECK_STR(c->m[0].url, "http://10.0.0.1:2379");
    CHECK_STR(c->m[1].url, "http://h2:2380");
    CHECK_STR(c->m[2].url, "https://h3:2381");
    CHECK_STR(el_etcd_endpoint(c), "http://10.0.0.1:2379");
    /* the list stays whole: the keeper opens its own client from it */
    CHECK_STR(c->opts.endpoints, o.endpoints);
    el_etcd_close(c);

    o = (struct el_etcd_opts){
        .endpoints = "a:1,b:2", .protocol = "https", .cacert = "/ca.pem"};
    CHECK_EQ(el_etcd_open(&c, &o, eb, sizeof eb), 0);
    CHECK_STR(c->m[1].url, "https://b:2");
    el_etcd_close(c);

    const char *bad[] = {"",          "nohost",          "h:", ":1", "h:12x",
                         "ftp://h:1", "http://h:1/path", ","};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o = (struct el_etcd_opts){.endpoints = bad[i]};
        CHECK_EQ(el_etcd_open(&c, &o, eb, sizeof eb), EL_EUSAGE);
        CHECK(eb[0] != '\0');
    }
    o = (struct el_etcd_opts){.endpoints = "h:1", .cacert = "/ca.pem"};
    CHECK_EQ(el_etcd_open(&c, &o, eb, sizeof eb), EL_EUSAGE);
    CHECK(strstr(eb, "https") != NULL);
    o = (struct el_etcd_opts){.endpoints = "https://h:1", .cert = "/c.pem"};
    CHECK_EQ(el_etcd_open(&c, &o, eb, sizeof eb), EL_EUSAGE);
    o = (struct el_etcd_opts){.endpoints = "h:1", .protocol = "grpc"};
    CHECK_EQ(el_etcd_open(&c, &o, eb, sizeof eb), EL_EUSAGE);
}

/* Each test runs in a fresh forked process, so libcurl is not loaded yet. */
TEST(etcd_open_without_libcurl_says_so)
{
    struct el_etcd *c = NULL;
    char eb[512];
    struct el_etcd_opts o = {.endpoints = "127.0.0.1:2379"};
    setenv("ELRUN_LIBCURL", "/nonexistent/libcurl.so.4", 1);
    CHECK_EQ(el_etcd_open(&c, &o, eb, sizeof eb), -ELIBACC);
    CHECK(c == NULL);
    CHECK(strstr(eb, "cannot load /nonexistent/libcurl.so.4 (") != NULL);
    CHECK(strstr(eb, "need libcurl; install it") != NULL);
    /* the first result stands for the life of the process */
    unsetenv("ELRUN_LIBCURL");
    CHECK_EQ(el_etcd_open(&c, &o, NULL, 0), -ELIBACC);
}

TEST(etcd_open_loads_libcurl_on_first_use)
{
    struct el_etcd *c = NULL;
    char eb[256];
    struct el_etcd_opts o = {.endpoints = "127.0.0.1:2379"};
    CHECK(el__curl.easy_init == NULL);
    CHECK_EQ(el_etcd_open(&c, &o, eb, sizeof eb), 0);
    CHECK(el__curl.easy_init != NULL && el__curl.multi_poll != NULL);
    el_etcd_close(c);
}
