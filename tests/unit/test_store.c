/* test_store.c -- the store server through the C client and raw sockets:
 * every operation's semantics, waits and timeouts, many clients at once,
 * bad frames that must not disturb other clients, and connection-close
 * hooks fired by a process killed with SIGKILL. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/store.h"
#include "store_util.h"
#include "test.h"

TEST(store_set_get_add_delete_numkeys)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *s = client(srv);
    int64_t r, n;
    int deleted;
    CHECK_OK(el_store_set(s, "a", "1", 1));
    check_value(s, "a", "1");
    CHECK_OK(el_store_set(s, "a", "", 0)); /* empty values are values */
    check_value(s, "a", "");
    CHECK_OK(el_store_add(s, "cnt", 5, &r));
    CHECK_EQ(r, 5);
    CHECK_OK(el_store_add(s, "cnt", -7, &r));
    CHECK_EQ(r, -2);
    check_value(s, "cnt", "-2"); /* ADD keeps decimal text, as TCPStore */
    CHECK_OK(el_store_num_keys(s, &n));
    CHECK_EQ(n, 2);
    CHECK_OK(el_store_delete(s, "a", &deleted));
    CHECK_EQ(deleted, 1);
    CHECK_OK(el_store_delete(s, "a", &deleted));
    CHECK_EQ(deleted, 0);
    CHECK_EQ(el_store_try_get(s, "a", NULL, NULL), EL_ENOTFOUND);
    CHECK_OK(el_store_num_keys(s, &n));
    CHECK_EQ(n, 1);
    el_store_close(s);
    el_store_server_close(srv);
}

TEST(store_add_on_text_value_is_rejected_and_others_go_on)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *s = client(srv), *t = client(srv);
    CHECK_OK(el_store_set(s, "txt", "abc", 3));
    CHECK(el_store_add(s, "txt", 1, NULL) < 0);
    CHECK(el_store_ping(s) < 0); /* that connection is gone */
    CHECK_OK(el_store_ping(t));
    check_value(t, "txt", "abc"); /* nothing lost */
    struct el_store_server_stats st;
    el_store_server_stats(srv, &st);
    el_store_close(s);
    el_store_close(t);
    el_store_server_close(srv);
}

TEST(store_compare_set_follows_tcpstore)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *s = client(srv);
    void *cur = NULL;
    size_t n = 0;
    /* Missing key, non-empty expected: not stored, reply is 'expected'. */
    CHECK_EQ(el_store_compare_set(s, "k", "a", 1, "b", 1, &cur, &n),
             EL_EMISMATCH);
    CHECK_MEM(cur, n, "a", 1);
    free(cur);
    CHECK_EQ(el_store_try_get(s, "k", NULL, NULL), EL_ENOTFOUND);
    /* Missing key, empty expected: created. */
    CHECK_OK(el_store_compare_set(s, "k", "", 0, "v1", 2, NULL, NULL));
    check_value(s, "k", "v1");
    /* Present, matching: replaced. */
    CHECK_OK(el_store_compare_set(s, "k", "v1", 2, "v2", 2, NULL, NULL));
    /* Present, not matching: unchanged, reply is the current value. */
    CHECK_EQ(el_store_compare_set(s, "k", "zz", 2, "v3", 2, &cur, &n),
             EL_EMISMATCH);
    CHECK_MEM(cur, n, "v2", 2);
    free(cur);
    check_value(s, "k", "v2");
    el_store_close(s);
    el_store_server_close(srv);
}

