/* test_store_auth.c -- the job secret: agents that prove it write the
 * rendezvous keys (/elrun/...), nobody else does (every write op, the close
 * hooks, prefix deletes that would reach them), PyTorch workers keep their
 * own keys, a wrong secret or a replayed answer is refused, and a secret
 * file is read with care. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/proto.h"
#include "store_util.h"

static const char SECRET[] = "0123456789abcdef-job-secret";
#define SLEN (sizeof SECRET - 1)

static struct el_store_server *start_secret(void)
{
    struct el_store_server_opts o = {
        .host = "127.0.0.1", .secret = SECRET, .secret_len = SLEN};
    struct el_store_server *srv = NULL;
    CHECK_OK(el_store_server_start(&srv, &o));
    return srv;
}

static struct el_store *agent(struct el_store_server *srv)
{
    struct el_store *s = client(srv);
    CHECK_OK(el_store_auth(s, SECRET, SLEN));
    return s;
}

TEST(store_secret_agents_write_the_rendezvous_keys)
{
    struct el_store_server *srv = start_secret();
    struct el_store *a = agent(srv);
    CHECK_OK(el_store_set(a, "/elrun/job/round", "0", 1));
    CHECK_OK(el_store_add(a, "/elrun/job/r0/joined", 1, NULL));
    CHECK_OK(el_store_append(a, "/elrun/job/events", "round 0\n", 8));
    CHECK_OK(el_store_on_close_append(a, "/elrun/job/events", "dead a\n", 7));
    int64_t n;
    CHECK_OK(el_store_delete_prefix(a, "/elrun/job/r0/", &n));
    CHECK_EQ(n, 1);
    check_value(a, "/elrun/job/round", "0");
    el_store_close(a);
    el_store_server_close(srv);
}

/* Run one write on a fresh unauthenticated connection: it must be refused
 * (the connection closed), changing nothing. */
typedef int (*write_fn)(struct el_store *s);
static int w_set(struct el_store *s)
{
    return el_store_set(s, "/elrun/job/closed", "ok", 2);
}
static int w_cas(struct el_store *s)
{
    return el_store_compare_set(s, "/elrun/job/closed", "", 0, "ok", 2, NULL,
                                NULL);
}
static int w_add(struct el_store *s)
{
    return el_store_add(s, "/elrun/job/r0/joined", 1, NULL);
}
static int w_app(struct el_store *s)
{
    return el_store_append(s, "/elrun/job/events", "dead x\n", 7);
}
static int w_del(struct el_store *s)
{
    return el_store_delete(s, "/elrun/job/round", NULL);
}
static int w_pfx(struct el_store *s)
{
    return el_store_delete_prefix(s, "/", NULL);
}
static int w_pfx2(struct el_store *s)
{
    return el_store_delete_prefix(s, "/elrun/job/", NULL);
}
static int w_hook(struct el_store *s)
{
    return el_store_on_close_append(s, "/elrun/job/events", "dead x\n", 7);
}
static int w_hook2(struct el_store *s)
{
    return el_store_on_close_set(s, "/elrun/job/closed", "ok", 2);
}
static int w_multi(struct el_store *s)
{
    const char *k[] = {"/worker/attempt_0/a", "/elrun/job/closed"};
    const void *v[] = {"1", "ok"};
    size_t l[] = {1, 2};
    return el_store_multi_set(s, k, v, l, 2);
}

TEST(store_secret_outsiders_cannot_write_the_rendezvous_keys)
{
    struct el_store_server *srv = start_secret();
    struct el_store *a = agent(srv);
    CHECK_OK(el_store_set(a, "/elrun/job/round", "0", 1));
    CHECK_OK(el_store_set(a, "/elrun/job/events", "round 0\n", 8));
    write_fn fns[] = {w_set, w_cas,  w_add,  w_app,   w_del,
                      w_pfx, w_pfx2, w_hook, w_hook2, w_multi};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        struct el_store *o = client(srv);
        fns[i](o); /* a write without a reply fails only later */
        CHECK(el_store_ping(o) < 0);
        el_store_close(o); /* a hook would fire now */
    }
    /* Nothing changed; the agent's connection was never disturbed. */
    CHECK_OK(el_store_ping(a));
    check_value(a, "/elrun/job/round", "0");
    check_value(a, "/elrun/job/events", "round 0\n");
    CHECK_EQ(el_store_try_get(a, "/elrun/job/closed", NULL, NULL),
             EL_ENOTFOUND);
    CHECK_EQ(el_store_try_get(a, "/elrun/job/r0/joined", NULL, NULL),
             EL_ENOTFOUND);
    CHECK_EQ(el_store_try_get(a, "/worker/attempt_0/a", NULL, NULL),
             EL_ENOTFOUND); /* MULTI_SET is all or nothing */
    struct el_store_server_stats st;
    el_store_server_stats(srv, &st);
    CHECK_EQ(st.rejected, 10);
    el_store_close(a);
    el_store_server_close(srv);
}

