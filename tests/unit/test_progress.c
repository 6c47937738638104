/* test_progress.c -- el_worker_progress(): the line format the agent parses
 * ("step N samples M\n", "step N\n"), -ENOENT without an agent's pipe, and
 * -EAGAIN, not a stall, when the pipe is full; el_worker_progress_loss()
 * adds " loss F".
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elrun/worker.h"
#include "test.h"

TEST(progress_lines_and_errors)
{
    unsetenv("ELRUN_PROGRESS_FD");
    CHECK_EQ(el_worker_progress(1, 2), -ENOENT);
    int p[2];
    CHECK_EQ(pipe2(p, O_NONBLOCK), 0);
    char v[16];
    snprintf(v, sizeof v, "%d", p[1]);
    setenv("ELRUN_PROGRESS_FD", v, 1);
    CHECK_EQ(el_worker_progress(12, 384), 0);
    CHECK_EQ(el_worker_progress(13, -1), 0);
    char buf[128] = {0};
    CHECK(read(p[0], buf, sizeof buf - 1) > 0);
    CHECK_STR(buf, "step 12 samples 384\nstep 13\n");
    /* A full pipe drops the report at once. */
    int rc;
    long n = 0;
    while ((rc = el_worker_progress(n, n)) == 0)
        n++;
    CHECK_EQ(rc, -EAGAIN);
    CHECK(n > 100);
    setenv("ELRUN_PROGRESS_FD", "x", 1);
    CHECK_EQ(el_worker_progress(1, 1), -EBADF);
}

TEST(progress_loss)
{
    int p[2];
    CHECK_EQ(pipe2(p, O_NONBLOCK), 0);
    char v[16];
    snprintf(v, sizeof v, "%d", p[1]);
    setenv("ELRUN_PROGRESS_FD", v, 1);
    CHECK_EQ(el_worker_progress_loss(5, 160, 0.25), 0);
    CHECK_EQ(el_worker_progress_loss(6, -1, 1.5e-7), 0);
    CHECK_EQ(el_worker_progress_loss(7, 224, NAN), 0); /* NaN: none */
    char buf[256] = {0};
    CHECK(read(p[0], buf, sizeof buf - 1) > 0);
    CHECK_STR(buf, "step 5 samples 160 loss 0.25\nstep 6 loss 1.5e-07\n"
                   "step 7 samples 224\n");
}
