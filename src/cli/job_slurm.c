/* job_slurm.c -- the Slurm scheduler's three calls to Slurm: sbatch
 * --parsable (submit), squeue (a job's state while Slurm knows it), scancel.
 * Each failure names the command and Slurm's own message, so a Slurm that is
 * not reachable is one clear line.  The script itself is made by
 * el_job_sbatch_script (src/job/sbatch.c); the job's lasting state is in its
 * directory (docs/JOBS.md).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/job_cli.h"

int cjob_slurm_submit(const char *script_path, char *jobid, size_t cap,
                      char *err, size_t errlen)
{
    char out[512], e[512];
    char *argv[] = {"sbatch", "--parsable", (char *)script_path, NULL};
    int rc = cjob_run(argv, out, sizeof out, e, sizeof e);
    if (rc != 0) {
        snprintf(err, errlen, "sbatch --parsable %s failed (exit %d): %s",
                 script_path, rc, *e ? e : "no message");
        return -1;
    }
    /* "1234" or "1234;cluster" */
    size_t n = strspn(out, "0123456789");
    if (n == 0 || n >= cap) {
        snprintf(err, errlen,
                 "sbatch --parsable printed '%.*s', not a job "
                 "id",
                 (int)strcspn(out, "\n"), out);
        return -1;
    }
    memcpy(jobid, out, n);
    jobid[n] = 0;
    return 0;
}

int cjob_slurm_state(const char *jobid, int *state, char *raw, size_t rawcap,
                     char *err, size_t errlen)
{
    char out[512], e[512];
    /* -t all: finished jobs too, while Slurm remembers them (MinJobAge) */
    char *argv[] = {"squeue",      "-h", "-t", "all", "-j",
                    (char *)jobid, "-o", "%T", NULL};
    int rc = cjob_run(argv, out, sizeof out, e, sizeof e);
    if (rc != 0 && strstr(e, "Invalid job id"))
        return 1; /* Slurm forgot it (MinJobAge) */
    if (rc != 0) {
        snprintf(err, errlen,
                 "squeue -h -t all -j %s -o %%T failed (exit "
                 "%d): %s",
                 jobid, rc, *e ? e : "no message");
        return -1;
    }
    out[strcspn(out, "\n")] = 0;
    if (!*out)
        return 1;
    snprintf(raw, rawcap, "%s", out);
    *state = el_job_state_from_slurm(out);
    return 0;
}

int cjob_slurm_cancel(const char *jobid, char *err, size_t errlen)
{
    char out[512], e[512];
    char *argv[] = {"scancel", (char *)jobid, NULL};
    int rc = cjob_run(argv, out, sizeof out, e, sizeof e);
    if (rc != 0) {
        snprintf(err, errlen, "scancel %s failed (exit %d): %s", jobid, rc,
                 *e ? e : "no message");
        return -1;
    }
    return 0;
}
