/* ranks.c -- the multi-rank harness of ranks.h: the store lives in a child
 * process that exits when the harness closes its pipe; every rank connects
 * to it, opens a communicator under a prefix of its own for each run, runs
 * its body and exits with the body's status.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elrun/coll.h"
#include "elrun/err.h"
#include "elrun/store.h"
#include "ranks.h"

/* Fork the store process; its port comes back through a pipe. */
static pid_t store_proc(int *port, int *keepalive)
{
    int up[2], alive[2];
    if (pipe(up) != 0 || pipe(alive) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(up[0]);
        close(alive[1]);
        struct el_store_server *srv = NULL;
        struct el_store_server_opts so = {.host = "127.0.0.1"};
        int p = el_store_server_start(&srv, &so) == 0
                    ? el_store_server_port(srv)
                    : -1;
        if (write(up[1], &p, sizeof p) != (ssize_t)sizeof p || p < 0)
            _exit(1);
        char c;
        while (read(alive[0], &c, 1) != 0 && errno == EINTR)
            ;
        el_store_server_close(srv);
        _exit(0);
    }
    close(up[1]);
    close(alive[0]);
    *port = -1;
    if (pid < 0 || read(up[0], port, sizeof *port) != (ssize_t)sizeof *port ||
        *port < 0) {
        close(up[0]);
        close(alive[1]);
        return -1;
    }
    close(up[0]);
    *keepalive = alive[1];
    return pid;
}

static int rank_proc(int port, int keepalive, int world, int rank, int nullcomm,
                     ranks_body body, void *arg)
{
    close(keepalive);
    unsetenv("MASTER_ADDR"); /* loopback only */
    if (nullcomm)
        return body(NULL, rank, world, arg);
    struct el_store *st;
    int rc = el_store_connect(&st, "127.0.0.1", port, 10000, 10000);
    if (rc != 0) {
        fprintf(stderr, "  rank %d: store: %s\n", rank, el_strerror(rc));
        return 99;
    }
    struct el_comm *c;
    struct el_comm_opts co = {.timeout_ms = 20000};
    rc = el_comm_open(&c, st, "/ranks", rank, world, &co);
    if (rc != 0) {
        fprintf(stderr, "  rank %d: comm: %s (%s)\n", rank, el_strerror(rc),
                el_comm_open_errmsg());
        return 99;
    }
    rc = body(c, rank, world, arg);
    el_comm_close(c);
    el_store_close(st);
    return rc;
}

int ranks_run(int world, int nullcomm, ranks_body body, void *arg, int *status)
{
    int port = -1, keepalive = -1;
    pid_t srv = nullcomm ? 0 : store_proc(&port, &keepalive);
    if (srv < 0 || world < 1 || world > 16 || (nullcomm && world != 1))
        return world;
    pid_t pids[16];
    fflush(NULL);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            int rc = rank_proc(port, keepalive, world, r, nullcomm, body, arg);
            fflush(NULL);
            _exit(rc);
        }
    }
    int bad = 0;
    for (int r = 0; r < world; r++) {
        int st = 0, code = 99;
        if (pids[r] > 0) {
            while (waitpid(pids[r], &st, 0) < 0 && errno == EINTR)
                ;
            code = WIFEXITED(st) ? WEXITSTATUS(st)
                                 : 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        }
        if (status)
            status[r] = code;
        bad += code != 0;
    }
    if (!nullcomm) {
        close(keepalive);
        waitpid(srv, NULL, 0);
    }
    return bad;
}
