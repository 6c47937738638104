/* test_store_conns.c -- connections that hold descriptors: the per-peer
 * limit, and the descriptor reserve that drops idle connections (silent or
 * stuck ones first, then the newest idle) so that a new client always gets
 * in.  The descriptor tests run the server in a child process whose
 * RLIMIT_NOFILE is small; the clients live in the test process. */
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_util.h"

static int connect_port(int port, struct el_store **out)
{
    return el_store_connect(out, "127.0.0.1", port, 2000, 2000);
}

TEST(store_limits_connections_per_loopback_peer_when_asked)
{
    struct el_store_limits lim = {.max_conns_per_loopback = 3};
    struct el_store_server *srv = start(&lim);
    int port = el_store_server_port(srv);
    struct el_store *c[3], *extra = NULL;
    for (int i = 0; i < 3; i++)
        c[i] = client(srv);
    /* The fourth is closed as soon as it is accepted. */
    CHECK(connect_port(port, &extra) < 0);
    for (int i = 0; i < 3; i++)
        CHECK_OK(el_store_ping(c[i]));
    struct el_store_server_stats st;
    el_store_server_stats(srv, &st);
    CHECK_EQ(st.limited, 1);
    /* Once one leaves, there is room again. */
    el_store_close(c[0]);
    long long t0 = el_now_ms();
    while (connect_port(port, &extra) < 0)
        CHECK(el_now_ms() - t0 < 3000);
    CHECK_OK(el_store_ping(extra));
    el_store_close(extra);
    el_store_close(c[1]);
    el_store_close(c[2]);
    el_store_server_close(srv);
}

TEST(store_loopback_is_not_limited_by_default)
{
    /* Every agent and worker of a one-machine job comes from 127.0.0.1. */
    struct el_store_limits lim = {.max_conns_per_peer = 2};
    struct el_store_server *srv = start(&lim);
    struct el_store *c[8];
    for (int i = 0; i < 8; i++)
        c[i] = client(srv);
    for (int i = 0; i < 8; i++) {
        CHECK_OK(el_store_ping(c[i]));
        el_store_close(c[i]);
    }
    el_store_server_close(srv);
}

/* A server in a child process limited to nofile descriptors; returns its
 * pid and sets *port. */
static pid_t server_child(int nofile, size_t reserve, int *port)
{
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {(rlim_t)nofile, (rlim_t)nofile};
        struct el_store_server_opts o = {.host = "127.0.0.1"};
        struct el_store_server *srv;
        o.limits.fd_reserve = reserve;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0 ||
            el_store_server_start(&srv, &o) != 0)
            _exit(1);
        int pt = el_store_server_port(srv);
        (void)!write(p[1], &pt, sizeof pt);
        pause();
        _exit(0);
    }
    close(p[1]);
    CHECK(read(p[0], port, sizeof *port) == sizeof *port);
    close(p[0]);
    return pid;
}