TEST(store_check_wait_append_multi)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *s = client(srv);
    const char *keys[] = {"x", "y"};
    int all;
    CHECK_OK(el_store_check(s, keys, 2, &all));
    CHECK_EQ(all, 0);
    const void *vals[] = {"1", "22"};
    size_t lens[] = {1, 2};
    CHECK_OK(el_store_multi_set(s, keys, vals, lens, 2));
    CHECK_OK(el_store_check(s, keys, 2, &all));
    CHECK_EQ(all, 1);
    CHECK_OK(el_store_wait(s, keys, 2, 100));
    void *out[2];
    size_t outn[2];
    CHECK_OK(el_store_multi_get(s, keys, 2, out, outn, 100));
    CHECK_MEM(out[0], outn[0], "1", 1);
    CHECK_MEM(out[1], outn[1], "22", 2);
    free(out[0]);
    free(out[1]);
    CHECK_OK(el_store_append(s, "log", "ab", 2));
    CHECK_OK(el_store_append(s, "log", "cd", 2));
    check_value(s, "log", "abcd");
    el_store_close(s);
    el_store_server_close(srv);
}

TEST(store_waits_time_out_and_the_connection_stays_usable)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *s = client(srv);
    const char *keys[] = {"never"};
    long long t0 = el_now_ms();
    CHECK_EQ(el_store_get(s, "never", NULL, NULL, 150), -ETIMEDOUT);
    CHECK(el_now_ms() - t0 >= 140);
    CHECK(strstr(el_store_errmsg(s), "never") != NULL);
    CHECK_EQ(el_store_wait(s, keys, 1, 50), -ETIMEDOUT);
    void *v[1];
    size_t n[1];
    CHECK_EQ(el_store_multi_get(s, keys, 1, v, n, 50), -ETIMEDOUT);
    /* A later set of the awaited key sends nothing stray. */
    CHECK_OK(el_store_set(s, "never", "now", 3));
    CHECK_OK(el_store_ping(s));
    check_value(s, "never", "now");
    el_store_close(s);
    el_store_server_close(srv);
}

struct setter {
    struct el_store_server *srv;
    const char *key;
    int parked; /* set once this many requests are parked */
};

/* Set a->key once the server has parked a->parked requests (the waiter is
 * really waiting), from a client of its own. */
static void *set_later(void *arg)
{
    struct setter *a = arg;
    struct el_store *s = NULL;
    struct el_store_server_stats st;
    long long deadline = el_now_ms() + 5000;
    do {
        el_store_server_stats(a->srv, &st);
        if (st.parked >= (uint64_t)a->parked)
            break;
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    } while (el_now_ms() < deadline);
    if (el_store_connect(&s, "127.0.0.1", el_store_server_port(a->srv), 5000,
                         5000) == 0) {
        el_store_set(s, a->key, "here", 4);
        el_store_ping(s);
        el_store_close(s);
    }
    return NULL;
}

TEST(store_get_waits_for_a_key_set_by_another_client)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *s = client(srv);
    struct setter a = {srv, "late", 1};
    pthread_t th;
    pthread_create(&th, NULL, set_later, &a);
    check_value(s, "late", "here"); /* parked, then woken by the set */
    struct el_store_server_stats st;
    el_store_server_stats(srv, &st);
    CHECK_EQ(st.parked, 0);
    pthread_join(th, NULL);
    el_store_close(s);
    el_store_server_close(srv);
}

TEST(store_watch_sees_changes_and_deletion)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *s = client(srv), *t = client(srv);
    int present;
    void *v = NULL;
    size_t n;
    /* Missing and expected missing: times out. */
    CHECK_EQ(el_store_watch(s, "w", 0, NULL, 0, &present, &v, &n, 50),
             -ETIMEDOUT);
    CHECK_OK(el_store_set(t, "w", "1", 1));
    CHECK_OK(el_store_watch(s, "w", 0, NULL, 0, &present, &v, &n, 1000));
    CHECK_EQ(present, 1);
    CHECK_MEM(v, n, "1", 1);
    free(v);
    /* Same value set again is not a change. */
    CHECK_OK(el_store_set(t, "w", "1", 1));
    CHECK_EQ(el_store_watch(s, "w", 1, "1", 1, &present, &v, &n, 50),
             -ETIMEDOUT);
    CHECK_OK(el_store_delete(t, "w", NULL));
    CHECK_OK(el_store_watch(s, "w", 1, "1", 1, &present, &v, &n, 1000));
    CHECK_EQ(present, 0);
    el_store_close(s);
    el_store_close(t);
    el_store_server_close(srv);
}

