/* test_store_limits.c -- the store's bounds against clients that misbehave:
 * replies that are never read (back-pressure, the per-connection cap on
 * what is queued and in flight, the server-wide cap), partial requests and
 * unread replies that stall (the stall timeout).  Each test also checks
 * that a well-behaved client keeps being served. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "store_util.h"

#define MIB (1024 * 1024)

static struct el_store_server_stats stats(struct el_store_server *srv)
{
    struct el_store_server_stats st;
    el_store_server_stats(srv, &st);
    return st;
}

/* Wait (up to 5 s) until the stats satisfy cond. */
#define WAIT_STATS(srv, st, cond)                                        \
    do {                                                                 \
        long long t0_ = el_now_ms();                                     \
        for (;;) {                                                       \
            st = stats(srv);                                             \
            if (cond)                                                    \
                break;                                                   \
            if (el_now_ms() - t0_ >= 5000)                               \
                TEST_FAIL_("stats: conns %llu paused %llu limited %llu " \
                           "buffered %llu peak %llu",                    \
                           (unsigned long long)st.connections,           \
                           (unsigned long long)st.paused,                \
                           (unsigned long long)st.limited,               \
                           (unsigned long long)st.buffered,              \
                           (unsigned long long)st.buffered_peak);        \
            usleep(2000);                                                \
        }                                                                \
    } while (0)

/* n V1 GETs of key (TCPStore 1.13 frames: 02, u64 length, key). */
static size_t v1_gets(uint8_t *buf, const char *key, int n)
{
    size_t kl = strlen(key), off = 0;
    for (int i = 0; i < n; i++) {
        uint64_t l = kl;
        buf[off++] = 2;
        memcpy(buf + off, &l, 8);
        memcpy(buf + off + 8, key, kl);
        off += 8 + kl;
    }
    return off;
}

/* Read one V1 GET reply of vlen bytes, each byte 'fill'. */
static void read_value_reply(int fd, size_t vlen, uint8_t fill)
{
    uint64_t n = 0;
    CHECK(recv(fd, &n, 8, MSG_WAITALL) == 8);
    CHECK_EQ(n, vlen);
    uint8_t *b = malloc(vlen);
    CHECK(b);
    CHECK(recv(fd, b, vlen, MSG_WAITALL) == (ssize_t)vlen);
    CHECK(b[0] == fill && b[vlen - 1] == fill);
    free(b);
}

static void set_big(struct el_store *s, const char *key, size_t n, int fill)
{
    uint8_t *v = malloc(n);
    CHECK(v);
    memset(v, fill, n);
    CHECK_OK(el_store_set(s, key, v, n));
    CHECK_OK(el_store_ping(s)); /* SET has no reply: now it is stored */
    free(v);
}

TEST(store_unread_replies_pause_the_client_within_its_cap)
{
    struct el_store_limits lim = {.max_value_len = MIB,
                                  .max_conn_buffer = MIB + 128 * 1024};
    struct el_store_server *srv = start(&lim);
    struct el_store *good = client(srv);
    set_big(good, "big", MIB, 'x');
    /* 100 GETs of a 1 MiB value in one write, and no read: 100 MiB of
     * replies.  The server must stop reading this client instead of
     * queueing them (or closing it). */
    int fd = raw_connect(srv);
    static uint8_t req[100 * 16];
    raw_send(fd, req, v1_gets(req, "big", 100));
    struct el_store_server_stats st;
    WAIT_STATS(srv, st, st.paused == 1);
    /* Others are served meanwhile. */
    for (int i = 0; i < 20; i++) {
        CHECK_OK(el_store_set(good, "k", "v", 1));
        check_value(good, "k", "v");
    }
    st = stats(srv);
    CHECK_EQ(st.paused, 1);
    /* Replies queued + in flight never passed the cap; the partial input
     * (the rest of that write) is at most one read. */
    CHECK(st.buffered_peak <= lim.max_conn_buffer + 64 * 1024 + 4096);
    /* When the client reads, it gets every reply, in order. */
    for (int i = 0; i < 100; i++)
        read_value_reply(fd, MIB, 'x');
    WAIT_STATS(srv, st, st.paused == 0);
    CHECK(st.buffered_peak <= lim.max_conn_buffer + 64 * 1024 + 4096);
    CHECK_EQ(st.limited, 0);
    close(fd);
    el_store_close(good);
    el_store_server_close(srv);
}

TEST(store_a_reply_larger_than_the_cap_closes_only_that_client)
{
    struct el_store_limits lim = {.max_value_len = MIB,
                                  .max_conn_buffer = MIB + 128 * 1024};
    struct el_store_server *srv = start(&lim);
    struct el_store *good = client(srv), *greedy = client(srv);
    set_big(good, "a", MIB, 'a');
    set_big(good, "b", MIB, 'b');
    const char *keys[] = {"a", "b"};
    void *v[2];
    size_t n[2];
    /* 2 MiB in one reply cannot fit a 1.125 MiB cap. */
    CHECK(el_store_multi_get(greedy, keys, 2, v, n, 1000) < 0);
    CHECK_OK(el_store_ping(good));
    struct el_store_server_stats st = stats(srv);
    CHECK_EQ(st.limited, 1);
    CHECK(st.buffered_peak <= lim.max_conn_buffer + 64 * 1024);
    el_store_close(greedy);
    el_store_close(good);
    el_store_server_close(srv);
}

struct good_client {
    int port, ok;
};