static void end_child(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

TEST(store_silent_connections_near_the_fd_limit_make_room_for_new_clients)
{
    int port;
    pid_t pid = server_child(64, 8, &port);
    struct el_store *worker = NULL, *agent = NULL, *fresh = NULL;
    CHECK_OK(connect_port(port, &worker));
    CHECK_OK(el_store_set(worker, "w", "1", 1));
    CHECK_OK(connect_port(port, &agent));
    CHECK_OK(el_store_on_close_set(agent, "agent/dead", "1", 1));
    /* 200 connections that never send a byte: far more than the server
     * has descriptors. */
    int fds[200];
    for (int i = 0; i < 200; i++) {
        fds[i] = el_tcp_connect("127.0.0.1", port, 2000);
        CHECK(fds[i] >= 0);
    }
    /* Connections quiet for less than a second are not dropped. */
    usleep(1100 * 1000);
    /* A new client still gets in, and the connections that were talking
     * are still there (the agent's close hook did not fire). */
    CHECK_OK(connect_port(port, &fresh));
    CHECK_OK(el_store_set(fresh, "k", "v", 1));
    void *v = NULL;
    size_t n = 0;
    CHECK_OK(el_store_get(fresh, "w", &v, &n, 1000));
    free(v);
    CHECK_OK(el_store_ping(worker));
    CHECK_OK(el_store_ping(agent));
    CHECK_EQ(el_store_try_get(fresh, "agent/dead", NULL, NULL), EL_ENOTFOUND);
    for (int i = 0; i < 200; i++)
        close(fds[i]);
    el_store_close(fresh);
    el_store_close(agent);
    el_store_close(worker);
    end_child(pid);
}

TEST(store_near_the_fd_limit_the_newest_idle_connection_goes_first)
{
    int port;
    pid_t pid = server_child(64, 8, &port);
    struct el_store *old = NULL, *fresh = NULL, *idle[70] = {0};
    CHECK_OK(connect_port(port, &old)); /* a worker, idle for hours */
    CHECK_OK(el_store_set(old, "w", "1", 1));
    /* Clients that each said hello (VALIDATE, PING) and went quiet: 40
     * fit (about 44 of the 64 descriptors are free for clients) ... */
    for (int i = 0; i < 40; i++)
        CHECK_OK(connect_port(port, &idle[i]));
    usleep(1100 * 1000); /* connections quiet for a second may be dropped */
    /* ... 30 more get in by pushing out the newest of those ... */
    for (int i = 40; i < 70; i++)
        CHECK_OK(connect_port(port, &idle[i]));
    /* (an agent's connection, which uses elrun's own ops, is the newest
     * idle one now, yet it is not the one to go) ... */
    struct el_store *agent = NULL;
    el_store_close(idle[69]);
    idle[69] = NULL;
    CHECK_OK(connect_port(port, &agent));
    CHECK_EQ(el_store_try_get(agent, "nothing", NULL, NULL), EL_ENOTFOUND);
    usleep(1100 * 1000);
    CHECK_OK(connect_port(port, &fresh));
    CHECK_OK(el_store_ping(fresh));
    /* ... and the worker connected first is still served. */
    CHECK_OK(el_store_ping(old));
    CHECK_OK(el_store_ping(agent));
    el_store_close(agent);
    for (int i = 0; i < 70; i++)
        el_store_close(idle[i]);
    el_store_close(fresh);
    el_store_close(old);
    end_child(pid);
}

TEST(store_near_the_fd_limit_waiting_connections_go_last_but_go)
{
    int port;
    pid_t pid = server_child(64, 8, &port);
    struct el_store *agent = NULL, *fresh = NULL;
    CHECK_OK(connect_port(port, &agent));
    CHECK_OK(el_store_on_close_set(agent, "agent/dead", "1", 1));
    /* Connections that each park a GET of a key that never comes (1.13
     * GET "/never"), as many as the server takes. */
    uint8_t get[] = {2, 6, 0, 0, 0, 0, 0, 0, 0, '/', 'n', 'e', 'v', 'e', 'r'};
    int fds[60];
    for (int i = 0; i < 60; i++) {
        fds[i] = el_tcp_connect("127.0.0.1", port, 2000);
        CHECK(fds[i] >= 0);
        raw_send(fds[i], get, sizeof get);
    }
    usleep(1100 * 1000); /* connections quiet for a second may be dropped */
    CHECK_OK(connect_port(port, &fresh));
    CHECK_OK(el_store_ping(fresh));
    CHECK_OK(el_store_ping(agent)); /* an agent is never dropped */
    CHECK_EQ(el_store_try_get(fresh, "agent/dead", NULL, NULL), EL_ENOTFOUND);
    for (int i = 0; i < 60; i++)
        close(fds[i]);
    el_store_close(fresh);
    el_store_close(agent);
    end_child(pid);
}