TEST(store_delete_prefix)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *s = client(srv);
    int64_t count, n;
    CHECK_OK(el_store_set(s, "/worker/attempt_0/a", "1", 1));
    CHECK_OK(el_store_set(s, "/worker/attempt_0/b", "1", 1));
    CHECK_OK(el_store_set(s, "/worker/attempt_1/a", "1", 1));
    CHECK_OK(el_store_set(s, "other", "1", 1));
    CHECK_OK(el_store_delete_prefix(s, "/worker/attempt_0/", &count));
    CHECK_EQ(count, 2);
    CHECK_OK(el_store_num_keys(s, &n));
    CHECK_EQ(n, 2);
    CHECK_EQ(el_store_try_get(s, "/worker/attempt_0/a", NULL, NULL),
             EL_ENOTFOUND);
    el_store_close(s);
    el_store_server_close(srv);
}

TEST(store_on_close_set_fires_when_a_client_is_killed)
{
    struct el_store_server *srv = start(NULL);
    int port = el_store_server_port(srv);
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        struct el_store *c = NULL;
        if (el_store_connect(&c, "127.0.0.1", port, 5000, 5000) == 0 &&
            el_store_on_close_set(c, "dead/node1", "1", 1) == 0)
            (void)!write(ready[1], "r", 1);
        pause();
        _exit(0);
    }
    char b;
    CHECK(read(ready[0], &b, 1) == 1);
    struct el_store *s = client(srv);
    CHECK_EQ(el_store_try_get(s, "dead/node1", NULL, NULL), EL_ENOTFOUND);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    check_value(s, "dead/node1", "1");
    el_store_close(s);
    el_store_server_close(srv);
}

struct adder {
    int port, rounds;
    int ok;
};

static void *add_many(void *arg)
{
    struct adder *a = arg;
    struct el_store *s = NULL;
    if (el_store_connect(&s, "127.0.0.1", a->port, 5000, 5000) != 0)
        return NULL;
    int ok = 1;
    for (int i = 0; i < a->rounds && ok; i++)
        ok = el_store_add(s, "shared", 1, NULL) == 0;
    /* A barrier on the count: everyone waits for the last one's key. */
    int64_t r;
    ok = ok && el_store_add(s, "arrived", 1, &r) == 0;
    if (ok && r == 32)
        ok = el_store_set(s, "all_in", "1", 1) == 0;
    ok = ok && el_store_get(s, "all_in", NULL, NULL, 10000) == 0;
    a->ok = ok;
    el_store_close(s);
    return NULL;
}

TEST(store_many_concurrent_clients_lose_no_update)
{
    struct el_store_server *srv = start(NULL);
    pthread_t th[32];
    struct adder a[32];
    for (int i = 0; i < 32; i++) {
        a[i] = (struct adder){el_store_server_port(srv), 500, 0};
        pthread_create(&th[i], NULL, add_many, &a[i]);
    }
    for (int i = 0; i < 32; i++) {
        pthread_join(th[i], NULL);
        CHECK(a[i].ok);
    }
    struct el_store *s = client(srv);
    check_value(s, "shared", "16000");
    el_store_close(s);
    el_store_server_close(srv);
}

/* ---- raw sockets: what a broken or hostile client sends ---- */

TEST(store_partial_frame_does_not_stall_other_clients)
{
    struct el_store_server *srv = start(NULL);
    int raw = raw_connect(srv);
    /* A 2.x VALIDATE cut short: hangs PyTorch 1.13's whole server. */
    uint8_t part[] = {0, 0xCE, 0xF7};
    raw_send(raw, part, sizeof part);
    uint8_t set_part[] = {0x01, 5, 0, 0, 0, 0, 0, 0, 0, 'a'};
    raw_send(raw, set_part, sizeof set_part);
    struct el_store *s = client(srv);
    CHECK_OK(el_store_set(s, "k", "v", 1));
    check_value(s, "k", "v");
    close(raw);
    el_store_close(s);
    el_store_server_close(srv);
}