TEST(store_secret_workers_keep_their_own_keys)
{
    struct el_store_server *srv = start_secret();
    struct el_store *a = agent(srv), *w = client(srv);
    CHECK_OK(el_store_set(a, "/elrun/job/round", "3", 1));
    /* What PyTorch workers write: init/, /worker/attempt_N/..., keys of
     * their own; they may read the rendezvous state. */
    CHECK_OK(el_store_add(w, "init/", 1, NULL));
    CHECK_OK(el_store_set(w, "//worker/attempt_3/rank0", "x", 1));
    CHECK_OK(el_store_set(w, "/worker/attempt_3/default_pg/0", "y", 1));
    CHECK_OK(el_store_set(w, "/my_key", "z", 1));
    CHECK_OK(el_store_set(w, "/elrunx", "not the prefix", 14));
    CHECK_OK(el_store_delete_prefix(w, "/worker/attempt_3/", NULL));
    check_value(w, "/elrun/job/round", "3");
    CHECK_OK(el_store_ping(w));
    el_store_close(w);
    el_store_close(a);
    el_store_server_close(srv);
}

TEST(store_secret_a_wrong_secret_is_refused)
{
    struct el_store_server *srv = start_secret();
    struct el_store *o = client(srv);
    CHECK_EQ(el_store_auth(o, "another-secret-of-16", 20), -EACCES);
    CHECK(strstr(el_store_errmsg(o), "differ"));
    CHECK(el_store_ping(o) < 0);
    el_store_close(o);
    el_store_server_close(srv);
}

TEST(store_secret_a_side_with_a_secret_refuses_a_store_without_one)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *s = client(srv);
    CHECK_EQ(el_store_auth(s, SECRET, SLEN), -EACCES);
    CHECK(strstr(el_store_errmsg(s), "no job secret"));
    el_store_close(s);
    el_store_server_close(srv);
}

/* X_AUTH_CHALLENGE on a raw connection: the nonce. */
static void raw_challenge(int fd, uint8_t nonce[EL_AUTH_NONCE])
{
    uint8_t op = EL_CODE_X_AUTH_CHALLENGE;
    uint64_t n = 0;
    raw_send(fd, &op, 1);
    CHECK(recv(fd, &n, 8, MSG_WAITALL) == 8);
    CHECK_EQ(n, EL_AUTH_NONCE);
    CHECK(recv(fd, nonce, EL_AUTH_NONCE, MSG_WAITALL) == EL_AUTH_NONCE);
}

static void raw_answer(int fd, const uint8_t mac[EL_AUTH_MAC])
{
    uint8_t req[1 + 8 + EL_AUTH_MAC + 8 + 4] = {EL_CODE_X_AUTH};
    uint64_t n = EL_AUTH_MAC;
    memcpy(req + 1, &n, 8);
    memcpy(req + 9, mac, EL_AUTH_MAC);
    n = 4;
    memcpy(req + 9 + EL_AUTH_MAC, &n, 8);
    memcpy(req + 17 + EL_AUTH_MAC, "abcd", 4);
    raw_send(fd, req, sizeof req);
}

