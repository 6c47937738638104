/* cli.h -- the elrun binary's subcommands (private to src/cli). */
#ifndef ELRUN_CLI_H
#define ELRUN_CLI_H

/* `elrun store ...`: a standalone store server.  Returns the exit code. */
int cli_store_main(int argc, char **argv);

/* `elrun [run] [torchrun flags] SCRIPT [ARGS...]`: the launcher (agent).
 * argv[0] is the program name; flags start at argv[1]. */
int cli_run_main(int argc, char **argv);

/* chaos_cmd.c: `elrun chaos`, faults into one job's processes here. */
int cli_chaos_main(int argc, char **argv);

/* The job verbs (src/cli/job_cmd.c): is word one of them (submit, status,
 * logs, cancel, list, describe, and the supervisor's __supervise)?  Then
 * cli_job_main(argc, argv) with argv[0] = the verb runs it. */
int cli_job_verb(const char *word);
int cli_job_main(int argc, char **argv);

/* Inside a Slurm job step, set the PET_* defaults the launcher takes from the
 * allocation (node count, node rank, first host, a port, the job id; see
 * el_job_slurm_defaults) where neither they nor --standalone were given, and
 * log one line saying what came from where.  Returns 0, or 2 after printing
 * a usage error (malformed SLURM_* variables).  ELRUN_NO_SLURM=1 turns it
 * off.  Call before el_opts_parse(), after el_log_init(). */
int cli_job_slurm_env(int argc, char **argv);
/* The same inside an AWS Batch node (AWS_BATCH_*; el_job_aws_batch_defaults);
 * ELRUN_NO_AWS_BATCH=1 turns it off.  job_aws.c. */
int cli_job_aws_env(int argc, char **argv);
/* `elrun aws template|up|scale|status|down` (argv[0] = "aws"). */
int cli_aws_main(int argc, char **argv);
/* `elrun k8s-controller ...`: the ElasticJob controller (src/k8s). */
int cli_k8s_main(int argc, char **argv);
/* `elrun dashboard ...`: a job's live dashboard from its store
 * (dashboard_cmd.c, docs/DASHBOARD.md). */
int cli_dashboard_main(int argc, char **argv);

/* events_cmd.c, status_cmd.c: `elrun events` and `elrun status` of a
 * rendezvous (docs/EVENTS.md).  cli_status_of_rdzv: do these arguments
 * (after the verb) name a rendezvous (--rdzv-endpoint / --rdzv-id) rather
 * than a job handle? */
int cli_events_main(int argc, char **argv);
int cli_status_of_rdzv(int argc, char **argv);
int cli_status_main(int argc, char **argv);

#endif