TEST(store_bad_frames_close_only_their_connection)
{
    struct el_store_limits lim = {.max_key_len = 64, .max_value_len = 1024};
    struct el_store_server *srv = start(&lim);
    struct el_store *s = client(srv);
    CHECK_OK(el_store_set(s, "keep", "me", 2));
    /* Unknown op. */
    int a = raw_connect(srv);
    uint8_t junk[] = {0xEE, 1, 2, 3};
    raw_send(a, junk, sizeof junk);
    CHECK(closed_by_server(a, 2000));
    /* Oversized key (length field only; the server must not wait). */
    int b = raw_connect(srv);
    uint8_t big[9] = {2};
    uint64_t len = 65;
    memcpy(big + 1, &len, 8);
    raw_send(b, big, sizeof big);
    CHECK(closed_by_server(b, 2000));
    /* Oversized value. */
    int c = raw_connect(srv);
    uint8_t bigv[1 + 8 + 1 + 8] = {0};
    len = 1;
    memcpy(bigv + 1, &len, 8);
    bigv[9] = 'k';
    len = 4096;
    memcpy(bigv + 10, &len, 8);
    raw_send(c, bigv, sizeof bigv);
    CHECK(closed_by_server(c, 2000));
    /* Wrong VALIDATE magic. */
    int d = raw_connect(srv);
    uint8_t v[] = {0, 0xCE, 0xF7, 0x85, 0x3C, 0, 1, 2, 3, 4};
    raw_send(d, v, sizeof v);
    CHECK(closed_by_server(d, 2000));
    CHECK_OK(el_store_ping(s));
    check_value(s, "keep", "me");
    struct el_store_server_stats st;
    el_store_server_stats(srv, &st);
    CHECK_EQ(st.rejected, 4);
    CHECK_EQ(st.keys, 1);
    close(a);
    close(b);
    close(c);
    close(d);
    el_store_close(s);
    el_store_server_close(srv);
}

TEST(store_v1_client_that_gave_up_waiting_gets_no_stray_reply)
{
    struct el_store_server *srv = start(NULL);
    int fd = raw_connect(srv);
    /* V1 WAIT ["/w"], then (the client timed out) a V1 ADD. */
    uint8_t wait[] = {5, 1, 0, 0, 0, 0, 0, 0,   0,  2,
                      0, 0, 0, 0, 0, 0, 0, '/', 'w'};
    raw_send(fd, wait, sizeof wait);
    uint8_t add[] = {3,   2, 0, 0, 0, 0, 0, 0, 0, '/',
                     'c', 7, 0, 0, 0, 0, 0, 0, 0};
    raw_send(fd, add, sizeof add);
    int64_t r = 0;
    CHECK(recv(fd, &r, 8, MSG_WAITALL) == 8);
    CHECK_EQ(r, 7);
    /* Now set the key the abandoned WAIT was for: nothing may arrive. */
    struct el_store *s = client(srv);
    CHECK_OK(el_store_set(s, "/w", "x", 1));
    CHECK_OK(el_store_ping(s));
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK_EQ(poll(&p, 1, 100), 0);
    close(fd);
    el_store_close(s);
    el_store_server_close(srv);
}

TEST(store_v2_cancel_wait)
{
    struct el_store_server *srv = start(NULL);
    int fd = raw_connect(srv);
    uint8_t v[] = {0, 0xCE, 0xF7, 0x85, 0x3C};
    raw_send(fd, v, sizeof v);
    uint8_t wait[] = {6, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 'q'};
    raw_send(fd, wait, sizeof wait);
    uint8_t cancel[] = {12};
    raw_send(fd, cancel, 1);
    uint8_t r = 0xFF;
    CHECK(recv(fd, &r, 1, MSG_WAITALL) == 1);
    CHECK_EQ(r, 1); /* WAIT_CANCELED */
    struct el_store *s = client(srv);
    CHECK_OK(el_store_set(s, "q", "x", 1));
    CHECK_OK(el_store_ping(s));
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK_EQ(poll(&p, 1, 100), 0);
    close(fd);
    el_store_close(s);
    el_store_server_close(srv);
}

