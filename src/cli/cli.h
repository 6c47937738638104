/* cli.h -- the elrun binary's subcommands (private to src/cli). */
#ifndef ELRUN_CLI_H
#define ELRUN_CLI_H

/* `elrun store ...`: a standalone store server.  Returns the exit code. */
int cli_store_main(int argc, char **argv);

/* `elrun [run] [torchrun flags] SCRIPT [ARGS...]`: the launcher (agent).
 * argv[0] is the program name; flags start at argv[1]. */
int cli_run_main(int argc, char **argv);

/* `elrun k8s-controller ...`: the ElasticJob controller (src/k8s). */
int cli_k8s_main(int argc, char **argv);

#endif