TEST(store_secret_an_answer_is_good_for_its_own_nonce_only)
{
    struct el_store_server *srv = start_secret();
    int a = raw_connect(srv), b = raw_connect(srv);
    uint8_t na[EL_AUTH_NONCE], nb[EL_AUTH_NONCE], mac[EL_AUTH_MAC];
    raw_challenge(a, na);
    raw_challenge(b, nb);
    CHECK(memcmp(na, nb, EL_AUTH_NONCE) != 0);
    /* An eavesdropper replays a's answer on b: refused. */
    el__auth_mac(SECRET, SLEN, EL_AUTH_CLIENT_TAG, na, EL_AUTH_NONCE, NULL, 0,
                 mac);
    raw_answer(b, mac);
    uint8_t st = 0;
    CHECK(recv(b, &st, 1, MSG_WAITALL) == 1);
    CHECK_EQ(st, 1);
    CHECK(closed_by_server(b, 2000));
    /* The same answer on a is accepted, with the server's proof. */
    raw_answer(a, mac);
    CHECK(recv(a, &st, 1, MSG_WAITALL) == 1);
    CHECK_EQ(st, 0);
    uint64_t n = 0;
    uint8_t proof[EL_AUTH_MAC], want[EL_AUTH_MAC];
    CHECK(recv(a, &n, 8, MSG_WAITALL) == 8);
    CHECK_EQ(n, EL_AUTH_MAC);
    CHECK(recv(a, proof, EL_AUTH_MAC, MSG_WAITALL) == EL_AUTH_MAC);
    el__auth_mac(SECRET, SLEN, EL_AUTH_SERVER_TAG, na, EL_AUTH_NONCE,
                 (const uint8_t *)"abcd", 4, want);
    CHECK(memcmp(proof, want, EL_AUTH_MAC) == 0);
    /* A second answer needs a new challenge. */
    raw_answer(a, mac);
    CHECK(closed_by_server(a, 2000));
    close(a);
    close(b);
    el_store_server_close(srv);
}

TEST(store_secret_too_short_is_a_usage_error)
{
    struct el_store_server_opts o = {
        .host = "127.0.0.1", .secret = "short", .secret_len = 5};
    struct el_store_server *srv = NULL;
    CHECK_EQ(el_store_server_start(&srv, &o), EL_EUSAGE);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    CHECK(chmod(path, mode) == 0);
}

TEST(store_read_secret_file)
{
    char dir[] = "/tmp/elrun-secret.XXXXXX", path[64], err[256];
    CHECK(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/s", dir);
    uint8_t buf[EL_STORE_SECRET_MAX + 1];
    size_t len = 0;
    write_file(path, "0123456789abcdefXYZ\n", 0600);
    CHECK_OK(
        el_store_read_secret(path, buf, sizeof buf, &len, err, sizeof err));
    CHECK_MEM(buf, len, "0123456789abcdefXYZ", 19); /* newline dropped */
    write_file(path, "0123456789abcdefXYZ\n", 0644);
    CHECK_EQ(el_store_read_secret(path, buf, sizeof buf, &len, err, sizeof err),
             EL_EUSAGE);
    CHECK(strstr(err, "chmod 600"));
    write_file(path, "short\n", 0600);
    CHECK_EQ(el_store_read_secret(path, buf, sizeof buf, &len, err, sizeof err),
             EL_EUSAGE);
    CHECK(strstr(err, "at least 16"));
    CHECK(el_store_read_secret("/nonexistent/s", buf, sizeof buf, &len, err,
                               sizeof err) < 0);
    CHECK(strstr(err, "cannot read the secret file /nonexistent/s"));
    unlink(path);
    rmdir(dir);
}

TEST(store_secret_agents_are_exempt_from_the_data_cap)
{
    struct el_store_server_opts o = {
        .host = "127.0.0.1", .secret = SECRET, .secret_len = SLEN};
    o.limits.max_total_data = 1000;
    struct el_store_server *srv = NULL;
    CHECK_OK(el_store_server_start(&srv, &o));
    static char fill[2000];
    memset(fill, 'f', sizeof fill);
    /* An outsider fills the store ... */
    struct el_store *w = client(srv);
    CHECK_OK(el_store_set(w, "/junk", fill, 900));
    CHECK_OK(el_store_ping(w));
    el_store_set(w, "/more", fill, 900);
    CHECK(el_store_ping(w) < 0);
    /* ... and the agents still write their rendezvous keys. */
    struct el_store *a = agent(srv);
    CHECK_OK(el_store_set(a, "/elrun/job/r0/members", fill, 2000));
    CHECK_OK(el_store_add(a, "/elrun/job/r0/joined", 1, NULL));
    CHECK_OK(el_store_ping(a));
    el_store_close(a);
    el_store_close(w);
    el_store_server_close(srv);
}