TEST(store_client_reports_a_dead_server)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *s = client(srv);
    el_store_server_close(srv);
    int rc = el_store_get(s, "k", NULL, NULL, 1000);
    CHECK(rc == -ECONNRESET || rc == -EPIPE);
    CHECK(strstr(el_store_errmsg(s), "lost") != NULL);
    el_store_close(s);
    struct el_store *t = NULL;
    CHECK_EQ(el_store_connect(&t, "127.0.0.1", 1, 200, 1000), -ECONNREFUSED);
}

TEST(store_cancel_fd_interrupts_a_wait)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *s = client(srv);
    int p[2];
    CHECK(pipe(p) == 0);
    el_store_set_cancel_fd(s, p[0]);
    CHECK(write(p[1], "x", 1) == 1);
    CHECK_EQ(el_store_get(s, "never", NULL, NULL, -1), -ECANCELED);
    el_store_close(s);
    el_store_server_close(srv);
}

TEST(store_idle_timeout_closes_a_quiet_client_and_fires_its_hooks)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *quiet = client(srv), *busy = client(srv),
                    *obs = client(srv);
    CHECK_OK(el_store_on_close_set(quiet, "gone/quiet", "1", 1));
    CHECK_OK(el_store_on_close_set(busy, "gone/busy", "1", 1));
    CHECK_OK(el_store_set_idle_timeout(quiet, 100));
    CHECK_OK(el_store_set_idle_timeout(busy, 100));
    /* busy keeps talking (a watch that times out every 30 ms is traffic);
     * quiet says nothing and is dropped after ~100 ms. */
    long long t0 = el_now_ms();
    int present = 0;
    while (!present) {
        CHECK(el_now_ms() - t0 < 3000);
        el_store_watch(busy, "gone/quiet", 0, NULL, 0, &present, NULL, NULL,
                       30);
    }
    CHECK(el_now_ms() - t0 >= 90);
    CHECK_EQ(el_store_try_get(obs, "gone/busy", NULL, NULL), EL_ENOTFOUND);
    CHECK_OK(el_store_ping(busy));
    CHECK(el_store_ping(quiet) < 0);
    el_store_close(quiet);
    el_store_close(busy);
    el_store_close(obs);
    el_store_server_close(srv);
}

TEST(store_on_close_append_logs_every_death)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *a = client(srv), *b = client(srv), *obs = client(srv);
    CHECK_OK(el_store_on_close_append(a, "deaths", "a\n", 2));
    CHECK_OK(el_store_on_close_append(b, "deaths", "b\n", 2));
    el_store_close(a);
    int present;
    void *v = NULL;
    size_t n = 0;
    CHECK_OK(el_store_watch(obs, "deaths", 0, NULL, 0, &present, &v, &n, 2000));
    CHECK_MEM(v, n, "a\n", 2);
    el_store_close(b);
    char *seen = v;
    CHECK_OK(el_store_watch(obs, "deaths", 1, seen, n, &present, &v, &n, 2000));
    free(seen);
    CHECK_MEM(v, n, "a\nb\n", 4);
    free(v);
    el_store_close(obs);
    el_store_server_close(srv);
}

TEST(store_multi_get_parked_until_the_last_key_arrives)
{
    struct el_store_server *srv = start(NULL);
    struct el_store *s = client(srv);
    struct setter a = {srv, "m2", 1};
    pthread_t th;
    CHECK_OK(el_store_set(s, "m1", "one", 3));
    pthread_create(&th, NULL, set_later, &a);
    const char *keys[] = {"m1", "m2"};
    void *v[2];
    size_t n[2];
    CHECK_OK(el_store_multi_get(s, keys, 2, v, n, 2000));
    CHECK_MEM(v[0], n[0], "one", 3);
    CHECK_MEM(v[1], n[1], "here", 4);
    free(v[0]);
    free(v[1]);
    pthread_join(th, NULL);
    el_store_close(s);
    el_store_server_close(srv);
}
