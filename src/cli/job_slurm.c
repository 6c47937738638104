/* job_slurm.c -- the Slurm scheduler: its ops (submit stages the batch
 * script, cancel marks and waits) and its three calls to Slurm: sbatch
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
#include <unistd.h>

#include "cli/job_cli.h"
#include "elrun/err.h"
#include "elrun/log.h"

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

/* ---- the Slurm scheduler's ops ------------------------------------------- */

static int slurm_check_cfg(const char *cfg, char *err, size_t errlen)
{
    return el_job_check_cfg("slurm", cfg, err, errlen);
}

/* The batch script, staged under jobs/slurm/.submit-ID until sbatch gave
 * the job id that names the job's directory. */
static int slurm_submit(const struct el_job_spec *js, json_t *job, char *id,
                        size_t idcap, int dryrun)
{
    char err[1600];
    char *script;
    int rc;
    if ((rc = el_job_sbatch_script(js, &script, err, sizeof err)))
        return rc == EL_EUSAGE ? cjob_usage("submit", "%s", err) : 1;
    if (dryrun) {
        printf("%s", script);
        fprintf(stderr, "elrun submit: dry run: would run sbatch "
                        "--parsable with this script\n");
        free(script);
        return 0;
    }
    char stage[4300], sp[4400], jobid[64], dir[4300], p[4400];
    snprintf(stage, sizeof stage, "%s/jobs/slurm/.submit-%s", js->home, id);
    if ((rc = cjob_mkdirs(stage))) {
        free(script);
        return cjob_usage("submit", "cannot make %s: %s (set ELRUN_HOME)",
                          stage, strerror(-rc));
    }
    snprintf(sp, sizeof sp, "%s/sbatch.sh", stage);
    rc = cjob_write(stage, "sbatch.sh", script);
    free(script);
    if (rc)
        return cjob_usage("submit", "cannot write %s: %s", sp, strerror(-rc));
    if (cjob_slurm_submit(sp, jobid, sizeof jobid, err, sizeof err)) {
        unlink(sp);
        rmdir(stage);
        return cjob_usage("submit", "%s", err);
    }
    snprintf(dir, sizeof dir, "%s/jobs/slurm/%s", js->home, jobid);
    cjob_mkdirs(dir);
    snprintf(p, sizeof p, "%s/sbatch.sh", dir);
    rename(sp, p);
    rmdir(stage);
    json_object_set_new(job, "id", json_string(jobid));
    json_object_set_new(job, "slurm_job_id", json_string(jobid));
    json_object_set_new(job, "script", json_string(p));
    snprintf(p, sizeof p, "%s/job.json", dir);
    char *txt = json_dumps(job, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!txt || cjob_write(dir, "job.json", txt))
        el_log(EL_LOG_ERROR, "cannot write %s", p);
    free(txt);
    snprintf(id, idcap, "%s", jobid);
    return 0;
}

/* scancel, marked by a `cancelled` file (so that status says CANCELLED
 * after Slurm forgot the job), then wait until Slurm stopped its
 * processes. */
static int slurm_cancel(struct cjob *j)
{
    char err[700];
    const char *sid =
        json_string_value(json_object_get(j->spec, "slurm_job_id"));
    char t[64];
    if (!sid)
        sid = "";
    snprintf(t, sizeof t, "%.0f\n", cjob_now());
    cjob_write(j->dir, "cancelled", t);
    if (cjob_slurm_cancel(sid, err, sizeof err)) {
        char m[4400];
        snprintf(m, sizeof m, "%s/cancelled", j->dir);
        unlink(m); /* nothing was cancelled */
        return cjob_usage("cancel", "%s", err);
    }
    for (int i = 0; i < 600; i++) {
        int s;
        char raw[64];
        int r = cjob_slurm_state(sid, &s, raw, sizeof raw, err, sizeof err);
        if (r != 0 ||
            (el_job_state_final(s) && strncmp(raw, "COMPLETING", 10) != 0))
            break;
        usleep(50000);
    }
    return 0;
}

static int slurm_list(struct cjob_list *l, int asked)
{
    return cjob_dir_list("slurm", l);
}

const struct cjob_sched cjob_sched_slurm = {
    .name = "slurm",
    .local_program = 1,
    .check_cfg = slurm_check_cfg,
    .submit = slurm_submit,
    .open = cjob_dir_open,
    .status = cjob_dir_status,
    .logs = cjob_dir_logs,
    .cancel = slurm_cancel,
    .list = slurm_list,
    .ui_url = cjob_dir_url,
};
