/* main.c -- the elrun command: dispatches to a subcommand.
 *
 *   elrun store --listen HOST:PORT     standalone store server
 *   elrun chaos --rdzv-id=ID ...       fault injector (chaos_cmd.c)
 *   elrun [run] [flags] SCRIPT [ARGS]  torchrun-compatible launcher
 *   elrun k8s-controller [flags]       the ElasticJob controller
 *   elrun events|status --rdzv-...     a job's events, its status
 *                                      (events_cmd.c, status_cmd.c)
 *   elrun dashboard --rdzv-endpoint=H:P --rdzv-id=ID   a job's live page
 *
 * Anything that is not a known subcommand goes to the launcher, so
 * `elrun --standalone --nproc-per-node=2 train.py` works as torchrun does.
 */
#include <signal.h>
#include <string.h>
#include <sys/resource.h>

#include "cli/cli.h"

/* A store (standalone, or hosted by an agent) serves one connection per
 * agent and worker: use every descriptor the system allows (soft limit =
 * hard limit).  Children inherit it, as they would from torchrun. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    if (argc > 1 && strcmp(argv[1], "store") == 0)
        return cli_store_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "aws") == 0)
        return cli_aws_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "chaos") == 0)
        return cli_chaos_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "events") == 0)
        return cli_events_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "status") == 0 &&
        cli_status_of_rdzv(argc - 1, argv + 1))
        return cli_status_main(argc - 1, argv + 1);
    if (argc > 1 && cli_job_verb(argv[1]))
        return cli_job_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "k8s-controller") == 0)
        return cli_k8s_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "dashboard") == 0)
        return cli_dashboard_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "run") == 0)
        argc--, argv++;
    /* Inside a Slurm step the allocation gives the rendezvous flags that
     * were not given (PET_* defaults; docs/JOBS.md). */
    if (cli_job_slurm_env(argc, argv) || cli_job_aws_env(argc, argv))
        return 2;
    return cli_run_main(argc, argv);
}
