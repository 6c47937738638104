/* test_rdzv_connect.c -- the c10d rendezvous against an endpoint where
 * nothing listens (issue #11.9): el_rdzv_next() gives up after read_timeout
 * (not the join timeout) with one line that names the endpoint, and says
 * that it is waiting while it retries. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "elrun/err.h"
#include "elrun/net.h"
#include "elrun/rdzv.h"
#include "test.h"

static char notes[4096];

static void note(void *arg, const char *msg)
{
    size_t n = strlen(notes);
    snprintf(notes + n, sizeof notes - n, "%s\n", msg);
}

/* A loopback port that refuses: bound, never listened on. */
static int refusing_port(int *fd)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(*fd >= 0);
    CHECK(bind(*fd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(getsockname(*fd, (struct sockaddr *)&a, &len) == 0);
    return ntohs(a.sin_port);
}

TEST(rdzv_connect_gives_up_after_read_timeout)
{
    int fd, port = refusing_port(&fd);
    struct el_rdzv_config cfg = {
        .backend = "c10d",
        .run_id = "j",
        .host = "127.0.0.1",
        .port = port,
        .min_nodes = 2,
        .max_nodes = 3,
        .is_host = -1,
        .join_timeout_ms = 20000,
        .io_timeout_ms = 1600,
        .on_event = note,
    };
    struct el_rdzv *r = NULL;
    char err[256] = "";
    struct el_rdzv_info info;
    CHECK_OK(el_rdzv_open(&r, &cfg, err, sizeof err));
    long long t0 = el_now_ms();
    int rc = el_rdzv_next(r, 1, -1, &info);
    long long took = el_now_ms() - t0;
    CHECK_EQ(rc, -ECONNREFUSED);
    CHECK(took >= 1500 && took < 5000); /* read_timeout, not join_timeout */
    CHECK(strstr(el_rdzv_errmsg(r), "cannot reach the rendezvous store at "
                                    "127.0.0.1:") != NULL);
    CHECK(strstr(notes, "waiting for the rendezvous store at 127.0.0.1:") !=
          NULL);
    CHECK(strstr(notes, "connection refused") != NULL ||
          strstr(notes, "Connection refused") != NULL);
    el_rdzv_close(r);
    close(fd);
}

TEST(rdzv_backend_names_listed_once)
{
    char names[128];
    CHECK(el_rdzv_backend_known("c10d"));
    CHECK(el_rdzv_backend_known("etcd-v2"));
    CHECK(!el_rdzv_backend_known("zk"));
    CHECK(!el_rdzv_backend_known(NULL));
    el_rdzv_backend_list(names, sizeof names);
    CHECK_STR(names, "static, c10d, etcd, etcd-v2");
}