static void *good_loop(void *arg)
{
    struct good_client *g = arg;
    struct el_store *s = NULL;
    if (el_store_connect(&s, "127.0.0.1", g->port, 5000, 5000) != 0)
        return NULL;
    int ok = 1;
    for (int i = 0; i < 200 && ok; i++) {
        void *v = NULL;
        size_t n = 0;
        ok = el_store_set(s, "g", "1", 1) == 0 &&
             el_store_get(s, "g", &v, &n, 2000) == 0 && n == 1;
        free(v);
    }
    g->ok = ok;
    el_store_close(s);
    return NULL;
}

TEST(store_total_cap_refuses_the_client_that_crosses_it)
{
    /* 20 clients that send GETs of a 1 MiB value and never read: each may
     * hold a reply buffer, together no more than max_total_buffer. */
    struct el_store_limits lim = {.max_value_len = MIB,
                                  .max_total_buffer = 4 * MIB};
    struct el_store_server *srv = start(&lim);
    struct el_store *s = client(srv);
    set_big(s, "big", MIB, 'y');
    struct good_client g = {el_store_server_port(srv), 0};
    pthread_t th;
    pthread_create(&th, NULL, good_loop, &g);
    int fds[20];
    static uint8_t req[50 * 16];
    size_t len = v1_gets(req, "big", 50);
    for (int i = 0; i < 20; i++) {
        fds[i] = raw_connect(srv);
        raw_send(fds[i], req, len);
    }
    struct el_store_server_stats st;
    WAIT_STATS(srv, st, st.paused + st.limited == 20);
    pthread_join(th, NULL);
    CHECK(g.ok);
    CHECK_OK(el_store_ping(s));
    st = stats(srv);
    CHECK(st.limited >= 1);
    /* The cap, plus each connection's small floor (its input buffer). */
    CHECK(st.buffered_peak <= lim.max_total_buffer + 22 * 128 * 1024);
    for (int i = 0; i < 20; i++)
        close(fds[i]);
    el_store_close(s);
    el_store_server_close(srv);
}

TEST(store_stall_timeout_drops_partial_requests_and_unread_replies)
{
    struct el_store_limits lim = {.max_value_len = MIB,
                                  .stall_timeout_ms = 300};
    struct el_store_server *srv = start(&lim);
    struct el_store *good = client(srv);
    set_big(good, "big", MIB, 'z');
    /* Half a SET, never finished. */
    int half = raw_connect(srv);
    uint8_t part[] = {0x00, 5, 0, 0, 0, 0, 0, 0, 0, 'a', 'b'};
    raw_send(half, part, sizeof part);
    /* GETs whose replies are never read. */
    int deaf = raw_connect(srv);
    static uint8_t req[40 * 16];
    raw_send(deaf, req, v1_gets(req, "big", 40));
    long long t0 = el_now_ms();
    struct el_store_server_stats st;
    WAIT_STATS(srv, st, st.limited == 2);
    CHECK(el_now_ms() - t0 >= 250);
    CHECK_EQ(st.connections, 1);
    CHECK_EQ(st.paused, 0);
    CHECK(closed_by_server(half, 1000));
    /* A quiet connection holding nothing is not stalled: it stays. */
    CHECK_OK(el_store_ping(good));
    close(half);
    close(deaf);
    el_store_close(good);
    el_store_server_close(srv);
}

TEST(store_slow_reader_is_not_a_stall)
{
    struct el_store_limits lim = {.max_value_len = 4 * MIB,
                                  .stall_timeout_ms = 300};
    struct el_store_server *srv = start(&lim);
    struct el_store *good = client(srv);
    set_big(good, "big", 4 * MIB, 'w');
    int fd = raw_connect(srv);
    static uint8_t req[8 * 16];
    raw_send(fd, req, v1_gets(req, "big", 8));
    /* Read 32 MiB in 64 KiB steps, 100 ms apart when the reply stops
     * coming: always some progress within the timeout. */
    size_t want = 8 * (8 + 4 * MIB), got = 0;
    static uint8_t b[64 * 1024];
    while (got < want) {
        ssize_t n = recv(fd, b, sizeof b, 0);
        CHECK(n > 0);
        got += (size_t)n;
        if (got % (4 * MIB) < sizeof b)
            usleep(100 * 1000);
    }
    struct el_store_server_stats st = stats(srv);
    CHECK_EQ(st.limited, 0);
    close(fd);
    el_store_close(good);
    el_store_server_close(srv);
}

TEST(store_total_data_cap_refuses_the_write_that_crosses_it)
{
    struct el_store_limits lim = {.max_total_data = MIB};
    struct el_store_server *srv = start(&lim);
    struct el_store *a = client(srv);
    set_big(a, "one", 600 * 1024, 'a');
    set_big(a, "one", 600 * 1024, 'b'); /* replacing is no growth */
    struct el_store *b = client(srv);
    uint8_t *v = calloc(1, 600 * 1024);
    CHECK(v);
    el_store_set(b, "two", v, 600 * 1024);
    CHECK(el_store_ping(b) < 0); /* closed: 1.2 MiB would not fit */
    struct el_store *c = client(srv);
    CHECK_OK(el_store_append(c, "one", "x", 1)); /* a byte still fits */
    CHECK_OK(el_store_delete(c, "one", NULL));
    CHECK_OK(el_store_set(c, "two", v, 600 * 1024)); /* room again */
    CHECK_OK(el_store_ping(c));
    struct el_store_server_stats st; /* counted after the reply is sent */
    WAIT_STATS(srv, st, st.data == 3 + 600 * 1024);
    CHECK_EQ(st.limited, 1);
    free(v);
    el_store_close(a);
    el_store_close(b);
    el_store_close(c);
    el_store_server_close(srv);
}
